"""@trace, region, iter, instant and counter: Python events on the core's clock and file.

The per-call work happens in C (`_core.TracedFunction`, `_core.TracedIter`); this module only
decides, once per decorated function, what kind of callable it wraps and which arguments to
record.
"""
from __future__ import annotations

import functools
import itertools
import sys
import weakref
from typing import Any, Callable
from collections.abc import Iterable, Iterator, Sequence

from . import _core

__all__ = ["trace", "region", "iter", "instant", "counter"]

_builtin_iter = iter


# asyncio and inspect cost more to import than all of iotrace: neither is imported here. A
# coroutine or generator function is told by its code flags, and an asyncio task can only be
# running if the program imported asyncio itself.
_CO_GENERATOR, _CO_COROUTINE = 0x20, 0x80


def _code_flags(fn: Callable) -> int:
    code = getattr(fn, "__code__", None)
    return code.co_flags if code is not None else 0


def _argspec(fn: Callable, names: Sequence[str] | None) -> tuple:
    """(position, name) pairs for the arguments to record; position -1: keyword-only."""
    if not names:
        return ()
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return tuple((-1, n) for n in names)
    pos = {p.name: i for i, p in enumerate(params)
           if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)}
    known = {p.name for p in params}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"iotrace.trace: {fn.__qualname__} has no argument(s) {unknown}")
    return tuple((pos.get(n, -1), n) for n in names)


# asyncio tasks run interleaved on one thread; each gets a track (a virtual tid) of its own so
# that its spans nest correctly.
_task_tids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_next_task_tid = itertools.count(1 << 26)


def _current_task():
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop
        return None


_task_var = None  # ContextVar: the running task's tid, read by the C types (see _core.cpp)


def _task_tid() -> int:
    task = _current_task()
    if task is None:
        return 0
    tid = _task_tids.get(task)
    if tid is None:
        tid = _task_tids[task] = next(_next_task_tid)
        _core.thread_name(f"asyncio {task.get_name()}", tid)
    return tid


def _enter_task_track(tid: int):
    """Make synchronous traced calls of this task record on its track too."""
    global _task_var
    if not tid:
        return None
    if _task_var is None:
        import contextvars

        _task_var = contextvars.ContextVar("iotrace_task_tid", default=0)
        _core.use_task_var(_task_var)
    return _task_var.set(tid)


def _wrap_coroutine(fn: Callable, name: str, cat: str, spec: tuple) -> Callable:
    import inspect

    sig = inspect.signature(fn) if spec else None

    @functools.wraps(fn)
    async def traced(*args: Any, **kwargs: Any) -> Any:
        if not (_core.active() and _core.category_enabled(cat)):
            return await fn(*args, **kwargs)
        recorded = {}
        if sig is not None:
            bound = sig.bind_partial(*args, **kwargs).arguments
            recorded = {n: bound[n] for _, n in spec if n in bound}
        tid = _task_tid()
        token = _enter_task_track(tid)
        t0 = _core.now()
        try:
            return await fn(*args, **kwargs)
        except BaseException as e:
            recorded["exception"] = type(e).__name__
            raise
        finally:
            _core.complete(name, cat, t0, _core.now() - t0, recorded, tid)
            if token is not None:
                _task_var.reset(token)

    return traced


def _wrap(fn: Callable, name: str | None, cat: str, args: Sequence[str] | None) -> Any:
    if isinstance(fn, staticmethod):
        return staticmethod(_wrap(fn.__func__, name, cat, args))
    if isinstance(fn, classmethod):
        return classmethod(_wrap(fn.__func__, name, cat, args))
    name = name or getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    spec = _argspec(fn, args)
    flags = _code_flags(fn)
    if flags & _CO_COROUTINE:
        return _wrap_coroutine(fn, name, cat, spec)
    if flags & _CO_GENERATOR:
        @functools.wraps(fn)
        def generator(*a: Any, **k: Any) -> Iterator:
            chosen = None
            if spec:  # the generator's arguments go on every step's event
                chosen = {n: a[p] if 0 <= p < len(a) else k[n] for p, n in spec
                          if (0 <= p < len(a)) or n in k}
            return _core.TracedIter(fn(*a, **k), name, cat, chosen)
        return generator
    traced = _core.TracedFunction(fn, name, cat, spec)
    functools.update_wrapper(traced, fn)
    return traced


def trace(fn: Callable | None = None, *, name: str | None = None, cat: str = "python",
          args: Sequence[str] | None = None) -> Any:
    """Record each call of a function as one complete event.

    `@trace` or `@trace(name=..., cat=..., args=["idx", "path"])` on functions, methods,
    static/class methods, generators (one event per step) and `async def` (one event per call,
    on a track per asyncio task). An exception is recorded (`args.exception`) and re-raised.
    """
    if fn is None:
        return lambda f: _wrap(f, name, cat, args)
    return _wrap(fn, name, cat, args)


class region:
    """`with iotrace.region("checkpoint", cat="ckpt", step=i) as r: r.update(nbytes=n)`.

    One event per `with`; the same object may be entered again, even nested: each entry has
    its own start, and an exception is noted on the failing event only.
    """

    __slots__ = ("name", "cat", "args", "_starts")

    def __init__(self, name: str, cat: str = "python", **args: Any) -> None:
        self.name, self.cat, self.args, self._starts = name, cat, args, []

    def update(self, **args: Any) -> None:
        self.args.update(args)

    def __enter__(self) -> region:
        self._starts.append(_core.now())
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> bool:
        t1 = _core.now()
        t0 = self._starts.pop()
        args = self.args if et is None else {**self.args, "exception": et.__name__}
        _core.complete(self.name, self.cat, t0, t1 - t0, args, _task_tid())
        return False

    def __call__(self, fn: Callable) -> Any:  # also a decorator: @region("load")
        return trace(fn, name=self.name, cat=self.cat)


def iter(iterable: Iterable, name: str = "iter", cat: str = "python") -> Iterator:
    """Wrap an iterable (a data loader): one event per item, the time spent waiting for it."""
    return _core.TracedIter(iterable, name, cat)


def instant(name: str, cat: str = "python", **args: Any) -> None:
    """A point in time (Perfetto draws an arrow-head)."""
    _core.instant(name, cat, args)


def counter(name: str, **values: float) -> None:
    """Counter values (Perfetto draws a track per name and key)."""
    _core.counter(name, values)
