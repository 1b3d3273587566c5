"""The summary's `counters` (counter events, ph "C"): per (host, pid, counter, key) the samples,
min, max, mean and last value, exact; the points for the page, at most 512 per series with each
time bin's lowest and highest kept; the text report's Counters section; nothing of it for a job
without counters.

Hand-written traces (times in µs): main 100 and worker 201.
  100: loss.value 2.0 @1000, 0.5 @1100, 4.0 @1200, 1.5 @1300 -> 4 samples, min 0.5, max 4,
       mean 2.0, last 1.5 (the last in time, not in the file: written before the 4.0)
       process samples @1000, @2000: cpu_percent 50, 150 (mean 100); rss_bytes 512 MiB, 1 GiB
  201: process samples @1050, @1500, @1900: cpu_percent 0, 100, 20; rss_bytes 256 MiB x 3
And a real job: `iotrace run --sample-ms 20` of a program with fork and spawn pools and
iotrace.counter("loss", value=v).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
from conftest import end, meta, process, span, usec, write_trace
from iotrace_analyzer.analyses import counters
from iotrace_analyzer.outputs import report, report_page
from iotrace_analyzer.pipeline import Options, analyze

US = 1000
MIB = 1 << 20


def counter(name, pid, ts_ns, tid=None, **values):
    """A counter event line as the tracer writes it."""
    tid = pid if tid is None else tid
    a = json.dumps(values, separators=(",", ":"))
    return f'{{"ph":"C","name":"{name}","pid":{pid},"tid":{tid},"ts":{usec(ts_ns)},"args":{a}}}'


def _main():
    p = 100
    ev = [process(p),
          counter("loss", p, 1000 * US, value=2.0), counter("loss", p, 1100 * US, value=0.5),
          counter("loss", p, 1300 * US, value=1.5), counter("loss", p, 1200 * US, value=4.0),
          counter("process", p, 1000 * US, cpu_percent=50.0, rss_bytes=512 * MIB, open_files=7),
          counter("process", p, 2000 * US, cpu_percent=150.0, rss_bytes=1024 * MIB, open_files=9),
          span("step", "compute", p, 1000 * US, 500 * US)]
    return ev + [end(p, len(ev))]


def _worker():
    p = 201
    ev = [process(p, role="fork", parent_pid=100),
          meta("iotrace_process_info", p, {"role": "worker", "parent_pid": 100, "worker_id": 0})]
    ev += [counter("process", p, t * US, tid=202, cpu_percent=c, rss_bytes=256 * MIB)
           for t, c in ((1050, 0), (1500, 100), (1900, 20))]
    return ev + [end(p, len(ev))]


def _analyzed(tmp_path, *traces):
    for name, ev in traces:
        write_trace(tmp_path / "t" / f"{name}.pfw.zst", ev)
    job = analyze([str(tmp_path / "t")], Options(engine="local"))
    return job.summary, job.drawn


def test_counters_section_exact(tmp_path):
    S, page = _analyzed(tmp_path, ("main", _main()), ("w", _worker()))
    rows = [(c["pid"], c["role"], c["name"], c["key"], c["unit"], c["samples"], c["min"], c["max"],
             c["mean"], c["last"]) for c in S["counters"]]
    assert rows == [
        (100, "main", "process", "cpu_percent", "percent", 2, 50, 150, 100.0, 150),
        (100, "main", "process", "rss_bytes", "bytes", 2, 512 * MIB, 1024 * MIB, 768.0 * MIB, 1024 * MIB),
        (100, "main", "process", "open_files", None, 2, 7, 9, 8.0, 9),
        (100, "main", "loss", "value", None, 4, 0.5, 4, 2.0, 1.5),
        (201, "worker", "process", "cpu_percent", "percent", 3, 0, 100, 40.0, 20),
        (201, "worker", "process", "rss_bytes", "bytes", 3, 256 * MIB, 256 * MIB, 256.0 * MIB, 256 * MIB),
    ]
    assert all(c["host"] == "node1" for c in S["counters"])
    # the page's points: each series whole (short), in time order, on the job clock
    pts = {(s["pid"], s["name"], s["key"]): s for s in page.counters}
    assert len(pts) == len(rows)
    loss = pts[(100, "loss", "value")]
    assert loss["value"].tolist() == [2.0, 0.5, 4.0, 1.5]
    assert np.diff(loss["ts_ns"]).tolist() == [100 * US] * 3
    assert pts[(201, "process", "cpu_percent")]["value"].tolist() == [0, 100, 20]
    # the text report: per process and series, bytes in MiB and CPU in %
    text = report.text_report(S)
    sec = text[text.index("Counters"):].split("\n\n")[0].splitlines()
    assert len(sec) == 4 + len(rows)
    cells = [line.split() for line in sec[4:]]
    assert cells[0] == ["100", "main", "process", "cpu_percent", "2", "50.0%", "100.0%", "150.0%", "150.0%"]
    assert cells[1] == ["100", "main", "process", "rss_bytes", "2", "512.0", "MiB", "768.0", "MiB",
                        "1024.0", "MiB", "1024.0", "MiB"]
    assert cells[3] == ["100", "main", "loss", "value", "4", "0.5", "2", "4", "1.5"]
    assert cells[4][:5] == ["201", "worker", "process", "cpu_percent", "3"]
    # and the page has its plot
    html = report_page.render(S, page)
    assert 'id="plot-counters"' in html and 'href="#counters"' in html


def test_no_counters_no_section_no_plot(tmp_path):
    p = 100
    ev = [process(p), span("step", "compute", p, 1000 * US, 10 * US)]
    S, page = _analyzed(tmp_path, ("a", ev + [end(p, len(ev))]))
    assert S["counters"] == [] and page.counters == []
    assert "Counters" not in report.text_report(S)
    html = report_page.render(S, page)
    assert "plot-counters" not in html and 'id="counters"' not in html


def test_long_series_keeps_its_peaks(tmp_path):
    """10,000 samples 1 µs apart: at most 512 points on the page, each a real sample, the spike
    and the dip among them; the figures of all 10,000 exact."""
    p = 100
    n = 10_000
    v = np.arange(n) % 100  # 0..99, mean 49.5
    v[6543], v[1234] = 1000, -7
    ev = [process(p)] + [counter("train", p, 1000 * US + k * US, step=int(x)) for k, x in enumerate(v)]
    S, page = _analyzed(tmp_path, ("a", ev + [end(p, len(ev))]))
    (c,) = S["counters"]
    assert (c["samples"], c["min"], c["max"], c["last"]) == (n, -7, 1000, int(v[-1]))
    assert c["mean"] == v.sum() / n
    (s,) = page.counters
    assert 256 <= len(s["value"]) <= counters.MAX_POINTS
    assert np.all(np.diff(s["ts_ns"]) > 0)
    assert s["value"][0] == 0  # sample 0: its bin's lowest value, the earliest of equals
    k = (s["ts_ns"] - s["ts_ns"][0]) // US  # each point's sample
    assert np.array_equal(s["value"], v[k])
    assert 6543 in k and 1234 in k and s["value"].max() == 1000 and s["value"].min() == -7


def _batch(ts, vals, key="v"):
    n = len(ts)
    return pa.RecordBatch.from_pydict({
        "ph": pa.array(["C"] * n).dictionary_encode(), "name": pa.array(["c"] * n).dictionary_encode(),
        "ts_ns": pa.array(ts, pa.int64()),
        "args": pa.array([json.dumps({key: float(x)}) for x in vals])})


def _add(part, b):
    from iotrace_analyzer.analyses.summary import _codes32

    ph, phv = _codes32(b.column("ph"))
    nm, nmv = _codes32(b.column("name"))
    part.add(b, [(1, "h", 7, 0)], None, ph, phv, nm, nmv)


def test_reduced_in_pieces_as_at_once():
    """Blocks and tasks reduce their series as they go: the points and figures come out as if
    the whole series had been reduced at once."""
    rng = np.random.default_rng(5)
    n = 50_000
    ts = np.sort(rng.choice(10**12, n, replace=False)).astype(np.int64)
    vals = rng.normal(size=n).round(3)
    whole = counters.CounterPart()
    _add(whole, _batch(ts, vals))
    parts = []
    for lo in range(0, n, 3001):  # blocks into parts, the parts merged out of order
        part = counters.CounterPart()
        _add(part, _batch(ts[lo:lo + 3001], vals[lo:lo + 3001]))
        parts.append(part)
    merged = counters.CounterPart()
    for part in parts[::-1]:
        merged.merge(part)
    (a,), (b,) = whole.series.values(), merged.series.values()
    ta, va = a.points()
    tb, vb = b.points()
    assert len(ta) <= counters.MAX_POINTS and np.array_equal(ta, tb) and np.array_equal(va, vb)
    assert a.figures() | {"mean": 0} == b.figures() | {"mean": 0}
    assert abs(a.figures()["mean"] - vals.mean()) < 1e-12 and b.figures()["last"] == vals[-1]


def test_args_that_arrow_refuses_are_read_row_by_row():
    """A key whose values change type (a string among numbers) or a row that is no object:
    the numbers still count."""
    args = pa.array(['{"a":1,"b":2}', '{"a":"x"}', '"a":3', None, '{"a":2.5,"c":true}'])
    out = counters._parse(args)
    assert out["a"].tolist()[:1] + out["a"].tolist()[2:3] + out["a"].tolist()[4:] == [1.0, 3.0, 2.5]
    assert np.isnan(out["a"][1]) and np.isnan(out["a"][3]) and out["b"][0] == 2.0


# --- a real job ---------------------------------------------------------------------------------

LOSS = [2.0, 0.5, 4.0, 1.5, 0.25]

JOB = """
import multiprocessing as mp, os, time, iotrace

