"""The Parquet dataset: OUT/events/part-NNNNN.parquet (one part per analysis task: a big trace
file, or a group of small ones) plus OUT/processes.parquet, OUT/threads.parquet and
OUT/files.parquet."""

from __future__ import annotations

import collections
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from iotrace_format import job_of, rank_of

from .. import _kernels

_DICT = pa.dictionary(pa.int32(), pa.string())
_INT_ARGS = ("fd", "fd2", "size", "offset", "ret", "bytes", "errno", "flags", "mode")

# Times in integer nanoseconds: exact, and a third of the bytes and half the encoding time of
# float microseconds (Parquet deltas small integers; floats only compress).
EVENTS_SCHEMA = pa.schema(
    [("name", _DICT), ("cat", _DICT), ("ph", _DICT), ("pid", pa.int64()), ("tid", pa.int64()),
     ("host", _DICT), ("ts_ns", pa.int64()), ("dur_ns", pa.int64()),
     ("fhash", _DICT), ("fname", _DICT), ("fhash2", _DICT), ("fname2", _DICT)]
    + [(k, pa.int64()) for k in _INT_ARGS]
    + [("args", pa.string())]
)
# Columns every event of a trace has: declared required, so Parquet stores no definition
# levels for them (10% of the writing). A part whose events lack one (a damaged or hand-made
# JSON line) goes on in a part with EVENTS_SCHEMA.
_PRESENT = ("name", "cat", "ph", "pid", "tid", "host", "ts_ns")
EVENTS_SCHEMA_PRESENT = pa.schema([f.with_nullable(f.name not in _PRESENT) for f in EVENTS_SCHEMA])
PROCESSES_SCHEMA = pa.schema(
    [("host", pa.string()), ("pid", pa.int64()), ("ppid", pa.int64()), ("parent_pid", pa.int64()),
     ("exe", pa.string()), ("name", pa.string()), ("role", pa.string()), ("worker_id", pa.int64()),
     ("cmdline", pa.list_(pa.string())), ("rank", pa.int64()), ("job_id", pa.string()),
     ("ranks", pa.string()), ("wall_ns", pa.int64()),
     ("mono_ns", pa.int64()), ("version", pa.int64()), ("resolution_ns", pa.int64()),
     ("compression", pa.string()),
     ("end_reason", pa.string()), ("events_written", pa.int64()), ("trace_file", pa.string()),
     ("cpu_ns", pa.int64()), ("mpi_cpu_ns", pa.int64()), ("host_cpu_wait_us", pa.int64()),
     ("cpu_wait_ns", pa.int64())]
)
THREADS_SCHEMA = pa.schema([("host", pa.string()), ("pid", pa.int64()), ("tid", pa.int64()),
                            ("name", pa.string())])
FILES_SCHEMA = pa.schema([("fhash", pa.string()), ("name", pa.string())])


def _as_dict(col) -> pa.DictionaryArray:
    if isinstance(col, pa.ChunkedArray):  # (a block's column: one chunk, taken as it is)
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    if col.type == _DICT:  # (a cast to its own type is not free: 0.15 s of a million files' blocks)
        return col
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    return col.cast(_DICT)


def resolve_names(hashes, names: dict) -> pa.DictionaryArray:
    """File names for a dictionary column of hashes: looked up once per distinct hash, and
    the rows given their name's code through the hash's (no hashing of rows or paths)."""
    from .. import keys

    d = _as_dict(hashes)
    if d.null_count == len(d):
        return pa.nulls(len(d), _DICT)
    if isinstance(names, (_kernels.Names, Snapshot)):
        remap, off, data = names.codes(*keys.buffers(d.dictionary))
        if len(off) - 1 == len(remap):  # every hash named: the path of value i is the i-th
            return pa.DictionaryArray.from_arrays(d.indices, keys.strings(off, data))
        remap = pa.array(remap, mask=remap < 0)
        return pa.DictionaryArray.from_arrays(pc.take(remap, d.indices), keys.strings(off, data))
    if isinstance(names, dict):
        remap, paths = _kernels.name_codes(*keys.buffers(d.dictionary), names)
        remap = pa.array(remap, mask=remap < 0)
    else:
        uniq: dict = {}
        paths = []
        for h in d.dictionary.to_pylist():
            name = names.get(h)
            paths.append(None if name is None else uniq.setdefault(name, len(uniq)))
        remap, paths = pa.array(paths, pa.int32()), list(uniq)
    codes = pc.take(remap, d.indices)
    return pa.DictionaryArray.from_arrays(codes, pa.array(paths, pa.string()))


