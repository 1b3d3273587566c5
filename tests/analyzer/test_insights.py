"""The findings' rules on workloads written to have each problem, at the edges of their
thresholds, and on workloads that must not have it (docs/insights.md).

Each process is a trace written as the tracer writes it (conftest), with a start and an end
record so its wall time is known: the rules' shares are of that wall time.
"""

import json

import pytest
from conftest import end, fh, io, process, span, write_trace
from iotrace_analyzer.analyses import insights
from iotrace_analyzer.cli import main
from iotrace_analyzer.pipeline import Options, analyze

MS = 1_000_000  # ns
KiB, MiB = 1024, 1 << 20
T0 = 1_000 * MS  # every process starts here on its clock


class Proc:
    """One process's trace: events appended in time order, FH lines added before a path's
    first use, start and end records around them."""

    def __init__(self, pid, role="main", wall_ms=1000, **extra):
        self.pid, self.wall_ms = pid, wall_ms
        self.lines = [process(pid, mono_ns=T0, role=role, **extra)]
        self.paths = set()
        self.t = T0 + MS  # the next event's start

    def io(self, name, path=None, dur_us=10, **args):
        if path is not None and path not in self.paths:
            self.paths.add(path)
            self.lines.append(fh(path, self.pid))
        self.lines.append(io(name, self.pid, self.t, dur_us * 1000, path=path, **args))
        self.t += dur_us * 1000 + 1000
        return self

    def span(self, name, cat, dur_us, args=None):
        self.lines.append(span(name, cat, self.pid, self.t, dur_us * 1000, args=args))
        self.t += dur_us * 1000 + 1000
        return self

    def read_file(self, path, size, chunk, passes=1, dur_us=10):
        """open, sequential reads of `chunk` bytes to `size`, close; `passes` times."""
        for _ in range(passes):
            self.io("openat", path, ret=3, flags=0)
            for off in range(0, size, chunk):
                n = min(chunk, size - off)
                self.io("read", path, dur_us=dur_us, fd=3, size=n, offset=off, ret=n)
            self.io("close", path, fd=3, ret=0)
        return self

    def done(self):
        assert self.t <= T0 + self.wall_ms * MS, "events past the end"
        return self.lines + [end(self.pid, len(self.lines), mono_ns=T0 + self.wall_ms * MS)]


def run(tmp_path, *procs, rules=None, costs=False):
    """The findings by id, and the summary. `costs`: the rules' minimum cost (`min_share` of
    the wall time) in force; off by default, the workloads here being built at the edges of
    the other thresholds with little time in their calls."""
    if not costs:
        rules = {rid: dict({"min_share": 0} if "min_share" in keys else {}, **(rules or {}).get(rid, {}))
                 for rid, keys in insights.THRESHOLDS.items()}
    for p in procs:
        write_trace(tmp_path / "tr" / f"python3-node1-{p.pid}.pfw.zst", p.done(), lines_per_frame=500)
    S = analyze([str(tmp_path / "tr")], Options(engine="local", workers=1,
                                                rules=insights.thresholds(rules))).summary
    found = {f["id"]: f for f in S["findings"]}
    assert len(found) == len(S["findings"])  # one finding per rule
    return found, S


def files_of(f):
    return [r["file"] for r in f["evidence"]["files"]]


# --------------------------------------------------------------------------- a clean job


def test_clean_sequential_read_has_no_finding(tmp_path):
    """64 MiB read front to back in 1 MiB requests, beside compute: nothing to say."""
    p = Proc(100, wall_ms=2000)
    p.read_file("/data/train.bin", 64 * MiB, MiB, dur_us=200)
    for _ in range(20):
        p.span("step", "compute", 50_000)
    found, S = run(tmp_path, p)
    assert found == {}
    assert S["time"]["io_share_of_wall"] == round((64 * 200 + 2 * 10) / 2_000_000, 6)  # reads, open, close
    from iotrace_analyzer.outputs import report
    assert report.text_report(S).startswith("Findings: none.")


# --------------------------------------------------------------------------- small requests


@pytest.mark.parametrize("n, fires", [(1000, True), (999, False)])
def test_small_reads_at_min_calls(tmp_path, n, fires):
    """4 KiB reads are small (< 1 MiB); the finding needs 1000 of them (and > 10% of reads)."""
    p = Proc(100, wall_ms=2000)
    p.read_file("/data/samples.bin", n * 4 * KiB, 4 * KiB)
    found, _ = run(tmp_path, p)
    assert ("small-reads" in found) == fires
    if fires:
        f = found["small-reads"]
        assert (f["severity"], f["value"], f["threshold"]) == ("warn", 1.0, 0.1)
        ev = f["evidence"]
        assert (ev["calls"], ev["small_calls"], ev["size_limit"]) == (1000, 1000, MiB)
        assert ev["files"][0]["file"] == "/data/samples.bin"
        assert (ev["files"][0]["small_reads"], ev["files"][0]["usual_size"]) == (1000, "1K-10K")


