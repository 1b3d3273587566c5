"""The figures: a small partial per trace file (computed where the file was parsed), then one
merge of all partials into the summary. Definitions are in docs/analyzer.md.

Everything is column arithmetic (numpy, pyarrow group_by); Python loops run over groups
(call names, files, processes), never over events.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .intervals import union_lengths

IO_CATS = ("posix", "stdio")
READ_CALLS = {"read", "pread", "pread64", "readv", "preadv", "preadv64", "preadv2", "fread",
              "fgets", "getline", "getdelim", "fgetc", "getc", "getchar", "fgetc_unlocked",
              "getc_unlocked", "getchar_unlocked", "fgets_unlocked", "fread_unlocked", "fscanf",
              "vfscanf", "scanf", "vscanf", "__isoc99_fscanf", "__isoc99_vfscanf",
              "__isoc99_scanf", "__isoc99_vscanf"}
WRITE_CALLS = {"write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev64", "pwritev2",
               "fwrite", "fputs", "copy_file_range", "sendfile", "sendfile64", "fprintf",
               "vfprintf", "printf", "vprintf", "__fprintf_chk", "__vfprintf_chk", "__printf_chk",
               "__vprintf_chk", "dprintf", "vdprintf", "fputc", "putc", "putchar",
               "fputc_unlocked", "putc_unlocked", "putchar_unlocked", "puts", "fputs_unlocked",
               "fwrite_unlocked"}
DATA_CALLS = READ_CALLS | WRITE_CALLS
# access-size histogram edges (bytes), as Darshan's
SIZE_EDGES = [0, 100, 1 << 10, 10 << 10, 100 << 10, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30]
SIZE_LABELS = ["0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M",
               "10M-100M", "100M-1G", "1G+"]
TIMELINE_BINS = 256  # at most this many bins in the merged timeline
FINE_BINS = 4096  # at most this many bins per file partial


@dataclass
class Partial:
    """What one trace file contributes to the summary (small: grouped, not per event)."""

    events: int = 0
    x_events: int = 0
    meta_events: int = 0
    start: int | None = None  # job clock, ns
    end: int | None = None
    threads: set = field(default_factory=set)  # (host, pid, tid)
    procs: list = field(default_factory=list)  # per-process dicts of figures
    calls: pa.Table | None = None  # name -> count, dur, bytes
    sizes: pa.Table | None = None  # (name, size) -> count
    files: pa.Table | None = None  # (fhash, pid) -> count, dur, bytes read/written
    cats: pa.Table | None = None  # (pid, cat) -> count, dur, union
    cat_names: pa.Table | None = None  # (cat, name) -> count, dur
    access: dict = field(default_factory=dict)  # (dir, kind) -> count
    size_hist: dict = field(default_factory=dict)  # dir -> counts per SIZE_LABELS
    tl_exp: int = 0  # timeline: bins of 2**tl_exp ns on the job clock
    tl: tuple = ()  # (bin index, bytes read, bytes written, ops)
    fh: dict = field(default_factory=dict)  # fhash -> path


def _np(col, fill=0, dtype=np.int64):
    """A (possibly null-holding) Arrow integer column as numpy, nulls as `fill`."""
    return pc.fill_null(col, fill).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _isum(groups: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sums of values per group (bincount's float weights lose bits past 2**53)."""
    if len(values) == 0 or np.abs(values).sum(dtype=np.float64) < 2**52:
        return np.bincount(groups, weights=values, minlength=n).astype(np.int64)
    out = np.zeros(n, np.int64)
    np.add.at(out, groups, values)
    return out


