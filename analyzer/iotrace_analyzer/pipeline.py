"""The analysis, top to bottom: the inputs (inputs/) are gathered into sources and grouped
into tasks, the tasks run on the engine (engine.py: this process, forked processes or Dask) and
bring back small partials, one merge makes the job (model.Job: analyses/summary.py), the rules
find what is wrong with it (analyses/insights.py), and the outputs (outputs/: summary.json,
the text report, the page, Parquet) write it. Memory stays bounded whatever the input: a task
holds a batch of events at a time, and its partial is folded in as it finishes.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from dataclasses import dataclass

import pyarrow as pa

from iotrace_format.reader import Damage

from . import engine, inputs, units
from .analyses import insights, summary
from .engine import tune_process
from .inputs import read
from .inputs.read import FileResult, TaskResult, process_task
from .model import Job, file_class
from .outputs import parquet

GROUP_EVENTS = 1 << 20  # small sources are grouped into tasks of at most about this many events
# Inputs estimated below this many events are analyzed on this machine without Dask (threads
# and forked processes): a LocalCluster costs ~2 s to start and more CPU per event (worker
# imports, transfers), for no gain on one machine. Dask is for --scheduler, or --engine dask.
LOCAL_EVENTS = 10_000_000_000
# A file of pid C on the parent's host is the child's when it started no earlier than this
# before the call that made C (the clocks are the host's one CLOCK_MONOTONIC; the margin is
# for the TSC mapping): a file that started before is an earlier process that had the pid.
CHILD_CLOCK_SLACK_NS = 100_000_000
MISSING_CHILDREN_LISTED = 1000  # summary.json lists at most this many missing children


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


# --------------------------------------------------------------------------- driver


@dataclass
class Options:
    out_dir: str | None = None
    compute_cats: tuple[str, ...] = ("compute",)
    engine: str = "auto"  # auto, local, dask
    scheduler: str | None = None
    workers: int | None = None
    memory_limit: str | None = None  # per worker of a local Dask cluster ("2GiB"); None: Dask's default
    progress: bool | None = None  # None: when stderr is a terminal
    findings: bool = True  # run the rules (insights.py)
    rules: dict | None = None  # their thresholds (insights.thresholds); None: the defaults


def plan_tasks(est: list[int], workers: int) -> list[list[int]]:
    """The sources (by index; `est`: each one's estimated events) in tasks: big ones alone,
    small ones grouped, in order, into tasks of about a fourth of a worker's share of the input
    (so that every worker has several), GROUP_EVENTS at most."""
    small = read.SMALL_FILE_EVENTS
    target = max(small, min(GROUP_EVENTS, sum(est) // (4 * max(workers, 1))))
    return engine.group(list(range(len(est))), est, target, alone=small)


def _progress(done: int, total: int, t0: float) -> None:
    width = 30
    fill = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} tasks "
                     f"{time.time() - t0:5.1f}s")
    sys.stderr.flush()


def analyze(items: list, opts: Options) -> Job:
    """Read, write Parquet (if opts.out_dir), summarize and find: the job (model.Job), its
    summary with the findings, the damage and what the input was. `items`: folders and trace
    files, or sources made in Python (inputs.gather)."""
    tune_process()
    given = inputs.gather(items)
    files = given.sources
    each = [s.estimated_events() for s in files]
    est = sum(each)
    kind = opts.engine
    if kind == "auto":
        kind = "dask" if opts.scheduler or opts.memory_limit or est >= LOCAL_EVENTS else "local"
    workers = opts.workers or os.cpu_count() or 1
    # Several tasks: forked processes, one per worker (a task's per-block Python, and its
    # helper thread, hold the GIL often enough to serialize threads); one task: this process.
    runner = engine.engine("dask" if kind == "dask" else "processes", workers, opts.scheduler,
                           setup=tune_process, on_thread=True, memory_limit=opts.memory_limit)
    groups = plan_tasks(each, runner.workers)
    tasks = [[files[i] for i in g] for g in groups]
    if opts.out_dir:
        os.makedirs(opts.out_dir, exist_ok=True)
    show = sys.stderr.isatty() if opts.progress is None else opts.progress
    t0 = time.time()
    results: list[TaskResult] = []
    # A helper thread (Parquet, decoding ahead) for a task that will be the long pole (more events than all the
    # others share per remaining worker): the cores the others leave would idle
    size = [sum(each[i] for i in g) for g in groups]
    spare = runner.workers - 1
    todo = [(tasks[i], i, opts.out_dir, opts.compute_cats, spare > 0 and size[i] * spare > est - size[i])
            for i in range(len(tasks))]
    # biggest first, a sliding window of them: memory stays bounded for any input size
    todo.sort(key=lambda t: -sum(s.size for s in t[0]))
    with runner:
        for r in runner.unordered(process_task, todo):
            results.append(r)
            if show and time.time() - t0 > 1.0:
                _progress(len(results), len(tasks), t0)
        if show and time.time() - t0 > 1.0:
            sys.stderr.write("\n")
    order = {s.path: i for i, s in enumerate(files)}
    file_results = sorted((f for r in results for f in r.files), key=lambda r: order[r.path])
    by_path = {os.path.realpath(f.path): f for f in file_results}
    for d in given.notes:  # a live file left: those events are not in the figures
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
    S["input"] = dict(files=len(files), recovered=len(given.recovered), stored_bytes=sum(s.size for s in files),
                      tasks=len(tasks), engine=kind, workers=runner.workers, estimated_events=est,
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
