"""Benchmark `iotrace export` (the installed package): N events of a job -> .pftrace and
.json.gz, and a job of many short processes -> .pftrace.

    python benchmarks/export_bench.py [--events 10000000] [--traces DIR] [--keep DIR]
        [--filtered] [--processes 5000] [--keep-processes DIR]
    python benchmarks/export_bench.py --budget-events 100000000 [--budget-traces DIR]
        [--keep-budget DIR] [--max-slices 2000000] [--full] [--ui] [--check]

Without --traces it writes a job in the documented per-process format
(docs/trace-format.md, JSON lines in zstd frames as the tracer writes them): rank 0..3, each
with two dataloader workers, POSIX reads/writes on a few hundred files, Python steps around
them and a counter. Prints seconds and sizes for each output. With --filtered it also times a
filtered .pftrace export (`--cat posix --min-dur 1`).

The many-processes case runs benchmarks/gen_events.c under the tracer (compiled with cc):
PROCESSES forked children of ~200 events each (lseek + pread rounds), PROCESSES + 1 compact
traces; --processes 0 skips it.

The budget case (--budget-events N: only it runs) is the analyzer benchmark's one-process shape:
gen_events under the tracer, one process of N calls (N/2 lseek + pread rounds), exported with
`--max-slices` (default: the command's, 2000000). It prints the seconds, the output's size, the
peak RSS of the export (its process and its workers, summed, sampled every 20 ms) and the slices
before and after; --full also exports every slice (--max-slices 0: what the export did before
the budget); --ui opens the budgeted output in the real Perfetto UI, headless
(tests/perfetto_ui.py), and prints its load time and counter tracks; --check compares the calls
and bytes per process of the budgeted output (Perfetto's trace processor, tests/perfetto_tp.py; a
merged slice counting its `merged` calls and `bytes`) with iotrace-analyze's summary.
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


class PeakRss:
    """The peak of the summed RSS of this process and its children, sampled by a thread."""

    def __init__(self, every: float = 0.02):
        import threading

        import psutil

        self.me, self.every, self.peak = psutil.Process(), every, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import psutil

        while not self.stop.is_set():
            total = 0
            for p in [self.me, *self.me.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self.stop.wait(self.every)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def check_sums(traces: str, out: str, work: str) -> None:
    """Calls and bytes read and written per process: the budgeted export against the analysis."""
    import json
    import subprocess

    from perfetto_tp import load_trace

    summary = os.path.join(work, "summary.json")
    t = time.perf_counter()
    subprocess.run(["iotrace-analyze", traces, "--summary", summary, "-q", "--no-findings"], check=True)
    analysis = {p["pid"]: (p["io_events"], p["bytes_read"], p["bytes_written"])
                for p in json.load(open(summary))["processes"] if p["io_events"]}
    took = time.perf_counter() - t
    with load_trace(out) as tp:
        rows = tp.query("""
            select p.pid, coalesce(extract_arg(s.arg_set_id, 'debug.call'), s.name) as call,
                   sum(coalesce(extract_arg(s.arg_set_id, 'debug.merged'), 1)) as calls,
                   sum(coalesce(extract_arg(s.arg_set_id, 'debug.bytes'),
                                max(coalesce(extract_arg(s.arg_set_id, 'debug.ret'), 0), 0))) as bytes
            from slice s join thread_track tt on s.track_id = tt.id join thread using (utid)
            join process p using (upid) where s.category in ('posix', 'stdio') group by 1, 2""")
    from iotrace_analyzer.analyses.summary import READ_CALLS, WRITE_CALLS

    exported: dict = {}
    for r in rows:
        calls, rb, wb = exported.get(r["pid"], (0, 0, 0))
        exported[r["pid"]] = (calls + r["calls"], rb + r["bytes"] * (r["call"] in READ_CALLS),
                              wb + r["bytes"] * (r["call"] in WRITE_CALLS))
    same = exported == analysis
    print(f"check: calls, bytes read and written per process {'equal' if same else 'DIFFER'}: "
          f"export {exported}, analysis {analysis} (analysis {took:.1f} s)")


def budget_case(args, work: str) -> None:
    """One process of N calls, exported within the budget (and in full with --full)."""
    from iotrace_analyzer.export.budget import DEFAULT_MAX_SLICES
    from iotrace_analyzer.export.filters import EventFilter
    from iotrace_analyzer.export.merge import budget_text, export

    traces = args.budget_traces
    if not traces:
        traces = args.keep_budget or os.path.join(work, "budget-traces")
        os.makedirs(traces, exist_ok=True)
        if not os.listdir(traces):
            t = time.perf_counter()
            make_processes(traces, 1, work, rounds=args.budget_events // 2)
            print(f"generated {args.budget_events} events in {time.perf_counter() - t:.1f} s")
    size_in = sum(os.path.getsize(os.path.join(traces, f)) for f in os.listdir(traces))
    print(f"input: {len(os.listdir(traces))} files, {size_in / 1e6:.1f} MB")
    budget = DEFAULT_MAX_SLICES if args.max_slices is None else args.max_slices
    runs = [("budget", budget)] + ([("full", 0)] if args.full else [])
    out = os.path.join(args.keep_budget or work, "budget.pftrace")
    for label, max_slices in runs:
        path = out if max_slices else os.path.join(work, "full.pftrace")
        cpu = _cpu_seconds()
        with PeakRss() as rss:
            t = time.perf_counter()
            res = export([traces], path, EventFilter(), jobs=args.jobs, max_slices=max_slices)
            took = time.perf_counter() - t
        b = res.budget
        slices = (f"slices {b['slices']} -> {b['written']}" if b else
                  f"slices {res.events - res.counters} (every one)")
        print(f"{label:8s} {took:7.1f} s  (cpu {_cpu_seconds() - cpu:6.1f} s)  "
              f"{os.path.getsize(path) / 2**20:8.1f} MiB  peak RSS {rss.peak / 2**20:6.0f} MiB  "
              f"{slices}", flush=True)
        if b:
            print(f"         {budget_text(b)}")
        if not max_slices:
            os.remove(path)
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    if args.check:
        check_sums(traces, out, work)
    if args.ui:
        from perfetto_ui import open_in_ui, unavailable_reason

        why = unavailable_reason()
        if why:
            print(f"Perfetto UI: skipped ({why})")
            return
        seen = open_in_ui(out, os.path.join(args.keep_budget or work, "budget-ui.png"), settle=15, queries=(
            "select count(*) as n from slice",
            "select t.name, count(*) as n from counter c join counter_track t on c.track_id = t.id "
            "group by 1 order by 1"))
        if not seen["loaded"]:
            print(f"Perfetto UI: not loaded in {seen['load_s']:.0f} s: {seen['error']}")
            return
        counters = ", ".join(f"{r['name']} ({r['n']})" for r in seen["queries"][1])
        print(f"Perfetto UI: loaded in {seen['load_s']:.1f} s, {seen['queries'][0][0]['n']} slices; "
              f"counter tracks: {counters}")


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
    ap.add_argument("--budget-events", type=int, default=0,
                    help="the budget case alone: one traced process of this many calls")
    ap.add_argument("--budget-traces", help="existing traces of that case (skip generation)")
    ap.add_argument("--keep-budget", help="write its traces and output here and keep them")
    ap.add_argument("--max-slices", type=int, help="the budget (default: the command's)")
    ap.add_argument("--full", action="store_true", help="also export every slice (no budget)")
    ap.add_argument("--ui", action="store_true", help="open the output in the Perfetto UI, headless")
    ap.add_argument("--check", action="store_true",
                    help="compare calls and bytes per process with iotrace-analyze's summary")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="iotrace-export-bench-")
    if args.budget_events or args.budget_traces:
        try:
            budget_case(args, work)
        finally:
            shutil.rmtree(work)
        return
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
