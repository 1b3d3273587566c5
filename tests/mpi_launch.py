"""MPI jobs as the tests start them: mpirun's arguments, and a run that starts again when Open
MPI 4's launcher loses the race between a rank's exit and the notice of its MPI_Finalize.

That race ("mpirun has exited due to process rank N with PID 0 on node ... exiting improperly",
open-mpi/ompi#7833, not fixed in the 4.x Debian ships) fails 1 run in 10-15 on this 2-core VM
with busy loops and a writing disk beside it, traced or not (2 of 30 traced, 4 of 30 untraced,
every rank having printed its last line): the launcher's fault, not the job's nor the tracer's.
A run that fails any other way is returned as it is."""
from __future__ import annotations

import os
import shutil
import subprocess

ATTEMPTS = 3


def mpirun(n: int) -> list[str]:
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return ["mpirun", "-n", str(n), "--oversubscribe", *root]


def lost_exit_race(r: subprocess.CompletedProcess) -> bool:
    out = r.stdout + r.stderr if isinstance(r.stdout, str) else (r.stdout + r.stderr).decode(errors="replace")
    return r.returncode != 0 and "with PID 0 on" in out and "exiting improperly" in out


def run(cmd: list[str], *, fresh=(), check: bool = False, **kw) -> subprocess.CompletedProcess:
    """subprocess.run(cmd) with its output captured, again (at most ATTEMPTS runs) while mpirun
    reports the exit race; the folders in `fresh` (the traces) are emptied before each run (made
    again where they were there before the first)."""
    kw.setdefault("capture_output", True)
    existed = [os.path.isdir(d) for d in fresh]
    for attempt in range(ATTEMPTS):
        for d, made in zip(fresh, existed):
            if attempt:
                shutil.rmtree(d, ignore_errors=True)
                if made:
                    os.makedirs(d)
        r = subprocess.run(cmd, **kw)
        if not lost_exit_race(r):
            break
    if check:
        r.check_returncode()
    return r
