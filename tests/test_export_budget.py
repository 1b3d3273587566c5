"""`iotrace export --max-slices`: a job of millions of calls (benchmarks/gen_events.c under the
tracer: lseek + pread rounds) exported within a small budget. Checked against the traces
themselves, decoded here, and against iotrace-analyze's summary: every long or rare slice kept
as it was, every run of short calls merged into one slice with the right count, bytes, time and
file, the sums per process equal to the analysis, the counters adding up; a --window cut in
full detail; a job that fits written as without a budget."""

from __future__ import annotations

import collections
import json
import os
import subprocess

import numpy as np
import orjson
import pytest

import perfetto_job
from perfetto_tp import load_trace, require_trace_processor

from iotrace_analyzer.export import cli
from iotrace_analyzer.export.filters import EventFilter
from iotrace_analyzer.export.merge import export

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(os.path.dirname(HERE), "benchmarks", "gen_events.c")
ROUNDS, PROCS = 700_000, 2  # 2.8M calls
BUDGET = 40_000
READS = {"read", "pread", "pread64", "readv", "preadv", "fread"}


@pytest.fixture(scope="module")
def gen_job(tmp_path_factory):
    """PROCS forked children of ROUNDS lseek + pread rounds each, traced; their events decoded."""
    import iotrace

    work = tmp_path_factory.mktemp("gen")
    exe, traces, data = work / "gen_events", work / "traces", work / "data"
    traces.mkdir()
    data.mkdir()
    subprocess.run(["cc", "-O2", "-o", str(exe), GEN], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_")}
    env.update(LD_PRELOAD=iotrace.preload_path(), IOTRACE_DIR=str(traces))
    subprocess.run([str(exe), str(data), str(ROUNDS), str(PROCS)], env=env, check=True)
    return str(traces), decode(str(traces))


def decode(folder: str) -> dict:
    """Every X event of every trace, per file in file order, as numpy columns; the job's start
    (the earliest process start) and the file names."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from iotrace_format import reader

    files, names, start = [], {}, None
    for path in reader.find_traces([folder]):
        parts = []
        for batch in reader.iter_batches(path):
            for line in batch.meta:
                ev = orjson.loads(line)
                if ev.get("name") == "FH":
                    names[ev["args"]["value"]] = ev["args"]["name"]
                elif ev.get("name") == "iotrace_process":
                    t = ev["args"]["mono_ns"]
                    start = t if start is None else min(start, t)
            if batch.rows:
                rb = pa.record_batch(batch)
                parts.append(rb.filter(pc.equal(rb.column("ph").cast(pa.string()), "X")))
        if not parts:
            continue
        t = pa.Table.from_batches(parts)
        f = {k: np.array(t.column(c).fill_null(-1).to_numpy(), np.int64)
             for k, c in (("pid", "pid"), ("tid", "tid"), ("ts", "ts_ns"), ("dur", "dur_ns"), ("ret", "ret"))}
        for c in ("name", "cat", "fhash"):
            f[c] = t.column(c).cast(pa.string()).to_pylist() if c in t.column_names else [None] * t.num_rows
        files.append(f)
    return {"files": files, "names": names, "start": start}


def expected(ev: dict, threshold_ns: int | None, rare: set) -> tuple[list, list]:
    """The rule, written out call by call: (slices kept as they are, merged runs)."""
    kept, merged = [], []
    limit = threshold_ns if threshold_ns is not None else 1 << 62

    def close(runs: dict) -> None:
        for (_cat, name, fh), r in runs.items():
            if r["count"] == 1:
                kept.append(r["only"])
            else:
                merged.append((r["pid"], name, ev["names"].get(fh, fh), r["start"], r["end"],
                               r["count"], r["bytes"] if name in READS or name == "write" else None,
                               r["dur"]))

    for f in ev["files"]:
        open_runs: dict = collections.defaultdict(dict)  # tid -> key -> run

        pid, tid, ts, dur, ret = (f[k].tolist() for k in ("pid", "tid", "ts", "dur", "ret"))
        for i, (name, cat, fh) in enumerate(zip(f["name"], f["cat"], f["fhash"])):
            one = (pid[i], tid[i], name, ts[i], dur[i])
            if dur[i] >= limit:  # long: kept, and the end of the thread's runs
                close(open_runs.pop(tid[i], {}))
                kept.append(one)
            elif f"{cat}:{name}" in rare:
                kept.append(one)
            else:
                r = open_runs[tid[i]].get((cat, name, fh))
                if r is None:
                    r = open_runs[tid[i]][(cat, name, fh)] = dict(
                        pid=pid[i], count=0, bytes=0, dur=0, start=ts[i], end=ts[i] + dur[i], only=one)
                r["count"] += 1
                r["bytes"] += max(ret[i], 0)
                r["dur"] += dur[i]
                r["start"], r["end"] = min(r["start"], ts[i]), max(r["end"], ts[i] + dur[i])
        for runs in open_runs.values():
            close(runs)
    return kept, merged


def exported_slices(tp) -> tuple[list, list]:
    """(the plain slices, the merged ones) of an exported trace, with their args."""
    rows = tp.query("""
        select s.ts, s.dur, s.name, t.tid, p.pid,
               extract_arg(s.arg_set_id, 'debug.merged') as merged,
               extract_arg(s.arg_set_id, 'debug.call') as call,
               extract_arg(s.arg_set_id, 'debug.bytes') as bytes,
               extract_arg(s.arg_set_id, 'debug.time_us') as time_us,
               extract_arg(s.arg_set_id, 'debug.fname') as fname
        from slice s join thread_track tt on s.track_id = tt.id join thread t using (utid)
        join process p using (upid) where s.category != 'iotrace'""")
    plain = [(r["pid"], r["tid"], r["name"], r["ts"], r["dur"]) for r in rows if r["merged"] is None]
    merged = [r for r in rows if r["merged"] is not None]
    return plain, merged


@pytest.fixture(scope="module")
def merged_export(gen_job, tmp_path_factory):
    traces, ev = gen_job
    out = str(tmp_path_factory.mktemp("out") / "job.pftrace")
    res = export([traces], out, EventFilter(), max_slices=BUDGET)
    return out, res



def test_dur_index_counts_the_thresholds_at_or_below_each_duration():
    """dur_index looks short durations up in a table and searches for long ones: both give
    the count of EDGES at or below the duration, at every edge, beside it and at the table's end."""
    from iotrace_analyzer.export import budget

    edges = budget.EDGES.tolist()
    short = budget._SHORT
    values = {-5, 0, 1, 2, 3, short - 1, short, short + 1, 2**62}
    values |= {e + k for e in edges for k in (-1, 0, 1)}
    d = np.array(sorted(values), np.int64)
    got = budget.dur_index(d)
    assert got.dtype == np.int16
    assert got.tolist() == [sum(1 for e in edges if e <= v) for v in d.tolist()]

def test_merged_export_keeps_long_and_rare_slices_and_merges_the_rest_exactly(gen_job, merged_export):
    require_trace_processor()
    _traces, ev = gen_job
    out, res = merged_export
    b = res.budget
    calls = sum(len(f["ts"]) for f in ev["files"])
    assert b["merging"] and b["met"] and b["slices"] == calls
    assert b["written"] <= BUDGET < calls
    # the rare names: the calls made once per process
    assert {"posix:open", "posix:close", "posix:write", "posix:unlink"} <= set(b["rare_names"])
    assert not {"posix:pread", "posix:lseek"} & set(b["rare_names"])
    kept, runs = expected(ev, b["threshold_ns"], set(b["rare_names"]))
    assert len(kept) + len(runs) == b["written"] == b["planned"]
    assert sum(r[5] for r in runs) == b["merged_calls"] and len(runs) == b["merged_slices"]
    with load_trace(out) as tp:
        plain, merged = exported_slices(tp)
        assert sorted(plain) == sorted(kept)
        got = [(r["pid"], r["call"], r["fname"], r["ts"], r["ts"] + r["dur"], r["merged"],
                r["bytes"], round(r["time_us"] * 1000)) for r in merged]
        assert sorted(got) == sorted(runs)
        for r in merged:
            assert r["name"] == f"{r['call']} ×{r['merged']}" and r["merged"] >= 2
        # the merged slices are on tracks of their own, one per thread and call here
        tracks = tp.query("""select t.name, count(*) as n from slice s join thread_track tt
                             on s.track_id = tt.id join thread t using (utid)
                             where s.name like '% ×%' group by 1""")
        assert sorted(r["name"].rsplit(" · ", 1)[1] for r in tracks) == sorted(["lseek merged", "pread merged"] * PROCS)
        # the budget, stated in the trace: the note and the job's instant with its args
        note = tp.query("select name from slice where name like 'iotrace export: --max-slices %'")
        assert len(note) == 1 and f"{calls} slices -> {b['written']}: {b['merged_calls']} calls" in note[0]["name"]
        args = tp.query("""select key, display_value as v from args where arg_set_id = (select arg_set_id
                           from slice where name = 'iotrace export: --max-slices')""")
        args = {a["key"]: a["v"] for a in args}
        assert args["debug.max_slices"] == str(BUDGET) and args["debug.written"] == str(b["written"])
        assert args["debug.merged_calls"] == str(b["merged_calls"])


def test_merged_sums_per_process_equal_the_analysis(gen_job, merged_export, tmp_path):
    """Calls and bytes per process and per call name, summed over the merged export (a merged
    slice counting its calls), equal iotrace-analyze's summary of the same traces."""
    require_trace_processor()
    traces, _ev = gen_job
    out, res = merged_export
    summary = tmp_path / "summary.json"
    subprocess.run(["iotrace-analyze", traces, "--summary", str(summary), "-q", "--no-findings"], check=True)
    s = json.loads(summary.read_text())
    with load_trace(out) as tp:
        rows = tp.query("""
            select p.pid, coalesce(extract_arg(s.arg_set_id, 'debug.call'), s.name) as call,
                   sum(coalesce(extract_arg(s.arg_set_id, 'debug.merged'), 1)) as calls,
                   sum(coalesce(extract_arg(s.arg_set_id, 'debug.bytes'),
                                max(coalesce(extract_arg(s.arg_set_id, 'debug.ret'), 0), 0))) as bytes
            from slice s join thread_track tt on s.track_id = tt.id join thread using (utid)
            join process p using (upid) where s.category = 'posix' group by 1, 2""")
        counters = tp.query("""select p.pid, t.name, sum(c.value) as total from counter c
                               join process_counter_track t on c.track_id = t.id join process p using (upid)
                               group by 1, 2""")
    per_process = collections.Counter()
    read_bytes = collections.Counter()
    per_call = collections.Counter()
    call_bytes = collections.Counter()
    for r in rows:
        per_process[r["pid"]] += r["calls"]
        per_call[r["call"]] += r["calls"]
        if r["call"] in READS:
            read_bytes[r["pid"]] += r["bytes"]
        if r["call"] in READS or r["call"] == "write":
            call_bytes[r["call"]] += r["bytes"]
    procs = {p["pid"]: p for p in s["processes"]}
    assert set(per_process) <= set(procs) and sum(p["io_events"] > 0 for p in procs.values()) == PROCS
    for pid, p in procs.items():
        assert per_process[pid] == p["io_events"], pid
        assert read_bytes[pid] == p["bytes_read"], pid
    assert dict(per_call) == {c["name"]: c["count"] for c in s["calls"]}
    assert all(call_bytes[c["name"]] == c["bytes"] for c in s["calls"] if c["name"] in call_bytes)
    # the counters: read calls per second over the bins, times the bin, add up to the read calls
    bin_s = res.budget["counter_bin_ns"] / 1e9
    totals = {(c["pid"], c["name"]): c["total"] for c in counters}
    for pid, p in procs.items():
        reads = per_call_of(rows, pid, READS)
        if reads:
            assert totals[(pid, "io read ops/s")] * bin_s == pytest.approx(reads, rel=1e-9)
            assert totals[(pid, "io read MB/s")] * bin_s * 1e6 == pytest.approx(p["bytes_read"], rel=1e-9)
    job = [c for c in counters if c["name"] == "io read ops/s" and c["pid"] not in procs]
    assert len(job) == 1 and job[0]["total"] * bin_s == pytest.approx(
        sum(per_call[c] for c in READS if c in per_call), rel=1e-9)


def per_call_of(rows, pid, calls) -> int:
    return sum(r["calls"] for r in rows if r["pid"] == pid and r["call"] in calls)


def test_window_is_every_event_of_it(gen_job, tmp_path, capsys):
    require_trace_processor()
    traces, ev = gen_job
    out = str(tmp_path / "window.pftrace")
    assert cli.main(["export", traces, "-o", out, "--window", "0.2:0.23", "-j", "1"]) == 0
    assert "every event, no budget" in capsys.readouterr().err
    lo, hi = ev["start"] + 200_000_000, ev["start"] + 230_000_000
    want = [(int(f["pid"][i]), int(f["tid"][i]), f["name"][i], int(f["ts"][i]), int(f["dur"][i]))
            for f in ev["files"] for i in np.flatnonzero((f["ts"] <= hi) & (f["ts"] + f["dur"] >= lo))]
    assert len(want) > 1000
    with load_trace(out) as tp:
        plain, merged = exported_slices(tp)
        assert not merged
        assert sorted(plain) == sorted(want)
    assert cli.main(["export", traces, "-o", out, "--window", "0.2:0.23", "--max-slices", "10"]) == 2
    assert cli.main(["export", traces, "-o", out, "--window", "0.2:0.23", "--from", "1"]) == 2
    with pytest.raises(SystemExit):
        cli.main(["export", traces, "-o", out, "--window", "0.3:0.2"])


def test_a_trace_of_too_many_call_file_pairs_gets_no_budget(tmp_path, monkeypatch):
    """Runs are of one call on one file: a trace of more (call, file) pairs than the budget's
    pass counts (a million files read once) is written in full, and the result says why (that
    pass held ~1 KiB per pair: 10 GiB and 10 min for the million files' export)."""
    from iotrace_analyzer.export import budget

    folder = tmp_path / "job"
    folder.mkdir()
    perfetto_job.write_job(str(folder), compression="zstd")
    monkeypatch.setattr(budget, "MAX_KEYS", 2)
    a, b = str(tmp_path / "a.pftrace"), str(tmp_path / "b.pftrace")
    res = export([str(folder)], a, EventFilter(), max_slices=4)  # would merge
    export([str(folder)], b, EventFilter(), max_slices=0)
    assert res.budget["merging"] is False and res.budget["met"] is False
    assert "more than 2 (call, file) pairs" in res.budget["skipped"]
    with open(a, "rb") as x, open(b, "rb") as y:
        assert x.read() == y.read()


@pytest.mark.parametrize("fmt", ["pftrace", "json.gz"])
def test_a_job_within_the_budget_is_written_as_without_one(tmp_path, fmt):
    folder = tmp_path / "job"
    folder.mkdir()
    perfetto_job.write_job(str(folder), compression="zstd")
    a, b = str(tmp_path / f"a.{fmt}"), str(tmp_path / f"b.{fmt}")
    res = export([str(folder)], a, EventFilter(), max_slices=16)  # 16 slices: just fits
    export([str(folder)], b, EventFilter(), max_slices=0)
    assert res.budget == {"max_slices": 16, "slices": 16, "written": 16, "planned": 16, "merging": False,
                          "met": True, "threshold_ns": None, "rare_names": [], "counter_bin_ns": None}
    with open(a, "rb") as x, open(b, "rb") as y:
        assert x.read() == y.read()


def test_json_holds_the_same_merged_slices(gen_job, merged_export, tmp_path):
    import gzip

    traces, _ev = gen_job
    out = str(tmp_path / "job.json.gz")
    res = export([traces], out, EventFilter(), max_slices=BUDGET)
    assert res.budget == merged_export[1].budget
    doc = json.loads(gzip.decompress(open(out, "rb").read()))
    merged = [e for e in doc["traceEvents"] if e.get("ph") == "X" and "merged" in e.get("args", {})]
    assert len(merged) == res.budget["merged_slices"]
    assert sum(e["args"]["merged"] for e in merged) == res.budget["merged_calls"]
    assert doc["metadata"]["iotrace_export"]["budget"]["written"] == res.budget["written"]


def test_lost_events_become_a_counter(tmp_path):
    """The tracer's losses (iotrace_lost records, iotrace_end's lost and dropped) as a counter
    of the events lost so far, with the budget in force."""
    require_trace_processor()
    w = perfetto_job.ProcWriter(100, "main", {"RANK": "0"})
    for i in range(300):
        w.io("read", "/data/a.bin", perfetto_job.T0 + 10 + 3 * i, 1.0, ret=10, size=10, fd=3)
    w.meta("iotrace_lost", {"events": 7, "reason": "No space left on device"})
    w.io("read", "/data/a.bin", perfetto_job.T0 + 2000, 1.0, ret=10, size=10, fd=3)
    w.meta("iotrace_end", {"events": 400, "reason": "exit", "lost": 2, "dropped": 10,
                           "mono_ns": int((perfetto_job.T0 + 3000) * 1000)})
    path = str(tmp_path / "python3.11-node1-100.pfw")
    with open(path, "wb") as f:
        f.write(b"[\n" + b",\n".join(orjson.dumps(e) for e in w.events) + b"]\n")
    out = str(tmp_path / "lost.pftrace")
    res = export([path], out, EventFilter(), max_slices=50)
    assert res.budget["merging"]
    with load_trace(out) as tp:
        lost = tp.query("""select c.ts, c.value from counter c join counter_track t on c.track_id = t.id
                           where t.name = 'iotrace lost events' order by c.ts""")
        reads = tp.scalar("""select sum(coalesce(extract_arg(arg_set_id, 'debug.merged'), 1))
                             from slice where name like 'read%'""")
    assert [r["value"] for r in lost] == [7, 12]
    assert lost[-1]["ts"] == int((perfetto_job.T0 + 3000) * 1000)
    assert reads == 301


def test_the_perfetto_ui_opens_the_merged_export_and_draws_its_counters(merged_export, tmp_path):
    """The real UI (headless chromium, tests/perfetto_ui.py) loads the merged trace: the slices
    it holds, the merged tracks and the counter tracks laid out."""
    from perfetto_ui import open_in_ui, unavailable_reason

    if why := unavailable_reason():
        pytest.skip(why)
    out, res = merged_export
    seen = open_in_ui(out, str(tmp_path / "ui.png"), queries=(
        "select count(*) as n from slice where category != 'iotrace'",
        "select distinct t.name from counter c join counter_track t on c.track_id = t.id"), timeout=300)
    assert seen["loaded"] and not seen["error"], seen
    assert seen["queries"][0] == [{"n": res.budget["written"]}]
    names = {"io read MB/s", "io read ops/s", "io write MB/s", "io write ops/s", "files open"}
    assert names <= {r["name"] for r in seen["queries"][1]} <= names | {"iotrace lost events"}
    assert names <= set(seen["tracks"])
    assert sum(" merged " in t for t in seen["tracks"]) >= 2 * PROCS  # '… · pread merged <tid>'
    assert "job (iotrace export)" in " ".join(seen["tracks"])


def test_longest_since_is_the_longest_slice_back_to_the_keys_last_call():
    """The budget's pass-1 kernel (_export.LongestSince) against its definition, on random
    streams of one thread fed in batches of random sizes: for each call, the largest duration
    class from the previous call of its key (that one included) to the call before it; NEVER
    for a key's first call, however far back in earlier batches that call was."""
    from iotrace_analyzer import _export
    from iotrace_analyzer.export.budget import NEVER, WIDTH

    rng = np.random.default_rng(7)
    for n_keys, n in ((1, 50), (3, 2000), (40, 5000), (2000, 5000)):
        d = rng.integers(0, WIDTH - 2, n).astype(np.int16)
        d[rng.random(n) < 0.9] //= 8  # mostly short calls, a few long ones: runs of all lengths
        keys = rng.integers(0, n_keys, n).astype(np.int64)
        want, last = [], {}
        for i, k in enumerate(keys.tolist()):
            want.append(NEVER if k not in last else int(d[last[k]:i].max()))
            last[k] = i
        kernel, got, at = _export.LongestSince(NEVER), [], 0
        while at < n:
            step = int(rng.integers(1, 400))
            got += kernel(d[at:at + step], keys[at:at + step]).tolist()
            at += step
        assert got == want
    assert _export.LongestSince(NEVER)(np.zeros(0, np.int16), np.zeros(0, np.int64)).tolist() == []


def test_merged_args_text_is_the_json_of_each_run():
    """The merged slices' args objects as the kernel writes them: counts and bytes as integers
    (the extremes of int64 too), time_us as Python prints ns / 1000, bytes only for calls that
    move data, fhash only for keys that have one."""
    from iotrace_analyzer import _export

    big = 2**63 - 1
    count = np.array([1, 12345, big, 7], np.int64)
    key = np.array([0, 1, 2, 0], np.int64)
    name_of_key = np.array([0, 1, 0], np.int64)
    nbytes = np.array([4096, -2**63, big, 0], np.int64)
    dur = np.array([1500, 2000, 123456789, 7], np.int64)
    offsets, data = _export.merged_args(count, key, name_of_key, nbytes, dur, ["pread", "stat"],
                                        [True, False], ["00ff", None, "abcd"])
    texts = [bytes(data[a:b]).decode() for a, b in zip(offsets[:-1], offsets[1:])]
    assert [orjson.loads(t) for t in texts] == [
        {"merged": 1, "call": "pread", "bytes": 4096, "time_us": 1.5, "fhash": "00ff"},
        {"merged": 12345, "call": "stat", "time_us": 2.0},
        {"merged": big, "call": "pread", "bytes": big, "time_us": 123456.789, "fhash": "abcd"},
        {"merged": 7, "call": "pread", "bytes": 0, "time_us": 0.007, "fhash": "00ff"},
    ]
    assert texts[1] == '{"merged":12345,"call":"stat","time_us":2.0}'
    assert all(f"{d / 1000}" in t for d, t in zip(dur.tolist(), texts))


def _merged_slices_written(tmp_path, label: str, extra: dict) -> bytes:
    """A .pftrace of four merged slices on two tracks, their args given by `extra` (the args
    text, or the columns the budget gives the .pftrace writer in its place)."""
    import pyarrow as pa

    from iotrace_analyzer import _export

    n = 4
    names = ["pread ×1", "stat ×12345", "pread ×big", "pread ×7"]
    batch = pa.record_batch({
        "ph": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array(["X"])),
        "name": pa.DictionaryArray.from_arrays(pa.array(np.arange(n, dtype=np.int32)), pa.array(names)),
        "cat": pa.DictionaryArray.from_arrays(pa.array(np.array([0, 0, 0, 0], np.int32)), pa.array(["posix"])),
        "pid": pa.array(np.full(n, 7, np.int64)),
        "tid": pa.array(np.array([1 << 30, (1 << 30) + 1, 1 << 30, (1 << 30) + 1], np.int64)),
        "ts_ns": pa.array(np.array([1000, 2000, 3000, 4000], np.int64)),
        "dur_ns": pa.array(np.array([500, 600, 700, 800], np.int64)),
        **extra,
    })
    path = tmp_path / f"{label}.pftrace"
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        w = _export.ProtoWriter(fd, seq=1, vpid=7, pid=7, sort_index=0, file_index=0, level=-1,
                                batch_bytes=1 << 20)
        w.add_names({"00ff": "/data/a.bin", "abcd": "/data/b.bin"})
        w.encode(_export.Columns(batch), np.arange(n, dtype=np.int64), np.zeros(0, np.int64),
                 np.zeros(0, np.uint64))
        w.close()
    finally:
        os.close(fd)
    return path.read_bytes()


