"""Perfetto's native protobuf output (`-o job.pftrace`): TracePacket/TrackEvent.

The bytes are written by hand: the generic protobuf library costs several
microseconds per message, too slow for 10M events. The schema used (field
numbers from perfetto/protos/perfetto/trace/...):

    Trace         { repeated TracePacket packet = 1; }
    TracePacket   { uint64 timestamp = 8; uint32 trusted_packet_sequence_id = 10;
                    TrackEvent track_event = 11; InternedData interned_data = 12;
                    uint32 sequence_flags = 13; bytes compressed_packets = 50;
                    TrackDescriptor track_descriptor = 60; }
    TrackEvent    { Type type = 9; uint64 track_uuid = 11; uint64 name_iid = 10;
                    repeated uint64 category_iids = 3;
                    repeated DebugAnnotation debug_annotations = 4;
                    int64 counter_value = 30; double double_counter_value = 44;
                    repeated fixed64 flow_ids = 47; repeated fixed64 terminating_flow_ids = 48; }
    DebugAnnotation { uint64 name_iid = 1; bool bool_value = 2; int64 int_value = 4;
                    double double_value = 5; string legacy_json_value = 9;
                    uint64 string_value_iid = 17; }
    InternedData  { event_categories = 1; event_names = 2; debug_annotation_names = 3;
                    debug_annotation_string_values = 29 }  (each {iid = 1; name/str = 2})
    TrackDescriptor { uint64 uuid = 1; string name = 2; ProcessDescriptor process = 3;
                    ThreadDescriptor thread = 4; uint64 parent_uuid = 5; CounterDescriptor counter = 8; }
    ProcessDescriptor { int32 pid = 1; string process_name = 6; }
    ThreadDescriptor  { int32 pid = 1; int32 tid = 2; string thread_name = 5; }

X events become a SLICE_BEGIN and a SLICE_END packet (TrackEvent has no
duration); every input file is one packet sequence with its own interning.
Packets are batched into `compressed_packets` (zlib), which Perfetto inflates.
"""

from __future__ import annotations

import struct
import zlib

import orjson

from .labels import Proc

SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
INCREMENTAL_STATE_CLEARED, NEEDS_INCREMENTAL_STATE = 1, 2
BATCH_PACKETS = 4096  # packets per compressed_packets batch (about 200 kB)

# Track uuids, kept small because every event repeats its track's. The low two
# bits tell the kind: 0 thread (numbered by process and tid, so that the files
# of an exec'd process share the thread), 1 process, 2 counter, 3 notes.
NOTE_TRACK = 3
RECENT_STARTS = 4096  # per thread, slice starts remembered to order equal starts
COMPRESSION_LEVEL = 3  # zlib level of compressed_packets: size against speed


def process_uuid(vpid: int) -> int:
    return vpid << 2 | 1


def thread_uuid(proc: Proc, tid: int) -> int:
    return (proc.sort_index << 22 | tid & 0x3FFFFF) << 2


def counter_uuid(file_index: int, n: int) -> int:
    return (file_index << 20 | n) << 2 | 2


def varint(n: int) -> bytes:
    """Base-128 varint, unrolled up to 7 bytes (timestamps in ns take 6 or 7):
    this is the hot path."""
    if n < 0x80:
        if n >= 0:
            return _BYTE[n]
        n += 1 << 64  # negative int64: two's complement, ten bytes
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    if n < 0x200000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14))
    if n < 0x10000000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14 & 0x7F | 0x80, n >> 21))
    if n < 0x800000000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14 & 0x7F | 0x80,
                      n >> 21 & 0x7F | 0x80, n >> 28))
    if n < 0x40000000000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14 & 0x7F | 0x80,
                      n >> 21 & 0x7F | 0x80, n >> 28 & 0x7F | 0x80, n >> 35))
    if n < 0x2000000000000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14 & 0x7F | 0x80,
                      n >> 21 & 0x7F | 0x80, n >> 28 & 0x7F | 0x80, n >> 35 & 0x7F | 0x80,
                      n >> 42))
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_BYTE = [bytes((n,)) for n in range(128)]


