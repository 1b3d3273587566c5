"""System counters (IOTRACE_SAMPLE_MS): CPU %, RSS, I/O bytes and open files of this process,
written as counter events. psutil is imported only when sampling is on.

A process that samples records one sample when sampling starts (at import of iotrace, or in a
fork child at the fork), one every period from a daemon thread, and a last one as it ends
(atexit; os._exit, which fork-started workers end with: workers.py). A process shorter than a
period therefore still has two. Each sample's cpu_percent is the CPU time over the wall time
since the one before; the first one's since the process started (a fork child: since the fork).
A process killed by a signal has no last sample (no code of its runs as it dies).
"""
from __future__ import annotations

import os
import threading
import time

from . import _core

_thread: threading.Thread | None = None
_stop: threading.Event | None = None
_proc = None  # psutil.Process of this process, while sampling
_lock = threading.Lock()  # one sample at a time: the thread's and the main thread's last one
_ended = False  # the last sample is taken: no more
_atexit = False
_period_ms = 0  # for a fork child's restart (the period may have come from init, not the env)


def _cpu_since_start() -> float:
    """CPU % of this process since it started: CPU time (ns clock) over the time since the start
    in /proc/self/stat (clock ticks, so the elapsed time may read up to a tick long)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            start_ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        elapsed = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
        cpu = time.process_time()
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
    return round(100.0 * cpu / elapsed, 1) if elapsed > 0 else 0.0


def _sample(first: bool = False, last: bool = False) -> None:
    global _ended
    import psutil

    with _lock:
        proc = _proc
        if _ended or proc is None or not _core.active():
            return
        if last:
            _ended = True
        try:
            with proc.oneshot():
                mem = proc.memory_info()
                cpu = proc.cpu_percent(None)  # since the previous call
                values = {"cpu_percent": _cpu_since_start() if first else cpu, "rss_bytes": mem.rss}
                try:
                    io = proc.io_counters()
                    values["read_bytes"] = io.read_bytes
                    values["write_bytes"] = io.write_bytes
                except (psutil.AccessDenied, AttributeError):
                    pass
                values["open_files"] = proc.num_fds()
        except psutil.Error:
            return
        _core.counter("process", values)


def _run(period_s: float, stop: threading.Event) -> None:
    while not stop.wait(period_s):
        _sample()


def last_sample() -> None:
    """The process's last sample (atexit, os._exit): stops the thread. Once; a no-op when this
    process does not sample."""
    if _proc is None or _ended:
        return
    if _stop is not None:
        _stop.set()
    _sample(last=True)


def start(period_ms: int | None = None) -> bool:
    """Start sampling every `period_ms` (default: IOTRACE_SAMPLE_MS), with a first sample now.
    Returns whether it runs."""
    global _thread, _stop, _proc, _atexit, _period_ms
    if period_ms is None:
        period_ms = int(os.environ.get("IOTRACE_SAMPLE_MS", "0") or 0)
    if period_ms <= 0 or (_thread is not None and _thread.is_alive()):
        return _thread is not None and _thread.is_alive()
    # psutil is imported here, not in the thread: an import makes hundreds of syscalls that
    # each release the GIL, and a thread importing beside a busy Python loop waits a switch
    # interval (5 ms) after each one: the first sample came ~0.8 s late in such a program.
    import psutil

    _period_ms = period_ms
    _proc = psutil.Process()
    _sample(first=True)  # also primes cpu_percent for the thread's first sample
    if not _atexit:  # fork children inherit the registration
        import atexit

        atexit.register(last_sample)
        _atexit = True
    _stop = threading.Event()
    _thread = threading.Thread(target=_run, args=(period_ms / 1000.0, _stop),
                               name="iotrace-sampler", daemon=True)
    _thread.start()
    return True


def _restart_in_child() -> None:
    """After a fork: the parent's thread is gone here, and its lock may have been held."""
    global _thread, _stop, _proc, _lock, _ended
    _thread, _stop, _proc, _ended = None, None, None, False
    _lock = threading.Lock()
    start(_period_ms or None)
