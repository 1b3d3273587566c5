"""Every summary figure against values computed by hand on two small traces.

Process A (pid 100), times in µs:
  open  [1000,1010)  read [1020,1025) 4096@0  read [1030,1035) 4096@4096  read [1036,1038) 100@8192
  close [1050,1051)  compute train.step [1000,1040)  fetch load [1060,1080)
  I/O ∪ = 10+5+5+2+1 = 23; compute = 40; I/O ∪ compute = 40+1 = 41; all = 41+20 = 61
  I/O not overlapped = 41-40 = 1; compute not overlapped = 41-23 = 18; lifetime = 1080-1000 = 80
Process B (pid 200, threads 200 and 201):
  write t200 [2000,2100) 1000@0   write t201 [2050,2150) 1000@1000   pwrite64 [2200,2210) 10@5000
  pread64 [2300,2302) 100@50  pread64 [2310,2312) 100@0  fread [2320,2324) 300 B  stat [2400,2406)
  lseek [2500,2501) failed   compute step [2000,2120)
  I/O ∪ = 150+10+2+2+4+6+1 = 175; compute = 120; I/O ∪ compute = 175; all = 175
  I/O not overlapped = 55; compute not overlapped = 0; lifetime = 501
"""

import json
import os

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from conftest import end, fh, fhex, io, meta, process, span, write_trace
from iotrace_analyzer.cli import main
from iotrace_analyzer.engine import Helper
from iotrace_analyzer.pipeline import Options, analyze

US = 1000  # ns per µs


def trace_a():
    p = 100
    return [process(p), fh("/data/a", p),
            io("open", p, 1000 * US, 10 * US, path="/data/a", ret=3, flags=0),
            io("read", p, 1020 * US, 5 * US, path="/data/a", fd=3, size=4096, offset=0, ret=4096),
            io("read", p, 1030 * US, 5 * US, path="/data/a", fd=3, size=4096, offset=4096, ret=4096),
            span("train.step", "compute", p, 1000 * US, 40 * US, args={"epoch": 1}),
            io("read", p, 1036 * US, 2 * US, path="/data/a", fd=3, size=100, offset=8192, ret=100),
            io("close", p, 1050 * US, 1 * US, path="/data/a", fd=3, ret=0),
            span("load", "fetch", p, 1060 * US, 20 * US),
            end(p, 9)]


def trace_b():
    p = 200
    return [process(p, role="fork", parent_pid=100), fh("/data/b", p),
            meta("thread_name", p, {"name": "loader"}, tid=201),
            io("write", p, 2000 * US, 100 * US, path="/data/b", fd=4, size=1000, offset=0, ret=1000),
            io("write", p, 2050 * US, 100 * US, tid=201, path="/data/b", fd=4, size=1000, offset=1000, ret=1000),
            span("step", "compute", p, 2000 * US, 120 * US),
            io("pwrite64", p, 2200 * US, 10 * US, path="/data/b", fd=4, size=10, offset=5000, ret=10),
            fh("/data/a", p),
            io("pread64", p, 2300 * US, 2 * US, path="/data/a", fd=5, size=100, offset=50, ret=100),
            io("pread64", p, 2310 * US, 2 * US, path="/data/a", fd=5, size=100, offset=0, ret=100),
            io("fread", p, 2320 * US, 4 * US, cat="stdio", path="/data/a", size=300, ret=3, bytes=300),
            io("stat", p, 2400 * US, 6 * US, path="/data/b", ret=0),
            io("lseek", p, 2500 * US, 1 * US, path="/data/a", fd=5, offset=-5, ret=-1, errno=22, flags=0),
            end(p, 13)]


@pytest.fixture
def job(tmp_path):
    write_trace(tmp_path / "tr" / "python3.11-node1-100.pfw.zst", trace_a())
    write_trace(tmp_path / "tr" / "python3.11-node1-200.pfw.gz", trace_b(), codec="gzip")
    S = analyze([str(tmp_path / "tr")], Options(out_dir=str(tmp_path / "out"), engine="local")).summary
    return S, tmp_path


def test_job_counts(job):
    S, _ = job
    j = S["job"]
    assert (j["processes"], j["threads"], j["hosts"], j["files"]) == (2, 3, 1, 2)
    assert j["events"] == 16 and j["complete_events"] == 16
    assert j["metadata_events"] == 3 + 5
    assert j["duration_us"] == 1501.0  # 1000 .. 2501, same clock offset in both processes


