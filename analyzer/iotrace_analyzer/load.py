"""Orchestration: plan chunks, parse them in parallel (threads in-process for small inputs,
Dask for big ones or an existing cluster), finish each file (names, Parquet part, partial
summary) where its chunks were parsed, and bring back only the small partials."""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from . import parquet, summary
from .parse import PADDING, parse_block
from .reader import Chunk, Damage, find_traces, iter_blocks, plan_chunks

CHUNK_BYTES = 4 << 20  # stored bytes per chunk (zstd frames / plain lines)
PARSE_BYTES = 32 << 20  # text parsed at a time inside a chunk (bounds memory for gzip)
# Inputs estimated below this many events are analyzed in-process by threads. Measured on the
# 2-core machine: a 2-worker LocalCluster costs ~2 s to start and ~30% more CPU per event
# (worker imports, transfers), so threads win up to ~10-20M events.
LOCAL_EVENTS = 20_000_000
_EXPANSION = {"zstd": 14.0, "gzip": 8.0, "plain": 1.0}  # text/stored, measured on our writer's output
_EXPANSION_COMPACT = 80.0  # .iotc.zst: ~1.5 stored bytes per I/O event, more with Python events
_BYTES_PER_EVENT = 170


# The same settings for processes started from here (Dask workers): glibc reads them at start.
MALLOC_ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
              "MALLOC_MMAP_THRESHOLD_": str(1 << 30)}


_tuned_pid = 0


def tune_process() -> None:
    """One Arrow thread: parallelism is ours (a file per worker), nested pools only contend.
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
class ChunkOut:
    index: int
    events: pa.Table
    meta: list
    bad_lines: int
    bad_examples: list
    damage: list


@dataclass
class FileResult:
    path: str
    partial: summary.Partial
    processes: list = field(default_factory=list)
    threads: list = field(default_factory=list)
    damage: list = field(default_factory=list)
    bad_lines: int = 0
    bad_examples: list = field(default_factory=list)
    missing_metadata: bool = False
    unresolved_hashes: int = 0
    parquet_part: str | None = None


# --------------------------------------------------------------------------- tasks


def parse_chunk(chunk: Chunk) -> ChunkOut:
    tune_process()
    damage: list[Damage] = []
    tables, meta, bad, examples = [], [], 0, []
    pending, size = [], 0

    def flush():
        nonlocal bad
        length = sum(len(b) for b in pending)
        p = parse_block(b"".join(pending + [PADDING]), length)
        tables.append(p.events)
        meta.extend(p.meta)
        bad += p.bad_lines
        examples.extend(p.bad_examples[: 3 - len(examples)])
        pending.clear()

    for block in iter_blocks(chunk.path, damage, chunk):
        pending.append(block)
        size += len(block)
        if size >= PARSE_BYTES:
            flush()
            size = 0
    if pending or not tables:
        flush()
    events = pa.concat_tables(tables).unify_dictionaries() if len(tables) > 1 else tables[0]
    return ChunkOut(chunk.index, events, meta, bad, examples, damage)


def _metadata(path: str, meta: list[dict]):
    """Process record, thread names, file names and hosts from a file's metadata events."""
    proc: dict = {}
    threads: dict = {}
    names: dict = {}
    hosts: dict = {}
    for m in meta:
        name, args = m.get("name"), m.get("args") if isinstance(m.get("args"), dict) else {}
        if name == "FH" and "value" in args:
            names[str(args["value"])] = str(args.get("name"))
        elif name == "HH" and "value" in args:  # DFTracer host hash
            hosts[str(args["value"])] = str(args.get("name"))
        elif name == "iotrace_process":
            proc.update(args)
            proc.setdefault("pid", m.get("pid"))
        elif name == "process_name":
            proc["name"] = args.get("name")
            proc.setdefault("pid", m.get("pid"))
        elif name == "thread_name":
            threads[(m.get("pid"), m.get("tid"))] = str(args.get("name"))
        elif name == "iotrace_end":
            proc["end_reason"] = args.get("reason")
            proc["events_written"] = args.get("events")
            proc["end_lost"] = int(args.get("lost") or 0) + int(args.get("dropped") or 0)
        elif name == "iotrace_lost":  # events the tracer could not write, and why
            proc["events_lost"] = proc.get("events_lost", 0) + int(args.get("events") or 0)
            proc.setdefault("lost_reasons", [])
            if args.get("reason") not in proc["lost_reasons"]:
                proc["lost_reasons"].append(args.get("reason"))
    proc["trace_file"] = path
    return proc, threads, names, hosts


