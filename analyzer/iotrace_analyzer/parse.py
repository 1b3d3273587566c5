"""Columnar parsing of trace text into a pyarrow Table, without a Python loop per event.

Fast path (the tracer's own X events, in the fixed key order of csrc/format/encoder.cc): the
compiled one-pass scanner of scan.py parses the numbers of each line and interns its strings
into a small pool; string columns become dictionary arrays over that pool.

General path (metadata, instants, counters, DFTracer, anything unexpected): pyarrow's JSON
reader with a fixed schema, and orjson line by line only for the few metadata events (whose
args must be kept whole) or for a block that the JSON reader rejects (to count bad lines).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

try:
    from . import scan
except ImportError:  # no numba: everything goes through the general path (slower)
    scan = None

INT_ARGS = ("fd", "fd2", "size", "offset", "ret", "bytes", "errno", "flags", "mode")
STR_ARGS = ("fhash", "fhash2")
_KEY_IDS = {k: i for i, k in enumerate(STR_ARGS + INT_ARGS)}
_PAD = 256  # zero bytes after a block: strings up to this long are cut as fixed-width rows

EVENT_SCHEMA = pa.schema(
    [("ph", pa.string()), ("name", pa.string()), ("cat", pa.string()),
     ("pid", pa.int64()), ("tid", pa.int64()), ("ts_ns", pa.int64()), ("dur_ns", pa.int64())]
    + [(k, pa.string()) for k in STR_ARGS]
    + [(k, pa.int64()) for k in INT_ARGS]
    + [("hhash", pa.string()), ("args", pa.string())]
)

_JSON_SCHEMA = pa.schema(
    [("ph", pa.string()), ("name", pa.string()), ("cat", pa.string()),
     ("pid", pa.int64()), ("tid", pa.int64()), ("ts", pa.float64()), ("dur", pa.float64()),
     ("args", pa.struct([(k, pa.string()) for k in STR_ARGS + ("hhash",)]
                        + [(k, pa.int64()) for k in INT_ARGS + ("count",)]))]
)


@dataclass
class Parsed:
    """What one block of text holds: the events, the metadata events, the bad lines."""

    events: pa.Table
    meta: list[dict] = field(default_factory=list)
    bad_lines: int = 0
    bad_examples: list[bytes] = field(default_factory=list)


# --------------------------------------------------------------------------- string + number cutting


def cut_strings(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> pa.StringArray:
    """buf[start[i]:start[i]+length[i]] for every i as an Arrow string array.

    `buf` must be followed by _PAD zero bytes (short strings are cut as fixed-width rows)."""
    n = len(start)
    if n == 0:
        return pa.array([], pa.string())
    length = np.maximum(length, 0)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    w = max(int(length.max()), 1)
    if w <= _PAD:
        rows = np.lib.stride_tricks.sliding_window_view(buf, w)[start]
        data = rows[np.arange(w) < length[:, None]]
    else:  # long strings: gather byte by byte
        data = buf[np.repeat(start - offsets[:-1], length) + np.arange(offsets[-1])]
    if offsets[-1] < 2**31:
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data))
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data)).cast(pa.string())


def _ints(values: np.ndarray, has: np.ndarray | None = None) -> pa.Array:
    """An int64 Arrow array over a numpy column, nulls where `has` is False."""
    n = len(values)
    if has is None or has.all():
        return pa.array(values)
    if not has.any():
        return pa.nulls(n, pa.int64())
    validity = pa.py_buffer(np.packbits(has, bitorder="little"))
    return pa.Array.from_buffers(pa.int64(), n, [validity, pa.py_buffer(values)])


def _fast(buf: np.ndarray, sc: dict) -> dict:
    """Arrow columns of the lines the scanner parsed. String columns are dictionary arrays
    over the block's pool of distinct strings."""
    m = sc["n"]
    codes, iv, present = sc["codes"], sc["ivals"], sc["present"]
    pool = cut_strings(buf, sc["pool_start"], sc["pool_len"])

    def strings(row, has=None):
        if has is not None and not has.any():
            return pa.nulls(m, pa.string())
        if has is None or has.all():
            return pa.DictionaryArray.from_arrays(pa.array(codes[row]), pool)
        # Codes under the null slots are whatever the scanner's buffer held; Arrow reads them
        # anyway when it unifies dictionaries (transpose_map[code]): they must be in range.
        ind = pa.array(np.where(has, codes[row], 0), mask=~has)
        return pa.DictionaryArray.from_arrays(ind, pool)

    ph = pa.DictionaryArray.from_arrays(pa.array(np.zeros(m, np.int32)), pa.array(["X"]))
    out = {"ph": ph, "name": strings(0), "cat": strings(1),
           "pid": _ints(iv[0]), "tid": _ints(iv[1]), "ts_ns": _ints(iv[2]), "dur_ns": _ints(iv[3])}
    for k, key in enumerate(scan.IO_KEYS):
        has = (present & (1 << k)) != 0
        out[key] = strings(2 + k, has) if k < scan.N_STR else _ints(iv[2 + k], has)
    out["hhash"] = pa.nulls(m, pa.string())
    ap = sc["args_pos"]
    ex = np.flatnonzero(ap[0] >= 0)
    if len(ex) == 0:
        out["args"] = pa.nulls(m, pa.string())
    else:
        pos = np.full(m, -1, np.int64)
        pos[ex] = np.arange(len(ex))
        out["args"] = cut_strings(buf, ap[0, ex], ap[1, ex] - ap[0, ex]).take(pa.array(pos, mask=pos < 0))
    return out


