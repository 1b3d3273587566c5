"""Benchmark: cost per distinct file. A job reading 1,000,000 distinct 1 KiB files once (one
file per sample, ImageNet's shape) against the same events on 64 files, for `iotrace-analyze`
and `iotrace export` (issue 24: "cost follows files, not events").

Cases (--cases, comma-separated NAME, each FILES:PROCS):
  files1M-1p   1,000,000 files, one process
  files1M-8p   1,000,000 files, spread over 8 forked processes (and their parent)
  files64-1p   64 files, one process, the same 1,000,000 samples (9M events)
  files64-8p   64 files, 8 processes

Each sample makes 9 intercepted calls (benchmarks/many_files.c: stat, access, open, fstat,
lseek, read of 1 KiB, read at the end, fstat, close), so every case has 9M events. The traces
come from the real tracer (LD_PRELOAD=$(iotrace preload-path)) and are made once, under
--dir (default /tmp/iotrace-many-files): the 1 KiB files are created untraced, read under
the tracer, and deleted (--keep-data keeps them); a case's traces are reused when present.

Measured, each in a fresh process (no warm-up: the first run after an install is counted):
  analyze  `python -m iotrace_analyzer TRACES -o OUT -q --no-progress` (Parquet, summary.json,
           report.html), wall time from start to exit, CPU of the process tree, and the peak of
           the command's and all its descendants' (forked or Dask workers) memory summed: RSS
           every 10 ms (pages shared after fork counted once per process: an upper bound) and
           PSS every 200 ms (each shared page split between its sharers: what the run uses;
           reading it costs the kernel 7 ms per GiB, so not more often on 2 cores)
  export   `iotrace export TRACES -o OUT/job.pftrace`, the same figures
Each line also gives the load average and the seconds of `sum(range(10**7))` just before the
command: the VM's speed in that minute, which changes by a third from one to the next.

usage: python benchmarks/many_files_bench.py [--cases files1M-1p,files1M-8p,files64-1p]
           [--dir DIR] [--repeat N] [--only analyze|export] [--analyzer-args ARGS]

To measure another build of the analyzer than the installed one (a copy of an installed
iotrace_analyzer, say), put it first on PYTHONPATH: every command runs with this environment.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = 1_000_000
PAGE = os.sysconf("SC_PAGE_SIZE")
CASES = {"files1M-1p": (1_000_000, 1), "files1M-8p": (1_000_000, 8),
         "files64-1p": (64, 1), "files64-8p": (64, 8)}


def preload_path() -> str:
    out = subprocess.run(["iotrace", "preload-path"], capture_output=True, text=True, timeout=60)
    path = out.stdout.strip()
    if out.returncode or not os.path.exists(path):
        raise SystemExit("the tracer is not installed (iotrace preload-path): pip install .")
    return path


def workload(base: str) -> str:
    exe = os.path.join(base, "many_files")
    src = os.path.join(HERE, "many_files.c")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
    return exe


def traces_of(base: str, case: str, lib: str, keep_data: bool) -> str:
    """The case's trace folder, generated when missing."""
    files, procs = CASES[case]
    out = os.path.join(base, f"traces-{case}")
    done = os.path.join(out, ".done")
    if os.path.exists(done):
        return out
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    exe = workload(base)
    data = os.path.join(base, f"data-{files}")
    t = time.perf_counter()
    if not os.path.exists(os.path.join(data, ".done")):
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(data)
        subprocess.run([exe, "create", data, str(files)], check=True)
        open(os.path.join(data, ".done"), "w").close()
    env = dict(os.environ, LD_PRELOAD=lib, IOTRACE_DIR=out)
    subprocess.run([exe, "read", data, str(files), str(procs), str(SAMPLES)], env=env, check=True)
    open(done, "w").close()
    stored = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"# generated {case}: {len(os.listdir(out)) - 1} trace file(s), {stored / 2**20:.1f} MiB, "
          f"{time.perf_counter() - t:.0f} s", flush=True)
    if not keep_data and files > 64:
        shutil.rmtree(data, ignore_errors=True)
    return out


