"""What the report page draws, gathered as the events are read and always aggregated (its
size does not grow with the events): each process's I/O over time in bins, the longest events
of each @trace phase (epochs, batches, checkpoints, the user's regions), and a uniform sample
of each file's offsets against time.

ActivityPart is one task's share (summary.Partial holds one); summarize() turns all of them
into the summary's "phases" and the page's detail ("proc_timeline", "offsets").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PROC_BINS = 1024  # at most this many bins per process, over its own span
PHASE_KEEP = 64  # the longest events kept per (process, category, name)
SAMPLE_POINTS = 512  # offset samples per (file, process), as the kernel's kSamplePoints
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


def _add_bins(slot: list | None, exp: int, bins: tuple, max_bins: int) -> list:
    """[exp, idx, values...] with `bins` (sparse, at 2**exp ns) added, coarsened to at most
    `max_bins` over the span the bins cover."""
    if slot is not None:
        e = max(slot[0], exp)
        idx = np.concatenate([slot[1] >> (e - slot[0]), bins[0] >> (e - exp)])
        vals = [np.concatenate([a, b]) for a, b in zip(slot[2:], bins[1:])]
    else:
        e, idx, vals = exp, bins[0], list(bins[1:])
    span = int(idx.max() - idx.min()) + 1
    shift = max(int(np.ceil(np.log2(span / max_bins))), 0) if span > max_bins else 0
    return [e + shift, *binned(idx >> shift, *vals)]


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
    """One task's share of the page's data, keyed by process (file key, pid)."""

    bins: dict = field(default_factory=dict)  # (file key, pid) -> [exp, idx, read, written, ops, io_ns]
    hosts: dict = field(default_factory=dict)  # (file key, pid) -> host
    samples: dict = field(default_factory=dict)  # (fhash, pid) -> [seen, stride, ts, offset, length, dir]
    phases: dict = field(default_factory=dict)  # (host, pid, cat, name) -> [count, dur, starts, durs]

    def add_bins(self, tl: dict, procs: list, tl_exp: int) -> None:
        """The kernel's timeline, (bin, process) -> read, written, ops, I/O call time."""
        if not len(tl["bin"]):
            return
        order = np.argsort(tl["proc"], kind="stable")
        p_sorted = tl["proc"][order]
        cuts = np.flatnonzero(np.diff(p_sorted)) + 1
        for part in np.split(order, cuts):
            file_key, host, pid, _shift = procs[int(tl["proc"][part[0]])]
            key = (file_key, pid)
            self.hosts[key] = host
            bins = binned(tl["bin"][part], *[tl[k][part].astype(np.float64)
                                             for k in ("read", "written", "ops", "io_dur")])
            self.bins[key] = _add_bins(self.bins.get(key), tl_exp, bins, PROC_BINS)

    def add_samples(self, off: dict, files: dict, fh_vals: list, procs: list) -> None:
        """The kernel's offset samples, per files slot (fhash, process)."""
        if not len(off["slot"]):
            return
        slots, first = np.unique(off["slot"], return_index=True)
        ends = list(first[1:]) + [len(off["slot"])]
        for s, a, b in zip(slots, first, ends):
            key = (str(fh_vals[files["fhash"][s]]), procs[files["proc"][s]][2])
            new = [int(off["seen"][s]), int(off["stride"][s]), off["ts"][a:b], off["offset"][a:b],
                   off["length"][a:b], off["dir"][a:b].astype(np.int8)]
            self.samples[key] = _merge_sample(self.samples.get(key), new)

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
        for k, v in o.bins.items():
            self.bins[k] = _add_bins(self.bins.get(k), v[0], tuple(v[1:]), PROC_BINS) if k in self.bins else v
        self.hosts.update(o.hosts)
        for k, v in o.samples.items():
            self.samples[k] = _merge_sample(self.samples.get(k), v)
        for k, v in o.phases.items():
            self._add_phase(k, v)


def summarize(parts: list[ActivityPart], grid: dict, files: list[dict]) -> tuple[dict, dict]:
    """(the summary's "phases", the page's detail: "proc_timeline", "offsets", "phase_events"). `grid`:
    the job timeline (bin_ns, start_ns, bins), whose bins the processes' rows share;
    `files`: every file's summary row."""
    bins: dict = {}
    hosts: dict = {}
    samples: dict = {}
    phases: dict = {}
    for p in parts:
        for k, v in p.bins.items():
            bins[k] = _add_bins(bins.get(k), v[0], tuple(v[1:]), PROC_BINS) if k in bins else v
        hosts.update(p.hosts)
        for k, v in p.samples.items():
            samples[k] = _merge_sample(samples.get(k), v)
        for k, v in p.phases.items():
            mine = phases.get(k)
            phases[k] = v if mine is None else [mine[0] + v[0], mine[1] + v[1], np.concatenate([mine[2], v[2]]),
                                                np.concatenate([mine[3], v[3]])]
    S, events = _phases(phases, bins, hosts)
    return S, dict(proc_timeline=_proc_rows(bins, hosts, grid), offsets=_offsets(samples, files),
                   phase_events=events)