def task(x):
    time.sleep(0.01)
    return os.getpid()

if __name__ == "__main__":
    for method in ("fork", "spawn"):
        pool = mp.get_context(method).Pool(2)
        pool.map(task, range(4))
        pool.close()  # the workers end by themselves (terminate's SIGTERM leaves no end sample)
        pool.join()
    for v in LOSS:
        iotrace.counter("loss", value=v)
    time.sleep(0.1)
""".replace("LOSS", repr(LOSS))


def _env():
    return {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}


def test_real_job(tmp_path):
    prog = tmp_path / "job.py"
    prog.write_text(JOB)
    traces = tmp_path / "traces"
    subprocess.run([sys.executable, "-m", "iotrace", "run", "--sample-ms", "20", "-o", str(traces), "--",
                    sys.executable, str(prog)], env=_env(), check=True, capture_output=True, timeout=300,
                   cwd=str(tmp_path))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "iotrace_analyzer", str(traces), "-o", str(out), "--no-parquet"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    S = json.loads((out / "summary.json").read_text())
    C = S["counters"]
    # every process of the job sampled: main, 2 fork and 2 spawn workers, the resource tracker
    pids = {r["pid"] for r in S["processes"]}
    assert len(pids) == 6
    sampled = {c["pid"]: c for c in C if c["name"] == "process" and c["key"] == "cpu_percent"}
    assert set(sampled) == pids
    # each ends by exit or os._exit: its start and end samples at least
    for r in S["processes"]:
        assert r["end_reason"] in ("exit", "_exit") and sampled[r["pid"]]["samples"] >= 2, r
    roles = sorted(c["role"] for c in sampled.values())
    assert roles == ["main", "resource_tracker", "worker", "worker", "worker", "worker"]
    for c in C:
        if c["name"] == "process":
            assert c["key"] in counters.PROCESS_KEYS and c["samples"] >= 1
            assert c["min"] <= c["mean"] <= c["max"] and c["min"] <= c["last"] <= c["max"]
    rss = [c for c in C if c["key"] == "rss_bytes"]
    assert len(rss) == 6 and all(c["unit"] == "bytes" and c["min"] > 5 * MIB for c in rss)
    (loss,) = [c for c in C if c["name"] == "loss"]
    assert loss["role"] == "main" and loss["key"] == "value" and loss["unit"] is None
    assert (loss["samples"], loss["min"], loss["max"], loss["last"]) == (5, 0.25, 4, 0.25)
    assert loss["mean"] == sum(LOSS) / len(LOSS) == 1.65
    assert "Counters (samples per process" in p.stdout and "loss" in p.stdout