def test_merged_slices_columns_write_the_bytes_of_their_args_text(tmp_path):
    """The .pftrace writer takes a budget's merged slices as columns (merged_calls,
    merged_call, bytes, merged_ns, fhash) in place of the args text the kernel writes for
    them: the same packets, byte for byte (the extremes of int64, time_us of 7 ns, a call that
    moves no data, a key without a file, a hash with no name)."""
    import pyarrow as pa

    from iotrace_analyzer import _export

    big = 2**63 - 1
    count = np.array([1, 12345, big, 7], np.int64)
    key = np.array([0, 1, 2, 3], np.int64)
    name_of_key = np.array([0, 1, 0, 0], np.int64)
    nbytes = np.array([4096, 99, big, 0], np.int64)
    dur = np.array([1500, 2000, 123456789, 7], np.int64)
    calls, with_bytes, fhashes = ["pread", "stat"], [True, False], ["00ff", None, "abcd", "0123"]
    offsets, data = _export.merged_args(count, key, name_of_key, nbytes, dur, calls, with_bytes, fhashes)
    text = {"args": pa.Array.from_buffers(pa.string(), 4, [None, pa.py_buffer(offsets), pa.py_buffer(data)])}
    has_file = np.array([f is not None for f in fhashes])
    columns = {
        "merged_calls": pa.array(count),
        "merged_call": pa.DictionaryArray.from_arrays(pa.array(name_of_key[key].astype(np.int32)), pa.array(calls)),
        "bytes": pa.array(nbytes, mask=~np.array(with_bytes)[name_of_key[key]]),
        "merged_ns": pa.array(dur),
        "fhash": pa.DictionaryArray.from_arrays(pa.array(key.astype(np.int32), mask=~has_file),
                                                pa.array([f or "" for f in fhashes])),
    }
    a = _merged_slices_written(tmp_path, "text", text)
    b = _merged_slices_written(tmp_path, "columns", columns)
    assert b"/data/b.bin" in a and b"0123" in a and b"time_us" in a
    assert a == b


