"""Every file of a job as columns: the summary's `files` rows (the top ones printed, all of them
weighed by the rules), built from the tasks' per (fhash, process) sums with Arrow group-bys and
numpy, never a Python object per file. A job that reads a million small files once (one file
per sample) has a million rows here.

FileTable holds them sorted as the summary sorts its rows (the most call time first, then by
name); `row(i)` gives one as the summary's dict. FileSizes holds each file's calls per access
size bin and direction (the small-reads and small-writes rules). Sums of float columns that the
summary and the rules compute are made in that row order, one after the other (np.add.accumulate),
as the loops over row dicts made them: the figures are the same to the last bit.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _kernels, units
from ..keys import buffers
from . import file_class

# the summary's file row: its keys in order, and where each comes from
ROW_KEYS = ("file", "fhash", "class", "count", "time_us", "bytes_read", "bytes_written", "processes",
            "metadata_count", "metadata_time_us", "opens", "reads", "writes", "read_time_us",
            "write_time_us", "read_extent", "read_sequential", "read_random", "write_sequential",
            "write_random", "use_processes", "use_opens", "use_time_us", "use_metadata_count",
            "use_metadata_time_us", "create_processes", "create_opens", "create_time_us",
            "create_metadata_count", "create_metadata_time_us")
# row key -> per (fhash, pid) sum it adds up (summary.FILE_SUMS), for the plain sums
_FROM_SUMS = {"count": "dur_count", "bytes_read": "read_sum", "bytes_written": "written_sum",
              "metadata_count": "meta_count", "opens": "opens", "reads": "reads", "writes": "writes",
              "read_extent": "read_extent", "read_sequential": "read_seq", "read_random": "read_rand",
              "write_sequential": "write_seq", "write_random": "write_rand"}
# row key -> nanosecond sum, given in µs
_TIMES = {"time_us": "dur_sum", "metadata_time_us": "meta_dur", "read_time_us": "read_dur",
          "write_time_us": "write_dur"}
_EMPTY = pa.nulls(0, pa.string())  # (pa.array of a list would import pandas: cli._without_pandas)


def us(ns: np.ndarray) -> np.ndarray:
    """units.us of a column: ns / 1000 is already the nearest double to the µs with three
    decimals that round(ns / 1000, 3) gives (exact up to 2**53 ns)."""
    return np.asarray(ns, np.int64) / 1000.0


def col(t: pa.Table, name: str) -> np.ndarray:
    """A table's column as numpy, without a copy when it is one chunk of int64 without nulls
    (ChunkedArray.to_numpy copies: a million files' 16 sums were 128 MB of copies)."""
    c = t.column(name)
    if c.num_chunks == 1 and c.null_count == 0:
        return c.chunk(0).to_numpy()
    return c.to_numpy()


def seq_sum(x) -> float:
    """The sum a loop of `+=` makes, in order (numpy's sum pairs terms: another last bit)."""
    x = np.asarray(x, np.float64)
    return float(np.add.accumulate(x)[-1]) + 0.0 if len(x) else 0.0  # (+0.0: a loop from 0.0 never gives -0.0)


def py_sum(x) -> float:
    """The sum Python's sum() makes of these floats: up to 3.11 one after the other (as
    seq_sum), from 3.12 with a compensation of its own (then sum() itself)."""
    if sys.version_info < (3, 12):
        return seq_sum(x) if len(x) else 0
    return sum(np.asarray(x, np.float64).tolist())


class Columns:
    """Columns of `src` (arrays) and columns made of them when read (`fns`: key -> function of
    a getter of other columns), not kept: a million files' times in µs and their use and
    creation parts are 120 MB. A value of one row is made of that row's values only (at).
    `order`: the rows as read, as rows of src (None: as they are)."""

    def __init__(self, src: dict, fns: dict | None = None, order: np.ndarray | None = None):
        self.src, self.fns, self.order = src, fns or {}, order
        self._ordered: dict = {}  # id of an array of src -> its rows in order

    def in_order(self, order: np.ndarray) -> Columns:
        return Columns(self.src, self.fns, order)

    def _src(self, key: str) -> np.ndarray:
        """An array of src in order: gathered at its first read, in the narrow type a task sent
        it in (half the bytes to gather at random), and kept (the rules read some forty
        columns of a million rows, many twice: a gather at each read was 0.5 s). The same
        array under two keys is gathered once."""
        a = self.src[key]
        if self.order is None:
            return a
        b = self._ordered.get(id(a))
        if b is None:  # (two threads may both gather it: the same rows)
            b = self._ordered[id(a)] = a[self.order]
        return b

    def __getitem__(self, key: str) -> np.ndarray:
        return _int64(self._src(key)) if key in self.src else self.fns[key](self.__getitem__)

    def at(self, key: str, i: int):
        j = i if self.order is None else int(self.order[i])
        return self._at(key, j)

    def _at(self, key: str, j: int):
        if key in self.src:
            return self.src[key][j].item()
        return self.fns[key](lambda k: _int64(self.src[k][j:j + 1]) if k in self.src else
                             np.asarray([self._at(k, j)]))[0].item()


SORT_APART_FILES = 100_000  # files from which their order is sorted on a thread of its own


def _int64(a: np.ndarray) -> np.ndarray:
    """Integers as int64 (the sums of a task come in the narrowest type that holds them)."""
    return a.astype(np.int64) if a.dtype.kind == "i" and a.dtype != np.int64 else a


def wide_table(t: pa.Table) -> pa.Table:
    """A partial's table with its narrowed integer columns int64 again (summary.narrow)."""
    fields = [f.with_type(pa.int64()) if pa.types.is_integer(f.type) else f for f in t.schema]
    return t if all(f.type == g.type for f, g in zip(fields, t.schema)) else t.cast(pa.schema(fields))


class FileTable:
    """Every file's summary row, as columns, in the summary's order. Built unsorted with that
    order beside: a column is put in order when it is read."""

    def __init__(self, cols: Columns, file: pa.Array, fhash: pa.Array, cls: np.ndarray,
                 order: np.ndarray | None = None):
        self._base = cols if order is None else cols.in_order(order)  # (each column when first read)
        self._file, self._fhash = file, fhash
        self._order = order  # None: the names are in order
        self._cols: dict = {}
        self.cls = cls if order is None else cls[order]  # indices into file_class.CLASSES
        self.has_samples: np.ndarray | None = None  # per row, offset samples (None: not known)

    @classmethod
    def empty(cls) -> FileTable:
        z = np.zeros(0, np.int64)
        return cls(Columns({k: z for k in ROW_KEYS[3:]}), _EMPTY, _EMPTY, np.zeros(0, np.int8))

    def __len__(self) -> int:
        return len(self.cls)

    def __getitem__(self, key: str) -> np.ndarray:
        """A column: made each time it is asked for of the narrow sums (the rules ask for some
        twenty columns, a million rows each: kept as int64 and float, they were 160 MB)."""
        return self._base[key]

    def _strings(self, key: str, a: pa.Array) -> pa.Array:
        if self._order is None:
            return a
        if key not in self._cols:
            self._cols[key] = a.take(pa.array(self._order))
        return self._cols[key]

    @property
    def file(self) -> pa.Array:
        return self._strings("file", self._file)

    def files_at(self, rows: np.ndarray) -> pa.Array:
        """The names of some rows (without putting the whole column in order)."""
        rows = np.asarray(rows, np.int64)
        return self._file.take(pa.array(rows if self._order is None else self._order[rows]))

    @property
    def fhash(self) -> pa.Array:
        return self._strings("fhash", self._fhash)

    def is_class(self, name: str) -> np.ndarray:
        return self.cls == file_class.CLASSES.index(name)

    def row(self, i: int) -> dict:
        j = int(i) if self._order is None else int(self._order[int(i)])
        out = {"file": self._file[j].as_py(), "fhash": self._fhash[j].as_py(),
               "class": file_class.CLASSES[self.cls[int(i)]]}
        for k in ROW_KEYS[3:]:
            out[k] = self._base.at(k, int(i))
        return out

    def rows(self, idx) -> list[dict]:
        return [self.row(i) for i in idx]


def hash_keys(fhash: pa.Array, kind: np.ndarray | None = None, value: np.ndarray | None = None) -> np.ndarray:
    """A number per hash string that equal strings share (the tracer's 16 hex digits read as
    uint64; any other string its FNV-1a 64): distinct numbers are distinct strings, so that a
    million hashes are told distinct, or found in another list, by sorting numbers. `kind` and
    `value`: keys.HashIds.of(fhash), when known."""
    from ..keys import HEX, HashIds

    if kind is None:
        kind, value = HashIds().of(fhash)
    out = np.asarray(value, np.uint64).copy()
    for i in np.flatnonzero(np.asarray(kind) != HEX):
        s = fhash[int(i)].as_py()
        h = 0xCBF29CE484222325
        for b in (s.encode() if s is not None else b""):
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        out[i] = h
    return out


def _distinct_runs(x: np.ndarray) -> tuple:
    """np.unique(x, return_index=True, return_inverse=True) of values that come in long runs
    (a task's rows are one process's): the runs' values made unique, not the rows'."""
    starts = np.flatnonzero(np.concatenate([[True], x[1:] != x[:-1]]))
    uval, ufirst, uinv = np.unique(x[starts], return_index=True, return_inverse=True)
    lens = np.diff(np.append(starts, len(x)))
    return uval, starts[ufirst], np.repeat(uinv, lens)


def _distinct(keys: np.ndarray) -> bool:
    k = np.sort(keys)
    return not (k[1:] == k[:-1]).any()


def _lookup(keys: np.ndarray, fhash: pa.Array, table_keys: np.ndarray, table_hash: pa.Array) -> np.ndarray:
    """Per hash, the first row of a table that has it (-1: none): by the numbers, each match
    checked on the strings (a number two strings share is looked up by its string)."""
    if not len(table_keys) or not len(keys):
        return np.full(len(keys), -1, np.int64)
    uk, first = np.unique(table_keys, return_index=True)
    pos = np.minimum(np.searchsorted(uk, keys), len(uk) - 1)
    at = np.where(uk[pos] == keys, first[pos], -1).astype(np.int64)
    hit = np.flatnonzero(at >= 0)
    if len(hit):
        same = pc.equal(fhash.take(pa.array(hit)), table_hash.take(pa.array(at[hit]))).to_numpy(zero_copy_only=False)
        bad = hit[~same]
        if len(bad):
            at[bad] = pc.fill_null(pc.index_in(fhash.take(pa.array(bad)), value_set=table_hash), -1).to_numpy()
    return at


def collect(partials: list, all_names, stdio: set, prefixes: tuple, dirs: frozenset, file_agg: list,
            file_sums: tuple, size_bins: int) -> tuple:
    """(FileTable, the summary's `file_classes`, FileSizes, the calls on data files per pid)
    from the tasks' partials (summary.Partial: per (fhash, pid) sums, calls per size bin,
    whether there are offset samples, the hashes' numbers). When no hash is in two rows (each
    file used by one process: the shape of a million files read once), the rows are the files
    as they are; else Arrow groups them. `all_names()`: (fhash -> path of all partials, a hash's
    first row wins, and their numbers: summary._names), asked for the hashes a partial did not
    name itself."""
    parts = [p for p in partials if any(t.num_rows for t in p.files)]
    if not parts:
        return FileTable.empty(), {}, FileSizes(None, 0, size_bins), {}
    fast = all(len(p.files) == 1 and p.files_grouped and p.file_keys is not None for p in parts)
    keys = np.concatenate([p.file_keys for p in parts]) if fast else None
    if keys is not None and _distinct(keys):
        tabs = [p.files[0] for p in parts]  # (their integers narrowed: summary.narrow)
        fhash = pa.concat_arrays([c for t in tabs for c in t.column("fhash").chunks]) if len(tabs) > 1 else \
            tabs[0].column("fhash").combine_chunks()
        n = len(fhash)

        def wide(k: str) -> np.ndarray:  # (in the narrowest type of the tasks': Columns reads it as int64)
            cs = [col(t, k) for t in tabs]
            return cs[0] if len(cs) == 1 else np.concatenate(cs)

        v = {k: wide(k) for k in file_sums}
        procs = np.ones(n, np.int64)
        # what the processes that only read a file (never wrote it) did to it: the data's use,
        # apart from its creation (a dataset written once, then read every epoch)
        u = {"reader": (v["written_sum"] == 0) & (v["writes"] == 0)}
        u_fns = {f"u_{k}": (lambda g, c=c: np.where(g("reader"), g(c), 0))
                 for k, c in (("opens", "opens"), ("dur", "dur_sum"), ("meta_count", "meta_count"),
                              ("meta_dur", "meta_dur"))}
        u_fns["u_processes"] = lambda g: g("reader").astype(np.int64)
        has_samples = np.concatenate([p.file_samples for p in parts])
        own = [p.file_names for p in parts]
        own_names = (pa.concat_arrays(own) if len(own) > 1 else own[0]) if all(x is not None for x in own) else None
        row_of_proc, pid, v_pp = np.arange(n), wide("pid").astype(np.int64, copy=False), v
        at = np.cumsum([0] + [p.files[0].num_rows for p in parts[:-1]])
        size_rows = ([np.concatenate([p.file_size_rows.astype(np.int64) + s for p, s in zip(parts, at)])]
                     + [np.concatenate([t.column(c).to_numpy() for p in parts for t in p.file_sizes], dtype=np.int64)
                        for c in ("bin", "count")]) if any(p.file_sizes for p in parts) else None
    else:

        keys = own_names = None
        t = pa.concat_tables([wide_table(t) for p in parts for t in p.files])
        pp = t if len(parts) == 1 and parts[0].files_grouped else \
            t.group_by(["fhash", "pid"]).aggregate(file_agg).rename_columns(["fhash", "pid", *file_sums])
        f = _by_hash(pp, file_agg)
        readers = pp.filter(pc.and_(pc.equal(pp.column("written_sum"), 0), pc.equal(pp.column("writes"), 0)))
        use = _by_hash(readers, [("meta_count", "sum"), ("meta_dur", "sum"), ("opens", "sum"), ("dur_sum", "sum")])
        fhash = f.column("fhash").combine_chunks()
        n = len(fhash)
        v = {k: col(f, f"{k}_{a}").astype(np.int64, copy=False) for k, a in file_agg}
        procs = col(f, "pid_count").astype(np.int64, copy=False)
        at = pc.fill_null(pc.index_in(fhash, value_set=use.column("fhash")), -1).to_numpy()
        has = at >= 0
        pick = np.where(has, at, 0)

        def used(col: str) -> np.ndarray:
            x = use.column(col).to_numpy().astype(np.int64, copy=False)
            return np.where(has, x[pick], 0) if len(x) else np.zeros(n, np.int64)

        u = {f"u_{k}": used(c) for k, c in (("processes", "pid_count"), ("opens", "opens_sum"),
                                            ("dur", "dur_sum_sum"), ("meta_count", "meta_count_sum"),
                                            ("meta_dur", "meta_dur_sum"))}
        u_fns = {}
        has_samples = None
        row_of_proc = pc.fill_null(pc.index_in(pp.column("fhash"), value_set=fhash), -1).to_numpy()
        pid = pp.column("pid").to_numpy()
        v_pp = {k: pp.column(k).to_numpy() for k in ("dur_count", "dur_sum", "read_sum", "written_sum")}
        size_rows = None
        st = [t for p in parts for t in p.size_tables() if t.num_rows]
        if st:
            g = pa.concat_tables(st).group_by(["fhash", "bin"]).aggregate([("count", "sum")])
            row = pc.fill_null(pc.index_in(g.column("fhash"), value_set=fhash), -1).to_numpy()
            ok = row >= 0
            size_rows = [row[ok], g.column("bin").to_numpy().astype(np.int64)[ok],
                         g.column("count_sum").to_numpy().astype(np.int64)[ok]]
    # the row's columns: the sums as they are, the rest made when read (Columns)
    src = {**v, **u, "processes": procs, **{k: v[c] for k, c in _FROM_SUMS.items()}}
    fns = {**u_fns, **{k: (lambda g, c=c: us(g(c))) for k, c in _TIMES.items()},
           "use_processes": lambda g: g("u_processes"), "use_opens": lambda g: g("u_opens"),
           "use_time_us": lambda g: us(g("u_dur")), "use_metadata_count": lambda g: g("u_meta_count"),
           "use_metadata_time_us": lambda g: us(g("u_meta_dur")),
           "create_processes": lambda g: g("processes") - g("u_processes"),
           "create_opens": lambda g: g("opens") - g("u_opens"),
           "create_time_us": lambda g: us(g("dur_sum") - g("u_dur")),
           "create_metadata_count": lambda g: g("meta_count") - g("u_meta_count"),
           "create_metadata_time_us": lambda g: us(g("meta_dur") - g("u_meta_dur"))}
    cols = Columns(src, fns)
    # names: the hash's path (a task's own, else any task's), else "<unknown HASH>"
    if own_names is not None:
        named = own_names
        unknown = named.is_null().to_numpy(zero_copy_only=False) if named.null_count else np.zeros(n, bool)
        if unknown.any():  # named by another task (a parent's FH line), or by none
            rows = np.flatnonzero(unknown)
            names, _k = all_names()
            other = pc.take(names.column("name"), pc.index_in(fhash.take(pa.array(rows)),
                                                              value_set=names.column("fhash"))) \
                if names is not None and names.num_rows else pa.nulls(len(rows), pa.string())
            ix = np.full(n, -1, np.int64)
            ix[rows] = np.arange(len(rows))
            named = pc.if_else(pa.array(unknown), pc.take(other, pa.array(np.maximum(ix, 0))), named)
            unknown = named.is_null().to_numpy(zero_copy_only=False)
    else:
        names, name_keys = all_names()
        if names is not None and names.num_rows:
            if keys is not None and name_keys is not None:
                where = _lookup(keys, fhash, name_keys, names.column("fhash").combine_chunks())
                unknown = where < 0
                named = names.column("name").combine_chunks().take(pa.array(np.where(unknown, 0, where)))
                if unknown.any():
                    named = pc.if_else(pa.array(unknown), pa.nulls(n, pa.string()), named)
            else:
                named = pc.take(names.column("name"), pc.index_in(fhash, value_set=names.column("fhash")))
                unknown = named.is_null().to_numpy(zero_copy_only=False)
        else:
            named = pa.nulls(n, pa.string())
            unknown = np.ones(n, bool)
    if unknown.any():
        named = pc.if_else(pc.is_null(named), pc.binary_join_element_wise("<unknown ", fhash, ">", ""), named)
    named = named.combine_chunks() if isinstance(named, pa.ChunkedArray) else named
    named = named.cast(pa.string())
    is_stdio = np.zeros(n, bool)
    if stdio:
        s_hash = pa.array(sorted(stdio), pa.string())
        is_stdio = _lookup(keys, fhash, hash_keys(s_hash), s_hash) >= 0 if keys is not None else \
            pc.is_in(fhash, value_set=s_hash).to_numpy(zero_copy_only=False)
    # by time, greatest first, then by name (Arrow's stable order): names compared only among
    # equal times; sorted (without the GIL) while the names are classified, over many files
    off, data, _valid = buffers(named)
    with ThreadPoolExecutor(1) as pool:  # (its thread starts at a submit only)
        ordering = pool.submit(_kernels.order_by_key_then_name, cols["time_us"], off, data) \
            if n >= SORT_APART_FILES else None
        cls = file_class.classify_many(named, prefixes, dirs, stdio=is_stdio, unknown=unknown)
        classes = _classes(cols, cls)
        order = ordering.result() if ordering else _kernels.order_by_key_then_name(cols["time_us"], off, data)
    table = FileTable(cols, named, fhash, cls, order)
    if has_samples is not None:
        table.has_samples = has_samples[order]
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    sizes = FileSizes(None, n, size_bins)
    if size_rows is not None:
        row, b, count = size_rows
        sizes = FileSizes((rank[row], b // size_bins, b % size_bins, count), n, size_bins)
    # per pid, its calls on data files: the I/O a rule weighs apart from the imports'
    data = cls == file_class.CLASSES.index("data")
    m = (row_of_proc >= 0) & data[np.maximum(row_of_proc, 0)]
    by_pid = {}
    if m.any():
        upid, first, inv = _distinct_runs(pid[m])
        sel = {k: v_pp[k][m] for k in ("dur_count", "dur_sum", "read_sum", "written_sum")}
        sums = {k: np.bincount(inv, weights=x, minlength=len(upid)) for k, x in sel.items()}
        count = np.bincount(inv, minlength=len(upid))
        for j in np.argsort(first, kind="stable"):  # in the order the pids came (as Arrow's group-by)
            by_pid[upid[j].item()] = dict(
                calls=int(sums["dur_count"][j]), time_us=units.us(sums["dur_sum"][j]),
                bytes_read=int(sums["read_sum"][j]), bytes_written=int(sums["written_sum"][j]), files=int(count[j]))
    return table, classes, sizes, by_pid

def _by_hash(t: pa.Table, aggs: list) -> pa.Table:
    """t.group_by("fhash").aggregate(aggs + [("pid", "count")]); when each hash has one row
    (each file used by one process: the rows are the groups, in their order), without hashing."""
    h = t.column("fhash")
    if t.num_rows and pc.count_distinct(h).as_py() == t.num_rows:
        cols = {"fhash": h}
        cols.update({f"{k}_{a}": t.column(k) for k, a in aggs})
        cols["pid_count"] = pa.array(np.ones(t.num_rows, np.int64))
        return pa.table(cols)
    return t.group_by("fhash").aggregate(aggs + [("pid", "count")])


def _classes(cols: dict, cls: np.ndarray) -> dict:
    """The summary's `file_classes`: per class, its files and their sums (the times summed in
    the files' grouped order, as the summary did row by row), classes in CLASSES order."""
    out = {}
    for i, name in enumerate(file_class.CLASSES):
        m = cls == i
        if not m.any():
            continue
        out[name] = dict(files=int(m.sum()), count=int(cols["count"][m].sum()),
                         time_us=round(seq_sum(cols["time_us"][m]), 3),
                         bytes_read=int(cols["bytes_read"][m].sum()), bytes_written=int(cols["bytes_written"][m].sum()),
                         metadata_count=int(cols["metadata_count"][m].sum()),
                         metadata_time_us=round(seq_sum(cols["metadata_time_us"][m]), 3))
    return out


class FileSizes:
    """Each file's calls per direction and access size bin (summary.SIZE_LABELS), sparse: rows
    of (file row, direction, bin, calls), a file row and bin at most once."""

    def __init__(self, rows: tuple | None, n: int, bins: int):
        self.n, self.bins = n, bins
        if rows is None:
            self.row = self.dir = self.bin = self.count = np.zeros(0, np.int64)
        else:
            self.row, self.dir, self.bin, self.count = (np.asarray(x, np.int64) for x in rows)

    def calls(self, direction: int, below: int | None = None) -> np.ndarray:
        """Per file row, its calls in `direction` (0 read, 1 write), in the bins below `below`."""
        m = self.dir == direction
        if below is not None:
            m &= self.bin < below
        return np.bincount(self.row[m], weights=self.count[m], minlength=self.n).astype(np.int64)

    def histogram(self, row: int, direction: int) -> np.ndarray:
        m = (self.row == row) & (self.dir == direction)
        h = np.zeros(self.bins, np.int64)
        np.add.at(h, self.bin[m], self.count[m])
        return h


def top_rows(mask: np.ndarray, keys: list, names, n: int | None) -> np.ndarray:
    """The rows where `mask` holds, sorted as Python sorts them by (keys..., name): each key
    ascending (negate one for descending), then the name (when given: a string array, or a
    function giving the names of some rows), then the row itself (a stable sort); the first
    `n` (all of them for None). Rows that cannot be among the first n are left out key by key
    first (a threshold per key), so that a million candidates cost a few passes of numpy, and
    the few left are sorted by Python."""
    if isinstance(names, (pa.Array, pa.ChunkedArray)):
        arr = names
        names = lambda rows: arr.take(pa.array(np.asarray(rows, np.int64)))  # noqa: E731
    cand = np.flatnonzero(mask)
    if n is None:
        n = len(cand)
    if n <= 0 or not len(cand):
        return np.zeros(0, np.int64)
    fixed = [np.zeros(0, np.int64)]  # rows sure to be among the first n, before the candidates
    have = 0
    for k in keys:
        if have + len(cand) <= max(n, 2048):
            break
        need = n - have
        if need >= len(cand):
            break
        vals = np.asarray(k)[cand]
        thr = np.partition(vals, need - 1)[need - 1]
        before = cand[vals < thr]
        fixed.append(before)
        have += len(before)
        cand = cand[vals == thr]  # they tie on every key so far
    rows = np.sort(np.concatenate(fixed + [cand]))
    if len(rows) > max(n, 2048) and names is not None and len(cand) > n - have:
        # still many ties on every key: the names decide among the candidates (Arrow's sort is stable)
        order = pc.sort_indices(names(cand)).to_numpy()
        cand = cand[order[:n - have]]
        rows = np.sort(np.concatenate(fixed + [cand]))
    cols = [np.asarray(k)[rows].tolist() for k in keys]
    if names is not None:
        cols.append(names(rows).to_pylist())
    order = sorted(range(len(rows)), key=lambda j: tuple(c[j] for c in cols))
    return rows[order[:n]]
