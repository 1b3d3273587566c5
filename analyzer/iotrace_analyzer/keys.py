"""File hashes as numbers within a task, without a Python object per file (a job that reads a
million files once has a million): the keys of the task's per-file figures (summary.Partial,
_kernels.FileState), turned back into strings at the task's end.

The tracer's hashes (and DFTracer's) are 16 hex digits, FNV-1a 64 of the path: read as uint64
(kind 0). Any other string gets a number of its own (kind 1); a missing hash is kind 2.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from . import _kernels

HEX, OTHER, NONE = 0, 1, 2
_NONE = np.zeros(0, np.uint8)


def strings(offsets: np.ndarray, data: np.ndarray, found: np.ndarray | None = None) -> pa.Array:
    """A string array of the kernels' (offsets, bytes) (int64 offsets; `found`: 0 where a
    value is null), the bytes not copied (only a string array past 2 GiB is copied)."""
    n = len(offsets) - 1
    valid, nulls = None, 0
    if found is not None and not found.all():
        valid, nulls = pa.py_buffer(np.packbits(found.astype(bool), bitorder="little")), n - int(found.sum())
    if int(offsets[-1]) < (1 << 31):
        return pa.Array.from_buffers(pa.string(), n, [valid, pa.py_buffer(offsets.astype(np.int32)),
                                                       pa.py_buffer(data)], null_count=nulls)
    return pa.Array.from_buffers(pa.large_string(), n, [valid, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls).cast(pa.string())


def buffers(values: pa.Array) -> tuple:
    """A string array as the kernels take it: (offsets, bytes, validity per value or empty)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.type != pa.string():
        values = values.cast(pa.string())
    n = len(values)
    off = np.frombuffer(values.buffers()[1], np.int32, n + 1, values.offset * 4).astype(np.int64) \
        if n else np.zeros(1, np.int64)
    data = values.buffers()[2]
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    valid = values.is_valid().to_numpy(zero_copy_only=False).astype(np.uint8) if values.null_count else _NONE
    return off, data, valid


class HashIds:
    """(kind, value) of hash strings; the same string always gets the same pair."""

    def __init__(self):
        self.other: dict = {}  # a hash that is not 16 hex digits -> its number

    def of(self, values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """Per value of a string array (a block's dictionary of hashes): kind and value."""
        n = len(values)
        if not n:
            return np.zeros(0, np.int8), np.zeros(0, np.uint64)
        off, data, valid = buffers(values)
        value, ok = _kernels.hex_values(off, data, valid)
        kind = np.where(ok != 0, HEX, OTHER).astype(np.int8)
        if len(valid):
            kind[valid == 0] = NONE
        for i in np.flatnonzero(kind == OTHER):
            value[i] = self.other.setdefault(values[int(i)].as_py(), len(self.other))
        return kind, value

    def strings(self, kind: np.ndarray, value: np.ndarray) -> pa.Array:
        """The hash strings of (kind, value) pairs that of() gave (never NONE)."""
        n = len(value)
        kind = np.asarray(kind)
        value = np.asarray(value, np.uint64)
        out = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(np.arange(0, 16 * n + 1, 16, dtype=np.int32)),
                                                     pa.py_buffer(_kernels.hex_strings(value))])
        other = np.flatnonzero(kind != HEX)
        if len(other):
            names = {v: k for k, v in self.other.items()}
            strs = out.to_pylist()
            for i in other:
                strs[i] = names[int(value[i])]
            out = pa.array(strs, pa.string())
        return out