class Snapshot:
    """A _kernels.Names as it is now, read later by another thread (the Parquet writer's): the
    hex hashes it has now (a later name is not seen; only a file's own names grow it)."""

    def __init__(self, names):
        self.names, self.limit = names, names.hex_count()

    def codes(self, off, data, valid):
        return self.names.codes(off, data, valid, self.limit)


def names_dict(names) -> dict:
    """fhash -> path as a dict, of a dict or a _kernels.Names (inputs.read.FileReader's)."""
    if isinstance(names, dict):
        return names
    from ..keys import strings

    values, off, data, other = names.table()
    out = dict(zip(_hex_strings(values).to_pylist(), strings(off, data).to_pylist()))
    out.update(other)
    return out


def names_table(names, skip: np.ndarray | None = None) -> tuple:
    """fhash -> path as a table (fhash, name), of a dict or a _kernels.Names, or of a list of
    them one after the other (many small files: one table, not one each); and the hashes'
    kinds and values (keys.HashIds: the tracer's as numbers, not read again). `skip`: numbers
    of hex hashes left out (of a _kernels.Names)."""
    from ..keys import HEX, HashIds, strings

    if isinstance(names, list):
        if not all(isinstance(n, _kernels.Names) for n in names):
            parts = [names_table(n) for n in names]
            return (pa.concat_tables([p[0] for p in parts]),
                    *(np.concatenate([p[k] for p in parts]) for k in (1, 2)))
        tabs = [n.table() for n in names]
        values = np.concatenate([t[0] for t in tabs]) if tabs else np.zeros(0, np.uint64)
        sizes = np.cumsum([0] + [int(t[1][-1]) for t in tabs])
        off = np.concatenate([tabs[0][1][:1]] + [t[1][1:] + s for t, s in zip(tabs, sizes)]) if tabs else \
            np.zeros(1, np.int64)
        data = np.concatenate([t[2] for t in tabs]) if tabs else np.zeros(0, np.uint8)
        t = pa.table({"fhash": _hex_strings(values), "name": strings(off, data)})
        kind = np.full(len(values), HEX, np.int8)
        others = [t_[3] for t_ in tabs if t_[3]]
        if others:  # hashes that are not hex, after the hex ones (never the same strings); the first wins
            other: dict = {}
            for o in others:
                for k_, v_ in o.items():
                    other.setdefault(k_, v_)
            o = pa.table({"fhash": pa.array(list(other), pa.string()),
                          "name": pa.array(list(other.values()), pa.string())})
            k, v = HashIds().of(o.column("fhash"))
            t, kind, values = pa.concat_tables([t, o]), np.concatenate([kind, k]), np.concatenate([values, v])
        return t, kind, values
    if isinstance(names, dict):
        t = pa.table({"fhash": pa.array(list(names), pa.string()), "name": pa.array(list(names.values()), pa.string())})
        return (t, *HashIds().of(t.column("fhash").combine_chunks()))
    values, off, data, other = names.table(skip)
    t = pa.table({"fhash": _hex_strings(values), "name": strings(off, data)})
    kind = np.full(len(values), HEX, np.int8)
    if other:
        o = pa.table({"fhash": pa.array(list(other), pa.string()), "name": pa.array(list(other.values()), pa.string())})
        k, v = HashIds().of(o.column("fhash"))
        t, kind, values = pa.concat_tables([t, o]), np.concatenate([kind, k]), np.concatenate([values, v])
    return t, kind, values


def _hex_strings(values: np.ndarray) -> pa.Array:
    from ..keys import HashIds

    return HashIds().strings(np.zeros(len(values), np.int8), values)