# --------------------------------------------------------------------------- general path


def _general_rows(lines: list[bytes]) -> tuple[list[dict], list[dict], int, list[bytes]]:
    """orjson line by line: (event dicts, metadata dicts, bad count, bad examples)."""
    events, meta, bad, examples = [], [], 0, []
    for ln in lines:
        try:
            ev = orjson.loads(ln)
            if not isinstance(ev, dict):
                raise ValueError
        except (orjson.JSONDecodeError, ValueError):
            bad += 1
            if len(examples) < 3:
                examples.append(ln[:200])
            continue
        (meta if ev.get("ph") == "M" else events).append(ev)
    return events, meta, bad, examples


def _num(v, scale=1000):
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return int(round(v * scale))
    return None


def _rows_to_columns(events: list[dict]) -> dict:
    """The few general-path X/i/C events as columns (a loop, but only over such events)."""
    cols = {f.name: [] for f in EVENT_SCHEMA}
    for ev in events:
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        cols["ph"].append(str(ev.get("ph", "")))
        cols["name"].append(str(ev.get("name", "")))
        cols["cat"].append(str(ev.get("cat", "")))
        cols["pid"].append(_num(ev.get("pid"), 1))
        cols["tid"].append(_num(ev.get("tid"), 1))
        cols["ts_ns"].append(_num(ev.get("ts")))
        cols["dur_ns"].append(_num(ev.get("dur")))
        for k in STR_ARGS + ("hhash",):
            v = args.get(k)
            cols[k].append(None if v is None else str(v))
        for k in INT_ARGS:
            v = args.get(k, args.get("count") if k == "size" else None)
            cols[k].append(_num(v, 1))
        rest = {k: v for k, v in args.items() if k not in _KEY_IDS and k != "hhash"}
        cols["args"].append(orjson.dumps(rest).decode() if rest else None)
    return {k: pa.array(v, EVENT_SCHEMA.field(k).type) for k, v in cols.items()}