def test_the_merged_export_is_the_same_from_columns_as_from_text(gen_job, merged_export, tmp_path, monkeypatch):
    """The job's budgeted .pftrace with the merged slices' args given as text (as the JSON
    export gives them) is the one written from their columns, byte for byte."""
    from iotrace_analyzer.export import budget

    traces, _ev = gen_job
    init = budget.Merger.__init__
    monkeypatch.setattr(budget.Merger, "__init__",
                        lambda self, *a, **k: init(self, *a, **dict(k, typed_args=False)))
    out = str(tmp_path / "text.pftrace")
    res = export([traces], out, EventFilter(), max_slices=BUDGET)
    assert res.budget == merged_export[1].budget and res.budget["merged_slices"] > 1000
    with open(out, "rb") as x, open(merged_export[0], "rb") as y:
        assert x.read() == y.read()


def test_the_first_file_past_the_key_limit_stops_the_others(tmp_path, monkeypatch):
    """The budget's pass over several files: the first file past MAX_KEYS leaves a flag, and
    the pass of every other file stops at it (there is no budget either way: the million
    files' 9 traces were each read up to their own limit)."""
    from iotrace_analyzer.export import budget, merge
    from iotrace_format import reader

    folder = tmp_path / "job"
    folder.mkdir()
    perfetto_job.write_job(str(folder), compression="zstd")
    path = sorted(reader.find_traces([str(folder)]))[0]
    stop = str(tmp_path / "too-many-keys")
    arg = (path, EventFilter(), None, None, None, False, stop)
    counted = merge._slice_stats(arg)  # under the limit: counted, no flag
    assert not counted.too_many_keys and int(counted.hist.sum()) > 0 and not os.path.exists(stop)
    monkeypatch.setattr(budget, "MAX_KEYS", 1)
    assert merge._slice_stats(arg).too_many_keys and os.path.exists(stop)
    monkeypatch.setattr(budget, "MAX_KEYS", 1 << 17)  # the flag alone stops a file's pass
    read = []
    monkeypatch.setattr(merge, "_columns", lambda p, clock: read.append(p) or iter(()))
    assert merge._slice_stats(arg).too_many_keys and read == []
