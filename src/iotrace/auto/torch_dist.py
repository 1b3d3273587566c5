"""torch.distributed without annotations: each process's rank, and the ranks' clocks aligned.

When `torch.distributed.init_process_group` returns, the process's rank and world size are
said in its trace (`dist_rank`, `dist_size`: a job started by `mp.spawn` or by hand, whose
environment has no RANK, is named by rank too), and the ranks measure their clocks against
rank 0's as the MPI wrappers do at MPI_Init (docs/mpi.md, "Clocks across nodes"): rank 0 plays
a few ping-pongs with every other rank in turn, over gloo (the default group when it is gloo,
else a gloo group made for it and destroyed after), and each rank keeps the round with the
shortest round trip: its offset to rank 0's job clock within half of it, said in an
`iotrace_clock` event that the analyzer and the export apply. IOTRACE_DIST_CLOCK=0 leaves the
clocks alone (every rank of the job must be traced for the exchange, as for MPI's).

Nothing here may fail the program: any error leaves the trace without the record.
"""
from __future__ import annotations

import functools
import os
import sys

from .. import _core

# Rounds per rank: the shortest round trip bounds the error. More are played while the best is
# above GOOD_NS (a loaded machine, a round waiting for a time slice), up to MAX_ROUNDS and for
# EXTRA_NS at most (rank 0 serves the ranks in turn: the job waits for it).
ROUNDS, MAX_ROUNDS, GOOD_NS, EXTRA_NS = 10, 100, 200_000, 20_000_000
AT = "torch.distributed"


def _hook(c10d) -> None:  # noqa: ANN001
    real = c10d.init_process_group
    if getattr(real, "_iotrace", False):
        return

    @functools.wraps(real)
    def init_process_group(*args, **kwargs):
        out = real(*args, **kwargs)
        try:
            _after_init(c10d)
        except Exception:  # noqa: BLE001 - the program's init succeeded: so does this call
            pass
        return out

    init_process_group._iotrace = True
    c10d.init_process_group = init_process_group
    dist = sys.modules.get("torch.distributed")  # its name, re-exported, if bound already
    if dist is not None and getattr(dist, "init_process_group", None) is real:
        dist.init_process_group = init_process_group


def _wanted() -> bool:
    return os.environ.get("IOTRACE_DIST_CLOCK", "1").strip().lower() not in ("0", "false", "no", "off")


def _after_init(c10d) -> None:  # noqa: ANN001
    rank, size = c10d.get_rank(), c10d.get_world_size()
    _core.set_dist_rank(rank, size)
    if size > 1 and _wanted() and _core.active():
        _align(c10d, rank, size)


def _align(c10d, rank: int, size: int) -> None:  # noqa: ANN001
    import torch

    if c10d.get_backend() == "gloo":
        group = None
    elif c10d.is_gloo_available():
        group = c10d.new_group(backend="gloo")  # collective: every rank makes it here
    else:
        return
    try:
        buf = torch.zeros(1, dtype=torch.int64)
        if rank == 0:
            for r in range(1, size):  # each rank's rounds in turn; a rank says whether one follows
                more = 1
                while more:
                    c10d.recv(buf, src=r, group=group)
                    more = int(buf[0])
                    buf[0] = _core.job_clock_ns()
                    c10d.send(buf, dst=r, group=group)
            _core.clock_measured(AT, _core.now_ns(), 0, 0)  # the reference
        else:
            base = _core.job_clock_ns() - _core.now_ns()  # this process's wall_ns - mono_ns
            best, until = None, None
            for k in range(MAX_ROUNDS):
                t1 = _core.now_ns()
                more = k + 1 < ROUNDS or (best[0] > GOOD_NS and k + 1 < MAX_ROUNDS and t1 < until)
                buf[0] = int(more)
                c10d.send(buf, dst=0, group=group)
                c10d.recv(buf, src=0, group=group)
                t2 = _core.now_ns()
                if until is None:
                    until = t2 + EXTRA_NS  # the first round waited for rank 0's turn
                if best is None or t2 - t1 < best[0]:
                    mono = t1 + (t2 - t1) // 2
                    best = (t2 - t1, mono, int(buf[0]) - (mono + base))
                if not more:
                    break
            rtt, mono, offset = best
            _core.clock_measured(AT, mono, offset, rtt)
        c10d.barrier(group=group)  # every rank leaves together, as from init_process_group
    finally:
        if group is not None:
            c10d.destroy_process_group(group)
