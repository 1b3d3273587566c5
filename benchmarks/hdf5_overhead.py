"""Overhead of the HDF5 wrappers: ns added per HDF5 call on the calling thread.

One process of benchmarks/hdf5_workload.c calls H5Dwrite and H5Dread of 8 doubles (64 B, a
hyperslab of a contiguous dataset, in a file in /dev/shm: HDF5's cost, not the disk's) in
blocks of 1000, recorded and paused in turn (iotrace_pause); the difference is the tracer's cost
per call: the call's record and what the tracer asks HDF5 for it (the selection's elements, the
memory type's size). HDF5 keeps such small transfers in its sieve buffer, so most make no POSIX
call. Three runs each:
  * traced: the HDF5 call's record plus those of the POSIX calls HDF5 makes under it;
  * traced with IOTRACE_POSIX=0: the HDF5 layer's own cost;
  * untraced: the same loop in a process without the tracer (whole-process noise included).
With --instructions (valgrind), the same as instructions, which a busy machine does not blur:
the workload run under callgrind for 5 and for 15 blocks, traced with IOTRACE_POSIX=0, traced with
IOTRACE_HDF5=0 too (every call passes through) and untraced; the differences between the two
lengths, per call, are what a recorded call adds to a passed-through one, and what passing
through adds to an untraced call.
The workload is built against the shared HDF5 pkg-config finds (hdf5-serial, hdf5-openmpi, hdf5).
Usage: python benchmarks/hdf5_overhead.py [--blocks 200] [--runs 5] [--instructions]
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


def hdf5_flags() -> list[str] | None:
    for pkg in ("hdf5-serial", "hdf5-openmpi", "hdf5"):
        r = subprocess.run(["pkg-config", "--cflags", "--libs", pkg], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split()
    return None


def run(exe: str, target: str, blocks: int, env: dict) -> list[float]:
    out = subprocess.run([exe, target, str(blocks)], env=env, check=True, capture_output=True,
                         text=True).stdout.split()
    return [float(x) for x in out[-4:]]


def instructions(exe: str, target: str, blocks: int, env: dict) -> int:
    return callgrind_count.instructions([exe, target, str(blocks)], env)


def count(exe: str, target: str, traced: dict, base: dict) -> None:
    short, long_ = 5, 15
    runs = {"recorded": dict(traced, IOTRACE_POSIX="0"),
            "passed": dict(traced, IOTRACE_POSIX="0", IOTRACE_HDF5="0"), "untraced": base}
    delta = {k: instructions(exe, target, long_, env) - instructions(exe, target, short, env)
             for k, env in runs.items()}
    calls = (long_ - short) * 2 * 2000  # blocks recorded and paused, each 1000 H5Dwrite + 1000 H5Dread
    recorded = (long_ - short) * 2000  # the blocks recorded
    print("HDF5 overhead in instructions (callgrind; H5Dwrite and H5Dread of 64 B alike)")
    print(f"  a recorded call beside a passed-through one: {(delta['recorded'] - delta['passed']) / recorded:.0f}")
    print(f"  a passed-through call beside an untraced one: {(delta['passed'] - delta['untraced']) / calls:.0f}")
    print(f"  an untraced call: {delta['untraced'] / calls:.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, default=200, help="blocks of 1000 calls, recorded and paused each")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--instructions", action="store_true", help="count instructions under valgrind instead")
    a = ap.parse_args()
    flags = hdf5_flags() if shutil.which("pkg-config") else None
    if flags is None:
        print("no HDF5 (pkg-config hdf5-serial / hdf5-openmpi / hdf5): install libhdf5-dev or "
              "libhdf5-openmpi-dev", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        exe = os.path.join(tmp, "hdf5_workload")
        subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "hdf5_workload.c"), *flags, "-ldl"],
                       check=True)
        target = os.path.join(shm, "f.h5")
        base = dict(os.environ)
        base.pop("LD_PRELOAD", None)
        traced = dict(base, LD_PRELOAD=PRELOAD, IOTRACE_DIR=os.path.join(tmp, "t"))
        hdf5_only = dict(traced, IOTRACE_POSIX="0")
        if a.instructions:
            count(exe, target, traced, base)
            return 0
        rows: dict[str, list] = {"traced": [], "traced, IOTRACE_POSIX=0": [], "untraced": []}
        for _ in range(a.runs):
            rows["traced"].append(run(exe, target, a.blocks, traced))
            rows["traced, IOTRACE_POSIX=0"].append(run(exe, target, a.blocks, hdf5_only))
            rows["untraced"].append(run(exe, target, a.blocks, base))
    med = {k: [statistics.median(r[i] for r in v) for i in range(4)] for k, v in rows.items()}
    print(f"HDF5 overhead, median of {a.runs} runs of {a.blocks} x 1000 calls each (ns per call)")
    print(f"{'':26} {'H5Dwrite rec':>12} {'paused':>8} {'added':>7}   {'H5Dread rec':>11} {'paused':>8} {'added':>7}")
    for k, (wr, wp, rr, rp) in med.items():
        if k == "untraced":
            print(f"{k:26} {wr:12.1f} {'':>8} {'':>7}   {rr:11.1f}")
        else:
            print(f"{k:26} {wr:12.1f} {wp:8.1f} {wr - wp:7.1f}   {rr:11.1f} {rp:8.1f} {rr - rp:7.1f}")
    u = med["untraced"]
    t = med["traced, IOTRACE_POSIX=0"]
    print(f"paused traced process against an untraced one: H5Dwrite {t[1] - u[0]:+.1f} ns, "
          f"H5Dread {t[3] - u[2]:+.1f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
