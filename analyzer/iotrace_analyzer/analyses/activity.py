"""What the report page draws, gathered as the events are read and always aggregated (its
size does not grow with the events): each process's I/O over time in bins, the longest events
of each @trace phase (epochs, batches, checkpoints, the user's regions), and a uniform sample
of each file's offsets against time.

ActivityPart is one task's share (summary.Partial holds one); summarize() turns all of them
into the summary's "phases" and what the page draws (model.Drawn).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _kernels, units
from ..keys import HEX, HashIds
from ..model import Drawn
from ..model.files import top_rows

PHASE_KEEP = 64  # the longest events kept per (process, category, name)
SAMPLE_POINTS = _kernels.SAMPLE_POINTS  # offset samples per (file, process)
OFFSET_FILES = 6  # files whose offsets the page draws: the data files with most data calls
OFFSET_POINTS = 4000  # points per drawn file, at most
SPLIT_MAX_EVENTS = 16  # phase kinds with at most this many events get a time split of each
SPLIT_ROWS = 40  # ... as long as the events split add up to at most this many
PAGE_PHASE_EVENTS = 2000  # events per phase kind the page draws, the longest


def binned(idx: np.ndarray, *vals: np.ndarray) -> tuple:
    """Sparse bins: (distinct bin indices, then each of `vals` summed per bin)."""
    if len(idx) == 0:
        return ()
    lo = int(idx.min())
    span = int(idx.max()) - lo + 1
    if span <= 4 * len(idx) + 4096:  # dense enough: count in place
        rel = idx - lo
        u = np.flatnonzero(np.bincount(rel, minlength=span))
        return (u + lo, *[np.bincount(rel, weights=v, minlength=span)[u] for v in vals])
    u, inv = np.unique(idx, return_inverse=True)
    return (u, *[np.bincount(inv, weights=v, minlength=len(u)) for v in vals])


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The indices of the ranges [starts[i], ends[i]), one after the other."""
    lens = ends - starts
    total = int(lens.sum())
    if not total:
        return np.zeros(0, np.int64)
    keep = lens > 0
    starts, lens = starts[keep], lens[keep]
    step = np.ones(total, np.int64)
    pos = np.concatenate([[0], np.cumsum(lens)[:-1]])
    step[pos] = starts - np.concatenate([[0], (starts + lens - 1)[:-1]])
    step[0] = starts[0]
    return np.cumsum(step)


