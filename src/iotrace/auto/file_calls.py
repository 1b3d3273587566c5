"""Whole-file library calls as events: checkpoints (torch.save / torch.load) and the data
libraries of training pipelines (numpy, h5py, PIL, pyarrow.parquet, pandas).

One complete event per call, `cat` "checkpoint" or "data", named after the function, with
args `file` (when the call names a file, or reads an open file object that has a name) and
`bytes`: the size written (the file's size after a save, or the stream's growth) or the size
of the file read. The tracer's own look at the size is not recorded as the program's I/O.
"""
from __future__ import annotations

import functools
import os
import threading
from typing import Any, Callable

from .. import _core

_now = _core.now
_complete = _core.complete

# Library calls made inside a recorded one (np.load reads with np.fromfile; h5py makes File
# objects for its own use) are that call's own work: only the outermost is an event.
_state = threading.local()


def _outermost() -> bool:
    return not getattr(_state, "depth", 0)


def _size_of_path(path: str) -> int:
    try:
        return _core.untraced(os.stat, path).st_size
    except (OSError, ValueError):
        return -1


def _tell(f: Any) -> int:
    try:
        return _core.untraced(f.tell)
    except Exception:
        return -1


def _path_of(f: Any) -> str | None:
    if isinstance(f, str):
        return f
    if isinstance(f, (bytes, os.PathLike)):
        try:
            return os.fsdecode(os.fspath(f))
        except TypeError:
            return None
    name = getattr(f, "name", None)  # an open file
    return name if isinstance(name, str) else None


def wrap(fn: Callable, name: str, cat: str, file_at: int, file_kw: str, writes: bool) -> Callable:
    """fn with one event per call. The file is argument `file_at` (or keyword `file_kw`);
    `writes`: bytes is what the call added, else the size of the file it read."""

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if not _core.active() or not _outermost():
            return fn(*args, **kwargs)
        f = args[file_at] if len(args) > file_at else kwargs.get(file_kw)
        path = _path_of(f)
        is_stream = hasattr(f, "read") or hasattr(f, "write")
        if path is None and not is_stream:
            return fn(*args, **kwargs)  # no file in sight (an HDF5 id, a URL object...)
        is_path = path is not None and not is_stream
        start = _tell(f) if is_stream and hasattr(f, "tell") else -1
        size = -1
        if not writes and is_path:
            size = _size_of_path(path)
        _state.depth = 1
        t0 = _now()
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:
            _state.depth = 0
            _record(name, cat, t0, path, -1, type(e).__name__)
            raise
        t1 = _now()
        _state.depth = 0
        if start >= 0:
            end = _tell(f)
            size = end - start if end >= start else -1
        elif writes and is_path:
            size = _size_of_path(path)
        _record(name, cat, t0, path, size, None, t1)
        return result

    return traced


def _record(name: str, cat: str, t0: int, path: str | None, size: int, error: str | None,
            t1: int | None = None) -> None:
    args: dict = {}
    if path is not None:
        args["file"] = path
    if size >= 0:
        args["bytes"] = size
    if error is not None:
        args["exception"] = error
    _complete(name, cat, t0, (t1 if t1 is not None else _now()) - t0, args)


def replace(owner: Any, attr: str, name: str, cat: str, file_at: int, file_kw: str,
            writes: bool) -> None:
    """owner.attr (a module function or a class's method) becomes its traced form, once."""
    fn = getattr(owner, attr, None)
    if fn is None or getattr(fn, "_iotrace_auto", False):
        return
    traced = wrap(fn, name, cat, file_at, file_kw, writes)
    traced._iotrace_auto = True  # type: ignore[attr-defined]
    setattr(owner, attr, traced)


# -- the libraries ---------------------------------------------------------------------------

