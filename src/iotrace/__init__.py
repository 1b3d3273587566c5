"""iotrace: low-overhead dataflow tracing for AI and HPC workloads.

Importing this module is cheap: it loads the native core and nothing heavy (no Dask, pyarrow
or psutil).
"""
from __future__ import annotations

import os

from . import _core

__version__ = "0.1.0"
FORMAT_VERSION = _core.FORMAT_VERSION


def preload_path() -> str:
    """Path of the LD_PRELOAD library shipped in this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libiotrace.so")


def init(dir: str | None = None, name: str | None = None) -> bool:
    """Start tracing this process (Python events; POSIX too when preloaded)."""
    return _core.init(dir or "", name or "")


def flush() -> None:
    _core.flush()


def finalize() -> None:
    _core.finalize()


def trace_path() -> str:
    return _core.trace_path()