def test_time_split_from_interval_unions(job):
    S, _ = job
    t = S["time"]
    assert t["io_us"] == 23 + 175
    assert t["compute_us"] == 40 + 120
    assert t["io_not_overlapped_us"] == 1 + 55
    assert t["compute_not_overlapped_us"] == 18 + 0
    assert t["app_us"] == 61 + 175
    assert t["lifetime_us"] == 80 + 501
    assert t["io_call_time_us"] == 23 + 225  # sum of durations: the writes overlap
    per = {p["pid"]: p for p in S["processes"]}
    assert (per[100]["io_us"], per[100]["compute_us"], per[100]["io_not_overlapped_us"],
            per[100]["compute_not_overlapped_us"], per[100]["app_us"]) == (23, 40, 1, 18, 61)
    assert (per[200]["io_us"], per[200]["io_not_overlapped_us"], per[200]["app_us"]) == (175, 55, 175)
    assert per[200]["bytes_written"] == 2010 and per[200]["bytes_read"] == 500
    assert per[100]["bytes_read"] == 8292


def test_wall_time_from_start_and_end_records(tmp_path):
    """Shares are of the process's wall time, from its start record to its end record
    (iotrace 0.3), not of the span of its events; without an end record, the last event's end."""
    p = 300
    lines = [process(p, mono_ns=500 * US, role="main"), fh("/data/c", p),
             io("read", p, 1000 * US, 100 * US, path="/data/c", fd=3, size=4096, offset=0, ret=4096),
             end(p, 3, mono_ns=10_500 * US)]
    write_trace(tmp_path / "tr" / "a-300.pfw.zst", lines)
    q = 301  # killed: no end record
    write_trace(tmp_path / "tr" / "a-301.pfw.zst", [
        process(q, mono_ns=500 * US, role="fork", parent_pid=300), fh("/data/c", q),
        io("read", q, 2000 * US, 100 * US, path="/data/c", fd=3, size=4096, offset=0, ret=4096)], closed=False)
    S = analyze([str(tmp_path / "tr")], Options(engine="local")).summary
    per = {d["pid"]: d for d in S["processes"]}
    assert (per[300]["wall_us"], per[300]["wall_from"], per[300]["role"]) == (10_000, "records", "main")
    assert per[300]["io_share_of_wall"] == 0.01
    assert (per[301]["wall_us"], per[301]["wall_from"], per[301]["role"], per[301]["parent_pid"]) == \
        (1600, "events", "fork", 300)  # 500 .. 2100: its start record to its last event's end
    assert S["time"]["wall_us"] == 11_600 and S["time"]["io_share_of_wall"] == round(200 / 11_600, 6)
    assert S["job"]["wall_us"] == 10_000  # 500 .. 10,500 on the job clock


def test_calls_table(job):
    S, _ = job
    c = {r["name"]: r for r in S["calls"]}
    r = c["read"]
    assert (r["count"], r["time_us"], r["bytes"]) == (3, 12, 8292)
    # sizes 100, 4096, 4096: linear-interpolated quartiles
    assert (r["size_min"], r["size_p25"], r["size_median"], r["size_p75"], r["size_max"]) == \
        (100, 2098.0, 4096.0, 4096.0, 4096)
    assert r["size_mean"] == 2764.0
    assert r["bandwidth_MBps"] == pytest.approx(8292 / 12, abs=1e-3)  # bytes per µs = MB/s
    assert (c["write"]["count"], c["write"]["time_us"], c["write"]["bytes"]) == (2, 200, 2000)
    assert c["write"]["bandwidth_MBps"] == 10.0
    assert (c["fread"]["bytes"], c["fread"]["size_median"]) == (300, 300.0)
    assert c["lseek"]["errors"] == 1 and c["lseek"]["bytes"] == 0
    assert c["open"]["size_min"] is None
    m = S["metadata_calls"]
    assert (m["count"], m["time_us"]) == (4, 18)  # open, close, stat, lseek
    assert m["count_share"] == round(4 / 13, 6)
    assert m["time_share"] == round(18 / 248, 6)


