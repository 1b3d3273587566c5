"""Orchestration: group the trace files into tasks, run the tasks in parallel (threads
in-process for small inputs, Dask for big ones or an existing cluster), and bring back only
small partials.

A task reads whole files, each as a stream of blocks decoded straight to columns
(iotrace_format.reader.iter_batches): blocks are gathered into segments of about a million
events, each segment is summarized into the task's partial and written to Parquet, and then
dropped. Memory therefore stays bounded whatever the size of one file (one process of a
training job can hold billions of events), and a process's figures are exact because all its
events pass through one task. Small files (short processes: an MD workflow runs thousands)
are read together by one task, as one segment: the cost per file is a few calls, not a
pipeline. Parquet is written by a thread of the task's own while the next segment decodes
when cores would idle otherwise (one file much bigger than the rest), else by the task between
blocks.
"""

from __future__ import annotations

import ctypes
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from iotrace_format import PROCESS_INFO_KEYS
from iotrace_format.reader import Damage, find_traces, form_by_name, iter_batches, settle_live

from . import _kernels, engine, file_class, insights, keys, parquet, summary, units
from .model import Job

SEGMENT_ROWS = 1 << 20  # small files: events summarized together, at most
PARQUET_ROWS = 1 << 19  # events per Parquet row group
GROUP_EVENTS = 1 << 20  # small files are grouped into tasks of at most about this many events
SMALL_FILE_EVENTS = 1 << 15  # a file estimated below this joins a group (about half a block)
# Inputs estimated below this many events are analyzed on this machine without Dask (threads
# and forked processes): a LocalCluster costs ~2 s to start and more CPU per event (worker
# imports, transfers), for no gain on one machine. Dask is for --scheduler, or --engine dask.
LOCAL_EVENTS = 10_000_000_000
# Process calls that start a child process (category `process`): their `ret`, when > 0, is the
# child's pid (docs/trace-format.md). A child's program is the parent's for fork and clone,
# else the one the event's `fhash` names.
START_CALLS = ("fork", "vfork", "clone", "posix_spawn", "posix_spawnp")
CLONE_THREAD = 0x10000  # a clone that made a thread, not a process (when its flags are recorded)
# A file of pid C on the parent's host is the child's when it started no earlier than this
# before the call that made C (the clocks are the host's one CLOCK_MONOTONIC; the margin is
# for the TSC mapping): a file that started before is an earlier process that had the pid.
CHILD_CLOCK_SLACK_NS = 100_000_000
MISSING_CHILDREN_LISTED = 1000  # summary.json lists at most this many missing children
# trace bytes per event, by the form a file's name says (reader.form_by_name)
_BYTES_PER_EVENT = {"compact": 1.2, "zstd": 12.0, "gzip": 14.0, "plain": 170.0}

_tuned_pid = 0


