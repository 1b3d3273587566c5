"""Overhead of the POSIX interposer: ns added per intercepted call, and bytes per event on disk.

Runs a C workload (benchmarks/posix_workload.c, 4 calls a round) untraced and traced in
alternation and prints the median over the pairs: the wall-clock overhead of the traced loop
(what the program feels while the writer thread has a core of its own) and the CPU overhead of
the whole process (what the machine pays, writer included). Usage:
    python benchmarks/posix_overhead.py [--rounds 100000] [--pairs 7]
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

import zstandard

HERE = os.path.dirname(os.path.abspath(__file__))


def build(tmp: str) -> str:
    exe = os.path.join(tmp, "posix_workload")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "posix_workload.c")], check=True)
    return exe


def run(exe: str, data: str, rounds: int, env: dict | None) -> tuple[int, int, float]:
    """(loop wall ns, calls, whole-process CPU s: user + sys, the writer thread included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([exe, data, str(rounds)], env=env, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ns, calls = out.split()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return int(ns), int(calls), cpu


def count_events(path: str) -> int:
    with open(path, "rb") as f:
        text = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()
    return text.count(b"\n") - 1  # minus the "[" line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100000, help="rounds of 4 calls (default 100000 = 400k calls)")
    ap.add_argument("--pairs", type=int, default=7, help="traced/untraced pairs (median taken)")
    ap.add_argument("--level", type=int, default=None, help="zstd level (IOTRACE_COMPRESSION_LEVEL)")
    args = ap.parse_args()
    import iotrace

    with tempfile.TemporaryDirectory() as tmp:
        exe = build(tmp)
        data = os.path.join(tmp, "data.bin")
        deltas, cpu_deltas, plain, sizes, events = [], [], [], [], []
        for i in range(args.pairs):
            base_ns, calls, base_cpu = run(exe, data, args.rounds, dict(os.environ, IOTRACE_ENABLE="0"))
            out = os.path.join(tmp, f"trace{i}")
            env = dict(os.environ, LD_PRELOAD=iotrace.preload_path(), IOTRACE_DIR=out)
            if args.level:
                env["IOTRACE_COMPRESSION_LEVEL"] = str(args.level)
            traced_ns, _, traced_cpu = run(exe, data, args.rounds, env)
            (trace,) = glob.glob(os.path.join(out, "*.pfw.zst"))
            plain.append(base_ns / calls)
            deltas.append((traced_ns - base_ns) / calls)
            cpu_deltas.append((traced_cpu - base_cpu) * 1e9 / calls)
            sizes.append(os.path.getsize(trace))
            events.append(count_events(trace))
        per_event = [s / e for s, e in zip(sizes, events)]
        print(f"workload: {calls} intercepted calls per run (lseek, read, pread, fstat), {args.pairs} pairs")
        print(f"untraced: {statistics.median(plain):.1f} ns per call (median)")
        print(f"overhead: {statistics.median(deltas):.1f} ns per intercepted call (median; "
              f"min {min(deltas):.1f}, max {max(deltas):.1f})   target <= 150")
        print(f"cpu:      {statistics.median(cpu_deltas):.1f} ns of CPU per intercepted call (median; the "
              f"traced thread plus the writer thread's JSON encoding and compression, whole process)")
        print(f"trace:    {statistics.median(per_event):.2f} bytes per event on disk "
              f"({statistics.median(sizes)} bytes, {statistics.median(events)} events)   target <= 6")
    return 0


if __name__ == "__main__":
    sys.exit(main())
