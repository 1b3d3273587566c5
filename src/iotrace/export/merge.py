"""Merging a job's per-process traces into one Perfetto trace.

Three passes, the last two parallel per input file over 2 processes, none
holding more than one file's names and a few events in memory:

1. the first line of every file (`iotrace_process`): the process tree, labels,
   sort order, which flows to draw (labels.py);
2. a scan for `FH` lines (the file names, pooled from every file) and, with
   --max-events, a histogram of event times to find the time cut;
3. the events of each file, filtered, with file names restored and flows
   attached, written by a JSON or protobuf piece writer; the pieces are joined
   in input order behind a head that names and sorts the processes.
"""

from __future__ import annotations

import bisect
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

import orjson

from . import json_out, proto_out
from .filters import EventFilter, TimeHistogram
from .labels import Proc, TraceFile, build_processes, trace_file

TIMED = frozenset("XiIC")  # phases that carry a time (M is metadata)
FORK_NAMES = frozenset(("fork", "vfork"))


def reader():
    """The analyzer's trace reader (find_traces, iter_lines, TraceInputError)."""
    from iotrace_format import reader as r

    return r


@dataclass
class FileJob:
    """Everything a worker needs to export one input file."""

    file: TraceFile
    proc: Proc
    fmt: str  # "json", "json.gz" or "pftrace"
    part_path: str
    fnames: dict[str, str]
    filter: EventFilter
    cutoff_us: float | None
    flow_in: int  # flow id ending at this file's first slice (0: none)
    fork_flows: dict[int, int]  # child pid -> flow id, drawn from the fork event
    spawn_flows: list[tuple[float, int]]  # (child start µs, flow id), sorted


@dataclass
class FileResult:
    crc: int = 0
    size: int = 0
    events: int = 0  # written
    counters: int = 0  # of which counter (C) events
    filtered: int = 0  # left out by --cat/--name/--from/--to/--min-dur
    cut: int = 0  # left out by --max-events
    bad_lines: int = 0
    damaged: int = 0  # places where the reader met damage (truncation, corruption)
    threads: int = 0
    flows_out: list[int] = field(default_factory=list)
    flows_in: list[int] = field(default_factory=list)
    error: str = ""


@dataclass
class ExportResult:
    output: str
    processes: int
    threads: int
    events: int
    counters: int
    filtered: int
    cut: int
    cutoff_us: float | None
    bad_lines: int
    damaged: int
    flows: int
    errors: list[str]
    described: int = 0  # files with a process record (iotrace_process)

    def summary(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("output", "errors", "described")}


def output_format(path: str) -> str:
    for suffix, fmt in ((".json.gz", "json.gz"), (".json", "json"), (".pftrace", "pftrace"),
                        (".perfetto-trace", "pftrace"), (".pb", "pftrace")):
        if path.endswith(suffix):
            return fmt
    raise ValueError(f"{path}: unknown output format (use .json.gz, .json or .pftrace)")


def export(inputs: list[str], output: str, filt: EventFilter | None = None,
           jobs: int = 2, log=sys.stderr) -> ExportResult:
    """Export the traces found under `inputs` to `output` (format by suffix)."""
    r = reader()
    filt = filt or EventFilter()
    fmt = output_format(output)
    paths = r.find_traces(inputs)
    files = [trace_file(p, i, _first_event(r, p)) for i, p in enumerate(paths)]
    everyone = build_processes(files)
    starts = [p.start_us for p in everyone if p.start_us is not None]
    filt.at_job_start(min(starts) if starts else 0.0)
    procs = [p for p in everyone if _keeps_process(filt, p)]
    if not procs:
        raise ValueError("no process left after --pid/--rank")
    kept = [f for p in procs for f in p.files]

    with _pool(jobs) as pool:
        fnames: dict[str, str] = {}
        histogram = TimeHistogram()
        for names, hist in pool.map(_scan, [(f.path, filt if filt.max_events else None)
                                            for f in kept]):
            fnames.update(names)
            if hist:
                histogram.merge(hist)
        cutoff, _ = histogram.cutoff(filt.max_events) if filt.max_events else (None, 0)

        with tempfile.TemporaryDirectory(prefix="iotrace-export-",
                                         dir=os.path.dirname(os.path.abspath(output))) as tmp:
            jobs_ = _plan(procs, fmt, tmp, fnames, filt, cutoff)
            results = list(pool.map(export_file, jobs_))
            result = _summarise(output, procs, results, cutoff)
            notes = _notes(result, filt)
            _assemble(output, fmt, procs, jobs_, results, notes, result)
    for err in result.errors:
        print(f"iotrace export: {err}", file=log)
    return result