def _trim() -> None:
    """Freed memory back to the system (glibc keeps it, as tune_process asks): between the
    phases, where what one phase freed would else stay counted while the next one allocates."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class _Background:
    """fn(*args) in a thread of its own; join() waits for it and raises what it raised."""

    def __init__(self, fn, *args):
        self.error: BaseException | None = None

        def run():
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 (raised by join)
                self.error = e

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


def tune_process() -> None:
    """One Arrow thread: parallelism is ours (a task per worker), nested pools only contend.
    Then keep freed memory in the process and in one heap: on VMs that lazily back memory,
    returning pages to the kernel and faulting them in again costs more than parsing. One
    arena, because the heaps of thread arenas cannot grow past 64 MiB and send big blocks
    to mmap. Once per process, before its threads start: resizing Arrow's pool and
    mallopt while other threads compute crashed the analyzer (1 run in 5 of the tests)."""
    global _tuned_pid
    if _tuned_pid == os.getpid():
        return
    _tuned_pid = os.getpid()
    pa.set_cpu_count(1)
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-8, 1)  # M_ARENA_MAX
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


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
    def shift(self) -> int:
        p = self.proc
        return int(p["wall_ns"]) - int(p["mono_ns"]) if "wall_ns" in p and "mono_ns" in p else 0

    def batch(self, b) -> pa.RecordBatch:
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
                                   child_pid=int(ret), started_by=name, ts_ns=ts, shift=self.shift,
                                   program=program))
        return r


def _array(col) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _table(batches: list[pa.RecordBatch]) -> pa.Table:
    """One table of batches whose dictionaries differ (each block has its own)."""
    t = pa.Table.from_batches(batches)
    return t.unify_dictionaries().combine_chunks() if len(batches) > 1 else t


class ParquetOut:
    """The task's Parquet part, in row groups of about 500,000 events. Written by a thread of
    its own (Parquet encoding releases the GIL: it runs while the next blocks decode) when
    cores would otherwise be idle; else in the task's thread, when each row group is full:
    with every core busy, a second thread per task only adds switches and cache misses (15%
    more CPU per event)."""

    def __init__(self, out_dir: str | None, index: int, threaded: bool = True):
        self.out_dir, self.index = out_dir, index
        self.threaded = threaded
        self.writer = None
        self.schema = None
        self.paths: list = []
        self.q: queue.Queue = queue.Queue(maxsize=1)
        self.error: BaseException | None = None
        self.thread = None
        self.pending: list = []  # batches of the row group being gathered
        self.rows = 0
        self.host, self.names, self.own_names = "", None, False
        if out_dir is not None and threaded:
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()

    def _run(self) -> None:
        try:
            while (item := self.q.get()) is not None:
                self._write(*item)
        except BaseException as e:  # noqa: BLE001 (reported by close)
            self.error = e
            while self.q.get() is not None:  # let the producer finish
                pass

    def _write(self, batches: list, host: str, names) -> None:
        """`names`: fhash -> path (a dict, _kernels.Names), or per batch its fname and fname2."""
        # Each block in the published schema as it is; the chunks go to Parquet as one row
        # group, nothing concatenated, with one dictionary per column (a dictionary that
        # changes from chunk to chunk sends the writer to materialize and hash the strings).
        per_batch = names if isinstance(names, list) else [names] * len(batches)
        tabs = [parquet.to_events(pa.Table.from_batches([b]), host, nb) for b, nb in zip(batches, per_batch)]
        loose = any(t.schema != parquet.EVENTS_SCHEMA_PRESENT for t in tabs)
        if loose:
            tabs = [t.cast(parquet.EVENTS_SCHEMA) for t in tabs]
        if self.writer is None or (loose and self.schema != parquet.EVENTS_SCHEMA):
            self._open(parquet.EVENTS_SCHEMA if loose else parquet.EVENTS_SCHEMA_PRESENT)
        tab = pa.concat_tables(tabs).unify_dictionaries()
        if self.schema != tab.schema:
            tab = tab.cast(self.schema)
        self.writer.write_table(tab, row_group_size=PARQUET_ROWS)

    def _open(self, schema: pa.Schema) -> None:
        """The task's part; the events after one that lacks a required value (then rare
        damaged lines) go on in a second part whose columns may all be null."""
        if self.writer is not None:
            self.writer.close()
        name = f"part-{self.index:05d}" + (f"-{len(self.paths)}" if self.paths else "")
        self.writer, path = parquet.open_part(self.out_dir, name, schema)
        self.schema = schema
        self.paths.append(path)

    def put(self, batch, host: str, names: dict) -> None:
        """Events of one file (a batch or a table); row groups hold one host's events. `names`:
        fhash -> path, the file's names as known so far; the batches are given the names of all
        files put, a later file's first, as they are when they are written."""
        if self.out_dir is None or not batch.num_rows:
            return
        if self.pending and host != self.host:
            self.flush()
        self.host = host
        # the names of one file are its reader's own dict, as it grows (a million names are
        # not copied at each block); a second file's make a dict of this writer's own
        if self.names is None:
            self.names = names
        elif names is not self.names:
            if not self.own_names:
                self.names, self.own_names = parquet.names_dict(self.names), True
            self.names.update(parquet.names_dict(names))
        self.pending += batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        self.rows += batch.num_rows
        if self.rows >= PARQUET_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            if self.thread is not None:  # the names as they are now (they may grow meanwhile)
                if isinstance(self.names, _kernels.Names) and self.names.other_empty:
                    names = [parquet.Snapshot(self.names)] * len(self.pending)  # looked up by the thread
                else:
                    names = [parquet.file_names(b, self.names) for b in self.pending]
                self.q.put((self.pending, self.host, names))
            else:
                self._write(self.pending, self.host, self.names)
            self.pending, self.rows = [], 0

    def close(self) -> list:
        if self.out_dir is None:
            return []
        try:
            self.flush()
        finally:
            if self.thread is not None:
                self.q.put(None)
                self.thread.join()
        if self.writer is not None:
            self.writer.close()
        if self.error is not None:
            raise self.error
        return self.paths