def file_names(ev, names: dict) -> tuple:
    """The fname and fname2 columns of a block (resolve_names of its fhash and fhash2)."""
    return resolve_names(ev.column("fhash"), names), resolve_names(ev.column("fhash2"), names)


def to_events(ev: pa.Table, host: str, names: dict | tuple) -> pa.Table:
    """The decoded events of one file in the published Parquet schema (names resolved), with
    EVENTS_SCHEMA_PRESENT when the always-present columns have no nulls. `names`: fhash ->
    path, or the fname and fname2 columns (file_names)."""
    n = ev.num_rows
    fname, fname2 = names if isinstance(names, tuple) else file_names(ev, names)
    cols = {
        "name": _as_dict(ev.column("name")), "cat": _as_dict(ev.column("cat")),
        "ph": _as_dict(ev.column("ph")), "pid": ev.column("pid"), "tid": ev.column("tid"),
        "host": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([host])),
        "ts_ns": ev.column("ts_ns"), "dur_ns": ev.column("dur_ns"),
        "fhash": _as_dict(ev.column("fhash")), "fname": fname,
        "fhash2": _as_dict(ev.column("fhash2")), "fname2": fname2,
    }
    for k in _INT_ARGS:
        cols[k] = ev.column(k)
    cols["args"] = ev.column("args")
    arrays = [cols[f.name] for f in EVENTS_SCHEMA]
    present = all(cols[k].null_count == 0 for k in _PRESENT)
    return pa.Table.from_arrays(arrays, schema=EVENTS_SCHEMA_PRESENT if present else EVENTS_SCHEMA)


def open_part(out_dir: str, name: str, schema: pa.Schema) -> tuple[pq.ParquetWriter, str]:
    """A writer of OUT/events/<name>.parquet, written a segment (row group) at a time."""
    os.makedirs(os.path.join(out_dir, "events"), exist_ok=True)
    path = os.path.join(out_dir, "events", f"{name}.parquet")
    # Dictionaries for the strings; DELTA_BINARY_PACKED for the integers (times, offsets,
    # returns, sizes and fds change little from one event to the next): 40% less CPU than
    # plain or dictionary encoding, and smaller. Statistics (min/max per row group) where
    # readers filter.
    # Pages of up to 100,000 rows (the writer's default is 20,000; pages stay within 1 MiB):
    # each page is compressed with a zstd context of its own, and most columns (fd2, bytes,
    # errno, ...) are a few bytes a page. Writing the 1M-files job's 9M events: CPU 2.4-2.6 ->
    # 1.9-2.2 s, the file 0.7% smaller.
    # pid and tid, required and the same row after row, PLAIN: zstd makes the runs as small,
    # for half the CPU of deltas (9M events: 0.08 -> 0.04 s each).
    ints = [f.name for f in schema if f.type == pa.int64()]
    enc = {k: "PLAIN" if k in ("pid", "tid") and not schema.field(k).nullable else "DELTA_BINARY_PACKED"
           for k in ints}
    w = pq.ParquetWriter(path, schema, compression="zstd", compression_level=1,
                         use_dictionary=[f.name for f in schema if pa.types.is_dictionary(f.type)],
                         column_encoding=enc,
                         write_statistics=["pid", "tid", "ts_ns"], max_rows_per_page=PAGE_ROWS)
    return w, path


def _first_by_key(keys: np.ndarray) -> np.ndarray:
    """The row of each distinct key's first, in the keys' order (np.unique's return_index: a
    stable sort; distinct keys, most often, need none)."""
    order = np.argsort(keys)
    k = keys[order]
    if len(k) < 2 or (k[1:] != k[:-1]).all():
        return order
    return np.unique(keys, return_index=True)[1]


def _distinct(keys: np.ndarray) -> bool:
    k = np.sort(keys)
    return not (k[1:] == k[:-1]).any()


def _by_hash(hashes) -> np.ndarray:
    """The order of distinct hashes sorted as strings: the tracer's (16 lowercase hex digits)
    as the numbers they write, the same order, without comparing strings."""
    from ..keys import HEX, HashIds

    hashes = hashes.combine_chunks() if isinstance(hashes, pa.ChunkedArray) else hashes
    kind, value = HashIds().of(hashes)
    if len(kind) and (kind == HEX).all():
        return np.argsort(value, kind="stable")
    return pc.sort_indices(hashes).to_numpy()


