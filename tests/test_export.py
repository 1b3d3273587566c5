"""`iotrace export`: the exported traces, loaded by Perfetto's own trace
processor (tests/perfetto_tp.py), hold exactly the job's slices, processes,
threads, labels, flows, counters and file names (tests/perfetto_job.py)."""

from __future__ import annotations

import gzip
import json
import os
import zlib

import pytest

import perfetto_job
from perfetto_tp import load_trace, require_trace_processor
from tracing import uvarint

from iotrace.export import cli, gzjoin
from iotrace.export.filters import EventFilter, TimeHistogram
from iotrace.export.labels import build_processes, trace_file
from iotrace.export.merge import export

FORMATS = ["job.json.gz", "job.pftrace"]
# Perfetto always has a placeholder process (upid 0) and thread (utid 0).
REAL_PROCESSES = "from process where upid != 0"
REAL_THREADS = "from thread where utid != 0"


@pytest.fixture(autouse=True)
def fast_pftrace(monkeypatch):
    """The block-at-a-time .pftrace writer (fast_proto) even for these small files;
    test_fast_and_slow_pftrace_are_the_same compares it with ProtoPart's."""
    monkeypatch.setenv("IOTRACE_EXPORT_FAST", "1")


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
    h = TimeHistogram()
    for ts in range(100):
        h.add(float(ts))
    assert h.cutoff(1000) == (None, 100)
    assert h.cutoff(10) == (10.0, 10)


# -- labels ------------------------------------------------------------------------


def test_labels_and_sort_order(job):
    from iotrace.export.merge import _first_event, reader

    r = reader()
    files = [trace_file(p, i, _first_event(r, p)) for i, p in
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
    with pytest.raises(Exception):
        cli.duration_us("fast")


# -- the two .pftrace writers ------------------------------------------------------


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


def decoded_pftrace(path):
    """Per sequence, its events in file order with the interned strings resolved
    (names, categories, annotation names and values), and the track descriptors."""
    seqs, tables, descriptors = {}, {}, []
    for packet in _packets(open(path, "rb").read()):
        d = {}
        for f, v in _fields(packet):
            d.setdefault(f, []).append(v)
        if 60 in d:
            descriptors.append(d[60][0])
            continue
        seq = d.get(10, [0])[0]
        table = tables.setdefault(seq, {})
        for data in d.get(12, []):
            for kind, entry in _fields(data):
                e = dict(_fields(entry))
                table.setdefault(kind, {})[e[1]] = e[2].decode()
        if 11 not in d:
            continue
        event = []
        for f, v in _fields(d[11][0]):
            if f == 10:
                v = table[2][v]
            elif f == 3:
                v = table[1][v]
            elif f == 4:
                a = dict(_fields(v))
                v = (table[3][a.pop(1)],) + tuple(
                    table[29][x] if k == 17 else x for k, x in a.items())
            event.append((f, v))
        seqs.setdefault(seq, []).append((d[8][0], tuple(event)))
    return seqs, sorted(descriptors)


def test_fast_and_slow_pftrace_are_the_same(job, tmp_path, monkeypatch):
    """fast_proto writes the packets ProtoPart writes, in the same order (only the
    interning may be laid out differently)."""
    fast, _ = exported(job, tmp_path, "fast.pftrace")
    monkeypatch.setenv("IOTRACE_EXPORT_SLOW", "1")
    slow, _ = exported(job, tmp_path, "slow.pftrace")
    assert decoded_pftrace(fast) == decoded_pftrace(slow)


def test_fast_pftrace_across_blocks(tmp_path, monkeypatch):
    """A bigger job read in many small blocks: flows held across blocks, counters,
    Python steps, forks of lines split between the scanner and orjson."""
    import importlib.util

    from iotrace.export import fast_proto

    spec = importlib.util.spec_from_file_location("export_bench", os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
        "export_bench.py"))
    export_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export_bench)
    monkeypatch.setattr(export_bench, "FRAME_LINES", 200)  # many small zstd frames

    monkeypatch.setattr(fast_proto, "BLOCK_BYTES", 20_000)
    monkeypatch.setattr(fast_proto, "BATCH_BYTES", 8_000)
    folder = tmp_path / "traces"
    folder.mkdir()
    export_bench.write_process(str(folder / "python3.11-bench-1000.pfw.zst"), 1000, "main",
                               0, 6000, None, 1e6, 1)
    for n, start in enumerate((1e6 + 500, 1e6 + 40_000)):  # spawned early, and mid-way
        export_bench.write_process(str(folder / f"python3.11-bench-{1010 + n}.pfw.zst"),
                                   1010 + n, "dataloader", 0, 3000, 1000, start, 2 + n, n)
    out = {}
    for mode in ("FAST", "SLOW"):
        monkeypatch.delenv("IOTRACE_EXPORT_FAST", raising=False)
        monkeypatch.setenv(f"IOTRACE_EXPORT_{mode}", "1")
        out[mode] = str(tmp_path / f"{mode}.pftrace")
        result = export([str(folder)], out[mode], jobs=1)
        assert result.flows == 2
        monkeypatch.delenv(f"IOTRACE_EXPORT_{mode}")
    assert decoded_pftrace(out["FAST"]) == decoded_pftrace(out["SLOW"])