@dataclass
class Samples:
    """Offset samples as columns: per key (fhash, pid; `kind`, `value`: the hash's number in
    its task, keys.py) the calls seen and the stride (every 2**stride-th call kept), and its
    points (`bounds` cut them per key: job-clock start, offset, length, direction). Keys in
    the order they came first."""

    hashes: pa.Array | None  # the strings; None: all 16 hex digits, made from `value` (fhash)
    pid: np.ndarray
    kind: np.ndarray
    value: np.ndarray
    seen: np.ndarray
    stride: np.ndarray
    bounds: np.ndarray
    ts: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    dir: np.ndarray

    def __len__(self) -> int:
        return len(self.pid)

    @property
    def fhash(self) -> pa.Array:
        return self.hashes if self.hashes is not None else HashIds().strings(self.kind, self.value)

    def rows_of(self, fhash: str) -> np.ndarray:
        """The keys of a hash."""
        if self.hashes is not None:
            return np.flatnonzero(pc.equal(self.hashes, fhash).to_numpy(zero_copy_only=False))
        kind, value = HashIds().of(pa.array([fhash], pa.string()))
        return np.flatnonzero(self.value == value[0]) if kind[0] == HEX else np.zeros(0, np.int64)

    def entry(self, i: int) -> list:
        """Key i as [seen, stride, ts, offset, length, dir] (the form _merge_sample takes)."""
        a, b = self.bounds[i], self.bounds[i + 1]
        return [int(self.seen[i]), int(self.stride[i]), self.ts[a:b], self.offset[a:b], self.length[a:b],
                self.dir[a:b]]

    def take(self, idx: np.ndarray) -> Samples:
        idx = np.asarray(idx, np.int64)
        pts = _ranges(self.bounds[idx], self.bounds[idx + 1])
        lens = self.bounds[idx + 1] - self.bounds[idx]
        return Samples(None if self.hashes is None else self.hashes.take(pa.array(idx)), self.pid[idx],
                       self.kind[idx], self.value[idx],
                       self.seen[idx], self.stride[idx], np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
                       self.ts[pts], self.offset[pts], self.length[pts], self.dir[pts])

    @staticmethod
    def join(parts: list) -> Samples | None:
        """The keys of several Samples one after the other (the same key may repeat)."""
        parts = [p for p in parts if p is not None and len(p)]
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        shift = np.cumsum([0] + [int(p.bounds[-1]) for p in parts[:-1]])
        hashes = None if all(p.hashes is None for p in parts) else pa.concat_arrays([p.fhash for p in parts])
        return Samples(hashes, *[np.concatenate([getattr(p, k) for p in parts])
                                                                       for k in ("pid", "kind", "value", "seen",
                                                                                 "stride")],
                       np.concatenate([parts[0].bounds[:1]] + [p.bounds[1:] + s for p, s in zip(parts, shift)]),
                       *[np.concatenate([getattr(p, k) for p in parts]) for k in ("ts", "offset", "length", "dir")])

    def merged(self) -> Samples:
        """One entry per key, where it first came: a key's entries merged in order (_merge_sample)."""
        n = len(self)
        if n < 2:
            return self
        order = np.lexsort((np.arange(n), self.value, self.kind, self.pid))
        k = (self.pid[order], self.kind[order], self.value[order])
        new = np.ones(n, bool)
        new[1:] = (k[0][1:] != k[0][:-1]) | (k[1][1:] != k[1][:-1]) | (k[2][1:] != k[2][:-1])
        if new.all():
            return self
        starts = np.flatnonzero(new)
        first = order[starts]  # each key's first entry, by key
        size = np.diff(np.append(starts, n))
        reps = np.sort(first)  # in the order the keys came
        multi = {int(first[g]): order[starts[g]:starts[g] + size[g]] for g in np.flatnonzero(size > 1)}
        extra = []
        at = {}
        for i in reps:
            m = multi.get(int(i))
            if m is None:
                continue
            acc = None
            for j in m:  # in the order they came (the sort kept it)
                acc = _merge_sample(acc, self.entry(int(j)))
            at[int(i)] = n + len(extra)
            extra.append(acc)
        src = self
        if extra:
            ex = Samples(None if self.hashes is None else self.hashes.take(pa.array(list(at), pa.int64())),
                         self.pid[list(at)], self.kind[list(at)],
                         self.value[list(at)], np.array([e[0] for e in extra], np.int64),
                         np.array([e[1] for e in extra], np.int64),
                         np.concatenate([[0], np.cumsum([len(e[2]) for e in extra])]).astype(np.int64),
                         *[np.concatenate([e[c] for e in extra]).astype(getattr(self, k).dtype)
                           for c, k in ((2, "ts"), (3, "offset"), (4, "length"), (5, "dir"))])
            src = Samples.join([self, ex])
        return src.take(np.array([at.get(int(i), int(i)) for i in reps], np.int64))


def _merge_sample(a: list | None, b: list) -> list:
    """Two uniform samples of one stream's calls ([seen, stride, ts, offset, length, dir]:
    every 2**stride-th call kept) as one, at the coarser stride, at most SAMPLE_POINTS."""
    if a is None:
        return b
    s = max(a[1], b[1])
    cols = [np.concatenate([x[k][:: 1 << (s - x[1])] for x in (a, b)]) for k in range(2, 6)]
    while len(cols[0]) > SAMPLE_POINTS:
        cols = [c[::2] for c in cols]
        s += 1
    return [a[0] + b[0], s, *cols]