def pss(pid: int) -> int:
    """A process's proportional set size in bytes (its private pages and its share of those it
    shares: forked workers share their parent's), 0 when unknown."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """The pid and all its descendants (the children files of each thread, /proc)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def run(cmd: list[str]) -> tuple[float, float, int, int, int]:
    """(wall s, CPU s of the process tree, peak summed RSS and peak summed PSS of the process
    tree in bytes, exit status). RSS every 10 ms, the process tree every 50 ms, PSS every 200 ms
    (reading /proc/PID/smaps_rollup walks the page tables: 7 ms for a 1 GiB analyzer; psutil's
    process scan and PSS every 10 ms took 30% of a core, 0.7 s of a 6 s run on 2 cores)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    peak = peak_pss = 0
    procs: list[int] = [proc.pid]
    k = 0
    while proc.poll() is None:
        if k % 5 == 0:
            procs = _tree(proc.pid)
        rss = sum(_rss(p) for p in procs)
        peak = max(peak, rss)
        if k % 20 == 0 and rss > peak_pss:  # PSS <= RSS: else no new peak (reading it walks the page tables)
            peak_pss = max(peak_pss, sum(pss(p) for p in procs))
        k += 1
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        print(f"# {' '.join(cmd)} failed with exit code {proc.returncode}", flush=True)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, peak, peak_pss, proc.returncode


def export_cmd() -> list[str]:
    exe = shutil.which("iotrace")
    return [exe, "export"] if exe else [sys.executable, "-m", "iotrace_analyzer.export"]


def speed() -> float:
    """Seconds of a fixed pure-Python loop (`sum(range(10**7))`), taken before each command:
    this VM's speed changes by a third from minute to minute, and a figure is read against
    the minute it was taken in."""
    t = time.perf_counter()
    sum(range(10**7))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="files1M-1p,files1M-8p,files64-1p",
                    help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--dir", default="/tmp/iotrace-many-files", help="traces are made once, here")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each measure")
    ap.add_argument("--only", choices=("analyze", "export"), help="one of the two commands")
    ap.add_argument("--keep-data", action="store_true", help="keep the 1 KiB files after tracing")
    ap.add_argument("--analyzer-args", default="", help="extra arguments for iotrace-analyze")
    args = ap.parse_args()
    cases = args.cases.split(",")
    for c in cases:
        if c not in CASES:
            raise SystemExit(f"unknown case {c} ({', '.join(CASES)})")
    os.makedirs(args.dir, exist_ok=True)
    lib = preload_path()
    print(f"# machine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
          f"tracer {lib}", flush=True)
    rows = []
    for case in cases:
        traces = traces_of(args.dir, case, lib, args.keep_data)
        out = os.path.join(args.dir, f"out-{case}")
        for _ in range(args.repeat):
            row = [case]
            if args.only != "export":
                shutil.rmtree(out, ignore_errors=True)
                load, pace = os.getloadavg()[0], speed()
                w, c, p, q, rc = run([sys.executable, "-m", "iotrace_analyzer", traces, "-o", out, "-q",
                                      "--no-progress", *args.analyzer_args.split()])
                row += [w, c, p, q, rc]
                print(f"{case:<11} analyze {w:6.2f} s  CPU {c:6.2f} s  peak RSS {p / 2**20:7.0f} MiB"
                      f"  PSS {q / 2**20:7.0f} MiB  [load before {load:.1f}, speed {pace:.3f} s]", flush=True)
            else:
                row += [None] * 5
            if args.only != "analyze":
                os.makedirs(out, exist_ok=True)
                load, pace = os.getloadavg()[0], speed()
                w, c, p, q, rc = run([*export_cmd(), traces, "-o", os.path.join(out, "job.pftrace")])
                row += [w, c, p, q, rc]
                print(f"{case:<11} export  {w:6.2f} s  CPU {c:6.2f} s  peak RSS {p / 2**20:7.0f} MiB"
                      f"  PSS {q / 2**20:7.0f} MiB  [load before {load:.1f}, speed {pace:.3f} s]", flush=True)
            else:
                row += [None] * 5
            rows.append(row)

    def f(v, kind):
        if v is None:
            return "-"
        return f"{v:.2f}" if kind == "s" else f"{v / 2**20:.0f}"

    def failed(rc):
        return f"  (exit {rc})" if rc else ""

    print("\n                     analyze                           export")
    print("case         events    wall s  CPU s  RSS MiB  PSS MiB   wall s  CPU s  RSS MiB  PSS MiB")
    for r in rows:
        print(f"{r[0]:<11} {9 * SAMPLES / 1e6:5.0f}M  {f(r[1], 's'):>8}  {f(r[2], 's'):>5}  {f(r[3], 'm'):>7}"
              f"  {f(r[4], 'm'):>7}{failed(r[5])}  {f(r[6], 's'):>7}  {f(r[7], 's'):>5}  {f(r[8], 'm'):>7}"
              f"  {f(r[9], 'm'):>7}{failed(r[10])}")


if __name__ == "__main__":
    main()