def process_files(paths: list[str], index: int, out_dir: str | None,
                  compute_cats: tuple[str, ...], parquet_thread: bool = True) -> TaskResult:
    """Read, summarize and write one or more whole files. A big file is summarized block by
    block as it streams (the working set stays a block's); small files are gathered and
    summarized together, as one table of several processes."""
    tune_process()
    P = summary.Partial()
    out = ParquetOut(out_dir, index, threaded=parquet_thread)
    readers = []
    group: list = []  # (reader, table) of small files
    group_rows = 0

    def flush_group():
        nonlocal group, group_rows
        if not group:
            return
        procs, proc_ids = [], []
        for k, (r, t) in enumerate(group):
            procs.append((r.key, r.host, r.proc.get("pid"), r.shift))
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
                P.add(t, [(r.key, r.host, None, r.shift)], None, compute_cats, r.names, own=r.own, ipc=r.ipc)
        hosts = {r.host for r, _t in group}
        if len(hosts) == 1:  # one host: the group's table is one Parquet row group
            out.put(ev, hosts.pop(), names)
        else:
            for r, t in group:
                out.put(t, r.host, r.names)
        group, group_rows = [], 0

    try:
        for k, path in enumerate(paths):
            fr = FileReader(path, key=hash((path, index, k)))
            readers.append(fr)
            streamed = _estimate(path, os.path.getsize(path)) >= SMALL_FILE_EVENTS
            small: list = []
            for b in iter_batches(path, fr.result.damage):
                rb = fr.batch(b)
                if rb.num_rows == 0:
                    continue
                if streamed:
                    fr.seen(rb)
                    P.add(rb, [(fr.key, fr.host, None, fr.shift)], None, compute_cats, fr.names,
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
    finally:
        parts = out.close()
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


def _process_task(args: tuple) -> TaskResult:
    return process_files(*args)




# --------------------------------------------------------------------------- driver


@dataclass
class Options:
    out_dir: str | None = None
    compute_cats: tuple[str, ...] = ("compute",)
    engine: str = "auto"  # auto, local, dask
    scheduler: str | None = None
    workers: int | None = None
    progress: bool | None = None  # None: when stderr is a terminal
    findings: bool = True  # run the rules (insights.py)
    rules: dict | None = None  # their thresholds (insights.thresholds); None: the defaults


def _estimate(path: str, size: int) -> int:
    """The events a trace file of this size holds, about: by its form as its name says (the
    planner does not open a million files)."""
    return int(size / _BYTES_PER_EVENT[form_by_name(path)])


def plan_tasks(files: list[str], sizes: dict, workers: int) -> list[list[str]]:
    """Big files alone; small ones grouped, in file order, into tasks of about a fourth of a
    worker's share of the input (so that every worker has several), GROUP_EVENTS at most."""
    est = [_estimate(f, sizes[f]) for f in files]
    target = max(SMALL_FILE_EVENTS, min(GROUP_EVENTS, sum(est) // (4 * max(workers, 1))))
    return engine.group(files, est, target, alone=SMALL_FILE_EVENTS)


def _progress(done: int, total: int, t0: float) -> None:
    width = 30
    fill = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} tasks "
                     f"{time.time() - t0:5.1f}s")
    sys.stderr.flush()


def analyze(paths: list[str], opts: Options) -> Job:
    """Read, write Parquet (if opts.out_dir), summarize and find: the job (model.Job), its
    summary with the findings, the damage and what the input was."""
    tune_process()
    recovered, live_notes = settle_live(paths)  # the traces of processes that died, finished
    files = find_traces(paths)
    sizes = {f: os.path.getsize(f) for f in files}
    est = sum(_estimate(f, s) for f, s in sizes.items())
    kind = opts.engine
    if kind == "auto":
        kind = "dask" if opts.scheduler or est >= LOCAL_EVENTS else "local"
    workers = opts.workers or os.cpu_count() or 1
    # Several tasks: forked processes, one per worker (a task's per-block Python, and its
    # Parquet thread, hold the GIL often enough to serialize threads); one task: this process.
    runner = engine.engine("dask" if kind == "dask" else "processes", workers, opts.scheduler,
                           setup=tune_process)
    tasks = plan_tasks(files, sizes, runner.workers)
    if opts.out_dir:
        os.makedirs(opts.out_dir, exist_ok=True)
    show = sys.stderr.isatty() if opts.progress is None else opts.progress
    t0 = time.time()
    results: list[TaskResult] = []
    # A Parquet thread for a task that will be the long pole (more events than all the
    # others share per remaining worker): the cores the others leave would idle
    size = [sum(_estimate(f, sizes[f]) for f in t) for t in tasks]
    spare = runner.workers - 1
    todo = [(tasks[i], i, opts.out_dir, opts.compute_cats, spare > 0 and size[i] * spare > est - size[i])
            for i in range(len(tasks))]
    # biggest first, a sliding window of them: memory stays bounded for any input size
    todo.sort(key=lambda t: -sum(sizes[f] for f in t[0]))
    with runner:
        for r in runner.unordered(_process_task, todo):
            results.append(r)
            if show and time.time() - t0 > 1.0:
                _progress(len(results), len(tasks), t0)
        if show and time.time() - t0 > 1.0:
            sys.stderr.write("\n")
    order = {f: i for i, f in enumerate(files)}
    file_results = sorted((f for r in results for f in r.files), key=lambda r: order[r.path])
    by_path = {os.path.realpath(f.path): f for f in file_results}
    for d in live_notes:  # a live file left: those events are not in the figures
        if (r := by_path.get(os.path.realpath(d.path))) is not None:
            r.damage.append(d)
    # The merge's Arrow memory from the heap where the tasks' freed memory stays (numpy's and
    # the kernels'): given back to the system, it was faulted in again (0.4 s of a million
    # files' merge on the VM); kept beside a pool of Arrow's own, it added up.
    pool = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    meta = None
    if opts.out_dir:
        # one row per process image: a file that repeats another's iotrace_process (same
        # pid and clocks) adds nothing
        procs: dict = {}
        for p in (p for r in file_results for p in r.processes):
            key = (p.get("host"), p.get("pid"), p.get("mono_ns"), p.get("wall_ns"))
            if key not in procs or (p.get("end_reason") and not procs[key].get("end_reason")):
                procs[key] = p
        # written by a thread while the merge and the rules run (sorting and encoding a
        # million names release the GIL: 0.5 s of a million files' merge)
        meta = _Background(parquet.write_metadata, opts.out_dir, list(procs.values()),
                           [t for r in file_results for t in r.threads],
                           *summary._names([r.partial for r in results]))  # (table, numbers, hex)
    try:
        prefixes = file_class.software_prefixes(p.get("exe") for f in file_results for p in f.processes)
        dirs = file_class.import_dirs(p for f in file_results for p in f.processes)
        job = summary.build([r.partial for r in results], prefixes=prefixes, dirs=dirs)
        S = job.summary
        t_rules = time.perf_counter()
        S["findings"] = insights.findings(job, opts.rules) if opts.findings else []
        t_rules = time.perf_counter() - t_rules
    finally:
        if meta is not None:
            meta.join()
        pa.set_memory_pool(pool)
    del results
    _trim()
    S["input"] = dict(files=len(files), recovered=len(recovered), stored_bytes=sum(sizes.values()), tasks=len(tasks),
                      engine=kind, workers=runner.workers, estimated_events=est,
                      findings_seconds=round(t_rules, 4))
    S["damage"] = damage_report(file_results, S["job"]["start_ns"])
    job.traces = file_results
    return job


def missing_children(results: list[FileResult], job_start: int | None = None) -> list[dict]:
    """The child processes that a parent's trace says it started (START_CALLS, ret > 0) and of
    which the job has no trace: no file of that pid on the parent's host (pids repeat across
    hosts) that started no earlier than the call (an earlier file is an earlier process that
    had the pid). Any file of the pid counts: an exec'd child writes one per image. Each as
    host, pid, parent_pid, parent_trace, started_by, ts_us (the call's ts in the parent's
    trace), at_s (seconds from the job's start, when `job_start` and the clocks are known) and
    program (null when unknown), in the order of the calls."""
    traced: dict = {}  # (host, pid) -> start mono_ns of each of its files (None: unknown)
    for r in results:
        host = ""
        for p in r.processes:
            host = p.get("host") or ""
            traced.setdefault((host, p.get("pid")), []).append(p.get("mono_ns"))
        for pid in r.pids:  # files of several pids (DFTracer): no start per pid
            if (host, pid) not in traced:
                traced[(host, pid)] = [None]
    out, seen = [], set()
    for r in results:
        for c in r.children:
            key = (c["host"], c["child_pid"], c["ts_ns"], c["started_by"])
            if key in seen:
                continue
            seen.add(key)
            ts = c["ts_ns"]
            starts = traced.get((c["host"], c["child_pid"]), [])
            if any(s is None or ts is None or s >= ts - CHILD_CLOCK_SLACK_NS for s in starts):
                continue
            wall = ts + c["shift"] if ts is not None and c["shift"] else None
            out.append(dict(host=c["host"], pid=c["child_pid"], parent_pid=c["parent_pid"],
                            parent_trace=r.path, started_by=c["started_by"],
                            ts_us=units.us(ts) if ts is not None else None,
                            at_s=round((wall - job_start) / 1e9, 6) if wall is not None and job_start else None,
                            program=c["program"]))
    return out


def missing_child_detail(m: dict) -> str:
    """The damage line of a missing child."""
    prog = f" running {m['program']}" if m.get("program") else ""
    at = f" at ts {m['ts_us']} µs" if m.get("ts_us") is not None else ""
    if m.get("at_s") is not None:
        at += f" ({m['at_s']:.3f} s into the job)"
    return (f"child pid {m['pid']}{prog}, started by {m['started_by']} of pid {m['parent_pid']}{at} "
            f"on {m['host'] or 'its host'}, has no trace: its I/O is in no figure (it may have run "
            f"untraced: a static or setuid program, IOTRACE_ENABLE=0; or died before writing anything)")


def damage_report(results: list[FileResult], job_start: int | None = None) -> dict:
    """The `damage` section: what each file's reading met, and the children that the parents'
    traces started but that left no trace (`missing-child`, a record on the parent's file)."""
    missing = missing_children(results, job_start)
    by_parent: dict = {}
    for m in missing:
        by_parent.setdefault(m["parent_trace"], []).append(
            Damage(m["parent_trace"], -1, "missing-child", missing_child_detail(m)))
    records = [d for r in results for d in (*r.damage, *by_parent.get(r.path, ()))]
    kinds: dict = {}
    for d in records:
        kinds[d.kind] = kinds.get(d.kind, 0) + 1
    return dict(
        damaged_files=sum(1 for r in results
                          if r.damage or r.bad_lines or r.missing_metadata or r.path in by_parent),
        by_kind=kinds, bad_lines=sum(r.bad_lines for r in results),
        bad_line_examples=[e.decode("utf-8", "replace") for r in results for e in r.bad_examples][:5],
        missing_metadata=[r.path for r in results if r.missing_metadata],
        unresolved_file_hashes=sum(r.unresolved_hashes for r in results),
        records=[dict(path=d.path, offset=d.offset, kind=d.kind, detail=d.detail) for d in records[:50]],
        missing_children=missing[:MISSING_CHILDREN_LISTED], missing_child_count=len(missing))
