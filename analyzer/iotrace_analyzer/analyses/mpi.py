"""The MPI job's questions, as Darshan and Drishti users ask them: a shared file or a file per
process? collective or independent I/O, blocking or not? which ranks are slow, and how long do
the others wait for them in collective calls? is a rank's POSIX I/O its own or the aggregation
a collective made it do for all? are requests aligned to the file system's stripe?

Each trace file's MPI calls (categories `mpiio` and `mpi`: few, an MPI-IO call moves a rank's
whole request) are kept as a small table while it is read (MpiPart), on the job clock; the
merge groups them by file, by rank and by collective call. The time each rank spent in MPI-IO
apart from the POSIX calls under it comes from the layer split (summary.layer_split).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iotrace_format import calls_of

from .. import units

READS = calls_of("read")
WRITES = calls_of("write")
COLUMNS = ("file_key", "pid", "cat", "fhash", "name", "ts", "dur", "bytes", "size", "offset")
# MPI's start and end: their length is the launch's and the other ranks' start-up, not waiting
# for I/O; they are left out of the waits.
START_END = ("MPI_Init", "MPI_Init_thread", "MPI_Finalize")
# MPI-IO calls that every rank of the file's communicator makes, besides the data calls named
# _all and _ordered (MPI 4.0, 14.2)
COLLECTIVE_FILE_CALLS = ("MPI_File_open", "MPI_File_close", "MPI_File_set_view", "MPI_File_set_size",
                         "MPI_File_preallocate", "MPI_File_sync", "MPI_File_seek_shared")



def _file_shape(out: dict, files: list[dict]) -> None:
    """The MPI-IO files, most bytes first (20 kept), and the job's shape: shared file, file
    per process, both or none."""
    files.sort(key=lambda r: (-(r["bytes_read"] + r["bytes_written"]), r["file"] or ""))
    shared = [f for f in files if f["processes"] > 1]
    per_proc = [f for f in files if f["processes"] == 1]
    out["shape"] = ("shared file" if shared and not per_proc else "file per process" if per_proc and not shared
                    else "both" if files else "none")
    out["shared_files"], out["per_process_files"] = len(shared), len(per_proc)
    out["files"] = files[:20]

def collective(name: str) -> bool:
    """A collective MPI-IO data call: every rank of the file's communicator makes it (`_all`,
    `_ordered`, their split and non-blocking forms)."""
    return "_all" in name or "_ordered" in name


@dataclass
class MpiPart:
    """A task's MPI calls, as columns (COLUMNS); `ts` on the job clock, ns."""

    tables: list = field(default_factory=list)
    # an input of counters (a Darshan log): its MPI-IO counters per (file, rank) (the columns of
    # inputs/darshan.MPI_COLUMNS, with file_key, pid, fhash and processes: the ranks a row's
    # record stood for) and its request size bins ({"read": [...], "write": [...]})
    counters: list = field(default_factory=list)
    sizes: list = field(default_factory=list)

    def add(self, ev, rows: np.ndarray, procs: list, proc_row: np.ndarray, ts: np.ndarray,
            dur: np.ndarray) -> None:
        """The block's `rows` that are MPI calls; `proc_row` their index into `procs` (file
        key, host, pid, clock shift)."""
        take = pa.array(rows)
        self.tables.append(pa.table({
            "file_key": pa.array([procs[p][0] for p in proc_row], pa.int64()),
            "pid": pa.array([procs[p][2] for p in proc_row], pa.int64()),
            "cat": ev.column("cat").take(take).cast(pa.string()),
            "fhash": ev.column("fhash").take(take).cast(pa.string()),
            "name": ev.column("name").take(take).cast(pa.string()),
            "ts": pa.array(ts[rows] + np.array([procs[p][3] for p in proc_row], np.int64), pa.int64()),
            "dur": pa.array(dur[rows], pa.int64()),
            **{k: pc.cast(ev.column(k).take(take), pa.int64()) for k in ("bytes", "size", "offset")}}))

    def merge(self, o: MpiPart) -> None:
        self.tables += o.tables
        self.counters += o.counters
        self.sizes += o.sizes

    def compact(self) -> None:
        if len(self.tables) > 1:
            self.tables = [pa.concat_tables(self.tables)]
        if len(self.counters) > 1:
            self.counters = [pa.concat_tables(self.counters)]


