"""Overhead of the POSIX interposer: ns added per intercepted call, and bytes per event on disk.

Runs a C workload (benchmarks/posix_workload.c, 4 calls a round) and prints medians of:
  * in-process alternation: one traced process records and pauses (iotrace_pause) blocks of
    1000 calls in turn; the difference is the tracer's cost per call on the traced thread.
    This is the precise figure: whole processes differ by ±20 % here in their syscall costs.
    It includes what a process pays once: the live file's first pages (about 5 MiB of chunks
    as a thread's chunks grow to IOTRACE_BUFFER_SIZE, ~1.5 us a page on ext4), about 10 ns a
    call at the default 100,000 rounds, nothing at 1,000,000 (--rounds).
  * whole-process pairs: the loop's wall time, untraced and traced processes in alternation.
  * CPU: user + sys of the whole process per call, the writer thread's encoding and
    compression included (what the machine pays, on the other core when there is one).
  * bytes per event of the trace file on disk, at the default resolution and then at each
    IOTRACE_RESOLUTION (ns, 10ns, 100ns, us; median of 3 runs each).
Each figure is given for both trace forms (IOTRACE_FORMAT): compact (the default: columns in
zstd frames, rendered back to JSON lines by `iotrace cat`) and json (the JSON lines themselves
in zstd frames, which `zstd -d` turns into what Perfetto opens).
Usage:
    python benchmarks/posix_overhead.py [--rounds 100000] [--pairs 7] [--resolution ns]
                                        [--forms compact,json]
"""
from __future__ import annotations

import argparse
import glob
import os
import resource
import statistics
import subprocess
import sys
import tempfile

import iotrace

HERE = os.path.dirname(os.path.abspath(__file__))
# IOTRACE_BENCH_PRELOAD: another build of libiotrace.so to measure (before/after a change)
PRELOAD = os.environ.get("IOTRACE_BENCH_PRELOAD") or iotrace.preload_path()


def build(tmp: str) -> str:
    exe = os.path.join(tmp, "posix_workload")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "posix_workload.c"), "-ldl"], check=True)
    return exe


def alternate(exe: str, data: str, rounds: int, env: dict) -> tuple[float, float]:
    """(ns per call recorded, ns per call paused) from one process."""
    out = subprocess.run([exe, data, str(rounds), "alternate"], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def run(exe: str, data: str, rounds: int, env: dict | None) -> tuple[int, int, float]:
    """(loop wall ns, calls, whole-process CPU s: user + sys, the writer thread included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([exe, data, str(rounds)], env=env, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ns, calls = out.split()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return int(ns), int(calls), cpu


def count_events(path: str) -> int:
    """Event lines of a trace file, either form (a compact one is rendered back to its lines)."""
    from iotrace_format import reader

    return sum(block.count(b"\n") for block in reader.iter_blocks(path)) - 1  # minus "["


def traced_env(out: str, form: str, args, **extra) -> dict:
    env = dict(os.environ, LD_PRELOAD=PRELOAD, IOTRACE_DIR=out, IOTRACE_FORMAT=form, **extra)
    if args.level:
        env["IOTRACE_COMPRESSION_LEVEL"] = str(args.level)
    if args.resolution:
        env["IOTRACE_RESOLUTION"] = args.resolution
    return env


def the_trace(out: str) -> str:
    (trace,) = glob.glob(os.path.join(out, "*.pfw.zst")) + glob.glob(os.path.join(out, "*.iotc.zst"))
    return trace


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100000, help="rounds of 4 calls (default 100000 = 400k calls)")
    ap.add_argument("--pairs", type=int, default=7, help="traced/untraced pairs (median taken)")
    ap.add_argument("--level", type=int, default=None, help="zstd level (IOTRACE_COMPRESSION_LEVEL)")
    ap.add_argument("--resolution", default=None, help="IOTRACE_RESOLUTION of the timed runs")
    ap.add_argument("--forms", default="compact,json", help="trace forms to measure (IOTRACE_FORMAT)")
    args = ap.parse_args()
    forms = args.forms.split(",")

    with tempfile.TemporaryDirectory() as tmp:
        exe = build(tmp)
        data = os.path.join(tmp, "data.bin")
        plain = []
        deltas = {f: [] for f in forms}
        cpu_deltas = {f: [] for f in forms}
        per_event = {f: [] for f in forms}
        for i in range(args.pairs):
            base_ns, calls, base_cpu = run(exe, data, args.rounds, dict(os.environ, IOTRACE_ENABLE="0"))
            plain.append(base_ns / calls)
            for form in forms:
                out = os.path.join(tmp, f"trace-{form}-{i}")
                traced_ns, _, traced_cpu = run(exe, data, args.rounds, traced_env(out, form, args))
                trace = the_trace(out)
                deltas[form].append((traced_ns - base_ns) / calls)
                cpu_deltas[form].append((traced_cpu - base_cpu) * 1e9 / calls)
                per_event[form].append(os.path.getsize(trace) / count_events(trace))
        alt = {form: [alternate(exe, data, args.rounds, traced_env(os.path.join(tmp, f"alt-{form}-{i}"), form, args))
                      for i in range(args.pairs)] for form in forms}
        print(f"workload: {calls} intercepted calls per run (lseek, read, pread, fstat), {args.pairs} pairs")
        print(f"untraced: {statistics.median(plain):.1f} ns per call (median; the syscalls themselves)")
        for form in forms:
            d = [on - off for on, off in alt[form]]
            print(f"[{form}]")
            print(f"  overhead: {statistics.median(d):.1f} ns per intercepted call, in-process alternation "
                  f"(median of {len(d)} runs; min {min(d):.1f}, max {max(d):.1f})   target <= 150")
            print(f"            {statistics.median(deltas[form]):.1f} ns per call, whole-process pairs (median; "
                  f"min {min(deltas[form]):.1f}, max {max(deltas[form]):.1f}: noisy, processes differ by their "
                  f"syscall costs)")
            print(f"  cpu:      {statistics.median(cpu_deltas[form]):.1f} ns of CPU per intercepted call (median; "
                  f"the traced thread plus the writer thread's encoding and compression, whole process)")
            print(f"  trace:    {statistics.median(per_event[form]):.2f} bytes per event on disk (median)   "
                  f"target <= 6")
        for form in forms:
            by_res = []
            for res in ("ns", "10ns", "100ns", "us"):
                per = []
                for i in range(3):
                    out = os.path.join(tmp, f"res-{form}-{res}-{i}")
                    run(exe, data, args.rounds, traced_env(out, form, args, IOTRACE_RESOLUTION=res))
                    trace = the_trace(out)
                    per.append(os.path.getsize(trace) / count_events(trace))
                by_res.append(f"{res} {statistics.median(per):.2f}")
            print(f"[{form}] bytes per event by IOTRACE_RESOLUTION (median of 3): {', '.join(by_res)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