def test_small_reads_share_edge_and_size_threshold(tmp_path):
    """1000 small reads among 9000 big ones: 10% fires, and a 4 KiB size limit makes 4 KiB
    reads no longer small."""
    p = Proc(100, wall_ms=5000)
    p.read_file("/data/a.bin", 1000 * 4 * KiB, 4 * KiB, dur_us=1)
    p.read_file("/data/b.bin", 9000 * 2 * MiB, 2 * MiB, dur_us=1)
    found, _ = run(tmp_path, p)
    assert found["small-reads"]["value"] == 0.1
    assert files_of(found["small-reads"]) == ["/data/a.bin"]
    found, _ = run(tmp_path / "again", p, rules={"small-reads": {"size": 4 * KiB}})
    assert "small-reads" not in found  # the limit rounds to 1 KiB: 4 KiB reads are not below it


def test_small_writes(tmp_path):
    p = Proc(100, wall_ms=2000)
    p.io("openat", "/out/log.bin", ret=3, flags=0)
    for i in range(1200):
        p.io("write", "/out/log.bin", dur_us=1, fd=3, size=100, offset=100 * i, ret=100)
    found, _ = run(tmp_path, p)
    f = found["small-writes"]
    assert (f["evidence"]["small_calls"], files_of(f)) == (1200, ["/out/log.bin"])
    assert "small-reads" not in found


def test_imports_are_not_small_reads(tmp_path):
    """Thousands of small reads of .py files are the software's loading, not the job's."""
    p = Proc(100, wall_ms=60_000)
    for i in range(300):
        p.read_file(f"/usr/lib/python3.11/site-packages/pkg/m{i}.py", 4 * 4 * KiB, 4 * KiB, dur_us=1)
    found, S = run(tmp_path, p)
    assert S["file_classes"]["software"]["files"] == 300
    assert "small-reads" not in found and "metadata-heavy" not in found


# --------------------------------------------------------------------------- random access


def _jumpy(p, path, n_random, n_seq, chunk=64 * KiB):
    """`n_seq` sequential reads from 0, then `n_random` reads at 0 (each a jump back)."""
    p.io("openat", path, ret=3, flags=0)
    p.io("read", path, fd=3, size=chunk, offset=0, ret=chunk)  # the stream's first: neither
    for i in range(n_seq):
        p.io("read", path, fd=3, size=chunk, offset=(i + 1) * chunk, ret=chunk)
    for _ in range(n_random):
        p.io("read", path, fd=3, size=chunk, offset=0, ret=chunk)
    p.io("close", path, fd=3, ret=0)


@pytest.mark.parametrize("n_random, fires", [(100, True), (99, False)])
def test_random_reads_at_edges(tmp_path, n_random, fires):
    """100 backward jumps among 400 sequential reads: 20% and 100 calls, both edges."""
    p = Proc(100, wall_ms=5000)
    _jumpy(p, "/data/table.db", n_random, 400 if n_random == 100 else 396)
    found, _ = run(tmp_path, p)
    assert ("random-reads" in found) == fires
    if fires:
        f = found["random-reads"]
        assert f["value"] == 0.2 and files_of(f) == ["/data/table.db"]
        assert (f["evidence"]["files"][0]["random"], f["evidence"]["files"][0]["sequential"]) == (100, 400)


def test_random_reads_in_small_files_are_not_weighed(tmp_path):
    """Jumps within a file read-ahead takes whole (< 1 MiB) cost nothing."""
    p = Proc(100, wall_ms=5000)
    p.io("openat", "/data/small.db", ret=3, flags=0)
    for i in range(500):
        p.io("read", "/data/small.db", fd=3, size=4096, offset=(i % 2) * 4096 + (i % 3) * 8192, ret=4096)
    found, _ = run(tmp_path, p)
    assert "random-reads" not in found


