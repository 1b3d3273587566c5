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
BATCH_BYTES = 1 << 18  # packets per compressed_packets batch

# Track uuids: processes are their vpid; threads, counters and notes live in
# disjoint high ranges.
THREAD_TRACKS = 1 << 62
COUNTER_TRACKS = 1 << 61
NOTE_TRACK = 1 << 60


def process_uuid(vpid: int) -> int:
    return vpid


def thread_uuid(vpid: int, vtid: int) -> int:
    return THREAD_TRACKS | vpid << 31 | vtid


def _varint(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF  # negative int64: two's complement, ten bytes
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [_varint(n) for n in range(1 << 14)]


def varint(n: int) -> bytes:
    return _SMALL[n] if 0 <= n < 16384 else _varint(n)


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
    """One interning table of a sequence: strings to iids, new ones queued for
    the InternedData of the packet that first uses them."""

    def __init__(self, field: int):
        self.field = field
        self.iids: dict[str, int] = {}
        self.new: list[bytes] = []

    def __call__(self, s: str) -> int:
        iid = self.iids.get(s)
        if iid is None:
            iid = self.iids[s] = len(self.iids) + 1
            self.new.append(ld(self.field, tag(1, 0) + varint(iid) + string(2, s)))
        return iid


class ProtoPart:
    """Packets of one input file: one trusted packet sequence."""

    def __init__(self, path: str, seq: int, proc: Proc, file_index: int):
        self.file = open(path, "wb")
        self.seq_field = tag(10, 0) + varint(seq)
        self.proc = proc
        self.pid_shift = proc.vpid - proc.pid
        self.counter_base = COUNTER_TRACKS | file_index << 24
        self.names = Interner(2)
        self.cats = Interner(1)
        self.arg_names = Interner(3)
        self.values = Interner(29)
        self.interners = (self.cats, self.names, self.arg_names, self.values)
        self.tracks: dict[int, int] = {}  # tid -> thread track uuid
        self.counters: dict[str, int] = {}  # counter name -> track uuid
        self.batch: list[bytes] = []
        self.batch_size = 0
        self.flows_dropped = 0
        # The first packet clears the sequence's incremental state (interning).
        self.flags = tag(13, 0) + varint(INCREMENTAL_STATE_CLEARED | NEEDS_INCREMENTAL_STATE)
        self.needs_state = tag(13, 0) + varint(NEEDS_INCREMENTAL_STATE)

    # -- events -------------------------------------------------------------

    def event(self, ev: dict) -> None:
        ph = ev["ph"]
        if ph == "C":
            self._counters(ev)
            return
        track = self._thread_track(ev.get("tid", self.proc.pid))
        ts = round(ev["ts"] * 1000)
        te = (T_TYPE + (b"\x01" if ph == "X" else b"\x03") + T_TRACK_UUID + varint(track)
              + T_NAME_IID + varint(self.names(ev.get("name", "")))
              + T_CATEGORY_IID + varint(self.cats(ev.get("cat", ""))))
        args = ev.get("args")
        if args:
            te += self._annotations(args)
        flow_in = ev.get("_in")
        if flow_in:
            te += T_TERMINATING_FLOW + struct.pack("<Q", flow_in)
        for flow in ev.get("_out", ()):
            te += T_FLOW + struct.pack("<Q", flow)
        self._emit(ts, te)
        if ph == "X":
            end = ts + round(ev.get("dur", 0.0) * 1000)
            self._emit(end, END_TYPE + T_TRACK_UUID + varint(track))

    def _annotations(self, args: dict) -> bytes:
        out = []
        for key, value in args.items():
            body = T_A_NAME_IID + varint(self.arg_names(key))
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
            out.append(T_ANNOTATION + varint(len(body)) + body)
        return b"".join(out)

    def _counters(self, ev: dict) -> None:
        ts = round(ev["ts"] * 1000)
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

    def _emit(self, ts: int, te: bytes) -> None:
        body = T_TIMESTAMP + varint(ts) + self.seq_field
        if any(i.new for i in self.interners):
            interned = b""
            for i in self.interners:
                interned += b"".join(i.new)
                i.new.clear()
            body += ld(12, interned)
        body += T_TRACK_EVENT + varint(len(te)) + te + self.flags
        self.flags = self.needs_state
        self._add(T_PACKET + varint(len(body)) + body)

    # -- tracks -------------------------------------------------------------

    def _thread_track(self, tid: int) -> int:
        uuid = self.tracks.get(tid)
        if uuid is None:
            uuid = self.tracks[tid] = thread_uuid(self.proc.vpid, tid + self.pid_shift)
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
            uuid = self.counters[name] = self.counter_base | len(self.counters)
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
        self.batch_size += len(framed)
        if self.batch_size >= BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self.batch:
            self.file.write(packet(ld(50, zlib.compress(b"".join(self.batch), 6))))
            self.batch.clear()
            self.batch_size = 0

    def close(self) -> tuple[int, int]:
        self._flush()
        self.file.close()
        return 0, 0


def counter_name(event_name: str, key: str) -> str:
    """The counter track's name, as Perfetto's JSON importer names it."""
    return f"{event_name} {key}"