def _proc_rows(bins: dict, hosts: dict, grid: dict) -> dict:
    """Each process's I/O on the job timeline's bins: rows of bytes read, written, calls and
    I/O call time (ns), processes by host and pid."""
    width, start, nb = grid["bin_ns"], grid["start_ns"], len(grid["ops"])
    keys = sorted(bins, key=lambda k: (hosts.get(k, ""), k[1], str(k[0])))
    out = {k: np.zeros((len(keys), nb)) for k in ("read", "written", "ops", "io_ns")}
    for r, k in enumerate(keys):
        e, idx, *vals = bins[k]
        col = np.clip(((idx << e) - start) // width, 0, nb - 1)
        for name, v in zip(out, vals):
            np.add.at(out[name][r], col, v)
    return dict(bin_ns=width, start_ns=start, processes=[dict(host=hosts.get(k, ""), pid=k[1]) for k in keys],
                **{k: v.astype(np.int64) for k, v in out.items()})


def _offsets(samples: dict, files: list[dict]) -> list[dict]:
    """The drawn files' offset samples, every process's together, in time order."""
    by_hash: dict = {}
    for (h, pid), v in samples.items():
        by_hash.setdefault(h, []).append((pid, v))
    rows = [r for r in files if r["class"] == "data" and r["fhash"] in by_hash and r["reads"] + r["writes"]]
    # the most data calls first: a pattern needs calls to show
    rows.sort(key=lambda r: (-(r["reads"] + r["writes"]), -(r["read_time_us"] + r["write_time_us"]), r["file"]))
    out = []
    for r in rows[:OFFSET_FILES]:
        parts = by_hash[r["fhash"]]
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


def _phases(phases: dict, bins: dict, hosts: dict) -> tuple[dict, list]:
    """(the summary's phases, the page's phase events). The phase kinds (category, name) by
    their summed time; a time split of each event of the kinds with few events (epochs,
    checkpoints, the user's stages): the I/O its own process did inside it, and all processes."""
    kinds: dict = {}
    for (host, pid, cat, name), (count, dur, starts, durs) in phases.items():
        k = kinds.setdefault((cat, name), dict(cat=cat, name=name, count=0, time_ns=0, processes=0, events=[]))
        k["count"] += count
        k["time_ns"] += dur
        k["processes"] += 1
        k["events"] += [(host, pid, int(s), int(d)) for s, d in zip(starts, durs)]
    order = sorted(kinds.values(), key=lambda k: (-k["time_ns"], k["cat"], k["name"]))
    every = _Cumulative(list(bins.values()))
    by_pid = {(hosts.get(k, ""), k[1]): v for k, v in bins.items()}
    split = []
    # phases, not library calls (auto's "data" category: numpy.save...); the longest events
    # first (epochs and stages before the batches and steps inside them), while they fit
    few, rows = [], 0
    for k in sorted([k for k in order if k["count"] <= SPLIT_MAX_EVENTS and k["cat"] != "data"],
                    key=lambda k: (-k["time_ns"] / k["count"], k["cat"], k["name"])):
        if rows + k["count"] <= SPLIT_ROWS:
            few.append(k)
            rows += k["count"]
    for k in few:
        for n, (host, pid, s, d) in enumerate(sorted(k["events"], key=lambda e: (e[2], e[1]))):
            own = _Cumulative([by_pid[(host, pid)]] if (host, pid) in by_pid else []).window(s, s + d)
            job = every.window(s, s + d)
            split.append(dict(cat=k["cat"], name=k["name"], index=n, host=host, pid=pid, start_ns=s,
                              duration_us=round(d / 1000, 3), io_us=round(own[0] / 1000, 3),
                              io_all_us=round(job[0] / 1000, 3), bytes_all=int(job[1])))
    S = dict(kinds=[dict(cat=k["cat"], name=k["name"], count=k["count"], time_us=round(k["time_ns"] / 1000, 3),
                         processes=k["processes"]) for k in order], split=split)
    events = [dict(cat=k["cat"], name=k["name"], time_us=round(k["time_ns"] / 1000, 3),
                   events=sorted(k["events"], key=lambda e: -e[3])[:PAGE_PHASE_EVENTS]) for k in order]
    return S, events


class _Cumulative:
    """Processes' bins as running sums by bin middle: the I/O call time and bytes of any
    window in two binary searches (a bin counted where its middle falls)."""

    def __init__(self, slots: list):
        if not slots:
            self.mid = np.zeros(0)
            self.io = self.nbytes = np.zeros(1)
            return
        mid = np.concatenate([(s[1] << s[0]) + (1 << s[0]) // 2 for s in slots])
        order = np.argsort(mid, kind="stable")
        self.mid = mid[order]
        self.io = np.concatenate([[0.0], np.cumsum(np.concatenate([s[5] for s in slots])[order])])
        self.nbytes = np.concatenate([[0.0], np.cumsum(np.concatenate([s[2] + s[3] for s in slots])[order])])

    def window(self, a: int, b: int) -> tuple[float, float]:
        i, j = np.searchsorted(self.mid, [a, b])
        return float(self.io[j] - self.io[i]), float(self.nbytes[j] - self.nbytes[i])
