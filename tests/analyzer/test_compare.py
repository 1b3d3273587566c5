"""iotrace-analyze --compare: a side with nothing readable is refused (status 1, naming it),
a side read with damage is said to be; a change is better or worse only past the noise of two
runs (an absolute floor for times and shares, a relative threshold), "same" otherwise."""
from __future__ import annotations

import json
import os

from conftest import end, fh, io, process, write_trace
from iotrace_analyzer.analyses import compare
from iotrace_analyzer.cli import main

MS = 1_000_000
T0 = 1_000 * MS


def job(d, read_us, reads=100, wall_ms=1000, pid=100):
    """One process reading /data/a.bin in `reads` 4 KiB reads of `read_us` each."""
    lines = [process(pid, mono_ns=T0), fh("/data/a.bin", pid)]
    t = T0 + MS
    for i in range(reads):
        lines.append(io("read", pid, t, int(read_us * 1000), path="/data/a.bin", fd=3, size=4096,
                        offset=i * 4096, ret=4096))
        t += int(read_us * 1000) + 1000
    lines.append(end(pid, len(lines), mono_ns=T0 + wall_ms * MS))
    write_trace(d / f"p-node1-{pid}.pfw.zst", lines)
    return str(d)


def figures(C):
    return {f["figure"]: f for f in C["figures"]}


def test_an_unreadable_side_is_refused(tmp_path, capsys):
    good = job(tmp_path / "good", 50)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a-h-1.pfw.zst").write_bytes(os.urandom(2000))
    (bad / "b-h-2.pfw").write_text("")
    for sides, which in (((good, str(bad)), "after"), ((str(bad), good), "before")):
        assert main(["--compare", *sides, "-o", str(tmp_path / "out")]) == 1
        err = capsys.readouterr().err
        assert f"compare: {which} {bad}: no event could be read" in err and "nothing to compare" in err
        assert not (tmp_path / "out" / "compare.json").exists()
    # an earlier output of nothing (a summary of 0 events) is refused as well
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"job": {"events": 0}, "time": {}, "input": {"files": 1}}))
    assert main(["--compare", good, str(empty)]) == 1
    assert "after" in capsys.readouterr().err


def test_a_damaged_side_is_said_to_be(tmp_path, capsys):
    before = job(tmp_path / "a", 50)
    after = job(tmp_path / "b", 50)
    with open(os.path.join(after, "p-node1-100.pfw.zst"), "ab") as f:
        f.write(os.urandom(300))  # a damaged tail: the events before it still read
    assert main(["--compare", before, after]) == 0
    out = capsys.readouterr().out
    assert "after was read with damage: 1 damaged file(s)" in out
    assert "before was read with damage" not in out


def _summary(tmp_path, name, read_us, reads=100):
    d = job(tmp_path / name, read_us, reads)
    assert main([d, "-o", str(tmp_path / f"{name}-out"), "--no-parquet", "-q"]) == 0
    with open(tmp_path / f"{name}-out" / "summary.json") as f:
        return json.load(f)


def test_changes_within_the_noise_are_same(tmp_path):
    base = _summary(tmp_path, "base", 50)
    # 5 ms of reads against 5.5 ms: +10% but 0.5 ms, under the 10 ms floor; the counts equal
    near = _summary(tmp_path, "near", 55)
    C = compare.compare(base, near)
    f = figures(C)
    assert f["I/O time"]["verdict"] == "same" and f["I/O time"]["change"] > 0.05
    assert f["I/O calls"]["verdict"] == "same" and f["events"]["verdict"] == "same"
    # 50 ms of reads against 150 ms: past both the floor and the threshold
    slow = _summary(tmp_path, "slow", 500)
    worse = _summary(tmp_path, "worse", 1500)
    f = figures(compare.compare(slow, worse))
    assert f["I/O time"]["verdict"] == "worse" and f["I/O share of wall"]["verdict"] == "worse"
    f = figures(compare.compare(worse, slow))
    assert f["I/O time"]["verdict"] == "better"
    # more calls for the same work is a count change past 5%
    f = figures(compare.compare(base, _summary(tmp_path, "more", 50, reads=120)))
    assert f["I/O calls"]["verdict"] == "worse"
