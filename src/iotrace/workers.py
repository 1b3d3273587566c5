"""Worker processes and threads: roles, parents and thread names in the trace.

fork children already get their own trace from the core (atfork handlers); this adds what only
Python knows: that a child is a multiprocessing worker, and the names of Python threads.
"""
from __future__ import annotations

import os
import threading

from . import _core, sampler


def set_role(role: str, parent_pid: int = 0, worker_id: int = -1) -> None:
    """Name this process's role (e.g. "dataloader") in its trace; call early in the worker."""
    _core.set_process_info(role, parent_pid, worker_id)


def dataloader_worker_init(worker_id: int) -> None:
    """`DataLoader(worker_init_fn=iotrace.dataloader_worker_init)` labels loader workers."""
    _core.set_process_info("dataloader", os.getppid(), worker_id)


_patched = False


def install() -> None:
    """Hooks, once per interpreter: cheap, and no import of multiprocessing until it is used."""
    global _patched
    if _patched:
        return
    _patched = True
    original = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def _bootstrap_inner(self: threading.Thread) -> None:
        _core.thread_name(self.name)
        original(self)

    threading.Thread._bootstrap_inner = _bootstrap_inner  # type: ignore[attr-defined]
    if threading.current_thread() is threading.main_thread():
        _core.thread_name("MainThread")

    # os._exit runs no atexit handler: fork-started pool workers end with it. Their last
    # counter sample is taken here (a no-op unless sampling); and without the interposer
    # nothing else sees os._exit: close the trace first, or it is lost.
    _exit = os._exit
    interposing = _core.interposing()

    def _exit_traced(status: int) -> None:
        sampler.last_sample()
        if not interposing:
            _core.finalize("_exit")
        _exit(status)

    os._exit = _exit_traced

    # Every multiprocessing child (fork, spawn, forkserver) starts in BaseProcess._bootstrap,
    # with its Process object (parent pid, identity) unpickled: the moment to say "worker".
    from .post_import import when_imported

    when_imported("multiprocessing.process", _hook_bootstrap)


def _hook_bootstrap(process) -> None:  # noqa: ANN001
    bootstrap = process.BaseProcess._bootstrap
    if getattr(bootstrap, "_iotrace", False):
        return

    def _bootstrap(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        try:
            identity = getattr(self, "_identity", ())  # (3,): the third worker of its pool
            _core.set_process_info("worker", int(getattr(self, "_parent_pid", 0) or os.getppid()),
                                   identity[-1] - 1 if identity else -1)
        except Exception:
            pass
        return bootstrap(self, *args, **kwargs)

    _bootstrap._iotrace = True  # type: ignore[attr-defined]
    process.BaseProcess._bootstrap = _bootstrap
