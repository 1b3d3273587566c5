"""Worker processes and threads: roles, parents and thread names in the trace.

fork children already get their own trace from the core (atfork handlers); this adds what only
Python knows: that a child is a multiprocessing worker, and the names of Python threads.
"""
from __future__ import annotations

import os
import threading

from . import _core


def _mark_worker(_obj: object = None) -> None:
    import multiprocessing

    parent = multiprocessing.parent_process()
    identity = getattr(multiprocessing.current_process(), "_identity", ())  # (3,): worker 3
    _core.set_process_info("worker", parent.pid if parent is not None else os.getppid(),
                           identity[-1] - 1 if identity else -1)


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
    import sys

    # Without the interposer nothing sees os._exit (fork-started pool workers end with it):
    # close the trace first, or it is lost.
    if not _core.interposing():
        _exit = os._exit

        def _exit_traced(status: int) -> None:
            _core.finalize("_exit")
            _exit(status)

        os._exit = _exit_traced

    # A spawn child imports us while multiprocessing prepares it (before its after-fork hooks,
    # which spawn never runs): that is the moment to say "worker".
    mp_process = sys.modules.get("multiprocessing.process")
    if mp_process is not None and getattr(mp_process.current_process(), "_inheriting", False):
        _mark_worker()

    # multiprocessing runs its after-fork hooks in the children it forks (fork, forkserver),
    # after the start method's own work: the right moment to say "worker".
    if "multiprocessing" in sys.modules:
        _register_mp()
    else:
        _defer_until_imported("multiprocessing.util", _register_mp)


def _register_mp() -> None:
    from multiprocessing import util

    util.register_after_fork(_mark_worker, _mark_worker)


def _defer_until_imported(module: str, hook: "callable") -> None:
    import importlib.abc
    import sys

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):  # noqa: ANN001
            if name != module:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None:
                return spec
            loader = spec.loader
            exec_module = loader.exec_module

            def exec_and_hook(mod):  # noqa: ANN001
                exec_module(mod)
                hook()

            loader.exec_module = exec_and_hook  # type: ignore[method-assign]
            return spec

    import importlib.util  # noqa: F401  (used inside find_spec)

    sys.meta_path.insert(0, _Finder())
