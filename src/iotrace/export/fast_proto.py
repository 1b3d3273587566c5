"""The .pftrace export of one file, a block of lines at a time (numba-compiled).

proto_out.ProtoPart encodes one event dict at a time: fine for the rare
events, too slow for millions of I/O calls. Here the analyzer's byte scanner
(iotrace_analyzer.scan) turns a block of lines into columns, and one compiled
function writes the TrackEvent packets of the whole block. The output is the
same as ProtoPart's, packet for packet in the same order:

* the tracer's own X lines (fixed layout, I/O args only) are encoded from the
  scanner's columns: interned name/category, debug annotations for the I/O
  args in their order (fd, fd2, size, offset, ret, bytes, errno, flags, mode),
  then `fname`/`fname2` (the restored file names) like ProtoPart after
  merge._restore_names;
* every other line (metadata, instants, counters, Python events with free-form
  args, forks, anything the scanner flags) is parsed with orjson and encoded by
  ProtoPart's own methods into a small blob that the compiled writer places at
  its position in the line order;
* the 1-ns shift of a slice starting with an earlier-written child (ProtoPart._begin)
  runs in the compiled writer on a hash table of the recent starts per thread
  (RECENT_STARTS, evicted oldest first like ProtoPart's dict);
* flows (merge._Flows) run as the same state machine over the block's slices;
  the slices it holds back at the end of a block are carried to the next as
  parsed dicts, and written at the end of the file with their arrows;
* the per-event filters (--cat, --name, --from/--to, --min-dur) drop a scanned
  row before anything sees it, like merge.export_file drops the event: its
  category and name are matched once per distinct string of the block's pool,
  its times tested as the floats orjson would parse (EventFilter.keeps_slice_times);
  the other rows go through EventFilter.keeps itself. A dropped event reaches
  neither the flows, nor the 1-ns shift's table, nor the interning;
* a scanned row whose ts or dur has more than three decimals (the scanner drops
  the digits past the ns; ProtoPart rounds) is handled as an other line.

Python therefore touches blocks and the few rare events, never the common ones.
Without numba, merge.py uses ProtoPart alone.
"""

from __future__ import annotations

import numpy as np
import orjson
from numba import njit

from iotrace_analyzer import scan

from . import proto_out
from .proto_out import RECENT_STARTS, ProtoPart

BLOCK_BYTES = 2 << 20  # decompressed text scanned at a time
BATCH_BYTES = 256 << 10  # raw packet bytes per compressed_packets
ROW_BOUND = 400  # bytes of output an event can take, its blob aside
NONE = -(1 << 62)  # no row (row refs: j >= 0 a scanned row, ~k a special row)
INT_KEYS = scan.IO_KEYS[scan.N_STR:]  # fd, fd2, size, ... (ivals rows 4..)
FNAME_KEYS = ("fname", "fname2")
KIND_SLICE, KIND_INSTANT, KIND_PRE = 0, 1, 2
FORK_NAMES = frozenset(("fork", "vfork"))
TIMED = frozenset("XiIC")


# --------------------------------------------------------------------------- compiled


@njit(cache=True, nogil=True)
def _varint(out, p, v):
    u = np.uint64(v)
    while u >= np.uint64(0x80):
        out[p] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        p += 1
    out[p] = np.uint8(u)
    return p + 1


@njit(cache=True, nogil=True)
def _vlen(v):
    u = np.uint64(v)
    n = 1
    while u >= np.uint64(0x80):
        u >>= np.uint64(7)
        n += 1
    return n


@njit(cache=True, nogil=True)
def _copy(out, p, src, a, n):
    for i in range(n):
        out[p + i] = src[a + i]
    return p + n


@njit(cache=True, nogil=True)
def _hash(thr, ts, mask):
    h = np.uint64(ts) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(thr) * np.uint64(0xC2B2AE3D27D4EB4F)
    h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(mask))


@njit(cache=True, nogil=True)
def _ht_find(slots, e_thr, e_ts, thr, ts):
    """Slot of (thr, ts), or -(empty slot)-1 where it would go."""
    mask = slots.shape[0] - 1
    i = _hash(thr, ts, mask)
    while True:
        e = slots[i]
        if e < 0:
            return -i - 1
        if e_ts[e] == ts and e_thr[e] == thr:
            return i
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def _ht_delete(slots, e_thr, e_ts, i):
    """Remove slot i (linear probing, backward shift)."""
    mask = slots.shape[0] - 1
    slots[i] = -1
    j = i
    while True:
        j = (j + 1) & mask
        e = slots[j]
        if e < 0:
            return
        k = _hash(e_thr[e], e_ts[e], mask)
        # move e back to i unless its home k lies cyclically in (i, j]
        if i <= j:
            stay = i < k <= j
        else:
            stay = k > i or k <= j
        if not stay:
            slots[i] = e
            slots[j] = -1
            i = j


@njit(cache=True, nogil=True)
def _rehash(slots, e_thr, e_ts, old):
    mask = slots.shape[0] - 1
    for i in range(old.shape[0]):
        e = old[i]
        if e >= 0:
            k = _hash(e_thr[e], e_ts[e], mask)
            while slots[k] >= 0:
                k = (k + 1) & mask
            slots[k] = e