def _pool(jobs: int):
    if jobs <= 1:
        return _SerialPool()
    return ProcessPoolExecutor(jobs)


class _SerialPool:
    """ProcessPoolExecutor's map, in this process (for --jobs 1 and debugging)."""

    def map(self, fn, items):
        return map(fn, items)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _first_event(r, path: str) -> dict | None:
    try:
        for line in r.iter_lines(path):
            try:
                return orjson.loads(line)
            except orjson.JSONDecodeError:
                return None
    except r.TraceInputError:
        return None
    return None


def _keeps_process(filt: EventFilter, p: Proc) -> bool:
    """--pid keeps a process and its descendants; --rank a rank with its workers
    (which inherit the rank variables, or else are counted under their root)."""
    chain = [p]
    while chain[-1].parent is not None:
        chain.append(chain[-1].parent)
    rank = next((n.rank for n in chain if n.rank is not None), None)
    return filt.keeps_process(p.pid, rank, [n.pid for n in chain[1:]])


def _scan(arg: tuple[str, EventFilter | None]) -> tuple[dict[str, str], TimeHistogram | None]:
    """Pass 2: the file's FH names and, for --max-events, its time histogram."""
    path, filt = arg
    r = reader()
    names: dict[str, str] = {}
    hist = TimeHistogram() if filt else None
    try:
        if hist is None and hasattr(r, "iter_blocks"):
            # Only the FH lines matter: find them in whole decompressed blocks.
            for block in r.iter_blocks(path):
                for line in _lines_with(block, b'"FH"'):
                    _add_name(names, line)
            return names, None
        for line in r.iter_lines(path):
            if hist is None:
                _add_name(names, line)
                continue
            try:
                ev = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if ev.get("ph") == "M":
                _add_name(names, line)
            elif ev.get("ph") in TIMED and filt.keeps(ev):
                hist.add(ev.get("ts", 0.0))
    except r.TraceInputError:
        pass
    return names, hist


def _lines_with(block: bytes, needle: bytes):
    """The lines of `block` that contain `needle`, without their `,`/`]`."""
    pos = block.find(needle)
    while pos >= 0:
        start = block.rfind(b"\n", 0, pos) + 1
        end = block.find(b"\n", pos)
        if end < 0:
            end = len(block)
        yield block[start:end].strip().rstrip(b",]")
        pos = block.find(needle, end)


def _add_name(names: dict[str, str], line: bytes) -> None:
    """Record an FH line's path under its hash (other lines are ignored)."""
    if b'"FH"' not in line:
        return
    try:
        ev = orjson.loads(line)
    except orjson.JSONDecodeError:
        return
    if ev.get("ph") == "M" and ev.get("name") == "FH":
        args = ev.get("args") or {}
        names[str(args.get("value"))] = str(args.get("name"))


def _plan(procs: list[Proc], fmt: str, tmp: str, fnames: dict[str, str],
          filt: EventFilter, cutoff: float | None) -> list[FileJob]:
    jobs = []
    for p in procs:
        forks = {c.pid: c.flow_id for c in p.children if c.role == "fork"}
        spawns = sorted((c.start_us, c.flow_id) for c in p.children
                        if c.role != "fork" and c.start_us is not None)
        # Workers need the process's own fields, not the whole tree it links to.
        alone = replace(p, parent=None, children=[], files=[])
        for n, f in enumerate(p.files):
            jobs.append(FileJob(
                file=f, proc=alone, fmt=fmt, part_path=os.path.join(tmp, f"{f.index}.part"),
                fnames=fnames, filter=filt, cutoff_us=cutoff,
                flow_in=p.flow_id if n == 0 else 0,
                fork_flows=forks, spawn_flows=spawns))
    return jobs


