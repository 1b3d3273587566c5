"""The figures: a partial per trace file, built block by block as the file is read (memory
does not grow with the events of a process), then one merge of all partials into the
summary. Definitions are in docs/analyzer.md.

Everything is column arithmetic (numpy, pyarrow group_by); Python loops run over groups
(call names, files, processes), never over events.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iotrace_format import COUNTED_LAYERS, LAYERS, calls, calls_of, job_of, rank_of

from .. import _kernels, keys, units
from ..model import Job, file_class, files
from . import activity, counters, mpi, training
from .activity import ActivityPart, Samples, binned
from .counters import CounterPart
from .intervals import Union
from .training import TrainingPart

IO_CATS = COUNTED_LAYERS  # the categories whose calls are the job's I/O (iotrace_format: layers)
LAYER_CODES = {name: i for i, name in enumerate(LAYERS) if i}  # a tracer category's layer (0: app)
# (the tracer's categories that are not the job's counted I/O, process and the upper layers
# (mpi, mpiio, hdf5), are its own calls, never an @trace category or phase: kind CAT_PROCESS)
READ_CALLS = calls_of("read")
WRITE_CALLS = calls_of("write", "copy")
DATA_CALLS = READ_CALLS | WRITE_CALLS
# access-size histogram edges (bytes), as Darshan's
SIZE_EDGES = list(_kernels.SIZE_EDGES)  # the kernel's bins, the only place they are written


def _size_label(n: int) -> str:
    """An edge as a bin's label: 100, 1K, 4M, 1G."""
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


SIZE_LABELS = [f"{_size_label(lo)}-{_size_label(hi)}" for lo, hi in zip(SIZE_EDGES, SIZE_EDGES[1:])] \
    + [f"{_size_label(SIZE_EDGES[-1])}+"]  # 0-100, 100-1K, ..., 100M-1G, 1G+
TIMELINE_BINS = 256  # at most this many bins in the merged timeline
FINE_BINS = 4096  # at most this many bins per file partial
UNIONS = ("io", "comp", "both", "all", "ipc")  # I/O, compute, either, any complete event, pipes
# the calls the tracer records: an event of an I/O or process category is the tracer's only
# when its name is one of them (a program's @trace may name its category "posix" too)
KNOWN_CALLS = frozenset(name for _n, name, _c, _f in calls())
# what the summary keeps of a process's record (iotrace_process, _info, _end)
PROC_INFO = ("mono_ns", "end_mono_ns", "end_reason", "role", "parent_pid", "worker_id", "ppid",
             "exe", "cmdline", "cwd", "ranks", "mpi_rank", "mpi_size", "dist_rank", "dist_size", "cpu_ns",
             "mpi_cpu_ns", "host_cpu_wait_us", "cpu_wait_ns")
OPEN_CALLS = calls_of("open")
SYNC_CALLS = calls_of("sync")  # fsync, fdatasync, msync, fflush: not metadata
# the syncs that force data to storage (fflush only hands a stream's buffer to the kernel)
STORAGE_SYNC_CALLS = frozenset(name for _n, name, cat, fam in calls() if fam == "sync" and cat == "posix")
# per (fhash, pid), as the kernel's kFileSumNames: calls, their time, bytes read and written,
# metadata calls and their time, read and write calls and their time, opens, the furthest
# byte read (read_extent: a maximum), sequential and random reads and writes
_KERNEL_FILE = _kernels.FILE_SUMS
FILE_SUMS = ("dur_count", "dur_sum", "read_sum", "written_sum") + _KERNEL_FILE[4:]
FILE_AGG = [(k, "max" if k == "read_extent" else "sum") for k in FILE_SUMS]


def narrow(a: np.ndarray) -> np.ndarray:
    """An integer column in the smallest signed type that holds its values: a partial crosses
    processes and waits in the command for the others (a million files' 16 sums are 128 MB as
    int64, a fifth of it narrowed). Its readers widen it again (files.wide_table)."""
    if not len(a) or a.dtype.kind != "i":
        return a
    lo, hi = int(a.min()), int(a.max())
    for t in (np.int8, np.int16, np.int32):
        if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max:
            return a.astype(t)
    return a


def _narrow_table(t: pa.Table) -> pa.Table:
    return pa.table({k: pa.array(narrow(t.column(k).to_numpy())) if pa.types.is_integer(t.column(k).type) and
                     t.column(k).null_count == 0 else t.column(k) for k in t.column_names})


@dataclass
class ProcState:
    """One process (image) of one trace file, as far as it has been read."""

    host: str
    pid: int
    events: int = 0
    io_events: int = 0
    first: int = np.iinfo(np.int64).max
    last: int = np.iinfo(np.int64).min
    bytes_read: int = 0
    bytes_written: int = 0
    io_call_time: int = 0
    unions: dict = field(default_factory=lambda: {k: Union() for k in UNIONS})

    def merge(self, o: ProcState) -> None:
        self.events += o.events
        self.io_events += o.io_events
        self.first = min(self.first, o.first)
        self.last = max(self.last, o.last)
        self.bytes_read += o.bytes_read
        self.bytes_written += o.bytes_written
        self.io_call_time += o.io_call_time
        for k in UNIONS:
            self.unions[k].merge(o.unions[k])

    def figures(self, info: dict | None = None) -> dict:
        """The process's figures; `info`: its record's PROC_INFO. Wall time runs from the
        start record to the end record, on the process's clock; a file without them (older,
        killed, DFTracer) has its first event's start and last event's end instead."""
        u = {k: _length(self.unions[k]) for k in UNIONS}
        info = info or {}
        lifetime = int(self.last - self.first) if self.events else 0
        start = min(info.get("mono_ns", self.first), self.first)
        end = max(info.get("end_mono_ns", self.last), self.last)
        wall = int(end - start) if self.events else 0
        return dict(host=self.host, pid=self.pid, rank=rank_of(info),
                    job_id=job_of(info.get("ranks")), role=info.get("role"),
                    parent_pid=info.get("parent_pid"), worker_id=info.get("worker_id"),
                    cmdline=info.get("cmdline"), end_reason=info.get("end_reason"),
                    wall_from="records" if "end_mono_ns" in info else "events",
                    start_j=start + info.get("shift", 0), end_j=end + info.get("shift", 0),  # job clock
                    events=self.events, io_events=self.io_events, wall_ns=wall, lifetime_ns=lifetime,
                    app_ns=u["all"], io_ns=u["io"], compute_ns=u["comp"],
                    io_not_overlapped_ns=u["both"] - u["comp"],
                    compute_not_overlapped_ns=u["both"] - u["io"], io_call_time_ns=self.io_call_time,
                    ipc_wait_ns=u["ipc"],
                    # the CPU time its threads had (None: not recorded), an MPI rank's part of it
                    # inside MPI calls, and the time of its run its host had a task waiting for a CPU;
                    # the time its main thread was runnable but had no CPU
                    cpu_ns=info.get("cpu_ns"), mpi_cpu_ns=info.get("mpi_cpu_ns"),
                    host_cpu_wait_us=info.get("host_cpu_wait_us"), cpu_wait_ns=info.get("cpu_wait_ns"),
                    bytes_read=self.bytes_read, bytes_written=self.bytes_written)