def test_random_writes(tmp_path):
    p = Proc(100, wall_ms=5000)
    p.io("openat", "/out/matrix.bin", ret=3, flags=0)
    blocks = [(i * 13) % 31 for i in range(300)]  # a stride that wraps around 31 blocks
    for b in blocks:
        p.io("pwrite64", "/out/matrix.bin", fd=3, size=64 * KiB, offset=b * 64 * KiB, ret=64 * KiB)
    found, _ = run(tmp_path, p)
    f = found["random-writes"]
    back = sum(b < a + 1 for a, b in zip(blocks, blocks[1:]))  # starts before the last one's end
    assert files_of(f) == ["/out/matrix.bin"] and f["evidence"]["random"] == back
    assert f["value"] == round(back / 299, 6)


# --------------------------------------------------------------------------- metadata


@pytest.mark.parametrize("n_files, fires", [(100, True), (99, False)])
def test_file_per_sample(tmp_path, n_files, fires):
    """Each sample its own file, opened for one 4 KiB read: 100 files make the pattern."""
    p = Proc(100, wall_ms=5000)
    for i in range(n_files):
        p.io("stat", f"/data/s/{i:05d}.jpg", ret=0)
        p.read_file(f"/data/s/{i:05d}.jpg", 4 * KiB, 64 * KiB)
    found, _ = run(tmp_path, p)
    assert ("metadata-heavy" in found) == fires
    if fires:
        f = found["metadata-heavy"]
        fps = f["evidence"]["file_per_sample"]
        assert (fps["files"], fps["opens"], fps["reads"], fps["mean_bytes_per_open"]) == (100, 100, 100, 4096)
        assert fps["metadata_calls_per_open"] == 3  # stat, open, close
        assert f["title"].startswith("One file per sample: 100 data files")
    # the per-sample files' small reads are the pattern's symptom, not a finding of their own
    assert "small-reads" not in found


@pytest.mark.parametrize("n_stats, fires", [(1000, True), (999, False)])
def test_metadata_time_at_min_calls(tmp_path, n_stats, fires):
    """stat before every read of one file: 30 µs of stat per 50 µs of reads is 37.5%; it
    needs 1000 metadata calls on data files."""
    p = Proc(100, wall_ms=10_000)
    p.io("openat", "/data/big.bin", ret=3, flags=0)  # open and close count: 2 + n_stats - 2
    for i in range(n_stats - 2):
        p.io("stat", "/data/big.bin", dur_us=30, ret=0)
        p.io("read", "/data/big.bin", dur_us=50, fd=3, size=MiB, offset=i * MiB, ret=MiB)
    p.io("close", "/data/big.bin", fd=3, ret=0)
    found, _ = run(tmp_path, p)
    assert ("metadata-heavy" in found) == fires
    if fires:
        f = found["metadata-heavy"]
        assert f["severity"] == "warn" and f["evidence"]["use"]["metadata_calls"] == 1000
        assert f["evidence"]["phase"] == "reading the data" and f["evidence"]["create"]["files"] == 0
        assert 0.3 <= f["value"] < 0.5 and files_of(f) == ["/data/big.bin"]


# --------------------------------------------------------------------------- redundant reads


def test_redundant_reads(tmp_path):
    """A 2 MiB file read 3 times over: 4 MiB read again, warn; with 3 epochs recorded, once
    per epoch is expected: info."""
    p = Proc(100, wall_ms=5000)
    p.read_file("/data/d.bin", 2 * MiB, MiB, passes=3)
    p.read_file("/data/once.bin", 2 * MiB, MiB)
    found, _ = run(tmp_path, p)
    f = found["redundant-reads"]
    assert (f["severity"], f["value"], files_of(f)) == ("warn", 2.0, ["/data/d.bin"])  # (6+2)/(2+2)
    assert (f["evidence"]["bytes_read_again"], f["evidence"]["files"][0]["times"]) == (4 * MiB, 3.0)
    q = Proc(101, wall_ms=5000)
    q.read_file("/data/d.bin", 2 * MiB, MiB, passes=3)
    for e in range(3):
        q.span("epoch", "train", 10, args={"epoch": e})
    found, _ = run(tmp_path / "epochs", q)
    assert found["redundant-reads"]["severity"] == "info" and found["redundant-reads"]["evidence"]["epochs"] == 3


def test_read_once_is_not_redundant(tmp_path):
    p = Proc(100, wall_ms=5000)
    p.read_file("/data/d.bin", 8 * MiB, MiB)
    p.read_file("/data/e.bin", 8 * MiB, MiB, passes=2)  # twice: below "more than twice"? ratio 2
    found, _ = run(tmp_path, p)
    assert "redundant-reads" not in found  # (8+16)/(8+8) = 1.5 in all


# --------------------------------------------------------------------------- checkpoints, syncs