def export_file(job: FileJob) -> FileResult:
    """Pass 3 for one file: write its events to job.part_path."""
    res = FileResult()
    r = reader()
    proc = job.proc
    fast = _fast_proto(job.file.path) if job.fmt == "pftrace" else None
    if fast is not None:
        fast.export_file(job, res, r, _restore_names, _thread_label)
        return res
    if job.fmt == "pftrace":
        out = proto_out.ProtoPart(job.part_path, job.file.index + 1, proc, job.file.index)
    else:
        out = json_out.JsonPart(job.part_path, job.fmt == "json.gz", proc.vpid - proc.pid)
    flows = _Flows(job, out.event)
    # Most files start and end no arrow: their slices go straight out.
    write_slice = flows.slice if flows.active else out.event
    pid = proc.pid
    fnames = dict(job.fnames)
    keep = job.filter.keeps if job.filter.per_event else None
    cutoff = job.cutoff_us
    thread_names: dict[int, str] = {}
    tids: set[int] = set()
    loads = orjson.loads
    damage: list = []
    try:
        for line in r.iter_lines(job.file.path, damage):
            try:
                ev = loads(line)
                ph = ev["ph"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                res.bad_lines += 1
                continue
            if ph in TIMED:
                if keep is not None and not keep(ev):
                    res.filtered += 1
                    continue
                if cutoff is not None and ev.get("ts", 0.0) >= cutoff:
                    res.cut += 1
                    continue
                args = ev.get("args")
                if args and ("fhash" in args or "fhash2" in args):
                    _restore_names(args, fnames)
                ev["pid"] = pid  # an exec'd image may not repeat it
                tids.add(ev.setdefault("tid", pid))
                res.events += 1
                if ph == "X":
                    write_slice(ev)
                else:
                    res.counters += ph == "C"
                    out.event(ev)
            elif ph == "M":
                name = ev.get("name")
                args = ev.get("args") or {}
                if name == "thread_name" and "tid" in ev:
                    thread_names[ev["tid"]] = str(args.get("name", ""))
                elif name == "FH":
                    fnames[str(args.get("value"))] = str(args.get("name"))
                # process_name, iotrace_process, iotrace_end: replaced by the labels
    except r.TraceInputError as exc:
        res.error = f"{job.file.path}: {exc}"
    flows.finish()
    for tid in sorted(tids | thread_names.keys()):
        out.thread(proc.pid, tid, _thread_label(proc, tid, thread_names.get(tid)))
    res.damaged = len(damage)
    res.threads = len(tids | thread_names.keys())
    res.flows_out, res.flows_in = flows.drawn_out, flows.drawn_in
    res.crc, res.size = out.close()
    return res


FAST_MIN_BYTES = 512 << 10  # smaller files: ProtoPart (importing numba costs ~1 s)


def _fast_proto(path: str):
    """fast_proto (block-at-a-time .pftrace) for a file big enough to pay for
    importing numba, or None (then ProtoPart) where numba or the analyzer's
    scanner is missing. IOTRACE_EXPORT_SLOW=1 / IOTRACE_EXPORT_FAST=1 force
    either way (tests)."""
    if os.environ.get("IOTRACE_EXPORT_SLOW"):
        return None
    if not os.environ.get("IOTRACE_EXPORT_FAST"):
        try:
            if os.path.getsize(path) < FAST_MIN_BYTES:
                return None
        except OSError:
            return None
    try:
        from . import fast_proto
    except ImportError:
        return None
    return fast_proto


def _restore_names(args: dict, fnames: dict[str, str]) -> None:
    """args.fhash/fhash2 -> args.fname/fname2 (kept as is if the FH line is missing)."""
    h = args.pop("fhash", None)
    if h is not None:
        args["fname"] = fnames.get(h, h)
    h = args.pop("fhash2", None)
    if h is not None:
        args["fname2"] = fnames.get(h, h)


def _thread_label(proc: Proc, tid: int, name: str | None) -> str:
    return f"{proc.label} · {name or ('main' if tid == proc.pid else 'thread')}"


class _Flows:
    """Attaches flow ids to slices as they stream by.

    The start of an arrow is known when its slice is read (the fork event) or
    is the last slice before a spawned child's start; its end is the file's
    earliest slice. Those candidates are held back until a better one comes
    or the file ends, so the flow ids go on the right slices: at most one held
    slice per arrow, whatever the file's size.
    """

    def __init__(self, job: FileJob, emit):
        self.emit = emit
        self.flow_in = job.flow_in
        self.forks = job.fork_flows
        self.starts = [s for s, _ in job.spawn_flows]
        self.spawn_ids = [i for _, i in job.spawn_flows]
        self.best: list[dict | None] = [None] * len(self.starts)
        self.first: dict | None = None
        self.drawn_out: list[int] = []
        self.drawn_in: list[int] = []
        self.active = bool(self.flow_in or self.forks or self.starts)

    def slice(self, ev: dict) -> None:
        if self.forks and ev.get("cat") == "process" and ev.get("name") in FORK_NAMES:
            flow = self.forks.get((ev.get("args") or {}).get("ret"))
            if flow:
                ev.setdefault("_out", []).append(flow)
                self.drawn_out.append(flow)
        held = False
        ts = ev.get("ts", 0.0)
        if self.starts:
            held = self._spawn_candidate(ev, ts)
        if self.flow_in:
            first = self.first
            if first is None or ts < first["ts"]:
                self.first = ev
                held = True
                if first is not None:
                    self._release(first)
        if not held:
            self.emit(ev)

    def _spawn_candidate(self, ev: dict, ts: float) -> bool:
        """The best start for child j is the latest slice at or before its start;
        those bests never decrease with j, so stop at the first one not improved."""
        held = False
        for j in range(bisect.bisect_left(self.starts, ts), len(self.starts)):
            old = self.best[j]
            if old is not None and old["ts"] >= ts:
                break
            self.best[j] = ev
            held = True
            if old is not None:
                self._release(old)
        return held

    def _release(self, ev: dict) -> None:
        """Write a slice that is no longer a candidate for any arrow."""
        if ev is not self.first and not any(b is ev for b in self.best):
            self.emit(ev)

    def finish(self) -> None:
        """End of file: attach the arrows to the winners and write them."""
        held = []
        for ev, flow in zip(self.best, self.spawn_ids):
            if ev is not None:
                ev.setdefault("_out", []).append(flow)
                self.drawn_out.append(flow)
                held.append(ev)
        if self.first is not None:
            self.first["_in"] = self.flow_in
            self.drawn_in.append(self.flow_in)
            held.append(self.first)
        written = set()
        for ev in held:
            if id(ev) not in written:
                written.add(id(ev))
                self.emit(ev)


def _summarise(output: str, procs: list[Proc], results: list[FileResult],
               cutoff: float | None) -> ExportResult:
    outs = {f for r in results for f in r.flows_out}
    ins = {f for r in results for f in r.flows_in}
    return ExportResult(
        output=output, processes=len(procs), threads=sum(r.threads for r in results),
        events=sum(r.events for r in results), counters=sum(r.counters for r in results),
        filtered=sum(r.filtered for r in results),
        cut=sum(r.cut for r in results), cutoff_us=cutoff,
        bad_lines=sum(r.bad_lines for r in results),
        damaged=sum(r.damaged for r in results),
        flows=len(outs & ins),
        errors=[r.error for r in results if r.error],
        described=sum(1 for p in procs for f in p.files if f.info))


def _notes(result: ExportResult, filt: EventFilter) -> list[dict]:
    """What was left out, as an instant a person sees on the timeline."""
    if not result.cut:
        return []
    text = (f"iotrace export: --max-events {filt.max_events} kept the first "
            f"{result.events} events; {result.cut} later events left out")
    return [{"ph": "i", "s": "g", "name": text, "ts": result.cutoff_us, "pid": 0, "tid": 0,
             "cat": "iotrace"}]


def _assemble(output: str, fmt: str, procs: list[Proc], jobs: list[FileJob],
              results: list[FileResult], notes: list[dict], result: ExportResult) -> None:
    if fmt == "pftrace":
        with open(output, "wb") as out:
            out.write(proto_out.head(procs))
            for job in jobs:
                with open(job.part_path, "rb") as f:
                    while chunk := f.read(1 << 20):
                        out.write(chunk)
            out.write(proto_out.note_packets(notes, len(jobs) + 1))
        return
    doc = json_out.JsonJob(output, fmt == "json.gz")
    doc.write_head(json_out.head(procs))
    for job, res in zip(jobs, results):
        doc.add_part(job.part_path, res.crc, res.size)
    doc.finish(json_out.tail(notes, result.summary()))
