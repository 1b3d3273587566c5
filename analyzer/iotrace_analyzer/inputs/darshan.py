"""Darshan logs as an input: the counters HPC centres keep for every job (per file and rank:
POSIX, STDIO, MPI-IO, HDF5, PnetCDF) and, when the job ran with DXT, its per-call segments,
mapped into the analyzer's own model (a task's summary.Partial) so that the summary, the
rules, the page, Parquet and --compare are the same as for iotrace's traces.

Counters are not events, and none is made of them:
- the figures of `files`, `calls`, `access`, the size histograms and the layer split come from
  the counters, exact where Darshan counts (calls, bytes, size bins, sequential accesses,
  alignment), estimated where it sums (a call name's time is its family's time shared out by
  count; a record that Darshan reduced over all ranks, a file every rank used, is shared out
  evenly between the ranks); what is estimated and what the log cannot tell is listed in the
  summary's `darshan` section (`estimated`, `not_known`), and the rules that need what it
  cannot tell are named there as skipped;
- the DXT segments are the job's read and write calls: they are the events (Parquet, the
  timeline, `iotrace export`), and not counted again in the figures.

A rank is a process: its pid is its rank (a log has no pids), its host the one DXT names.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from iotrace_format.reader import Damage

from ..analyses import summary
from ..analyses.activity import binned
from ..analyses.summary import SIZE_LABELS, Partial, ProcState
from . import darshan_log
from .darshan_log import SUFFIX, DarshanError, Log, file_hash, is_log, job_end, logs_in

__all__ = ["SUFFIX", "DarshanError", "DarshanLog", "is_log", "logs_in"]

NBINS = len(SIZE_LABELS)  # Darshan's ten access-size bins are SIZE_EDGES' (summary.SIZE_EDGES)
# a call family's counters (module -> [(iotrace call name, counter)]): the names the calls
# table shows; their family decides data, metadata or sync as for a trace's calls
CALLS = {
    "POSIX": [("open", "POSIX_OPENS"), ("read", "POSIX_READS"), ("write", "POSIX_WRITES"),
              ("lseek", "POSIX_SEEKS"), ("stat", "POSIX_STATS"), ("mmap", "POSIX_MMAPS"),
              ("fsync", "POSIX_FSYNCS"), ("fdatasync", "POSIX_FDSYNCS"), ("rename", "POSIX_RENAME_SOURCES"),
              ("fileno", "POSIX_FILENOS"), ("dup", "POSIX_DUPS")],
    "STDIO": [("fopen", "STDIO_OPENS"), ("fdopen", "STDIO_FDOPENS"), ("fread", "STDIO_READS"),
              ("fwrite", "STDIO_WRITES"), ("fseek", "STDIO_SEEKS"), ("fflush", "STDIO_FLUSHES")],
}
PREFIX = {"POSIX": "POSIX", "STDIO": "STDIO"}
SYNC = {"fsync", "fdatasync", "fflush"}  # their time is in Darshan's write time (not metadata)
READ_CALL = {"POSIX": "read", "STDIO": "fread"}
WRITE_CALL = {"POSIX": "write", "STDIO": "fwrite"}
# what a Darshan log cannot tell, said in the summary (darshan.not_known) and the report
NOT_KNOWN = [
    "process ids: a rank's pid is its rank",
    "per-call times without DXT: a call name's time is its family's (read, write, metadata) shared out by count",
    "request sizes but in Darshan's ten bins (no quantiles of sizes)",
    "compute, the application's own spans and the time between calls",
    "closes (Darshan counts none)",
    "per-rank figures of a file every rank used: Darshan keeps one record for it, shared out evenly here "
    "(its fastest and slowest rank are known)",
]
# rules that need what counters cannot tell, and why (shown as skipped)
SKIPPED = {
    "collective-wait": "needs the times of each rank's collective calls (Darshan counts them)",
    "cpu-starved": "needs the times of each rank's collective calls and its host's lack of CPUs",
    "checkpoint-stall": "needs the checkpoints' times (Darshan counts per file)",
    "pipe-traffic": "Darshan records no pipes or sockets",
    "software-loading": "Darshan leaves out the files a program loads (its exclusion list)",
    "mpi-misaligned": "Darshan counts alignment at the POSIX layer: see the misaligned rule",
}


@dataclass(frozen=True, slots=True)
class DarshanLog:
    """A Darshan log as a source (inputs/__init__.py): one task of its own (`task`), its DXT
    segments as the events (`batches`)."""

    path: str
    size: int

    def estimated_events(self) -> int:
        # a log is a task of its own (inputs/read.py: a source of this many events is not grouped)
        from .read import SMALL_FILE_EVENTS

        return max(SMALL_FILE_EVENTS, self.size)

    def batches(self, damage: list) -> Iterator:
        log = darshan_log.read(self.path)
        damage += [Damage(self.path, -1, k, d) for k, d in log.damage]
        names = {file_hash(i): n for i, n in log.names.items()}
        for b in dxt_batches(log):
            yield _Batch(b, names)

    def task(self, index: int, out_dir: str | None, compute_cats: tuple) -> object:
        """The log's task: its partial, what it told (FileResult) and its DXT segments in Parquet."""
        from ..outputs.parquet import ParquetOut
        from .read import FileResult, TaskResult

        log = darshan_log.read(self.path)
        key = hash((self.path, index))
        P = partial(log, key)
        fr = FileResult(self.path)
        fr.damage = [Damage(self.path, -1, k, d) for k, d in log.damage]
        if log.partial:
            fr.damage.append(Damage(self.path, -1, "darshan-partial",
                                    "the Darshan runtime ran out of record memory: some files or calls are missing"))
        fr.events = P.events
        fr.processes = [dict(host=h, pid=r, exe=log.exe.split(" ")[0] if log.exe else None,
                             cmdline=log.exe.split() if log.exe else None,
                             ranks={"darshan_jobid": log.job["jobid"]}, mpi_rank=r, mpi_size=log.job["nprocs"],
                             wall_ns=log.job["start_ns"], mono_ns=log.job["start_ns"],
                             compression=f"darshan {log.version}", trace_file=self.path)
                        for (_k, r), h in sorted(((k, st.host) for k, st in P.procs.items()))]
        fr.pids = sorted(r for _k, r in P.procs)
        parts = []
        if out_dir is not None and log.dxt:
            out = ParquetOut(out_dir, index)
            names = {file_hash(i): n for i, n in log.names.items()}
            try:
                for b in dxt_batches(log):
                    out.put(b, _host(log), names)
            finally:
                parts = out.close()
        return TaskResult(P, [fr], parts)