@pytest.mark.parametrize("save_ms, severity", [(100, "warn"), (300, "high"), (99, None)])
def test_checkpoint_stall(tmp_path, save_ms, severity):
    """torch.save events holding the process 10% (warn) or 30% (high) of its wall time."""
    p = Proc(100, wall_ms=1000)
    for k in range(4):
        p.span("torch.save", "checkpoint", save_ms * 250, args={"file": f"/ck/m{k}.pt", "bytes": 50 * MiB})
    found, _ = run(tmp_path, p)
    if severity is None:
        assert "checkpoint-stall" not in found
        return
    f = found["checkpoint-stall"]
    assert f["severity"] == severity and f["value"] == save_ms / 1000
    ev = f["evidence"]
    assert (ev["pid"], ev["checkpoints"], ev["bytes"]) == (100, 4, 200 * MiB)
    assert ev["every_us"] == save_ms * 250 + 1 and len(ev["windows"]) == 4


def test_checkpoint_files_without_events(tmp_path):
    """No checkpoint events: writes to checkpoint-named files weigh instead."""
    p = Proc(100, wall_ms=1000)
    p.io("openat", "/ck/step100.ckpt", ret=3, flags=0)
    for i in range(10):
        p.io("write", "/ck/step100.ckpt", dur_us=20_000, fd=3, size=8 * MiB, offset=i * 8 * MiB, ret=8 * MiB)
    found, _ = run(tmp_path, p)
    f = found["checkpoint-stall"]
    assert f["value"] == 0.2 and f["evidence"]["bytes"] == 80 * MiB


@pytest.mark.parametrize("n_sync, fires", [(10, True), (9, False)])
def test_sync_heavy(tmp_path, n_sync, fires):
    p = Proc(100, wall_ms=2000)
    p.io("openat", "/out/db.wal", ret=3, flags=0)
    for i in range(n_sync):
        p.io("write", "/out/db.wal", dur_us=100, fd=3, size=MiB, offset=i * MiB, ret=MiB)
        p.io("fsync", "/out/db.wal", dur_us=5000, fd=3, ret=0)
    found, _ = run(tmp_path, p)
    assert ("sync-heavy" in found) == fires
    if fires:
        f = found["sync-heavy"]
        assert f["evidence"]["calls"] == [dict(name="fsync", count=10, time_us=50_000.0)]
        # fsync is not metadata: the data file's metadata share is of its open and close only
        assert "metadata-heavy" not in found


# --------------------------------------------------------------------------- processes


def test_imbalance_among_workers(tmp_path):
    """Three workers: one reads four times what each other does; the main process is of
    another role and not compared."""
    main_ = Proc(100, wall_ms=3000)
    main_.read_file("/data/index", 4 * KiB, 4 * KiB)
    ws = []
    for pid, n in ((101, 10), (102, 10), (103, 40)):
        w = Proc(pid, role="worker", wall_ms=3000, parent_pid=100)
        w.read_file(f"/data/shard{pid}", n * MiB, MiB, dur_us=1000)
        ws.append(w)
    found, _ = run(tmp_path, main_, *ws)
    f = found["imbalance"]
    assert f["evidence"]["role"] == "worker"
    assert f["value"] == round(40_020 / 20_020, 6)  # 40 reads of 1 ms and open, close: against the mean
    assert [p["pid"] for p in f["evidence"]["processes"]] == [103, 101, 102]
    for w, n in zip(ws, (20, 20, 20)):
        w.__init__(w.pid, role="worker", wall_ms=3000, parent_pid=100)
        w.read_file(f"/data/shard{w.pid}", n * MiB, MiB, dur_us=1000)
    found, _ = run(tmp_path / "even", main_, *ws)
    assert "imbalance" not in found


def test_imbalance_of_time_with_the_same_work_names_slower_calls(tmp_path):
    """Three workers each read 20 MiB in 20 calls; worker 103's calls take 4 ms against 1 ms
    (a slower device, a busier CPU): imbalance by time, but its title says the same calls and
    bytes, and its advice is about where and on what the calls ran, not spreading the data."""
    ws = []
    for pid, dur in ((101, 1000), (102, 1000), (103, 4000)):
        w = Proc(pid, role="worker", wall_ms=3000, parent_pid=100)
        w.read_file(f"/data/shard{pid}", 20 * MiB, MiB, dur_us=dur)
        ws.append(w)
    found, _ = run(tmp_path, Proc(100, wall_ms=3000), *ws)
    f = found["imbalance"]
    assert f["title"] == ("The busiest worker process takes 2.0x the mean data I/O time of its 3 for the same "
                          "calls and bytes: its calls were slower, not more")
    rows = f["evidence"]["processes"]
    assert [(r["pid"], r["calls"], r["bytes_read"]) for r in rows] == [(103, 22, 20 * MiB), (101, 22, 20 * MiB),
                                                                       (102, 22, 20 * MiB)]
    assert not any("Spread the data" in a for a in f["advice"])
    # 10% more bytes (and 2 calls) is still the same work; 4 times the bytes is more
    for mib, same in ((22, True), (80, False)):
        ws[2].__init__(103, role="worker", wall_ms=3000, parent_pid=100)
        ws[2].read_file("/data/shard103", mib * MiB, MiB, dur_us=4000 if same else 1000)
        found, _ = run(tmp_path / f"more{mib}", Proc(100, wall_ms=3000), *ws)
        f = found["imbalance"]
        assert ("slower, not more" in f["title"]) == same, f["title"]
        assert any("Spread the data" in a for a in f["advice"]) != same