def write_metadata(out_dir: str, processes: list[dict], threads: list[dict], files, keys=None,
                   hex_keys: bool = False) -> None:
    """processes.parquet, threads.parquet and files.parquet. `files`: fhash -> path, a dict or
    a table of (fhash, name) whose first row of a hash gives its name (summary._names), `keys`
    the hashes' numbers (files.hash_keys) when known; `hex_keys`: all of them the tracer's 16
    hex digits (so that the numbers sort as the strings)."""
    os.makedirs(out_dir, exist_ok=True)
    cols = {f.name: [p.get(f.name) for p in processes] for f in PROCESSES_SCHEMA}  # by column: 5000 processes
    cols["rank"] = [rank_of(p) for p in processes]  # the rank and job the launcher or MPI gave
    cols["job_id"] = [job_of(p.get("ranks")) for p in processes]
    cols["ranks"] = [json.dumps(r, sort_keys=True) if isinstance(r, (dict, list)) else r for r in cols["ranks"]]
    cols["cmdline"] = [c if c is None or isinstance(c, list) else [str(c)] for c in cols["cmdline"]]
    pq.write_table(pa.Table.from_pydict(cols, schema=PROCESSES_SCHEMA),
                   os.path.join(out_dir, "processes.parquet"))
    pq.write_table(pa.Table.from_pylist(threads, schema=THREADS_SCHEMA),
                   os.path.join(out_dir, "threads.parquet"))
    if isinstance(files, dict):
        files = pa.table({"fhash": pa.array(list(files), pa.string()),
                          "name": pa.array(list(files.values()), pa.string())})
    if files is None or not files.num_rows:
        table = FILES_SCHEMA.empty_table()
    elif keys is not None and hex_keys:  # one row per hash (its first), by hash
        first = _first_by_key(np.asarray(keys, np.uint64))
        # the hashes written again from their numbers (the tracer's digits: the same strings),
        # not gathered at random with the names (a million files: 0.62 -> 0.45 s)
        table = pa.table({"fhash": _hex_strings(np.asarray(keys, np.uint64)[first]),
                          "name": files.column("name").take(pa.array(first))})
    else:
        hashes = files.column("fhash").combine_chunks()
        if keys is None or not _distinct(keys):
            if pc.count_distinct(hashes).as_py() != files.num_rows:
                files = files.take(pc.index_in(pc.unique(hashes), value_set=hashes))
                hashes = files.column("fhash").combine_chunks()
        table = files.take(_by_hash(hashes))
    pq.write_table(table.cast(FILES_SCHEMA), os.path.join(out_dir, "files.parquet"))


# --------------------------------------------------------------------------- the events' parts

PARQUET_ROWS = 1 << 19  # events per Parquet row group
PAGE_ROWS = 100_000  # events per page of a column at most (open_part)
# events per part file at most: a process of a billion events is some 15 files of ~200 MiB,
# each a stretch of its time, that Spark, Dask or DuckDB read in parallel and skip by their
# statistics, not one file of 3 GiB
PART_ROWS = 1 << 26