def data_calls(name: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of MPI-IO calls: which move data (counted once: a split or non-blocking call's bytes
    at its start, `_begin` or `i...`, not again at its end), which read, which write."""
    is_read = np.array([n in READS for n in name], bool)
    is_write = np.array([n in WRITES for n in name], bool)
    counted = np.array([not n.endswith("_end") for n in name], bool) & (is_read | is_write)
    return counted, is_read, is_write


def misaligned(offset: np.ndarray, size: np.ndarray, stripe: int) -> np.ndarray:
    """Requests that touch more stripes than their size needs: they start off a stripe boundary
    and cross one (each then takes two storage servers' locks on Lustre, two GPFS blocks shared
    with the neighbouring rank). A 4 KiB request inside one stripe is not one of them."""
    first, last = offset // stripe, (offset + np.maximum(size, 1) - 1) // stripe
    need = (size + stripe - 1) // stripe
    return (offset >= 0) & (size > 0) & (last - first + 1 > need)


def collective_waits(key: np.ndarray, proc: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                     work: np.ndarray) -> dict:
    """The collective calls of the ranks (`key` naming the call and its file, `proc` the rank's
    process, `work` the time the rank spent since its previous collective call or MPI's start):
    the k-th call of a key on each rank is one operation; keys whose ranks made different
    numbers of calls (sub-communicators) or that one rank alone made are not matched.
    Per call: `wait`, the time it stood in the call before the last rank arrived; `slow`, the
    part of that wait a slower rank's longer work since the previous collective explains (a rank
    that comes late because the previous collective kept it longer, as its aggregator, explains
    none: that is the collective's own cost); `caused`, on the rank with the most work of each
    operation, the others' `slow` waits; `last`, the rank arrived last; `matched`; `op`, the
    operation's number (-1: unmatched)."""
    n = len(ts)
    out = dict(wait=np.zeros(n, np.int64), slow=np.zeros(n, np.int64), caused=np.zeros(n, np.int64),
               last=np.zeros(n, bool), matched=np.zeros(n, bool), op=np.full(n, -1, np.int64))
    if n == 0:
        return out
    order = np.lexsort((ts, proc, key))
    k, p = key[order], proc[order]
    new_run = np.r_[True, (k[1:] != k[:-1]) | (p[1:] != p[:-1])]
    run_start = np.flatnonzero(new_run)
    run_len = np.diff(np.r_[run_start, n])
    ordinal = np.arange(n) - np.repeat(run_start, run_len)
    # a key is matched when its ranks all made it the same number of times, and >= 2 ranks did
    keys_u, kinv = np.unique(k[run_start], return_inverse=True)
    lo = np.full(len(keys_u), np.iinfo(np.int64).max)
    hi = np.zeros(len(keys_u), np.int64)
    np.minimum.at(lo, kinv, run_len)
    np.maximum.at(hi, kinv, run_len)
    ok = np.repeat(((lo == hi) & (np.bincount(kinv, minlength=len(keys_u)) >= 2))[kinv], run_len)
    # one operation per (key, ordinal): its last arrival and its most work
    ops, oinv = np.unique(k.astype(np.int64) * (int(run_len.max()) + 1) + ordinal, return_inverse=True)
    t, d, w = ts[order], dur[order], np.maximum(work[order], 0)
    arrive = np.full(len(ops), np.iinfo(np.int64).min)
    np.maximum.at(arrive, oinv, t)
    most = np.zeros(len(ops), np.int64)
    np.maximum.at(most, oinv, w)
    wait = np.where(ok, np.clip(arrive[oinv] - t, 0, d), 0)
    slow = np.where(ok, np.minimum(wait, most[oinv] - w), 0)
    per_op = np.bincount(oinv, weights=slow, minlength=len(ops)).astype(np.int64)
    # the op's slowest rank (the first of equals) is charged with the others' waits
    first = np.full(len(ops), n, np.int64)
    np.minimum.at(first, oinv, np.where(w == most[oinv], np.arange(n), n))
    caused = np.zeros(n, np.int64)
    caused[first[first < n]] = per_op[first < n]
    for name, v in (("wait", wait), ("slow", slow), ("caused", np.where(ok, caused, 0)),
                    ("last", ok & (t == arrive[oinv])), ("matched", ok), ("op", np.where(ok, oinv, -1))):
        out[name][order] = v
    return out


def summarize(parts: list[MpiPart], names_of, procs: dict, own: dict, size_edges: list, size_labels: list,
              stripe: int = 1 << 20) -> tuple[dict | None, pa.Table | None]:
    """summary.json's `mpi` section (None for a job without MPI calls): the job's MPI-IO calls,
    collective and independent, blocking and not, their sizes and alignment; per file its ranks
    and whether it is shared; per rank its MPI-IO calls, bytes and time, the time it waited in
    collective calls for the last rank, and its own time in MPI-IO and in POSIX; the collective
    operations' waits. And the calls as a table (model.Job.mpi_calls).
    `names_of(hashes)`: fhash -> path; `procs`: (file key, pid) -> the process's summary row
    (host, pid, rank, bytes_read, bytes_written, wall_us); `own`: (file key, pid) -> {layer:
    own ns} (the layer split)."""
    tabs = [t for p in parts for t in p.tables if t.num_rows]
    if not tabs:
        counted = [t for p in parts for t in p.counters if t.num_rows]
        if counted:
            return summarize_counters(pa.concat_tables(counted), [s for p in parts for s in p.sizes], names_of,
                                      procs, own, size_labels, stripe), None
        return None, None
    t = pa.concat_tables(tabs)
    name = t.column("name").to_pylist()
    cat = t.column("cat").to_pylist()
    is_io = np.array([c == "mpiio" for c in cat], bool)
    is_coll = np.array([collective(n) for n in name], bool) & is_io
    is_nb = np.array([n.startswith("MPI_File_i") for n in name], bool) & is_io
    counted, is_read, is_write = data_calls(name)
    counted &= is_io
    moved = pc.fill_null(t.column("bytes"), 0).to_numpy(zero_copy_only=False)
    asked = pc.fill_null(t.column("size"), -1).to_numpy(zero_copy_only=False)
    off = pc.fill_null(t.column("offset"), -1).to_numpy(zero_copy_only=False)
    dur = t.column("dur").to_numpy()
    ts = t.column("ts").to_numpy()
    fkey = t.column("file_key").to_numpy()
    pid = t.column("pid").to_numpy()
    fh = t.column("fhash").to_pylist()
    _u, proc = np.unique(np.stack([fkey, pid]), axis=1, return_inverse=True)
    proc = proc.ravel()

    def split(mask) -> dict:
        m = mask & counted
        return dict(calls=int(m.sum()), bytes_read=int(moved[m & is_read].sum()),
                    bytes_written=int(moved[m & is_write].sum()), time_us=units.us(int(dur[mask & is_io].sum())))

    io_dur = dur[is_io]
    out = dict(calls=int(is_io.sum()), time_us=units.us(int(io_dur.sum())),
               collective=split(is_coll), independent=split(~is_coll),
               blocking=split(~is_nb), nonblocking=split(is_nb))
    # request sizes (bytes asked), Darshan's bins; alignment to the stripe
    req = counted & (asked >= 0)
    bins = np.clip(np.searchsorted(size_edges, asked[req], side="right") - 1, 0, len(size_labels) - 1)
    for d, m in (("read", is_read[req]), ("write", is_write[req])):
        out[f"{d}_sizes"] = dict(zip(size_labels, np.bincount(bins[m], minlength=len(size_labels)).tolist()))
    bad = counted & misaligned(off, np.maximum(asked, 0), stripe)
    out.update(stripe=stripe, data_calls_with_offset=int((counted & (off >= 0)).sum()),
               misaligned_calls=int(bad.sum()), misaligned_time_us=units.us(int(dur[bad].sum())))

    # per file: its ranks (processes), shared or not, collective share of its data calls
    files = []
    names = names_of([f for f in set(fh) if f])
    by_file: dict = {}
    for i in np.flatnonzero(is_io):
        by_file.setdefault(fh[i], []).append(i)
    for f, rows in by_file.items():
        if not f:
            continue
        rows = np.array(rows)
        data = rows[counted[rows]]
        ind = data[~is_coll[data]]
        files.append(dict(
            file=names.get(f, f), processes=len(set(proc[rows].tolist())),
            calls=len(rows), data_calls=len(data),
            collective_calls=int(is_coll[data].sum()), independent_calls=len(ind),
            independent_bytes=int(moved[ind].sum()), independent_time_us=units.us(int(dur[ind].sum())),
            bytes_read=int(moved[data][is_read[data]].sum()), bytes_written=int(moved[data][is_write[data]].sum()),
            time_us=units.us(int(dur[rows].sum()))))
    _file_shape(out, files)

    # collective operations: the k-th call of a name on a file (or of an MPI collective) on
    # each rank; how long the others waited in it for the last to arrive, and for a slower one
    start_end = np.array([n in START_END for n in name], bool)
    sync = (is_coll | np.array([n in COLLECTIVE_FILE_CALLS for n in name], bool)
            | (~is_io & ~start_end & np.array([not n.startswith("MPI_Wait") for n in name], bool)))
    _k, key = np.unique(np.array([f"{n}\0{f or ''}" for n, f in zip(name, fh)], dtype=object), return_inverse=True)
    key = key.ravel()
    # each collective call's work before it: since the rank's previous collective call ended (or
    # MPI_Init did)
    is_init = np.array([n.startswith("MPI_Init") for n in name], bool)
    marks = np.flatnonzero(sync | is_init)
    mo = marks[np.lexsort((ts[marks], proc[marks]))]
    prev_end = np.r_[np.iinfo(np.int64).min, (ts + dur)[mo][:-1]]
    same = np.r_[False, proc[mo][1:] == proc[mo][:-1]]
    work = np.zeros(len(t), np.int64)
    work[mo] = np.where(same, ts[mo] - prev_end, 0)
    rows = np.flatnonzero(sync)
    cw = collective_waits(key[rows], proc[rows], ts[rows], dur[rows], work[rows])
    per_call = {}
    for k2 in ("wait", "slow", "caused"):
        per_call[k2] = np.zeros(len(t), np.int64)
        per_call[k2][rows] = cw[k2]
    arrived_last = np.zeros(len(t), bool)
    arrived_last[rows] = cw["last"]
    # the operations the others waited longest in for a slower rank
    top = []
    if cw["matched"].any():
        op = cw["op"]
        m = op >= 0
        slow_op = np.bincount(op[m], weights=cw["slow"][m]).astype(np.int64)
        for o in np.argsort(-slow_op, kind="stable")[:5]:
            if slow_op[o] <= 0:
                break
            mine = np.flatnonzero(op == o)
            r = rows[mine[np.argmax(cw["caused"][mine])]]
            top.append(dict(name=name[r], file=names_of([fh[r]]).get(fh[r]) if fh[r] else None,
                            slowest=int(proc[r]), wait_us=units.us(int(slow_op[o]))))
    out["collective_ops"] = dict(calls=int(cw["matched"].sum()), wait_us=units.us(int(cw["wait"].sum())),
                                 slow_wait_us=units.us(int(cw["slow"].sum())),
                                 unmatched_calls=int(len(rows) - cw["matched"].sum()), top=top)

    # per rank
    xfer = is_read | is_write
    ranks = []
    keys_u = _u.T
    for i, (fk, p) in enumerate(keys_u.tolist()):
        row = procs.get((fk, p))
        if row is None:
            continue
        mine = proc == i
        io = mine & is_io
        o = own.get((fk, p), {})
        ranks.append(dict(
            rank=row.get("rank"), host=row["host"], pid=p, mpiio_calls=int(io.sum()),
            bytes_read=int(moved[io & counted & is_read].sum()),
            bytes_written=int(moved[io & counted & is_write].sum()),
            mpiio_us=units.us(int(dur[io].sum())), mpiio_own_us=units.us(o.get("mpiio", 0)),
            mpi_us=units.us(int(dur[mine & ~is_io & ~start_end].sum())),
            start_end_us=units.us(int(dur[mine & start_end].sum())),
            # its data calls' time less what it waited in them for the others: its own I/O
            data_us=units.us(int((dur[io & xfer] - per_call["wait"][io & xfer]).sum())),
            independent_us=units.us(int(dur[io & xfer & ~is_coll].sum())),
            collective_wait_us=units.us(int(per_call["wait"][mine].sum())),
            slow_wait_us=units.us(int(per_call["slow"][mine].sum())),
            caused_wait_us=units.us(int(per_call["caused"][mine].sum())), arrived_last=int(arrived_last[mine].sum()),
            posix_us=units.us(o.get("posix", 0) + o.get("stdio", 0)),
            posix_bytes_read=row["bytes_read"], posix_bytes_written=row["bytes_written"],
            io_events=row.get("io_events", 0), wall_us=row.get("wall_us") or 0.0,
            cpu_us=units.us(row["cpu_ns"]) if row.get("cpu_ns") is not None else None,
            # the CPU it used outside MPI calls: its own work (not the library's polling)
            own_cpu_us=units.us(row["cpu_ns"] - max(row.get("mpi_cpu_ns") or 0, 0))
            if row.get("cpu_ns") is not None and row.get("mpi_cpu_ns") is not None else None,
            host_cpu_wait_us=row.get("host_cpu_wait_us")))
        # from MPI_Init's end to MPI_Finalize's start: the time the job's work had (MPI_Init's
        # length is the launch's); without them, its wall time
        inits, fins = np.flatnonzero(mine & is_init), np.flatnonzero(mine & start_end & ~is_init)
        run = (ts[fins].min() - (ts + dur)[inits].max()) / 1000 if len(inits) and len(fins) else row.get("wall_us")
        ranks[-1]["run_us"] = round(max(float(run or 0.0), 0.0), 3)
    for o in out["collective_ops"]["top"]:  # the slowest rank by its rank (its process's index here)
        r = keys_u[o["slowest"]]
        o["slowest"] = (procs.get((int(r[0]), int(r[1]))) or {}).get("rank")
    _put_ranks(out, ranks)
    return out, t


def summarize_counters(t: pa.Table, sizes: list, names_of, procs: dict, own: dict, size_labels: list,
                       stripe: int) -> dict:
    """The `mpi` section of an input that counts MPI-IO calls instead of recording them (a
    Darshan log's MPIIO_* counters per file and rank): the same keys as summarize's, with what
    counters cannot tell left empty and named in `not_known` (the waits in collective calls,
    the offsets of requests). A kind's bytes and time (collective or independent, blocking or
    not) are the file's shared out by its calls' count (`estimated`)."""
    c = {k: t.column(k).to_numpy().astype(np.int64) for k in t.column_names if k not in ("fhash",)}
    fh = t.column("fhash").to_pylist()
    reads = c["indep_reads"] + c["coll_reads"] + c["split_reads"] + c["nb_reads"]
    writes = c["indep_writes"] + c["coll_writes"] + c["split_writes"] + c["nb_writes"]
    data = np.maximum(reads + writes, 1)
    data_ns = c["read_ns"] + c["write_ns"]

    def part(nr, nw) -> dict:
        n = nr + nw
        return dict(calls=int(n.sum()), bytes_read=int((c["bytes_read"] * nr // np.maximum(reads, 1)).sum()),
                    bytes_written=int((c["bytes_written"] * nw // np.maximum(writes, 1)).sum()),
                    time_us=units.us(int((data_ns * n // data).sum())))

    coll_r, coll_w = c["coll_reads"] + c["split_reads"], c["coll_writes"] + c["split_writes"]
    ind_r, ind_w = c["indep_reads"], c["indep_writes"]
    nb_r, nb_w = c["nb_reads"], c["nb_writes"]
    calls = reads + writes + c["opens"] + c["syncs"]
    out = dict(calls=int(calls.sum()), time_us=units.us(int((data_ns + c["meta_ns"]).sum())),
               collective=part(coll_r, coll_w), independent=part(ind_r + nb_r, ind_w + nb_w),
               blocking=part(reads - nb_r, writes - nb_w), nonblocking=part(nb_r, nb_w))
    for d in ("read", "write"):
        got = [s.get(d) for s in sizes if s.get(d)]
        h = np.sum(got, axis=0).astype(int).tolist() if got else [0] * len(size_labels)
        out[f"{d}_sizes"] = dict(zip(size_labels, h + [0] * (len(size_labels) - len(h))))
    out.update(stripe=stripe, data_calls_with_offset=0, misaligned_calls=None, misaligned_time_us=None)
    # per direction: calls, and the non-blocking ones (mpi-blocking)
    out["directions"] = dict(read=dict(calls=int(reads.sum()), nonblocking=int(nb_r.sum()),
                                       time_us=units.us(int(c["read_ns"].sum()))),
                             write=dict(calls=int(writes.sum()), nonblocking=int(nb_w.sum()),
                                        time_us=units.us(int(c["write_ns"].sum()))))
    # per file: its ranks and its calls by kind
    names = names_of([f for f in set(fh) if f])
    by_file: dict = {}
    for i, f in enumerate(fh):
        by_file.setdefault(f, []).append(i)
    files = []
    for f, rows in by_file.items():
        r = np.array(rows)
        ind = int((ind_r[r] + ind_w[r] + nb_r[r] + nb_w[r]).sum())
        ind_share = (ind_r[r] + ind_w[r] + nb_r[r] + nb_w[r]) / data[r]
        files.append(dict(
            file=names.get(f, f), processes=int(len(set(c["pid"][r].tolist()))), calls=int(calls[r].sum()),
            data_calls=int((reads + writes)[r].sum()), collective_calls=int((coll_r + coll_w)[r].sum()),
            independent_calls=ind,
            independent_bytes=int(((c["bytes_read"][r] + c["bytes_written"][r]) * ind_share).round().sum()),
            independent_time_us=units.us(int((data_ns[r] * ind_share).round().sum())),
            bytes_read=int(c["bytes_read"][r].sum()), bytes_written=int(c["bytes_written"][r].sum()),
            time_us=units.us(int((data_ns + c["meta_ns"])[r].sum()))))
    _file_shape(out, files)
    out["collective_ops"] = dict(calls=0, wait_us=0.0, slow_wait_us=0.0, unmatched_calls=0, top=[])
    # per rank
    ranks = []
    for (fk, p) in sorted({(int(a), int(b)) for a, b in zip(c["file_key"], c["pid"])}):
        row = procs.get((fk, p))
        if row is None:
            continue
        m = (c["file_key"] == fk) & (c["pid"] == p)
        o = own.get((fk, p), {})
        ranks.append(dict(
            rank=row.get("rank"), host=row["host"], pid=p, mpiio_calls=int(calls[m].sum()),
            bytes_read=int(c["bytes_read"][m].sum()), bytes_written=int(c["bytes_written"][m].sum()),
            mpiio_us=units.us(int((data_ns + c["meta_ns"])[m].sum())), mpiio_own_us=units.us(o.get("mpiio", 0)),
            mpi_us=0.0, start_end_us=0.0, data_us=units.us(int(data_ns[m].sum())),
            independent_us=units.us(int((data_ns[m] * ((ind_r + ind_w + nb_r + nb_w)[m] / data[m])).round().sum())),
            collective_wait_us=0.0, slow_wait_us=0.0, caused_wait_us=0.0, arrived_last=0,
            posix_us=units.us(o.get("posix", 0) + o.get("stdio", 0)),
            posix_bytes_read=row["bytes_read"], posix_bytes_written=row["bytes_written"],
            wall_us=row.get("wall_us") or 0.0, run_us=0.0))
    _put_ranks(out, ranks)
    out["from_counters"] = True
    out["estimated"] = ["collective, independent, blocking and non-blocking bytes and time: a file's shared out "
                        "by its calls' count", "per rank: a file every rank used shared out evenly"]
    out["not_known"] = ["waits in collective calls (no per-call times)", "request offsets: alignment at the "
                        "MPI-IO layer (see POSIX's)", "run_us (MPI_Init to MPI_Finalize per rank)"]
    return out


def _put_ranks(out: dict, ranks: list[dict]) -> None:
    """The ranks in rank order (processes without one last, by pid), and the slowest by its
    MPI-IO data time against the median's."""
    ranks.sort(key=lambda r: (r["rank"] is None, r["rank"] if r["rank"] is not None else 0, r["pid"]))
    out["ranks"] = ranks
    if ranks:
        t_io = np.array([r["data_us"] for r in ranks], float)
        out["slowest_rank"] = ranks[int(t_io.argmax())]["rank"]
        med = float(np.median(t_io))
        out["slowest_to_median"] = round(float(t_io.max() / med), 3) if med > 0 else None
