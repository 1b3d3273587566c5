"""What the report page draws (activity.py, summary's size histograms per call family), against
values worked out by hand on small traces."""

import numpy as np
from conftest import end, fh, io, process, span, write_trace
from iotrace_analyzer.analyses.activity import SAMPLE_POINTS, _merge_sample
from iotrace_analyzer.pipeline import Options, analyze
from test_summary import trace_a, trace_b

US = 1000


def _analyze(path):
    job = analyze([str(path)], Options(engine="local", findings=False))
    return job.summary, job.drawn


def test_size_histograms_per_call_family(tmp_path):
    write_trace(tmp_path / "tr" / "p-node1-100.pfw", trace_a(), codec="plain")
    write_trace(tmp_path / "tr" / "p-node1-200.pfw", trace_b(), codec="plain")
    S, _ = _analyze(tmp_path / "tr")
    H = S["access"]["size_histogram_by_family"]
    assert set(H) == {"posix read", "posix write", "stdio read"}
    nonzero = {fam: {k: v for k, v in h.items() if v} for fam, h in H.items()}
    # read 4096 x2, read 100, pread64 100 x2; write 1000 x2, pwrite64 10; fread 300
    assert nonzero == {"posix read": {"1K-10K": 2, "100-1K": 3}, "posix write": {"100-1K": 2, "0-100": 1},
                       "stdio read": {"100-1K": 1}}


def test_process_rows_keep_every_byte_call_and_call_time(tmp_path):
    write_trace(tmp_path / "tr" / "p-node1-100.pfw", trace_a(), codec="plain")
    write_trace(tmp_path / "tr" / "p-node1-200.pfw", trace_b(), codec="plain")
    S, page = _analyze(tmp_path / "tr")
    pt = page.proc_timeline
    assert [p["pid"] for p in pt["processes"]] == [100, 200]
    assert pt["ops"].shape == (2, len(S["timeline"]["ops"]))
    assert (pt["bin_ns"], pt["start_ns"]) == (S["timeline"]["bin_ns"], S["timeline"]["start_ns"])
    assert pt["read"].sum(axis=1).tolist() == [4096 + 4096 + 100, 100 + 100 + 300]
    assert pt["written"].sum(axis=1).tolist() == [0, 1000 + 1000 + 10]
    assert pt["ops"].sum(axis=1).tolist() == [5, 8]
    assert pt["io_ns"].sum(axis=1).tolist() == [23 * US, (100 + 100 + 10 + 2 + 2 + 4 + 6 + 1) * US]
    # the rows add up to the job's timeline, bin by bin
    assert (pt["ops"].sum(axis=0) == np.array(S["timeline"]["ops"])).all()
    assert (pt["read"].sum(axis=0) == np.array(S["timeline"]["bytes_read"])).all()


def test_offsets_of_the_files_with_most_data_calls(tmp_path):
    write_trace(tmp_path / "tr" / "p-node1-100.pfw", trace_a(), codec="plain")
    write_trace(tmp_path / "tr" / "p-node1-200.pfw", trace_b(), codec="plain")
    _, page = _analyze(tmp_path / "tr")
    off = page.offsets
    assert [o["file"] for o in off] == ["/data/a", "/data/b"]
    a, b = off
    # /data/a: read 0, 4096, 8192 by pid 100, then pread64 50 and 0 by pid 200 (fread has no offset)
    assert a["offset"].tolist() == [0, 4096, 8192, 50, 0]
    assert a["pid"].tolist() == [100, 100, 100, 200, 200]
    assert a["length"].tolist() == [4096, 4096, 100, 100, 100]
    assert not a["write"].any() and a["calls"] == 5
    assert (np.diff(a["ts_ns"]) > 0).all()
    assert b["offset"].tolist() == [0, 1000, 5000] and b["write"].all()


def test_offsets_are_a_uniform_sample_of_many_calls(tmp_path):
    p, n = 300, 2000
    lines = [process(p), fh("/data/big", p)]
    lines += [io("pread64", p, (1000 + 2 * i) * US, US, path="/data/big", fd=3, size=4096, offset=4096 * i, ret=4096)
              for i in range(n)]
    write_trace(tmp_path / "tr" / "p-node1-300.pfw", lines + [end(p, len(lines) - 2)], codec="plain")
    _, page = _analyze(tmp_path / "tr")
    (o,) = page.offsets
    assert o["calls"] == n
    # every 4th call: 2000 calls fill 512 points at stride 1 and 2, then stride 4 keeps 500
    assert len(o["offset"]) == 500 <= SAMPLE_POINTS
    assert o["offset"].tolist() == [4096 * 4 * k for k in range(500)]