@dataclass
class Partial:
    """What one trace file (or a group of small ones) contributes to the summary: small,
    grouped, never per event. `add` takes the file's events block by block; partials of the
    same file read in parallel pieces combine with `merge`."""

    events: int = 0
    x_events: int = 0
    meta_events: int = 0
    start: int | None = None  # job clock, ns
    end: int | None = None
    threads: set = field(default_factory=set)  # (host, pid, tid)
    procs: dict = field(default_factory=dict)  # (file key, pid) -> ProcState
    calls: list = field(default_factory=list)  # tables: name -> count, dur, bytes, errors
    sizes: list = field(default_factory=list)  # tables: (name, size) -> count
    files: list = field(default_factory=list)  # tables: (fhash, pid) -> FILE_SUMS
    files_grouped: bool = False  # files is one table, one row per (fhash, pid)
    file_sizes: list = field(default_factory=list)  # tables: (fhash, pid, dir, bin) -> calls
    cats: dict = field(default_factory=dict)  # (file key, pid, cat) -> [count, dur, Union]
    cat_names: list = field(default_factory=list)  # tables: (cat, name) -> count, dur
    access: dict = field(default_factory=dict)  # dir -> {first, consecutive, sequential, random}
    _files: _kernels.FileState | None = field(default_factory=_kernels.FileState)  # per file, while reading
    _ids: keys.HashIds = field(default_factory=keys.HashIds)  # the task's numbers of hashes
    _layers: _kernels.Layers | None = field(default_factory=_kernels.Layers)  # per thread, while reading
    layers: dict = field(default_factory=dict)  # (file key, pid, layer) -> [calls, time, own time] ns
    _proc_keys: dict = field(default_factory=dict)  # (file key, pid) -> number
    size_hist: dict = field(default_factory=dict)  # dir -> counts per SIZE_LABELS
    tl_exp: int = 10  # timeline: bins of 2**tl_exp ns on the job clock
    tl: tuple = ()  # (bin index, bytes read, bytes written, ops)
    fh: list = field(default_factory=list)  # fhash -> path of each file read (dicts or _kernels.Names)
    names: pa.Table | None = None  # fhash -> path as a table (finalize moves fh here)
    name_keys: np.ndarray | None = None  # its hashes' numbers (files.hash_keys)
    names_hex: bool = False  # all of them 16 hex digits
    names_in_files: bool = False  # names: only those no row of files[0] has (file_names: all_names)
    # per row of files[0] (one table, grouped): its hash's number, its path (null: unnamed
    # here), whether it has offset samples; per row of file_sizes[0]: its file's row (None:
    # not known, after a merge)
    file_keys: np.ndarray | None = None
    file_names: pa.Array | None = None
    file_samples: np.ndarray | None = None
    file_size_rows: np.ndarray | None = None
    stdio: set = field(default_factory=set)  # fhashes written through fd 1 or 2 (logs)
    info: dict = field(default_factory=dict)  # (file key, pid) -> its record's PROC_INFO
    training: TrainingPart = field(default_factory=TrainingPart)  # epochs, fetches, checkpoints
    counters: CounterPart = field(default_factory=CounterPart)  # ph C series per process
    activity: ActivityPart = field(default_factory=ActivityPart)  # per process bins, phases, offsets
    mpi: mpi.MpiPart = field(default_factory=mpi.MpiPart)  # MPI and MPI-IO calls
    # what an input of counters (a Darshan log: inputs/darshan.py) told about itself: its job
    # record, what is estimated, what it cannot tell (summary.json's `darshan`); None for traces
    counted: dict | None = None
    file_counters: list = field(default_factory=list)  # its per-file counters (model.Job.file_counters)

    # --- combining -------------------------------------------------------------------------

    def finalize(self) -> Partial:
        """Replace the interval unions by their lengths: small to send back from a worker. A
        process's events are all read before (a task reads whole files)."""
        for st in self.procs.values():
            st.unions = {k: _length(u) for k, u in st.unions.items()}
        for slot in self.cats.values():
            slot[2] = _length(slot[2])
        skip = self._take_files()
        self._take_layers()
        self._files, self._ids, self._proc_keys = None, keys.HashIds(), {}  # (a FileState does not pickle)
        self.compact(final=True)
        self.activity.compact()
        self.mpi.compact()
        if skip is not None and self.files_grouped:  # the paths once, in file_names (all_names)
            from ..outputs.parquet import names_table

            t, kind, value = names_table(self.fh[0], skip)  # (a named row's hash is hex: so are all)
            self.names, self.name_keys = t, files.hash_keys(t.column("fhash").combine_chunks(), kind, value)
            self.names_hex = bool((kind == keys.HEX).all())
            self.names_in_files = True
        else:
            self.names, self.name_keys, self.names_hex = _names_of(self.fh)
        self.fh = []
        return self

    def __getstate__(self) -> dict:
        """Sent to the command: the files' sums narrowed (narrow; a thread's partial keeps
        them as they are, read without a copy)."""
        d = self.__dict__.copy()
        if self.files_grouped and len(self.files) == 1:
            d["files"] = [_narrow_table(self.files[0])]
        return d

    def all_names(self) -> tuple:
        """(fhash -> path as a table, a hash's first row its name; the hashes' numbers, or
        None; whether all are 16 hex digits) of this partial (_names_of while it reads)."""
        if self.names is None:
            return _names_of(self.fh)
        if not self.names_in_files:
            return self.names, self.name_keys, self.names_hex
        f, named = self.files[0], self.file_names
        ok = None if not named.null_count else named.is_valid()
        fhash = f.column("fhash").combine_chunks()
        t = pa.table({"fhash": fhash if ok is None else fhash.filter(ok),
                      "name": named if ok is None else named.filter(ok)})
        k = self.file_keys if ok is None else self.file_keys[ok.to_numpy(zero_copy_only=False)]
        if self.names.num_rows:
            t = pa.concat_tables([t, self.names.cast(t.schema)])
            k = np.concatenate([k, self.name_keys])
        return t, k, self.names_hex

    def _take_layers(self) -> None:
        if self._layers is None:
            return
        t = self._layers.take()
        self._layers = None  # (it does not pickle)
        proc_of = {n: k for k, n in self._proc_keys.items()}
        for pk, layer, count, dur, own in zip(*(t[k].tolist() for k in ("proc", "layer", "count", "dur", "own"))):
            file_key, pid = proc_of[pk]
            slot = self.layers.setdefault((file_key, pid, LAYERS[layer]), [0, 0, 0])
            slot[0] += count
            slot[1] += dur
            slot[2] += own

    def _take_files(self) -> np.ndarray | None:
        """The files' figures folded while reading, as tables (and the offset samples); the
        numbers of the hex hashes that a row of files names (file_names), or None."""
        if self._files is None:
            return
        e = self._files.take()
        if not len(e["files"]["pid"]):
            return
        fl = e["files"]
        fhash = self._ids.strings(fl["kind"], fl["value"])
        self.files.append(pa.table({"fhash": fhash, "pid": fl["pid"],
                                    **{k: fl[kk] for k, kk in zip(FILE_SUMS, _KERNEL_FILE)}}))
        # a row per (fhash, pid), unless a pid had two processes (images) here: grouped below
        self.files_grouped = len(self.files) == 1 and fl["per_pid"]
        skip = None
        if self.files_grouped:
            self.file_keys = files.hash_keys(fhash, fl["kind"], fl["value"])
            self.file_samples = fl["sampled"].astype(bool)
            self.file_names = _paths(self.fh, fl["kind"], fl["value"], fhash)
            if len(self.fh) == 1 and isinstance(self.fh[0], _kernels.Names):
                # the task's names beside the rows': those of no named row (all_names)
                hexes = fl["kind"] == keys.HEX
                skip = fl["value"][hexes & self.file_names.is_valid().to_numpy(zero_copy_only=False)]
        fs = e["file_sizes"]  # bin: direction * len(SIZE_LABELS) + size bin
        self.file_size_rows = fs["file"] if not self.file_sizes and self.files_grouped else None
        if len(fs["file"]):
            if self.file_size_rows is not None:  # the file's hash and pid are its row's (size_tables)
                self.file_size_rows = narrow(fs["file"])
                self.file_sizes.append(pa.table({"bin": narrow(fs["bin"]), "count": narrow(fs["count"])}))
            else:
                self.file_sizes.append(pa.table({"fhash": fhash.take(pa.array(fs["file"])),
                                                 "pid": fl["pid"][fs["file"]], "bin": fs["bin"], "count": fs["count"]}))
        sm = e["samples"]
        if len(sm["pid"]):
            hexes = bool((sm["kind"] == keys.HEX).all())  # the strings made when asked (Samples.fhash)
            self.activity.samples = Samples(None if hexes else self._ids.strings(sm["kind"], sm["value"]),
                                            narrow(sm["pid"]), sm["kind"].astype(np.int8), sm["value"],
                                            narrow(sm["seen"]), sm["stride"].astype(np.int8), sm["bounds"],
                                            sm["ts"], sm["offset"], sm["length"], sm["dir"])
        return skip

    def size_tables(self) -> list:
        """file_sizes as tables of (fhash, pid, bin, count) (a grouped partial keeps bin and
        count only, each row's file a row of files[0]: file_size_rows)."""
        if self.file_size_rows is None or not self.file_sizes or "fhash" in self.file_sizes[0].column_names:
            return [files.wide_table(t) for t in self.file_sizes]
        f, rows = self.files[0], pa.array(self.file_size_rows)
        t = self.file_sizes[0]
        return [files.wide_table(pa.table({"fhash": f.column("fhash").take(rows), "pid": f.column("pid").take(rows),
                               "bin": t.column("bin"), "count": t.column("count")}))]

    def merge(self, o: Partial) -> None:
        """Add another partial (a later piece of the same files, or other files), both finalized."""
        self.events += o.events
        self.x_events += o.x_events
        self.meta_events += o.meta_events
        self.start = o.start if self.start is None else (self.start if o.start is None else min(self.start, o.start))
        self.end = o.end if self.end is None else (self.end if o.end is None else max(self.end, o.end))
        self.threads |= o.threads
        for k, st in o.procs.items():
            if k in self.procs:
                self.procs[k].merge(st)
            else:
                self.procs[k] = st
        for k, v in o.layers.items():
            mine = self.layers.setdefault(k, [0, 0, 0])
            for i in range(3):
                mine[i] += v[i]
        for k, v in o.cats.items():
            if k in self.cats:
                mine = self.cats[k]
                mine[0] += v[0]
                mine[1] += v[1]
                mine[2].merge(v[2])
            else:
                self.cats[k] = v
        self.calls += o.calls
        self.sizes += o.sizes
        self.file_sizes = self.size_tables() + o.size_tables()
        if self.names is not None or o.names is not None:  # finalized: the later partial's names first
            a, b = o.all_names(), self.all_names()
            tabs = [t for t in (a[0], b[0]) if t is not None]
            self.names = pa.concat_tables(tabs) if len(tabs) > 1 else tabs[0]
            self.name_keys = np.concatenate([a[1], b[1]]) if a[1] is not None and b[1] is not None else None
            self.names_hex = a[2] and b[2]
        self.names_in_files = False
        self.files = [files.wide_table(t) for t in self.files + o.files]
        self.files_grouped = False
        self.file_keys = self.file_samples = self.file_size_rows = self.file_names = None
        self.cat_names += o.cat_names
        for d, acc in o.access.items():
            mine = self.access.setdefault(d, dict(first=0, consecutive=0, sequential=0, random=0))
            for k, v in acc.items():
                mine[k] += v
        for d, h in o.size_hist.items():
            self.size_hist[d] = (np.asarray(self.size_hist.get(d, np.zeros(len(SIZE_LABELS), np.int64)))
                                 + np.asarray(h)).tolist()
        self._merge_timeline(o.tl_exp, o.tl)
        self.fh += o.fh
        self.stdio |= o.stdio
        self.info.update(o.info)
        self.file_counters += o.file_counters
        if o.counted is not None:
            self.counted = o.counted if self.counted is None else _counted([self.counted, o.counted])
        self.training.merge(o.training)
        self.mpi.merge(o.mpi)
        self.counters.merge(o.counters)
        self.activity.merge(o.activity)
        self.compact()

    def compact(self, every: int = 1, final: bool = False) -> None:
        """Fold the per-block tables into one each (bounded by distinct keys), once more than
        `every` have gathered; `final`: the files' table grouped even when it is one."""
        if len(self.calls) > every:
            t = pa.concat_tables(self.calls).group_by("name").aggregate(
                [("dur_count", "sum"), ("dur_sum", "sum"), ("bytes_sum", "sum"), ("err_sum", "sum")])
            self.calls = [t.rename_columns(["name", "dur_count", "dur_sum", "bytes_sum", "err_sum"])]
        if len(self.sizes) > every:
            t = pa.concat_tables(self.sizes).group_by(["name", "size"]).aggregate([("size_count", "sum")])
            self.sizes = [t.rename_columns(["name", "size", "size_count"])]
        if _due(self.files, every) or (final and len(self.files) == 1 and not self.files_grouped):
            t = pa.concat_tables([files.wide_table(t) for t in self.files]) \
                .group_by(["fhash", "pid"]).aggregate(FILE_AGG)
            self.files = [t.rename_columns(["fhash", "pid", *FILE_SUMS])]
            self.files_grouped = True
        if _due(self.file_sizes, every):
            t = pa.concat_tables(self.size_tables()).group_by(["fhash", "pid", "bin"]).aggregate(
                [("count", "sum")])
            self.file_sizes = [t.rename_columns(["fhash", "pid", "bin", "count"])]
        if len(self.cat_names) > every:
            t = pa.concat_tables(self.cat_names).group_by(["cat", "name"]).aggregate(
                [("dur_count", "sum"), ("dur_sum", "sum")])
            self.cat_names = [t.rename_columns(["cat", "name", "dur_count", "dur_sum"])]

    def _merge_timeline(self, exp: int, tl: tuple) -> None:
        if not len(tl):
            return
        if not len(self.tl):
            self.tl_exp, self.tl = exp, tl
        else:
            e = max(self.tl_exp, exp)
            idx = np.concatenate([self.tl[0] >> (e - self.tl_exp), tl[0] >> (e - exp)])
            vals = [np.concatenate([self.tl[k], tl[k]]) for k in (1, 2, 3)]
            self.tl_exp, self.tl = e, binned(idx, *vals)
        if self.start is not None and self.end is not None:  # keep at most ~FINE_BINS bins
            span = max(self.end - self.start, 1)
            want = max(int(np.ceil(np.log2(span / FINE_BINS))), 10) if span > FINE_BINS else 10
            if want > self.tl_exp:
                self.tl = binned(self.tl[0] >> (want - self.tl_exp), *self.tl[1:])
                self.tl_exp = want

    # --- reading ---------------------------------------------------------------------------

    def add(self, ev: pa.Table | pa.RecordBatch, procs: list, proc_of_row: np.ndarray | None,
            compute_cats: tuple[str, ...], names: dict | None = None, own: bool = True,
            ipc: set | None = None) -> None:
        """The events of one block. `procs`: one (file key, host, pid, clock shift ns) per
        process the block holds; `proc_of_row`: each row's index into `procs` (None: the
        single process of `procs`, or one per distinct pid of a file when `procs` holds one
        entry with pid None). The figures are counted by one C++ pass (_kernels.figures);
        here they join the partial's tables. `names`: fhash -> path as far as known (pipes and
        sockets are told from files by it), or `ipc`: the hashes of pipes and sockets among
        them; `own`: iotrace's traces (a peer's, DFTracer's, may name its calls otherwise)."""
        n_rows = ev.num_rows
        if n_rows == 0:
            return
        self.events += n_rows
        pid = np_ints(ev.column("pid"))
        if proc_of_row is None and procs[0][2] is None:  # one file: a process per pid
            file_key, host, _, shift = procs[0]
            if pid[0] == pid[-1] and (pid == pid[0]).all():
                upids = pid[:1]
            else:
                upids, proc_of_row = np.unique(pid, return_inverse=True)
            procs = [(file_key, host, int(p), shift) for p in upids]
        n = len(procs)
        ph_codes, ph_vals = _codes32(ev.column("ph"))
        cat_codes, cat_vals = _codes32(ev.column("cat"))
        name_codes, name_vals = _codes32(ev.column("name"))
        fh_codes, fh_dict = _codes_arrow(ev.column("fhash"))
        low = [str(c).lower() for c in cat_vals]
        K = _kernels  # the kinds' bits are the kernel's
        cat_kind = np.array([(c in IO_CATS) * K.CAT_IO | (c in compute_cats) * K.CAT_COMPUTE
                             | (c in LAYER_CODES and c not in IO_CATS) * K.CAT_PROCESS for c in low], np.uint8)
        name_kind = np.array([(nm in READ_CALLS) * K.CALL_READ | (nm in WRITE_CALLS) * K.CALL_WRITE
                              | (nm in OPEN_CALLS) * K.CALL_OPEN | (nm in SYNC_CALLS) * K.CALL_SYNC
                              | (nm in KNOWN_CALLS or not own) * K.CALL_KNOWN
                              for nm in name_vals], np.uint8)
        if ipc is None:
            names = names or {}
            is_ipc = np.array([file_class.is_ipc(names.get(h)) for h in fh_dict.to_pylist()], bool)
        elif ipc and len(fh_dict):
            is_ipc = pc.is_in(fh_dict, value_set=pa.array(sorted(ipc), pa.string())).to_numpy(
                zero_copy_only=False)
        else:
            is_ipc = np.zeros(len(fh_dict), bool)
        fh_kind = np.where(is_ipc, K.FILE_IPC, 0).astype(np.uint8)
        ph_x = np.array([v == "X" for v in ph_vals], np.uint8)
        ts, dur, tid = _col(ev.column("ts_ns")), _col(ev.column("dur_ns")), _col(ev.column("tid"))
        proc_arr = np.asarray(proc_of_row, np.int64) if proc_of_row is not None else np.zeros(0, np.int64)
        f = _kernels.figures(
            ph=ph_codes, ph_x=ph_x,
            cat=cat_codes, cat_kind=cat_kind, name=name_codes, name_kind=name_kind,
            ts=ts, dur=dur, ret=_col(ev.column("ret")),
            bytes=_col(ev.column("bytes")), size=_col(ev.column("size")),
            offset=_col(ev.column("offset")), errno=_col(ev.column("errno")), fh=fh_codes, fh_kind=fh_kind,
            fd=_col(ev.column("fd")),
            tid=tid, proc=proc_arr, n_procs=n, shifts=np.array([p[3] for p in procs], np.int64), tl_exp=self.tl_exp)
        self.training.add(ev, procs, proc_of_row, cat_codes, cat_vals, name_codes, name_vals)
        # files written through fd 1 or 2: stdout and stderr redirected to a file are logs
        if len(f["stdio_fh"]):
            self.stdio |= set(fh_dict.take(pa.array(f["stdio_fh"])).to_pylist())
        self.counters.add(ev, procs, proc_of_row, ph_codes, ph_vals, name_codes, name_vals)
        self.x_events += f["x_events"]
        self.start = f["start_j"] if self.start is None else min(self.start, f["start_j"])
        self.end = f["end_j"] if self.end is None else max(self.end, f["end_j"])
        th = f["threads"]
        self.threads |= {(procs[p][1], procs[p][2], int(t)) for p, t in zip(th["proc"], th["tid"])}

        # --- per process: counts, sums, first and last, interval unions
        fp = f["procs"]
        runs = f["unions"]
        for i, (file_key, host, p, _shift) in enumerate(procs):
            if not fp["events"][i]:
                continue
            key = (file_key, p)
            st = self.procs.get(key)
            if st is None:
                st = self.procs[key] = ProcState(host, p)
            st.events += int(fp["events"][i])
            st.io_events += int(fp["io_events"][i])
            st.first = min(st.first, int(fp["first"][i]))
            st.last = max(st.last, int(fp["last"][i]))
            st.bytes_read += int(fp["bytes_read"][i])
            st.bytes_written += int(fp["bytes_written"][i])
            st.io_call_time += int(fp["io_call_time"][i])
            for k, r in runs.items():
                a, b = r["bounds"][i], r["bounds"][i + 1]
                if b > a:
                    st.unions[k].add_runs(r["starts"][a:b], r["ends"][a:b])

        # --- per call name, (name, size), per file and process
        c = f["calls"]
        used = np.flatnonzero(c["count"])
        self.calls.append(pa.table({
            "name": pa.array([str(name_vals[k]) for k in used], pa.string()),
            "dur_count": c["count"][used], "dur_sum": c["dur"][used],
            "bytes_sum": c["bytes"][used], "err_sum": c["errors"][used]}))
        sz = f["sizes"]
        if len(sz["name"]):
            self.sizes.append(pa.table({
                "name": pa.array([str(name_vals[k]) for k in sz["name"]], pa.string()),
                "size": sz["size"], "size_count": sz["count"]}))
        # per (fhash, pid): sums, calls per size bin, offset samples, and the streams of calls
        # that go on from block to block: folded in C++ (a million files: no table per block)
        kind, value = self._ids.of(fh_dict)
        pids = np.array([p[2] for p in procs], np.int64)
        pk = np.array([self._proc_keys.setdefault((p[0], p[2]), len(self._proc_keys)) for p in procs], np.int64)
        carried = self._files.fold(f, value, kind, pk, pids)
        # --- MPI calls, kept as they are (an MPI-IO call is a rank's whole request: few)
        mpi_cats = [i for i, c in enumerate(low) if c in ("mpi", "mpiio")]
        if mpi_cats:
            rows = np.flatnonzero(np.isin(cat_codes, mpi_cats) & (ph_x[ph_codes] == 1))
            if len(rows):
                self.mpi.add(ev, rows, procs, proc_arr[rows] if len(proc_arr) else np.zeros(len(rows), np.int64),
                             np_ints(ev.column("ts_ns")), np_ints(ev.column("dur_ns")))
        # --- each complete event's own time, by layer (the tracer's categories; others: app)
        self._layers.add(ph=ph_codes, ph_x=ph_x, cat=cat_codes,
                         cat_layer=np.array([LAYER_CODES.get(c, 0) for c in low], np.uint8),
                         name=name_codes, name_kind=name_kind, ts=ts, dur=dur, tid=tid,
                         proc=proc_arr, pk=pk)

        # --- @trace categories (X events that are neither I/O nor process events)
        ca = f["cats"]
        cr = ca["runs"]
        for j, (p, cc) in enumerate(zip(ca["proc"], ca["cat"])):
            file_key, _h, pid_, _s = procs[p]
            k = (file_key, pid_, str(cat_vals[cc]))
            slot = self.cats.get(k)
            if slot is None:
                slot = self.cats[k] = [0, 0, Union()]
            slot[0] += int(ca["count"][j])
            slot[1] += int(ca["dur"][j])
            slot[2].add_runs(cr["starts"][cr["bounds"][j]:cr["bounds"][j + 1]],
                             cr["ends"][cr["bounds"][j]:cr["bounds"][j + 1]])
        cn = f["cat_names"]
        if len(cn["cat"]):
            self.cat_names.append(pa.table({
                "cat": pa.array([str(cat_vals[k]) for k in cn["cat"]], pa.string()),
                "name": pa.array([str(name_vals[k]) if k >= 0 else None for k in cn["name"]], pa.string()),
                "dur_count": cn["count"], "dur_sum": cn["dur"]}))

        # --- access pattern and sizes; a stream's first call in a block against where it ended
        # in the block before (carried)
        for direction, (first, consecutive, sequential, random) in zip(("read", "write"), carried):
            d = f[direction]
            if d["hist"].any():
                before = self.size_hist.get(direction, np.zeros(len(SIZE_EDGES), np.int64))
                self.size_hist[direction] = (np.asarray(before) + d["hist"]).tolist()
            acc = self.access.setdefault(direction, dict(first=0, consecutive=0, sequential=0, random=0))
            acc["first"] += first
            acc["consecutive"] += int(d["consecutive"]) + consecutive
            acc["sequential"] += int(d["sequential"]) + sequential
            acc["random"] += int(d["random"]) + random

        # --- timeline: sparse bins on the job clock, by start time; per process for the page
        tl = f["timeline"]
        if len(tl["bin"]):
            exp = self.tl_exp  # the kernel's bins; merging may coarsen self.tl_exp
            self._merge_timeline(exp, binned(tl["bin"], *[tl[k].astype(np.float64)
                                                                   for k in ("read", "written", "ops")]))
            self.activity.add_bins(tl, procs, exp, self.tl_exp)
        # @trace's categories, compute's too
        phase_cats = np.flatnonzero((cat_kind & (_kernels.CAT_IO | _kernels.CAT_PROCESS)) == 0)
        if len(phase_cats):
            rows = np.flatnonzero(np.isin(cat_codes, phase_cats)
                                  & np.isin(ph_codes, [i for i, v in enumerate(ph_vals) if v == "X"]))
            if len(rows):
                prow = np.asarray(proc_of_row)[rows] if proc_of_row is not None else np.zeros(len(rows), np.int64)
                shift = np.array([p[3] for p in procs], np.int64)[prow]
                self.activity.add_phases([(p[1], p[2]) for p in procs], prow, cat_codes[rows], name_codes[rows],
                                         np_ints(ev.column("ts_ns"))[rows] + shift,
                                         np_ints(ev.column("dur_ns"))[rows], cat_vals, name_vals)
        self.compact(every=32)