def _codes(col) -> tuple[np.ndarray, list]:
    """Dictionary codes and values of a string column (nulls get code -1)."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    codes = pc.fill_null(col.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, col.dictionary.to_pylist()


def file_partial(ev: pa.Table, host: str, shift_ns: int, meta_events: int,
                 compute_cats: tuple[str, ...], fh: dict) -> Partial:
    """The partial of one file's events (`ev` has the parse schema with `fname` added)."""
    P = Partial(events=ev.num_rows, meta_events=meta_events, fh=dict(fh))
    if ev.num_rows == 0:
        return P
    ph_codes, ph_vals = _codes(ev.column("ph"))
    is_x = ph_codes == (ph_vals.index("X") if "X" in ph_vals else -2)
    P.x_events = int(is_x.sum())
    ts = _np(ev.column("ts_ns"))
    dur = np.where(is_x, _np(ev.column("dur_ns")), 0)
    dur = np.maximum(dur, 0)
    end = ts + dur
    pid = _np(ev.column("pid"))
    tid = _np(ev.column("tid"))
    P.start, P.end = int(ts.min()) + shift_ns, int(end.max()) + shift_ns
    pt = np.unique((pid << 32) | (tid & 0xFFFFFFFF)) if (tid != tid[0]).any() or (pid != pid[0]).any() \
        else np.array([(int(pid[0]) << 32) | (int(tid[0]) & 0xFFFFFFFF)])
    P.threads = {(host, int(k >> 32), int(k & 0xFFFFFFFF)) for k in pt}

    cat_codes, cat_vals = _codes(ev.column("cat"))
    low = [str(c).lower() for c in cat_vals]
    is_io_cat = np.array([c in IO_CATS for c in low] + [False])[cat_codes]
    is_compute_cat = np.array([c in compute_cats for c in low] + [False])[cat_codes]
    is_proc_cat = np.array([c == "process" for c in low] + [False])[cat_codes]
    io = is_x & is_io_cat
    comp = is_x & is_compute_cat

    name_codes, name_vals = _codes(ev.column("name"))
    is_read = np.array([n in READ_CALLS for n in name_vals] + [False])[name_codes] & io
    is_write = np.array([n in WRITE_CALLS for n in name_vals] + [False])[name_codes] & io
    ret = _np(ev.column("ret"))
    nbytes_col = ev.column("bytes")
    moved = np.where(pc.is_valid(nbytes_col).to_numpy(zero_copy_only=False), _np(nbytes_col),
                     np.maximum(ret, 0))
    moved = np.where(is_read | is_write, moved, 0)

    # --- per process: interval unions
    if (pid == pid[0]).all():  # the usual case: one process per file
        upids, pidx = pid[:1].copy(), np.zeros(len(pid), np.int64)
    else:
        upids, pidx = np.unique(pid, return_inverse=True)
    n = len(upids)
    # one ordering by (process, start) serves every union: subsets of it stay ordered
    order = np.argsort(ts, kind="stable")
    if n > 1:
        order = order[np.argsort(pidx[order], kind="stable")]

    def union(mask):
        o = order[mask[order]]
        return union_lengths(pidx[o], ts[o], end[o], n, presorted=True)

    both = io | comp
    u_io, u_comp, u_both, u_all = union(io), union(comp), union(both), union(is_x)
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, pidx, ts)
    np.maximum.at(last, pidx, end)
    cnt = np.bincount(pidx, minlength=n)
    io_cnt = np.bincount(pidx[io], minlength=n)
    rd = np.bincount(pidx, weights=np.where(is_read, moved, 0), minlength=n)
    wr = np.bincount(pidx, weights=np.where(is_write, moved, 0), minlength=n)
    io_dur = np.bincount(pidx[io], weights=dur[io], minlength=n)
    for i, p in enumerate(upids):
        P.procs.append(dict(
            host=host, pid=int(p), events=int(cnt[i]), io_events=int(io_cnt[i]),
            lifetime_ns=int(last[i] - first[i]), app_ns=int(u_all[i]), io_ns=int(u_io[i]),
            compute_ns=int(u_comp[i]), io_not_overlapped_ns=int(u_both[i] - u_comp[i]),
            compute_not_overlapped_ns=int(u_both[i] - u_io[i]), io_call_time_ns=int(io_dur[i]),
            bytes_read=int(rd[i]), bytes_written=int(wr[i])))

    # --- per call name (I/O events), grouped on the dictionary codes
    err = pc.is_valid(ev.column("errno")).to_numpy(zero_copy_only=False)
    nc = name_codes[io]
    nv = len(name_vals)
    used = np.flatnonzero(np.bincount(nc, minlength=nv))
    P.calls = pa.table({
        "name": [str(name_vals[c]) for c in used],
        "dur_count": np.bincount(nc, minlength=nv)[used],
        "dur_sum": _isum(nc, dur[io], nv)[used],
        "bytes_sum": _isum(nc, moved[io], nv)[used],
        "err_sum": np.bincount(nc, weights=err[io], minlength=nv)[used].astype(np.int64)})
    has_size = pc.is_valid(ev.column("size")).to_numpy(zero_copy_only=False)
    size_raw = _np(ev.column("size"))
    names, sizes, counts = [], [], []
    for c in used:  # one pass per call name, not per event
        v, k = np.unique(size_raw[io & has_size & (name_codes == c)], return_counts=True)
        names += [str(name_vals[c])] * len(v)
        sizes.append(v)
        counts.append(k)
    P.sizes = pa.table({"name": pa.array(names, pa.string()),
                        "size": np.concatenate(sizes) if sizes else np.zeros(0, np.int64),
                        "size_count": np.concatenate(counts) if counts else np.zeros(0, np.int64)})

    # --- per file (by hash) and process
    fh_codes, fh_vals = _codes(ev.column("fhash"))
    m = io & (fh_codes >= 0)
    key = fh_codes[m] * n + pidx[m]
    uk, kidx = np.unique(key, return_inverse=True)
    P.files = pa.table({
        "fhash": [str(fh_vals[k // n]) for k in uk], "pid": upids[uk % n],
        "dur_count": np.bincount(kidx, minlength=len(uk)),
        "dur_sum": _isum(kidx, dur[m], len(uk)),
        "read_sum": _isum(kidx, np.where(is_read, moved, 0)[m], len(uk)),
        "written_sum": _isum(kidx, np.where(is_write, moved, 0)[m], len(uk))})

    # --- @trace categories (X events that are neither I/O nor process events)
    other = is_x & ~is_io_cat & ~is_proc_cat
    if other.any():
        oc = cat_codes[other]
        ucat, cidx = np.unique(oc, return_inverse=True)
        grp = pidx[other] * len(ucat) + cidx
        ug, gidx = np.unique(grp, return_inverse=True)
        un = union_lengths(gidx, ts[other], end[other], len(ug))
        P.cats = pa.table({
            "pid": upids[ug // len(ucat)],
            "cat": [str(cat_vals[c]) for c in ucat[ug % len(ucat)]],
            "count": np.bincount(gidx, minlength=len(ug)),
            "dur": np.bincount(gidx, weights=dur[other], minlength=len(ug)).astype(np.int64),
            "union": un,
        })
        names = pc.take(ev.column("name"), pa.array(np.flatnonzero(other))).cast(pa.string())
        cats = pc.take(ev.column("cat"), pa.array(np.flatnonzero(other))).cast(pa.string())
        P.cat_names = pa.table({"cat": cats, "name": names, "dur": dur[other]}).group_by(
            ["cat", "name"]).aggregate([("dur", "count"), ("dur", "sum")])

    # --- access pattern and sizes (data calls)
    offset_valid = pc.is_valid(ev.column("offset")).to_numpy(zero_copy_only=False)
    offset = _np(ev.column("offset"))
    size = np.where(has_size, size_raw, moved)
    for direction, m in (("read", is_read), ("write", is_write)):
        P.size_hist[direction] = np.bincount(np.searchsorted(SIZE_EDGES, size[m], side="right") - 1,
                                             minlength=len(SIZE_EDGES)).tolist()
        m = m & offset_valid
        # streams = (process, file); order by time within each stream (two stable sorts)
        sk = fh_codes[m] * n + pidx[m]
        stream = np.unique(sk, return_inverse=True)[1] if len(sk) and (sk != sk[0]).any() \
            else np.zeros(len(sk), np.int64)
        order = np.argsort(ts[m], kind="stable")
        if len(sk) and stream.max() > 0:
            order = order[np.argsort(stream[order], kind="stable")]
        st = stream[order]
        off, prev_end = offset[m][order], (offset[m] + moved[m])[order]
        same = np.zeros(len(off), bool)
        same[1:] = st[1:] == st[:-1]
        pe = np.empty_like(prev_end)
        pe[1:] = prev_end[:-1]
        consecutive = same & (off == pe)
        sequential = same & (off >= pe)
        P.access[direction] = dict(
            first=int((~same).sum()), consecutive=int(consecutive.sum()),
            sequential=int(sequential.sum()), random=int((same & ~sequential).sum()))

    # --- timeline: sparse bins of 2**exp ns on the job clock, by start time
    span = max(P.end - P.start, 1)
    P.tl_exp = max(int(np.ceil(np.log2(span / FINE_BINS))), 10) if span > FINE_BINS else 10
    b = (ts[io] + shift_ns) >> P.tl_exp
    b0 = int(b.min()) if len(b) else 0
    bidx = b - b0  # at most ~FINE_BINS distinct values
    nb = int(bidx.max()) + 1 if len(b) else 0
    ops = np.bincount(bidx, minlength=nb)
    keep = np.flatnonzero(ops)
    P.tl = (keep + b0, np.bincount(bidx, weights=np.where(is_read, moved, 0)[io], minlength=nb)[keep],
            np.bincount(bidx, weights=np.where(is_write, moved, 0)[io], minlength=nb)[keep],
            ops[keep].astype(np.float64))
    return P


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


def _us(ns) -> float:
    return round(int(ns) / 1000.0, 3)


def merge(partials: list[Partial], top: int = 20) -> dict:
    """The summary (a JSON-ready dict) from all files' partials."""
    S: dict = {}
    fh: dict = {}
    for p in partials:
        fh.update(p.fh)
    procs = [d for p in partials for d in p.procs]
    hosts = sorted({d["host"] for d in procs if d["host"]})
    starts = [p.start for p in partials if p.start is not None]
    ends = [p.end for p in partials if p.end is not None]
    job_start, job_end = (min(starts), max(ends)) if starts else (0, 0)
    file_tab = _concat([p.files for p in partials])
    S["job"] = dict(
        duration_us=_us(job_end - job_start), start_ns=job_start, end_ns=job_end,
        processes=len({(d["host"], d["pid"]) for d in procs}),
        threads=len(set().union(*[p.threads for p in partials])) if partials else 0,
        hosts=len(hosts), host_names=hosts,
        files=len(set(file_tab.column("fhash").to_pylist())) if file_tab is not None else 0,
        events=sum(p.events for p in partials), complete_events=sum(p.x_events for p in partials),
        metadata_events=sum(p.meta_events for p in partials))

    # --- time split: per process and summed over processes
    keys = ["lifetime_ns", "app_ns", "io_ns", "compute_ns", "io_not_overlapped_ns",
            "compute_not_overlapped_ns", "io_call_time_ns"]
    tot = {k: sum(d[k] for d in procs) for k in keys}
    S["time"] = {k.replace("_ns", "_us"): _us(v) for k, v in tot.items()}
    S["time"]["io_share_of_app"] = round(tot["io_ns"] / tot["app_ns"], 6) if tot["app_ns"] else 0.0
    S["processes"] = sorted(
        [dict({k.replace("_ns", "_us"): (_us(v) if k.endswith("_ns") else v) for k, v in d.items()})
         for d in procs], key=lambda d: (-d["io_us"], d["host"], d["pid"]))

    # --- per call name
    calls = _concat([p.calls for p in partials])
    sizes = _concat([p.sizes for p in partials])
    rows = []
    meta_cnt = meta_dur = io_cnt = io_dur = 0
    if calls is not None:
        c = calls.group_by("name").aggregate(
            [("dur_count", "sum"), ("dur_sum", "sum"), ("bytes_sum", "sum"), ("err_sum", "sum")])
        sz = sizes.group_by(["name", "size"]).aggregate([("size_count", "sum")]) if sizes else None
        for r in c.to_pylist():
            name, count, dur, nbytes = r["name"], r["dur_count_sum"], r["dur_sum_sum"], r["bytes_sum_sum"]
            row = dict(name=name, count=count, time_us=_us(dur), bytes=nbytes, errors=r["err_sum_sum"],
                       size_min=None, size_p25=None, size_mean=None, size_median=None,
                       size_p75=None, size_max=None,
                       bandwidth_MBps=round(nbytes / (dur / 1e9) / 1e6, 3) if dur and nbytes else None)
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
            if name not in DATA_CALLS:
                meta_cnt += count
                meta_dur += dur
    S["calls"] = sorted(rows, key=lambda r: (-r["time_us"], r["name"]))
    S["metadata_calls"] = dict(
        count=meta_cnt, time_us=_us(meta_dur),
        count_share=round(meta_cnt / io_cnt, 6) if io_cnt else 0.0,
        time_share=round(meta_dur / io_dur, 6) if io_dur else 0.0)

    # --- files
    frows = []
    if file_tab is not None:
        f = file_tab.group_by("fhash").aggregate(
            [("dur_count", "sum"),
             ("dur_sum", "sum"), ("read_sum", "sum"), ("written_sum", "sum"), ("pid", "count")])
        for r in f.to_pylist():
            frows.append(dict(file=fh.get(r["fhash"], f"<unknown {r['fhash']}>"), fhash=r["fhash"],
                              count=r["dur_count_sum"], time_us=_us(r["dur_sum_sum"]),
                              bytes_read=r["read_sum_sum"], bytes_written=r["written_sum_sum"],
                              processes=r["pid_count"]))
    S["files"] = sorted(frows, key=lambda r: (-r["time_us"], r["file"]))[:top]

    # --- @trace categories
    cats = _concat([p.cats for p in partials])
    crows = []
    if cats is not None:
        g = cats.group_by("cat").aggregate([("count", "sum"), ("dur", "sum"), ("union", "sum"),
                                            ("pid", "count")])
        cn = _concat([p.cat_names for p in partials]).group_by(["cat", "name"]).aggregate(
            [("dur_count", "sum"), ("dur_sum", "sum")]).to_pylist()
        for r in g.to_pylist():
            names = sorted([x for x in cn if x["cat"] == r["cat"]], key=lambda x: -x["dur_sum_sum"])
            crows.append(dict(
                cat=r["cat"], count=r["count_sum"], time_us=_us(r["dur_sum"]),
                union_us=_us(r["union_sum"]),
                share_of_app=round(r["union_sum"] / tot["app_ns"], 6) if tot["app_ns"] else 0.0,
                top_names=[dict(name=x["name"], count=x["dur_count_sum"], time_us=_us(x["dur_sum_sum"]))
                           for x in names[:5]]))
    S["categories"] = sorted(crows, key=lambda r: (-r["union_us"], r["cat"]))

    # --- access pattern and size histogram
    acc = {}
    for d in ("read", "write"):
        acc[d] = {k: sum(p.access.get(d, {}).get(k, 0) for p in partials)
                  for k in ("first", "consecutive", "sequential", "random")}
        acc[d]["size_histogram"] = dict(zip(SIZE_LABELS, np.sum(
            [p.size_hist.get(d, [0] * len(SIZE_LABELS)) for p in partials] or [[0] * len(SIZE_LABELS)],
            axis=0).astype(int).tolist()))
    S["access"] = acc
    S["timeline"] = _timeline(partials, job_start, job_end)
    return S


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