class _Batch:
    """A record batch as the format layer's batches are (rows, meta lines, bad lines)."""

    def __init__(self, rb: pa.RecordBatch, names: dict):
        self.rb = rb
        self.rows = rb.num_rows
        self.meta = [b'{"name":"FH","ph":"M","args":{"name":%s,"value":"%s"}}' % (_json(n), h.encode())
                     for h, n in names.items()] if names else []
        names.clear()  # (given once, with the first batch)
        self.bad_lines, self.bad_examples = 0, []

    def __arrow_c_array__(self, requested_schema=None):
        return self.rb.__arrow_c_array__(requested_schema)


def _json(s: str) -> bytes:
    import orjson

    return orjson.dumps(s)


def _host(log: Log) -> str:
    hosts = {h for s in log.dxt.values() for h in s.hosts.values() if h}
    return hosts.pop() if len(hosts) == 1 else ""


# --------------------------------------------------------------------------- counters -> rows


def _spread(ranks: np.ndarray, nprocs: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of records by rank: a record of one rank is one row; a record Darshan reduced over
    every rank (rank -1) is one row per rank. (row's record, row's rank)."""
    n = np.where(ranks < 0, max(nprocs, 1), 1)
    rec = np.repeat(np.arange(len(ranks)), n)
    start = np.repeat(np.cumsum(n) - n, n)
    rank = np.where(ranks[rec] < 0, np.arange(len(rec)) - start, ranks[rec])
    return rec, rank


def _ints(R, name: str) -> np.ndarray:
    """An integer counter of a module's records (zeros where the module has none; Darshan's
    -1, a counter not kept, as 0)."""
    return R.counters.get(name, np.zeros(len(R), np.int64)).clip(0)


def _ns(R, name: str) -> np.ndarray:
    """A time counter (seconds, float) in integer ns."""
    return (np.nan_to_num(R.fcounters.get(name, np.zeros(len(R)))).clip(0) * 1e9).astype(np.int64)


def _share(v: np.ndarray, rec: np.ndarray, rank: np.ndarray, ways: np.ndarray) -> np.ndarray:
    """A record's integer sum shared out between the rows that stand for it (`ways` per
    record: 1, or nprocs for a reduced one): the shares add up to it exactly."""
    v = np.asarray(v, np.int64)
    w = ways[rec]
    q, r = v[rec] // w, v[rec] % w
    return q + ((rank % w) < r)


def partial(log: Log, key: int) -> Partial:
    """The task's partial of a Darshan log (summary.Partial), finalized."""
    P = Partial()
    P.files_grouped = True
    nprocs = max(int(log.job["nprocs"]), 1)
    start, end = log.job["start_ns"], job_end(log)
    P.start, P.end = start, end
    names = {file_hash(i): n for i, n in log.names.items()}
    for i, n in log.names.items():
        if n in ("<STDOUT>", "<STDERR>"):
            P.stdio.add(file_hash(i))
    P.fh = [names]
    hosts = {}
    for s in log.dxt.values():
        hosts.update(s.hosts)

    rows = []  # per module: dict of per-row columns (fhash number, rank, FILE_SUMS...)
    calls: dict = {}  # name -> [count, ns]
    size_rows = []
    access = {d: dict(first=0, consecutive=0, sequential=0, random=0) for d in ("read", "write")}
    hist = {d: np.zeros(NBINS, np.int64) for d in ("read", "write")}
    layers: dict = {}  # (rank, layer) -> [calls, ns]
    for mod in ("POSIX", "STDIO"):
        R = log.records.get(mod)
        if R is None or not len(R):
            continue
        p = PREFIX[mod]
        ways = np.where(R.ranks < 0, nprocs, 1)
        rec, rank = _spread(R.ranks, nprocs)

        def cnt(name, R=R):
            return _ints(R, name)

        def ns(name, R=R):
            return _ns(R, name)

        reads, writes = cnt(f"{p}_READS"), cnt(f"{p}_WRITES")
        fam = {n: cnt(k) for n, k in CALLS[mod]}
        total = sum(fam.values())
        sync = sum(v for n, v in fam.items() if n in SYNC)
        meta_n = total - reads - writes - sync
        opens = fam.get("open", 0) + fam.get("fopen", 0) + fam.get("fdopen", 0)
        t_r, t_w, t_m = ns(f"{p}_F_READ_TIME"), ns(f"{p}_F_WRITE_TIME"), ns(f"{p}_F_META_TIME")
        b_r, b_w = cnt(f"{p}_BYTES_READ"), cnt(f"{p}_BYTES_WRITTEN")
        extent = np.where(reads > 0, cnt(f"{p}_MAX_BYTE_READ") + 1, 0)
        if mod == "POSIX":
            seq_r, seq_w = cnt("POSIX_SEQ_READS"), cnt("POSIX_SEQ_WRITES")
            con_r, con_w = cnt("POSIX_CONSEC_READS"), cnt("POSIX_CONSEC_WRITES")
            # each rank's first access of a record is neither (Darshan's convention as iotrace's)
            first_r, first_w = np.minimum(reads, ways), np.minimum(writes, ways)
            rnd_r = (reads - seq_r - first_r).clip(0)
            rnd_w = (writes - seq_w - first_w).clip(0)
            for d, fi, co, sq, rn in (("read", first_r, con_r, seq_r, rnd_r), ("write", first_w, con_w, seq_w, rnd_w)):
                access[d]["first"] += int(fi.sum())
                access[d]["consecutive"] += int(co.sum())
                access[d]["sequential"] += int(sq.sum())
                access[d]["random"] += int(rn.sum())
            for di, d in enumerate(("read", "write")):
                ks = [k for k in R.counters if k.startswith(f"POSIX_SIZE_{d.upper()}_")]
                m = np.stack([cnt(k) for k in ks], axis=1) if ks else np.zeros((len(R), NBINS), np.int64)
                hist[d] += m.sum(axis=0)
                r_i, b_i = np.nonzero(m)
                size_rows.append((R.ids[r_i], R.ranks[r_i], di * NBINS + b_i, m[r_i, b_i], ways[r_i]))
        else:
            z = np.zeros(len(R), np.int64)
            seq_r = seq_w = rnd_r = rnd_w = z
        cols = dict(dur_count=total, dur_sum=t_r + t_w + t_m, read_sum=b_r, written_sum=b_w, meta_count=meta_n,
                    meta_dur=t_m, reads=reads, writes=writes, read_dur=t_r, write_dur=t_w, opens=opens,
                    read_extent=extent, read_seq=seq_r, read_rand=rnd_r, write_seq=seq_w, write_rand=rnd_w)
        row = {k: (v[rec] if k == "read_extent" else _share(v, rec, rank, ways)) for k, v in cols.items()}
        row["fhash_num"], row["pid"] = R.ids[rec], rank
        rows.append(row)
        # per call name: counts exact; times: read and write calls their family's, the
        # metadata calls the metadata time shared out by count (syncs' time is in write time)
        meta_tot, meta_calls = int(t_m.sum()), int(meta_n.sum())
        for n, v in fam.items():
            k = int(v.sum())
            if not k:
                continue
            t = int(t_r.sum()) if n == READ_CALL[mod] else int(t_w.sum()) if n == WRITE_CALL[mod] else \
                0 if n in SYNC else meta_tot * k // max(meta_calls, 1)
            slot = calls.setdefault(n, [0, 0, 0])
            slot[0] += k
            slot[1] += t
            slot[2] += int(b_r.sum()) if n == READ_CALL[mod] else int(b_w.sum()) if n == WRITE_CALL[mod] else 0
        layer = mod.lower()
        lt = _share(t_r + t_w + t_m, rec, rank, ways)
        ln = _share(total, rec, rank, ways)
        for r_, n_, t_ in zip(*_by_rank(rank, ln, lt)):
            slot = layers.setdefault((r_, layer), [0, 0])
            slot[0] += n_
            slot[1] += t_

    # --- the per (file, rank) sums: one row per (file, rank), POSIX and STDIO of a file added
    if rows:
        cat = {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}
        t = pa.table({"fh": cat["fhash_num"], "pid": cat["pid"],
                      **{k: cat[k] for k in summary.FILE_SUMS}})
        # a file's POSIX and STDIO rows of a rank are one (the file table's row is per (file, process))
        g = t.group_by(["fh", "pid"]).aggregate(summary.FILE_AGG)
        t = pa.table({"fh": g.column("fh"), "pid": g.column("pid"),
                      **{k: g.column(f"{k}_{a}") for k, a in summary.FILE_AGG}})
        fh = pa.array([file_hash(x) for x in t.column("fh").to_numpy()], pa.string())
        P.files = [pa.table({"fhash": fh, "pid": t.column("pid"), **{k: t.column(k) for k in summary.FILE_SUMS}})]
        # per rank: its calls, bytes and time (the I/O of a rank is the sum of its calls' times:
        # Darshan keeps no intervals, and a rank's calls rarely overlap)
        pid = t.column("pid").to_numpy()
        per = {k: t.column(k).to_numpy() for k in ("dur_count", "dur_sum", "read_sum", "written_sum")}
        u, inv = np.unique(pid, return_inverse=True)
        sums = {k: np.bincount(inv, weights=v, minlength=len(u)).astype(np.int64) for k, v in per.items()}
        for j, r in enumerate(u.tolist()):
            st = ProcState(hosts.get(r, ""), int(r))
            st.events = st.io_events = int(sums["dur_count"][j])
            st.first, st.last = start, end
            st.bytes_read, st.bytes_written = int(sums["read_sum"][j]), int(sums["written_sum"][j])
            io = int(sums["dur_sum"][j])
            st.io_call_time = io
            st.unions = dict(io=io, comp=0, both=io, all=max(end - start, io), ipc=0)
            P.procs[(key, int(r))] = st
            P.info[(key, int(r))] = dict(mono_ns=start, end_mono_ns=end, mpi_rank=int(r), mpi_size=nprocs,
                                         exe=log.exe.split(" ")[0] if log.exe else None, shift=0)
            P.threads.add((st.host, int(r), int(r)))
    if size_rows:
        ids, rk, b, n, ways = (np.concatenate(x) for x in zip(*size_rows))
        rec, rank = _spread(rk, nprocs)
        cnts = _share(n, rec, rank, ways)
        keep = cnts > 0
        st = pa.table({"fh": ids[rec][keep], "pid": rank[keep], "bin": b[rec][keep], "count": cnts[keep]})
        st = st.group_by(["fh", "pid", "bin"]).aggregate([("count", "sum")])
        P.file_sizes = [pa.table({"fhash": pa.array([file_hash(x) for x in st.column("fh").to_numpy()], pa.string()),
                                  "pid": st.column("pid"), "bin": st.column("bin"),
                                  "count": st.column("count_sum")})]
    if calls:
        P.calls = [pa.table({"name": pa.array(list(calls), pa.string()),
                             "dur_count": pa.array([v[0] for v in calls.values()], pa.int64()),
                             "dur_sum": pa.array([v[1] for v in calls.values()], pa.int64()),
                             "bytes_sum": pa.array([v[2] for v in calls.values()], pa.int64()),
                             "err_sum": pa.array([0] * len(calls), pa.int64())})]
    P.access = access
    P.size_hist = {d: h.tolist() for d, h in hist.items()}
    _upper_layers(log, P, key, nprocs, layers)
    for (r, layer), (n, t) in layers.items():
        if (key, r) in P.procs:
            P.layers[(key, r, layer)] = [n, t, t]
    _own_times(P, key)
    _mpi(log, P, key, nprocs)
    P.file_counters = [file_counters(log)]
    _timeline(log, P)
    P.events = P.x_events = sum(len(s) for s in log.dxt.values())
    P.counted = about(log)
    P.finalize()
    return P


