"""`iotrace export`: the exported traces, loaded by Perfetto's own trace
processor (tests/perfetto_tp.py), hold exactly the job's slices, processes,
threads, labels, flows, counters and file names (tests/perfetto_job.py)."""

from __future__ import annotations

import argparse
import collections
import fnmatch
import gzip
import json
import math
import os
import struct
import zlib
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import orjson
import pytest

import perfetto_job
from perfetto_tp import load_trace, require_trace_processor
from tracing import uvarint

from iotrace_analyzer.export import cli, gzjoin
from iotrace_analyzer.export.filters import EventFilter, TimeHistogram
from iotrace_analyzer.export.labels import build_processes, trace_file
from iotrace_analyzer.export.merge import export

FORMATS = ["job.json.gz", "job.pftrace"]
# Perfetto always has a placeholder process (upid 0) and thread (utid 0).
REAL_PROCESSES = "from process where upid != 0"
REAL_THREADS = "from thread where utid != 0"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("job")
    return folder, perfetto_job.write_job(str(folder), compression="zstd")


def exported(job, tmp_path, name, **filters):
    folder, _ = job
    out = str(tmp_path / name)
    result = export([str(folder)], out, EventFilter(**filters))
    return out, result


# -- the whole job, in both formats, as Perfetto sees it ------------------------


@pytest.mark.parametrize("name", FORMATS)
def test_counts_match_the_input(job, tmp_path, name):
    require_trace_processor()
    out, result = exported(job, tmp_path, name)
    expect = job[1]
    assert result.events == expect["slices"] + expect["instants"] + 2  # + 2 counter events
    with load_trace(out) as tp:
        assert tp.scalar("select count(*) from slice") == expect["slices"] + expect["instants"]
        assert tp.scalar("select count(*) from slice where dur > 0") == expect["slices"]
        assert tp.scalar(f"select count(*) {REAL_PROCESSES}") == len(expect["labels"])
        assert tp.scalar(f"select count(*) {REAL_THREADS}") == len(expect["threads"])
        assert tp.scalar("select count(*) from flow") == len(expect["flows"])
        assert tp.scalar("select count(*) from stats where severity in ('error', 'data_loss') "
                         "and value > 0") == 0


@pytest.mark.parametrize("name", FORMATS)
def test_processes_and_threads_are_labelled(job, tmp_path, name):
    require_trace_processor()
    out, _ = exported(job, tmp_path, name)
    expect = job[1]
    with load_trace(out) as tp:
        procs = {r["pid"]: r["name"] for r in tp.query(f"select pid, name {REAL_PROCESSES}")}
        threads = {(r["pid"], r["tid"]): r["name"] for r in tp.query(
            "select p.pid, t.tid, t.name from thread t join process p using(upid) "
            "where t.utid != 0")}
    assert procs == expect["labels"]
    assert threads == expect["threads"]


@pytest.mark.parametrize("name", FORMATS)
def test_flows_go_from_fork_or_spawn_to_the_child(job, tmp_path, name):
    require_trace_processor()
    out, result = exported(job, tmp_path, name)
    with load_trace(out) as tp:
        flows = tp.query(
            "select so.name src, po.pid src_pid, si.name dst, pi.pid dst_pid, si.ts dst_ts "
            "from flow f "
            "join slice so on so.id = f.slice_out join thread_track tto on so.track_id = tto.id "
            "join thread to_ on to_.utid = tto.utid join process po on po.upid = to_.upid "
            "join slice si on si.id = f.slice_in join thread_track tti on si.track_id = tti.id "
            "join thread ti on ti.utid = tti.utid join process pi on pi.upid = ti.upid")
    assert {(f["src"], f["dst"]) for f in flows} == job[1]["flows"]
    assert {(f["src_pid"], f["dst_pid"]) for f in flows} == {(100, 200), (100, 300), (100, 301)}
    # The child's end is its earliest slice, though the file wrote it second.
    t0 = int(perfetto_job.T0 * 1000)
    assert {f["dst_pid"]: f["dst_ts"] - t0 for f in flows}[200] == 165_000
    assert result.flows == 3


@pytest.mark.parametrize("name", FORMATS)
def test_counters_become_counter_tracks(job, tmp_path, name):
    require_trace_processor()
    out, _ = exported(job, tmp_path, name)
    with load_trace(out) as tp:
        rows = tp.query("select t.name, c.value from counter c join counter_track t "
                        "on c.track_id = t.id order by t.name, c.ts")
    values: dict[str, list] = {}
    for r in rows:
        values.setdefault(r["name"], []).append(r["value"])
    assert values == job[1]["counters"]


@pytest.mark.parametrize("name", FORMATS)
def test_file_names_are_restored(job, tmp_path, name):
    require_trace_processor()
    out, _ = exported(job, tmp_path, name)
    with load_trace(out) as tp:
        rows = tp.query("select display_value f, count(*) n from args "
                        "where key glob '*.fname' group by f")
        assert tp.scalar("select count(*) from args where key glob '*.fhash*'") == 0
    assert {r["f"]: r["n"] for r in rows} == job[1]["fnames"]


@pytest.mark.parametrize("name", FORMATS)
def test_nesting_survives_children_written_before_parents(job, tmp_path, name):
    """rank 1's `epoch` starts at the same instant as the read inside it, and is
    written after it: it must still be the parent."""
    require_trace_processor()
    out, _ = exported(job, tmp_path, name)
    with load_trace(out) as tp:
        rows = tp.query("select s.name, s.depth, s.dur from slice s join thread_track tt "
                        "on s.track_id = tt.id join thread using(utid) where tid = 400")
    assert {(r["name"], r["depth"], r["dur"]) for r in rows} == {
        ("epoch", 0, 10_001), ("read", 1, 4_000)} if name.endswith("pftrace") else {
        ("epoch", 0, 10_000), ("read", 1, 4_000)}


# -- the JSON file itself ------------------------------------------------------