# --------------------------------------------------------------------------- io-bound


@pytest.mark.parametrize("wait_ms, compute_ms, severity", [(30, 70, "warn"), (60, 40, "high"), (5, 95, None)])
def test_io_bound_loop(tmp_path, wait_ms, compute_ms, severity):
    """An annotated loop: `fetch` waits (iotrace.iter) against `compute` steps."""
    p = Proc(100, wall_ms=2000)
    for _ in range(10):
        p.span("fetch_wait", "fetch", wait_ms * 100)
        p.span("step", "compute", compute_ms * 100)
    found, _ = run(tmp_path, p)
    if severity is None:  # a compute-bound loop is not called I/O bound
        assert "io-bound" not in found
        return
    f = found["io-bound"]
    assert f["severity"] == severity and f["value"] == wait_ms / 100
    assert f["evidence"]["processes"][0]["pid"] == 100


def test_io_bound_dataloader(tmp_path):
    """A DataLoader's epochs (iotrace.auto's `dataloader` events): 60% of the epoch in fetches."""
    p = Proc(100, wall_ms=2000)
    t0 = p.t
    for _ in range(10):
        p.span("fetch", "dataloader", 6_000)
        p.span("step", "compute", 4_000)
    p.lines.append(span("epoch", "dataloader", 100, t0, p.t - t0, args={"epoch": 0, "loader": 0, "batches": 10}))
    found, S = run(tmp_path, p)
    f = found["io-bound"]
    assert f["severity"] == "high" and f["evidence"]["loaders"][0]["batches"] == 10
    assert 0.59 < f["value"] < 0.61


@pytest.mark.parametrize("read_ms, fires", [(600, True), (10, False)])
def test_io_bound_without_annotations(tmp_path, read_ms, fires):
    """No loop events: a process whose wall time is mostly reads of data is I/O bound; one
    that computes (no events) for most of its life is not."""
    p = Proc(100, wall_ms=1000)
    p.read_file("/data/x.bin", 10 * MiB, MiB, dur_us=read_ms * 100)
    found, S = run(tmp_path, p)
    assert ("io-bound" in found) == fires
    if fires:
        f = found["io-bound"]
        assert f["value"] == pytest.approx(0.6, abs=1e-3)
        assert f["evidence"]["processes"][0]["wall_us"] == 1_000_000


# --------------------------------------------------------------------------- others


@pytest.mark.parametrize("n, fires", [(1000, True), (999, False)])
def test_software_loading(tmp_path, n, fires):
    p = Proc(100, wall_ms=1000)
    for i in range(n):
        p.io("stat", f"/usr/lib/python3.11/site-packages/torch/m{i}.py", dur_us=100, ret=0)
    found, _ = run(tmp_path, p)
    assert ("software-loading" in found) == fires
    assert "metadata-heavy" not in found  # the imports are not the job's metadata
    if fires:
        f = found["software-loading"]
        assert f["severity"] == "info" and f["evidence"]["calls"] == 1000


def test_pipe_traffic(tmp_path):
    p = Proc(100, wall_ms=1000)
    for _i in range(20):
        p.io("read", "pipe:[4242]", dur_us=100, fd=5, size=MiB, ret=MiB)
    found, _ = run(tmp_path, p)
    f = found["pipe-traffic"]
    assert f["severity"] == "info" and f["evidence"]["bytes_read"] == 20 * MiB


# --------------------------------------------------------------------------- order, options