def _by_rank(rank: np.ndarray, *vals: np.ndarray) -> tuple:
    u, inv = np.unique(rank, return_inverse=True)
    return (u.tolist(), *[np.bincount(inv, weights=v, minlength=len(u)).astype(np.int64).tolist() for v in vals])


def _upper_layers(log: Log, P: Partial, key: int, nprocs: int, layers: dict) -> None:
    """The layers above POSIX (MPI-IO, HDF5, PnetCDF): their calls and time per rank."""
    spec = {"MPI-IO": ("mpiio", ["MPIIO_INDEP_OPENS", "MPIIO_COLL_OPENS", "MPIIO_INDEP_READS", "MPIIO_INDEP_WRITES",
                                 "MPIIO_COLL_READS", "MPIIO_COLL_WRITES", "MPIIO_SPLIT_READS", "MPIIO_SPLIT_WRITES",
                                 "MPIIO_NB_READS", "MPIIO_NB_WRITES", "MPIIO_SYNCS", "MPIIO_VIEWS"], "MPIIO"),
            "H5F": ("hdf5", ["H5F_OPENS", "H5F_FLUSHES"], "H5F"),
            "H5D": ("hdf5", ["H5D_OPENS", "H5D_READS", "H5D_WRITES", "H5D_FLUSHES"], "H5D"),
            "PNETCDF_FILE": ("pnetcdf", ["PNETCDF_FILE_CREATES", "PNETCDF_FILE_OPENS", "PNETCDF_FILE_SYNCS"],
                             "PNETCDF_FILE"),
            "PNETCDF_VAR": ("pnetcdf", ["PNETCDF_VAR_OPENS", "PNETCDF_VAR_INDEP_READS", "PNETCDF_VAR_INDEP_WRITES",
                                        "PNETCDF_VAR_COLL_READS", "PNETCDF_VAR_COLL_WRITES"], "PNETCDF_VAR")}
    for mod, (layer, keys, p) in spec.items():
        R = log.records.get(mod)
        if R is None or not len(R):
            continue
        ways = np.where(R.ranks < 0, nprocs, 1)
        rec, rank = _spread(R.ranks, nprocs)
        n = sum(R.counters.get(k, np.zeros(len(R), np.int64)).clip(0) for k in keys)
        t = sum((np.nan_to_num(R.fcounters.get(f"{p}_F_{k}_TIME", np.zeros(len(R)))).clip(0) * 1e9).astype(np.int64)
                for k in ("READ", "WRITE", "META", "WAIT"))
        for r_, n_, t_ in zip(*_by_rank(rank, _share(n, rec, rank, ways), _share(t, rec, rank, ways))):
            slot = layers.setdefault((r_, layer), [0, 0])
            slot[0] += n_
            slot[1] += t_