@dataclass
class ActivityPart:
    """One task's share of the page's data. The processes' bins are columns (process row,
    bin, read, written, calls, I/O call time ns) at one exponent, 2**exp ns: about 1024 bins
    over the span of the files the task read (4 times coarser than its job timeline's bins)."""

    rows: dict = field(default_factory=dict)  # (file key, pid) -> row
    hosts: list = field(default_factory=list)  # per row: host
    exp: int = 0
    chunks: list = field(default_factory=list)  # [rows, bins, read, written, ops, io_ns] arrays
    packed: bool = True  # chunks is one chunk with one row per (process, bin)
    samples: Samples | None = None  # per (fhash, pid): _kernels.FileState's, at the task's end
    phases: dict = field(default_factory=dict)  # (host, pid, cat, name) -> [count, dur, starts, durs]

    def add_bins(self, tl: dict, procs: list, tl_exp: int, partial_exp: int) -> None:
        """The kernel's timeline, (bin at 2**tl_exp ns, process) -> read, written, ops, I/O call
        time; kept at 2**(partial_exp + 2) ns, partial_exp being the task's job-timeline exponent."""
        if not len(tl["bin"]):
            return
        row_of = np.array([self._row((p[0], p[2]), p[1]) for p in procs], np.int64)
        vals = [tl[k].astype(np.float64) for k in ("read", "written", "ops", "io_dur")]
        self._add([row_of[tl["proc"]], tl["bin"], *vals], tl_exp, partial_exp + 2)

    def _row(self, key: tuple, host: str) -> int:
        r = self.rows.get(key)
        if r is None:
            r = self.rows[key] = len(self.hosts)
            self.hosts.append(host)
        return r

    def _add(self, chunk: list, exp: int, want: int) -> None:
        e = max(self.exp, exp, want)
        if e > self.exp and self.chunks:
            self.chunks = [[c[0], c[1] >> (e - self.exp), *c[2:]] for c in self.chunks]
        self.exp = e
        self.chunks.append([chunk[0], chunk[1] >> (e - exp), *chunk[2:]])
        self.packed = False
        if len(self.chunks) > 16:
            self.compact()

    def compact(self) -> None:
        """One chunk, one row per (process, bin)."""
        if self.packed or not self.chunks:
            return
        cols = [np.concatenate([c[k] for c in self.chunks]) for k in range(6)]
        order = np.lexsort((cols[1], cols[0]))
        r, b = cols[0][order], cols[1][order]
        first = np.flatnonzero(np.concatenate([[True], (np.diff(r) != 0) | (np.diff(b) != 0)]))
        self.chunks = [[r[first], b[first], *[np.add.reduceat(c[order], first) for c in cols[2:]]]]
        self.packed = True

    def add_phases(self, host_pid: list, proc: np.ndarray, cat: np.ndarray, name: np.ndarray,
                   ts: np.ndarray, dur: np.ndarray, cat_vals: list, name_vals: list) -> None:
        """Complete events of @trace categories (neither I/O nor process events): per
        (process, category, name) their count, summed time and the PHASE_KEEP longest."""
        if not len(ts):
            return
        key = (proc.astype(np.int64) << 40) | (cat.astype(np.int64) << 20) | (name.astype(np.int64) & 0xFFFFF)
        order = np.lexsort((-dur, key))
        k_sorted = key[order]
        cuts = np.flatnonzero(np.diff(k_sorted)) + 1
        for part in np.split(order, cuts):
            i = part[0]
            host, pid = host_pid[proc[i]]
            k = (host, pid, str(cat_vals[cat[i]]), str(name_vals[name[i]]) if name[i] >= 0 else "")
            top = part[:PHASE_KEEP]
            self._add_phase(k, [len(part), int(dur[part].sum()), ts[top], dur[top]])

    def _add_phase(self, k: tuple, v: list) -> None:
        mine = self.phases.get(k)
        if mine is None:
            self.phases[k] = v
            return
        starts, durs = np.concatenate([mine[2], v[2]]), np.concatenate([mine[3], v[3]])
        top = np.argsort(-durs, kind="stable")[:PHASE_KEEP]
        self.phases[k] = [mine[0] + v[0], mine[1] + v[1], starts[top], durs[top]]

    def merge(self, o: ActivityPart) -> None:
        if o.chunks:
            o.compact()
            mine = np.array([self._row(k, o.hosts[r]) for k, r in sorted(o.rows.items(), key=lambda kv: kv[1])],
                            np.int64)
            c = o.chunks[0]
            self._add([mine[c[0]], *c[1:]], o.exp, o.exp)
        if o.samples is not None:  # the hashes numbered again: another task numbered its own
            ids = HashIds()
            for part in (self.samples, o.samples):
                if part is not None:
                    part.kind, part.value = ids.of(part.fhash)
            self.samples = Samples.join([self.samples, o.samples]).merged()
        for k, v in o.phases.items():
            self._add_phase(k, v)