@njit(cache=True, nogil=True)
def _begin(thr, ts, dur, slots, e_thr, e_ts, e_dur, e_next, t_head, t_tail, t_count, meta):
    """ProtoPart._begin: per thread, a dict of the last RECENT_STARTS starts -> dur.
    meta: 0 free list head, 1 live entries, 2 next unused entry."""
    i = _ht_find(slots, e_thr, e_ts, thr, ts)
    if i >= 0:
        e = slots[i]
        if e_dur[e] <= dur:
            return ts - 1
        e_dur[e] = dur
        return ts
    e = meta[0]
    if e >= 0:
        meta[0] = e_next[e]
    else:
        e = meta[2]
        meta[2] += 1
    e_thr[e] = thr
    e_ts[e] = ts
    e_dur[e] = dur
    e_next[e] = -1
    slots[-i - 1] = e
    if t_tail[thr] >= 0:
        e_next[t_tail[thr]] = e
    else:
        t_head[thr] = e
    t_tail[thr] = e
    t_count[thr] += 1
    meta[1] += 1
    if t_count[thr] > RECENT_STARTS:
        old = t_head[thr]
        t_head[thr] = e_next[old]
        _ht_delete(slots, e_thr, e_ts, _ht_find(slots, e_thr, e_ts, thr, e_ts[old]))
        e_next[old] = meta[0]
        meta[0] = old
        t_count[thr] -= 1
        meta[1] -= 1
    return ts


@njit(cache=True, nogil=True)
def _decimals(buf, p):
    """(index after the number at p, how many decimals it has)."""
    if buf[p] == 45:  # -
        p += 1
    while 48 <= buf[p] <= 57:
        p += 1
    k = 0
    if buf[p] == 46:  # .
        p += 1
        while 48 <= buf[p] <= 57:
            p += 1
            k += 1
    return p, k


@njit(cache=True, nogil=True)
def _past_ns(buf, starts, out):
    """out[j]: the scanned line at starts[j] has a ts or dur with more than three
    decimals. Its layout is the scanner's: `{"ph":"X","name":"N","cat":"C","pid":P,
    "tid":T,"ts":TS,"dur":D,...` where N and C hold no quote."""
    for j in range(starts.shape[0]):
        p = starts[j]
        while buf[p] != 123:  # `{` (a line may start with spaces or `[`)
            p += 1
        p += 18  # {"ph":"X","name":"
        while buf[p] != 34:
            p += 1
        p += 9  # ","cat":"
        while buf[p] != 34:
            p += 1
        p, _ = _decimals(buf, p + 8)  # ","pid":
        p, _ = _decimals(buf, p + 7)  # ,"tid":
        p, k = _decimals(buf, p + 6)  # ,"ts":
        _, k2 = _decimals(buf, p + 7)  # ,"dur":
        out[j] = k > 3 or k2 > 3


_EXACT_NS = 1 << 53  # below it, int64 -> float64 is exact


def _us(ns: np.ndarray) -> np.ndarray:
    """Integer ns as the float µs that orjson parses from the line's decimal text
    (both are ns / 1000 rounded once): numpy's division where the ns convert to
    float64 exactly, Python's correctly rounded int / int above (hosts up for more
    than 104 days)."""
    us = ns / 1000.0
    big = np.flatnonzero(np.abs(ns) >= _EXACT_NS)
    if len(big):
        us[big] = [v / 1000 for v in ns[big].tolist()]
    return us


_KEY_NAMES = np.zeros((len(scan.IO_KEYS), 8), np.uint8)
_KEY_LENS = np.zeros(len(scan.IO_KEYS), np.int64)
for _k, _name in enumerate(scan.IO_KEYS):
    _KEY_NAMES[_k, : len(_name)] = np.frombuffer(_name.encode(), np.uint8)
    _KEY_LENS[_k] = len(_name)
_ARGS = np.frombuffer(b'"args":{', np.uint8).copy()


@njit(cache=True, nogil=True)
def _arg_orders(buf, starts, rows, names, lens, lit, orders):
    """The order of the I/O keys in each scanned line (4 bits a key, first key lowest,
    key id + 1; 0 ends): the scanner keeps values, not their order, and the
    annotations follow the order of the line, as orjson's dict does."""
    for r in range(rows.shape[0]):
        j = rows[r]
        p = starts[j]
        # the args object follows the fixed fields: find `"args":{`
        while True:
            ok = True
            for k in range(lit.shape[0]):
                if buf[p + k] != lit[k]:
                    ok = False
                    break
            if ok:
                break
            p += 1
        p += lit.shape[0]
        code = 0
        shift = 0
        seen = 0
        while buf[p] == 34:  # a key
            a = p + 1
            b = a
            while buf[b] != 34:
                b += 1
            key = -1
            for k in range(lens.shape[0]):
                if lens[k] == b - a:
                    same = True
                    for m in range(b - a):
                        if buf[a + m] != names[k, m]:
                            same = False
                            break
                    if same:
                        key = k
                        break
            if not seen & (1 << key):  # a repeated key keeps its first place (a dict)
                seen |= 1 << key
                code |= (key + 1) << shift
                shift += 4
            p = b + 2  # after `":`
            if buf[p] == 34:
                p += 1
                while buf[p] != 34:
                    p += 1
                p += 1
            else:
                while buf[p] != 44 and buf[p] != 125:
                    p += 1
            if buf[p] == 44:
                p += 1
        orders[j] = code


