"""The layer split: each complete event's own time (its duration less the events nested in it
on its thread), summed per layer. Events come as a tracer writes them: a call when it returns,
a span when it closes, so children before their parent."""

import os
import subprocess
import sys

import pytest
from iotrace_analyzer.inputs import Events
from iotrace_analyzer.pipeline import Options, analyze

PID = 77
US = 1_000_000  # the events' ts: 1 s into the process's clock, in us


def _proc(tid=PID) -> list[dict]:
    return [dict(ph="M", name="iotrace_process", cat="process", pid=PID, tid=tid,
                 args=dict(version=1, hostname="h", pid=PID, ppid=1, exe="/bin/x", cmdline=["x"],
                           wall_ns=1_700_000_000_000_000_000, mono_ns=US * 1000, role="main"))]


def x(name, cat, ts, dur, tid=PID) -> dict:
    return dict(ph="X", name=name, cat=cat, pid=PID, tid=tid, ts=US + ts, dur=dur, args={})


def split(ev: list[dict]) -> dict:
    job = analyze([Events("h-x-77", ev)], Options(engine="local", workers=1))
    return {r["layer"]: (r["calls"], r["time_us"], r["own_us"]) for r in job.summary["layers"]}, job


def test_own_time_is_duration_less_nested_calls():
    # thread 1: step [0,100] holds pread [10,20], pread [30,50], fwrite [60,70] and load [75,95],
    # which holds pread [80,90]; thread 2: a pread alone, and a span holding nothing
    ev = _proc() + [
        x("pread64", "posix", 10, 10), x("pread64", "posix", 30, 20), x("fwrite", "stdio", 60, 10),
        x("pread64", "posix", 80, 10), x("load", "data", 75, 20), x("step", "train", 0, 100),
        x("pread64", "posix", 5, 7, tid=PID + 1), x("idle", "train", 20, 30, tid=PID + 1)]
    layers, job = split(ev)
    assert layers == {"app": (3, 150.0, 100 - 10 - 20 - 10 - 20 + 20 - 10 + 30),
                      "stdio": (1, 10.0, 10.0), "posix": (4, 47.0, 47.0)}
    # own times add up to the time each thread spent in traced events: 100 + 37 us
    assert sum(v[2] for v in layers.values()) == 137.0
    rows = {(r["layer"], r["pid"], r["host"]): r["own_ns"] for r in job.layers}
    assert rows == {("app", PID, "h"): 80_000, ("stdio", PID, "h"): 10_000, ("posix", PID, "h"): 47_000}


def test_a_program_span_named_like_a_call_is_app():
    # a @trace event may take the category "posix": not a tracer's call unless its name is one
    layers, _ = split(_proc() + [x("pread64", "posix", 10, 10), x("my_reader", "posix", 0, 50)])
    assert layers == {"app": (1, 50.0, 40.0), "posix": (1, 10.0, 10.0)}


def test_a_long_thread_of_top_level_calls_stays_exact():
    # 5000 reads (the thread's stack merges its older entries many times); a span around the
    # last 201 of them, opened after 4799 others; a span around all of it
    ev = _proc() + [x("pread64", "posix", 10 * k, 4) for k in range(5000)]
    ev.append(x("tail", "app", 10 * 4799 - 1, 2011))
    ev.append(x("all", "app", 0, 50_000))
    layers, _ = split(ev)
    assert layers["posix"] == (5000, 20_000.0, 20_000.0)
    assert layers["app"] == (2, 52_011.0, (2011 - 201 * 4) + (50_000 - 2011 - 4799 * 4))


def test_traced_python_layer_split_adds_up_to_its_thread_time(tmp_path):
    """A traced program: a step span holds a load span, which holds the file's reads. The app
    layer's own time is the spans' time less the reads in them; own times add up to the union
    of the process's traced events (one thread)."""
    data = tmp_path / "d.bin"
    data.write_bytes(os.urandom(1 << 20))
    prog = tmp_path / "w.py"
    prog.write_text(
        "import iotrace, time, sys\n"
        "@iotrace.trace(cat='load')\n"
        "def load():\n"
        "    with open(sys.argv[1], 'rb') as f:\n"
        "        while f.read(65536): pass\n"
        "@iotrace.trace(cat='step')\n"
        "def step():\n"
        "    load()\n"
        "    t = time.perf_counter()\n"
        "    while time.perf_counter() - t < 0.01: pass\n"
        "for _ in range(3): step()\n")
    out = tmp_path / "t"
    subprocess.run([sys.executable, "-m", "iotrace", "run", "-o", str(out), "--", sys.executable,
                    str(prog), str(data)], check=True)
    job = analyze([str(out)], Options(engine="local", workers=1))
    own = {r["layer"]: r for r in job.layers}
    assert own["app"]["calls"] == 6
    assert own["posix"]["own_ns"] == own["posix"]["time_ns"]
    # the spans took at least the 30 ms of busy loop, and their own time is the loop's, not the reads'
    assert 30_000_000 <= own["app"]["own_ns"] < own["app"]["time_ns"]
    (proc,) = job.summary["processes"]
    assert sum(r["own_ns"] for r in job.layers) == pytest.approx(proc["app_us"] * 1000, abs=2)
