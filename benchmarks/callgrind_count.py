"""Instructions a command runs, counted by valgrind's callgrind: a figure a busy machine does not
blur (benchmarks/hdf5_overhead.py and mpiio_overhead.py --instructions)."""
from __future__ import annotations

import subprocess


def instructions(argv: list[str], env: dict, launcher: list[str] = ()) -> int:
    """callgrind's total for `argv` (run under `launcher`, e.g. mpirun, whose own are not counted)."""
    r = subprocess.run([*launcher, "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
                       env=env, check=True, capture_output=True, text=True)
    line = next(x for x in r.stderr.splitlines() if "refs:" in x)
    return int(line.split()[-1].replace(",", ""))