def _due(tables: list, every: int) -> bool:
    """Whether per (file, process) tables are to be folded: more than `every` of them and, for
    `every` > 1 (while reading), twice as many rows added as the folded table has, a million at
    least. A few files read over and over add a few rows a block (100M events: 200K rows); a
    million files read once fold into as many rows, and folding every few blocks grouped the
    growing table again and again."""
    if len(tables) <= every:
        return False
    return every <= 1 or sum(t.num_rows for t in tables[1:]) >= max(1 << 20, 2 * tables[0].num_rows)


def _codes_arrow(col) -> tuple[np.ndarray, pa.Array]:
    """int32 dictionary codes (-1 for nulls) and the dictionary, as strings, of a column."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    idx = col.indices
    if idx.null_count:
        idx = pc.fill_null(idx, -1)
    codes = idx.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    d = col.dictionary
    return codes, d if d.type == pa.string() else d.cast(pa.string())


def _codes32(col) -> tuple[np.ndarray, list]:
    """int32 dictionary codes (-1 for nulls) and the dictionary's values of a string column."""
    codes, d = _codes_arrow(col)
    return codes, d.to_pylist()


def _length(u) -> int:
    return u.length() if isinstance(u, Union) else int(u)


_NO_BITMAP = np.zeros(0, np.uint8)