def finish_file(path: str, index: int, outs: list[ChunkOut], out_dir: str | None,
                compute_cats: tuple[str, ...]) -> FileResult:
    tune_process()
    outs = sorted(outs, key=lambda o: o.index)
    meta = [m for o in outs for m in o.meta]
    proc, thread_names, names, hosts = _metadata(path, meta)
    tables = [o.events for o in outs]
    ev = pa.concat_tables(tables).unify_dictionaries() if len(tables) > 1 else tables[0]
    ev = ev.combine_chunks()
    is_iotrace = "version" in proc or "mono_ns" in proc
    host = str(proc.get("hostname") or (next(iter(hosts.values())) if len(hosts) == 1 else ""))
    shift = int(proc["wall_ns"]) - int(proc["mono_ns"]) if "wall_ns" in proc and "mono_ns" in proc else 0
    part = summary.file_partial(ev, host, shift, len(meta), compute_cats, names)

    res = FileResult(path, part, damage=[d for o in outs for d in o.damage],
                     bad_lines=sum(o.bad_lines for o in outs),
                     bad_examples=[e for o in outs for e in o.bad_examples][:3])
    res.missing_metadata = not is_iotrace and not hosts and ev.num_rows > 0
    declared = proc.get("events_written")
    seen = ev.num_rows + len(meta) + res.bad_lines - 1  # lines before iotrace_end
    if isinstance(declared, int) and seen < declared:
        res.damage.append(Damage(path, -1, "lost-events",
                                 f"iotrace_end counts {declared} events, {seen} lines were read"))
    lost = max(proc.get("events_lost", 0), proc.get("end_lost", 0))
    if lost:
        why = "; ".join(str(r) for r in proc.get("lost_reasons", [])) or "not written"
        res.damage.append(Damage(path, -1, "lost-events",
                                 f"the tracer could not write {lost} event lines: {why}"))
    hashes: set = set()
    if ev.num_rows:
        hashes = {h for h in pc.unique(ev.column("fhash")).to_pylist() if h is not None}
    res.unresolved_hashes = len(hashes - set(names))
    pids = sorted(pc.unique(ev.column("pid")).to_pylist()) if ev.num_rows and not proc.get("pid") else []
    if proc.get("pid") is not None or pids:
        if proc.get("pid") is None:
            proc["pid"] = pids[0]
        proc["host"] = host
        res.processes.append(proc)
    res.threads = [dict(host=host, pid=p, tid=t, name=n) for (p, t), n in thread_names.items()]
    if out_dir is not None and ev.num_rows:
        res.parquet_part = parquet.write_events(parquet.to_events(ev, host, names), out_dir, index)
    return res


def process_file(path: str, index: int, chunks: list[Chunk], out_dir, compute_cats) -> FileResult:
    return finish_file(path, index, [parse_chunk(c) for c in chunks], out_dir, compute_cats)


# --------------------------------------------------------------------------- runners


class LocalRunner:
    """A thread pool whose tasks may take futures of other tasks (lists of them) as
    arguments: a task is queued once its inputs are done, so no worker thread waits."""

    def __init__(self, workers: int):
        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.workers = workers

    def submit(self, fn, *args) -> Future:
        deps = [f for a in args for f in (a if isinstance(a, list) else [a]) if isinstance(f, Future)]
        out: Future = Future()
        left = [len(deps)]
        lock = threading.Lock()

        def run():
            real = [[x.result() if isinstance(x, Future) else x for x in a] if isinstance(a, list)
                    else (a.result() if isinstance(a, Future) else a) for a in args]
            inner = self.pool.submit(fn, *real)
            inner.add_done_callback(lambda f: out.set_exception(f.exception()) if f.exception()
                                    else out.set_result(f.result()))

        def dep_done(_):
            with lock:
                left[0] -= 1
                ready = left[0] == 0
            if ready:
                run()

        if not deps:
            run()
        for d in deps:
            d.add_done_callback(dep_done)
        return out

    def wait_any(self, futures) -> set:
        return wait(futures, return_when=FIRST_COMPLETED).done

    def close(self):
        self.pool.shutdown()


class DaskRunner:
    def __init__(self, scheduler: str | None, workers: int):
        from dask.distributed import Client, LocalCluster

        self.cluster = None
        if scheduler:
            self.client = Client(scheduler)
        else:
            os.environ.update(MALLOC_ENV)
            self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        dashboard_address=None, silence_logs=40)
            self.client = Client(self.cluster)
        self.workers = len(self.client.scheduler_info().get("workers", {})) or workers
        try:  # before the first task: the workers' own threads may run several at once
            self.client.run(tune_process)
        except Exception:  # noqa: BLE001 (a worker without the package: tasks tune themselves)
            pass

    def submit(self, fn, *args):
        return self.client.submit(fn, *args, pure=False)

    def wait_any(self, futures) -> set:
        from dask.distributed import wait as dask_wait
        return set(dask_wait(futures, return_when="FIRST_COMPLETED").done)

    def close(self):
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


# --------------------------------------------------------------------------- driver