def test_merged_samples_take_the_coarser_stride():
    a = [8, 0, np.arange(8), np.arange(8), np.ones(8), np.zeros(8)]  # 8 calls, all kept
    b = [16, 1, np.arange(8) + 100, np.arange(8), np.ones(8), np.zeros(8)]  # 16 calls, every 2nd
    m = _merge_sample(a, b)
    assert m[:2] == [24, 1]
    assert m[2].tolist() == [0, 2, 4, 6] + list(range(100, 108))


def test_phases_and_their_time_split(tmp_path):
    p = 400
    lines = [process(p), fh("/data/x", p),
             span("epoch", "train", p, 1000 * US, 1000 * US),
             io("read", p, 1100 * US, 50 * US, path="/data/x", fd=3, size=10, offset=0, ret=10),
             io("read", p, 1500 * US, 30 * US, path="/data/x", fd=3, size=10, offset=10, ret=10),
             io("read", p, 2500 * US, 70 * US, path="/data/x", fd=3, size=10, offset=20, ret=10),  # between
             span("epoch", "train", p, 3000 * US, 1000 * US),
             io("write", p, 3400 * US, 200 * US, path="/data/x", fd=3, size=7, offset=30, ret=7),
             span("step", "compute", p, 3000 * US, 100 * US)]
    q = 401  # another process's I/O inside the second epoch
    other = [process(q), fh("/data/y", q),
             io("write", q, 3200 * US, 40 * US, path="/data/y", fd=3, size=5, offset=0, ret=5), end(q, 1)]
    write_trace(tmp_path / "tr" / "p-node1-400.pfw", lines + [end(p, 4)], codec="plain")
    write_trace(tmp_path / "tr" / "p-node1-401.pfw", other, codec="plain")
    S, page = _analyze(tmp_path / "tr")
    kinds = [(k["cat"], k["name"], k["count"], k["time_us"]) for k in S["phases"]["kinds"]]
    assert kinds == [("train", "epoch", 2, 2000.0), ("compute", "step", 1, 100.0)]
    split = [(r["name"], r["index"], r["pid"], r["duration_us"], r["io_us"], r["io_all_us"], r["bytes_all"])
             for r in S["phases"]["split"]]
    assert split == [("epoch", 0, p, 1000.0, 80.0, 80.0, 20), ("epoch", 1, p, 1000.0, 200.0, 240.0, 12),
                     ("step", 0, p, 100.0, 0.0, 0.0, 0)]
    events = {(k["cat"], k["name"]): k["events"] for k in page.phase_events}
    start = S["job"]["start_ns"]
    assert [(h, pid, s - start, d) for h, pid, s, d in events[("train", "epoch")]] == [
        ("node1", p, 0, 1000 * US), ("node1", p, 2000 * US, 1000 * US)]


def test_bins_coarsen_and_keep_every_count():
    from iotrace_analyzer.analyses.activity import ActivityPart

    rng = np.random.default_rng(7)
    part, other = ActivityPart(), ActivityPart()
    total = np.zeros(3)
    procs = [("f1", "h", 10, 0), ("f2", "h", 20, 0), ("f3", "h", 30, 0)]
    for k, exp in enumerate((10, 10, 12, 11)):  # blocks at the exponent of their time
        n = 5000
        tl = dict(proc=rng.integers(0, 3, n), bin=rng.integers(0, 1 << 20, n) >> (exp - 10),
                  read=rng.integers(0, 100, n), written=rng.integers(0, 100, n), ops=np.ones(n, np.int64),
                  io_dur=rng.integers(1, 9, n))
        total += np.bincount(tl["proc"], weights=tl["ops"], minlength=3)
        (part if k % 2 else other).add_bins(tl, procs, exp, 16)
    part.merge(other)
    part.compact()
    assert part.exp == 18  # the task's job timeline at 2**16 ns: its processes' bins 4 times coarser
    rows, bins, _rd, _wr, ops, _io = part.chunks[0]
    by_proc = np.bincount(rows, weights=ops, minlength=3)
    assert by_proc[[part.rows[("f1", 10)], part.rows[("f2", 20)], part.rows[("f3", 30)]]].tolist() == total.tolist()
    key = rows * (1 << 20) + bins
    assert len(np.unique(key)) == len(key)  # one row per (process, bin)