def test_json_gz_is_one_gzip_member_of_strict_json(job, tmp_path):
    out, result = exported(job, tmp_path, "job.json.gz")
    raw = open(out, "rb").read()
    inflate = zlib.decompressobj(31)
    text = inflate.decompress(raw)
    assert inflate.eof and inflate.unused_data == b""  # one member, nothing after it
    doc = json.loads(text)
    assert gzip.decompress(raw) == text  # the gzip trailer (combined CRC) is right
    assert doc["metadata"]["iotrace_export"]["events"] == result.events
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == job[1]["slices"]
    assert not any("fhash" in e.get("args", {}) for e in xs)


def test_plain_json_output(job, tmp_path):
    out, _ = exported(job, tmp_path, "job.json")
    doc = json.load(open(out))
    assert sum(e["ph"] == "X" for e in doc["traceEvents"]) == job[1]["slices"]


def test_crc32_combine_matches_zlib():
    a, b = os.urandom(5000), b"tail" * 1000
    assert gzjoin.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
    assert gzjoin.crc32_combine(zlib.crc32(a), 0, 0) == zlib.crc32(a)


# -- cutting down ----------------------------------------------------------------


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("filters, slices, pids", [
    ({"cats": ["posix"]}, 10, {100, 200, 300, 301, 400}),
    ({"names": ["read"]}, 6, {100, 200, 300, 301, 400}),
    ({"names": ["train.*", "epoch"]}, 3, {100, 200, 300, 301, 400}),
    ({"min_dur_us": 10.0}, 5, {100, 200, 300, 301, 400}),
    ({"pids": {200}}, 4, {200}),
    ({"ranks": {1}}, 2, {400}),
    ({"ranks": {0}}, 15, {100, 200, 300, 301}),
    # the job starts at T0 (rank 0 and rank 1's start): 150..200 µs after it
    ({"window_from_us": 150.0, "window_to_us": 200.0}, 6, {100, 200, 300, 301, 400}),
])
def test_filters(job, tmp_path, name, filters, slices, pids):
    require_trace_processor()
    out, result = exported(job, tmp_path, name, **filters)
    with load_trace(out) as tp:
        assert tp.scalar("select count(*) from slice") == slices
        assert {r["pid"] for r in tp.query(f"select pid {REAL_PROCESSES}")} == pids
    assert result.events - result.counters == slices


@pytest.mark.parametrize("name", FORMATS)
def test_max_events_keeps_the_first_events_and_says_so(job, tmp_path, name):
    require_trace_processor()
    out, result = exported(job, tmp_path, name, max_events=6)
    assert result.events == 6 and result.cut == 19 - 6
    with load_trace(out) as tp:
        notes = tp.query("select name, ts from slice where name glob 'iotrace export:*'")
        kept = tp.scalar("select count(*) from slice where name not glob 'iotrace export:*'")
        counters = tp.scalar("select count(*) from counter")
    assert kept + counters == 6
    assert len(notes) == 1 and "13 later events left out" in notes[0]["name"]


def test_time_histogram_cutoff():
    import numpy as np

    h = TimeHistogram()
    h.add_ns(np.arange(100, dtype=np.int64) * 1000 + 7)  # one event per µs
    assert h.cutoff(1000) == (None, 100)
    assert h.cutoff(10) == (10_000, 10)  # ns
    # coarsened past MAX_BUCKETS: the cut falls on a wider bucket's boundary, keeping fewer
    h = TimeHistogram()
    h.add_ns(np.arange(200_000, dtype=np.int64) * 1000)
    assert h.total == 200_000 and len(h.counts) <= TimeHistogram.MAX_BUCKETS
    cut, kept = h.cutoff(100_000)
    assert cut % ((1 << h.shift) * 1000) == 0 and kept == cut // 1000 <= 100_000


# -- labels ------------------------------------------------------------------------


def test_labels_and_sort_order(job):
    from iotrace_analyzer.export.merge import _first_event

    files = [trace_file(p, i, _first_event(p)) for i, p in
             enumerate(sorted(job[1]["paths"]))]
    procs = build_processes(files)
    assert [p.pid for p in procs] == job[1]["sort_order"]
    assert {p.pid: p.label for p in procs} == job[1]["labels"]
    assert [len(p.files) for p in procs] == [1, 2, 1, 1, 1]  # exec keeps the pid


def test_two_hosts_keep_equal_pids_apart(tmp_path):
    for host in ("a", "b"):
        w = perfetto_job.ProcWriter(100, "main", {"RANK": "0" if host == "a" else "1"})
        w.events[0]["args"]["hostname"] = host
        w.slice("work", "python", perfetto_job.T0 + 1, 1.0)
        w.write(str(tmp_path / f"python3.11-{host}-100.pfw"))
    out = str(tmp_path / "job.json")
    result = export([str(tmp_path)], out)
    doc = json.load(open(out))
    assert result.processes == 2
    assert len({e["pid"] for e in doc["traceEvents"] if e["ph"] == "X"}) == 2


# -- the per-process traces themselves ---------------------------------------------


@pytest.mark.parametrize("compression", ["gzip", "none"])
def test_raw_per_process_traces_load_in_perfetto(tmp_path, compression):
    """IOTRACE_COMPRESSION=gzip or none: each file opens in Perfetto as it is,
    the crashed (truncated) one included."""
    require_trace_processor()
    expect = perfetto_job.write_job(str(tmp_path), compression=compression)
    rank0 = expect["paths"][0]  # written without iotrace_end and `]`
    with load_trace(rank0) as tp:
        assert tp.scalar("select count(*) from slice") == 8 + 1  # X + the instant
        assert tp.scalar("select count(*) from counter") == 4
        assert tp.scalar("select name from process where pid = 100") == "python3.11"


# -- the command line --------------------------------------------------------------


def test_cli_export(job, tmp_path, capsys):
    out = str(tmp_path / "cli.pftrace")
    rc = cli.main(["export", str(job[0]), "-o", out, "--cat", "posix", "--from", "0",
                   "--to", "1s", "--min-dur", "0.5us", "-j", "1"])
    assert rc == 0 and os.path.getsize(out) > 0
    err = capsys.readouterr().err
    assert "5 processes" in err and "left out:" in err


