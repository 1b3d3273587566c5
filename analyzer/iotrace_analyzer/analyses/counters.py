"""Counter events (ph "C"): the sampler's `process` samples (IOTRACE_SAMPLE_MS: cpu_percent,
rss_bytes, read_bytes, write_bytes, open_files) and the program's `iotrace.counter(name, **values)`.

One series per (host, pid, counter name, key): its count, min, max, mean and last value, exact,
and its points (time, value) for the report page, at most MAX_POINTS: a longer series is cut
into time bins and each bin keeps its lowest and its highest point, so peaks and troughs stay.
The bins are powers of two of nanoseconds on the job clock, aligned, so a series reduced in
pieces (blocks, tasks) and reduced again comes out the same as reduced at once.

The counters' args are parsed per block by Arrow's JSON reader (one pass in C++, a column per
key); Python loops over processes, counter names and keys, never over events.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

MAX_POINTS = 512  # per series in the summary's detail: 2 per bin (its lowest and highest)
KEEP = 4 * MAX_POINTS  # raw points a series gathers before it is reduced to bins
PROCESS_KEYS = ("cpu_percent", "rss_bytes", "read_bytes", "write_bytes", "open_files")


class Series:
    """One counter key of one process: exact figures, and its points reduced to bins."""

    __slots__ = ("count", "total", "lo", "hi", "last_ts", "last", "ts", "v", "n", "exp")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.lo = np.inf
        self.hi = -np.inf
        self.last_ts = np.iinfo(np.int64).min
        self.last = None
        self.ts: list = []  # arrays, job clock ns
        self.v: list = []
        self.n = 0  # points held in ts/v
        self.exp = 0  # the points are at most 2 per bin of 2**exp ns (0: not reduced)

    def add(self, ts: np.ndarray, v: np.ndarray) -> None:
        self.count += len(v)
        self.total += float(v.sum())
        self.lo = min(self.lo, float(v.min()))
        self.hi = max(self.hi, float(v.max()))
        i = len(ts) - 1 - int(np.argmax(ts[::-1]))  # the latest point (the last of equal times)
        if ts[i] >= self.last_ts:
            self.last_ts, self.last = int(ts[i]), float(v[i])
        self.ts.append(ts)
        self.v.append(v)
        self.n += len(v)
        if self.n > KEEP:
            self.reduce(MAX_POINTS)

    def merge(self, o: Series) -> None:
        self.count += o.count
        self.total += o.total
        self.lo, self.hi = min(self.lo, o.lo), max(self.hi, o.hi)
        if o.last_ts >= self.last_ts:
            self.last_ts, self.last = o.last_ts, o.last
        self.ts += o.ts
        self.v += o.v
        self.n += o.n
        self.exp = max(self.exp, o.exp)
        if self.n > KEEP:
            self.reduce(MAX_POINTS)

    def points(self) -> tuple[np.ndarray, np.ndarray]:
        """The points in time order, at most MAX_POINTS."""
        self.reduce(MAX_POINTS)
        return self.ts[0], self.v[0]

    def reduce(self, most: int) -> None:
        """Concatenate and sort by time; then, past `most` points (or once reduced), keep the
        lowest and the highest point of each bin, the bins the narrowest that leave at most
        `most` points (never narrower than before)."""
        ts = np.concatenate(self.ts) if len(self.ts) != 1 else self.ts[0]
        v = np.concatenate(self.v) if len(self.v) != 1 else self.v[0]
        if len(ts) > 1 and not (ts[1:] >= ts[:-1]).all():  # usually in order already
            order = np.argsort(ts, kind="stable")
            ts, v = ts[order], v[order]
        if len(ts) > most or self.exp:
            lo, hi = self.exp, 63  # bins only merge as they widen: the narrowest by bisection
            while lo < hi:
                mid = (lo + hi) // 2
                if 2 * _bins(ts, mid) <= most:
                    hi = mid
                else:
                    lo = mid + 1
            self.exp = lo
            ts, v = _extremes(ts, v, lo)
        self.ts, self.v, self.n = [ts], [v], len(ts)

    def figures(self) -> dict:
        return dict(samples=self.count, min=_num(self.lo), max=_num(self.hi),
                    mean=self.total / self.count if self.count else None, last=_num(self.last))


def _bins(ts: np.ndarray, exp: int) -> int:
    """Occupied bins of 2**exp ns of times in order."""
    b = ts >> exp
    return 1 + int(np.count_nonzero(b[1:] != b[:-1])) if len(b) else 0


def _extremes(ts: np.ndarray, v: np.ndarray, exp: int) -> tuple[np.ndarray, np.ndarray]:
    """Of points in time order: per bin of 2**exp ns, the lowest and the highest point (the
    earliest of equal values), in time order."""
    b = ts >> exp
    first = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])  # where each bin starts
    low = np.lexsort((v, b))[first]  # by bin, then value; stable: equal values in time order
    high = np.lexsort((-v, b))[first]
    keep = np.unique(np.concatenate([low, high]))  # positions in time order: sorted
    return ts[keep], v[keep]


def _num(x):
    """A figure as JSON shows it best: an int when it is one."""
    if x is None or not np.isfinite(x):
        return None
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def unit_of(key: str) -> str | None:
    if key.endswith("_bytes") or key == "bytes":
        return "bytes"
    if key.endswith("_percent") or key == "percent":
        return "percent"
    return None


@dataclass
class CounterPart:
    """The counter series of one task's blocks (merged across tasks)."""

    series: dict = field(default_factory=dict)  # (host, pid, name, key) -> Series

    def add(self, ev, procs: list, proc_of_row, ph_codes: np.ndarray, ph_vals: list,
            name_codes: np.ndarray, name_vals: list) -> None:
        want = [i for i, v in enumerate(ph_vals) if v == "C"]
        if not want:
            return
        rows = np.flatnonzero(ph_codes == want[0] if len(want) == 1 else np.isin(ph_codes, want))
        if not len(rows):
            return
        proc = (np.asarray(proc_of_row)[rows] if proc_of_row is not None
                else np.zeros(len(rows), np.int64))
        shifts = np.array([p[3] for p in procs], np.int64)
        ts = np.asarray(ev.column("ts_ns"))[rows] + shifts[proc]
        names = name_codes[rows]
        args = ev.column("args")
        args = args.take(pa.array(rows)) if len(rows) < ev.num_rows else args
        values = _parse(args)
        # one group per (process, counter name): a Python loop over groups, not events
        group = proc.astype(np.int64) * (len(name_vals) + 1) + names
        one = group[0] == group[-1] and (group == group[0]).all()  # one process, one counter
        for g in group[:1] if one else np.unique(group):
            mine = np.arange(len(group)) if one else np.flatnonzero(group == g)
            p, nm = procs[int(proc[mine[0]])], int(names[mine[0]])
            name = str(name_vals[nm]) if nm >= 0 else ""
            for key, col in values.items():
                v = col[mine]
                ok = np.isfinite(v)
                if not ok.any():
                    continue
                k = (p[1], int(p[2]), name, key)
                s = self.series.get(k)
                if s is None:
                    s = self.series[k] = Series()
                s.add(ts[mine][ok], v[ok])

    def merge(self, o: CounterPart) -> None:
        for k, s in o.series.items():
            mine = self.series.get(k)
            if mine is None:
                self.series[k] = s
            else:
                mine.merge(s)


