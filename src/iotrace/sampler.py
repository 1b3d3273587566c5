"""System counters (IOTRACE_SAMPLE_MS): CPU %, RSS, I/O bytes and open files of this process,
written as counter events by a daemon thread. psutil is imported only when sampling is on."""
from __future__ import annotations

import os
import threading

from . import _core

_thread: threading.Thread | None = None


def _run(proc, period_s: float, stop: threading.Event) -> None:
    import psutil

    while not stop.wait(period_s):
        if not _core.active():
            continue
        try:
            with proc.oneshot():
                mem = proc.memory_info()
                values = {"cpu_percent": proc.cpu_percent(None), "rss_bytes": mem.rss}
                try:
                    io = proc.io_counters()
                    values["read_bytes"] = io.read_bytes
                    values["write_bytes"] = io.write_bytes
                except (psutil.AccessDenied, AttributeError):
                    pass
                values["open_files"] = proc.num_fds()
        except psutil.Error:
            continue
        _core.counter("process", values)


def start(period_ms: int | None = None) -> bool:
    """Start sampling every `period_ms` (default: IOTRACE_SAMPLE_MS). Returns whether it runs."""
    global _thread
    if period_ms is None:
        period_ms = int(os.environ.get("IOTRACE_SAMPLE_MS", "0") or 0)
    if period_ms <= 0 or (_thread is not None and _thread.is_alive()):
        return _thread is not None and _thread.is_alive()
    # psutil is imported here, not in the thread: an import makes hundreds of syscalls that
    # each release the GIL, and a thread importing beside a busy Python loop waits a switch
    # interval (5 ms) after each one: the first sample came ~0.8 s late in such a program.
    import psutil

    proc = psutil.Process()
    proc.cpu_percent(None)
    stop = threading.Event()
    _thread = threading.Thread(target=_run, args=(proc, period_ms / 1000.0, stop),
                               name="iotrace-sampler", daemon=True)
    _thread.start()
    return True


def _restart_in_child() -> None:
    global _thread
    _thread = None
    start()