def test_cli_rejects_an_unknown_format(job, tmp_path, capsys):
    assert cli.main(["export", str(job[0]), "-o", str(tmp_path / "x.txt")]) == 2
    assert "unknown output format" in capsys.readouterr().err


def test_duration_units():
    assert cli.duration_us("250us") == 250
    assert cli.duration_us("1.5ms") == 1500
    assert cli.duration_us("2", "s") == 2e6
    with pytest.raises(argparse.ArgumentTypeError):
        cli.duration_us("fast")




# -- the .pftrace packets, against the events they stand for ---------------------------------


def _fields(b):
    p = 0
    while p < len(b):
        key, p = uvarint(b, p)
        if key & 7 == 0:
            v, p = uvarint(b, p)
        elif key & 7 == 1:
            v, p = b[p:p + 8], p + 8
        else:
            n, p = uvarint(b, p)
            v, p = b[p:p + n], p + n
        yield key >> 3, v


def _packets(data):
    for _, packet in _fields(data):
        comp = [v for f, v in _fields(packet) if f == 50]
        if comp:
            yield from _packets(zlib.decompress(comp[0]))
        else:
            yield packet


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def decoded_pftrace(path):
    """The trace as Perfetto would read it, decoded here: slices (a SLICE_BEGIN and the
    SLICE_END that closes it on its track), instants and counter values with their thread,
    names, categories and annotations resolved through each sequence's interning, and the
    flows on them. {"slices": [...], "instants": [...], "counters": [...], "threads": {...},
    "flags": [...], "notes": [...]}; a slice is a dict with begin, end, pid, tid, name, cat, args, out, in."""
    tables, tracks, counters, open_, defaults = {}, {}, {}, {}, {}
    clocks, last = {}, {}  # per sequence: the default clock of its timestamps, its last value
    out = {"slices": [], "instants": [], "counters": [], "threads": {}, "flags": [], "notes": []}
    for packet in _packets(open(path, "rb").read()):
        d = {}
        for f, v in _fields(packet):
            d.setdefault(f, []).append(v)
        if 60 in d:
            desc = dict(_fields(d[60][0]))
            if 4 in desc:
                th = dict(_fields(desc[4]))
                tracks[desc[1]] = (th[1], th[2])
                if 5 in th:
                    out["threads"][(th[1], th[2])] = th[5].decode()
            elif 8 in desc:
                counters[desc[1]] = desc[2].decode()
            continue
        seq = d.get(10, [0])[0]
        if 13 in d and d[13][0] & 1:  # incremental state cleared: interning, defaults
            tables[seq] = {}
            defaults.pop(seq, None)
            clocks.pop(seq, None)
        if 59 in d:  # TracePacketDefaults: the track of events that name none, the clock
            packet_defaults = dict(_fields(d[59][0]))
            defaults[seq] = dict(_fields(packet_defaults[11]))[11]
            clocks[seq] = packet_defaults.get(58, 6)
        if 6 in d:  # a ClockSnapshot: the sequence's incremental clock starts at the trace's 0
            snap = [dict(_fields(c)) for f, c in _fields(d[6][0]) if f == 1]
            assert snap == [{1: 6, 2: 0}, {1: 64, 2: 0, 3: 1}], snap
            last[seq] = 0
        if 8 in d:  # the timestamp: on the trace clock, or the time since the sequence's last
            clock = d.get(58, [clocks.get(seq, 6)])[0]
            assert clock in (6, 64), clock
            if clock == 64:
                last[seq] += d[8][0]
                d[8] = [last[seq]]
        table = tables.setdefault(seq, {})
        for data in d.get(12, []):
            for kind, entry in _fields(data):
                e = dict(_fields(entry))
                assert e[1] not in table.setdefault(kind, {}), "an iid interned twice"
                table[kind][e[1]] = e[2].decode()
        if 13 in d:
            out["flags"].append((seq, d[13][0]))
        if 11 not in d:
            continue
        te = {}
        for f, v in _fields(d[11][0]):
            te.setdefault(f, []).append(v)
        kind, track, ts = te[9][0], te.get(11, [defaults.get(seq)])[0], d[8][0]
        if 23 in te:  # the export's notes: named inline, on a track of their own
            out["notes"].append((te[23][0].decode(), ts))
            continue
        if kind == 4:
            value = (_signed(te[30][0]) if 30 in te
                     else struct.unpack("<d", te[44][0])[0])
            out["counters"].append((counters[track], ts, value))
            continue
        if kind == 2:
            s = open_[track].pop()
            s["end"] = ts
            out["slices"].append(s)
            continue
        args = {}
        for a in te.get(4, []):
            a = dict(_fields(a))
            key = table[3][a[1]]
            if 17 in a:
                args[key] = table[29][a[17]]
            elif 4 in a:
                args[key] = _signed(a[4])
            elif 5 in a:
                args[key] = struct.unpack("<d", a[5])[0]
            elif 2 in a:
                args[key] = bool(a[2])
            else:
                args[key] = ("json", json.loads(a[9]))
        pid, tid = tracks[track]
        ev = {"begin": ts, "pid": pid, "tid": tid, "name": table[2][te[10][0]],
              "cat": table[1][te[3][0]], "args": args,
              "out": [struct.unpack("<Q", v)[0] for v in te.get(47, [])],
              "in": [struct.unpack("<Q", v)[0] for v in te.get(48, [])]}
        if kind == 1:
            open_.setdefault(track, []).append(ev)
        else:
            out["instants"].append(ev)
    assert not any(open_.values()), "a slice without its end"
    return out


def _ns(text) -> int:
    """µs as the trace writes them -> ns, rounded half up (the reader's rule)."""
    return int((Decimal(str(text)) * 1000).to_integral_value(ROUND_HALF_UP))


def _arg_value(v):
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, (dict, list)) or (isinstance(v, str) and len(v) > 256):
        return ("json", json.loads(json.dumps(v, default=float)))
    return v