def test_files_and_categories(job):
    S, _ = job
    f = {r["file"]: r for r in S["files"]}
    assert (f["/data/a"]["count"], f["/data/a"]["time_us"], f["/data/a"]["bytes_read"],
            f["/data/a"]["processes"]) == (9, 32, 8792, 2)
    assert (f["/data/b"]["count"], f["/data/b"]["time_us"], f["/data/b"]["bytes_written"]) == (4, 216, 2010)
    cats = {r["cat"]: r for r in S["categories"]}
    assert (cats["compute"]["count"], cats["compute"]["time_us"], cats["compute"]["union_us"]) == (2, 160, 160)
    assert (cats["fetch"]["count"], cats["fetch"]["union_us"]) == (1, 20)
    assert cats["fetch"]["top_names"][0]["name"] == "load"


def test_access_pattern_and_sizes(job):
    S, _ = job
    a = S["access"]
    assert {k: a["read"][k] for k in ("first", "consecutive", "sequential", "random")} == \
        dict(first=2, consecutive=2, sequential=2, random=1)
    assert {k: a["write"][k] for k in ("first", "consecutive", "sequential", "random")} == \
        dict(first=1, consecutive=1, sequential=2, random=0)
    assert a["read"]["size_histogram"]["100-1K"] == 4 and a["read"]["size_histogram"]["1K-10K"] == 2
    assert a["write"]["size_histogram"]["0-100"] == 1 and a["write"]["size_histogram"]["100-1K"] == 2


def test_timeline_bins(job):
    S, _ = job
    tl = S["timeline"]
    assert sum(tl["bytes_read"]) == 8792 and sum(tl["bytes_written"]) == 2010 and sum(tl["ops"]) == 13
    # job clock = ts + wall_ns - mono_ns; 1501 µs / 256 bins -> 5.9 µs -> 2**13 ns bins
    shift = 1_700_000_000_000_000_000 - 1_000_000_000
    assert tl["bin_ns"] == 8192
    first = (1000 * US + shift) >> 13
    assert tl["start_ns"] == first << 13
    assert len(tl["ops"]) == ((2501 * US + shift) >> 13) - first + 1

    def b(us):
        return ((us * US + shift) >> 13) - first

    # the two writes (2000 µs, 2050 µs) and the pwrite (2200 µs)
    assert tl["bytes_written"][b(2000)] == 1000 + (1000 if b(2050) == b(2000) else 0)
    assert tl["bytes_written"][b(2200)] == 10
    # 8.192 µs bins: the reads at 1020, 1030 and 1036 µs fall in three bins
    assert [tl["bytes_read"][b(t)] for t in (1020, 1030, 1036)] == [4096, 4096, 100]
    assert tl["ops"][b(1000)] == 1  # the open


def test_outputs_written(job):
    S, tmp = job
    out = tmp / "out"
    assert S["damage"]["damaged_files"] == 0
    t = ds.dataset(str(out / "events"), format="parquet").to_table()
    assert t.num_rows == 16
    schema = {f.name: str(f.type) for f in t.schema}
    assert schema["ts_ns"] == schema["dur_ns"] == schema["pid"] == "int64"
    part = pq.read_schema(out / "events" / "part-00000.parquet")
    assert [f.name for f in part if not f.nullable] == ["name", "cat", "ph", "pid", "tid", "host", "ts_ns"]
    for k in ("size", "offset", "ret", "bytes", "errno", "fd", "flags"):
        assert schema[k] == "int64"
    for k in ("name", "cat", "host", "fname", "fhash"):
        assert "string" in schema[k]
    rows = t.to_pylist()
    r = next(r for r in rows if r["name"] == "pwrite64")
    assert (r["fname"], r["host"], r["ts_ns"], r["dur_ns"], r["size"], r["offset"], r["ret"], r["tid"]) == \
        ("/data/b", "node1", 2200 * US, 10 * US, 10, 5000, 10, 200)
    step = next(r for r in rows if r["name"] == "train.step")
    assert json.loads(step["args"]) == {"epoch": 1} and step["fname"] is None
    procs = ds.dataset(str(out / "processes.parquet")).to_table().to_pylist()
    assert sorted(p["pid"] for p in procs) == [100, 200]
    assert {p["role"] for p in procs} == {"main", "fork"}
    assert [p["resolution_ns"] for p in procs] == [None, None]  # written by tracers before format 2
    threads = ds.dataset(str(out / "threads.parquet")).to_table().to_pylist()
    assert threads == [dict(host="node1", pid=200, tid=201, name="loader")]
    files = ds.dataset(str(out / "files.parquet")).to_table().to_pylist()
    assert sorted(f["name"] for f in files) == ["/data/a", "/data/b"]