def _col(col) -> tuple:
    """An Arrow integer column for the kernel as Arrow holds it: (int64 values, validity
    bitmap or an empty array, bit offset of row 0). No copy of int64 columns."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if col.type != pa.int64():
        col = pc.cast(col, pa.int64())
    if col.null_count == len(col):  # an all-null array may have no value buffer
        return np.zeros(len(col), np.int64), np.zeros((len(col) + 7) // 8, np.uint8), 0
    bitmap, values = col.buffers()[:2]
    v = np.frombuffer(values, np.int64, len(col) + col.offset)[col.offset:]
    if not col.null_count or bitmap is None:
        return v, _NO_BITMAP, 0
    return v, np.frombuffer(bitmap, np.uint8), col.offset


def np_ints(col, dtype=np.int64):
    """An Arrow integer column as numpy, nulls as 0."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if col.type == pa.int64() and col.offset == 0 and col.null_count == 0:
        return np.frombuffer(col.buffers()[1], np.int64, len(col))
    return pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


# --------------------------------------------------------------------------- merge


def _quantiles(values: np.ndarray, counts: np.ndarray, qs) -> list[float]:
    """Quantiles (numpy's default linear interpolation) of a list given as value counts."""
    order = np.argsort(values)
    v, c = values[order], counts[order]
    cum = np.cumsum(c)
    n = int(cum[-1])
    out = []
    for q in qs:
        h = (n - 1) * q
        lo = int(np.floor(h))
        i_lo = int(np.searchsorted(cum, lo + 1))
        i_hi = int(np.searchsorted(cum, min(lo + 2, n)))
        out.append(float(v[i_lo] + (h - lo) * (v[i_hi] - v[i_lo])))
    return out


