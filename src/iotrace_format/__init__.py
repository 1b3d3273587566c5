"""iotrace_format: the trace format's read side, shared by the `iotrace` commands (`cat`,
`view`), the analyzer and the exporter, and needing only its own compiled module, which
decompresses zstd itself (no pyarrow, Dask or numba: it imports them never).

* `reader`: finding trace files, their frames and the damage in them, read around.
* `_native`: zstd frames decompressed (without the GIL), compact blocks rendered to their JSON
  lines or decoded straight into columns, JSON event lines (iotrace's JSON form, DFTracer 1.x
  and 2.x) scanned into the same columns.
* `calls()`: the call table of csrc/format/calls.def (number, name, category, family);
  `IO_LAYERS`, `COUNTED_LAYERS`: the I/O layers those categories are; `LAYERS`: the layer split's.
"""

from __future__ import annotations

from functools import cache

from . import _native

COLUMNS = _native.COLUMNS
# what an `iotrace_process_info` event may change of its process after the file opened
# (docs/trace-format.md)
PROCESS_INFO_KEYS = ("role", "parent_pid", "worker_id", "mpi_rank", "mpi_size", "dist_rank", "dist_size")
# The variables of a process's `ranks` record (docs/trace-format.md) that give its rank, in
# order of preference: torchrun's, then Open MPI's, MPICH/PMI's and Slurm's.
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
# The I/O layers, from the library the program calls down to the kernel's interface: a call's
# layer is its events' category. A call of an upper layer makes calls of the layers below it
# (HDF5 calls MPI-IO or POSIX; an MPI-IO collective makes its aggregators' POSIX writes), so
# the job's I/O figures (bytes, call time, the I/O share of time) count the calls of the
# COUNTED layers only, and an upper layer's own time is its calls' time less the nested calls'.
# stdio's calls nest no traced POSIX call (glibc reads and writes for them inside itself, not
# through the interposed symbols): both are counted.
IO_LAYERS = ("hdf5", "pnetcdf", "mpiio", "stdio", "posix")
COUNTED_LAYERS = ("stdio", "posix")
# The layers of the layer split (each event's own time: its duration less the events nested
# in it on its thread): the program's own spans (@trace, regions, the C API: any category
# but the tracer's), MPI's start, end, waits and collectives, the I/O layers, and the
# tracer's process calls (fork, exec, spawn).
LAYERS = ("app", "mpi", *IO_LAYERS, "process")


# ... and the job's id: Slurm's, PBS's, LSF's, Flux's.
JOB_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID")


def job_of(ranks) -> str | None:
    """A process's job id from its `ranks` record (None when no variable gives one)."""
    if isinstance(ranks, dict):
        for var in JOB_VARIABLES:
            if ranks.get(var):
                return str(ranks[var])
    return None


def rank_of(info) -> int | None:
    """A process's rank from its `iotrace_process` record: the rank in MPI_COMM_WORLD the
    tracer asked MPI for once it started (`mpi_rank`), else torch.distributed's once its
    init_process_group returned (`dist_rank`), else from its `ranks` record of the launcher's
    variables (None when nothing gives one)."""
    if not isinstance(info, dict):
        return None
    for key in ("mpi_rank", "dist_rank"):
        v = info.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
    ranks = info.get("ranks")
    if not isinstance(ranks, dict):
        return None
    for var in RANK_VARIABLES:
        if var in ranks:
            try:
                return int(ranks[var])
            except (TypeError, ValueError):
                continue
    return None


@cache
def calls() -> tuple[tuple[int, str, str, str], ...]:
    """(number, name, category, family) of every call the tracer records."""
    return tuple(_native.calls())


@cache
def call_families() -> dict[str, str]:
    """Call name -> family (read, write, open, close, seek, sync, stat, namespace, dir, size,
    mmap, fd, cwd, process, copy)."""
    return {name: family for _n, name, _c, family in calls()}


def calls_of(*families: str) -> frozenset[str]:
    """The names of the calls of these families."""
    return frozenset(n for n, f in call_families().items() if f in families)