@njit(cache=True, nogil=True)
def _release(x, order, k, best_ref, first):
    if x == first[0]:
        return k
    for b in best_ref:
        if b == x:
            return k
    order[k] = x
    return k + 1


@njit(cache=True, nogil=True)
def _flow_order(lin, isx, lts, starts, best_ref, best_ts, first, flow_in, order):
    """merge._Flows.slice over a block's rows in line order: the order they are
    written in, candidates for an arrow held back. first: [row, ts]."""
    k = 0
    ns = starts.shape[0]
    for i in range(lin.shape[0]):
        ref = lin[i]
        if not isx[i]:
            order[k] = ref
            k += 1
            continue
        ts = lts[i]
        held = False
        if ns:
            j = np.searchsorted(starts, ts)
            while j < ns:
                old = best_ref[j]
                if old != NONE and best_ts[j] >= ts:
                    break
                best_ref[j] = ref
                best_ts[j] = ts
                held = True
                if old != NONE:
                    k = _release(old, order, k, best_ref, first)
                j += 1
        if flow_in:
            if first[0] == NONE or ts < first[1]:
                old = first[0]
                first[0] = ref
                first[1] = ts
                held = True
                if old != NONE:
                    k = _release(old, order, k, best_ref, first)
        if not held:
            order[k] = ref
            k += 1
    return k


@njit(cache=True, nogil=True)
def _encode(order, codes, ivals, present, korder, fthr, pool_name, pool_cat, pool_val, arg_iid,
            s_kind, s_ts, s_dur, s_thr, s_name, s_cat, s_boff, s_blen, blob,
            thr_uuid, seq, interned, flags,
            slots, e_thr, e_ts, e_dur, e_next, t_head, t_tail, t_count, meta,
            out, cuts, batch):
    """The packets of the rows in `order`, as ProtoPart.event writes them.
    Returns (bytes written, cut points written): a cut after every ~batch bytes."""
    p = 0
    n_cuts = 0
    last_cut = 0
    te = np.empty(512 + blob.shape[0], np.uint8)
    for r in range(order.shape[0]):
        ref = order[r]
        if ref >= 0:
            kind = KIND_SLICE
            ts = ivals[2, ref]
            dur = ivals[3, ref]
            thr = fthr[ref]
            name = pool_name[codes[0, ref]]
            cat = pool_cat[codes[1, ref]]
        else:
            k = ~ref
            kind = s_kind[k]
            ts = s_ts[k]
            dur = s_dur[k]
            thr = s_thr[k]
            name = s_name[k]
            cat = s_cat[k]
        # the TrackEvent
        q = 0
        if kind == KIND_PRE:
            q = _copy(te, 0, blob, s_boff[~ref], s_blen[~ref])
        else:
            te[0] = 0x48  # type
            te[1] = 1 if kind == KIND_SLICE else 3
            te[2] = 0x58  # track_uuid
            q = _varint(te, 3, thr_uuid[thr])
            te[q] = 0x50  # name_iid
            q = _varint(te, q + 1, name)
            te[q] = 0x18  # category_iids
            q = _varint(te, q + 1, cat)
            if ref >= 0:
                m = present[ref]
                code = korder[ref]
                while code:
                    a = (code & 15) - 1
                    code >>= 4
                    if a >= 2:
                        v = ivals[a + 2, ref]
                        iid = arg_iid[a]
                        te[q] = 0x22
                        te[q + 1] = 2 + _vlen(iid) + _vlen(v)
                        te[q + 2] = 0x08
                        q = _varint(te, q + 3, iid)
                        te[q] = 0x20
                        q = _varint(te, q + 1, v)
                for a in range(2):
                    if m & (1 << a):
                        iid = arg_iid[a]
                        v = pool_val[codes[2 + a, ref]]
                        te[q] = 0x22
                        te[q + 1] = 3 + _vlen(iid) + _vlen(v)
                        te[q + 2] = 0x08
                        q = _varint(te, q + 3, iid)
                        te[q] = 0x88
                        te[q + 1] = 0x01
                        q = _varint(te, q + 2, v)
            else:
                q = _copy(te, q, blob, s_boff[~ref], s_blen[~ref])
        end_ts = ts + dur
        if kind == KIND_SLICE:
            ts = _begin(thr, ts, dur, slots, e_thr, e_ts, e_dur, e_next, t_head, t_tail,
                        t_count, meta)
        # the packet: timestamp, sequence, [interned data], track event, [flags]
        body = 1 + _vlen(ts) + seq.shape[0] + 1 + _vlen(q) + q
        ilen = 0
        if meta[3] == 0 and interned.shape[0]:
            ilen = interned.shape[0]  # the whole field, tag and length included
            body += ilen
        if meta[4] == 0:
            body += flags.shape[0]
        out[p] = 0x0A
        p = _varint(out, p + 1, body)
        out[p] = 0x40
        p = _varint(out, p + 1, ts)
        p = _copy(out, p, seq, 0, seq.shape[0])
        if ilen:
            p = _copy(out, p, interned, 0, ilen)
        meta[3] = 1
        out[p] = 0x5A
        p = _varint(out, p + 1, q)
        p = _copy(out, p, te, 0, q)
        if meta[4] == 0:
            p = _copy(out, p, flags, 0, flags.shape[0])
            meta[4] = 1
        if kind == KIND_SLICE:  # SLICE_END
            u = thr_uuid[thr]
            tlen = 3 + _vlen(u)
            body = 1 + _vlen(end_ts) + seq.shape[0] + 2 + tlen
            out[p] = 0x0A
            p = _varint(out, p + 1, body)
            out[p] = 0x40
            p = _varint(out, p + 1, end_ts)
            p = _copy(out, p, seq, 0, seq.shape[0])
            out[p] = 0x5A
            out[p + 1] = tlen
            out[p + 2] = 0x48
            out[p + 3] = 2
            out[p + 4] = 0x58
            p = _varint(out, p + 5, u)
        if p - last_cut >= batch:
            cuts[n_cuts] = p
            n_cuts += 1
            last_cut = p
    return p, n_cuts