def _concat(tables):
    tables = [t for t in tables if t is not None and t.num_rows]
    return pa.concat_tables(tables) if tables else None


def _names_of(names: list) -> tuple:
    """(fhash -> path of the files read, the last file's first, as a table; its hashes'
    numbers; whether all are 16 hex digits) of a task's names (dicts or _kernels.Names)."""
    from ..outputs.parquet import names_table

    parts = [names_table(n) for n in reversed(names)] if len(names) < 64 else [names_table(list(reversed(names)))]
    if not parts:
        return (pa.table({"fhash": pa.array([], pa.string()), "name": pa.array([], pa.string())}),
                np.zeros(0, np.uint64), True)
    t = pa.concat_tables([p[0] for p in parts]) if len(parts) > 1 else parts[0][0]
    kind, value = (np.concatenate([p[k] for p in parts]) for k in (1, 2))
    return t, files.hash_keys(t.column("fhash").combine_chunks(), kind, value), bool((kind == keys.HEX).all())


def _paths(names: list, kind: np.ndarray, value: np.ndarray, fhash: pa.Array) -> pa.Array:
    """The paths of a task's hashes in its names (the last file read first), null where none."""
    if len(names) == 1 and isinstance(names[0], _kernels.Names) and (kind == keys.HEX).all():
        return keys.strings(*names[0].paths(value))
    from ..outputs.parquet import names_dict

    merged: dict = {}
    for m in names:
        merged.update(names_dict(m))
    return pa.array([merged.get(h) for h in fhash.to_pylist()], pa.string())