def test_cli_writes_reports(tmp_path, capsys):
    write_trace(tmp_path / "tr" / "x-node1-100.pfw", trace_a(), codec="plain")
    assert main([str(tmp_path / "tr"), "-o", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert "I/O calls" in text and "read" in text
    S = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert S["time"]["io_us"] == 23
    assert (tmp_path / "out" / "report.html").read_text().startswith("<!doctype html>")


def test_compute_cat_option(tmp_path):
    write_trace(tmp_path / "tr" / "x-node1-100.pfw.zst", trace_a())
    S = analyze([str(tmp_path / "tr")], Options(compute_cats=("fetch",), engine="local")).summary
    # compute is now the fetch span [1060,1080): no overlap with I/O
    assert S["time"]["compute_us"] == 20
    assert S["time"]["io_not_overlapped_us"] == 23
    assert S["time"]["compute_not_overlapped_us"] == 20


def test_same_figures_on_dask(tmp_path):
    write_trace(tmp_path / "tr" / "a-node1-100.pfw.zst", trace_a())
    write_trace(tmp_path / "tr" / "b-node1-200.pfw.zst", trace_b(), lines_per_frame=2)
    local = analyze([str(tmp_path / "tr")], Options(engine="local")).summary
    dask = analyze([str(tmp_path / "tr")], Options(engine="dask", workers=2)).summary
    assert dask["input"]["engine"] == "dask"
    for k in ("job", "time", "calls", "files", "categories", "access", "timeline", "metadata_calls"):
        assert dask[k] == local[k], k


def test_memory_limit_of_the_dask_workers(tmp_path, capsys):
    """--memory-limit runs a local Dask cluster whose workers Dask holds to it; a size it
    cannot read, an existing cluster (its workers have their own) or the local engine is a
    usage error said before any work."""
    write_trace(tmp_path / "tr" / "a-node1-100.pfw.zst", trace_a())
    for bad, said in ((["--memory-limit", "lots"], "'lots' is not a size"),
                      (["--memory-limit", "0"], "'0' is not a size"),
                      (["--memory-limit", "1GiB", "--scheduler", "tcp://127.0.0.1:1"], "their own limits"),
                      (["--memory-limit", "1GiB", "--engine", "local"], "--engine dask")):
        with pytest.raises(SystemExit) as e:
            main([str(tmp_path / "tr"), "-o", str(tmp_path / "bad"), *bad])
        assert e.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    assert main([str(tmp_path / "tr"), "-o", str(tmp_path / "out"), "-q", "--workers", "1",
                 "--memory-limit", "700MiB"]) == 0
    S = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert S["input"]["engine"] == "dask" and S["input"]["workers"] == 1
    assert S["time"]["io_us"] == 23


@pytest.mark.parametrize("rows", [1, 2, 3, 5])
def test_streamed_in_segments_gives_the_same_figures(tmp_path, monkeypatch, rows):
    """A file read as a stream of segments (a few rows each here; about a million in real
    use) gives exactly the figures of the file read whole: unions, access patterns across
    segment boundaries, per-call and per-file tables, timeline."""
    from iotrace_analyzer.inputs import read

    write_trace(tmp_path / "tr" / "a-node1-100.pfw.zst", trace_a(), lines_per_frame=1)
    write_trace(tmp_path / "tr" / "b-node1-200.pfw.zst", trace_b(), lines_per_frame=1)
    whole = analyze([str(tmp_path / "tr")], Options(engine="local")).summary
    monkeypatch.setattr(read, "SEGMENT_ROWS", rows)
    monkeypatch.setattr(read, "SMALL_FILE_EVENTS", 0)  # every file streamed on its own
    streamed = analyze([str(tmp_path / "tr")], Options(engine="local", out_dir=str(tmp_path / "o"))).summary
    for k in ("job", "time", "processes", "calls", "files", "categories", "access", "timeline",
              "metadata_calls"):
        assert streamed[k] == whole[k], k


def test_existing_dask_cluster(tmp_path):
    from dask.distributed import LocalCluster

    write_trace(tmp_path / "tr" / "a-node1-100.pfw.zst", trace_a())
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster:
        S = analyze([str(tmp_path / "tr")], Options(scheduler=cluster.scheduler_address,
                                                    out_dir=str(tmp_path / "out"))).summary
    assert S["input"]["engine"] == "dask"
    assert S["time"]["io_us"] == 23 and S["time"]["io_not_overlapped_us"] == 1
    assert (tmp_path / "out" / "events" / "part-00000.parquet").exists()


@pytest.fixture
def aide(threaded):
    """The task's helper thread that writes the Parquet (engine.Helper), or none (the task writes)."""
    h = Helper() if threaded else None
    yield h
    if h is not None:
        h.close()


@pytest.mark.parametrize("threaded", [True, False], ids=["helper", "task"])
def test_events_without_a_required_column_go_on_in_a_second_part(tmp_path, monkeypatch, aide):
    """A line without `cat` (hand-made or damaged JSON) cannot go into a part whose `cat` is
    required: that part is closed and the events from there on go into part-N-1, with nulls
    where values are missing. Nothing is lost or invented."""
    from iotrace_analyzer.outputs import parquet
    from iotrace_format.reader import iter_batches

    p = 300
    no_cat = f'{{"ph":"X","name":"mystery","pid":{p},"tid":{p},"ts":1500.000,"dur":2.000}}'
    good = [process(p), fh("/data/c", p),
            io("read", p, 1000 * US, 5 * US, path="/data/c", fd=3, size=10, offset=0, ret=10)]
    write_trace(tmp_path / "a.pfw.zst", good)
    write_trace(tmp_path / "b.pfw.zst", [process(p), no_cat,
                                         io("read", p, 1600 * US, 5 * US, path="/data/c", fd=3,
                                            size=10, offset=10, ret=10)])
    monkeypatch.setattr(parquet, "PARQUET_ROWS", 1)  # a row group per put
    out = parquet.ParquetOut(str(tmp_path / "out"), 0, aide)
    for f in ("a.pfw.zst", "b.pfw.zst", "a.pfw.zst"):
        for b in iter_batches(str(tmp_path / f)):
            out.put(pa.record_batch(b), "node1", {fhex("/data/c"): "/data/c"})
    parts = out.close()
    assert [os.path.basename(x) for x in parts] == ["part-00000.parquet", "part-00000-1.parquet"]
    assert not pq.read_schema(parts[0]).field("cat").nullable
    assert pq.read_schema(parts[1]).field("cat").nullable
    rows = [pq.read_table(x).to_pylist() for x in parts]
    assert [(r["ts_ns"], r["name"], r["cat"], r["offset"], r["fname"]) for r in rows[0]] == \
        [(1000 * US, "read", "posix", 0, "/data/c")]
    assert [(r["ts_ns"], r["name"], r["cat"], r["offset"], r["fname"]) for r in rows[1]] == \
        [(1500 * US, "mystery", None, None, None), (1600 * US, "read", "posix", 10, "/data/c"),
         (1000 * US, "read", "posix", 0, "/data/c")]


def test_a_process_rank_is_a_field_of_its_own():
    """A process's rank, from the `ranks` record the tracer writes (docs/trace-format.md), is a
    field of summary.json's processes (None when no variable gives one): the launcher's
    variables in order of preference, a value that is no number passed over."""
    from iotrace_format import rank_of

    def ranks(**env):
        return {"ranks": env}

    assert rank_of(ranks(RANK="1", SLURM_PROCID="7")) == 1
    assert rank_of(ranks(OMPI_COMM_WORLD_RANK="3", LOCAL_RANK="0")) == 3
    assert rank_of(ranks(PMI_RANK="x", SLURM_PROCID="12")) == 12
    assert rank_of(ranks(LOCAL_RANK="0", WORLD_SIZE="4")) is None
    assert rank_of(None) is None and rank_of({}) is None and rank_of(ranks()) is None
    # MPI's own word, once MPI_Init returned, before the launcher's variables
    assert rank_of(dict(ranks(OMPI_COMM_WORLD_RANK="3"), mpi_rank=5, mpi_size=8)) == 5


def test_job_id_from_the_launchers_variables(tmp_path):
    """A process's job id is the first job variable its `ranks` record has; a process without
    one has none. Both are fields of summary.json's processes, beside the rank."""
    from iotrace_format import job_of

    assert job_of({"SLURM_JOB_ID": "77", "PBS_JOBID": "9.pbs"}) == "77"
    assert job_of({"PBS_JOBID": "9.pbs"}) == "9.pbs" and job_of({"RANK": "0"}) is None
    assert job_of(None) is None and job_of({"SLURM_JOB_ID": ""}) is None
    for pid, ranks in ((300, {"SLURM_PROCID": "5", "SLURM_JOB_ID": "4242"}), (301, {})):
        write_trace(tmp_path / "tr" / f"a-node1-{pid}.pfw.zst", [
            process(pid, ranks=ranks), fh("/data/c", pid),
            io("read", pid, 2000 * US, 100 * US, path="/data/c", fd=3, size=4096, offset=0, ret=4096),
            end(pid, 3)])
    S = analyze([str(tmp_path / "tr")], Options(engine="local", workers=1)).summary
    got = {p["pid"]: (p["rank"], p["job_id"]) for p in S["processes"]}
    assert got == {300: (5, "4242"), 301: (None, None)}


@pytest.mark.parametrize("threaded", [True, False], ids=["helper", "task"])
def test_a_big_process_is_written_in_parts_of_its_time(tmp_path, monkeypatch, aide):
    """A process of more events than a part holds goes on in parts of their own, each a
    stretch of its time in order (readers take them in parallel and skip them by their
    statistics): every event once, in order, none invented."""
    from iotrace_analyzer.outputs import parquet
    from iotrace_format.reader import iter_batches

    p = 400
    events = [process(p), fh("/data/d", p)] + [
        io("pread64", p, (1000 + 10 * i) * US, 2 * US, path="/data/d", fd=3, size=8, offset=8 * i, ret=8)
        for i in range(40)] + [end(p, 40)]
    write_trace(tmp_path / "big-node1-400.pfw.zst", events)
    monkeypatch.setattr(parquet, "PARQUET_ROWS", 4)
    monkeypatch.setattr(parquet, "PART_ROWS", 12)
    out = parquet.ParquetOut(str(tmp_path / "out"), 7, aide)
    for b in iter_batches(str(tmp_path / "big-node1-400.pfw.zst")):
        rb = pa.record_batch(b)
        for k in range(0, rb.num_rows, 3):  # as a big file streams: a block at a time
            out.put(rb.slice(k, 3), "node1", {fhex("/data/d"): "/data/d"})
    paths = out.close()
    assert [os.path.basename(x) for x in paths] == ["part-00007.parquet"] + [
        f"part-00007-{k}.parquet" for k in range(1, len(paths))]
    parts = [pq.read_table(x) for x in paths]
    assert len(parts) == 4 and [t.num_rows for t in parts[:-1]] == [12, 12, 12]
    reads = [r for t in parts for r in t.to_pylist() if r["name"] == "pread64"]
    assert [r["offset"] for r in reads] == [8 * i for i in range(40)]
    assert [r["ts_ns"] - reads[0]["ts_ns"] for r in reads] == [10 * i * US for i in range(40)]
    # one part's latest event comes before the next part's first
    spans = [(min(t.column("ts_ns").to_pylist()), max(t.column("ts_ns").to_pylist())) for t in parts]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert sum(t.num_rows for t in parts) == ds.dataset(str(tmp_path / "out" / "events")).count_rows() == 40


@pytest.mark.parametrize("threaded", [True, False], ids=["helper", "task"])
def test_file_names_of_a_trace_table_and_row_groups(tmp_path, monkeypatch, aide):
    """The events' fname is their fhash's path in the trace's names table (_kernels.Names, as a
    streamed file is read): every row of a named hash its path, a hash without a name null; a
    block whose hashes all have names takes their codes as they are. Rows gathered past the
    row-group size go in one row group while under twice that (not one full and a stub)."""
    import pyarrow.compute as pc
    from iotrace_analyzer import _kernels
    from iotrace_analyzer.outputs import parquet
    from iotrace_format.reader import iter_batches

    p = 500
    paths = [f"/data/n{i}" for i in range(4)]
    events = [process(p)] + [fh(x, p) for x in paths] + [
        io("read", p, (1000 + 10 * i) * US, 2 * US, path=paths[i % 4], fd=3, size=8, offset=8 * i, ret=8)
        for i in range(12)]
    write_trace(tmp_path / "n-node1-500.pfw.zst", events)
    names = _kernels.Names()
    for x in paths[:3]:  # /data/n3 has no name
        names.set(fhex(x), x)
    monkeypatch.setattr(parquet, "PARQUET_ROWS", 4)
    out = parquet.ParquetOut(str(tmp_path / "out"), 0, aide)
    rb = pa.record_batch(next(iter(iter_batches(str(tmp_path / "n-node1-500.pfw.zst")))))
    rb = rb.filter(pc.equal(rb.column("name"), "read"))
    out.put(rb.slice(0, 3), "node1", names)  # hashes of n0, n1, n2: all named
    out.put(rb.slice(3, 3), "node1", names)  # n3 (unnamed), n0, n1: 6 rows, one row group
    out.put(rb.slice(6, 6), "node1", names)
    (part,) = out.close()
    rows = pq.read_table(part).to_pylist()
    assert [(r["offset"], r["fname"]) for r in rows] == [
        (8 * i, None if i % 4 == 3 else paths[i % 4]) for i in range(12)]
    assert [r["fhash"] for r in rows] == [fhex(paths[i % 4]) for i in range(12)]
    md = pq.ParquetFile(part).metadata
    assert [md.row_group(g).num_rows for g in range(md.num_row_groups)] == [6, 6]


def test_files_table_one_row_per_hash_by_hash(tmp_path):
    """files.parquet: one row per hash, its first row's name, by hash (as strings sort); the
    tracer's hashes written again from their numbers, distinct or repeated; other hashes (a
    DFTracer trace's) by the strings."""
    from iotrace_analyzer.model.files import hash_keys
    from iotrace_analyzer.outputs import parquet

    hexes = [f"{v:016x}" for v in (0xFFFF000000000001, 5, 0x8000000000000000, 7)]
    for rows in ([(h, f"/p/{i}") for i, h in enumerate(hexes)],
                 [(hexes[1], "/first"), (hexes[0], "/a"), (hexes[1], "/second"), (hexes[3], "/b")],
                 [("h-two", "/x"), (hexes[2], "/y"), ("h-one", "/z"), ("h-two", "/w")],
                 [(f"{(i * 7919) % 50 * 0x0101010101:016x}", f"/n/{i}") for i in range(500)]):  # (a sort
        # that is not stable would give some hash a later row's name)
        files = pa.table({"fhash": [h for h, _ in rows], "name": [n for _, n in rows]})
        keys = hash_keys(files.column("fhash"))
        hex_keys = all(len(h) == 16 and h != "h-two" for h, _ in rows)
        parquet.write_metadata(str(tmp_path), [], [], files, keys, hex_keys)
        got = pq.read_table(tmp_path / "files.parquet").to_pylist()
        first: dict = {}
        for h, n in rows:
            first.setdefault(h, n)
        assert got == [{"fhash": h, "name": first[h]} for h in sorted(first)]


def test_file_order_sorted_apart_is_the_same(tmp_path, monkeypatch):
    """Over many files (SORT_APART_FILES) the summary's file order is sorted on a thread while
    the names are classified: the same files, in the same order, with the same figures."""
    from iotrace_analyzer.model import files as files_model

    p = 700
    paths = [f"/data/o{i:03d}" for i in range(60)]
    events = [process(p)] + [fh(x, p) for x in paths]
    events += [io("read", p, (1000 + 10 * i) * US, (i % 4 + 1) * US, path=paths[i * 13 % 60], fd=3, size=8,
                  offset=8 * i, ret=8) for i in range(400)]
    write_trace(tmp_path / "t" / "o-node1-700.pfw.zst", events)
    here = analyze([str(tmp_path / "t")], Options(engine="local", workers=1))
    monkeypatch.setattr(files_model, "SORT_APART_FILES", 0)
    apart = analyze([str(tmp_path / "t")], Options(engine="local", workers=1))
    assert [r["file"] for r in apart.summary["files"]] == [r["file"] for r in here.summary["files"]]
    assert apart.summary["files"] == here.summary["files"] and len(here.files) == 60
    assert apart.files.file.to_pylist() == here.files.file.to_pylist()
