"""Overhead of the MPI wrappers: ns added per MPI-IO call on the calling thread.

One rank (mpirun -n 1) of benchmarks/mpiio_workload.c calls MPI_File_write_at (64 B at an
explicit offset, to a file in /dev/shm: the MPI library's cost, not the disk's) and
MPI_File_seek (no POSIX call under it) in blocks of 1000, recorded and paused in turn
(iotrace_pause); the difference is the tracer's cost per call. Three runs each:
  * traced: the MPI-IO call's record plus the record of the pwrite the library makes under it;
  * traced with IOTRACE_POSIX=0: the MPI-IO layer's own cost;
  * untraced: the same loop in a process without the tracer (whole-process noise included).
Each run's figures are kept, and the traced runs are set against the untraced run made just after
them: the median of those pairs is the cost against untraced (processes of one binary differ by
tens of ns a call from one to the next: page placement, caches).
With --instructions (valgrind), the same as instructions, which a busy machine does not blur:
the workload run under callgrind for 5 and for 15 blocks, traced with IOTRACE_POSIX=0, traced with
IOTRACE_MPI=0 too (every MPI call passes through) and untraced; the differences between the two
lengths, per call, are what a recorded call adds to a passed-through one, and what passing
through adds to an untraced call.
Usage: python benchmarks/mpiio_overhead.py [--blocks 200] [--runs 5] [--instructions]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import callgrind_count
import iotrace

HERE = os.path.dirname(os.path.abspath(__file__))
PRELOAD = os.environ.get("IOTRACE_BENCH_PRELOAD") or iotrace.preload_path()


def mpirun() -> list[str]:
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    # without address randomisation (setarch -R), so that processes of one binary lay out their
    # memory alike: the untraced and traced runs then differ by the tracer, less by chance
    fixed = ["setarch", os.uname().machine, "-R"] if shutil.which("setarch") else []
    return [*fixed, "mpirun", "-n", "1", "--oversubscribe", *root]


def run(exe: str, target: str, blocks: int, env: dict) -> list[float]:
    out = subprocess.run([*mpirun(), exe, target, str(blocks)], env=env, check=True, capture_output=True,
                         text=True).stdout.split()
    return [float(x) for x in out[-4:]]


def instructions(exe: str, target: str, blocks: int, env: dict) -> int:
    return callgrind_count.instructions([exe, target, str(blocks)], env, mpirun())


def count(exe: str, target: str, traced: dict, base: dict) -> None:
    short, long_ = 5, 15
    runs = {"recorded": dict(traced, IOTRACE_POSIX="0"),
            "passed": dict(traced, IOTRACE_POSIX="0", IOTRACE_MPI="0"), "untraced": base}
    delta = {k: instructions(exe, target, long_, env) - instructions(exe, target, short, env)
             for k, env in runs.items()}
    calls = (long_ - short) * 2 * 2000  # blocks recorded and paused, each 1000 write_at + 1000 seek
    recorded = (long_ - short) * 2000  # the blocks recorded
    print("MPI-IO overhead in instructions (callgrind; MPI_File_write_at of 64 B and MPI_File_seek alike)")
    print(f"  a recorded call beside a passed-through one: {(delta['recorded'] - delta['passed']) / recorded:.0f}")
    print(f"  a passed-through call beside an untraced one: {(delta['passed'] - delta['untraced']) / calls:.0f}")
    print(f"  an untraced call: {delta['untraced'] / calls:.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, default=200, help="blocks of 1000 calls, recorded and paused each")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--instructions", action="store_true", help="count instructions under valgrind instead")
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
        if a.instructions:
            count(exe, target, traced, base)
            return 0
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
    # each traced run against the untraced run made just after it
    for k in ("traced", "traced, IOTRACE_POSIX=0"):
        w = statistics.median(r[0] - u[0] for r, u in zip(rows[k], rows["untraced"]))
        sk = statistics.median(r[2] - u[2] for r, u in zip(rows[k], rows["untraced"]))
        print(f"{k}: a recorded call against the untraced run after it (median of {a.runs} pairs): "
              f"write_at {w:+.1f} ns, seek {sk:+.1f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