# --------------------------------------------------------------------------- per file


class _Starts:
    """The arrays of _begin's table, grown from Python between blocks."""

    def __init__(self):
        self.slots = np.full(1 << 12, -1, np.int64)
        self.e_thr = np.zeros(1 << 10, np.int64)
        self.e_ts = np.zeros(1 << 10, np.int64)
        self.e_dur = np.zeros(1 << 10, np.int64)
        self.e_next = np.zeros(1 << 10, np.int64)
        self.t_head = np.full(16, -1, np.int64)
        self.t_tail = np.full(16, -1, np.int64)
        self.t_count = np.zeros(16, np.int64)
        # free head, live, next unused, interned written (per call), flags written
        self.meta = np.array([-1, 0, 0, 0, 0], np.int64)

    def reserve(self, slices: int, threads: int) -> None:
        need = int(self.meta[2]) + slices
        if need > len(self.e_ts):
            size = max(need, 2 * len(self.e_ts))
            for name in ("e_thr", "e_ts", "e_dur", "e_next"):
                a = getattr(self, name)
                b = np.zeros(size, np.int64)
                b[: len(a)] = a
                setattr(self, name, b)
        live = int(self.meta[1]) + slices
        if 2 * live > len(self.slots):
            size = len(self.slots)
            while 2 * live > size:
                size *= 2
            old, self.slots = self.slots, np.full(size, -1, np.int64)
            _rehash(self.slots, self.e_thr, self.e_ts, old)
        if threads > len(self.t_head):
            size = max(threads, 2 * len(self.t_head))
            for name, fill in (("t_head", -1), ("t_tail", -1), ("t_count", 0)):
                a = getattr(self, name)
                b = np.full(size, fill, np.int64)
                b[: len(a)] = a
                setattr(self, name, b)


