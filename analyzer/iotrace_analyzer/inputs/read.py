"""One task: read its sources, summarize them into the task's partial and write their events
to Parquet (a part of the task's own), then bring back only the partial and what each source
told besides its figures (FileResult: processes, threads, damage, children).

A source is read as a stream of column batches (inputs/__init__.py). A big one is summarized
batch by batch as it streams: the working set stays a batch's, whatever the size of one
process's trace (billions of events), and a process's figures are exact because all its events
pass through one task. Small ones (short processes: an MD workflow runs thousands) are
gathered and summarized together, as one segment of several processes: the cost per source is
a few calls, not a pipeline. Parquet is written by a thread of the task's own while the next
batch decodes when cores would idle otherwise (one source much bigger than the rest), else by
the task between batches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from iotrace_format import PROCESS_INFO_KEYS
from iotrace_format.clock import CLOCK_EVENT, JobClock
from iotrace_format.reader import Damage, clock_records

from .. import _kernels, keys
from ..analyses import summary
from ..engine import Helper, tune_process
from ..model import file_class
from ..outputs import parquet
from ..outputs.parquet import ParquetOut
from .traces import TraceFile

SEGMENT_ROWS = 1 << 20  # small sources: events summarized together, at most
SMALL_FILE_EVENTS = 1 << 15  # a source estimated below this joins a segment (about half a block)
# Process calls that start a child process (category `process`): their `ret`, when > 0, is the
# child's pid (docs/trace-format.md). A child's program is the parent's for fork and clone,
# else the one the event's `fhash` names.
START_CALLS = ("fork", "vfork", "clone", "posix_spawn", "posix_spawnp")
CLONE_THREAD = 0x10000  # a clone that made a thread, not a process (when its flags are recorded)


@dataclass
class FileResult:
    """What one trace file told besides its figures: its processes, threads, damage."""

    path: str
    processes: list = field(default_factory=list)
    threads: list = field(default_factory=list)
    damage: list = field(default_factory=list)
    bad_lines: int = 0
    bad_examples: list = field(default_factory=list)
    missing_metadata: bool = False
    unresolved_hashes: int = 0
    events: int = 0
    pids: list = field(default_factory=list)  # every pid the file's events carry
    # processes this file's process started (START_CALLS): host, parent_pid, child_pid,
    # started_by, ts_ns (the host's monotonic clock), shift (to the job clock), program
    children: list = field(default_factory=list)


@dataclass
class TaskResult:
    partial: summary.Partial
    files: list  # FileResult per file of the task
    parquet_parts: list = field(default_factory=list)


# --------------------------------------------------------------------------- one file


class FileReader:
    """One file's metadata as its blocks go by: the process record, thread and file names,
    hosts, what was read and what was damaged."""

    def __init__(self, path: str, key: int):
        self.path, self.key = path, key
        self.result = FileResult(path)
        self.proc: dict = {}
        self.thread_names: dict = {}
        self.names = _kernels.Names()  # fhash -> path
        self.ipc: set = set()  # the hashes of pipes and sockets (file_class.is_ipc of their names)
        self.hosts: dict = {}  # DFTracer hhash -> host name
        self.meta_events = 0
        self.unnamed: set = set()  # hashes used before a name was known for them (some get one later)
        self.pids: set = set()
        self.starts: list = []  # (pid, tid, ts_ns, name, ret, fhash, flags) of START_CALLS
        self.clocks: list = []  # the args of its iotrace_clock events
        self.known_clocks: list | None = None  # all of them, found before its events were read
        self.span = (None, None)  # its events' first and last start (ns), when it has clocks

    def meta(self, lines: list[bytes]) -> None:
        # the file names (a million for a job that reads a million files) without a JSON parser
        lines, ipc, taken = self.names.fh(lines, list(file_class.IPC_PREFIXES))
        self.meta_events += taken
        self.ipc.update(ipc)
        for ln in lines:
            try:
                m = orjson.loads(ln)
            except orjson.JSONDecodeError:
                self.result.bad_lines += 1
                continue
            self.meta_events += 1
            name, args = m.get("name"), m.get("args") if isinstance(m.get("args"), dict) else {}
            if name == "FH" and "value" in args:
                h, path = str(args["value"]), str(args.get("name"))
                self.names.set(h, path)
                if file_class.is_ipc(path):
                    self.ipc.add(h)
            elif name == "HH" and "value" in args:  # DFTracer host hash
                self.hosts[str(args["value"])] = str(args.get("name"))
            elif name == "iotrace_process":
                self.proc.update(args)
                self.proc.setdefault("pid", m.get("pid"))
            elif name == "iotrace_process_info":  # the role learnt after the file opened
                self.proc.update({k: v for k, v in args.items() if k in PROCESS_INFO_KEYS})
            elif name == CLOCK_EVENT:
                self.clocks.append(args)
            elif name == "process_name":
                self.proc["name"] = args.get("name")
                self.proc.setdefault("pid", m.get("pid"))
            elif name == "thread_name":
                self.thread_names[(m.get("pid"), m.get("tid"))] = str(args.get("name"))
            elif name == "iotrace_end":
                self.proc["end_reason"] = args.get("reason")
                if isinstance(args.get("mono_ns"), int):  # iotrace 0.3: the end's time
                    self.proc["end_mono_ns"] = args["mono_ns"]
                self.proc["events_written"] = args.get("events")
                self.proc["end_lost"] = int(args.get("lost") or 0) + int(args.get("dropped") or 0)
                # later in version 7: the CPU it had (an MPI rank: in MPI calls), its host's lack of
                # CPUs; later still, the time its main thread waited for a CPU
                for k in ("cpu_ns", "mpi_cpu_ns", "host_cpu_wait_us", "cpu_wait_ns"):
                    if isinstance(args.get(k), int) and not isinstance(args.get(k), bool):
                        self.proc[k] = args[k]
            elif name == "iotrace_lost":  # events the tracer could not write, and why
                self.proc["events_lost"] = self.proc.get("events_lost", 0) + int(args.get("events") or 0)
                reasons = self.proc.setdefault("lost_reasons", [])
                if args.get("reason") not in reasons:
                    reasons.append(args.get("reason"))

    @property
    def own(self) -> bool:
        """Written by iotrace (its process record seen), not by a peer such as DFTracer."""
        return "version" in self.proc

    @property
    def host(self) -> str:
        h = self.proc.get("hostname")
        if h:
            return str(h)
        return next(iter(self.hosts.values())) if len(self.hosts) == 1 else ""

    @property
    def clock(self) -> JobClock:
        """The process's clock (iotrace_format.clock): its wall-clock shift and measured offsets."""
        return JobClock.of(self.proc, self.clocks if self.known_clocks is None else self.known_clocks)

    @property
    def shift(self) -> int:
        """The shift to the job clock at the middle of the process's events (its one shift
        for the summary's per-process times; a block's events take the shift at their own
        middle: shift_of)."""
        clock = self.clock
        lo, hi = self.span
        if clock.constant or lo is None or hi is None:
            start = self.proc.get("mono_ns")
            return clock.at(start if isinstance(start, int) else 0)
        return clock.at((lo + hi) // 2)

    def shift_of(self, ev: pa.Table | pa.RecordBatch) -> int:
        """The shift to the job clock of these events: the clock's at their middle."""
        clock = self.clock
        if clock.constant:
            return clock.points[0][1]
        lo, hi = _ts_range(ev)
        return clock.at((lo + hi) // 2) if lo is not None else self.shift

    def find_clocks(self) -> None:
        """Read the clock's measurements now, before the events: a big file's blocks are
        summarized as they go by, each with its shift."""
        try:
            self.known_clocks = clock_records(self.path)
        except OSError:
            self.known_clocks = None

    def batch(self, b) -> pa.RecordBatch:
        names = getattr(b, "names", None)  # the FH lines a reader kept apart (TraceFile)
        if names is not None:
            ipc, taken = self.names.put_numbers(*names, list(file_class.IPC_PREFIXES))
            self.meta_events += taken
            self.ipc.update(ipc)
        self.meta(b.meta)
        r = self.result
        r.bad_lines += b.bad_lines
        r.bad_examples.extend(b.bad_examples[: 3 - len(r.bad_examples)])
        return pa.record_batch(b)

    def seen(self, ev: pa.Table | pa.RecordBatch) -> None:
        """Keep what finish() needs of a segment's events (the hashes without a name so far,
        distinct pids, the calls that started child processes)."""
        self.result.events += ev.num_rows
        if ev.num_rows:
            if self.clocks or self.known_clocks:  # the span places the offset's line (shift)
                lo, hi = _ts_range(ev)
                if lo is not None:
                    a, b = self.span
                    self.span = (lo if a is None else min(a, lo), hi if b is None else max(b, hi))
            self._child_starts(ev)
            d = ev.column("fhash")
            d = d.combine_chunks() if isinstance(d, pa.ChunkedArray) else d
            # the decoder's dictionary: a value only when a row has it
            hashes = d.dictionary if pa.types.is_dictionary(d.type) else pc.unique(d)
            if len(hashes) < 64:  # a short process's few: no arrays to make
                self.unnamed.update(h for h in hashes.to_pylist() if h is not None and h not in self.names)
            else:
                self.unnamed.update(self.names.missing(*keys.buffers(hashes)))
            pid = ev.column("pid")
            pid = pid.combine_chunks() if isinstance(pid, pa.ChunkedArray) else pid
            if pid.null_count == 0 and pid.type == pa.int64():
                p = summary.np_ints(pid)
                if p[0] == p[-1] and (p == p[0]).all():  # one process: no hashing
                    self.pids.add(int(p[0]))
                    return
            self.pids |= set(pc.unique(pid).to_pylist())

    def _child_starts(self, ev: pa.Table | pa.RecordBatch) -> None:
        """Keep the few events that started a child process (category `process`, a START_CALLS
        name, ret > 0). The rows are found on the `name` column's dictionary codes (a block
        without such a name costs a look at its dictionary), then only those rows are read."""
        names = ev.schema.names
        if not all(c in names for c in ("cat", "name", "ret")):
            return
        name = _array(ev.column("name"))
        if pa.types.is_dictionary(name.type):
            want = [i for i, v in enumerate(name.dictionary.to_pylist()) if v in START_CALLS]
            if not want:
                return
            codes, _vals = summary._codes32(name)
            rows = np.flatnonzero(codes == want[0] if len(want) == 1 else np.isin(codes, want))
        elif pa.types.is_string(name.type) or pa.types.is_large_string(name.type):
            hit = pc.fill_null(pc.is_in(name, value_set=pa.array(START_CALLS, name.type)), False)
            rows = np.flatnonzero(hit.to_numpy(zero_copy_only=False))
        else:
            return
        if not len(rows):
            return
        sel = ev.take(pa.array(rows))
        cols = [sel.column(c).to_pylist() if c in names else [None] * len(rows)
                for c in ("cat", "pid", "tid", "ts_ns", "name", "ret", "fhash", "flags")]
        self.starts += [r[1:] for r in zip(*cols)
                        if r[0] == "process" and isinstance(r[5], int) and r[5] > 0]

    def finish(self) -> FileResult:
        r = self.result
        proc = self.proc
        is_iotrace = "version" in proc or "mono_ns" in proc
        r.missing_metadata = not is_iotrace and not self.hosts and r.events > 0
        declared = proc.get("events_written")
        seen = r.events + self.meta_events + r.bad_lines - 1  # lines before iotrace_end
        if isinstance(declared, int) and seen < declared:
            r.damage.append(Damage(self.path, -1, "lost-events",
                                   f"iotrace_end counts {declared} events, {seen} lines were read"))
        lost = max(proc.get("events_lost", 0), proc.get("end_lost", 0))
        if lost:
            why = "; ".join(str(x) for x in proc.get("lost_reasons", [])) or "not written"
            r.damage.append(Damage(self.path, -1, "lost-events",
                                   f"the tracer could not write {lost} event lines: {why}"))
        r.unresolved_hashes = sum(1 for h in self.unnamed if h not in self.names)
        pids = sorted(p for p in self.pids if p is not None)
        if proc.get("pid") is not None or pids:
            if proc.get("pid") is None:
                proc["pid"] = pids[0]
            proc["host"] = self.host
            proc["trace_file"] = self.path
            r.processes.append(proc)
        r.threads = [dict(host=self.host, pid=p, tid=t, name=n) for (p, t), n in self.thread_names.items()]
        r.pids = pids
        exe = proc.get("exe")
        for pid, _tid, ts, name, ret, fhash, flags in self.starts:
            if name == "clone" and ((flags or 0) & CLONE_THREAD or (pid, ret) in self.thread_names):
                continue  # a thread of the parent
            program = self.names.get(fhash) if fhash else exe if name in ("fork", "clone") else None
            r.children.append(dict(host=self.host, parent_pid=pid if pid is not None else proc.get("pid"),
                                   child_pid=int(ret), started_by=name, ts_ns=ts,
                                   shift=self.clock.at(ts) if ts is not None else self.shift,
                                   program=program))
        return r


def _ts_range(ev: pa.Table | pa.RecordBatch) -> tuple[int | None, int | None]:
    """The first and last start (ns) among the events (None: none has one)."""
    if "ts_ns" not in ev.schema.names:
        return None, None
    mm = pc.min_max(ev.column("ts_ns"))
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    return (lo, hi) if isinstance(lo, int) and isinstance(hi, int) else (None, None)


def _array(col) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _table(batches: list[pa.RecordBatch]) -> pa.Table:
    """One table of batches whose dictionaries differ (each block has its own)."""
    t = pa.Table.from_batches(batches)
    return t.unify_dictionaries().combine_chunks() if len(batches) > 1 else t


def process_files(sources: list, index: int, out_dir: str | None,
                  compute_cats: tuple[str, ...], helper: bool = True) -> TaskResult:
    """Read, summarize and write one or more whole files. A big file is summarized block by
    block as it streams (the working set stays a block's); small files are gathered and
    summarized together, as one table of several processes. `helper`: a core would idle beside
    this task (the long pole): a second thread writes its Parquet and decodes ahead
    (engine.Helper)."""
    tune_process()
    if len(sources) == 1 and hasattr(sources[0], "task"):  # an input of its own kind (a Darshan log)
        return sources[0].task(index, out_dir, compute_cats)
    aide = Helper() if helper else None
    P = summary.Partial()
    out = ParquetOut(out_dir, index, aide)
    readers = []
    group: list = []  # (reader, table) of small files
    group_rows = 0

    def flush_group():
        nonlocal group, group_rows
        if not group:
            return
        procs, proc_ids = [], []
        for k, (r, t) in enumerate(group):
            procs.append((r.key, r.host, r.proc.get("pid"), r.shift_of(t)))
            proc_ids.append(np.full(t.num_rows, k, np.int64))
        tabs = [t for _r, t in group]
        ev = pa.concat_tables(tabs).unify_dictionaries().combine_chunks() if len(tabs) > 1 else tabs[0]
        names: dict = {}
        ipc: set = set()
        for r, _t in group:
            names.update(parquet.names_dict(r.names))
            ipc |= r.ipc
        if all(p[2] is not None for p in procs) and len({(p[0], p[2]) for p in procs}) == len(procs):
            P.add(ev, procs, np.concatenate(proc_ids), compute_cats, names,
                  own=all(r.own for r, _t in group), ipc=ipc)
        else:  # a file without a process record (DFTracer): each as its own pids
            for r, t in group:
                P.add(t, [(r.key, r.host, None, r.shift_of(t))], None, compute_cats, r.names, own=r.own,
                      ipc=r.ipc)
        hosts = {r.host for r, _t in group}
        if len(hosts) == 1:  # one host: the group's table is one Parquet row group
            out.put(ev, hosts.pop(), names)
        else:
            for r, t in group:
                out.put(t, r.host, r.names)
        group, group_rows = [], 0

    def read_all(clocks_when_met: bool) -> None:
        nonlocal group_rows
        for k, source in enumerate(sources):
            fr = FileReader(source.path, key=hash((source.path, index, k)))
            readers.append(fr)
            streamed = source.estimated_events() >= SMALL_FILE_EVENTS
            # A streamed file's blocks are shifted onto the job clock as they go by, so its
            # clock's measurements (iotrace_clock: MPI and torch.distributed processes) are read
            # first, in a pass over the file of their own. Most files have none: that pass is
            # made only once one is met (clocks_when_met), before the first event or by
            # starting the file again (_ClocksLate).
            if streamed and isinstance(source, TraceFile):
                if clocks_when_met:
                    fr.known_clocks = []
                else:
                    fr.find_clocks()
            small: list = []
            blocks = source.batches(fr.result.damage, aide) if isinstance(source, TraceFile) else \
                source.batches(fr.result.damage)
            for b in blocks:
                rb = fr.batch(b)
                if fr.clocks and fr.known_clocks == [] and clocks_when_met:
                    if fr.result.events:
                        raise _ClocksLate
                    fr.find_clocks()
                if rb.num_rows == 0:
                    continue
                if streamed:
                    fr.seen(rb)
                    P.add(rb, [(fr.key, fr.host, None, fr.shift_of(rb))], None, compute_cats, fr.names,
                          own=fr.own, ipc=fr.ipc)
                    out.put(rb, fr.host, fr.names)
                else:
                    small.append(rb)
            if small:
                ev = _table(small)
                fr.seen(ev)
                group.append((fr, ev))
                group_rows += ev.num_rows
                if group_rows >= SEGMENT_ROWS:
                    flush_group()
        flush_group()

    try:
        try:  # a file alone in its task starts again when its clock is met late
            read_all(clocks_when_met=len(sources) == 1)
        except _ClocksLate:
            for path in out.close():
                os.remove(path)
            P, out = summary.Partial(), ParquetOut(out_dir, index, aide)
            readers.clear()
            read_all(clocks_when_met=False)
    finally:
        try:
            parts = out.close()
        finally:
            if aide is not None:
                aide.close()
    files = []
    for fr in readers:
        r = fr.finish()
        P.meta_events += fr.meta_events
        for proc in r.processes:  # start, end (when recorded) and role of the process image
            P.info[(fr.key, proc["pid"])] = dict({k: proc[k] for k in summary.PROC_INFO if k in proc},
                                                 shift=fr.shift)
        P.fh.append(fr.names)
        files.append(r)
    return TaskResult(P.finalize(), files, parts)


class _ClocksLate(Exception):
    """A streamed file's clock measurement met after some of its events were summarized."""


def process_task(args: tuple) -> TaskResult:
    """process_files of a task's arguments, as the engine hands them over."""
    return process_files(*args)