def tag(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def ld(field: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return tag(field, 2) + varint(len(payload)) + payload


def string(field: int, s: str) -> bytes:
    return ld(field, s.encode("utf-8", "surrogateescape"))


T_TIMESTAMP = tag(8, 0)
T_TRACK_EVENT = tag(11, 2)
T_TYPE = tag(9, 0)
T_TRACK_UUID = tag(11, 0)
T_NAME_IID = tag(10, 0)
T_CATEGORY_IID = tag(3, 0)
T_ANNOTATION = tag(4, 2)
T_COUNTER = tag(30, 0)
T_DOUBLE_COUNTER = tag(44, 1)
T_FLOW = tag(47, 1)
T_TERMINATING_FLOW = tag(48, 1)
T_A_NAME_IID = tag(1, 0)
T_A_BOOL = tag(2, 0)
T_A_INT = tag(4, 0)
T_A_DOUBLE = tag(5, 1)
T_A_JSON = tag(9, 2)
T_A_STRING_IID = tag(17, 0)
T_PACKET = tag(1, 2)
END_TYPE = T_TYPE + varint(SLICE_END)
MAX_INTERNED_STRING = 256  # longer string values are written inline as JSON


def packet(body: bytes) -> bytes:
    """A packet framed as a `Trace.packet` field, ready to concatenate."""
    return T_PACKET + varint(len(body)) + body


def track_descriptor(uuid: int, *, name: str | None = None, parent: int | None = None,
                     process: bytes | None = None, thread: bytes | None = None,
                     counter: bool = False) -> bytes:
    body = tag(1, 0) + varint(uuid)
    if name is not None:
        body += string(2, name)
    if process is not None:
        body += ld(3, process)
    if thread is not None:
        body += ld(4, thread)
    if parent is not None:
        body += tag(5, 0) + varint(parent)
    if counter:
        body += ld(8, b"")
    return packet(ld(60, body))


def process_descriptor(p: Proc) -> bytes:
    return track_descriptor(process_uuid(p.vpid),
                            process=tag(1, 0) + varint(p.vpid) + string(6, p.label))


def head(procs: list[Proc]) -> bytes:
    return b"".join(process_descriptor(p) for p in procs)


def note_packets(notes: list[dict], seq: int) -> bytes:
    """The export's notes as instants on a global track of their own."""
    if not notes:
        return b""
    out = track_descriptor(NOTE_TRACK, name="iotrace export")
    for n in notes:
        te = (T_TYPE + varint(INSTANT) + T_TRACK_UUID + varint(NOTE_TRACK)
              + string(23, n["name"]))
        out += packet(T_TIMESTAMP + varint(round(n["ts"] * 1000)) + tag(10, 0) + varint(seq)
                      + ld(11, te))
    return out


class Interner:
    """One interning table of a sequence: strings to iids. A new string's entry
    is queued on `pending` for the InternedData of the packet that first uses it."""

    def __init__(self, field: int, pending: list):
        self.field = field
        self.iids: dict[str, int] = {}
        self.pending = pending

    def __call__(self, s: str) -> int:
        iid = self.iids.get(s)
        if iid is None:
            iid = self.iids[s] = len(self.iids) + 1
            self.pending.append((self.field, ld(self.field, tag(1, 0) + varint(iid) + string(2, s))))
        return iid


class ProtoPart:
    """Packets of one input file: one trusted packet sequence."""

    ANNOTATION_CACHE = 1 << 16  # (key, value) pairs whose encoding is kept

    def __init__(self, path: str, seq: int, proc: Proc, file_index: int):
        self.file = open(path, "wb")
        self.seq_field = tag(10, 0) + varint(seq)
        self.proc = proc
        self.pid_shift = proc.vpid - proc.pid
        self.file_index = file_index
        self.pending: list[tuple[int, bytes]] = []  # new interned entries
        self.names = Interner(2, self.pending)
        self.cats = Interner(1, self.pending)
        self.arg_names = Interner(3, self.pending)
        self.values = Interner(29, self.pending)
        self.heads: dict[tuple, bytes] = {}  # (ph, tid, name, cat) -> TrackEvent start
        self.annotation_cache: dict[tuple, bytes] = {}
        self.int_heads: dict[str, list[bytes]] = {}
        self.tracks: dict[int, int] = {}  # tid -> thread track uuid
        self.starts: dict[int, dict[int, int]] = {}  # tid -> recent slice start -> dur
        self.end_tails: dict[int, bytes] = {}  # tid -> a SLICE_END packet after its timestamp
        self.counters: dict[str, int] = {}  # counter name -> track uuid
        self.batch: list[bytes] = []
        # The first packet clears the sequence's incremental state (interning);
        # later ones need not repeat a flag (Perfetto only drops flagged packets
        # when the state is missing, which cannot happen in one file).
        self.flags = tag(13, 0) + varint(INCREMENTAL_STATE_CLEARED | NEEDS_INCREMENTAL_STATE)

    # -- events -------------------------------------------------------------

    def event(self, ev: dict) -> None:
        ph = ev["ph"]
        if ph == "C":
            self._counters(ev)
            return
        tid = ev.get("tid", self.proc.pid)
        key = (ph, tid, ev.get("name", ""), ev.get("cat", ""))
        te = self.heads.get(key) or self._head(key)
        args = ev.get("args")
        if args:
            te += self._annotations(args)
        if "_in" in ev or "_out" in ev:
            te += self._flows(ev)
        ts = int(ev["ts"] * 1000 + 0.5)
        if ph == "X":
            dur = int(ev.get("dur", 0.0) * 1000 + 0.5)
            end_ts = ts + dur
            ts = self._begin(tid, ts, dur)
        pending = self.pending
        if pending:
            interned = self._interned()
        else:
            interned = b""
        n = len(te)
        body = b"".join((T_TIMESTAMP, varint(ts), self.seq_field, interned, T_TRACK_EVENT,
                         _BYTE[n] if n < 128 else varint(n), te, self.flags))
        self.flags = b""
        n = len(body)
        batch = self.batch
        batch.append(T_PACKET + (_BYTE[n] if n < 128 else varint(n)) + body)
        if ph == "X":
            # SLICE_END: all but the timestamp is the same for every end on a thread.
            body = T_TIMESTAMP + varint(end_ts) + self.end_tails[tid]
            batch.append(T_PACKET + _BYTE[len(body)] + body)
        if len(batch) >= BATCH_PACKETS:
            self._flush()

    def _begin(self, tid: int, ts: int, dur: int) -> int:
        """The time of a SLICE_BEGIN. Perfetto keeps the file order of packets with
        equal times, and a thread's slices come in order of their ends, children
        first: a parent starting at the same ns as an already written child would
        open inside it. Such a parent starts 1 ns earlier. (Recent starts only:
        RECENT_STARTS per thread.)"""
        starts = self.starts.get(tid)
        if starts is None:
            starts = self.starts[tid] = {}
        if starts.get(ts, dur + 1) <= dur:
            return ts - 1
        starts[ts] = dur
        if len(starts) > RECENT_STARTS:
            del starts[next(iter(starts))]
        return ts

    @staticmethod
    def _flows(ev: dict) -> bytes:
        out = b""
        if ev.get("_in"):
            out += T_TERMINATING_FLOW + struct.pack("<Q", ev["_in"])
        for flow in ev.get("_out", ()):
            out += T_FLOW + struct.pack("<Q", flow)
        return out

    def _head(self, key: tuple) -> bytes:
        """The start of every TrackEvent with this phase, thread, name and category."""
        ph, tid, name, cat = key
        track = self._thread_track(tid)
        self.heads[key] = head = (T_TYPE + varint(SLICE_BEGIN if ph == "X" else INSTANT)
                + T_TRACK_UUID + varint(track) + T_NAME_IID + varint(self.names(name))
                + T_CATEGORY_IID + varint(self.cats(cat)))
        return head

    def _annotations(self, args: dict) -> bytes:
        out = []
        cache = self.annotation_cache
        int_heads = self.int_heads
        for item in args.items():
            try:
                enc = cache.get(item)
            except TypeError:  # a list or dict value: not hashable
                enc = None
            if enc is None:
                key, value = item
                head = int_heads.get(key)
                if head is not None and value.__class__ is int:
                    # The common miss: a new integer (an offset) for a known key.
                    v = varint(value)
                    enc = head[len(v)] + v
                else:
                    enc = self._annotation(key, value)
                    if len(cache) < self.ANNOTATION_CACHE and isinstance(value, (int, float, str)):
                        cache[item] = enc
            out.append(enc)
        return b"".join(out)

    def _annotation(self, key: str, value) -> bytes:
        name = T_A_NAME_IID + varint(self.arg_names(key))
        if key not in self.int_heads:
            # Per value length, the bytes before an integer value of this key.
            self.int_heads[key] = [T_ANNOTATION + _BYTE[len(name) + 1 + n] + name + T_A_INT
                                   for n in range(11)]
        body = name
        if value is True or value is False:
            body += T_A_BOOL + (b"\x01" if value else b"\x00")
        elif isinstance(value, int):
            body += T_A_INT + varint(value)
        elif isinstance(value, float):
            body += T_A_DOUBLE + struct.pack("<d", value)
        elif isinstance(value, str) and len(value) <= MAX_INTERNED_STRING:
            body += T_A_STRING_IID + varint(self.values(value))
        else:  # lists, dicts, long strings: shown as their JSON text
            text = orjson.dumps(value)
            body += T_A_JSON + varint(len(text)) + text
        return T_ANNOTATION + varint(len(body)) + body

    def _counters(self, ev: dict) -> None:
        ts = int(ev["ts"] * 1000 + 0.5)
        for key, value in (ev.get("args") or {}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            track = self._counter_track(counter_name(ev.get("name", ""), key))
            te = T_TYPE + varint(COUNTER) + T_TRACK_UUID + varint(track)
            if isinstance(value, int):
                te += T_COUNTER + varint(value)
            else:
                te += T_DOUBLE_COUNTER + struct.pack("<d", value)
            self._emit(ts, te)

    def _interned(self) -> bytes:
        """InternedData for the entries new since the last packet, by field."""
        interned = ld(12, b"".join(e for _, e in sorted(self.pending, key=lambda p: p[0])))
        self.pending.clear()
        return interned

    def _emit(self, ts: int, te: bytes) -> None:
        interned = self._interned() if self.pending else b""
        body = b"".join((T_TIMESTAMP, varint(ts), self.seq_field, interned, T_TRACK_EVENT,
                         varint(len(te)), te, self.flags))
        self.flags = b""
        self.batch.append(T_PACKET + varint(len(body)) + body)

    # -- tracks -------------------------------------------------------------

    def _thread_track(self, tid: int) -> int:
        uuid = self.tracks.get(tid)
        if uuid is None:
            uuid = self.tracks[tid] = thread_uuid(self.proc, tid)
            end = END_TYPE + T_TRACK_UUID + varint(uuid)
            self.end_tails[tid] = self.seq_field + T_TRACK_EVENT + varint(len(end)) + end
            self._add(self._thread_descriptor(tid, None))
        return uuid

    def _thread_descriptor(self, tid: int, name: str | None) -> bytes:
        thread = tag(1, 0) + varint(self.proc.vpid) + tag(2, 0) + varint(tid + self.pid_shift)
        if name is not None:
            thread += string(5, name)
        return track_descriptor(self.tracks[tid], thread=thread)

    def _counter_track(self, name: str) -> int:
        uuid = self.counters.get(name)
        if uuid is None:
            uuid = self.counters[name] = counter_uuid(self.file_index, len(self.counters))
            self._add(track_descriptor(uuid, name=name, counter=True,
                                       parent=process_uuid(self.proc.vpid)))
        return uuid

    def thread(self, pid: int, tid: int, name: str) -> None:
        """Name a thread (known only once its file is read): its descriptor again,
        now with the name."""
        self._thread_track(tid)
        self._add(self._thread_descriptor(tid, name))

    # -- output -------------------------------------------------------------

    def _add(self, framed: bytes) -> None:
        self.batch.append(framed)

    def _flush(self) -> None:
        if self.batch:
            self.file.write(packet(ld(50, zlib.compress(b"".join(self.batch), COMPRESSION_LEVEL))))
            self.batch.clear()

    def close(self) -> tuple[int, int]:
        self._flush()
        self.file.close()
        return 0, 0


def counter_name(event_name: str, key: str) -> str:
    """The counter track's name, as Perfetto's JSON importer names it."""
    return f"{event_name} {key}"
