"""Merging a job's per-process traces into one Perfetto trace.

Passes over the input files, the heavy one parallel over worker processes, none holding more
than one batch of a file's events (and its file names) in memory:

1. the first line of every file (`iotrace_process`): the process tree, labels, sort order,
   which flows to draw (labels.py);
2. with --max-events only: the times of the events the filters keep, as a histogram, to find
   the time cut; with --max-slices: the slices per name and duration threshold (budget.py), to
   choose what to merge (nothing when the job fits);
3. the events of each file, read as column batches (iotrace_format.reader.iter_batches):
   filtered (filters.py), flows found (flows.py), written by the compiled writers
   (`_export`: the .pftrace packets or the JSON lines, with file names restored) into part
   files, a task of consecutive files per part; the parts are joined in order behind a head
   that names and sorts the processes.

A file names its files in its own FH lines before using them (the writers read them: a job that
reads a million files has a million). A hash that another file names but this one does not (a
lost frame, say) is restored by reading the other files' FH lines for it and writing that task
again: rare, and cheaper than sending every file's names back.
"""

from __future__ import annotations

import os
import queue
import sys
import tempfile
import threading
from dataclasses import dataclass, field, replace

import numpy as np
import orjson
from iotrace_format import PROCESS_INFO_KEYS
from iotrace_format.clock import JobClock

from .. import _export, engine
from . import budget as bud
from . import json_out
from .filters import TIMED, EventFilter, TimeHistogram, phases
from .flows import Flows
from .labels import Proc, TraceFile, build_processes, trace_file

# compressed_packets: 0 is the writer's own fast deflate (csrc/export/deflate.h), about twice
# zlib level 1's speed for 5% more bytes; 1..9 are zlib's levels
PFTRACE_LEVEL = 0
JSON_LEVEL = 0  # .json.gz: the same fast deflate (about four times zlib level 3's speed)
BATCH_BYTES = 256 << 10  # packet bytes per compressed_packets
NOTES_SEQ = 0x7FFFFFFF  # the packet sequence of the notes: apart from the files' (8 per file)
TASK_FILES = 64  # files per task at most (a part file each): small files share a task


def reader():
    """The format layer's reader (find_traces, iter_batches, iter_lines, TraceInputError)."""
    from iotrace_format import reader as r

    return r


@dataclass
class FileJob:
    """Everything a worker needs to export one input file."""

    file: TraceFile
    proc: Proc
    fmt: str  # "json", "json.gz" or "pftrace"
    filter: EventFilter
    cutoff_ns: int | None
    flow_in: int  # flow id ending at this file's first slice (0: none)
    fork_flows: dict[int, int]  # child pid -> flow id, drawn from the fork event
    spawn_flows: list[tuple[int, int]]  # (child start ns, flow id), sorted
    plan: bud.Plan | None = None  # the budget, when it merges


@dataclass
class Task:
    """Consecutive files written into one part file."""

    jobs: list[FileJob]
    part_path: str
    fnames: dict[str, str] = field(default_factory=dict)  # names from other files
    # the job's only task, run in the export's own process with the other core free: its file
    # read ahead and its packets deflated by threads beside the writing (in forked workers,
    # which keep the cores busy, they only add memory)
    threads: bool = False
    # .pftrace: what the part starts with (the first task's: the descriptors of the job's
    # processes), so that its part becomes the output as it is, not copied behind them
    head: bytes = b""


@dataclass
class FileResult:
    events: int = 0  # written
    counters: int = 0  # of which counter (C) events
    filtered: int = 0  # left out by --cat/--name/--from/--to/--min-dur
    cut: int = 0  # left out by --max-events
    bad_lines: int = 0
    damaged: int = 0  # places where the reader met damage (truncation, corruption)
    threads: int = 0
    flows_out: list[int] = field(default_factory=list)
    flows_in: list[int] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # hashes written without a path
    error: str = ""
    merged: bud.MergeCounts | None = None  # with the budget in force
    io_bins: dict = field(default_factory=dict)  # the file's I/O counter bins (the job's sum)


@dataclass
class TaskResult:
    files: list[FileResult]
    crc: int = 0  # of the part's text (JSON gzip'd)
    size: int = 0


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
    # --max-slices: the plan and what was merged (None: no budget); in the JSON's metadata when
    # it merged (a job that fits is written as without a budget)
    budget: dict | None = None

    def summary(self) -> dict:
        return {k: v for k, v in self.__dict__.items()
                if k not in ("output", "errors", "described") and (k != "budget" or v and v["merging"])}


