"""Instructions the tracer adds per intercepted call on the traced thread, counted by callgrind.

Wall-clock figures on a shared VM move by ±30 % from run to run; instruction counts do not
(the same binary, input and environment give the same count). This runs the POSIX workload
of posix_overhead.py (benchmarks/posix_workload.c: lseek, read, pread, fstat) under
`valgrind --tool=callgrind --separate-threads=yes` at two sizes, untraced and traced, and
prints the instructions per call of the main thread inside the workload's loop (`rounds`,
--toggle-collect): the difference of the two sizes cancels what is fixed, the difference of
traced and untraced is the tracer's share on the traced thread. The writer thread's work, and
the exit's, are not counted.

Usage:
    python benchmarks/hot_path_instructions.py [--rounds 5000]
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import iotrace

HERE = os.path.dirname(os.path.abspath(__file__))


def main_thread_instructions(exe: str, rounds: int, env: dict, tmp: str) -> int:
    out = os.path.join(tmp, "cg.out")
    for f in glob.glob(out + "*"):
        os.unlink(f)
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", "--toggle-collect=rounds",
                    f"--callgrind-out-file={out}", exe, os.path.join(tmp, "data"), str(rounds)],
                   env=env, check=True, capture_output=True)
    with open(out + "-01") as f:  # thread 1: the program's main thread
        for line in f:
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError("no summary in callgrind output")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5000, help="rounds of 4 calls in the small run")
    a = ap.parse_args()
    if not shutil.which("valgrind"):
        print("valgrind not found (apt-get install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "posix_workload")
        subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "posix_workload.c"), "-ldl"], check=True)
        base = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
        traced = dict(base, LD_PRELOAD=os.environ.get("IOTRACE_BENCH_PRELOAD") or iotrace.preload_path(),
                      IOTRACE_DIR=os.path.join(tmp, "traces"))
        small, big = a.rounds, 2 * a.rounds
        calls = 4 * (big - small)
        per = {}
        for name, env in (("untraced", base), ("traced", traced)):
            per[name] = (main_thread_instructions(exe, big, env, tmp)
                         - main_thread_instructions(exe, small, env, tmp)) / calls
        print(f"main thread, instructions per call: untraced {per['untraced']:.1f}, "
              f"traced {per['traced']:.1f}")
        print(f"added by the tracer: {per['traced'] - per['untraced']:.1f} instructions per intercepted call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