def summarize(parts: list[ActivityPart], grid: dict, files) -> tuple[dict, Drawn]:
    """(the summary's "phases", what the page draws of them: model.Drawn). `grid`:
    the job timeline (bin_ns, start_ns, bins), whose bins the processes' rows share;
    `files`: every file's summary row (files.FileTable)."""
    rows: dict = {}
    hosts: list = []
    cols: list = []  # per part: rows, bin start ns, bin width ns, read, written, ops, io_ns
    acc = ActivityPart()  # the phases of all parts; the bins stay at each part's exponent
    for p in parts:
        if p.chunks:
            p.compact()
            mine = np.empty(len(p.hosts), np.int64)
            for k, r in p.rows.items():
                if k not in rows:
                    rows[k] = len(hosts)
                    hosts.append(p.hosts[r])
                mine[r] = rows[k]
            c = p.chunks[0]
            cols.append([mine[c[0]], c[1] << p.exp, np.full(len(c[1]), 1 << p.exp, np.int64), *c[2:]])
        acc.merge(ActivityPart(phases=p.phases))
    bins = [np.concatenate([c[k] for c in cols]) for k in range(7)] if cols else [np.zeros(0, np.int64)] * 7
    keys = [(hosts[r], k[1]) for k, r in rows.items()]  # per row: (host, pid)
    S, events = _phases(acc.phases, bins, {k: r for r, k in enumerate(keys)})
    return S, Drawn(proc_timeline=_proc_rows(bins, keys, grid),
                    offsets=_offsets([p.samples for p in parts], files), phase_events=events)