class ParquetOut:
    """The task's Parquet part, in row groups of 500,000 to 1,000,000 events (PARQUET_ROWS to
    twice that). Written by the task's helper thread (engine.Helper; Parquet encoding releases
    the GIL: it runs while the next blocks decode) when cores would otherwise be idle; else in
    the task's thread, when each row group is full: with every core busy, a second thread per
    task only adds switches and cache misses (15% more CPU per event)."""

    def __init__(self, out_dir: str | None, index: int, helper=None):
        self.out_dir, self.index = out_dir, index
        self.helper = helper if out_dir is not None else None
        self.writer = None
        self.schema = None
        self.paths: list = []
        self.jobs: collections.deque = collections.deque()  # row groups given to the helper
        self.error: BaseException | None = None
        self.pending: list = []  # batches of the row group being gathered
        self.rows = 0
        self.part_rows = 0  # events in the part being written
        self.host, self.names, self.own_names = "", None, False

    def _write_job(self, batches: list, host: str, names) -> None:
        if self.error is None:  # nothing after a row group that failed
            try:
                self._write(batches, host, names)
            except BaseException as e:
                self.error = e
                raise

    def _write(self, batches: list, host: str, names) -> None:
        """`names`: fhash -> path (a dict, _kernels.Names), or per batch its fname and fname2."""
        # Each block in the published schema as it is; the chunks go to Parquet as one row
        # group, nothing concatenated, with one dictionary per column (a dictionary that
        # changes from chunk to chunk sends the writer to materialize and hash the strings).
        per_batch = names if isinstance(names, list) else [names] * len(batches)
        tabs = [to_events(pa.Table.from_batches([b]), host, nb) for b, nb in zip(batches, per_batch)]
        loose = any(t.schema != EVENTS_SCHEMA_PRESENT for t in tabs)
        if loose:
            tabs = [t.cast(EVENTS_SCHEMA) for t in tabs]
        if self.writer is None or (loose and self.schema != EVENTS_SCHEMA):
            self._open(EVENTS_SCHEMA if loose else EVENTS_SCHEMA_PRESENT)
        tab = pa.concat_tables(tabs).unify_dictionaries()
        if self.schema != tab.schema:
            tab = tab.cast(self.schema)
        # the rows gathered as one row group when they are not many more than PARQUET_ROWS
        # (not one of PARQUET_ROWS and a small one after it, with dictionaries of its own)
        rows = tab.num_rows if tab.num_rows < 2 * PARQUET_ROWS else PARQUET_ROWS
        self.writer.write_table(tab, row_group_size=rows)
        self.part_rows += tab.num_rows
        if self.part_rows >= PART_ROWS:  # the next events in a part of their own
            self.writer.close()
            self.writer, self.schema = None, None

    def _open(self, schema: pa.Schema) -> None:
        """The task's part; the events after one that lacks a required value (then rare
        damaged lines) go on in a second part whose columns may all be null."""
        if self.writer is not None:
            self.writer.close()
        name = f"part-{self.index:05d}" + (f"-{len(self.paths)}" if self.paths else "")
        self.writer, path = open_part(self.out_dir, name, schema)
        self.schema, self.part_rows = schema, 0
        self.paths.append(path)

    def put(self, batch, host: str, names: dict) -> None:
        """Events of one file (a batch or a table); row groups hold one host's events. `names`:
        fhash -> path, the file's names as known so far; the batches are given the names of all
        files put, a later file's first, as they are when they are written."""
        if self.out_dir is None or not batch.num_rows:
            return
        if self.pending and host != self.host:
            self.flush()
        self.host = host
        # the names of one file are its reader's own dict, as it grows (a million names are
        # not copied at each block); a second file's make a dict of this writer's own
        if self.names is None:
            self.names = names
        elif names is not self.names:
            if not self.own_names:
                self.names, self.own_names = names_dict(self.names), True
            self.names.update(names_dict(names))
        self.pending += batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        self.rows += batch.num_rows
        if self.rows >= PARQUET_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            if self.helper is not None:  # the names as they are now (they may grow meanwhile)
                if isinstance(self.names, _kernels.Names) and self.names.other_empty:
                    names = [Snapshot(self.names)] * len(self.pending)  # looked up by the helper
                else:
                    names = [file_names(b, self.names) for b in self.pending]
                # at most two row groups given and not written: the task waits for the helper
                if len(self.jobs) >= 2:
                    self.jobs.popleft().result()
                self.jobs.append(self.helper.submit(self._write_job, self.pending, self.host, names,
                                                    stealable=False))
            else:
                self._write(self.pending, self.host, self.names)
            self.pending, self.rows = [], 0

    def close(self) -> list:
        if self.out_dir is None:
            return []
        try:
            self.flush()
        finally:
            for job in self.jobs:  # every row group given written (or failed) before the part closes
                try:
                    job.result()
                except BaseException:  # noqa: BLE001 (the first failure is raised below)
                    pass
            self.jobs.clear()
        if self.writer is not None:
            self.writer.close()
        if self.error is not None:
            raise self.error
        return self.paths
