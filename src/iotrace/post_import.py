"""Post-import hooks: run a function right after a module has executed, never importing it.

The hooks wait for the program to import the module itself (the way coverage.py and
wrapt's post-import hooks do), so tracing a program imports nothing it did not ask for. A
module that is already imported is hooked at once.

One finder sits first on sys.meta_path and answers only for the names waiting for a hook (a
dict lookup per import); for those it asks the finders after it for the real spec and
puts a loader in front of the real one for this one execution.
"""
from __future__ import annotations

import sys
from typing import Callable

Hook = Callable[[object], None]

_pending: dict[str, list[Hook]] = {}
_finder: _Finder | None = None


def when_imported(name: str, hook: Hook) -> None:
    """Call hook(module) once `name` has executed (now, if it already has)."""
    module = sys.modules.get(name)
    if module is not None and not _initializing(module):
        _run(name, module, [hook])
        return
    _pending.setdefault(name, []).append(hook)
    _ensure_finder()


def _initializing(module: object) -> bool:
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def _run(name: str, module: object, hooks: list[Hook]) -> None:
    for hook in hooks:
        try:
            hook(module)
        except Exception as e:  # a library version we do not know: its calls stay unhooked
            _warn(f"iotrace: no automatic events for {name} ({type(e).__name__}: {e})")


def _warn(message: str) -> None:
    try:
        sys.stderr.write(message + "\n")
    except Exception:
        pass


class _Finder:
    """A meta path finder for the names in _pending (duck-typed: importing importlib.abc
    costs more than this whole module)."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
        hooks = _pending.pop(name, None)
        if hooks is None:
            return None
        spec = None
        try:
            after = sys.meta_path[sys.meta_path.index(self) + 1:]
        except ValueError:
            after = list(sys.meta_path)
        for finder in after:
            find = getattr(finder, "find_spec", None)
            if find is not None:
                spec = find(name, path, target)
                if spec is not None:
                    break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            _pending.setdefault(name, []).extend(hooks)  # not found (yet): keep waiting
            return spec
        spec.loader = _HookedLoader(loader, name, hooks)
        return spec

    def invalidate_caches(self) -> None:
        pass


class _HookedLoader:
    """The module's own loader, then the hooks. Per spec, so a loader shared by several
    modules (zipimport) is never changed; the module gets its real loader back before it runs."""

    def __init__(self, loader: object, name: str, hooks: list[Hook]) -> None:
        self._loader, self._name, self._hooks = loader, name, hooks

    def __getattr__(self, attr: str) -> object:
        return getattr(self._loader, attr)

    def create_module(self, spec):  # noqa: ANN001, ANN201
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module) -> None:  # noqa: ANN001
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._loader.exec_module(module)
        _run(self._name, module, self._hooks)


def _ensure_finder() -> None:
    global _finder
    if _finder is None:
        _finder = _Finder()
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