class FastPart(ProtoPart):
    """ProtoPart whose events are written a block at a time."""

    def __init__(self, path, seq, proc, file_index):
        super().__init__(path, seq, proc, file_index)
        self.thr: dict[int, int] = {}  # tid -> thread index
        self.uuids = np.zeros(16, np.int64)
        self.st = _Starts()
        self.seq_arr = np.frombuffer(self.seq_field, np.uint8)
        self.flags_arr = np.frombuffer(self.flags, np.uint8)
        self.batch_bytes = 0
        self.arg_iid = np.zeros(11, np.int64)
        self.arg_done = 0  # bits of arg_iid set

    def thread_index(self, tid: int) -> int:
        i = self.thr.get(tid)
        if i is None:
            i = self.thr[tid] = len(self.thr)
            if i >= len(self.uuids):
                self.uuids = np.concatenate([self.uuids, np.zeros(len(self.uuids), np.int64)])
            self.uuids[i] = self._thread_track(tid)
        return i

    def arg_iids(self, bits: int) -> np.ndarray:
        new = bits & ~self.arg_done
        if new:
            for a in range(11):
                if new & (1 << a):
                    key = FNAME_KEYS[a] if a < scan.N_STR else scan.IO_KEYS[a]
                    self.arg_iid[a] = self.arg_names(key)
            self.arg_done |= new
        return self.arg_iid

    def _add(self, framed: bytes) -> None:
        self.batch.append(framed)
        self.batch_bytes += len(framed)

    def add_raw(self, data) -> None:
        self.batch.append(data)
        self.batch_bytes += len(data)
        if self.batch_bytes >= BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        super()._flush()
        self.batch_bytes = 0

    def encode(self, order, cols, specials) -> None:
        """Write the rows of `order` (refs into the scanner's columns and the specials)."""
        n = len(order)
        if not n:
            return
        s_kind, s_ts, s_dur, s_thr, s_name, s_cat, s_boff, s_blen, blob = specials
        slices = n  # at most
        st = self.st
        st.reserve(slices, len(self.thr))
        interned = self._interned() if self.pending else b""
        inter = np.frombuffer(interned, np.uint8)
        st.meta[3] = 0
        out = np.empty(ROW_BOUND * n + len(blob) + len(interned) + 64, np.uint8)
        cuts = np.empty(len(out) // BATCH_BYTES + 2, np.int64)
        (codes, ivals, present, korder, fthr, pool_name, pool_cat, pool_val) = cols
        size, n_cuts = _encode(order, codes, ivals, present, korder, fthr, pool_name, pool_cat, pool_val,
                               self.arg_iid, s_kind, s_ts, s_dur, s_thr, s_name, s_cat, s_boff,
                               s_blen, blob, self.uuids, self.seq_arr, inter, self.flags_arr,
                               st.slots, st.e_thr, st.e_ts, st.e_dur, st.e_next, st.t_head,
                               st.t_tail, st.t_count, st.meta, out, cuts, BATCH_BYTES)
        if st.meta[4]:
            self.flags = b""
        start = 0
        for c in cuts[:n_cuts]:
            self.add_raw(out[start:c].tobytes())
            start = int(c)
        if size > start:
            self.add_raw(out[start:size].tobytes())


_EMPTY_COLS = (np.zeros((4, 0), np.int32), np.zeros((13, 0), np.int64), np.zeros(0, np.int32),
               np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
               np.zeros(0, np.int64))


class _Specials:
    """Rows encoded by ProtoPart's methods: their fields and TrackEvent tails."""

    def __init__(self, out: FastPart):
        self.out = out
        self.kind, self.ts, self.dur, self.thr, self.name, self.cat = [], [], [], [], [], []
        self.blobs: list[bytes] = []
        self.evs: list[dict | None] = []  # the event of each row (None for counters)

    def __len__(self):
        return len(self.kind)

    def _row(self, kind, ts, dur, thr, name, cat, blob, ev):
        self.kind.append(kind)
        self.ts.append(ts)
        self.dur.append(dur)
        self.thr.append(thr)
        self.name.append(name)
        self.cat.append(cat)
        self.blobs.append(blob)
        self.evs.append(ev)
        return len(self.kind) - 1

    def add(self, ev: dict) -> list[int]:
        """Rows for a timed event (X, i or C), as ProtoPart.event encodes it."""
        out = self.out
        ph = ev["ph"]
        if ph == "C":
            ts = int(ev["ts"] * 1000 + 0.5)
            rows = []
            for key, value in (ev.get("args") or {}).items():
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                track = out._counter_track(proto_out.counter_name(ev.get("name", ""), key))
                te = (proto_out.T_TYPE + proto_out.varint(proto_out.COUNTER)
                      + proto_out.T_TRACK_UUID + proto_out.varint(track))
                if isinstance(value, int):
                    te += proto_out.T_COUNTER + proto_out.varint(value)
                else:
                    te += proto_out.T_DOUBLE_COUNTER + proto_out.struct.pack("<d", value)
                rows.append(self._row(KIND_PRE, ts, 0, 0, 0, 0, te, None))
            return rows
        tid = ev.get("tid", out.proc.pid)
        thr = out.thread_index(tid)
        args = ev.get("args")
        blob = out._annotations(args) if args else b""
        if "_in" in ev or "_out" in ev:
            blob += out._flows(ev)
        ts = int(ev["ts"] * 1000 + 0.5)
        if ph == "X":
            kind, dur = KIND_SLICE, int(ev.get("dur", 0.0) * 1000 + 0.5)
        else:
            kind, dur = KIND_INSTANT, 0
        return [self._row(kind, ts, dur, thr, out.names(ev.get("name", "")),
                          out.cats(ev.get("cat", "")), blob, ev)]

    def arrays(self):
        lens = np.array([len(b) for b in self.blobs], np.int64)
        offs = np.zeros(len(lens), np.int64)
        if len(lens) > 1:
            np.cumsum(lens[:-1], out=offs[1:])
        blob = np.frombuffer(b"".join(self.blobs) or b"\0", np.uint8)
        return (np.array(self.kind, np.int64), np.array(self.ts, np.int64),
                np.array(self.dur, np.int64), np.array(self.thr, np.int64),
                np.array(self.name, np.int64), np.array(self.cat, np.int64), offs, lens, blob)


def _text_blocks(blocks):
    """Decompressed blocks joined up to about BLOCK_BYTES (whole lines each)."""
    parts, size = [], 0
    for b in blocks:
        parts.append(b)
        size += len(b)
        if size >= BLOCK_BYTES:
            yield parts[0] if len(parts) == 1 else b"".join(parts)
            parts, size = [], 0
    if parts:
        yield b"".join(parts)


def _clean(line: bytes) -> bytes:
    """A line as reader.iter_lines yields it: no `[`, `,` or `]` around the event."""
    line = line.strip()
    if line.endswith((b",", b"]")):
        line = line[:-1].rstrip()
    if line.startswith(b"["):
        line = line[1:]
    return line


def _skip_line(line: bytes) -> bool:
    """A line the scanner passes over: blank, `[` or `]`."""
    s = line.strip(b" \t\r")
    if s.endswith((b",", b"]")):
        s = s[:-1].rstrip(b" \t")
    return s in (b"", b"[")


class FileExport:
    """merge.export_file for .pftrace, block by block. Fills `res` like it."""

    def __init__(self, job, res, restore_names, thread_label):
        self.job, self.res = job, res
        self.restore_names = restore_names
        self.thread_label = thread_label
        proc = job.proc
        self.out = FastPart(job.part_path, job.file.index + 1, proc, job.file.index)
        self.fnames = dict(job.fnames)
        self.cut_ns = None if job.cutoff_us is None else int(round(job.cutoff_us * 1000))
        self.cutoff = job.cutoff_us
        filt = job.filter
        self.filt = filt if filt.per_event else None
        self.keep = filt.keeps if filt.per_event else None
        self.cat_ok: dict[str, bool] = {}  # pool string -> passes --cat
        self.name_ok: dict[str, bool] = {}
        self.thread_names: dict[int, str] = {}
        self.tids: set[int] = set()
        # flows (merge._Flows)
        self.forks = job.fork_flows
        self.flow_in = job.flow_in
        spawns = job.spawn_flows
        self.starts = np.array([int(round(s * 1000)) for s, _ in spawns], np.int64)
        self.spawn_ids = [i for _, i in spawns]
        self.best_ref = np.full(len(spawns), NONE, np.int64)
        self.best_ts = np.zeros(len(spawns), np.int64)
        self.first = np.array([NONE, 0], np.int64)
        self.flows_active = bool(self.flow_in or self.forks or len(spawns))
        self.carried: list[dict] = []  # held slices, as events (rows ~0..)
        self.drawn_out: list[int] = []
        self.drawn_in: list[int] = []

    # -- events that ProtoPart encodes ---------------------------------------

    def _timed(self, ev: dict, specials: _Specials) -> list[int]:
        """merge.export_file's handling of one timed event (parsed), as special rows."""
        res = self.res
        if self.keep is not None and not self.keep(ev):
            res.filtered += 1
            return []
        if self.cutoff is not None and ev.get("ts", 0.0) >= self.cutoff:
            res.cut += 1
            return []
        args = ev.get("args")
        if args and ("fhash" in args or "fhash2" in args):
            self.restore_names(args, self.fnames)
        ev["pid"] = self.job.proc.pid
        self.tids.add(ev.setdefault("tid", self.job.proc.pid))
        res.events += 1
        ph = ev["ph"]
        res.counters += ph == "C"
        if ph == "X" and self.forks and ev.get("cat") == "process" and ev.get("name") in FORK_NAMES:
            flow = self.forks.get((ev.get("args") or {}).get("ret"))
            if flow:
                ev.setdefault("_out", []).append(flow)
                self.drawn_out.append(flow)
        return specials.add(ev)

    def _parsed_slice(self, line: bytes) -> dict:
        """A scanned (plain I/O) slice as merge.export_file has it when held."""
        ev = orjson.loads(line)
        args = ev.get("args")
        if args and ("fhash" in args or "fhash2" in args):
            self.restore_names(args, self.fnames)
        ev["pid"] = self.job.proc.pid
        ev.setdefault("tid", self.job.proc.pid)
        return ev

    def _line(self, line: bytes) -> dict | None:
        """Parse a general line; metadata is taken in here (returns None)."""
        try:
            ev = orjson.loads(line)
            ph = ev["ph"]
            timed = ph in TIMED
        except (orjson.JSONDecodeError, KeyError, TypeError):
            self.res.bad_lines += 1
            return None
        if timed:
            return ev
        if ph == "M":
            name = ev.get("name")
            args = ev.get("args") or {}
            if name == "thread_name" and "tid" in ev:
                self.thread_names[ev["tid"]] = str(args.get("name", ""))
            elif name == "FH":
                self.fnames[str(args.get("value"))] = str(args.get("name"))
        return None

    # -- blocks ----------------------------------------------------------------

    def block(self, text: bytes) -> None:
        buf = np.frombuffer(text, np.uint8)
        sc = scan.scan(buf)
        n = sc["n"]
        gen = sc["gen"]
        nl = np.flatnonzero(buf == 10)
        if len(nl) == 0 or nl[-1] != len(buf) - 1:
            nl = np.append(nl, len(buf))
        lstart = np.empty(len(nl), np.int64)
        lstart[0] = 0
        lstart[1:] = nl[:-1] + 1
        kind = np.ones(len(nl), np.int8)  # 1 fast, 2 general, 0 skipped
        gl = np.searchsorted(lstart, gen[0], "right") - 1
        kind[gl] = 2
        for i in np.flatnonzero((nl - lstart) <= 4):
            if kind[i] == 1 and _skip_line(text[lstart[i]:nl[i]]):
                kind[i] = 0
        fast_lines = np.flatnonzero(kind == 1)
        if len(fast_lines) != n:  # cannot place the scanned rows: every line by orjson
            self._slow_block(text, lstart, nl, kind)
            return

        specials = _Specials(self.out)
        for ev in self.carried:
            specials.add(ev)
        # general lines in order: metadata now, timed events later in line order
        pending: list[tuple[int, dict]] = []
        for i, (a, b) in zip(gl.tolist(), gen.T.tolist()):
            ev = self._line(text[a:b])
            if ev is not None:
                pending.append((i, ev))

        codes, ivals, present = sc["codes"], sc["ivals"], sc["present"]
        pool = [text[a:a + ln] for a, ln in zip(sc["pool_start"].tolist(), sc["pool_len"].tolist())]
        strings, bad = [], np.zeros(len(pool), bool)
        for k, s in enumerate(pool):
            try:
                t = s.decode()
                if any(c < 32 for c in s):
                    raise ValueError
            except ValueError:
                bad[k] = True
                t = ""
            strings.append(t)
        special = sc["args_pos"][0] >= 0
        past_ns = np.zeros(n, np.bool_)
        _past_ns(buf, lstart[fast_lines], past_ns)
        special |= past_ns
        if bad.any():
            special |= bad[codes[0]] | bad[codes[1]]
            special |= ((present & 1) != 0) & bad[codes[2]]
            special |= ((present & 2) != 0) & bad[codes[3]]
        if self.forks:
            fork_ids = [k for k, s in enumerate(strings) if s in FORK_NAMES]
            proc_ids = [k for k, s in enumerate(strings) if s == "process"]
            if fork_ids and proc_ids:
                special |= np.isin(codes[0], fork_ids) & np.isin(codes[1], proc_ids)
        # file names: value iids (long names are written by ProtoPart as JSON)
        pool_val = np.zeros(len(pool), np.int64)
        long_ids = []
        for a in range(scan.N_STR):
            has = (present & (1 << a)) != 0
            for k in np.unique(codes[2 + a][has & ~special]).tolist():
                h = strings[k]
                name = self.fnames.get(h, h)
                if len(name) > proto_out.MAX_INTERNED_STRING:
                    long_ids.append(k)
                else:
                    pool_val[k] = -1  # interned below, in row order of first use
        if long_ids:
            for a in range(scan.N_STR):
                special |= ((present & (1 << a)) != 0) & np.isin(codes[2 + a], long_ids)
        # scanned rows handled as general lines
        for j in np.flatnonzero(special).tolist():
            i = int(fast_lines[j])
            ev = self._line(_clean(text[lstart[i]:nl[i]]))
            if ev is not None:
                pending.append((i, ev))
        pending.sort(key=lambda x: x[0])
        line_of, refs = [], []
        for i, ev in pending:
            for k in self._timed(ev, specials):
                line_of.append(i)
                refs.append(~k)
        normal = ~special
        if self.filt is not None:
            kept = self._keeps(codes, ivals, strings, normal)
            self.res.filtered += int(np.count_nonzero(normal & ~kept))
            normal = kept
        if self.cut_ns is not None:
            late = normal & (ivals[2] >= self.cut_ns)
            self.res.cut += int(late.sum())
            normal &= ~late
        rows = np.flatnonzero(normal)
        self.res.events += len(rows)
        out = self.out
        fthr = np.zeros(n, np.int64)
        pool_name = np.zeros(len(pool), np.int64)
        pool_cat = np.zeros(len(pool), np.int64)
        if len(rows):
            # intern in order of first use, as ProtoPart would
            tids, inv = np.unique(ivals[1][rows], return_inverse=True)
            self.tids.update(tids.tolist())
            thr = np.array([out.thread_index(t) for t in tids.tolist()], np.int64)
            fthr[rows] = thr[inv]
            for k in _first_use(codes[0][rows]):
                pool_name[k] = out.names(strings[k])
            for k in _first_use(codes[1][rows]):
                pool_cat[k] = out.cats(strings[k])
            bits = int(np.bitwise_or.reduce(present[rows]))
            out.arg_iids(bits)
            for a in range(scan.N_STR):
                if bits & (1 << a):
                    has = rows[(present[rows] & (1 << a)) != 0]
                    for k in _first_use(codes[2 + a][has]):
                        h = strings[k]
                        pool_val[k] = out.values(self.fnames.get(h, h))
        # all rows in line order
        if refs:
            lin = np.concatenate([rows, np.array(refs, np.int64)])
            order = np.argsort(np.concatenate([fast_lines[rows], np.array(line_of, np.int64)]),
                               kind="stable")
            lin = lin[order]
        else:
            lin = rows.astype(np.int64)
        arrays = specials.arrays()
        if self.flows_active:
            lin = self._flow_order(lin, ivals, arrays, specials, text, lstart, nl, fast_lines)
        korder = np.zeros(n, np.int64)
        _arg_orders(buf, lstart[fast_lines], rows, _KEY_NAMES, _KEY_LENS, _ARGS, korder)
        cols = (codes, ivals, present, korder, fthr, pool_name, pool_cat, pool_val)
        out.encode(lin, cols, arrays)

    def _keeps(self, codes, ivals, strings, rows):
        """rows (a mask of scanned rows) less those EventFilter.keeps would drop."""
        f = self.filt
        keep = rows.copy()
        for col, test, known in ((1, f.keeps_cat if f.cats else None, self.cat_ok),
                                 (0, f.keeps_name if f.names else None, self.name_ok)):
            if test is None or not keep.any():
                continue
            ok = np.zeros(len(strings), np.bool_)
            if len(known) > 1 << 14:
                known.clear()
            for k in np.unique(codes[col][keep]).tolist():
                s = strings[k]
                v = known.get(s)
                if v is None:
                    v = known[s] = test(s)
                ok[k] = v
            keep &= ok[codes[col]]
        if f.min_dur_us or f.start_us is not None or f.end_us is not None:
            idx = np.flatnonzero(keep)
            times = f.keeps_slice_times(_us(ivals[2][idx]), _us(ivals[3][idx]))
            keep[idx[~times]] = False
        return keep

    def _flow_order(self, lin, ivals, arrays, specials, text, lstart, nl, fast_lines):
        s_kind, s_ts = arrays[0], arrays[1]
        spec = lin < 0
        isx = np.ones(len(lin), np.bool_)
        lts = np.empty(len(lin), np.int64)
        lts[~spec] = ivals[2][lin[~spec]]
        sk = ~lin[spec]
        isx[spec] = s_kind[sk] == KIND_SLICE
        lts[spec] = s_ts[sk]
        # the carried rows keep their places in the state (as specials 0..)
        order = np.empty(len(lin) + len(self.carried) + len(self.best_ref) + 2, np.int64)
        k = _flow_order(lin, isx, lts, self.starts, self.best_ref, self.best_ts, self.first,
                        bool(self.flow_in), order)
        # held rows leave this block as parsed events (specials 0.. of the next)
        held: dict[int, int] = {}
        evs: list[dict] = []
        for ref in self.best_ref.tolist() + [int(self.first[0])]:
            if ref == NONE or ref in held:
                continue
            held[ref] = len(evs)
            if ref < 0:
                evs.append(specials.evs[~ref])
            else:
                i = int(fast_lines[ref])
                evs.append(self._parsed_slice(_clean(text[lstart[i]:nl[i]])))
        self.carried = evs
        for j in range(len(self.best_ref)):
            if self.best_ref[j] != NONE:
                self.best_ref[j] = ~held[int(self.best_ref[j])]
        if self.first[0] != NONE:
            self.first[0] = ~held[int(self.first[0])]
        return order[:k]

    def _slow_block(self, text, lstart, nl, kind) -> None:
        """A block whose lines the scanner result cannot be matched to: orjson only."""
        specials = _Specials(self.out)
        for ev in self.carried:
            specials.add(ev)
        refs = []
        for i in np.flatnonzero(kind != 0).tolist():
            line = _clean(text[lstart[i]:nl[i]])
            if not line:
                continue
            ev = self._line(line)
            if ev is not None:
                refs += [~k for k in self._timed(ev, specials)]
        lin = np.array(refs, np.int64)
        arrays = specials.arrays()
        if self.flows_active:
            empty = np.zeros((13, 0), np.int64)
            lin = self._flow_order(lin, empty, arrays, specials, text, lstart, nl, None)
        self.out.encode(lin, _EMPTY_COLS, arrays)

    def finish(self) -> None:
        """merge._Flows.finish, then the thread names (merge.export_file)."""
        held_evs = self.carried
        held = []
        for ref, flow in zip(self.best_ref.tolist(), self.spawn_ids):
            if ref != NONE:
                ev = held_evs[~ref]
                ev.setdefault("_out", []).append(flow)
                self.drawn_out.append(flow)
                held.append(ev)
        if self.first[0] != NONE:
            ev = held_evs[~int(self.first[0])]
            ev["_in"] = self.flow_in
            self.drawn_in.append(self.flow_in)
            held.append(ev)
        specials = _Specials(self.out)
        refs, seen = [], set()
        for ev in held:
            if id(ev) not in seen:
                seen.add(id(ev))
                refs += [~k for k in specials.add(ev)]
        self.out.encode(np.array(refs, np.int64), _EMPTY_COLS, specials.arrays())
        proc = self.job.proc
        names = self.thread_names
        for tid in sorted(self.tids | names.keys()):
            self.out.thread(proc.pid, tid, self.thread_label(proc, tid, names.get(tid)))
        res = self.res
        res.threads = len(self.tids | names.keys())
        res.flows_out, res.flows_in = self.drawn_out, self.drawn_in


def _first_use(ids: np.ndarray) -> list[int]:
    """The distinct values of ids in order of first appearance."""
    u, first = np.unique(ids, return_index=True)
    return u[np.argsort(first)].tolist()


def export_file(job, res, reader, restore_names, thread_label) -> None:
    fx = FileExport(job, res, restore_names, thread_label)
    damage: list = []
    try:
        for text in _text_blocks(reader.iter_blocks(job.file.path, damage)):
            fx.block(text)
    except reader.TraceInputError as exc:
        res.error = f"{job.file.path}: {exc}"
    fx.finish()
    res.damaged = len(damage)
    res.crc, res.size = fx.out.close()