def expected_events(folder, filters=None):
    """What the export of `folder` must hold, worked out here one event at a time from the
    JSON lines (what `iotrace cat` prints) with the documented rules: the filters, the
    --max-events cut (1 µs buckets: these jobs are small), file names restored, the flows.
    Returns (events as decoded_pftrace gives them, counts)."""
    from iotrace_format.reader import find_traces, iter_lines

    f = filters or {}
    files = []
    for path in find_traces([str(folder)]):
        lines = [json.loads(ln, parse_float=Decimal) for ln in iter_lines(path)]
        files.append((path, lines))
    info = {path: ln[0]["args"] for path, ln in files if ln and ln[0].get("name") == "iotrace_process"}
    job_start = min(i["mono_ns"] for i in info.values())
    start = None if f.get("window_from_us") is None else job_start + math.ceil(f["window_from_us"] * 1000)
    end = None if f.get("window_to_us") is None else job_start + math.floor(f["window_to_us"] * 1000)
    pids = {i["pid"]: i for i in info.values()}

    def ancestors(pid):
        while pid in pids and pids[pid].get("parent_pid"):
            pid = pids[pid]["parent_pid"]
            yield pid

    def keeps(ev):
        if f.get("cats") and not any(fnmatch.fnmatchcase(ev.get("cat", ""), p) for p in f["cats"]):
            return False
        if f.get("names") and not any(fnmatch.fnmatchcase(ev.get("name", ""), p) for p in f["names"]):
            return False
        ts, dur = _ns(ev.get("ts", 0)), _ns(ev.get("dur", 0))
        if f.get("min_dur_us") and ev["ph"] == "X" and dur < f["min_dur_us"] * 1000:
            return False
        return (end is None or ts <= end) and (start is None or ts + dur >= start)

    kept, filtered = [], 0
    for path, lines in files:
        pid = info[path]["pid"] if path in info else lines[0]["pid"]
        if f.get("pids") and not f["pids"] & {pid, *ancestors(pid)}:
            continue
        names = {}
        for ev in lines:
            if ev["ph"] == "M" and ev["name"] == "FH":
                names[ev["args"]["value"]] = ev["args"]["name"]
            if ev["ph"] not in ("X", "i", "I", "C"):
                continue
            if not keeps(ev):
                filtered += 1
                continue
            args = dict(ev.get("args") or {})
            for key, new in (("fhash", "fname"), ("fhash2", "fname2")):
                if key in args:
                    h = args.pop(key)
                    args[new] = names.get(h, h)
            kept.append((path, pid, ev, {k: _arg_value(v) for k, v in args.items()}))
    cut = 0
    if f.get("max_events") and len(kept) > f["max_events"]:
        per_us = collections.Counter(_ns(ev["ts"]) // 1000 for _, _, ev, _ in kept)
        n, cutoff = 0, None
        for key in sorted(per_us):
            if n + per_us[key] > f["max_events"]:
                cutoff = key * 1000
                break
            n += per_us[key]
        cut = sum(1 for _, _, ev, _ in kept if _ns(ev["ts"]) >= cutoff)
        kept = [k for k in kept if _ns(k[2]["ts"]) < cutoff]

    out = {"slices": [], "instants": [], "counters": []}
    for path, pid, ev, args in kept:
        ts = _ns(ev["ts"])
        if ev["ph"] == "C":
            out["counters"] += [(f"{ev['name']} {k}", ts, v) for k, v in args.items()
                                if isinstance(v, (int, float)) and not isinstance(v, bool)]
            continue
        e = {"path": path, "begin": ts, "pid": pid, "tid": ev.get("tid", pid), "name": ev["name"],
             "cat": ev.get("cat", ""), "args": args}
        if ev["ph"] == "X":
            e["end"] = ts + _ns(ev["dur"])
            out["slices"].append(e)
        else:
            out["instants"].append(e)
    return out, {"events": len(kept), "filtered": filtered, "cut": cut,
                 "counters": sum(1 for _, _, ev, _ in kept if ev["ph"] == "C")}


def expected_flows(folder, slices):
    """(start slice, end slice) of every arrow, by the documented rules, among the kept
    slices (None where that end was filtered out): the fork slice that returned the child's
    pid, else the parent's latest slice starting at or before the child started; the
    child's earliest slice. A slice is its index in `slices`."""
    from iotrace_format.reader import find_traces, iter_lines

    info = {}
    for path in find_traces([str(folder)]):
        first = json.loads(next(iter(iter_lines(path))))
        if first.get("name") == "iotrace_process" and first["args"].get("role") != "exec":
            info[first["args"]["pid"]] = first["args"]
    index = {id(s): i for i, s in enumerate(slices)}
    key = lambda s: index[id(s)]
    firsts = {}
    for s in slices:  # file order: the first of equals wins
        if s["pid"] not in firsts or s["begin"] < firsts[s["pid"]]["begin"]:
            if s["path"] == min(x["path"] for x in slices if x["pid"] == s["pid"]):
                firsts[s["pid"]] = s
    arrows = []
    for pid, i in sorted(info.items()):
        parent = i.get("parent_pid")
        if parent not in info:
            continue
        if i["role"] == "fork":
            src = [s for s in slices if s["pid"] == parent and s["cat"] == "process"
                   and s["name"] in ("fork", "vfork") and s["args"].get("ret") == pid]
            src = src[0] if src else None
        else:
            before = [s for s in slices if s["pid"] == parent and s["begin"] <= i["mono_ns"]]
            latest = max((s["begin"] for s in before), default=None)
            src = next((s for s in before if s["begin"] == latest), None)
        dst = firsts.get(pid)
        arrows.append((None if src is None else key(src), None if dst is None else key(dst)))
    return arrows


def exported_flows(decoded):
    """The arrows of a decoded .pftrace, as expected_flows gives them."""
    ends = collections.defaultdict(lambda: [None, None])
    for s in decoded["slices"]:
        k = (s["pid"], s["tid"], s["name"], s["begin"])
        for flow in s["out"]:
            ends[flow][0] = k
        for flow in s["in"]:
            ends[flow][1] = k
    return sorted((tuple(v) for v in ends.values()), key=repr)


def check_pftrace(out, folder, result, filters=None, flows=True):
    """The exported .pftrace holds exactly the events, args, counters and arrows the
    reference (expected_events) derives from the input, with the counts the export reports."""
    got = decoded_pftrace(out)
    want, counts = expected_events(folder, filters)
    assert {k: getattr(result, k) for k in counts} == counts
    key = lambda e: (e["pid"], e["tid"], e["name"], e["cat"], e.get("end"), repr(sorted(e["args"].items())))
    for kind in ("slices", "instants"):
        g = sorted(got[kind], key=lambda e: (key(e), e["begin"]))
        w = sorted(want[kind], key=lambda e: (key(e), e["begin"]))
        assert [key(e) for e in g] == [key(e) for e in w]
        # the 1 ns rule moves a parent that starts with an earlier-written child
        assert all(e["begin"] - x["begin"] in (0, -1) for e, x in zip(g, w))
        if kind == "instants":
            assert [e["begin"] for e in g] == [e["begin"] for e in w]
    assert sorted(got["counters"]) == sorted(want["counters"])
    assert len(got["notes"]) == bool(counts["cut"])
    # the first packet of each sequence clears its incremental state, no other one
    seqs = [s for s, _ in got["flags"]]
    assert len(seqs) == len(set(seqs)) and all(v == 3 for _, v in got["flags"])
    if flows:
        # the moved starts are the written ones: each expected slice's start as written (two
        # slices of a thread with one name and one start can be written apart by the rule)
        ws = want["slices"]
        order = sorted(range(len(ws)), key=lambda i: (key(ws[i]), ws[i]["begin"]))
        written = dict(zip(order, sorted(got["slices"], key=lambda e: (key(e), e["begin"]))))

        def end(i):
            return None if i is None else tuple(written[i][k] for k in ("pid", "tid", "name", "begin"))

        arrows = [(end(a), end(b)) for a, b in expected_flows(folder, ws)]
        drawn = [a for a in arrows if a[0] or a[1]]
        assert exported_flows(got) == sorted(drawn, key=repr)
        assert result.flows == sum(1 for a in arrows if a[0] and a[1])
    return got


def test_pftrace_holds_the_job(job, tmp_path):
    out, result = exported(job, tmp_path, "job.pftrace")
    got = check_pftrace(out, job[0], result)
    assert len(got["slices"]) == job[1]["slices"] and result.flows == 3
    assert {(p, t): n for (p, t), n in got["threads"].items()} == job[1]["threads"]


REAL_PROGRAM = """
import multiprocessing as mp
import os
import sys
import threading

import iotrace

DATA = sys.argv[1]


@iotrace.trace(cat="compute", args=["i"])
def step(i, f):
    f.write(b"x" * (64 + i % 7))
    return i


@iotrace.trace(cat="fetch")
def load(path):
    with open(path, "rb") as f:
        return f.read()


def io(tag, n):
    path = os.path.join(DATA, tag)
    with open(path, "wb", buffering=0) as f:
        for i in range(n):
            step(i, f) if i % 5 == 0 else f.write(b"y" * (1 + i % 300))
            if i % 50 == 0:
                iotrace.counter("progress", done=i)
    for _ in range(n // 20):
        load(path)


def worker():
    io("worker", 150)


def loader():
    io("thread", 200)
    load(os.path.join(DATA, "main-a"))  # a file the main thread names too: two sequences' path


if __name__ == "__main__":
    io("main-a", 300)
    t = threading.Thread(target=loader, name="loader")
    t.start()
    with iotrace.region("checkpoint", cat="ckpt", step=1, note="x" * 300, shape=[2, 3]):
        io("main-b", 100)
    t.join()
    pid = os.fork()
    if pid == 0:
        io("child", 200)
        os._exit(0)
    os.waitpid(pid, 0)
    p = mp.get_context("fork").Process(target=worker)   # a worker: a spawn arrow
    p.start()
    p.join()
    io("main-c", 100)
"""


@pytest.fixture(scope="module")
def real_jobs(tmp_path_factory):
    """A Python program run under the tracer (POSIX and @trace events, a counter, a
    thread, a fork child and a multiprocessing worker), at the default ns and at µs
    resolution (where parents and children often start at the same time), in the compact
    form and the JSON form. (resolution, form) -> (trace folder, the main process's pid,
    the first event and the span of the events in µs since the job's start)."""
    import sys

    import tracing

    base = tmp_path_factory.mktemp("real")
    script = base / "prog.py"
    script.write_text(REAL_PROGRAM)
    jobs = {}
    for res, form in (("ns", "compact"), ("us", "compact"), ("ns", "json")):
        data = base / f"data-{res}-{form}"
        data.mkdir()
        ts = tracing.run_traced([sys.executable, str(script), str(data)], base,
                                {"IOTRACE_RESOLUTION": res, "IOTRACE_FORMAT": form},
                                include=[data], trace_dir=base / f"traces-{res}-{form}")
        assert len(ts.files) == 3
        start = min(f.header["mono_ns"] for f in ts.files) / 1000
        timed = [e for f in ts.files for e in f.records if e.get("ph") in ("X", "i", "C")]
        first = min(e["ts"] for e in timed)
        end = max(e["ts"] + e.get("dur", 0) for e in timed)
        jobs[res, form] = (str(ts.dir), ts.pid, first - start, end - first)
    return jobs


def _small_batches(monkeypatch, text_bytes: int = 3000) -> None:
    """The reader's batches cut small (JSON text scanned a few lines at a time; a compact
    file is a batch per frame anyway), so that flows and interning carry across batches."""
    from iotrace_format import reader

    monkeypatch.setattr(reader, "SCAN_BYTES", text_bytes)


# Window bounds as fractions of the span of the events (keys ending in _frac); the
# job starts earlier, with its first process.
REAL_FILTERS = [
    ({}, False),
    ({"cats": ["posix"]}, True),
    ({"cats": ["compute", "fetch"]}, True),  # parents whose children are left out
    ({"cats": ["p*"]}, True),
    ({"names": ["write", "step"]}, True),
    ({"names": ["fork"]}, True),
    ({"names": ["nothing*"]}, True),  # nothing left, not even the arrows
    ({"min_dur_us": 1.0}, None),  # None: whether any call lasts < 1 µs is the machine's speed
    ({"min_dur_us": 2.0}, True),
    ({"window_from_frac": 0.3}, True),
    ({"window_to_frac": 0.6}, True),
    ({"window_from_frac": 0.25, "window_to_frac": 0.75}, True),
    ({"cats": ["posix", "fetch"], "min_dur_us": 1.0}, True),
    ({"names": ["write", "read", "step", "load"], "window_from_frac": 0.1,
      "window_to_frac": 0.9}, True),
    ({"cats": ["posix", "compute", "process"], "names": ["w*", "s*", "f*"], "min_dur_us": 0.9,
      "window_from_frac": 0.2, "window_to_frac": 0.95}, True),
    ({"cats": ["posix"], "max_events": 700}, True),
    ({"min_dur_us": 1.0, "max_events": 300}, None),
    ({"names": ["write", "step"], "window_from_frac": 0.2, "max_events": 400}, True),
    ({"max_events": 500}, False),  # no per-event filter: the cut alone
    ({"pids": {0}, "cats": ["posix"]}, True),  # 0: the main process
]


@pytest.mark.parametrize("kind", [("ns", "compact"), ("us", "compact"), ("ns", "json")],
                         ids=["ns", "us", "json"])
@pytest.mark.parametrize("filters, filtering", REAL_FILTERS,
                         ids=[str(i) for i in range(len(REAL_FILTERS))])
def test_pftrace_of_a_real_job(real_jobs, tmp_path, monkeypatch, kind, filters, filtering):
    """--cat, --name, --from/--to, --min-dur, --pid (and --max-events on top) on a real
    job read in small batches: the .pftrace holds exactly the events, args, counters and
    arrows that the per-event rules give, and the export counts what it left out."""
    folder, main, first, span = real_jobs[kind]
    filters = dict(filters)
    for key in ("window_from", "window_to"):
        if f"{key}_frac" in filters:
            filters[f"{key}_us"] = first + filters.pop(f"{key}_frac") * span
    if filters.get("pids") == {0}:
        filters["pids"] = {main}  # with its children
    _small_batches(monkeypatch)
    if "max_events" in filters:
        # A cut that always cuts: at most half of what the other filters keep (how many
        # events last >= 1 µs depends on the machine's speed).
        rest = {k: v for k, v in filters.items() if k != "max_events"}
        kept = export([folder], str(tmp_path / "uncut.pftrace"), EventFilter(**rest), jobs=1).events
        assert kept >= 4
        filters["max_events"] = min(filters["max_events"], kept // 2)
    out = str(tmp_path / "job.pftrace")
    result = export([folder], out, EventFilter(**filters), jobs=1)
    if filtering is not None:
        assert (result.filtered > 0) == filtering
    assert (result.cut > 0) == ("max_events" in filters)
    check_pftrace(out, folder, result, filters)


def test_pftrace_in_parallel_is_the_same(real_jobs, tmp_path):
    """Worker processes (one task each here) write what one process writes."""
    folder = real_jobs["ns", "compact"][0]
    one, two = str(tmp_path / "one.pftrace"), str(tmp_path / "two.pftrace")
    export([folder], one, jobs=1)
    export([folder], two, jobs=2)
    assert open(one, "rb").read() == open(two, "rb").read()


def test_pftrace_across_many_batches(tmp_path, monkeypatch):
    """A bigger job read in many small batches: spawn arrows whose best start comes in a
    later batch than a first candidate, held slices carried to the end, counters, steps."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("export_bench", os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
        "export_bench.py"))
    export_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export_bench)
    monkeypatch.setattr(export_bench, "FRAME_LINES", 200)  # many small zstd frames
    _small_batches(monkeypatch, 20_000)
    folder = tmp_path / "traces"
    folder.mkdir()
    export_bench.write_process(str(folder / "python3.11-bench-1000.pfw.zst"), 1000, "main",
                               0, 6000, None, 1e6, 1)
    for n, start in enumerate((1e6 + 500, 1e6 + 40_000)):  # spawned early, and mid-way
        export_bench.write_process(str(folder / f"python3.11-bench-{1010 + n}.pfw.zst"),
                                   1010 + n, "dataloader", 0, 3000, 1000, start, 2 + n, n)
    out = str(tmp_path / "job.pftrace")
    result = export([str(folder)], out, jobs=1)
    assert result.flows == 2
    check_pftrace(out, folder, result)


def _write_io_lines(path: str, pid: int, t0_ns: int, times: list[tuple[str, str]],
                    tids: int = 3) -> None:
    """A per-process trace of plain I/O slices in the tracer's layout, with the given ts and
    dur texts; each slice's offset is its number."""
    info = {"version": 2, "hostname": "h", "pid": pid, "ppid": 1, "exe": "/bin/io",
            "cmdline": ["io"], "wall_ns": 0, "mono_ns": t0_ns, "role": "main", "ranks": {},
            "compression": "none"}
    lines = [json.dumps({"ph": "M", "name": "iotrace_process", "pid": pid, "tid": pid,
                         "args": info}, separators=(",", ":")),
             (f'{{"ph":"M","name":"FH","pid":{pid},"tid":{pid},"args":{{"name":"/d/f",'
              f'"value":"00000000000000ff"}}}}')]
    for k, (ts, dur) in enumerate(times):
        name = ("read", "write")[k % 2]
        lines.append(f'{{"ph":"X","name":"{name}","cat":"posix","pid":{pid},'
                     f'"tid":{pid + k % tids},"ts":{ts},"dur":{dur},"args":{{"fhash":'
                     f'"00000000000000ff","size":8,"offset":{k},"ret":8,"fd":3}}}}')
    with open(path, "w") as f:
        f.write("[\n" + ",\n".join(lines) + "]\n")


def test_spawn_arrow_starts_at_the_first_of_slices_sharing_a_start(tmp_path):
    """Two writes of the parent's thread start in the same µs and last as long. A child
    spawned after them gets its arrow from the first in file order, which is held back until
    the file ends, so the 1 ns rule writes it 1 ns earlier than the other: the check must tell
    the two apart by more than (pid, tid, name, start)."""
    t0 = 5_000_000_000  # ns
    _write_io_lines(str(tmp_path / "io-h-7.pfw"), 7, t0, [("5000001", "0.500")] * 2, tids=1)
    text = (tmp_path / "io-h-7.pfw").read_text().replace('"name":"read"', '"name":"write"')
    (tmp_path / "io-h-7.pfw").write_text(text)
    child = {"version": 2, "hostname": "h", "pid": 8, "ppid": 7, "parent_pid": 7, "exe": "/bin/io",
             "cmdline": ["io"], "wall_ns": 0, "mono_ns": t0 + 1_600, "role": "spawn", "ranks": {},
             "compression": "none"}
    lines = [json.dumps({"ph": "M", "name": "iotrace_process", "pid": 8, "tid": 8, "args": child}),
             '{"ph":"X","name":"read","cat":"posix","pid":8,"tid":8,"ts":5000002,"dur":1,"args":{}}']
    (tmp_path / "io-h-8.pfw").write_text("[\n" + ",\n".join(lines) + "]\n")
    out = str(tmp_path / "job.pftrace")
    result = export([str(tmp_path)], out, jobs=1)
    got = check_pftrace(out, tmp_path, result)
    slices = sorted((s["pid"], s["args"].get("offset"), s["begin"], s["end"], bool(s["out"]))
                    for s in got["slices"])
    assert slices == [(7, 0, 5_000_001_000 - 1, 5_000_001_500, True),
                      (7, 1, 5_000_001_000, 5_000_001_500, False),
                      (8, None, 5_000_002_000, 5_000_003_000, False)]
    assert result.flows == 1


def test_filters_with_times_past_2_53_ns(tmp_path, monkeypatch):
    """On a host up for four months ts passes 2**53 ns: the window and --min-dur compare
    integer ns, exactly."""
    t0 = 10_000_000_000_000  # µs since boot (116 days)
    times = [(f"{t0 + k // 1000}.{k % 1000:03d}", f"0.{(k * 7) % 13:03d}")
             for k in range(3000)]
    _write_io_lines(str(tmp_path / "io-h-7.pfw"), 7, t0 * 1000, times)
    _small_batches(monkeypatch, 20_000)
    for filters in ({"window_from_us": 0.8, "window_to_us": 2.2},
                    {"min_dur_us": 0.006, "window_from_us": 1.0000001},
                    {"window_to_us": 1.5005}):
        out = str(tmp_path / "job.pftrace")
        result = export([str(tmp_path)], out, EventFilter(**filters), jobs=1)
        assert 0 < result.filtered < len(times)
        check_pftrace(out, tmp_path, result, filters)


@pytest.mark.parametrize("filters", [{}, {"window_from_us": 0.0025, "window_to_us": 0.0125},
                                     {"min_dur_us": 0.0005}])
def test_sub_ns_times_round_to_the_ns(tmp_path, filters):
    """A ts or dur with more than three decimals (not the tracer's, but valid) is rounded
    to the nearest ns, half up."""
    t0 = 1_000_000
    times = [(f"{t0}.{k:03d}" + ("5" if k % 3 == 0 else ""),
              "0.000" + ("6" if k % 4 == 0 else "")) for k in range(20)]
    _write_io_lines(str(tmp_path / "io-h-7.pfw"), 7, t0 * 1000, times)
    out = str(tmp_path / "job.pftrace")
    result = export([str(tmp_path)], out, EventFilter(**filters), jobs=1)
    assert (result.filtered > 0) == bool(filters)
    check_pftrace(out, tmp_path, result, filters)


def test_parents_starting_with_a_written_child_start_1ns_earlier(tmp_path):
    """Slices on one thread at the same ns, written in order of their ends (children first):
    a slice not shorter than one already written there starts 1 ns earlier; a shorter one
    written after (a child written late) keeps its start."""
    times = [("1000000.000", "1.000"),  # a child
             ("1000000.000", "5.000"),  # its parent: moved
             ("1000000.000", "0.500"),  # shorter than both: kept (and now the shortest)
             ("1000000.000", "0.500"),  # as long as it: moved
             ("1000002.000", "1.000")]  # another start: kept
    _write_io_lines(str(tmp_path / "io-h-7.pfw"), 7, 10**9, times, tids=1)
    out = str(tmp_path / "job.pftrace")
    export([str(tmp_path)], out, jobs=1)
    begins = [(s["args"]["offset"], s["begin"] - 10**9) for s in decoded_pftrace(out)["slices"]]
    assert sorted(begins) == [(0, 0), (1, -1), (2, 0), (3, -1), (4, 2000)]


def test_json_holds_what_the_pftrace_holds(real_jobs, tmp_path):
    """The JSON output, read back, has the slices, args, arrows and thread names of the
    .pftrace (whose starts may be 1 ns earlier: the protobuf has no durations)."""
    folder = real_jobs["us", "compact"][0]
    pf, js = str(tmp_path / "job.pftrace"), str(tmp_path / "job.json.gz")
    export([folder], pf, jobs=1)
    export([folder], js, jobs=2)
    got = decoded_pftrace(pf)
    with gzip.open(js) as f:
        evs = json.load(f, parse_float=Decimal)["traceEvents"]
    key = lambda pid, tid, name, end, args: (pid, tid, name, end, repr(sorted(args.items())))
    xs = sorted((key(e["pid"], e["tid"], e["name"], _ns(e["ts"]) + _ns(e["dur"]),
                     {k: _arg_value(v) for k, v in e.get("args", {}).items()}), _ns(e["ts"]))
                for e in evs if e["ph"] == "X")
    slices = sorted((key(s["pid"], s["tid"], s["name"], s["end"], s["args"]), s["begin"])
                    for s in got["slices"])
    assert [k for k, _ in xs] == [k for k, _ in slices]
    assert all(b - a in (0, 1) for (_, a), (_, b) in zip(slices, xs))
    # each arrow's end binds to the slice that carries it in the .pftrace
    at = {(e["pid"], e["tid"], _ns(e["ts"])): e["name"] for e in evs if e["ph"] == "X"}
    for ph, side in (("s", "out"), ("f", "in")):
        js_ends = sorted((e["pid"], e["tid"], at[e["pid"], e["tid"], _ns(e["ts"])])
                         for e in evs if e["ph"] == ph)
        pf_ends = sorted((s["pid"], s["tid"], s["name"]) for s in got["slices"] for _ in s[side])
        assert js_ends == pf_ends and len(js_ends) == 2
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == got["threads"]


def test_args_objects_keys_and_values_repeating_and_not(tmp_path):
    """Args objects whose keys and short values repeat (the writer compares its last few before
    interning) among others that do not, on two threads (a sequence each), in an order that
    turns the last few over: every event keeps its own args, each string interned once per
    sequence."""
    from iotrace_format import _native

    from iotrace_analyzer import _export

    lines, want = [], []
    for k in range(400):
        tid = 7 + k % 2
        args = {"call": ["pread", "stat", "open"][k % 3], f"k{k % 11}": f"v{k % 13}", "n": k,
                "lone": f"only{k}"}
        lines.append(orjson.dumps({"ph": "X", "name": "op", "cat": "posix", "pid": 7, "tid": tid,
                                   "ts": float(10 * k), "dur": 1.0, "args": args}))
        want.append((tid, args))
    batch = _native.scan_json(b"\n".join(lines) + b"\n")
    out = tmp_path / "part.pftrace"
    with open(out, "wb") as f:
        w = _export.ProtoWriter(f.fileno(), seq=1, vpid=7, pid=7, sort_index=0, file_index=0)
        cols = _export.Columns(batch)
        w.encode(cols, np.arange(cols.rows, dtype=np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64))
        w.close()
    got = decoded_pftrace(str(out))
    assert sorted(((s["tid"], s["args"]) for s in got["slices"]), key=lambda e: e[1]["n"]) == want
    interned = collections.Counter()
    for packet in _packets(out.read_bytes()):
        d = dict(_fields(packet))
        for kind, entry in _fields(d.get(12, b"")):
            interned[d[10], kind, dict(_fields(entry))[2]] += 1
    assert interned[2, 29, b"pread"] == 1 and interned[1, 3, b"call"] == 1  # (tids 7, 8: sequences 1, 2)
    assert set(interned.values()) == {1}


@pytest.mark.parametrize("threads", [False, True])
def test_a_write_error_is_raised_whichever_thread_deflates(threads):
    """A full disk while the deflate thread has batches waiting (4 KiB batches: thousands handed
    over): the writer raises the error instead of going on or hanging, as it does unthreaded."""
    from iotrace_format import _native

    from iotrace_analyzer import _export

    lines = [b'{"ph":"X","name":"read","cat":"posix","pid":7,"tid":7,"ts":%d.0,"dur":1.0,'
             b'"args":{"ret":%d}}' % (10 * k, k) for k in range(20000)]
    cols = _export.Columns(_native.scan_json(b"\n".join(lines) + b"\n"))
    fd = os.open("/dev/full", os.O_WRONLY)
    try:
        w = _export.ProtoWriter(fd, seq=1, vpid=7, pid=7, sort_index=0, file_index=0,
                                batch_bytes=4096, deflate_thread=threads)
        with pytest.raises(RuntimeError, match="No space left on device"):
            w.encode(cols, np.arange(cols.rows, dtype=np.int64), np.zeros(0, np.int64),
                     np.zeros(0, np.uint64))
            w.close()
    finally:
        os.close(fd)


@pytest.mark.parametrize("threads", [False, True])
def test_a_batch_of_many_new_file_names(tmp_path, threads):
    """A batch naming thousands of files in its FH lines (a job that reads a million), used in
    another order: every name is found (the writers look them up a few ahead), none left for
    the names of other files, and each path is interned once."""
    from iotrace_format import _native

    from iotrace_analyzer import _export

    n = 3000
    lines = []
    for i in range(n):
        lines.append(b'{"ph":"M","name":"FH","pid":7,"tid":7,"args":{"name":"/data/d%d/f%07d.bin",'
                     b'"value":"%016x"}}' % (i % 10, i, i * 0x9E3779B97F4A7C15 % 2**64))
    for k in range(n):  # used in another order than named
        i = k * 7 % n
        for call in (b"open", b"read"):
            lines.append(b'{"ph":"X","name":"%s","cat":"posix","pid":7,"tid":7,"ts":%d.0,"dur":1.0,'
                         b'"args":{"fhash":"%016x","ret":0}}'
                         % (call, 10 * k + (5 if call == b"read" else 0),
                            i * 0x9E3779B97F4A7C15 % 2**64))
    batch = _native.scan_json(b"\n".join(lines) + b"\n")
    out = tmp_path / "part.pftrace"
    with open(out, "wb") as f:
        w = _export.ProtoWriter(f.fileno(), seq=1, vpid=7, pid=7, sort_index=0, file_index=0,
                                batch_bytes=4096, deflate_thread=threads)
        rest, taken = w.add_fh(batch.meta)
        assert (rest, taken) == ([], n)
        cols = _export.Columns(batch)
        w.encode(cols, np.arange(cols.rows, dtype=np.int64), np.zeros(0, np.int64),
                 np.zeros(0, np.uint64))
        w.close()
        assert w.unresolved() == []
    got = decoded_pftrace(str(out))
    assert len(got["slices"]) == 2 * n
    assert {s["args"]["fname"] for s in got["slices"]} == {
        f"/data/d{i % 10}/f{i:07d}.bin" for i in range(n)}
    interned = collections.Counter()
    for packet in _packets(out.read_bytes()):
        for f, v in _fields(packet):
            if f == 12:
                interned.update(val for kind, entry in _fields(v) if kind == 29
                                for k, val in _fields(entry) if k == 2)
    assert len(interned) == n and set(interned.values()) == {1}
