"""Overhead of the MPI wrappers: ns added per MPI-IO call on the calling thread.

One rank (mpirun -n 1) of benchmarks/mpiio_workload.c calls MPI_File_write_at (64 B at an
explicit offset, to a file in /dev/shm: the MPI library's cost, not the disk's) and
MPI_File_seek (no POSIX call under it) in blocks of 1000, recorded and paused in turn
(iotrace_pause); the difference is the tracer's cost per call. Three runs each:
  * traced: the MPI-IO call's record plus the record of the pwrite the library makes under it;
  * traced with IOTRACE_POSIX=0: the MPI-IO layer's own cost;
  * untraced: the same loop in a process without the tracer (whole-process noise included).
Usage: python benchmarks/mpiio_overhead.py [--blocks 200] [--runs 5]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import iotrace

HERE = os.path.dirname(os.path.abspath(__file__))
PRELOAD = os.environ.get("IOTRACE_BENCH_PRELOAD") or iotrace.preload_path()


def mpirun() -> list[str]:
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return ["mpirun", "-n", "1", "--oversubscribe", *root]


def run(exe: str, target: str, blocks: int, env: dict) -> list[float]:
    out = subprocess.run([*mpirun(), exe, target, str(blocks)], env=env, check=True, capture_output=True,
                         text=True).stdout.split()
    return [float(x) for x in out[-4:]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, default=200, help="blocks of 1000 calls, recorded and paused each")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    if not (shutil.which("mpicc") and shutil.which("mpirun")):
        print("no MPI (mpicc, mpirun): install openmpi-bin libopenmpi-dev", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        exe = os.path.join(tmp, "mpiio_workload")
        subprocess.run(["mpicc", "-O2", "-o", exe, os.path.join(HERE, "mpiio_workload.c"), "-ldl"], check=True)
        target = os.path.join(shm, "f.dat")
        base = dict(os.environ)
        base.pop("LD_PRELOAD", None)
        traced = dict(base, LD_PRELOAD=PRELOAD, IOTRACE_DIR=os.path.join(tmp, "t"))
        mpi_only = dict(traced, IOTRACE_POSIX="0")
        rows: dict[str, list] = {"traced": [], "traced, IOTRACE_POSIX=0": [], "untraced": []}
        for _ in range(a.runs):
            rows["traced"].append(run(exe, target, a.blocks, traced))
            rows["traced, IOTRACE_POSIX=0"].append(run(exe, target, a.blocks, mpi_only))
            rows["untraced"].append(run(exe, target, a.blocks, base))
    med = {k: [statistics.median(r[i] for r in v) for i in range(4)] for k, v in rows.items()}
    print(f"MPI-IO overhead, median of {a.runs} runs of {a.blocks} x 1000 calls each (ns per call)")
    print(f"{'':26} {'write_at rec':>12} {'paused':>8} {'added':>7}   {'seek rec':>8} {'paused':>8} {'added':>7}")
    for k, (wr, wp, sr, sp) in med.items():
        if k == "untraced":
            print(f"{k:26} {wr:12.1f} {'':>8} {'':>7}   {sr:8.1f}")
        else:
            print(f"{k:26} {wr:12.1f} {wp:8.1f} {wr - wp:7.1f}   {sr:8.1f} {sp:8.1f} {sr - sp:7.1f}")
    u = med["untraced"]
    t = med["traced, IOTRACE_POSIX=0"]
    print(f"paused traced process against an untraced one: write_at {t[1] - u[0]:+.1f} ns, seek {t[3] - u[2]:+.1f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