def _json_reader(text: bytes) -> pa.Table:
    """pyarrow's JSON reader with a fixed schema (bulk DFTracer-style input)."""
    opts = pajson.ParseOptions(explicit_schema=_JSON_SCHEMA, unexpected_field_behavior="ignore")
    t = pajson.read_json(pa.py_buffer(text), parse_options=opts,
                         read_options=pajson.ReadOptions(block_size=8 << 20))
    args = t.column("args").combine_chunks()
    n = t.num_rows

    def us_to_ns(col):
        return pc.cast(pc.round(pc.multiply(t.column(col), 1000.0)), pa.int64())

    out = {"ph": t.column("ph"), "name": t.column("name"), "cat": t.column("cat"),
           "pid": t.column("pid"), "tid": t.column("tid"),
           "ts_ns": us_to_ns("ts"), "dur_ns": us_to_ns("dur")}
    for k in STR_ARGS + ("hhash",):
        out[k] = args.field(k)
    for k in INT_ARGS:
        out[k] = pc.coalesce(args.field("size"), args.field("count")) if k == "size" else args.field(k)
    out["args"] = pa.nulls(n, pa.string())
    return {k: (v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v) for k, v in out.items()}


def _general(lines: list[bytes]) -> tuple[dict | None, list[dict], int, list[bytes]]:
    meta_lines = [ln for ln in lines if b'"ph":"M"' in ln]
    other = [ln for ln in lines if b'"ph":"M"' not in ln]
    _, meta, bad, examples = _general_rows(meta_lines)
    cols = None
    if len(other) > 1000:
        try:
            cols = _json_reader(b"\n".join(other) + b"\n")
            other = []
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # a bad line or a type conflict: go line by line to find and count them
    if other:
        events, meta2, bad2, ex2 = _general_rows(other)
        meta += meta2
        bad += bad2
        examples += ex2[: 3 - len(examples)]
        cols = _rows_to_columns(events)
    return cols, meta, bad, examples


# --------------------------------------------------------------------------- entry point


PADDING = b"\n" + bytes(_PAD)  # what parse_block needs after the text


def parse_block(text: bytes, length: int | None = None) -> Parsed:
    """Parse a block of whole trace lines (each ending in a newline).

    If `length` is given, text[:length] is the block and text ends with PADDING (saves a
    copy of the block); else the padding is added here."""
    if length is None:
        length, text = len(text), text + PADDING
    if scan is None:
        return _parse_general(text[:length])
    buf = np.frombuffer(text, dtype=np.uint8)
    sc = scan.scan(buf[:length])
    tables = [_table(_fast(buf, sc))]
    gen = sc["gen"]
    meta, bad, examples = [], 0, []
    if gen.shape[1]:
        lines = [text[a:b] for a, b in zip(gen[0], gen[1])]
        cols, meta, bad, examples = _general(lines)
        if cols is not None:
            tables.append(_table(cols))
    events = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    return Parsed(events, meta, bad, examples)


def _parse_general(text: bytes) -> Parsed:
    lines = []
    for ln in text.split(b"\n"):
        ln = ln.strip()
        if ln.endswith((b",", b"]")):
            ln = ln[:-1].rstrip()
        if ln.startswith(b"["):
            ln = ln[1:]
        if ln:
            lines.append(ln)
    cols, meta, bad, examples = _general(lines)
    events = _table(cols) if cols is not None else _table(_rows_to_columns([]))
    return Parsed(events, meta, bad, examples)


_DICT_COLS = {"ph", "name", "cat", "fhash", "fhash2", "hhash"}
_DICT = pa.dictionary(pa.int32(), pa.string())


def _table(cols: dict) -> pa.Table:
    """Columns in EVENT_SCHEMA order and types (repetitive strings as dictionaries)."""
    arrays = []
    for f in EVENT_SCHEMA:
        a = cols[f.name]
        if isinstance(a, pa.ChunkedArray):
            a = a.combine_chunks()
        if f.name in _DICT_COLS:
            if a.null_count == len(a):
                a = pa.nulls(len(a), _DICT)
            elif not pa.types.is_dictionary(a.type):
                a = a.cast(pa.string()).dictionary_encode()
        else:
            a = a.cast(f.type)
        arrays.append(a)
    return pa.Table.from_arrays(arrays, names=EVENT_SCHEMA.names)
