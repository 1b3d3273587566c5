"""Benchmark `iotrace export` (the installed package): N events of a job -> .pftrace and
.json.gz, and a job of many short processes -> .pftrace.

    python benchmarks/export_bench.py [--events 10000000] [--traces DIR] [--keep DIR]
        [--filtered] [--processes 5000] [--keep-processes DIR]

Without --traces it writes a job in the documented per-process format
(docs/trace-format.md, JSON lines in zstd frames as the tracer writes them): rank 0..3, each
with two dataloader workers, POSIX reads/writes on a few hundred files, Python steps around
them and a counter. Prints seconds and sizes for each output. With --filtered it also times a
filtered .pftrace export (`--cat posix --min-dur 1`).

The many-processes case runs benchmarks/gen_events.c under the tracer (compiled with cc):
PROCESSES forked children of ~200 events each (lseek + pread rounds), PROCESSES + 1 compact
traces; --processes 0 skips it.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

RANKS = 4
WORKERS = 2  # per rank
FILES = 300
FRAME_LINES = 4096  # lines per zstd frame, like the tracer's flushes


def _fnv1a(path: str) -> str:
    h = 0xCBF29CE484222325
    for b in path.encode():
        h = (h ^ b) * 0x100000001B3 & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def write_process(path: str, pid: int, role: str, rank: int, n_events: int,
                  parent: int | None, start_us: float, seed: int, worker_id: int | None = None):
    """One per-process trace of about n_events events."""
    import orjson
    import zstandard

    rng = random.Random(seed)
    info = {"version": 1, "hostname": "bench", "pid": pid, "ppid": parent or 1,
            "exe": "/usr/bin/python3.11", "cmdline": ["python3.11", "train.py"],
            "wall_ns": 0, "mono_ns": int(start_us * 1000), "role": role,
            "ranks": {"RANK": str(rank), "WORLD_SIZE": str(RANKS)}, "compression": "zstd"}
    if parent:
        info["parent_pid"] = parent
    if worker_id is not None:
        info["worker_id"] = worker_id
    head = [orjson.dumps({"ph": "M", "name": "iotrace_process", "pid": pid, "tid": pid,
                          "args": info}).decode(),
            f'{{"ph":"M","name":"process_name","pid":{pid},"tid":{pid},"args":{{"name":"python3.11"}}}}']
    lines = head
    seen = set()
    ts = start_us + 10
    tids = [pid, pid + 1]
    cctx = zstandard.ZstdCompressor(level=3)
    written = 0
    with open(path, "wb") as out:
        out.write(cctx.compress(b"[\n"))

        def flush(final=False):
            nonlocal lines
            text = ",\n".join(lines) + ("]\n" if final else ",\n")
            out.write(cctx.compress(text.encode()))
            lines = []

        offset = 0
        while written < n_events:
            tid = tids[written % 7 == 0]
            k = rng.randrange(FILES)
            fname = f"/data/shard-{k:05d}.bin"
            fh = _fnv1a(fname)
            if fh not in seen:
                seen.add(fh)
                lines.append(f'{{"ph":"M","name":"FH","pid":{pid},"tid":{tid},'
                             f'"args":{{"name":"{fname}","value":"{fh}"}}}}')
            r = rng.random()
            if r < 0.02:  # a step around the next reads
                lines.append(f'{{"ph":"X","name":"train.step","cat":"python","pid":{pid},'
                             f'"tid":{pid},"ts":{ts:.3f},"dur":{50.0:.3f},'
                             f'"args":{{"step":{written}}}}}')
            elif r < 0.03:
                lines.append(f'{{"ph":"C","name":"memory","pid":{pid},"tid":{pid},'
                             f'"ts":{ts:.3f},"args":{{"rss":{rng.randrange(1 << 30)}}}}}')
            else:
                size = 1 << rng.randrange(9, 20)
                dur = rng.random() * 20
                name = "read" if r < 0.8 else "write"
                lines.append(f'{{"ph":"X","name":"{name}","cat":"posix","pid":{pid},'
                             f'"tid":{tid},"ts":{ts:.3f},"dur":{dur:.3f},"args":{{"fhash":'
                             f'"{fh}","size":{size},"offset":{offset},"ret":{size},"fd":{3 + k % 50}}}}}')
                offset += size
            ts += rng.random() * 30 + 1
            written += 1
            if len(lines) >= FRAME_LINES:
                flush()
        lines.append(f'{{"ph":"M","name":"iotrace_end","pid":{pid},"tid":{pid},'
                     f'"args":{{"events":{written},"reason":"exit"}}}}')
        flush(final=True)


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the export workers)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _write_one(args):
    write_process(*args)


def make_job(directory: str, events: int) -> None:
    """RANKS ranks with WORKERS dataloader workers each, events spread evenly."""
    from concurrent.futures import ProcessPoolExecutor

    per_proc = events // (RANKS * (1 + WORKERS))
    jobs = []
    for rank in range(RANKS):
        pid = 1000 + rank * 100
        jobs.append((os.path.join(directory, f"python3.11-bench-{pid}.pfw.zst"), pid, "main",
                     rank, per_proc, None, 1e6, pid))
        for w in range(WORKERS):
            wpid = pid + 10 + w * 2
            jobs.append((os.path.join(directory, f"python3.11-bench-{wpid}.pfw.zst"), wpid,
                         "dataloader", rank, per_proc, pid, 1e6 + 500 + w, wpid, w))
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_write_one, jobs))


def make_processes(directory: str, processes: int, scratch: str, rounds: int = 100) -> None:
    """gen_events under the tracer: `processes` forked children of 2 * rounds events each."""
    import subprocess

    import iotrace

    exe = os.path.join(scratch, "gen_events")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "gen_events.c")], check=True)
    data = os.path.join(scratch, "gen-data")
    os.makedirs(data, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_")}
    env.update(LD_PRELOAD=iotrace.preload_path(), IOTRACE_DIR=directory)
    subprocess.run([exe, data, str(rounds), str(processes)], env=env, check=True)


def timed_export(label: str, traces: str, out: str, jobs: int, filters: dict | None = None):
    from iotrace_analyzer.export.filters import EventFilter
    from iotrace_analyzer.export.merge import export

    cpu = _cpu_seconds()
    t = time.perf_counter()
    res = export([traces], out, EventFilter(**filters) if filters else None, jobs=jobs)
    took = time.perf_counter() - t
    # CPU seconds tell the cost apart from other load on a shared machine.
    print(f"{label:12s} {took:6.2f} s  (cpu {_cpu_seconds() - cpu:6.1f} s)  "
          f"{os.path.getsize(out) / 1e6:8.1f} MB  "
          f"{res.events} events, {res.filtered} filtered, {res.processes} processes, "
          f"{res.flows} flows", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--traces", help="existing per-process traces (skip generation)")
    ap.add_argument("--keep", help="write the generated traces here and keep them")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--formats", default="job.pftrace,job.json.gz",
                    help="outputs to time (comma-separated names)")
    ap.add_argument("--filtered", action="store_true",
                    help="also time .pftrace with --cat posix --min-dur 1 (µs)")
    ap.add_argument("--processes", type=int, default=5000,
                    help="the many-processes case: this many traced children (0: skip it)")
    ap.add_argument("--process-traces", help="existing traces of that case (skip generation)")
    ap.add_argument("--keep-processes", help="write the many-processes traces here and keep them")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="iotrace-export-bench-")
    try:
        traces = args.traces
        if not traces:
            traces = args.keep or os.path.join(work, "traces")
            os.makedirs(traces, exist_ok=True)
            if not os.listdir(traces):
                t = time.perf_counter()
                make_job(traces, args.events)
                print(f"generated {args.events} events in {time.perf_counter() - t:.1f} s")
        size_in = sum(os.path.getsize(os.path.join(traces, f)) for f in os.listdir(traces))
        print(f"input: {len(os.listdir(traces))} files, {size_in / 1e6:.1f} MB")
        runs = [(name, name, None) for name in args.formats.split(",") if name]
        if args.filtered:
            runs.append(("filtered", "filtered.pftrace", {"cats": ["posix"], "min_dur_us": 1.0}))
        for label, name, filters in runs:
            timed_export(label, traces, os.path.join(work, name), args.jobs, filters)
            os.remove(os.path.join(work, name))
        if args.processes or args.process_traces:
            many = args.process_traces
            if not many:
                many = args.keep_processes or os.path.join(work, "processes", "traces")
                os.makedirs(many, exist_ok=True)
                if not os.listdir(many):
                    t = time.perf_counter()
                    make_processes(many, args.processes, work)
                    print(f"generated {args.processes} processes in "
                          f"{time.perf_counter() - t:.1f} s")
            print(f"input: {len(os.listdir(many))} files, "
                  f"{sum(os.path.getsize(os.path.join(many, f)) for f in os.listdir(many)) / 1e6:.1f} MB")
            timed_export("processes", many, os.path.join(work, "processes.pftrace"), args.jobs)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