def _names(partials: list[Partial]) -> tuple:
    """(fhash -> path of all partials, the last partial's first (a lookup takes a hash's first
    row: the name the last partial gave it, as dict updates in partial order would); the
    hashes' numbers (files.hash_keys), or None when a partial has none; whether all are 16 hex
    digits)."""
    tabs, nums, hexes = [], [], []
    for p in reversed(partials):
        t, k, h = p.all_names()
        tabs.append(t)
        nums.append(k)
        hexes.append(h)
    return (pa.concat_tables(tabs) if tabs else None,
            np.concatenate(nums) if nums and all(k is not None for k in nums) else None, all(hexes))


def _names_of_hashes(partials: list[Partial], hashes: list) -> dict:
    """fhash -> path of a few hashes (the name the last partial gave each)."""
    t = _names(partials)[0]
    if t is None or not hashes:
        return {}
    t = t.filter(pc.is_in(t.column("fhash"), value_set=pa.array(sorted(set(hashes)), pa.string())))
    out: dict = {}
    for h, n in zip(t.column("fhash").to_pylist(), t.column("name").to_pylist()):
        out.setdefault(h, n)
    return out


def build(partials: list[Partial], top: int = 20, prefixes: tuple[str, ...] = (),
          dirs: frozenset = frozenset()) -> Job:
    """The job from all files' partials: its summary (a JSON-ready dict) and every row the
    summary has the top of. `prefixes`: the traced interpreters' installation prefixes
    (file_class.software_prefixes), `dirs` the folders their imports stat
    (file_class.import_dirs)."""
    S: dict = {}
    stdio: set = set()
    for p in partials:
        stdio |= p.stdio
    keyed = [(k, st.figures(p.info.get(k))) for p in partials for k, st in p.procs.items() if st.events]
    procs = [d for _k, d in keyed]
    bounds = [(d.pop("start_j"), d.pop("end_j")) for d in procs]
    hosts = sorted({d["host"] for d in procs if d["host"]})
    starts = [p.start for p in partials if p.start is not None]
    ends = [p.end for p in partials if p.end is not None]
    job_start, job_end = (min(starts), max(ends)) if starts else (0, 0)
    wall = (min(b[0] for b in bounds), max(b[1] for b in bounds)) if bounds else (0, 0)
    S["job"] = dict(
        duration_us=units.us(job_end - job_start), start_ns=job_start, end_ns=job_end,
        wall_us=units.us(wall[1] - wall[0]),
        processes=len({(d["host"], d["pid"]) for d in procs}),
        threads=len(set().union(*[p.threads for p in partials])) if partials else 0,
        hosts=len(hosts), host_names=hosts,
        files=0,  # the distinct hashes: below, with the files
        events=sum(p.events for p in partials), complete_events=sum(p.x_events for p in partials),
        metadata_events=sum(p.meta_events for p in partials))

    # --- time split: per process and summed over processes
    # shares are of the processes' wall time (start to end records), what a person means by
    # "my job spends X% in I/O"; "app" is only the union of the traced events
    keys = ["wall_ns", "lifetime_ns", "app_ns", "io_ns", "compute_ns", "io_not_overlapped_ns",
            "compute_not_overlapped_ns", "io_call_time_ns", "ipc_wait_ns"]
    tot = {k: sum(d[k] for d in procs) for k in keys}
    S["time"] = {k.replace("_ns", "_us"): units.us(v) for k, v in tot.items()}
    S["time"]["io_share_of_app"] = round(tot["io_ns"] / tot["app_ns"], 6) if tot["app_ns"] else 0.0
    S["time"]["io_share_of_wall"] = round(tot["io_ns"] / tot["wall_ns"], 6) if tot["wall_ns"] else 0.0
    for d in procs:
        d["io_share_of_wall"] = round(d["io_ns"] / d["wall_ns"], 6) if d["wall_ns"] else 0.0
    us_keys = {k: k.replace("_ns", "_us") for k in (procs[0] if procs else ()) if k.endswith("_ns")}
    S["processes"] = sorted(
        [{us_keys.get(k, k): (units.us(v) if k in us_keys and v is not None else v) for k, v in d.items()}
         for d in procs], key=lambda d: (-d["io_us"], d["host"], d["pid"]))

    # --- per call name
    calls = _concat([t for p in partials for t in p.calls])
    sizes = _concat([t for p in partials for t in p.sizes])
    rows = []
    meta_cnt = meta_dur = io_cnt = io_dur = 0
    if calls is not None:
        c = calls.group_by("name").aggregate(
            [("dur_count", "sum"), ("dur_sum", "sum"), ("bytes_sum", "sum"), ("err_sum", "sum")])
        sz = sizes.group_by(["name", "size"]).aggregate([("size_count", "sum")]) if sizes else None
        for r in c.to_pylist():
            name, count, dur, nbytes = r["name"], r["dur_count_sum"], r["dur_sum_sum"], r["bytes_sum_sum"]
            row = dict(name=name, count=count, time_us=units.us(dur), bytes=nbytes, errors=r["err_sum_sum"],
                       size_min=None, size_p25=None, size_mean=None, size_median=None,
                       size_p75=None, size_max=None,
                       bandwidth_MBps=units.mbps(nbytes, dur) if dur and nbytes else None)
            if sz is not None:
                s = sz.filter(pc.equal(sz.column("name"), name))
                if s.num_rows:
                    v = s.column("size").to_numpy().astype(np.float64)
                    k = s.column("size_count_sum").to_numpy()
                    p25, med, p75 = _quantiles(v, k, (0.25, 0.5, 0.75))
                    row.update(size_min=int(v.min()), size_p25=p25, size_median=med, size_p75=p75,
                               size_max=int(v.max()), size_mean=round(float((v * k).sum() / k.sum()), 3))
            rows.append(row)
            io_cnt += count
            io_dur += dur
            if name not in DATA_CALLS and name not in SYNC_CALLS:
                meta_cnt += count
                meta_dur += dur
    S["calls"] = sorted(rows, key=lambda r: (-r["time_us"], r["name"]))
    S["metadata_calls"] = dict(
        count=meta_cnt, time_us=units.us(meta_dur),
        count_share=round(meta_cnt / io_cnt, 6) if io_cnt else 0.0,
        time_share=round(meta_dur / io_dur, 6) if io_dur else 0.0)

    # --- files: every file's row as columns (files.py), the top ones in the summary
    table, classes, file_sizes, by_pid = files.collect(partials, lambda: _names(partials)[:2], stdio, prefixes,
                                                       dirs, FILE_AGG, FILE_SUMS, len(SIZE_LABELS))
    S["job"]["files"] = len(table)  # a row per distinct hash
    # per class: the job's data apart from the software it loads, the system, pipes
    S["file_classes"] = classes
    # metadata calls on the job's data files only (a Python start-up's stats are software's)
    sums = ("count", "time_us", "bytes_read", "bytes_written", "metadata_count", "metadata_time_us")
    d = S["file_classes"].get("data", dict.fromkeys(sums, 0))
    S["metadata_calls"]["data_files"] = dict(
        count=d["metadata_count"], time_us=d["metadata_time_us"],
        count_share=round(d["metadata_count"] / d["count"], 6) if d["count"] else 0.0,
        time_share=round(d["metadata_time_us"] / d["time_us"], 6) if d["time_us"] else 0.0)
    # the top files: data first (what a person tuning I/O looks at), then the others
    data = table.is_class("data")
    S["files"] = table.rows(np.flatnonzero(data)[:top]) + table.rows(np.flatnonzero(~data)[:top])
    job = Job(S, files=table, file_sizes=file_sizes, data_by_pid=by_pid)

    # --- @trace categories
    cat_rows = [dict(pid=k[1], cat=k[2], count=v[0], dur=v[1], union=_length(v[2]))
                for p in partials for k, v in p.cats.items()]
    for r in cat_rows:  # per pid: each category's union (a loop's waits against its compute)
        slot = job.cats_by_pid.setdefault(r["pid"], {})
        slot[r["cat"]] = slot.get(r["cat"], 0.0) + units.us(r["union"])
    cats = pa.Table.from_pylist(cat_rows) if cat_rows else None
    crows = []
    if cats is not None:
        g = cats.group_by("cat").aggregate([("count", "sum"), ("dur", "sum"), ("union", "sum"),
                                            ("pid", "count")])
        cn = _concat([t for p in partials for t in p.cat_names]).group_by(["cat", "name"]).aggregate(
            [("dur_count", "sum"), ("dur_sum", "sum")]).to_pylist()
        for r in g.to_pylist():
            names = sorted([x for x in cn if x["cat"] == r["cat"]], key=lambda x: -x["dur_sum_sum"])
            crows.append(dict(
                cat=r["cat"], count=r["count_sum"], time_us=units.us(r["dur_sum"]),
                union_us=units.us(r["union_sum"]),
                share_of_app=round(r["union_sum"] / tot["app_ns"], 6) if tot["app_ns"] else 0.0,
                top_names=[dict(name=x["name"], count=x["dur_count_sum"], time_us=units.us(x["dur_sum_sum"]))
                           for x in names[:5]]))
    S["categories"] = sorted(crows, key=lambda r: (-r["union_us"], r["cat"]))
    counted = [p.counted for p in partials if p.counted is not None]
    if counted:  # a Darshan log's job record, and what its counters could not tell
        S["darshan"] = _counted(counted)
        fc = [t for p in partials for t in p.file_counters if t.num_rows]
        job.file_counters = pa.concat_tables(fc) if fc else None
    S["layers"], job.layers = layer_split(partials)
    own: dict = {}
    for r in job.layers:
        own.setdefault(r.pop("key"), {})[r["layer"]] = r["own_ns"]
    S["mpi"], job.mpi_calls = mpi.summarize(
        [p.mpi for p in partials], lambda hashes: _names_of_hashes(partials, hashes),
        {k: dict(d, wall_us=units.us(d["wall_ns"])) for k, d in keyed}, own, SIZE_EDGES, SIZE_LABELS)
    if S["mpi"] is None:
        del S["mpi"]

    # --- access pattern and size histogram
    acc = {}
    for d in ("read", "write"):
        acc[d] = {k: sum(p.access.get(d, {}).get(k, 0) for p in partials)
                  for k in ("first", "consecutive", "sequential", "random")}
        acc[d]["size_histogram"] = dict(zip(SIZE_LABELS, np.sum(
            [p.size_hist.get(d, [0] * len(SIZE_LABELS)) for p in partials] or [[0] * len(SIZE_LABELS)],
            axis=0).astype(int).tolist()))
    acc["size_histogram_by_family"] = _family_histograms(sizes)
    S["access"] = acc
    S["timeline"] = _timeline(partials, job_start, job_end)
    S["phases"], job.drawn = activity.summarize([p.activity for p in partials], S["timeline"], table)
    S["training"] = training.summarize([p.training for p in partials])
    S["counters"], job.drawn.counters = counters.summarize([p.counters for p in partials], S["processes"])
    return job