def test_findings_sorted_most_severe_first(tmp_path):
    p = Proc(100, wall_ms=1000)
    for _ in range(4):
        p.span("torch.save", "checkpoint", 100_000, args={"bytes": MiB})  # 40%: high
    for _i in range(20):
        p.io("read", "pipe:[1]", dur_us=10, fd=5, size=MiB, ret=MiB)  # info
    p.read_file("/data/d.bin", 2 * MiB, MiB, passes=3)  # warn
    found, S = run(tmp_path, p)
    assert [f["id"] for f in S["findings"]] == ["checkpoint-stall", "redundant-reads", "pipe-traffic"]
    for f in S["findings"]:
        assert set(f) == {"id", "severity", "title", "value", "threshold", "evidence", "advice"}
        assert f["advice"] and all(isinstance(a, str) for a in f["advice"])


def test_rules_run_two_at_a_time_with_the_same_findings(tmp_path, monkeypatch):
    """Over many files (PARALLEL_FILES) the rules run on two threads: the same findings, in the
    same order, as one after the other; a rule's exception comes out of findings()."""
    p = Proc(100, wall_ms=1000)
    for _ in range(4):
        p.span("torch.save", "checkpoint", 100_000, args={"bytes": MiB})
    for _i in range(20):
        p.io("read", "pipe:[1]", dur_us=10, fd=5, size=MiB, ret=MiB)
    p.read_file("/data/d.bin", 2 * MiB, MiB, passes=3)
    d = tmp_path / "t"
    d.mkdir()
    write_trace(d / "t-node1-100.pfw.zst", p.done())
    th = insights.thresholds({rid: {"min_share": 0} for rid, keys in insights.THRESHOLDS.items()
                              if "min_share" in keys})
    job = analyze([str(d)], Options(engine="local", workers=1, rules=th))
    serial = insights.findings(job, th)
    threads = []
    rule = insights.RULES["pipe-traffic"]
    monkeypatch.setitem(insights.RULES, "pipe-traffic",
                        lambda *a: threads.append(__import__("threading").current_thread().name) or rule(*a))
    monkeypatch.setattr(insights, "PARALLEL_FILES", 0)
    assert insights.findings(job, th) == serial and [f["id"] for f in serial] == \
        ["checkpoint-stall", "redundant-reads", "pipe-traffic"]
    assert threads and threads[0].startswith("ThreadPoolExecutor")

    def broken(*a):
        raise ValueError("a rule's bug")

    monkeypatch.setitem(insights.RULES, "io-bound", broken)
    with pytest.raises(ValueError, match="a rule's bug"):
        insights.findings(job, th)


def test_cli_rules_file_threshold_and_quiet(tmp_path, capsys):
    p = Proc(100, wall_ms=2000)
    p.read_file("/data/samples.bin", 500 * 4 * KiB, 4 * KiB)
    write_trace(tmp_path / "tr" / "p-100.pfw.zst", p.done())
    out = tmp_path / "out"
    assert main([str(tmp_path / "tr"), "-o", str(out), "--no-parquet", "-q"]) == 0
    assert json.loads((out / "summary.json").read_text())["findings"] == []
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"small-reads": {"min_calls": 500, "min_share": 0}}))
    assert main([str(tmp_path / "tr"), "-o", str(out), "--no-parquet", "-q", "--rules", str(rules)]) == 0
    S = json.loads((out / "summary.json").read_text())
    assert [f["id"] for f in S["findings"]] == ["small-reads"] and S["findings"][0]["threshold"] == 0.1
    assert capsys.readouterr().out == ""  # -q: nothing on stdout, the findings still written
    assert main([str(tmp_path / "tr"), "--no-parquet", "--threshold", "small-reads.min_calls=500",
                 "--threshold", "small-reads.share=0.5", "--threshold", "small-reads.min_share=0"]) == 0
    assert "[WARN] small-reads: 100% of the data reads (500 calls)" in capsys.readouterr().out
    assert main([str(tmp_path / "tr"), "--no-parquet", "--threshold", "small-reads.enabled=false",
                 "--threshold", "small-reads.min_calls=1"]) == 0
    assert "Findings: none." in capsys.readouterr().out
    for bad in ("small-read.size=1", "small-reads.sise=1", "nodot=1"):
        assert main([str(tmp_path / "tr"), "--no-parquet", "--threshold", bad]) == 2
        assert "iotrace-analyze: error: rules:" in capsys.readouterr().err


def test_every_rule_documented():
    """docs/insights.md lists every rule and every threshold with its default."""
    import pathlib
    doc = (pathlib.Path(__file__).parents[2] / "docs" / "insights.md").read_text()
    for rid, keys in insights.THRESHOLDS.items():
        assert f"`{rid}`" in doc, rid
        for k in keys:
            assert f"`{rid}.{k}`" in doc, (rid, k)
    assert set(insights.RULES) == set(insights.THRESHOLDS)