def _proc_rows(bins: list, keys: list, grid: dict) -> dict:
    """Each process's I/O on the job timeline's bins: rows of bytes read, written, calls and
    I/O call time (ns), processes by host and pid (two trace files of one process: one row)."""
    width, start, nb = grid["bin_ns"], grid["start_ns"], len(grid["ops"])
    procs = sorted(set(keys))
    row_of = {k: i for i, k in enumerate(procs)}
    out_row = np.array([row_of[k] for k in keys], np.int64)
    r, b0, w, *vals = bins
    # a bin to the job bin of its middle (a process's bins are finer than the job's)
    col = np.clip((b0 + w // 2 - start) // width, 0, nb - 1)
    flat = out_row[r] * nb + col if len(r) else np.zeros(0, np.int64)
    out = {name: np.bincount(flat, weights=v, minlength=len(procs) * nb).reshape(len(procs), nb).astype(np.int64)
           for name, v in zip(("read", "written", "ops", "io_ns"), vals)}
    return dict(bin_ns=width, start_ns=start, processes=[dict(host=h, pid=p) for h, p in procs], **out)


def _offsets(samples: list, files) -> list[dict]:
    """The drawn files' offset samples, every process's together, in time order. `samples`:
    each task's Samples (or None), `files`: files.FileTable. A drawn file is a data file with
    data calls and samples, the most data calls first (a pattern needs calls to show)."""
    samples = [p for p in samples if p is not None and len(p)]
    if not samples or not len(files):
        return []
    has = files.has_samples if files.has_samples is not None else \
        pc.is_in(files.fhash, value_set=pa.concat_arrays([p.fhash for p in samples])).to_numpy(zero_copy_only=False)
    calls = files["reads"] + files["writes"]
    cand = files.is_class("data") & has & (calls != 0)
    top = top_rows(cand, [-calls, -(files["read_time_us"] + files["write_time_us"])], files.files_at, OFFSET_FILES)
    out = []
    for i in top:
        r = files.row(i)
        by_pid: dict = {}  # pid -> its samples, the tasks' merged in their order
        for p in samples:
            for j in p.rows_of(r["fhash"]):
                by_pid[int(p.pid[j])] = _merge_sample(by_pid.get(int(p.pid[j])), p.entry(int(j)))
        parts = list(by_pid.items())
        cols = [np.concatenate([v[k] for _, v in parts]) for k in range(2, 6)]
        pid = np.concatenate([np.full(len(v[2]), p, np.int64) for p, v in parts])
        order = np.argsort(cols[0], kind="stable")
        if len(order) > OFFSET_POINTS:
            order = order[:: -(-len(order) // OFFSET_POINTS)]
        ts, off, length, direction = (c[order] for c in cols)
        out.append(dict(file=r["file"], fhash=r["fhash"], calls=sum(int(v[0]) for _, v in parts),
                        read_sequential=r["read_sequential"], read_random=r["read_random"],
                        write_sequential=r["write_sequential"], write_random=r["write_random"],
                        ts_ns=ts, offset=off, length=length, write=direction.astype(bool), pid=pid[order]))
    return out


def _phases(phases: dict, bins: list, rows: dict) -> tuple[dict, list]:
    """(the summary's phases, the page's phase events). The phase kinds (category, name) by
    their summed time; a time split of each event of the kinds with few events (epochs,
    stages, checkpoints): the I/O its own process did inside it, and all processes. `bins`:
    the processes' bin columns; `rows`: (host, pid) -> their row."""
    kinds: dict = {}
    for (host, pid, cat, name), (count, dur, starts, durs) in phases.items():
        k = kinds.setdefault((cat, name), dict(cat=cat, name=name, count=0, time_ns=0, processes=0, events=[]))
        k["count"] += count
        k["time_ns"] += dur
        k["processes"] += 1
        k["events"] += [(host, pid, int(s), int(d)) for s, d in zip(starts, durs)]
    order = sorted(kinds.values(), key=lambda k: (-k["time_ns"], k["cat"], k["name"]))
    # phases, not library calls (auto's "data" category: numpy.save...); the longest events
    # first (epochs and stages before the batches and steps inside them), while they fit
    few, n_rows = [], 0
    for k in sorted([k for k in order if k["count"] <= SPLIT_MAX_EVENTS and k["cat"] != "data"],
                    key=lambda k: (-k["time_ns"] / k["count"], k["cat"], k["name"])):
        if n_rows + k["count"] <= SPLIT_ROWS:
            few.append(k)
            n_rows += k["count"]
    split = []
    if few:
        every = _Cumulative(bins)
        for k in few:
            for n, (host, pid, s, d) in enumerate(sorted(k["events"], key=lambda e: (e[2], e[1]))):
                r = rows.get((host, pid))
                own = _Cumulative(bins, bins[0] == r).window(s, s + d) if r is not None else (0.0, 0.0)
                job = every.window(s, s + d)
                split.append(dict(cat=k["cat"], name=k["name"], index=n, host=host, pid=pid, start_ns=s,
                                  duration_us=units.us(d), io_us=round(own[0] / 1000, 3),
                                  io_all_us=round(job[0] / 1000, 3), bytes_all=int(job[1])))
    S = dict(kinds=[dict(cat=k["cat"], name=k["name"], count=k["count"], time_us=units.us(k["time_ns"]),
                         processes=k["processes"]) for k in order], split=split)
    events = [dict(cat=k["cat"], name=k["name"], time_us=units.us(k["time_ns"]),
                   events=sorted(k["events"], key=lambda e: -e[3])[:PAGE_PHASE_EVENTS]) for k in order]
    return S, events


class _Cumulative:
    """Bins (all, or those `where` is true) as running sums by bin middle: the I/O call time
    and bytes of any window in two binary searches (a bin counted where its middle falls)."""

    def __init__(self, bins: list, where: np.ndarray | None = None):
        _r, b0, w, rd, wr, _ops, io = bins if where is None else [c[where] for c in bins]
        order = np.argsort(b0 + w // 2, kind="stable")
        self.mid = (b0 + w // 2)[order]
        self.io = np.concatenate([[0.0], np.cumsum(io[order])])
        self.nbytes = np.concatenate([[0.0], np.cumsum((rd + wr)[order])])

    def window(self, a: int, b: int) -> tuple[float, float]:
        i, j = np.searchsorted(self.mid, [a, b])
        return float(self.io[j] - self.io[i]), float(self.nbytes[j] - self.nbytes[i])