def _hook_torch(serialization) -> None:  # noqa: ANN001
    import sys

    originals = (serialization.save, serialization.load)
    replace(serialization, "save", "torch.save", "checkpoint", 1, "f", True)
    replace(serialization, "load", "torch.load", "checkpoint", 0, "f", False)
    torch = sys.modules.get("torch")  # hooked after torch bound its names: rebind them
    if torch is not None:
        if getattr(torch, "save", None) is originals[0]:
            torch.save = serialization.save
        if getattr(torch, "load", None) is originals[1]:
            torch.load = serialization.load


def _hook_numpy(np) -> None:  # noqa: ANN001
    for attr, writes in (("load", False), ("save", True), ("savez", True),
                         ("savez_compressed", True), ("fromfile", False), ("loadtxt", False)):
        replace(np, attr, f"numpy.{attr}", "data", 0, "file" if attr != "loadtxt" else "fname",
                writes)


def _hook_h5py(h5py) -> None:  # noqa: ANN001
    File, Dataset = h5py.File, h5py.Dataset
    replace(File, "__init__", "h5py.File", "data", 1, "name", False)
    read = Dataset.__getitem__

    @functools.wraps(read)
    def __getitem__(self, args, *rest, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        if not _core.active() or not _outermost():
            return read(self, args, *rest, **kw)
        _state.depth = 1
        try:
            t0 = _now()
            try:
                result = read(self, args, *rest, **kw)
            except BaseException as e:
                _record("h5py.Dataset.read", "data", t0, _h5_file(self), -1, type(e).__name__)
                raise
            t1 = _now()
            _record("h5py.Dataset.read", "data", t0, _h5_file(self),
                    int(getattr(result, "nbytes", -1)), None, t1)
            return result
        finally:
            _state.depth = 0

    __getitem__._iotrace_auto = True  # type: ignore[attr-defined]
    if not getattr(read, "_iotrace_auto", False):
        Dataset.__getitem__ = __getitem__


_h5_names: dict = {}  # dataset id -> file name (asking HDF5 costs more than a read of a sample)


def _h5_file(dataset: Any) -> str | None:
    key = getattr(dataset, "id", None)
    try:
        return _h5_names[key]
    except (KeyError, TypeError):
        pass
    try:
        name = _core.untraced(lambda: dataset.file.filename)
    except Exception:
        name = None
    try:
        if len(_h5_names) > 4096:
            _h5_names.clear()
        _h5_names[key] = name
    except TypeError:
        pass
    return name


def _hook_pil(Image) -> None:  # noqa: ANN001
    replace(Image, "open", "PIL.Image.open", "data", 0, "fp", False)


def _hook_pil_decoding(ImageFile) -> None:  # noqa: ANN001
    load = ImageFile.ImageFile.load
    if getattr(load, "_iotrace_auto", False):
        return

    @functools.wraps(load)
    def traced_load(self):  # noqa: ANN001, ANN202
        # Decoding reads the file: PIL opens lazily. Loaded images return at once.
        if not _core.active() or getattr(self, "fp", None) is None or not _outermost():
            return load(self)
        name = getattr(self, "filename", None)
        name = name if isinstance(name, str) and name else None
        t0 = _now()
        try:
            result = load(self)
        except BaseException as e:
            _record("PIL.Image.load", "data", t0, name, -1, type(e).__name__)
            raise
        _record("PIL.Image.load", "data", t0, name, -1, None)
        return result

    traced_load._iotrace_auto = True  # type: ignore[attr-defined]
    ImageFile.ImageFile.load = traced_load


def _hook_parquet(pq) -> None:  # noqa: ANN001
    replace(pq, "read_table", "pyarrow.parquet.read_table", "data", 0, "source", False)
    replace(pq, "write_table", "pyarrow.parquet.write_table", "data", 1, "where", True)


def _hook_pandas(pd) -> None:  # noqa: ANN001
    for attr, kw in (("read_csv", "filepath_or_buffer"), ("read_table", "filepath_or_buffer"),
                     ("read_parquet", "path"), ("read_feather", "path"),
                     ("read_pickle", "filepath_or_buffer"), ("read_json", "path_or_buf"),
                     ("read_hdf", "path_or_buf")):
        replace(pd, attr, f"pandas.{attr}", "data", 0, kw, False)