def _mpi_job(outside_cpu_s: float, outside_wait_s: float, cpu_wait_s: float, late_s: float = 0.0) -> dict:
    """A summary of 4 ranks on one host, each run 4 s (MPI_Init's end to MPI_Finalize's start):
    1 s in MPI calls, and outside them `outside_cpu_s` of CPU and `outside_wait_s` of nothing (a
    CPU waited for); the kernel's cpu_wait of each process `cpu_wait_s` (its MPI waits too, where
    the library polls). Rank 3 keeps each other rank waiting `late_s` in collective calls."""
    ranks, procs = [], []
    for r in range(4):
        pid = 100 + r
        run = 1e6 + (outside_cpu_s + outside_wait_s) * 1e6
        ranks.append(dict(rank=r, host="n1", pid=pid, run_us=run, mpi_us=1e6, mpiio_us=0.0, posix_us=0.0,
                          own_cpu_us=outside_cpu_s * 1e6, slow_wait_us=0.0 if r == 3 else late_s * 1e6,
                          caused_wait_us=3 * late_s * 1e6 if r == 3 else 0.0, bytes_read=0, bytes_written=0,
                          posix_bytes_read=0, posix_bytes_written=0, io_events=10, data_us=0.0,
                          host_cpu_wait_us=None))
        procs.append(dict(host="n1", pid=pid, rank=r, role="exec", wall_us=run + 0.2e6, cpu_us=outside_cpu_s * 1e6,
                          cpu_wait_us=cpu_wait_s * 1e6, mpi_cpu_us=0.1e6))
    return dict(processes=procs, mpi=dict(ranks=ranks, collective_ops=dict(top=[])))


@pytest.mark.parametrize("outside_cpu_s, outside_wait_s, cpu_wait_s, named", [
    (1.0, 2.0, 2.5, True),    # 2 s of a 4 s run outside MPI with no CPU: every rank short of CPUs
    (1.0, 2.0, 0.5, False),   # the kernel saw 0.5 s of waiting: the rest was not for a CPU (sleeps)
    (3.0, 0.0, 2.5, False),   # their time outside MPI was all CPU: the waiting was inside MPI (polling)
    (1.0, 0.4, 2.5, False),   # 0.4 s of a 2.4 s run: under the share
])
def test_mpi_ranks_short_of_cpus_alike(outside_cpu_s, outside_wait_s, cpu_wait_s, named):
    """No straggler to tell (every rank as slow), yet the ranks waited for a CPU outside their
    MPI calls: cpu-starved names them all, with the time outside MPI that was neither CPU nor I/O
    (at most the kernel's cpu_wait), not the time the ranks polled inside MPI waits."""
    S = _mpi_job(outside_cpu_s, outside_wait_s, cpu_wait_s)
    f = insights.cpu_starved(S, None, insights.thresholds()["cpu-starved"])
    if not named:
        assert f is None, f
        return
    assert f["title"] == ("4 MPI ranks waited for a CPU outside MPI calls, up to 50% of their run (rank 0: 2.0 s "
                          "of 4.0 s): the host's CPUs were short")
    rows = f["evidence"]["processes"]
    assert sorted(r["rank"] for r in rows) == [0, 1, 2, 3]
    assert all(r["cpu_wait_us"] == 2e6 and r["run_us"] == 4e6 for r in rows)
    assert f["evidence"]["cpu_wait_us"] == 8e6


def test_a_straggler_that_did_more_work_leaves_the_ranks_alone():
    """Rank 3 keeps the others waiting and did more I/O than they (collective-wait's case): even
    if every rank waited for a CPU outside MPI, cpu-starved says nothing of the ranks; the
    straggler is the story."""
    T = insights.thresholds()["cpu-starved"]
    S = _mpi_job(1.0, 2.0, 2.5, late_s=1.0)
    for r in S["mpi"]["ranks"]:
        r["host_cpu_wait_us"] = 10e6  # the host short of CPUs all along
    # the same work: the straggler was short of CPU (the rank branch)
    assert "for rank 3, which did the same work" in insights.cpu_starved(S, None, T)["title"]
    S["mpi"]["ranks"][3]["io_events"] = 100
    assert insights.cpu_starved(S, None, T) is None


