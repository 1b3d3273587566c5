"""--max-slices: a budget of slices, so that a huge job's export opens in the Perfetto UI.

The UI holds a few million slices; a job of 10^8 calls needs fewer. Every slice that is long or
rare is kept as it is; the short calls between two long slices of a thread are merged, per name
and file, into one slice that carries their count, bytes and summed time ("pread ×1234", args
`merged`, `call`, `bytes`, `time_us`, `fname`), drawn on a track of their own beside the thread
(`rank 0 · main · pread merged`: merged runs of several names overlap, and a thread's slices
must nest). A run of one call stays the call itself.

What "long" means is chosen for the job: a first pass (`SliceStats`, a file at a time, beside
--max-events's) counts, for every duration threshold T of a log scale (`EDGES`, 2**(1/8) apart),
the slices the export would write: the slices at least T long, the rare ones, and one slice per
run of shorter calls, a run being the calls of one name and file on one thread with no slice of
T or longer between them (a call starts a run when the longest slice since the previous call
of its name and file on its thread, that one included, is T or longer: counted per threshold
as the interval (dur, that longest] of thresholds). The smallest T whose count fits the budget
is taken (`plan`): the export merges no more than it must, and nothing when the job fits.
The write pass (`Merger`) applies the same rule to the same events, so it writes that count.

A name is rare when the job has at most max_slices / RARE_SHARE slices of it (an open, a fork,
a step of a long loop): those slices are always kept (they do not end runs).

With the budget in force, counter tracks are added (`IoCounters`): per process and for the job
(a process of its own, `job (iotrace export)`), read and write bandwidth (MB/s) and operations
per second, per time bin (a power of two of ns, at most COUNTER_BINS over the job), open files
per process, and the events the tracer lost, when it lost some (iotrace_lost, iotrace_end).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import orjson

from .. import _export
from .filters import codes_or_null, phases

# Duration thresholds (ns): 1 ns to about 2**41 ns (37 min), each 2**(1/8) above the last (9%:
# the budget is filled to within about that).
EDGES = np.unique(np.round(2.0 ** (np.arange(0, 8 * 41 + 1) / 8)).astype(np.int64))
NO_MERGE = len(EDGES)  # the index of "no threshold": everything short (T infinite)
NEVER = len(EDGES) + 1  # the longest-slice index of a call whose name and file are new
WIDTH = len(EDGES) + 2  # columns of the per-name tables

DEFAULT_MAX_SLICES = 2_000_000
RARE_SHARE = 1000
COUNTER_BINS = 2048
# tids of the merged tracks: 2**30 + the file's number (14 bits) * 2**14 + n, apart from threads,
# asyncio's virtual tids (2**26 + n) and the merged tracks of the process's other files (exec)
MERGED_TID = 1 << 30


# dur_index of the durations under 131 us (most calls), looked up instead of searched for;
# the table made without a large temporary (a 1 MiB array freed at import raised malloc's mmap
# threshold, and the batches' arrays then grew the heap: +9 MiB at the export's peak)
_SHORT = 1 << 17
_SHORT_INDEX = np.repeat(np.arange(np.count_nonzero(EDGES < _SHORT) + 1, dtype=np.int16),
                         np.diff(np.r_[0, EDGES[EDGES < _SHORT], _SHORT]))


def dur_index(dur: np.ndarray) -> np.ndarray:
    """The number of thresholds at or below each duration: dur < EDGES[j] iff index <= j."""
    out = _SHORT_INDEX[np.clip(dur, 0, _SHORT - 1)]
    long = dur >= _SHORT
    if long.any():
        out[long] = np.searchsorted(EDGES, dur[long], side="right")
    return out


def _ints(cols, name: str, default: int = 0) -> np.ndarray:
    v = cols.ints(name)
    return np.full(cols.rows, default, np.int64) if v is None else v


def take(a: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """a[rows] for increasing positions rows; a itself when they are all of its rows (most
    batches keep every row: no copy of 9M values a pass)."""
    return a if len(rows) == len(a) else a[rows]


def stable_order(keys: np.ndarray) -> np.ndarray:
    """The positions grouped by key, in order within a key (a stable argsort: radix sort when
    the keys fit 16 bits, as a file's name and file keys mostly do)."""
    if len(keys) and 0 <= keys.min() and keys.max() < 1 << 15:
        return np.argsort(keys.astype(np.int16), kind="stable")
    return np.argsort(keys, kind="stable")


def _present(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The distinct values of codes (0 <= codes < size), and each row's index among them (None
    when the values are few enough to index a table by: then use the values themselves)."""
    if size <= max(1 << 16, 4 * len(codes)):
        return np.flatnonzero(np.bincount(codes, minlength=size)), None
    uniq, inv = np.unique(codes, return_inverse=True)
    return uniq, inv.reshape(-1)


def _lookup(codes: np.ndarray, size: int, make) -> np.ndarray:
    """make(value) for each distinct code, spread over the rows."""
    values, inv = _present(codes, size)
    ids = np.array([make(v) for v in values.tolist()], np.int64)
    if inv is not None:
        return ids[inv]
    table = np.zeros(size, np.int64)
    table[values] = ids
    return table[codes]


def tids_of(cols, pid: int) -> np.ndarray:
    """The tid of every row (the writers' rule: an event without one is the main thread's)."""
    tid = cols.ints("tid")
    if tid is None:
        return np.full(cols.rows, pid, np.int64)
    valid = cols.int_valid("tid")
    return tid if valid is None else np.where(valid, tid, pid)


class Keys:
    """A file's (category, name) pairs and (name, file hash) keys as small ints."""

    def __init__(self, most: int | None = None):
        self.most = most  # more keys than this: TooManyKeys, before they are made
        self.names: dict[tuple[str, str], int] = {}
        self.key_list: list[tuple[int, str | None]] = []
        # The key id of (name id, file hash id), -1: none yet; the batch's fhash dictionary as
        # hash ids (a file's batches mostly share one dictionary: made once, not per batch).
        self.hash_ids: dict[str | None, int] = {None: 0}
        self.table = np.full((0, 1), -1, np.int32)
        self.last_hashes: tuple[list, np.ndarray] | None = None

    def of(self, cols, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(name ids, key ids) of these rows."""
        names, cats = cols.dictionary("name"), cols.dictionary("cat")
        nc = take(codes_or_null(cols, "name", len(names)), rows).astype(np.int64)
        cc = take(codes_or_null(cols, "cat", len(cats)), rows).astype(np.int64)

        def name_id(p: int) -> int:
            n, c = divmod(p, len(cats) + 1)
            key = (cats[c] if c < len(cats) else "", names[n] if n < len(names) else "")
            return self.names.setdefault(key, len(self.names))

        name_ids = _lookup(nc * (len(cats) + 1) + cc, (len(names) + 1) * (len(cats) + 1), name_id)
        hashes = cols.dictionary("fhash")
        fc = take(codes_or_null(cols, "fhash", len(hashes)), rows).astype(np.int64)
        if self.last_hashes is None or self.last_hashes[0] != hashes:
            ids = [self.hash_ids.setdefault(h, len(self.hash_ids)) for h in hashes]
            self.last_hashes = (hashes, np.array(ids + [0], np.int64))  # the last: no file
        hash_id = self.last_hashes[1][fc]
        rows_needed, cols_needed = int(name_ids.max()) + 1, len(self.hash_ids)
        if rows_needed > self.table.shape[0] or cols_needed > self.table.shape[1]:
            grown = np.full((max(rows_needed, self.table.shape[0]), max(cols_needed, 2 * self.table.shape[1])),
                            -1, np.int32)
            grown[:self.table.shape[0], :self.table.shape[1]] = self.table
            self.table = grown
        key_ids = self.table[name_ids, hash_id].astype(np.int64)
        missing = key_ids < 0
        if missing.any():
            # new keys numbered in the order of (name id, the hash's code in this batch), as the
            # rows' distinct pairs sorted
            # (a batch's hashes are distinct: distinct (name, code) pairs are distinct keys)
            width = len(hashes) + 1
            n, f = np.divmod(np.unique(name_ids[missing] * width + fc[missing]), width)
            if self.most is not None and len(self.key_list) + len(n) > self.most:
                raise TooManyKeys
            self.table[n, self.last_hashes[1][f]] = np.arange(len(self.key_list), len(self.key_list) + len(n))
            named = list(hashes) + [None]
            self.key_list.extend(zip(n.tolist(), [named[i] for i in f.tolist()]))
            key_ids = self.table[name_ids, hash_id].astype(np.int64)
        return name_ids, key_ids

    def name_list(self) -> list[tuple[str, str]]:
        out = [("", "")] * len(self.names)
        for key, i in self.names.items():
            out[i] = key
        return out


def by_thread(tids: np.ndarray):
    """(tid, indices in order) of each thread among the rows."""
    if not len(tids) or tids.min() == tids.max():  # one thread: most batches
        if len(tids):
            yield int(tids[0]), np.arange(len(tids))
        return
    _u, inv = np.unique(tids, return_inverse=True)
    order = stable_order(inv.reshape(-1))
    cuts = np.flatnonzero(np.diff(tids[order])) + 1
    for seg in np.split(order, cuts):
        if len(seg):
            yield int(tids[seg[0]]), seg


@dataclass
class SliceStats:
    """Pass 1 of the budget for a file (or a job: merged): per (category, name), its slices
    by dur_index (`hist`) and the run starts per threshold as differences (`diff`)."""

    names: list[tuple[str, str]] = field(default_factory=list)
    hist: np.ndarray = field(default_factory=lambda: np.zeros((0, WIDTH), np.int64))
    diff: np.ndarray = field(default_factory=lambda: np.zeros((0, WIDTH), np.int64))
    first_ns: int | None = None
    last_ns: int | None = None
    too_many_keys: bool = False  # a file of more than MAX_KEYS (name, file) pairs: no budget

    def merge(self, other: SliceStats) -> None:
        self.too_many_keys |= other.too_many_keys
        index = {n: i for i, n in enumerate(self.names)}
        rows = []
        for n in other.names:
            if n not in index:
                index[n] = len(self.names)
                self.names.append(n)
            rows.append(index[n])
        grow = len(self.names) - len(self.hist)
        if grow:
            self.hist = np.vstack([self.hist, np.zeros((grow, WIDTH), np.int64)])
            self.diff = np.vstack([self.diff, np.zeros((grow, WIDTH), np.int64)])
        if rows:
            np.add.at(self.hist, np.array(rows), other.hist)
            np.add.at(self.diff, np.array(rows), other.diff)
        for t, pick in ((other.first_ns, min), (other.last_ns, max)):
            if t is not None:
                attr = "first_ns" if pick is min else "last_ns"
                mine = getattr(self, attr)
                setattr(self, attr, t if mine is None else pick(mine, t))

    @property
    def slices(self) -> int:
        return int(self.hist.sum())

    def counts(self) -> np.ndarray:
        """Per name and threshold index (0 .. NO_MERGE): the slices written if not rare."""
        long = self.hist[:, ::-1].cumsum(axis=1)[:, ::-1]  # long[j] = sum(hist[j:])
        kept = np.zeros_like(self.hist)
        kept[:, :-1] = long[:, 1:]  # at threshold j, the slices with dur_index > j
        return (kept + self.diff.cumsum(axis=1))[:, : NO_MERGE + 1]


# Runs are of one call name on one file: a trace of more (name, file) pairs than this (a job
# reading a million files once: 9M pairs, each its own run) is given no budget. Counting them
# held ~1 KiB of Python per pair (10 GiB, 10 min for the million files' export, 2.8 s before).
MAX_KEYS = 1 << 17


class TooManyKeys(Exception):
    """A trace with more (name, file) pairs than MAX_KEYS."""


class StatsPass:
    """SliceStats of one file, a batch of columns at a time."""

    def __init__(self, pid: int):
        self.pid = pid
        self.keys = Keys(MAX_KEYS)
        # per thread: the longest slice since each call's previous call of its key (NEVER: the
        # first), batch after batch
        self.threads: dict[int, _export.LongestSince] = {}
        self.hist = np.zeros((0, WIDTH), np.int64)
        self.diff = np.zeros((0, WIDTH), np.int64)
        self.first_ns: int | None = None
        self.last_ns: int | None = None

    def add(self, cols, rows: np.ndarray) -> None:
        ts_all = _ints(cols, "ts_ns")
        if len(rows):
            t = take(ts_all, rows)
            end = t + take(_ints(cols, "dur_ns"), rows)
            self.first_ns = int(t.min()) if self.first_ns is None else min(self.first_ns, int(t.min()))
            self.last_ns = int(end.max()) if self.last_ns is None else max(self.last_ns, int(end.max()))
        x = rows[take(phases(cols, ("X",)), rows)]
        if not len(x):
            return
        name_ids, key_ids = self.keys.of(cols, x)  # TooManyKeys past MAX_KEYS
        d = dur_index(take(_ints(cols, "dur_ns"), x))
        longest = np.empty(len(x), np.int16)
        for tid, seg in by_thread(take(tids_of(cols, self.pid), x)):
            since = self.threads.get(tid)
            if since is None:
                since = self.threads[tid] = _export.LongestSince(NEVER)
            longest[seg] = since(take(d, seg), take(key_ids, seg))
        grow = len(self.keys.names) - len(self.hist)
        if grow:
            self.hist = np.vstack([self.hist, np.zeros((grow, WIDTH), np.int64)])
            self.diff = np.vstack([self.diff, np.zeros((grow, WIDTH), np.int64)])
        size = len(self.hist) * WIDTH
        self.hist += np.bincount(name_ids * WIDTH + d, minlength=size).reshape(-1, WIDTH)
        runs = longest > d
        starts = np.bincount(name_ids[runs] * WIDTH + d[runs], minlength=size)
        ends = np.bincount(name_ids[runs] * WIDTH + longest[runs], minlength=size)
        self.diff += (starts - ends).reshape(-1, WIDTH)

    def result(self) -> SliceStats:
        return SliceStats(self.keys.name_list(), self.hist, self.diff, self.first_ns, self.last_ns)


@dataclass
class Plan:
    """The budget as chosen for the job (pass 1), what every file's Merger applies."""

    max_slices: int
    slices: int  # in the job (after the filters)
    expected: int  # written
    threshold: int = NO_MERGE  # EDGES index: calls shorter than EDGES[threshold] merge
    rare: frozenset = frozenset()  # (cat, name) always kept
    bin_ns: int = 1  # counter bins
    merging: bool = False
    first_ns: int = 0  # the first event's time (where the budget's note goes)

    @property
    def threshold_ns(self) -> int | None:
        return int(EDGES[self.threshold]) if self.threshold < NO_MERGE else None

    @property
    def met(self) -> bool:
        return self.expected <= self.max_slices

    def describe(self) -> dict:
        """The plan as the trace's metadata and the command's output state it."""
        return {"max_slices": self.max_slices, "slices": self.slices, "written": self.expected,
                "planned": self.expected,
                "merging": self.merging, "met": self.met,
                "threshold_ns": self.threshold_ns if self.merging else None,
                "rare_names": sorted(f"{c}:{n}" for c, n in self.rare) if self.merging else [],
                "counter_bin_ns": self.bin_ns if self.merging else None}


def plan(stats: SliceStats, max_slices: int) -> Plan:
    """The smallest threshold whose slices fit the budget (or none: nothing to merge)."""
    total = stats.slices
    if total <= max_slices:
        return Plan(max_slices, total, total)
    per_name = stats.hist.sum(axis=1)
    rare = per_name <= max_slices // RARE_SHARE
    counts = stats.counts()
    written = per_name[rare].sum() + counts[~rare].sum(axis=0)  # per threshold
    fits = np.flatnonzero(written <= max_slices)
    j = int(fits[0]) if len(fits) else int(np.argmin(written))
    span = (stats.last_ns or 0) - (stats.first_ns or 0)
    bin_ns = 1
    while span // bin_ns > COUNTER_BINS:
        bin_ns <<= 1
    return Plan(max_slices, total, int(written[j]), j,
                frozenset(n for n, r in zip(stats.names, rare.tolist()) if r), bin_ns, True,
                stats.first_ns or 0)


# --- the write pass ---------------------------------------------------------------------------


class _Run:
    """An open run: the calls of one key in its thread's current epoch so far."""

    __slots__ = ("key", "count", "bytes", "dur", "start", "end", "row", "saved")

    def __init__(self, key, count, nbytes, dur, start, end, row):
        self.key, self.count, self.bytes, self.dur = key, count, nbytes, dur
        self.start, self.end, self.row = start, end, row  # row: its only call's, in this batch
        self.saved = None  # its only call, kept as a one-row batch past its own


class _Thread:
    def __init__(self):
        self.epoch = 0  # slices of the threshold or longer so far
        self.runs: dict[int, _Run] = {}  # the open runs (all of the current epoch)


@dataclass
class MergeCounts:
    calls: int = 0  # calls merged
    slices: int = 0  # merged slices written
    singles: int = 0  # runs of one call (written as they are)


_RUN_FIELDS = ("tid", "key", "count", "bytes", "dur", "start", "end")


class Merger:
    """Pass 3 of a file with the budget in force: which rows are written as they are, and the
    merged slices as batches of their own (on tracks of their own). Runs are found a thread
    and a batch at a time, with numpy; only the runs still open at a batch's end (one per key
    at most) are objects."""

    def __init__(self, plan: Plan, pid: int, bytes_names: frozenset, file_index: int = 0,
                 typed_args: bool = False):
        self.plan, self.pid = plan, pid
        self.typed_args = typed_args  # the merged slices' args as columns (.pftrace), not text
        self.track_base = MERGED_TID | (file_index & 0x3FFF) << 14
        self.keys = Keys()
        self.threads: dict[int, _Thread] = {}
        self.tracks: dict[tuple[int, int, int], int] = {}  # (tid, name id, lane) -> track tid
        self.lane_ends: dict[tuple[int, int], list[int]] = {}  # (tid, name id) -> lane ends
        self.bytes_names = bytes_names
        self.rare_of: list[bool] = []
        self.bytes_of: list[bool] = []
        self.counts = MergeCounts()
        self.out: list[list] = [[] for _ in _RUN_FIELDS]  # closed runs of two calls or more
        self.singles: list = []  # closed runs of one call saved from earlier batches

    def _names(self) -> tuple[np.ndarray, np.ndarray]:
        names = self.keys.name_list()
        for n in names[len(self.rare_of):]:
            self.rare_of.append(n in self.plan.rare)
            self.bytes_of.append(n[1] in self.bytes_names)
        return np.array(self.rare_of, bool), np.array(self.bytes_of, bool)

    def batch(self, cols, batch, rows: np.ndarray) -> np.ndarray:
        """The rows of a batch to write as they are (the others are merged, or held in an open
        run); the merged slices closed so far are taken with take_batches()."""
        is_x = take(phases(cols, ("X",)), rows)
        x = rows[is_x]
        if not len(x):
            return rows
        name_ids, key_ids = self.keys.of(cols, x)
        rare, counted = self._names()
        d = dur_index(take(_ints(cols, "dur_ns"), x))
        long = d > self.plan.threshold
        short = ~long & ~rare[name_ids]
        ts = take(_ints(cols, "ts_ns"), x)
        dur = take(_ints(cols, "dur_ns"), x)
        nbytes = moved_bytes(cols, x) * counted[name_ids]
        write = ~short
        save: list[_Run] = []
        for tid, seg in by_thread(take(tids_of(cols, self.pid), x)):
            th = self.threads.setdefault(tid, _Thread())
            seg_long = take(long, seg)
            later = np.cumsum(seg_long) - seg_long  # long slices before each call, in the batch
            final = int(seg_long.sum())
            sel = take(short, seg)
            members = seg[sel]
            if not len(members):
                if final:
                    self._close_open(tid, th)
                th.epoch += final
                continue
            # groups: a key's calls between two long slices (by key, then in order: by epoch)
            member_keys = key_ids[members]
            order = stable_order(member_keys)
            mo = members[order]  # each column indexed once, not through members and then order
            gk, ge = member_keys[order], later[sel][order]
            cuts = np.flatnonzero(np.r_[True, (gk[1:] != gk[:-1]) | (ge[1:] != ge[:-1])])
            count = np.diff(np.r_[cuts, len(order)])
            first = order[cuts]
            uniq = gk[cuts] << 32 | ge[cuts]  # increasing
            mts, mdur = ts[mo], dur[mo]
            g = dict(key=gk[cuts], epoch=ge[cuts], count=count,
                     bytes=np.add.reduceat(nbytes[mo], cuts),
                     dur=np.add.reduceat(mdur, cuts),
                     start=np.minimum.reduceat(mts, cuts),
                     end=np.maximum.reduceat(mts + mdur, cuts),
                     row=x[mo[cuts]])
            # the open runs go on with this batch's calls of their key before its first long slice
            cont = np.zeros(len(uniq), bool)
            if th.runs:  # looked up at once (hundreds of open runs: one per name and file)
                open_keys = np.fromiter(th.runs, np.int64, len(th.runs))
                at = np.minimum(np.searchsorted(uniq, open_keys << 32), len(uniq) - 1)
                hit = uniq[at] == open_keys << 32
                at = at[hit]
                cont[at] = True
                for key, c, b, du, st, en in zip(open_keys[hit].tolist(), count[at].tolist(), g["bytes"][at].tolist(),
                                                 g["dur"][at].tolist(), g["start"][at].tolist(), g["end"][at].tolist()):
                    run = th.runs[key]
                    run.count += c
                    run.bytes += b
                    run.dur += du
                    run.start, run.end = min(run.start, st), max(run.end, en)
                    run.row, run.saved = -1, None
            if final:
                self._close_open(tid, th)
            closed = (g["epoch"] < final) & ~cont
            one = closed & (count == 1)
            write[members[first[one]]] = True
            self.counts.singles += int(one.sum())
            many = closed & (count > 1)
            if many.any():
                self._add_out(tid, {k: v[many] for k, v in g.items()})
            for i in np.flatnonzero((g["epoch"] == final) & ~cont).tolist():
                run = _Run(int(g["key"][i]), int(count[i]), int(g["bytes"][i]), int(g["dur"][i]),
                           int(g["start"][i]), int(g["end"][i]), int(g["row"][i]) if count[i] == 1 else -1)
                th.runs[run.key] = run
                if run.row >= 0:
                    save.append(run)
            th.epoch += final
        if save:
            self._save(batch, cols, save)
        keep = np.ones(len(rows), bool)
        keep[np.flatnonzero(is_x)[~write]] = False
        return rows[keep]

    def _add_out(self, tid: int, g: dict) -> None:
        n = len(g["key"])
        self.counts.calls += int(g["count"].sum())
        self.counts.slices += n
        for out, f in zip(self.out, _RUN_FIELDS):
            out.append(np.full(n, tid, np.int64) if f == "tid" else np.asarray(g[f], np.int64))

    def _close_open(self, tid: int, th: _Thread) -> None:
        """The thread's open runs end (a long slice came, or the file)."""
        runs = list(th.runs.values())
        th.runs = {}
        many = [r for r in runs if r.count > 1]
        for r in runs:
            if r.count == 1:
                self.counts.singles += 1
                if r.saved is not None:
                    self.singles.append(r.saved)
        if many:
            self._add_out(tid, {f: np.array([getattr(r, f) for r in many], np.int64)
                                for f in _RUN_FIELDS[1:]})

    def _save(self, batch, cols, runs: list[_Run]) -> None:
        """Open runs of one call of this batch: the call kept as a one-row batch of its own
        (with the times moved onto the job clock as the columns have them)."""
        import pyarrow as pa

        rows = np.array([r.row for r in runs], np.int64)
        taken = batch.take(pa.array(rows))
        for col in ("ts_ns", "dur_ns"):
            v = cols.ints(col)
            i = taken.schema.get_field_index(col)
            if v is not None and i >= 0:
                taken = taken.set_column(i, col, pa.array(v[rows], pa.int64()))
        for i, run in enumerate(runs):
            run.saved = taken.slice(i, 1)
            run.row = -1

    def finish(self) -> None:
        """The end of the file: every open run closes."""
        for tid, th in self.threads.items():
            self._close_open(tid, th)

    def take_batches(self, pid: int) -> list:
        """The runs of one call saved from earlier batches, and the merged slices closed so far
        as one batch (on their tracks); then forgotten."""
        out = list(self.singles)
        self.singles = []
        if self.out[0]:
            runs = {f: np.concatenate(o) for f, o in zip(_RUN_FIELDS, self.out)}
            self.out = [[] for _ in _RUN_FIELDS]
            out.append(self._merged_batch(pid, runs))
        return out

    def _lanes(self, runs: dict) -> np.ndarray:
        """The track of each run: the first lane of its thread and call free at its start (runs
        of one name on several files overlap); runs in order of start."""
        key_names = np.fromiter((n for n, _f in self.keys.key_list), np.int64, len(self.keys.key_list))
        names = key_names[runs["key"]]
        tracks = np.empty(len(names), np.int64)
        order = np.lexsort((runs["start"], names, runs["tid"]))
        tid, name, start, end = runs["tid"][order], names[order], runs["start"][order], runs["end"][order]
        cuts = np.flatnonzero((np.diff(tid) != 0) | (np.diff(name) != 0)) + 1
        for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(order)].tolist()):
            t, n = int(tid[lo]), int(name[lo])
            lanes, self.lane_ends[(t, n)] = _export.first_free_lanes(
                start[lo:hi], end[lo:hi], self.lane_ends.get((t, n), []))
            for lane in np.unique(lanes).tolist():
                if (t, n, lane) not in self.tracks:
                    self.tracks[(t, n, lane)] = self.track_base + (len(self.tracks) & 0x3FFF)
            track_of = np.array([self.tracks.get((t, n, k), 0) for k in range(int(lanes.max()) + 1)], np.int64)
            tracks[order[lo:hi]] = track_of[lanes]
        return tracks

    def _merged_batch(self, pid: int, runs: dict):
        """The merged slices as a batch: `pread ×1234`, args {merged, call, bytes (of the calls
        that move data), time_us, fhash}: the JSON written by a kernel (_export.merged_args),
        or, typed_args, the columns the .pftrace writer lists them from (merged_calls,
        merged_call, bytes, merged_ns, fhash: 1.8 us a slice less than parsing the text)."""
        import pyarrow as pa

        tracks = self._lanes(runs)
        order = np.argsort(runs["start"], kind="stable")
        runs = {f: v[order] for f, v in runs.items()}
        n = len(order)
        names = self.keys.name_list()
        key_list = self.keys.key_list
        name_of_key = np.fromiter((k for k, _f in key_list), np.int64, len(key_list))
        name_id = name_of_key[runs["key"]]
        cat = pa.DictionaryArray.from_arrays(pa.array(name_id.astype(np.int32)),
                                             pa.array([c for c, _nm in names], pa.string()))
        if self.typed_args:
            args = self._typed_args(runs, name_id, names, key_list)
        else:
            offsets, data = _export.merged_args(runs["count"], runs["key"], name_of_key, runs["bytes"],
                                                runs["dur"], [nm for _c, nm in names], self.bytes_of,
                                                [f for _n, f in key_list])
            args = {"args": pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                                   pa.py_buffer(data)])}
        # `pread ×1234`: one string per distinct (call, count), not per slice
        span = int(runs["count"].max(initial=0)) + 1
        pairs, which = np.unique(name_id * span + runs["count"], return_inverse=True)
        label = pa.DictionaryArray.from_arrays(
            pa.array(which.reshape(-1).astype(np.int32)),
            pa.array([f"{names[p // span][1]} ×{p % span}" for p in pairs.tolist()], pa.string()))
        return pa.record_batch({
            "ph": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array(["X"])),
            "name": label,
            "cat": cat,
            "pid": pa.array(np.full(n, pid, np.int64)),
            "tid": pa.array(tracks[order]),
            "ts_ns": pa.array(runs["start"]),
            "dur_ns": pa.array(runs["end"] - runs["start"]),
            **args,
        })

    def _typed_args(self, runs: dict, name_id: np.ndarray, names: list, key_list: list) -> dict:
        """The merged slices' args as columns: the calls merged, the call, the bytes of the
        calls that move data, the summed ns, the file's hash (a dictionary of the runs' keys)."""
        import pyarrow as pa

        keys, key_code = np.unique(runs["key"], return_inverse=True)
        fhashes = [key_list[k][1] for k in keys.tolist()]
        no_file = np.array([f is None for f in fhashes], bool)[key_code.reshape(-1)]
        return {
            "merged_calls": pa.array(runs["count"]),
            "merged_call": pa.DictionaryArray.from_arrays(pa.array(name_id.astype(np.int32)),
                                                          pa.array([nm for _c, nm in names], pa.string())),
            "bytes": pa.array(runs["bytes"], pa.int64(), mask=~np.array(self.bytes_of, bool)[name_id]),
            "merged_ns": pa.array(runs["dur"]),
            "fhash": pa.DictionaryArray.from_arrays(
                pa.array(key_code.reshape(-1).astype(np.int32), mask=no_file),
                pa.array([f or "" for f in fhashes], pa.string())),
        }

    def track_labels(self, thread_label) -> dict[int, str]:
        """The merged tracks' names: `<thread> · <call> merged` (and the lane, from the second)."""
        names = self.keys.name_list()
        return {track: f"{thread_label(tid)} · {names[name_id][1]} merged" + (f" {lane + 1}" if lane else "")
                for (tid, name_id, lane), track in self.tracks.items()}