@dataclass
class Options:
    out_dir: str | None = None
    compute_cats: tuple[str, ...] = ("compute",)
    engine: str = "auto"  # auto, local, dask
    scheduler: str | None = None
    workers: int | None = None
    progress: bool | None = None  # None: when stderr is a terminal
    chunk_bytes: int = CHUNK_BYTES


def estimate_events(plan: list[list[Chunk]]) -> int:
    def expansion(c: Chunk) -> float:
        return _EXPANSION_COMPACT if c.path.endswith(".iotc.zst") else _EXPANSION[c.codec]

    return int(sum(c.size * expansion(c) for chunks in plan for c in chunks[:1]) / _BYTES_PER_EVENT)


def _progress(done: int, total: int, t0: float) -> None:
    width = 30
    fill = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} files "
                     f"{time.time() - t0:5.1f}s")
    sys.stderr.flush()


def analyze(paths: list[str], opts: Options) -> tuple[dict, list[FileResult]]:
    """Read, parse, write Parquet (if opts.out_dir) and summarize; returns (summary, results)."""
    tune_process()
    files = find_traces(paths)
    plan = [plan_chunks(f, opts.chunk_bytes) for f in files]
    est = estimate_events(plan)
    engine = opts.engine
    if engine == "auto":
        engine = "dask" if opts.scheduler or est >= LOCAL_EVENTS else "local"
    workers = opts.workers or os.cpu_count() or 1
    runner = DaskRunner(opts.scheduler, workers) if engine == "dask" else LocalRunner(workers)
    if opts.out_dir:
        os.makedirs(opts.out_dir, exist_ok=True)
    show = sys.stderr.isatty() if opts.progress is None else opts.progress
    t0 = time.time()
    try:
        # Files are submitted in a sliding window so that parsed chunks never pile up
        # waiting for their file's finishing task: memory stays bounded for any input size.
        window = 2 * runner.workers
        pending = list(enumerate(zip(files, plan)))[::-1]
        in_flight, results = set(), []
        # A file is parsed as parallel chunk tasks only when it is a big share of the input;
        # else one task reads it all: no chunk tables travel between workers.
        total = sum(ch[0].size for ch in plan)
        big = total / (2 * runner.workers)

        def submit_next():
            i, (path, chunks) = pending.pop()
            if len(chunks) == 1 or chunks[0].size < big:
                f = runner.submit(process_file, path, i, chunks, opts.out_dir, opts.compute_cats)
            else:
                parts = [runner.submit(parse_chunk, c) for c in chunks]
                f = runner.submit(finish_file, path, i, parts, opts.out_dir, opts.compute_cats)
            in_flight.add(f)

        while pending and len(in_flight) < window:
            submit_next()
        while in_flight:
            for done in runner.wait_any(list(in_flight)):
                in_flight.discard(done)
                results.append(done.result())
                if pending:
                    submit_next()
            if show and time.time() - t0 > 1.0:
                _progress(len(results), len(files), t0)
        if show and time.time() - t0 > 1.0:
            sys.stderr.write("\n")
    finally:
        runner.close()
    results.sort(key=lambda r: files.index(r.path))
    S = summary.merge([r.partial for r in results])
    S["input"] = dict(files=len(files), stored_bytes=sum(c.size for ch in plan for c in ch[:1]),
                      chunks=sum(len(ch) for ch in plan), engine=engine,
                      workers=runner.workers, estimated_events=est)
    S["damage"] = damage_report(results)
    if opts.out_dir:
        names = {}
        for r in results:
            names.update(r.partial.fh)
        # one row per process image: a file that repeats another's iotrace_process (same
        # pid and clocks) adds nothing
        procs: dict = {}
        for p in (p for r in results for p in r.processes):
            key = (p.get("host"), p.get("pid"), p.get("mono_ns"), p.get("wall_ns"))
            if key not in procs or (p.get("end_reason") and not procs[key].get("end_reason")):
                procs[key] = p
        parquet.write_metadata(opts.out_dir, list(procs.values()),
                               [t for r in results for t in r.threads], names)
    return S, results


def damage_report(results: list[FileResult]) -> dict:
    records = [d for r in results for d in r.damage]
    kinds: dict = {}
    for d in records:
        kinds[d.kind] = kinds.get(d.kind, 0) + 1
    return dict(
        damaged_files=sum(1 for r in results if r.damage or r.bad_lines or r.missing_metadata),
        by_kind=kinds, bad_lines=sum(r.bad_lines for r in results),
        bad_line_examples=[e.decode("utf-8", "replace") for r in results for e in r.bad_examples][:5],
        missing_metadata=[r.path for r in results if r.missing_metadata],
        unresolved_file_hashes=sum(r.unresolved_hashes for r in results),
        records=[dict(path=d.path, offset=d.offset, kind=d.kind, detail=d.detail) for d in records[:50]])