# -- the per-event filters in the block-at-a-time writer ----------------------------

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


if __name__ == "__main__":
    io("main-a", 300)
    t = threading.Thread(target=io, args=("thread", 200), name="loader")
    t.start()
    with iotrace.region("checkpoint", cat="ckpt", step=1):
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
    resolution (where parents and children often start at the same time).
    resolution -> (trace folder, the main process's pid, the first event and the span
    of the events in µs since the job's start)."""
    import sys

    import tracing

    base = tmp_path_factory.mktemp("real")
    script = base / "prog.py"
    script.write_text(REAL_PROGRAM)
    jobs = {}
    for res in ("ns", "us"):
        data = base / f"data-{res}"
        data.mkdir()
        ts = tracing.run_traced([sys.executable, str(script), str(data)], base,
                                {"IOTRACE_RESOLUTION": res}, include=[data],
                                trace_dir=base / f"traces-{res}")
        assert len(ts.files) == 3
        start = min(f.header["mono_ns"] for f in ts.files) / 1000
        timed = [e for f in ts.files for e in f.records if e.get("ph") in ("X", "i", "C")]
        first = min(e["ts"] for e in timed)
        end = max(e["ts"] + e.get("dur", 0) for e in timed)
        jobs[res] = (str(ts.dir), ts.pid, first - start, end - first)
    return jobs


def _small_blocks(monkeypatch, lines: int = 25) -> None:
    """The reader's blocks cut into pieces of a few lines (a real trace of a short run
    is one zstd frame or two), so that fast_proto works on many blocks."""
    from iotrace.export import fast_proto
    from iotrace.export.merge import reader

    r = reader()
    whole = r.iter_blocks

    def iter_blocks(path, damage=None, chunk=None):
        for block in whole(path, damage, chunk):
            rows = block.split(b"\n")[:-1]
            for i in range(0, len(rows), lines):
                yield b"\n".join(rows[i:i + lines]) + b"\n"

    monkeypatch.setattr(r, "iter_blocks", iter_blocks)
    monkeypatch.setattr(fast_proto, "BLOCK_BYTES", 2_000)
    monkeypatch.setattr(fast_proto, "BATCH_BYTES", 4_000)


def fast_and_slow(monkeypatch, tmp_path, folder, filters):
    """The .pftrace of both writers with the same filters: (paths, results)."""
    from iotrace.export import fast_proto

    blocks = []
    block = fast_proto.FileExport.block
    monkeypatch.setattr(fast_proto.FileExport, "block",
                        lambda self, text: blocks.append(1) or block(self, text))
    out, res = {}, {}
    for mode in ("FAST", "SLOW"):
        monkeypatch.delenv("IOTRACE_EXPORT_FAST", raising=False)
        monkeypatch.delenv("IOTRACE_EXPORT_SLOW", raising=False)
        monkeypatch.setenv(f"IOTRACE_EXPORT_{mode}", "1")
        out[mode] = str(tmp_path / f"{mode}.pftrace")
        del blocks[:]
        res[mode] = export([folder], out[mode], EventFilter(**filters), jobs=1)
        assert bool(blocks) == (mode == "FAST")  # which writer ran
    return out, res


# Window bounds as fractions of the span of the events (keys ending in _frac); the
# job starts earlier, with its first process.
REAL_FILTERS = [
    ({"cats": ["posix"]}, True),
    ({"cats": ["compute", "fetch"]}, True),  # parents whose children are left out
    ({"cats": ["p*"]}, True),
    ({"names": ["write", "step"]}, True),
    ({"names": ["fork"]}, True),
    ({"names": ["nothing*"]}, True),  # nothing left, not even the arrows
    ({"min_dur_us": 1.0}, True),
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
    ({"min_dur_us": 1.0, "max_events": 300}, True),
    ({"names": ["write", "step"], "window_from_frac": 0.2, "max_events": 400}, True),
    ({"max_events": 500}, False),  # no per-event filter: the cut alone
    ({"pids": {0}, "cats": ["posix"]}, True),  # 0: the main process
]


@pytest.mark.parametrize("resolution", ["ns", "us"])
@pytest.mark.parametrize("filters, filtering", REAL_FILTERS,
                         ids=[str(i) for i in range(len(REAL_FILTERS))])
def test_fast_pftrace_filters_like_the_slow_one(real_jobs, tmp_path, monkeypatch, resolution,
                                                filters, filtering):
    """--cat, --name, --from/--to, --min-dur (and --max-events on top) in fast_proto:
    the packets and the counts of ProtoPart's export with the same filters."""
    folder, main, first, span = real_jobs[resolution]
    filters = dict(filters)
    for key in ("window_from", "window_to"):
        if f"{key}_frac" in filters:
            filters[f"{key}_us"] = first + filters.pop(f"{key}_frac") * span
    if filters.get("pids") == {0}:
        filters["pids"] = {main}  # with its children
    _small_blocks(monkeypatch)
    out, res = fast_and_slow(monkeypatch, tmp_path, folder, filters)
    fast, slow = res["FAST"], res["SLOW"]
    assert fast.summary() == slow.summary()
    assert (fast.filtered > 0) == filtering
    assert fast.cut > 0 or "max_events" not in filters
    assert decoded_pftrace(out["FAST"]) == decoded_pftrace(out["SLOW"])


def test_fast_pftrace_filters_in_whole_blocks(real_jobs, tmp_path, monkeypatch):
    """The same with the file in one block (no held slices carried between blocks)."""
    folder, _, first, span = real_jobs["us"]
    filters = {"cats": ["compute", "posix"], "min_dur_us": 1.0,
               "window_from_us": first + 0.1 * span}
    out, res = fast_and_slow(monkeypatch, tmp_path, folder, filters)
    assert res["FAST"].summary() == res["SLOW"].summary() and res["FAST"].filtered > 0
    assert decoded_pftrace(out["FAST"]) == decoded_pftrace(out["SLOW"])


def _write_io_lines(path: str, pid: int, t0_ns: int, times: list[tuple[str, str]]) -> None:
    """A per-process trace of plain I/O slices in the tracer's layout (what the
    scanner takes), with the given ts and dur texts; each slice's offset is its number."""
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
                     f'"tid":{pid + k % 3},"ts":{ts},"dur":{dur},"args":{{"fhash":'
                     f'"00000000000000ff","size":8,"offset":{k},"ret":8,"fd":3}}}}')
    with open(path, "w") as f:
        f.write("[\n" + ",\n".join(lines) + "]\n")