def _dict_array(values: list[str]):
    import pyarrow as pa

    uniq = sorted(set(values))
    index = {v: i for i, v in enumerate(uniq)}
    return pa.DictionaryArray.from_arrays(pa.array(np.array([index[v] for v in values], np.int32)),
                                          pa.array(uniq, pa.string()))


def moved_bytes(cols, rows: np.ndarray) -> np.ndarray:
    """Bytes a data call moved (the analyzer's rule): `bytes` if present, else `ret` when > 0."""
    nbytes = cols.ints("bytes")
    ret = cols.ints("ret")
    r = np.zeros(len(rows), np.int64) if ret is None else np.maximum(take(ret, rows), 0)
    if ret is not None and (valid := cols.int_valid("ret")) is not None:
        r = np.where(take(valid, rows), r, 0)
    if nbytes is None:
        return r
    valid = cols.int_valid("bytes")
    return take(nbytes, rows) if valid is None else np.where(take(valid, rows), take(nbytes, rows), r)


# --- counter tracks ---------------------------------------------------------------------------


@dataclass
class IoCounters:
    """A file's (or the job's) read and write bytes and calls per time bin, open files at the end
    of each bin, and the events the tracer lost (time, total so far)."""

    bin_ns: int
    bins: dict[int, np.ndarray] = field(default_factory=dict)  # bin -> [rbytes, wbytes, rops, wops]
    open_files: dict[int, int] = field(default_factory=dict)  # bin -> open at its end
    lost: list[tuple[int, int]] = field(default_factory=list)
    _open: int = 0
    _opens_seen: bool = False

    def add(self, cols, rows: np.ndarray, reads: frozenset, writes: frozenset,
            opens: frozenset, closes: frozenset) -> None:
        x = rows[take(phases(cols, ("X",)), rows)]
        if not len(x):
            return
        names = cols.dictionary("name")
        codes = take(codes_or_null(cols, "name", len(names)), x)
        kind = np.array([(n in reads) + 2 * (n in writes) + 4 * (n in opens) + 8 * (n in closes)
                         for n in names] + [0], np.int8)[codes]
        if not kind.any():
            return
        ts = take(_ints(cols, "ts_ns"), x)
        b = ts // self.bin_ns
        nbytes = moved_bytes(cols, x)
        reading, writing = kind == 1, kind == 2
        for col, sel, weights in ((0, reading, nbytes), (1, writing, nbytes),
                                  (2, reading, None), (3, writing, None)):
            if col in (0, 2) and not reading.any() or col in (1, 3) and not writing.any():
                continue
            base = int(b[sel].min())
            keys, inv = _present(b[sel] - base, int(b[sel].max()) - base + 1)
            inv = b[sel] - base if inv is None else inv
            sums = np.bincount(inv, None if weights is None else weights[sel].astype(np.float64))
            if len(sums) > len(keys):
                sums = sums[keys]
            for k, v in zip((keys + base).tolist(), sums.tolist()):
                self.bins.setdefault(k, np.zeros(4))[col] += v
        oc = (kind == 4) | (kind == 8)
        if oc.any():
            self._opens_seen = True
            failed = np.zeros(int(oc.sum()), bool)  # a call with errno failed (the analyzer's rule)
            if cols.ints("errno") is not None:
                valid = cols.int_valid("errno")
                failed |= True if valid is None else valid[x][oc]
            step = np.where(kind[oc] == 4, 1, -1) * ~failed
            level = self._open + np.cumsum(step)
            ends = (ts + take(_ints(cols, "dur_ns"), x))[oc] // self.bin_ns
            last = np.append(ends[1:] != ends[:-1], True)
            for k, v in zip(ends[last].tolist(), level[last].tolist()):
                self.open_files[k] = v
            self._open = int(level[-1])

    def add_lost(self, ts_ns: int, events: int, total: bool = False) -> None:
        """`events` more lost at ts_ns (total: the file's total so far, as iotrace_end says)."""
        before = self.lost[-1][1] if self.lost else 0
        now = max(before, events) if total else before + events
        if now > before:
            self.lost.append((ts_ns, now))

    def merge(self, other: IoCounters) -> None:
        for k, v in other.bins.items():
            self.bins.setdefault(k, np.zeros(4))
            self.bins[k] += v

    def batch(self, pid: int, tid: int):
        """The counter events, as a batch (None: none): the bins with calls and the empty
        bin after each (the tracks fall back to 0), open files, lost events."""
        import pyarrow as pa

        ts, args = [], []
        scale = 1e9 / self.bin_ns
        keys = sorted(self.bins)
        for i, k in enumerate(keys):
            rb, wb, ro, wo = self.bins[k].tolist()
            ts.append(k * self.bin_ns)
            args.append({"read MB/s": rb * scale / 1e6, "write MB/s": wb * scale / 1e6,
                         "read ops/s": ro * scale, "write ops/s": wo * scale})
            if i + 1 == len(keys) or keys[i + 1] != k + 1:
                ts.append((k + 1) * self.bin_ns)
                args.append({"read MB/s": 0.0, "write MB/s": 0.0, "read ops/s": 0.0,
                             "write ops/s": 0.0})
        names = ["io"] * len(ts)
        if self._opens_seen:
            for k in sorted(self.open_files):
                ts.append((k + 1) * self.bin_ns)
                args.append({"open": self.open_files[k]})
                names.append("files")
        for t, total in self.lost:
            ts.append(t)
            args.append({"lost events": total})
            names.append("iotrace")
        if not ts:
            return None
        order = np.argsort(np.array(ts, np.int64), kind="stable")
        n = len(ts)
        return pa.record_batch({
            "ph": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array(["C"])),
            "name": _dict_array([names[i] for i in order]),
            "pid": pa.array(np.full(n, pid, np.int64)),
            "tid": pa.array(np.full(n, tid, np.int64)),
            "ts_ns": pa.array(np.array(ts, np.int64)[order]),
            "args": pa.array([orjson.dumps(args[i]).decode() for i in order], pa.string()),
        })