def _counted(parts: list[dict]) -> dict:
    """The `darshan` section of one log, or of several: each under `logs`, what is estimated,
    not known and skipped said once."""
    if len(parts) == 1:
        return parts[0]
    logs = [lg for p in parts for lg in p.get("logs", [p])]
    common = ("estimated", "not_known", "rules_skipped")
    return dict(logs=[{k: v for k, v in lg.items() if k not in common} for lg in logs],
                nprocs=max(lg["nprocs"] for lg in logs), dxt=any(lg["dxt"] for lg in logs),
                missing=sorted({m for lg in logs for m in lg["missing"]}),
                **{k: parts[0][k] for k in common})


def layer_split(partials: list[Partial]) -> tuple[list, list]:
    """Time per layer, each event's own (its duration less the events nested in it on its
    thread), summed over the job: its summary rows, top layer first, and its rows per process
    (model.Job.layers). Own times add up to the thread time spent in traced events."""
    per_proc = []
    for p in partials:
        for (file_key, pid, layer), (count, dur, own) in p.layers.items():
            st, info = p.procs.get((file_key, pid)), p.info.get((file_key, pid)) or {}
            per_proc.append(dict(key=(file_key, pid), host=st.host if st else None, pid=pid, rank=rank_of(info),
                                 layer=layer, calls=count, time_ns=dur, own_ns=own))
    total = sum(r["own_ns"] for r in per_proc)
    rows = []
    for layer in LAYERS:
        mine = [r for r in per_proc if r["layer"] == layer]
        if mine:
            own = sum(r["own_ns"] for r in mine)
            rows.append(dict(layer=layer, calls=sum(r["calls"] for r in mine),
                             time_us=units.us(sum(r["time_ns"] for r in mine)), own_us=units.us(own),
                             own_share=round(own / total, 6) if total else 0.0))
    return rows, per_proc


