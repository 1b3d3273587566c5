"""Benchmark of iotrace-analyze: time to Parquet + summary, and peak memory, on the shapes
jobs have.

Runs `python -m iotrace_analyzer TRACES -o OUT -q` in a fresh process and reports the wall
time from process start to summary written and the peak RSS of that process and its children
(Dask workers included), sampled every 20 ms, and the time the findings' rules took (part of
the wall time; `--analyzer-args=--no-findings` runs without them). No warm-up run: the first analysis after an
install pays whatever it pays (a compile cache, imports) in the first figure.

Shapes (--shapes, each `shape:events`):
  spread:N   N events over 16 processes per million (16..64), as a job of many ranks
  one:N      N events in one process, one thread, one trace (a training rank, a DLIO reader)
  many:N     5000 processes of N/5000 events each (5001 files), as an MD workflow of short tasks

Traces come from the real tracer: benchmarks/gen_events.c (lseek + pread of 1 byte in a loop,
forked processes) run under LD_PRELOAD=$(iotrace preload-path). When the tracer is not
installed, the documented format is written directly (say so in the output).

usage: python benchmarks/analyzer_bench.py [--shapes spread:1e6,spread:1e7,one:1e7,many:1e6]
                                           [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def preload_path() -> str | None:
    try:
        out = subprocess.run(["iotrace", "preload-path"], capture_output=True, text=True, timeout=30)
        path = out.stdout.strip()
        return path if out.returncode == 0 and os.path.exists(path) else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def generate_with_tracer(events: int, procs: int, out: str, lib: str, work: str) -> None:
    exe = os.path.join(work, "gen_events")
    if not os.path.exists(exe):
        subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "gen_events.c")], check=True)
    rounds = max(events // (2 * procs), 1)
    env = dict(os.environ, LD_PRELOAD=lib, IOTRACE_DIR=out)
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    subprocess.run([exe, data, str(rounds), str(procs)], env=env, check=True)


def generate_direct(events: int, procs: int, out: str) -> None:
    """The documented format written by Python (fallback when the tracer is missing)."""
    import zstandard

    per = events // procs
    cctx = zstandard.ZstdCompressor(level=3)
    for k in range(procs):
        pid = 10000 + k
        fh = f"{0x1234abcd0000 + k:016x}"
        head = (f'[\n{{"ph":"M","name":"iotrace_process","pid":{pid},"tid":{pid},"args":{{"version":1,'
                f'"hostname":"bench","pid":{pid},"ppid":1,"exe":"/bin/gen","cmdline":["gen"],'
                f'"wall_ns":1700000000000000000,"mono_ns":1000000000,"role":"fork","ranks":{{}},'
                f'"compression":"zstd"}}}},\n{{"ph":"M","name":"FH","pid":{pid},"tid":{pid},'
                f'"args":{{"name":"/tmp/data-{k}.bin","value":"{fh}"}}}},\n')
        with open(os.path.join(out, f"gen-bench-{pid}.pfw.zst"), "wb") as f:
            f.write(cctx.compress(head.encode()))
            t = 1_000_000_000
            for start in range(0, per, 20000):
                lines = []
                for i in range(start, min(per, start + 20000)):
                    t += 1500
                    if i % 2:
                        lines.append(f'{{"ph":"X","name":"pread64","cat":"posix","pid":{pid},"tid":{pid},'
                                     f'"ts":{t // 1000}.{t % 1000:03d},"dur":0.875,"args":{{"fhash":"{fh}",'
                                     f'"fd":3,"size":1,"offset":{i % 4096},"ret":1}}}},\n')
                    else:
                        lines.append(f'{{"ph":"X","name":"lseek64","cat":"posix","pid":{pid},"tid":{pid},'
                                     f'"ts":{t // 1000}.{t % 1000:03d},"dur":0.431,"args":{{"fhash":"{fh}",'
                                     f'"fd":3,"offset":{i % 4096},"ret":{i % 4096},"flags":0}}}},\n')
                f.write(cctx.compress("".join(lines).encode()))
            f.write(cctx.compress(f'{{"ph":"M","name":"iotrace_end","pid":{pid},"tid":{pid},'
                                  f'"args":{{"events":{per + 2},"reason":"exit"}}}}]\n'.encode()))


def run_analyzer(traces: str, out: str, extra: list[str]) -> tuple[float, float, int, dict]:
    """(wall s, CPU s of the process tree, peak RSS bytes, summary)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ)  # the installed package (pip install ".[analyze]")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "iotrace_analyzer", traces, "-o", out, "-q",
                             "--no-progress", *extra], env=env)
    ps = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            rss = ps.memory_info().rss + sum(c.memory_info().rss for c in ps.children(recursive=True))
            peak = max(peak, rss)
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode:
        raise SystemExit(f"iotrace-analyze failed with exit code {proc.returncode}")
    with open(os.path.join(out, "summary.json")) as f:
        return wall, cpu, peak, json.load(f)


def procs_of(shape: str, n: int) -> int:
    return {"spread": min(64, max(16, n // 1_000_000 * 16)), "one": 1, "many": 5000}[shape]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="spread:1e6,spread:1e7,one:1e7,many:1e6",
                    help="comma-separated shape:events (spread, one, many)")
    ap.add_argument("--keep", help="folder for the generated traces (reused when present)")
    ap.add_argument("--direct", action="store_true", help="write the format directly, without the tracer")
    ap.add_argument("--analyzer-args", default="", help="extra arguments for iotrace-analyze")
    args = ap.parse_args()
    lib = None if args.direct else preload_path()
    source = f"the real tracer ({lib})" if lib else "the documented format written directly (tracer not installed)"
    print(f"traces generated by {source}; machine: {os.cpu_count()} cores, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GiB")
    base = args.keep or tempfile.mkdtemp(prefix="iotrace-bench-")
    try:
        for item in args.shapes.split(","):
            shape, n = item.split(":")
            n = int(float(n))
            procs = procs_of(shape, n)
            traces = os.path.join(base, f"traces-{shape}-{n}")
            if not os.path.isdir(traces) or not os.listdir(traces):
                os.makedirs(traces, exist_ok=True)
                t = time.perf_counter()
                if lib:
                    generate_with_tracer(n, procs, traces, lib, base)
                else:
                    generate_direct(n, procs, traces)
                print(f"generated {n:,} events in {time.perf_counter() - t:.1f} s")
            out = os.path.join(base, f"out-{n}")
            shutil.rmtree(out, ignore_errors=True)
            load = os.getloadavg()[0]
            wall, cpu, peak, S = run_analyzer(traces, out, args.analyzer_args.split())
            stored = S["input"]["stored_bytes"]
            print(f"{shape:<6} {S['job']['events']:>12,} events  {S['input']['files']:>5} files  "
                  f"{stored / 2**20:8.1f} MiB stored  engine {S['input']['engine']:<5}  "
                  f"{wall:6.2f} s to Parquet + summary  ({S['job']['events'] / wall / 1e6:4.2f} M events/s)  "
                  f"CPU {cpu:6.2f} s  peak RSS {peak / 2**30:5.2f} GiB  "
                  f"rules {S['input'].get('findings_seconds', 0):.3f} s ({len(S.get('findings', []))} findings)  "
                  f"[load average before: {load:.1f}]", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