def _own_times(P: Partial, key: int) -> None:
    """A layer's own time, estimated: its time less the time of the layers below it on the
    rank (an MPI-IO call's time holds the POSIX calls it made), at least zero."""
    from iotrace_format import IO_LAYERS

    ranks = {r for (_k, r, _l) in P.layers}
    for r in ranks:
        below = 0
        for layer in reversed(IO_LAYERS):  # posix first, up to hdf5
            slot = P.layers.get((key, r, layer))
            if slot is None:
                continue
            if layer not in ("posix", "stdio"):
                slot[2] = max(slot[1] - below, 0)
            below = slot[1] if layer not in ("posix", "stdio") else below + slot[1]


def file_counters(log: Log) -> pa.Table:
    """Per file, what Darshan counts beyond the calls and bytes of the file table (model.Job's
    file_counters, read by the rules that need it): its ranks; its POSIX data calls, those
    not aligned to the file system's block (POSIX_FILE_ALIGNMENT) or to the memory alignment;
    for a file every rank used (one reduced record) its fastest and slowest rank, their bytes
    and time; else the most and least bytes a rank read and wrote; the bytes through STDIO."""
    nprocs = max(int(log.job["nprocs"]), 1)
    cols: dict = {}
    ids_all = []
    for mod in ("POSIX", "STDIO"):
        R = log.records.get(mod)
        if R is not None and len(R):
            ids_all.append(R.ids)
    if not ids_all:
        return pa.table({"fhash": pa.array([], pa.string()), "file": pa.array([], pa.string())})
    ids = np.unique(np.concatenate(ids_all))
    n = len(ids)
    z = np.zeros(n, np.int64)
    for k in ("ranks", "shared", "data_calls", "file_not_aligned", "mem_not_aligned", "file_alignment",
              "mem_alignment", "fastest_rank", "fastest_rank_bytes", "slowest_rank", "slowest_rank_bytes",
              "rank_min_read", "rank_max_read", "rank_min_written", "rank_max_written", "min_read_rank",
              "max_read_rank", "min_written_rank", "max_written_rank", "bytes_read", "bytes_written",
              "stdio_bytes_read", "stdio_bytes_written", "stdio_calls", "posix_bytes"):
        cols[k] = z.copy()
    for k in ("fastest_rank_time_us", "slowest_rank_time_us", "time_us", "variance_rank_time", "variance_rank_bytes",
              "meta_time_us"):
        cols[k] = np.zeros(n, np.float64)
    cols["fastest_rank"][:] = cols["slowest_rank"][:] = -1
    R = log.records.get("POSIX")
    if R is not None and len(R):
        c, f = R.counters, R.fcounters
        row = np.searchsorted(ids, R.ids)
        shared = R.ranks < 0
        np.add.at(cols["ranks"], row, np.where(shared, nprocs, 1))
        cols["shared"][row[shared]] = 1
        np.add.at(cols["data_calls"], row, c["POSIX_READS"].clip(0) + c["POSIX_WRITES"].clip(0))
        np.add.at(cols["file_not_aligned"], row, c["POSIX_FILE_NOT_ALIGNED"].clip(0))
        np.add.at(cols["mem_not_aligned"], row, c["POSIX_MEM_NOT_ALIGNED"].clip(0))
        np.maximum.at(cols["file_alignment"], row, c["POSIX_FILE_ALIGNMENT"].clip(0))
        np.maximum.at(cols["mem_alignment"], row, c["POSIX_MEM_ALIGNMENT"].clip(0))
        br, bw = c["POSIX_BYTES_READ"].clip(0), c["POSIX_BYTES_WRITTEN"].clip(0)
        np.add.at(cols["bytes_read"], row, br)
        np.add.at(cols["bytes_written"], row, bw)
        np.add.at(cols["posix_bytes"], row, br + bw)
        t = np.nan_to_num(f["POSIX_F_READ_TIME"] + f["POSIX_F_WRITE_TIME"] + f["POSIX_F_META_TIME"]).clip(0) * 1e6
        np.add.at(cols["time_us"], row, t)
        np.add.at(cols["meta_time_us"], row, np.nan_to_num(f["POSIX_F_META_TIME"]).clip(0) * 1e6)
        s = np.flatnonzero(shared)
        for k, src in (("fastest_rank", "POSIX_FASTEST_RANK"), ("fastest_rank_bytes", "POSIX_FASTEST_RANK_BYTES"),
                       ("slowest_rank", "POSIX_SLOWEST_RANK"), ("slowest_rank_bytes", "POSIX_SLOWEST_RANK_BYTES")):
            cols[k][row[s]] = c[src][s]
        for k, src in (("fastest_rank_time_us", "POSIX_F_FASTEST_RANK_TIME"),
                       ("slowest_rank_time_us", "POSIX_F_SLOWEST_RANK_TIME")):
            cols[k][row[s]] = np.nan_to_num(f[src][s]) * 1e6
        cols["variance_rank_time"][row[s]] = np.nan_to_num(f["POSIX_F_VARIANCE_RANK_TIME"][s])
        cols["variance_rank_bytes"][row[s]] = np.nan_to_num(f["POSIX_F_VARIANCE_RANK_BYTES"][s])
        # the ranks' own records of a file several ranks used (not every one: not reduced)
        own = np.flatnonzero(~shared)
        if len(own):
            for d, b in (("read", br), ("written", bw)):
                order = np.lexsort((b[own], row[own]))
                r_o, b_o, k_o = row[own][order], b[own][order], R.ranks[own][order]
                first = np.r_[True, r_o[1:] != r_o[:-1]]
                last = np.r_[r_o[1:] != r_o[:-1], True]
                cols[f"rank_min_{d}"][r_o[first]] = b_o[first]
                cols[f"min_{d}_rank"][r_o[first]] = k_o[first]
                cols[f"rank_max_{d}"][r_o[last]] = b_o[last]
                cols[f"max_{d}_rank"][r_o[last]] = k_o[last]
    S_ = log.records.get("STDIO")
    if S_ is not None and len(S_):
        c = S_.counters
        row = np.searchsorted(ids, S_.ids)
        np.add.at(cols["stdio_bytes_read"], row, c["STDIO_BYTES_READ"].clip(0))
        np.add.at(cols["stdio_bytes_written"], row, c["STDIO_BYTES_WRITTEN"].clip(0))
        np.add.at(cols["stdio_calls"], row, sum(c[k].clip(0) for k in ("STDIO_OPENS", "STDIO_READS", "STDIO_WRITES",
                                                                         "STDIO_SEEKS", "STDIO_FLUSHES")))
        np.add.at(cols["bytes_read"], row, c["STDIO_BYTES_READ"].clip(0))
        np.add.at(cols["bytes_written"], row, c["STDIO_BYTES_WRITTEN"].clip(0))
        no_posix = cols["ranks"] == 0
        ways = np.where(S_.ranks < 0, nprocs, 1)
        np.maximum.at(cols["ranks"], row, np.where(no_posix[row], ways, 0))
    names = [log.names.get(int(i)) for i in ids]
    cols["time_us"] = cols["time_us"].round(3)
    return pa.table({"fhash": pa.array([file_hash(i) for i in ids], pa.string()),
                     "file": pa.array([nm if nm is not None else f"<unknown {file_hash(i)}>"
                                       for nm, i in zip(names, ids)], pa.string()), **cols})