def _parse(args) -> dict:
    """The counters' args (JSON objects) as key -> float64 column (NaN where a row lacks it):
    Arrow's JSON reader over the rows as NDJSON; orjson row by row when that refuses (a key
    whose values change type, a row that is not an object)."""
    args = args.combine_chunks() if isinstance(args, pa.ChunkedArray) else args
    n = len(args)
    lines = pc.binary_join_element_wise(pc.fill_null(args, "{}"), "", "\n")  # "{...}\n" each
    try:
        wide = pa.types.is_large_string(lines.type)
        off = np.frombuffer(lines.buffers()[1], np.int64 if wide else np.int32)[lines.offset:lines.offset + n + 1]
        body = lines.buffers()[2][int(off[0]):int(off[-1])]
        t = pj.read_json(pa.BufferReader(body))
        if t.num_rows != n:
            raise ValueError("rows")
        out = {}
        for name, col in zip(t.column_names, t.columns):
            if pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type):
                out[name] = np.array(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), np.float64)
        return out
    except (pa.ArrowInvalid, ValueError, TypeError):
        return _parse_rows(args.to_pylist())


def _parse_rows(texts: list) -> dict:
    out: dict = {}
    for i, text in enumerate(texts):
        try:
            a = orjson.loads(text if text and text.startswith("{") else "{" + (text or "") + "}")
        except orjson.JSONDecodeError:
            continue
        if not isinstance(a, dict):
            continue
        for k, x in a.items():
            if isinstance(x, (int, float)):
                col = out.get(k)
                if col is None:
                    col = out[k] = np.full(len(texts), np.nan)
                col[i] = float(x)
    return out


def _key_order(key: str) -> tuple:
    return (PROCESS_KEYS.index(key), "") if key in PROCESS_KEYS else (len(PROCESS_KEYS), key)


def summarize(parts: list[CounterPart], processes: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the summary's `counters`: one row per series, by process, the sampler's `process` first;
    each series' points, job clock ns and values, for the page)."""
    c = CounterPart()
    for p in parts:
        c.merge(p)
    roles = {(p["host"], p["pid"]): p.get("role") for p in processes}
    rows, points = [], []
    for k in sorted(c.series, key=lambda k: (str(k[0]), k[1], k[2] != "process", k[2], _key_order(k[3]))):
        host, pid, name, key = k
        s = c.series[k]
        rows.append(dict(host=host, pid=pid, role=roles.get((host, pid)), name=name, key=key,
                         unit=unit_of(key), **s.figures()))
        ts, v = s.points()
        points.append(dict(host=host, pid=pid, name=name, key=key, unit=unit_of(key), ts_ns=ts, value=v))
    return rows, points
