"""Benchmark of the report page (OUT/report.html): its size, the time iotrace-analyze takes to
write it, and the time headless Chromium takes to open it (load event, every plot drawn), on
the shapes jobs have.

Shapes (--shapes, each `shape:events`):
  job:N     4 ranks with 2 data-loader workers each (12 processes): POSIX reads and writes on
            300 files, Python steps around them, a counter (export_bench.make_job: the format
            written as the tracer writes it)
  procs:N   1000 processes of N/1000 events each: benchmarks/gen_events.c under the tracer
            (lseek + pread rounds), 1001 traces

usage: python benchmarks/report_bench.py [--shapes job:1e6,job:1e7,procs:1e7] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

PROCESSES = 1000


def generate(shape: str, n: int, traces: str, scratch: str) -> None:
    import export_bench

    os.makedirs(traces, exist_ok=True)
    if shape == "job":
        export_bench.make_job(traces, n)
    else:
        export_bench.make_processes(traces, PROCESSES, scratch, rounds=max(n // (2 * PROCESSES), 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="job:1e6,job:1e7,procs:1e7")
    ap.add_argument("--keep", help="folder for the generated traces (reused when present)")
    ap.add_argument("--no-browser", action="store_true", help="only the size and the time to write")
    args = ap.parse_args()
    base = args.keep or tempfile.mkdtemp(prefix="iotrace-report-bench-")
    try:
        for item in args.shapes.split(","):
            shape, n = item.split(":")
            n = int(float(n))
            traces = os.path.join(base, f"traces-{shape}-{n}")
            if not os.path.isdir(traces) or not os.listdir(traces):
                t = time.perf_counter()
                generate(shape, n, traces, base)
                print(f"generated {shape}:{n:,} in {time.perf_counter() - t:.1f} s", flush=True)
            out = os.path.join(base, f"out-{shape}-{n}")
            shutil.rmtree(out, ignore_errors=True)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "iotrace_analyzer", traces, "-o", out, "-q", "--no-parquet",
                            "--no-progress"], check=True)
            wall = time.perf_counter() - t
            with open(os.path.join(out, "summary.json")) as f:
                S = json.load(f)
            page = os.path.join(out, "report.html")
            line = (f"{shape:<6} {S['job']['events']:>12,} events  {S['job']['processes']:>5} processes  "
                    f"page {os.path.getsize(page) / 2**20:5.2f} MiB  written in {S['input']['report_seconds']:.3f} s "
                    f"(analysis in all {wall:.2f} s)")
            if not args.no_browser:
                from browser import open_page

                t = time.perf_counter()
                opened = open_page(page, os.path.join(out, "report.png"))
                total = time.perf_counter() - t
                drawn = sum(p["drawn"] > 0 for p in opened["plots"])
                line += (f"  Chromium: load event {opened['load_ms'] / 1000:.2f} s, {drawn}/{len(opened['plots'])} "
                         f"plots drawn, {len(opened['console'])} console messages "
                         f"(browser start to screenshot {total:.1f} s)")
            print(line, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