# --------------------------------------------------------------------------- MPI-IO


MPI_COLUMNS = ("indep_reads", "indep_writes", "coll_reads", "coll_writes", "split_reads", "split_writes",
               "nb_reads", "nb_writes", "opens", "syncs", "bytes_read", "bytes_written", "read_ns", "write_ns",
               "meta_ns")


def _mpi(log: Log, P: Partial, key: int, nprocs: int) -> None:
    """The MPI-IO counters per (file, rank), a reduced record shared out evenly: what the MPI
    analysis (analyses/mpi.py) reads when a job has no MPI calls recorded one by one."""
    R = log.records.get("MPI-IO")
    if R is None or not len(R):
        return
    c = R.counters
    ways = np.where(R.ranks < 0, nprocs, 1)
    rec, rank = _spread(R.ranks, nprocs)

    def cnt(k):
        return _ints(R, k)

    def ns(k):
        return _ns(R, k)

    src = dict(indep_reads=cnt("MPIIO_INDEP_READS"), indep_writes=cnt("MPIIO_INDEP_WRITES"),
               coll_reads=cnt("MPIIO_COLL_READS"), coll_writes=cnt("MPIIO_COLL_WRITES"),
               split_reads=cnt("MPIIO_SPLIT_READS"), split_writes=cnt("MPIIO_SPLIT_WRITES"),
               nb_reads=cnt("MPIIO_NB_READS"), nb_writes=cnt("MPIIO_NB_WRITES"),
               opens=cnt("MPIIO_INDEP_OPENS") + cnt("MPIIO_COLL_OPENS"), syncs=cnt("MPIIO_SYNCS"),
               bytes_read=cnt("MPIIO_BYTES_READ"), bytes_written=cnt("MPIIO_BYTES_WRITTEN"),
               read_ns=ns("MPIIO_F_READ_TIME"), write_ns=ns("MPIIO_F_WRITE_TIME"), meta_ns=ns("MPIIO_F_META_TIME"))
    cols = {k: _share(v, rec, rank, ways) for k, v in src.items()}
    t = pa.table({"file_key": np.full(len(rec), key, np.int64), "pid": rank.astype(np.int64),
                  "fhash": pa.array([file_hash(x) for x in R.ids[rec]], pa.string()),
                  "processes": ways[rec].astype(np.int64), **cols})
    sizes = {}
    for d in ("READ", "WRITE"):
        ks = [k for k in c if k.startswith(f"MPIIO_SIZE_{d}_AGG_")]
        sizes[d.lower()] = [int(cnt(k).sum()) for k in ks]
    P.mpi.counters.append(t)
    P.mpi.sizes.append(sizes)