class NothingRead(ValueError):
    """No event and no process record could be read from the input: no output is written."""


def output_format(path: str) -> str:
    for suffix, fmt in ((".json.gz", "json.gz"), (".json", "json"), (".pftrace", "pftrace"),
                        (".perfetto-trace", "pftrace"), (".pb", "pftrace")):
        if path.endswith(suffix):
            return fmt
    raise ValueError(f"{path}: unknown output format (use .json.gz, .json or .pftrace)")


def export(inputs: list[str], output: str, filt: EventFilter | None = None,
           jobs: int = 2, log=sys.stderr, max_slices: int | None = None) -> ExportResult:
    """Export the traces found under `inputs` to `output` (format by suffix). The output is
    written under a temporary name beside it and renamed when complete: a failure leaves no
    partial file (and an earlier output stays as it was). NothingRead when the input gave
    nothing to show. max_slices: the budget (budget.py; None or 0: none, every slice)."""
    r = reader()
    filt = filt or EventFilter()
    fmt = output_format(output)
    from ..inputs import darshan_log

    logs = darshan_log.logs_in(inputs)
    if logs:  # Darshan logs: their DXT segments written as traces first, then exported as those
        from ..inputs import darshan_traces

        with tempfile.TemporaryDirectory(prefix="iotrace-darshan-") as conv:
            for p in logs:
                darshan_traces.write_traces(p, conv, log)
            return export([conv], output, filt, jobs, log, max_slices)
    for d in r.settle_live(inputs)[1]:  # dead processes' traces finished; the others said
        print(f"iotrace export: {d.path}: {d.detail}", file=log)
    paths = r.find_traces(inputs)
    with engine.engine("processes", jobs) as pool:
        # Two files or more: the workers read their first lines (their tasks fork them anyway;
        # the first blocks of a million-file job's 9 traces are 0.3 s of decoding)
        if len(paths) > 1 and pool.workers > 1:
            firsts = pool.map(_first_event, paths, chunksize=max(1, len(paths) // (8 * jobs)))
        else:
            firsts = map(_first_event, paths)
        files = [trace_file(p, i, first) for i, (p, first) in enumerate(zip(paths, firsts))]
        everyone = build_processes(files)
        on_job_clock(everyone, pool)
        starts = [p.start_ns for p in everyone if p.start_ns is not None]
        filt.at_job_start(min(starts) if starts else 0)
        procs = [p for p in everyone if _keeps_process(filt, p)]
        if not procs:
            raise ValueError("no process left after --pid/--rank")
        cutoff = None
        if filt.max_events:
            histogram = TimeHistogram()
            kept = [(f.path, filt, f.clock) for p in procs for f in p.files]
            for hist in pool.map(_histogram, kept):
                histogram.merge(hist)
            cutoff, _ = histogram.cutoff(filt.max_events)
        plan, too_many = None, False
        if max_slices:
            stats = bud.SliceStats()
            kept = [(f.path, filt, f.clock, cutoff, p.pid) for p in procs for f in p.files]
            ahead = len(kept) == 1 and jobs > 1  # the only file: decoded on the other core
            # The first file past MAX_KEYS says so to the others (a file they look for between
            # blocks, beside the output, where the export may write): no budget then, and their
            # passes stop (a million files' 9 traces: 0.55 s of reading, where the first had its
            # answer at 0.15)
            with tempfile.TemporaryDirectory(prefix="iotrace-budget-",
                                             dir=os.path.dirname(os.path.abspath(output))) as flags:
                stop = os.path.join(flags, "too-many-keys")
                for s in pool.map(_slice_stats, [k + (ahead, stop) for k in kept]):
                    stats.merge(s)
            if stats.too_many_keys:
                too_many = True
            else:
                plan = bud.plan(stats, max_slices)

        with tempfile.TemporaryDirectory(prefix="iotrace-export-",
                                         dir=os.path.dirname(os.path.abspath(output))) as tmp:
            tasks = _tasks(_plan(procs, fmt, filt, cutoff, plan if plan and plan.merging else None),
                           tmp)
            if len(tasks) == 1 and jobs > 1:
                tasks[0].threads = True
            if fmt == "pftrace" and tasks:
                job_head = [(JOB_VPID, JOB_LABEL)] if plan and plan.merging else []
                tasks[0].head = _export.process_descriptors([(p.vpid, p.label) for p in procs] + job_head)
            results = list(pool.map(export_task, tasks))
            again = _with_job_names(tasks, results, pool)
            for i, res in zip(again, pool.map(export_task, [tasks[i] for i in again])):
                results[i] = res
            files_done = [f for res in results for f in res.files]
            result = _summarise(output, procs, files_done, cutoff)
            job = None
            if too_many:
                result.budget = {"max_slices": max_slices, "merging": False, "met": False,
                                 "skipped": f"a trace has more than {bud.MAX_KEYS} (call, file) pairs: "
                                            "runs of one call on one file would not shorten it"}
            if plan is not None:
                result.budget = plan.describe()
                if plan.merging:
                    job = _job_part(tmp, fmt, procs, files_done, plan, result)
            if result.events == 0 and not (result.filtered or result.cut or result.described):
                for err in result.errors:
                    print(f"iotrace export: {err}", file=log)
                raise NothingRead(f"no event could be read from {len(paths)} file(s) "
                                  f"({result.bad_lines} unreadable line(s), {result.damaged} damaged "
                                  "place(s)); nothing written")
            notes = _notes(result, filt)
            partial = os.path.join(tmp, "output")
            _assemble(partial, fmt, procs, tasks, results, notes, result, job)
            os.replace(partial, output)
    for err in result.errors:
        print(f"iotrace export: {err}", file=log)
    return result


# An iotrace_process_info line (the role, parent and worker id a process learns after its
# trace opened: a DataLoader worker, a multiprocessing child) is written at the worker's start,
# so it is looked for among the first lines only; the labels are settled before the events.
_INFO_LINES = 4096
def _first_event(path: str) -> dict | None:
    """The file's first line, parsed (normally `iotrace_process`), with the updates of
    the iotrace_process_info lines near the start applied to its args."""
    r = reader()
    lines: list = []
    try:
        if path.endswith(".iotc.zst"):
            # A compact file's first blocks, decoded (not rendered): their metadata lines, the
            # first of them the file's first line. The first block holds the header lines
            # alone (written when the process starts); the info lines come with the events.
            # The file-name lines apart (a block of a million-file job holds tens of
            # thousands), and only the info lines parsed.
            for n, batch in enumerate(r.iter_batches(path, names_apart=True)):
                meta = list(batch.meta)
                if not lines and meta:
                    lines.append(meta.pop(0))
                lines += [m for m in meta if b"iotrace_process_info" in m]
                if n >= 2:
                    break
        else:
            for n, line in enumerate(r.iter_lines(path)):
                if n and b"iotrace_process_info" not in line:
                    if n >= _INFO_LINES:
                        break
                    continue
                lines.append(line)
        if not lines:
            return None
        first = orjson.loads(lines[0])
        if first.get("name") == "iotrace_process":
            first.setdefault("args", {})["started_as"] = first["args"].get("role")
        for line in lines[1:]:
            ev = orjson.loads(line)
            if ev.get("name") == "iotrace_process_info" and first.get("name") == "iotrace_process":
                first.setdefault("args", {}).update(
                    {k: v for k, v in (ev.get("args") or {}).items() if k in PROCESS_INFO_KEYS})
        return first
    except (r.TraceInputError, orjson.JSONDecodeError):
        return None


def on_job_clock(procs: list[Proc], pool) -> None:
    """A job on several hosts: every file's times shifted onto one time line (its clock:
    iotrace_format.clock, the wall-clock shift and the offsets measured at MPI_Init and
    MPI_Finalize), rebased on the first process's (rank 0's) so that its times stay as written.
    On one host the monotonic clock the traces are written on is the job's already: nothing
    moves (an offset measured there would only add its error). A file without its clock pair
    (no process record) stays as written."""
    if len({p.host for p in procs}) < 2:
        return
    files = [f for p in procs for f in p.files if "wall_ns" in f.info and "mono_ns" in f.info]
    if not files:
        return
    for f, records in zip(files, pool.map(_clock_records, [f.path for f in files])):
        f.clock = JobClock.of(f.info, records)
    ref = files[0].clock.at(files[0].info["mono_ns"])
    for f in files:
        f.clock = JobClock(tuple((t, s - ref) for t, s in f.clock.points), f.clock.measured)


def _clock_records(path: str) -> list[dict]:
    r = reader()
    try:
        return r.clock_records(path)
    except (OSError, r.TraceInputError):
        return []


def _job_clock(cols, clock: JobClock | None) -> None:
    """A batch's times moved onto the export's time line (on_job_clock)."""
    if clock is not None:
        cols.move_times(np.array([t for t, _s in clock.points], np.int64),
                        np.array([s for _t, s in clock.points], np.int64))


def _keeps_process(filt: EventFilter, p: Proc) -> bool:
    """--pid keeps a process and its descendants; --rank a rank with its workers
    (which inherit the rank variables, or else are counted under their root)."""
    chain = [p]
    while chain[-1].parent is not None:
        chain.append(chain[-1].parent)
    rank = next((n.rank for n in chain if n.rank is not None), None)
    return filt.keeps_process(p.pid, rank, [n.pid for n in chain[1:]])


def _columns(path: str, clock: JobClock | None):
    """The file's non-empty batches as columns on the job's clock, up to any damage (the
    write pass reports it). The file-name lines kept apart, unread: these passes key files by
    hash (a million of them parsed as metadata lines: 0.9 s more decoding)."""
    r = reader()
    try:
        for batch in r.iter_batches(path, names_apart=True):
            if batch.rows:
                cols = _export.Columns(batch)
                _job_clock(cols, clock)
                yield cols
    except r.TraceInputError:
        return


def _histogram(arg: tuple[str, EventFilter, JobClock | None]) -> TimeHistogram:
    """Pass 2 (--max-events): the times of the file's events that the filters keep."""
    path, filt, clock = arg
    hist = TimeHistogram()
    for cols in _columns(path, clock):
        keep = phases(cols, TIMED)
        mask = filt.mask(cols)
        if mask is not None:
            keep &= mask
        ts = cols.ints("ts_ns")
        hist.add_ns(ts[keep] if ts is not None else np.zeros(int(keep.sum()), np.int64))
    return hist


def _slice_stats(arg: tuple) -> bud.SliceStats:
    """Pass 2 (--max-slices): the slices the filters keep, per name and duration threshold."""
    path, filt, clock, cutoff, pid, ahead, stop = arg
    if os.path.exists(stop):  # another file has too many keys: no budget
        return bud.SliceStats(too_many_keys=True)
    stats = bud.StatsPass(pid)
    res = FileResult()
    job = FileJob(file=None, proc=None, fmt="", filter=filt, cutoff_ns=cutoff, flow_in=0,
                  fork_flows={}, spawn_flows=[])
    columns = _columns(path, clock)
    try:
        for cols in _read_ahead(columns) if ahead else columns:
            stats.add(cols, _rows(cols, job, res))
            if os.path.exists(stop):
                raise bud.TooManyKeys
    except bud.TooManyKeys:
        try:
            open(stop, "x").close()
        except OSError:  # there already, or the folder gone with the export
            pass
        return bud.SliceStats(too_many_keys=True)
    return stats.result()


def _plan(procs: list[Proc], fmt: str, filt: EventFilter, cutoff: int | None,
          plan: bud.Plan | None = None) -> list[FileJob]:
    jobs = []
    for p in procs:
        forks = {c.pid: c.flow_id for c in p.children if c.forked}
        spawns = sorted((c.start_ns, c.flow_id) for c in p.children
                        if not c.forked and c.start_ns is not None)
        # Workers need the process's own fields, not the whole tree it links to.
        alone = replace(p, parent=None, children=[], files=[])
        for n, f in enumerate(p.files):
            jobs.append(FileJob(
                file=f, proc=alone, fmt=fmt, filter=filt, cutoff_ns=cutoff,
                flow_in=p.flow_id if n == 0 else 0,
                fork_flows=forks, spawn_flows=spawns, plan=plan))
    return jobs


def _tasks(jobs: list[FileJob], tmp: str) -> list[Task]:
    """Consecutive files grouped into tasks of about the same stored size (a big file is a
    task of its own; many small ones share one, and its part file)."""
    sizes = [_size(j.file.path) for j in jobs]
    groups = engine.group(jobs, sizes, max(1, sum(sizes) // 64), most=TASK_FILES)
    return [Task(g, os.path.join(tmp, f"{i}.part")) for i, g in enumerate(groups)]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _with_job_names(tasks: list[Task], results: list[TaskResult], pool) -> list[int]:
    """The tasks that wrote a hash which only another file names: given those names (read
    again from every file's FH lines, the later file's winning), to be written again."""
    unresolved = {h for res in results for f in res.files for h in f.unresolved}
    if not unresolved:
        return []
    names = {}
    paths = [job.file.path for task in tasks for job in task.jobs]
    for found in pool.map(_names_in, [(p, unresolved) for p in paths]):
        names.update(found)
    again = []
    for i, (task, res) in enumerate(zip(tasks, results)):
        known = {h: names[h] for f in res.files for h in f.unresolved if h in names}
        if known:
            task.fnames = known
            again.append(i)
    return again


def _names_in(arg: tuple[str, set]) -> dict[str, str]:
    """The names a file's FH lines give the hashes of a set."""
    from .. import _kernels

    path, hashes = arg
    r = reader()
    names = _kernels.Names()
    try:
        for batch in r.iter_batches(path):
            rest, _ipc, _n = names.fh(batch.meta, [])
            for line in rest:
                if b'"FH"' not in line:
                    continue
                try:
                    ev = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
                if ev.get("name") == "FH" and "value" in args:
                    names.set(str(args["value"]), str(args.get("name")))
    except r.TraceInputError:
        pass
    return {h: p for h in hashes if (p := names.get(h)) is not None}


def export_task(task: Task) -> TaskResult:
    """Pass 3 for a task: its files' events, one after the other, into its part file."""
    out = TaskResult([])
    with open(task.part_path, "wb") as f:
        if task.head:
            f.write(task.head)
            f.flush()  # before the writers' own writes to its fd
        for job in task.jobs:
            res, crc, size = export_file(job, f.fileno(), task.fnames, task.threads)
            out.files.append(res)
            out.crc = _export.crc32_combine(out.crc, crc, size)
            out.size += size
    return out


def export_file(job: FileJob, fd: int, fnames: dict[str, str],
                threads: bool = False) -> tuple[FileResult, int, int]:
    """One file's events, written to fd: (what was written, CRC-32 and length of its JSON text).
    threads: read ahead, and deflate the .pftrace packets, on threads of their own."""
    res = FileResult()
    r = reader()
    proc = job.proc
    if job.fmt == "pftrace":
        # a sequence per thread: the file's first 8 numbered from its own base
        writer = _export.ProtoWriter(fd, seq=job.file.index * 8 + 1, vpid=proc.vpid, pid=proc.pid,
                                     sort_index=proc.sort_index, file_index=job.file.index,
                                     level=PFTRACE_LEVEL, batch_bytes=BATCH_BYTES,
                                     deflate_thread=threads)
    else:
        writer = _export.JsonWriter(fd, proc.vpid, proc.pid,
                                    JSON_LEVEL if job.fmt == "json.gz" else -1)
    if fnames:
        writer.add_names(fnames)
    flows = Flows(job.flow_in, job.fork_flows, job.spawn_flows)
    meta = _Meta(res, writer)
    damage: list = []
    budget = _Budget(job, writer, res) if job.plan is not None else None
    meta.budget = budget
    try:
        batches = r.iter_batches(job.file.path, damage, names_apart=True)
        for batch in _read_ahead(batches) if threads else batches:
            if getattr(batch, "names", None) is not None:  # the FH lines as the tracer writes them
                writer.add_names_apart(*batch.names)
            meta.read(batch.meta)
            res.bad_lines += batch.bad_lines
            if not batch.rows:
                continue
            if budget is not None:  # its rows may be kept past the batch: a pyarrow batch
                import pyarrow as pa

                batch = pa.record_batch(batch)
            cols = _export.Columns(batch)
            _job_clock(cols, job.file.clock)
            rows = _rows(cols, job, res)
            if budget is not None:
                rows = budget.batch(cols, batch, rows)
            no_flows = np.zeros(0, np.int64), np.zeros(0, np.uint64)
            rows, flow_rows, flow_ids = (flows.batch(cols, rows, writer) if flows.active
                                         else (rows,) + no_flows)
            writer.encode(cols, rows, flow_rows, flow_ids)
            if budget is not None:
                budget.write_merged()
    except r.TraceInputError as exc:
        res.error = f"{job.file.path}: {exc}"
    flows.finish(writer)
    labels = {}
    if budget is not None:
        labels = budget.finish(lambda tid: _thread_label(proc, tid, meta.thread_names.get(tid)))
    tids = set(writer.tids()) | meta.thread_names.keys()
    for tid in sorted(tids):
        writer.thread(tid, labels.get(tid) or _thread_label(proc, tid, meta.thread_names.get(tid)))
    writer.close()
    res.damaged = len(damage)
    res.threads = len(tids)
    res.flows_out, res.flows_in = flows.drawn_out, flows.drawn_in
    res.unresolved = writer.unresolved()
    crc, size = (writer.crc, writer.size) if job.fmt != "pftrace" else (0, 0)
    return res, crc, size


READ_AHEAD = 1  # batches decoded ahead of the writer (besides the one being decoded)


def _read_ahead(batches):
    """The items of an iterator, taken from it by a thread of their own READ_AHEAD ahead:
    the decoding (which releases the GIL) runs beside the writing or the budget's count, on
    the other core. Its exception comes where it was raised, in order; leaving early closes
    the iterator."""
    q: queue.Queue = queue.Queue(READ_AHEAD)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def run():
        try:
            for item in batches:
                if not put((True, item)):
                    break
            else:
                put((False, None))
        except BaseException as exc:  # handed over: raised where the items are taken
            put((False, exc))
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=run, name="iotrace-export-read", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = q.get()
            if ok:
                yield item
            elif item is None:
                return
            else:
                raise item
    finally:
        stop.set()
        thread.join()


def _rows(cols, job: FileJob, res: FileResult) -> np.ndarray:
    """The rows of a batch to write, in order: its timed events (X, i, I, C) that the filters
    keep, before the --max-events cut."""
    keep = phases(cols, TIMED)
    mask = job.filter.mask(cols)
    if mask is not None:
        res.filtered += int(np.count_nonzero(keep & ~mask))
        keep &= mask
    if job.cutoff_ns is not None:
        ts = cols.ints("ts_ns")
        if ts is not None:
            late = keep & (ts >= job.cutoff_ns)
            res.cut += int(np.count_nonzero(late))
            keep &= ~late
    rows = np.flatnonzero(keep)
    res.events += len(rows)
    res.counters += int(np.count_nonzero(phases(cols, ("C",))[rows]))
    return rows


class _Budget:
    """A file's part of --max-slices when it merges: its short calls merged (budget.Merger) and
    its I/O counters (budget.IoCounters), written beside its events."""

    def __init__(self, job: FileJob, writer, res: FileResult):
        from iotrace_format import calls_of

        from ..analyses.summary import READ_CALLS, WRITE_CALLS

        self.job, self.writer, self.res = job, writer, res
        self.merger = bud.Merger(job.plan, job.proc.pid, READ_CALLS | WRITE_CALLS, job.file.index,
                                 typed_args=job.fmt == "pftrace")
        self.counters = bud.IoCounters(job.plan.bin_ns)
        self.calls = (READ_CALLS, WRITE_CALLS, calls_of("open"), calls_of("close"))
        self.last_ns: int | None = None  # the latest event time seen (where a loss is drawn)
        self.lost_told: list[tuple[int | None, int]] = []  # iotrace_lost: (time, events)
        self.lost_end: tuple[int | None, int] | None = None  # iotrace_end: (time, total)

    def batch(self, cols, batch, rows: np.ndarray) -> np.ndarray:
        self.counters.add(cols, rows, *self.calls)
        ts = cols.ints("ts_ns")
        if len(rows) and ts is not None:
            # losses told in this batch's metadata, before any event: at its first event
            first = int(ts[rows].min())
            self.lost_told = [(first if t is None else t, n) for t, n in self.lost_told]
            self.last_ns = int(ts[rows].max())
        out = self.merger.batch(cols, batch, rows)
        self.res.events -= len(rows) - len(out)
        return out

    def lost(self, events: int, mono_ns=None, total: bool = False) -> None:
        """Events the tracer lost: an iotrace_lost record (no time of its own: drawn at the
        latest event before it, or the first of its batch), or iotrace_end's totals (at the
        file's end, its mono_ns on the job clock)."""
        if total:
            t = self.last_ns
            if isinstance(mono_ns, int) and not isinstance(mono_ns, bool):
                clock = self.job.file.clock
                t = mono_ns + (clock.at(mono_ns) if clock is not None else 0)
            self.lost_end = (t, events)
        elif events:
            self.lost_told.append((self.last_ns, events))

    def write_merged(self) -> None:
        empty = np.zeros(0, np.int64), np.zeros(0, np.uint64)
        for b in self.merger.take_batches(self.job.proc.pid):
            cols = _export.Columns(b)
            self.writer.encode(cols, np.arange(cols.rows, dtype=np.int64), *empty)
            self.res.events += cols.rows

    def finish(self, thread_label) -> dict[int, str]:
        """The open runs and the counters written; the merged tracks' labels."""
        self.merger.finish()
        self.write_merged()
        told = sorted((self.last_ns if t is None else t, n) for t, n in self.lost_told)
        for t, n in told:
            if t is not None:
                self.counters.add_lost(t, n)
        if self.lost_end is not None and self.lost_end[0] is not None:
            self.counters.add_lost(self.lost_end[0], self.lost_end[1], total=True)
        counters = self.counters.batch(self.job.proc.pid, self.job.proc.pid)
        if counters is not None:
            cols = _export.Columns(counters)
            self.writer.encode(cols, np.arange(cols.rows, dtype=np.int64),
                               np.zeros(0, np.int64), np.zeros(0, np.uint64))
            self.res.events += cols.rows
            self.res.counters += cols.rows
        self.res.merged = self.merger.counts
        self.res.io_bins = self.counters.bins
        return self.merger.track_labels(thread_label)


class _Meta:
    """A file's metadata lines as its batches go by: file names (FH: to the writer) and thread
    names (the last one a thread gave itself); process_name, iotrace_process and iotrace_end
    are replaced by the labels. With the budget: the events the tracer lost (iotrace_lost,
    iotrace_end's lost and dropped) to its counter."""

    def __init__(self, res: FileResult, writer):
        self.res, self.writer = res, writer
        self.thread_names: dict[int, str] = {}
        self.budget: _Budget | None = None

    def read(self, lines: list[bytes]) -> None:
        """Take in a batch's metadata lines."""
        lines, _n = self.writer.add_fh(lines)  # the FH lines as the tracer writes them
        new = {}
        for line in lines:
            fh = b'"FH"' in line
            if not fh and b'"thread_name"' not in line and not (
                    self.budget is not None and (b'"iotrace_lost"' in line or b'"iotrace_end"' in line)):
                continue
            try:
                ev = orjson.loads(line)
            except orjson.JSONDecodeError:
                self.res.bad_lines += 1
                continue
            args = ev.get("args")
            args = args if isinstance(args, dict) else {}
            name = ev.get("name")
            if name == "FH" and "value" in args:
                new[str(args["value"])] = str(args.get("name"))
            elif name == "thread_name" and isinstance(ev.get("tid"), int):
                self.thread_names[ev["tid"]] = str(args.get("name", ""))
            elif name == "iotrace_lost" and self.budget is not None:
                self.budget.lost(_int(args.get("events")))
            elif name == "iotrace_end" and self.budget is not None:  # the file's totals
                self.budget.lost(_int(args.get("lost")) + _int(args.get("dropped")),
                                 args.get("mono_ns"), total=True)
        if new:
            self.writer.add_names(new)


def _int(v) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _thread_label(proc: Proc, tid: int, name: str | None) -> str:
    return f"{proc.label} · {name or ('main' if tid == proc.pid else 'thread')}"


def _summarise(output: str, procs: list[Proc], results: list[FileResult],
               cutoff: int | None) -> ExportResult:
    outs = {f for r in results for f in r.flows_out}
    ins = {f for r in results for f in r.flows_in}
    return ExportResult(
        output=output, processes=len(procs), threads=sum(r.threads for r in results),
        events=sum(r.events for r in results), counters=sum(r.counters for r in results),
        filtered=sum(r.filtered for r in results),
        cut=sum(r.cut for r in results), cutoff_us=None if cutoff is None else cutoff / 1000,
        bad_lines=sum(r.bad_lines for r in results),
        damaged=sum(r.damaged for r in results),
        flows=len(outs & ins),
        errors=[r.error for r in results if r.error],
        described=sum(1 for p in procs for f in p.files if f.info))


JOB_VPID = 0x7FFFFFF0  # the job's own process (--max-slices: its counters, the budget)
JOB_LABEL = "job (iotrace export)"


def budget_text(b: dict) -> str:
    """What --max-slices did, in a sentence (the command's output and the trace's note)."""
    if not b["merging"]:
        return f"--max-slices {b['max_slices']}: {b['slices']} slices fit, nothing merged"
    t = b["threshold_ns"]
    shorter = "any length" if t is None else f"shorter than {t / 1000:g} us"
    text = (f"--max-slices {b['max_slices']}: {b['slices']} slices -> {b['written']}: "
            f"{b['merged_calls']} calls ({shorter}) merged into {b['merged_slices']} slices")
    if not b["met"]:
        text += " (the budget cannot be met: runs of one name and file are as long as they get)"
    return text


def _notes(result: ExportResult, filt: EventFilter) -> list[dict]:
    """What was left out or merged, as instants a person sees on the timeline."""
    notes = []
    if result.budget and result.budget["merging"]:
        notes.append({"ph": "i", "s": "g", "name": "iotrace export: " + budget_text(result.budget),
                      "ts": result.budget["first_ns"] / 1000, "pid": 0, "tid": 0, "cat": "iotrace"})
    if not result.cut:
        return notes
    text = (f"iotrace export: --max-events {filt.max_events} kept the first "
            f"{result.events} events; {result.cut} later events left out")
    return notes + [{"ph": "i", "s": "g", "name": text, "ts": result.cutoff_us, "pid": 0, "tid": 0,
                     "cat": "iotrace"}]


@dataclass
class JobPart:
    """The job's own process: its label, and its part (counters and the budget's instant)."""

    vpid: int
    label: str
    sort_index: int
    path: str
    crc: int = 0
    size: int = 0


def _job_part(tmp: str, fmt: str, procs: list[Proc], files: list[FileResult], plan: bud.Plan,
              result: ExportResult) -> JobPart:
    """--max-slices merged: the job's I/O counters (the sum of its processes') and the budget as
    an instant with args, on a process of their own."""
    import pyarrow as pa

    merged = [f.merged for f in files if f.merged is not None]
    b = result.budget
    b["merged_calls"] = sum(m.calls for m in merged)
    b["merged_slices"] = sum(m.slices for m in merged)
    b["written"] = b["slices"] - b["merged_calls"] + b["merged_slices"]
    b["first_ns"] = plan.first_ns
    part = JobPart(JOB_VPID, JOB_LABEL, len(procs), os.path.join(tmp, "job.part"))
    index = 1 + max((f.index for p in procs for f in p.files), default=0)
    counters = bud.IoCounters(plan.bin_ns)
    for f in files:
        counters.merge(bud.IoCounters(plan.bin_ns, f.io_bins))
    args = {k: v for k, v in b.items() if k != "first_ns"}
    note = pa.record_batch({
        "ph": pa.DictionaryArray.from_arrays(pa.array(np.zeros(1, np.int32)), pa.array(["i"])),
        "name": pa.DictionaryArray.from_arrays(pa.array(np.zeros(1, np.int32)),
                                               pa.array(["iotrace export: --max-slices"])),
        "cat": pa.DictionaryArray.from_arrays(pa.array(np.zeros(1, np.int32)), pa.array(["iotrace"])),
        "pid": pa.array([JOB_VPID], pa.int64()), "tid": pa.array([JOB_VPID], pa.int64()),
        "ts_ns": pa.array([plan.first_ns], pa.int64()),
        "args": pa.array([orjson.dumps(args).decode()], pa.string())})
    batches = [note]
    if (c := counters.batch(JOB_VPID, JOB_VPID)) is not None:
        batches.append(c)
    with open(part.path, "wb") as f:
        if fmt == "pftrace":
            writer = _export.ProtoWriter(f.fileno(), seq=index * 8 + 1, vpid=JOB_VPID, pid=JOB_VPID,
                                         sort_index=part.sort_index, file_index=index,
                                         level=PFTRACE_LEVEL, batch_bytes=BATCH_BYTES)
        else:
            writer = _export.JsonWriter(f.fileno(), JOB_VPID, JOB_VPID,
                                        JSON_LEVEL if fmt == "json.gz" else -1)
        for batch in batches:
            cols = _export.Columns(batch)
            writer.encode(cols, np.arange(cols.rows, dtype=np.int64), np.zeros(0, np.int64),
                          np.zeros(0, np.uint64))
            result.events += cols.rows
            result.counters += cols.rows if batch is not note else 0
        writer.thread(JOB_VPID, "job · iotrace export")
        writer.close()
        if fmt != "pftrace":
            part.crc, part.size = writer.crc, writer.size
    return part


def _assemble(output: str, fmt: str, procs: list[Proc], tasks: list[Task],
              results: list[TaskResult], notes: list[dict], result: ExportResult,
              job: JobPart | None = None) -> None:
    if fmt == "pftrace":
        # The first part starts with the processes' descriptors (export_task): it becomes the
        # output as it is, and only the others are copied behind it (0.1 s per 100 MB).
        os.replace(tasks[0].part_path, output)
        with open(output, "ab", buffering=0) as out:  # unbuffered: parts are copied by fd
            for task in tasks[1:]:
                _append(out, task.part_path)
            if job is not None:
                _append(out, job.path)
            out.write(_export.note_packets([(n["name"], round(n["ts"] * 1000)) for n in notes],
                                           NOTES_SEQ))
        return
    doc = json_out.JsonJob(output, fmt == "json.gz")
    doc.write_head(json_out.head(procs + ([job] if job is not None else [])))
    for task, res in zip(tasks, results):
        doc.add_part(task.part_path, res.crc, res.size)
    if job is not None:
        doc.add_part(job.path, job.crc, job.size)
    doc.finish(json_out.tail(notes, result.summary()))


def _append(out, path: str) -> None:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        done = 0
        try:  # in the kernel, without a copy through this process
            while done < size:
                n = os.copy_file_range(f.fileno(), out.fileno(), size - done)
                if n <= 0:
                    break
                done += n
        except (AttributeError, OSError):
            pass
        if done < size:
            f.seek(done)
            while chunk := f.read(1 << 20):
                out.write(chunk)