def _late_rank_job(own_cpu_ms: list, got: float, kept_ms: float) -> dict:
    """4 ranks of the same I/O on a host short of CPUs (PSI 1 s), each run twice `kept_ms`;
    rank 3 keeps each other rank waiting `kept_ms` in collective calls. `own_cpu_ms`: each rank's CPU
    outside MPI calls; `got`: the share of a CPU rank 3 had (its CPU time over its wall time)."""
    ranks = []
    for r, cpu in enumerate(own_cpu_ms):
        ranks.append(dict(rank=r, host="n1", pid=100 + r, run_us=2 * kept_ms * 1e3, wall_us=1e6, cpu_us=got * 1e6,
                          own_cpu_us=cpu * 1e3, slow_wait_us=0.0 if r == 3 else kept_ms * 1e3,
                          caused_wait_us=3 * kept_ms * 1e3 if r == 3 else 0.0, bytes_read=0,
                          bytes_written=32 << 20, posix_bytes_read=0, posix_bytes_written=0, io_events=8670,
                          data_us=0.0, host_cpu_wait_us=1e6))
    return dict(processes=[], mpi=dict(ranks=ranks, collective_ops=dict(top=[])))


@pytest.mark.parametrize("own_cpu_ms, got, kept_ms, starved", [
    # measured under two busy loops (tests/test_mpi_findings.py, small writes): rank 3 used 4.5 ms
    # more CPU than the others' mean, 27% more, and kept each waiting 60 ms: short of CPU
    ([16.8, 16.5, 16.7, 21.2], 1 / 3, 60, True),
    ([100, 100, 100, 400], 1 / 3, 900, False),  # 4x the compute: its 300 ms more at a third of a CPU
    ([100, 100, 100, 400], 1.0, 900, False),    # at a whole CPU 300 of the 900 ms, but 4x the work
    ([100, 100, 100, 140], 1.0, 900, True),     # 40% more CPU, 40 of the 900 ms
    ([100, 100, 100, 160], 1.0, 900, False),    # 60% more: not the same work
    ([16.8, 16.5, 16.7, 21.2], 1 / 3, 20, False),  # 13.5 ms at its share: most of a 20 ms wait
])
def test_a_late_rank_s_extra_cpu_is_weighed_against_how_late_it_was(own_cpu_ms, got, kept_ms, starved):
    """Whether the rank the others wait for is cpu-starved or a straggler by its work: a few ms
    more of CPU than the others' does not make a rank 60 ms late (under contention its CPU is
    read with noise); the CPU it used beyond theirs must be at most half their mean and, at the
    share of a CPU it got, take at most half the time it kept them waiting."""
    S = _late_rank_job(own_cpu_ms, got, kept_ms)
    T = insights.thresholds()
    starved_f, wait_f = insights.cpu_starved(S, None, T["cpu-starved"]), insights.collective_wait(
        S, None, T["collective-wait"])
    if starved:
        assert wait_f is None and "for rank 3, which did the same work" in starved_f["title"], starved_f
    else:
        assert starved_f is None and "rank 3 holds them up" in wait_f["title"], wait_f


@pytest.mark.parametrize("run_s, found", [
    (0.6, True),   # 4 x 0.6 s runs: 0.1 s of small calls are 4.2% of them
    (2.0, False),  # 4 x 2 s: 1.25%, under the 2% share
    (0.0, False),  # no rank says its run (a Darshan log): weighed against the 24 s of wall, 0.4%
])
def test_mpi_io_rules_weigh_their_calls_against_the_ranks_run_not_the_launch(run_s, found):
    """4 ranks of 5.6 s wall each and a launcher of 2 s waiting for them (MPI's start and end
    taking seconds on a loaded node), 32768 independent 4 KiB writes to a file they share taking
    0.1 s: whether that is 2% is a question of the ranks' time from MPI_Init to MPI_Finalize,
    where MPI-IO calls can be, not of the processes' wall time."""
    procs = [dict(host="n1", pid=99, rank=None, role="main", wall_us=2e6)]
    ranks = []
    for r in range(4):
        procs.append(dict(host="n1", pid=100 + r, rank=r, role="exec", wall_us=5.6e6))
        ranks.append(dict(rank=r, host="n1", pid=100 + r, run_us=run_s * 1e6))
    files = [dict(file="/d/shared.dat", processes=4, independent_calls=32768, independent_bytes=32768 * 4096,
                  independent_time_us=0.1e6, collective_calls=0)]
    S = dict(processes=procs, time=dict(wall_us=24.4e6), job=dict(wall_us=24.4e6),
             mpi=dict(ranks=ranks, files=files))
    f = insights.mpi_independent_small(S, None, insights.thresholds()["mpi-independent-small"])
    assert (f is not None) == found, f
    if found:
        assert f["value"] == 4096.0 and f["evidence"]["files"][0]["calls"] == 32768
