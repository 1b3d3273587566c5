"""iotrace: low-overhead dataflow tracing for AI and HPC workloads.

    @iotrace.trace                        # a complete event per call
    with iotrace.region("ckpt", step=i):  # a complete event per block
    for batch in iotrace.iter(loader, name="fetch"):   # one event per item

Python events go to the same per-process trace as the POSIX events of the LD_PRELOAD
interposer (`iotrace run -- python train.py`), on the same clock. Without the interposer,
`iotrace.init()` (or IOTRACE_ENABLE=1) traces the Python events alone.

Importing this module is cheap: the native core and the standard library, nothing heavy (no
Dask, pyarrow or psutil).
"""
from __future__ import annotations

import os

from . import _core
from ._version import __version__ as __version__
from .decorators import counter, instant, iter, region, trace
from .workers import dataloader_worker_init, set_role

FORMAT_VERSION = _core.FORMAT_VERSION

__all__ = [
    "trace", "region", "iter", "instant", "counter", "init", "flush", "finalize", "active",
    "enable_category", "disable_category", "set_role", "dataloader_worker_init", "preload_path",
    "trace_path",
]


def preload_path() -> str:
    """Path of the LD_PRELOAD library shipped in this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libiotrace.so")


def init(dir: str | None = None, name: str | None = None, sample_ms: int | None = None) -> bool:
    """Start tracing this process (already on under `iotrace run`). Returns whether it records."""
    ok = _core.init(dir or "", name or "")
    if ok:
        _after_start(sample_ms)
    return ok


def active() -> bool:
    return _core.active()


def flush() -> None:
    """Write everything recorded so far."""
    _core.flush()


def finalize() -> None:
    """Close this process's trace (it ends with `]`); later events are dropped."""
    _core.finalize()


def trace_path() -> str:
    """This process's trace file ("" until the first flush)."""
    return _core.trace_path()


def enable_category(*cats: str) -> None:
    for c in cats:
        _core.set_category(c, True)


def disable_category(*cats: str) -> None:
    for c in cats:
        _core.set_category(c, False)


def _categories_from_env() -> None:
    only = os.environ.get("IOTRACE_CATEGORIES")
    if only:
        _core.set_default_category_state(False)
        enable_category(*[c for c in only.split(",") if c])
    off = os.environ.get("IOTRACE_DISABLE_CATEGORIES")
    if off:
        disable_category(*[c for c in off.split(",") if c])


def _after_start(sample_ms: int | None = None) -> None:
    from . import auto, sampler, workers

    workers.install()
    auto.install()  # torch data loading, checkpoints, data libraries (off: IOTRACE_AUTO=0)
    if sample_ms or os.environ.get("IOTRACE_SAMPLE_MS"):
        sampler.start(sample_ms)
        os.register_at_fork(after_in_child=sampler._restart_in_child)


_categories_from_env()
if _core.active():  # preloaded: the core is already recording
    _after_start()
elif os.environ.get("IOTRACE_ENABLE", "").lower() in ("1", "true", "yes", "on"):
    init()