def _family_histograms(sizes) -> dict:
    """Calls per access-size bin (SIZE_LABELS) of each call family that moves data, as
    "<category> <family>" (posix read, stdio write...), from the (name, size) counts."""
    out: dict = {}
    if sizes is None:
        return out
    kind = {name: f"{cat} {fam}" for _n, name, cat, fam in calls() if fam in ("read", "write")}
    g = sizes.group_by(["name", "size"]).aggregate([("size_count", "sum")])
    names = g.column("name").to_pylist()
    size = g.column("size").to_numpy()
    count = g.column("size_count_sum").to_numpy()
    bins = np.clip(np.searchsorted(SIZE_EDGES, size, side="right") - 1, 0, len(SIZE_LABELS) - 1)
    for fam in sorted({kind[n] for n in set(names) if n in kind}):
        m = np.array([kind.get(n) == fam for n in names])
        out[fam] = dict(zip(SIZE_LABELS, np.bincount(bins[m], weights=count[m], minlength=len(SIZE_LABELS))
                            .astype(np.int64).tolist()))
    return out


def _timeline(partials, job_start, job_end) -> dict:
    span = max(job_end - job_start, 1)
    exps = [p.tl_exp for p in partials if len(p.tl)]
    exp = max(exps + [int(np.ceil(np.log2(span / TIMELINE_BINS))) if span > TIMELINE_BINS else 0])
    b0 = job_start >> exp
    nb = (job_end >> exp) - b0 + 1
    acc = np.zeros((3, nb))
    for p in partials:
        if not len(p.tl):
            continue
        idx = (p.tl[0] >> (exp - p.tl_exp)) - b0
        idx = np.clip(idx, 0, nb - 1)
        for k in range(3):
            np.add.at(acc[k], idx, p.tl[k + 1])
    width = 1 << exp
    return dict(bin_ns=width, start_ns=int(b0 << exp), bytes_read=acc[0].astype(np.int64).tolist(),
                bytes_written=acc[1].astype(np.int64).tolist(), ops=acc[2].astype(np.int64).tolist())