def _offsets(path):
    """Per sequence, the offset annotation of each slice begin, in file order."""
    seqs, _ = decoded_pftrace(path)
    return {seq: [a[1] for _, ev in evs for f, a in ev if f == 4 and a[0] == "offset"]
            for seq, evs in seqs.items()}


def test_fast_pftrace_filters_times_as_parsed_floats(tmp_path, monkeypatch):
    """On a host up for four months ts * 1000 passes 2**53: the window and --min-dur
    compare the floats the slow path parses, not the ns the scanner reads. The slow
    path's own timestamps are then off by a ns or two, so compare which slices are
    kept (by their offsets), in which order, and the counts."""
    t0 = 10_000_000_000_000  # µs since boot (116 days)
    times = [(f"{t0 + k // 1000}.{k % 1000:03d}", f"0.{(k * 7) % 13:03d}")
             for k in range(3000)]
    _write_io_lines(str(tmp_path / "io-h-7.pfw"), 7, t0 * 1000, times)
    _small_blocks(monkeypatch, lines=300)
    for filters in ({"window_from_us": 0.8, "window_to_us": 2.2},
                    {"min_dur_us": 0.006, "window_from_us": 1.0000001},
                    {"window_to_us": 1.5005}):
        out, res = fast_and_slow(monkeypatch, tmp_path, str(tmp_path), filters)
        assert res["FAST"].summary() == res["SLOW"].summary()
        assert 0 < res["FAST"].filtered < len(times)
        assert _offsets(out["FAST"]) == _offsets(out["SLOW"])


@pytest.mark.parametrize("filters", [{}, {"window_from_us": 0.0025, "window_to_us": 0.0125},
                                     {"min_dur_us": 0.0005}])
def test_fast_pftrace_sub_ns_times(tmp_path, monkeypatch, filters):
    """A ts or dur with more than three decimals (not the tracer's, but valid): the
    scanner would drop the digits ProtoPart rounds; such lines go to ProtoPart."""
    t0 = 1_000_000
    times = [(f"{t0}.{k:03d}" + ("5" if k % 3 == 0 else ""),
              "0.000" + ("6" if k % 4 == 0 else "")) for k in range(20)]
    _write_io_lines(str(tmp_path / "io-h-7.pfw"), 7, t0 * 1000, times)
    out, res = fast_and_slow(monkeypatch, tmp_path, str(tmp_path), filters)
    assert res["FAST"].summary() == res["SLOW"].summary()
    assert (res["FAST"].filtered > 0) == bool(filters)
    assert decoded_pftrace(out["FAST"]) == decoded_pftrace(out["SLOW"])