# --------------------------------------------------------------------------- DXT


def dxt_batches(log: Log, rows: int = 1 << 18) -> Iterator[pa.RecordBatch]:
    """The DXT segments as events in the format layer's columns (iotrace_format.reader's):
    each a complete event (ph X) of category posix or mpiio named read or write (DXT does not
    say which call: pread and read are both `read`), pid and tid its rank, ts and dur on the job
    clock (wall time, ns), its file, offset and size (bytes asked; DXT records the length)."""
    start = log.job["start_ns"]
    for mod, s in log.dxt.items():
        cat = "posix" if mod == "DXT_POSIX" else "mpiio"
        n = len(s)
        if not n:
            continue
        order = np.lexsort((s.start, s.ranks))
        for lo in range(0, n, rows):
            o = order[lo:lo + rows]
            m = len(o)
            ts = start + np.round(s.start[o] * 1e9).astype(np.int64)
            dur = np.maximum(np.round((s.end[o] - s.start[o]) * 1e9).astype(np.int64), 0)
            ids = s.ids[o]
            u, inv = np.unique(ids, return_inverse=True)
            fh = pa.DictionaryArray.from_arrays(pa.array(inv.astype(np.int32)),
                                                pa.array([file_hash(x) for x in u], pa.string()))
            names = pa.DictionaryArray.from_arrays(pa.array(np.where(s.write[o], 1, 0).astype(np.int32)),
                                                   pa.array(["read", "write"]))
            null_i = pa.nulls(m, pa.int64())
            null_d = pa.DictionaryArray.from_arrays(pa.nulls(m, pa.int32()), pa.array([], pa.string()))
            yield pa.record_batch({
                "ph": pa.DictionaryArray.from_arrays(pa.array(np.zeros(m, np.int32)), pa.array(["X"])),
                "name": names,
                "cat": pa.DictionaryArray.from_arrays(pa.array(np.zeros(m, np.int32)), pa.array([cat])),
                "pid": pa.array(s.ranks[o]), "tid": pa.array(s.ranks[o]), "ts_ns": pa.array(ts),
                "dur_ns": pa.array(dur),
                "fhash": fh, "fhash2": null_d, "fd": null_i, "fd2": null_i,
                "size": pa.array(s.length[o]), "offset": pa.array(s.offset[o]), "ret": pa.array(s.length[o]),
                "bytes": null_i, "errno": null_i, "flags": null_i, "mode": null_i, "hhash": null_d,
                "args": pa.nulls(m, pa.string())})


