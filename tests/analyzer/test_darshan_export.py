"""A Darshan log with DXT exported to Perfetto (`iotrace export JOB.darshan`): Perfetto's own
trace processor loads it with one slice per DXT segment, on its rank's track, at the
segment's time, offset and length; a log without DXT is a clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from perfetto_tp import load_trace, require_trace_processor  # noqa: E402

darshan = pytest.importorskip("darshan")
HERE = os.path.dirname(darshan.__file__)
DXT_LOGS = [os.path.join(HERE, "examples", "example_logs", "dxt.darshan"),
            os.path.join(HERE, "examples", "example_logs", "ior_hdf5_example.darshan"),
            os.path.join(HERE, "tests", "input", "sample-dxt-simple.darshan")]


def segments(log: str) -> list:
    """(rank, layer, read or write, start µs from the job's start, duration µs) of every DXT
    segment, by pydarshan's own reader."""
    darshan.enable_experimental()
    r = darshan.DarshanReport(log, read_all=True)
    out = []
    for mod, cat in (("DXT_POSIX", "posix"), ("DXT_MPIIO", "mpiio")):
        if mod not in r.records:
            continue
        for rec in r.records[mod].to_df():
            for kind in ("read", "write"):
                for _i, s in rec[f"{kind}_segments"].iterrows():
                    out.append((int(rec["rank"]), cat, kind, s["start_time"] * 1e6,
                                (s["end_time"] - s["start_time"]) * 1e6))
    return out


@pytest.mark.parametrize("log", DXT_LOGS, ids=os.path.basename)
def test_one_slice_per_segment(log, tmp_path):
    require_trace_processor()
    out = str(tmp_path / "job.pftrace")
    p = subprocess.run([sys.executable, "-m", "iotrace_analyzer.export", "export", log, "-o", out],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    want = segments(log)
    assert want
    with load_trace(out) as tp:
        rows = tp.query("select s.name as name, s.category as cat, s.ts as ts, s.dur as dur, p.pid as pid "
                        "from slice s join thread_track tt on s.track_id = tt.id join thread t using (utid) "
                        "join process p using (upid) where s.dur >= 0 and s.name in ('read', 'write')")
        assert len(rows) == len(want)
        # in ns from the first segment (the trace's ts and dur are whole ns): each slice is a
        # segment of its rank (pid = rank + 1), layer and kind, at its time, to a ns of rounding
        t0, e0 = min(r["ts"] for r in rows), min(w[3] for w in want)
        got = Counter((r["pid"] - 1, r["cat"], r["name"], r["ts"] - t0, r["dur"]) for r in rows)
        for w in want:
            e = (w[0], w[1], w[2], round((w[3] - e0) * 1000), round(w[4] * 1000))
            near = [(*e[:3], e[3] + a, e[4] + b) for a in range(-2, 3) for b in range(-2, 3)]
            hit = next((g for g in near if got[g] > 0), None)
            assert hit is not None, e
            got[hit] -= 1
        ranks = {w[0] for w in want}
        procs = tp.query("select pid, name from process where pid != 0")
        assert sorted((p["pid"] - 1, p["name"]) for p in procs) == [(r, f"rank {r}") for r in sorted(ranks)]


def test_a_log_without_dxt_is_a_clear_error(tmp_path):
    log = os.path.join(HERE, "tests", "input", "sample.darshan")
    p = subprocess.run([sys.executable, "-m", "iotrace_analyzer.export", "export", log, "-o",
                        str(tmp_path / "x.pftrace")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "no DXT segments" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not os.path.exists(tmp_path / "x.pftrace")


def test_a_cut_log_exports_what_is_whole(tmp_path):
    """ior_hdf5_example cut inside its DXT_MPIIO region: its DXT_POSIX segments exported, one
    slice each, the MPI-IO ones left out and said; cut before its DXT: a clear error."""
    require_trace_processor()
    src = DXT_LOGS[1]
    data = open(src, "rb").read()
    want = [w for w in segments(src) if w[1] == "posix"]
    assert want and len(want) < len(segments(src))
    ends = {}
    for cut in (len(data) - 400, 2000):
        log = tmp_path / f"cut{cut}.darshan"
        log.write_bytes(data[:cut])
        out = str(tmp_path / f"cut{cut}.pftrace")
        p = subprocess.run([sys.executable, "-m", "iotrace_analyzer.export", "export", str(log), "-o", out],
                           capture_output=True, text=True, timeout=300)
        assert "Traceback" not in p.stderr, p.stderr
        ends[cut] = (p, out)
    p, out = ends[len(data) - 400]
    assert p.returncode == 0 and "damaged: DXT_MPIIO records" in p.stderr and "DXT_POSIX" not in p.stderr, p.stderr
    with load_trace(out) as tp:
        rows = tp.query("select s.category as cat, count(*) as n from slice s "
                        "where s.name in ('read', 'write') group by s.category")
        assert {r["cat"]: r["n"] for r in rows} == {"posix": len(want)}
    p, out = ends[2000]
    assert p.returncode == 2 and "its DXT segments could not be read" in p.stderr, p.stderr
    assert not os.path.exists(out)