def _timeline(log: Log, P: Partial) -> None:
    """The job's timeline (bytes read and written, calls per bin) from the DXT_POSIX segments:
    a log without DXT has none (its counters have no times per call)."""
    s = log.dxt.get("DXT_POSIX")
    if s is None or not len(s):
        return
    ts = log.job["start_ns"] + np.round(s.start * 1e9).astype(np.int64)
    span = max(log.job["end_ns"] - log.job["start_ns"], int(ts.max() - ts.min()), 1)
    exp = max(int(np.ceil(np.log2(span / summary.FINE_BINS))), 10) if span > summary.FINE_BINS else 10
    idx = ts >> exp
    r = np.where(~s.write, s.length, 0).astype(np.float64)
    w = np.where(s.write, s.length, 0).astype(np.float64)
    P.tl_exp, P.tl = exp, binned(idx, r, w, np.ones(len(ts)))


# --------------------------------------------------------------------------- what it told


def about(log: Log) -> dict:
    """summary.json's `darshan` section: the job record, the modules, and what a log of
    counters could not tell (so that no one takes an estimate for a measure)."""
    meta = log.job["metadata"]
    counted = {m: len(r) for m, r in log.records.items()}
    segs = {m: len(s) for m, s in log.dxt.items()}
    return dict(
        log=os.path.basename(log.path), format=log.version, library=meta.get("lib_ver"),
        exe=log.exe, nprocs=log.job["nprocs"], jobid=log.job["jobid"], uid=log.job["uid"],
        start_ns=log.job["start_ns"], end_ns=log.job["end_ns"],
        run_time_s=round((log.job["end_ns"] - log.job["start_ns"]) / 1e9, 6),
        span_s=round((job_end(log) - log.job["start_ns"]) / 1e9, 6),
        hints=[h for h in meta.get("h", "").split(";") if h and h != "no"],
        mounts=[dict(path=p, type=t) for p, t in log.mounts[:32]],
        modules={m: dict(version=d["version"], bytes=d["bytes"], partial=d["partial"],
                         records=counted.get(m), segments=segs.get(m), damaged=bool(d.get("damaged")))
                 for m, d in log.modules.items()},
        files=len(log.names), dxt=bool(segs), partial=log.partial,
        missing=[m for m in ("POSIX",) if not len(log.records.get(m, ()))],
        estimated=["calls[].time_us of metadata calls: the metadata time shared out by count",
                   "processes[] and files' per-rank rows of a file every rank used (rank -1): shared out evenly",
                   "random reads and writes: each rank's first access of a file is not counted as random",
                   "layers[].own_us above POSIX: the layer's time less the layers' below it"],
        not_known=list(NOT_KNOWN) if not segs else [k for k in NOT_KNOWN if not k.startswith("per-call")],
        rules_skipped=dict(SKIPPED))
