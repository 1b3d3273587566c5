"""The C API in a program linked with -liotrace, not preloaded (docs/c-api.md).

tests/c/capi_linked.c writes a file (open, 3 writes of 100 bytes, close) inside a region, then
records a region of about 20 ms, a counter, an instant and a region on a virtual thread. Linked,
it is traced when IOTRACE_ENABLE asks for it at start, or from its iotrace_init() on, its own
calls included; otherwise it runs untraced and writes nothing. Region times are iotrace_now()
ticks, which the trace shows as CLOCK_MONOTONIC: the 20 ms region lies where iotrace_now_ns()
saw it.
"""
from __future__ import annotations

import collections
import os
import re
import subprocess
from pathlib import Path

import pytest

import tracing

O_WRONLY, O_CREAT, O_TRUNC = os.O_WRONLY, os.O_CREAT, os.O_TRUNC


@pytest.fixture
def linked(cprog):
    return cprog("capi_linked.c", name="capi_linked", link_iotrace=True)


def run_linked(exe, data, trace_dir, *args, env=None):
    """Run the linked program with IOTRACE_DIR=trace_dir, no LD_PRELOAD and no IOTRACE_*
    of the calling environment but `env`; returns the TraceSet and its report lines."""
    e = tracing.tracer_env(trace_dir, env)
    del e["LD_PRELOAD"]
    p = subprocess.Popen([exe, str(data), *args], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    so, se = p.communicate(timeout=60)
    assert p.returncode == 0, (p.returncode, so, se)
    report = {}
    for line in so.splitlines():
        key, _, rest = line.partition(" ")
        report[key] = rest
    ts = tracing.TraceSet.load(trace_dir, returncode=p.returncode, stdout=so, stderr=se,
                               pid=p.pid)
    return ts, report


def check_traced(ts, report, data, name):
    """What every traced run of capi_linked holds, exactly."""
    out = str(data / "out")
    f, = ts.files_of(ts.pid)
    assert f.name.startswith(f"{name}-")
    assert [r["args"]["name"] for r in f.records if r.get("name") == "process_name"] == [name]
    assert f.closed and f.end["reason"] == "exit"
    assert report["path"] == f.path

    # Its own calls, recorded as a preloaded program's are.
    assert ts.counts(fname=out) == collections.Counter({"open": 1, "write": 3, "close": 1})
    op, = ts.events(name="open", fname=out)
    assert op["args"]["flags"] == O_WRONLY | O_CREAT | O_TRUNC and op["args"]["mode"] == 0o644
    writes = ts.events(name="write", fname=out)
    assert [(w["args"]["size"], w["args"]["offset"], w["args"]["ret"]) for w in writes] == [
        (100, 0, 100), (100, 100, 100), (100, 200, 100)]
    cl, = ts.events(name="close", fname=out)
    assert cl["args"]["ret"] == 0

    # Its C API events, with their names, categories and arguments.
    assert ts.counts(cat="capi") == collections.Counter({"save": 1, "step": 1, "saved": 1,
                                                         "task": 1})
    save, = ts.events(name="save")
    assert save["ph"] == "X" and save["args"] == {"file": "out", "bytes": 300}
    # The region made of iotrace_now() ticks holds the calls it was around (one clock).
    slop = 0.002  # µs: both ends are rounded to ns
    assert save["ts"] <= op["ts"] + slop
    assert cl["ts"] + cl["dur"] <= save["ts"] + save["dur"] + slop

    step, = ts.events(name="step")
    assert step["ph"] == "X" and step["tid"] == ts.pid and step["args"] == {"n": 1}
    ns0, ns1 = (int(x) for x in report["step"].split())
    # Ticks become CLOCK_MONOTONIC ns: the region lies between the iotrace_now_ns() readings
    # around it (ticks taken as ns would put it off by the TSC's GHz). Tolerance: the mapping's
    # error, far below 0.1 ms.
    start_ns, end_ns = step["ts"] * 1000, (step["ts"] + step["dur"]) * 1000
    assert ns0 - 1e5 <= start_ns and end_ns <= ns1 + 1e5, (ns0, start_ns, end_ns, ns1)
    assert step["dur"] >= 19_900  # the 20 ms nap inside it, in µs

    counter, = ts.events(name="progress")
    assert counter["ph"] == "C" and counter["args"] == {"bytes": 300} and "cat" not in counter
    instant, = ts.events(name="saved")
    assert instant["ph"] == "i" and instant["s"] == "t" and instant["args"] == {}
    task, = ts.events(name="task")
    assert task["ph"] == "X" and task["tid"] == 1 << 23
    names = [r["args"]["name"] for r in f.records
             if r.get("ph") == "M" and r.get("name") == "thread_name" and r.get("tid") == 1 << 23]
    assert names == ["worker-v"]

    recorded, dropped = (int(x) for x in report["stats"].split())
    assert dropped == 0 and recorded >= 9  # 5 calls, 5 API events (reports are raw syscalls)


def check_untraced(ts, report, trace_dir):
    assert report["stats"] == "0 0" and report["path"] == ""
    assert not os.path.exists(trace_dir) or not os.listdir(trace_dir)
    assert ts.files == []


def test_enable_traces_a_linked_program(tmp_path, data_dir, linked):
    """IOTRACE_ENABLE=1: traced from before main, its calls and its API events."""
    out = tmp_path / "trace"
    ts, report = run_linked(linked, data_dir, out, "env", env={"IOTRACE_ENABLE": "1"})
    assert report["start"] == "active=1 interposing=1"
    assert ts.pids == [ts.pid]
    check_traced(ts, report, data_dir, "capi_linked")


def test_init_traces_a_linked_program(tmp_path, data_dir, linked):
    """No IOTRACE_ENABLE: untraced until its iotrace_init(), which traces its calls too."""
    out = tmp_path / "trace"
    ts, report = run_linked(linked, data_dir, out, "init")
    assert report["start"] == "active=0 interposing=0"
    assert report["init"] == "0 active=1 interposing=1"
    check_traced(ts, report, data_dir, "capi")


@pytest.mark.parametrize("enable", [None, "0"])
def test_linked_program_untraced_unless_asked(tmp_path, data_dir, linked, enable):
    """Linking is no request to trace: without IOTRACE_ENABLE (or with 0) the program runs
    untraced, its API calls do nothing, and no file is made."""
    out = tmp_path / "trace"
    env = {"IOTRACE_ENABLE": enable} if enable else None
    ts, report = run_linked(linked, data_dir, out, "env", env=env)
    assert report["start"] == "active=0 interposing=0"
    check_untraced(ts, report, out)
    assert (data_dir / "out").stat().st_size == 300


def test_enable_zero_refuses_init(tmp_path, data_dir, linked):
    """IOTRACE_ENABLE=0 wins over the program's iotrace_init(), which returns -1."""
    out = tmp_path / "trace"
    ts, report = run_linked(linked, data_dir, out, "init", env={"IOTRACE_ENABLE": "0"})
    assert report["init"] == "-1 active=0 interposing=0"
    check_untraced(ts, report, out)


def test_linked_program_children_traced(tmp_path, data_dir, linked):
    """A linked program's children are traced as a preloaded one's are (IOTRACE_INHERIT): the
    `cat` it spawns gets LD_PRELOAD and writes its own trace, in the same folder. Its
    iotrace_init(dir, name) after IOTRACE_ENABLE started the tracer returns 0 and changes
    nothing: not its file, not the environment its children get."""
    out = tmp_path / "trace"
    ts, report = run_linked(linked, data_dir, out, "late", "spawn", env={"IOTRACE_ENABLE": "1"})
    assert report["late"] == f"0 {out} -"
    assert not (data_dir / "elsewhere").exists()
    child, status = (int(x) for x in report["child"].split())
    assert status == 0
    assert ts.pids == sorted([ts.pid, child])
    assert ts.files_of(ts.pid)[0].name.startswith("capi_linked-")
    assert ts.files_of(child)[0].name.startswith("cat-")
    assert ts.process(child)["ppid"] == ts.pid
    target = str(data_dir / "out")
    assert ts.count("open", pid=child, fname=target) == 1
    assert sum(e["args"]["ret"] for e in ts.events(pid=child, name="read", fname=target)) == 300
    spawn, = ts.events(pid=ts.pid, name="posix_spawnp")
    assert spawn["args"]["ret"] == child


def test_docs_example(tmp_path, data_dir, cprog):
    """docs/c-api.md's example, as printed there, builds without a warning and traces itself:
    its regions hold its calls; IOTRACE_ENABLE=0 leaves it untraced."""
    doc = (Path(__file__).parent.parent / "docs" / "c-api.md").read_text()
    source, = re.findall(r"```c\n(.*?)```", doc, re.S)
    exe = cprog(source, name="example", flags=("-Wall", "-Wextra", "-Werror"), link_iotrace=True)

    p = tracing.run_plain([exe], cwd=data_dir)
    assert p.returncode == 0, p.stderr
    ts = tracing.TraceSet.load(data_dir / "traces")
    f, = ts.files
    assert p.stdout == f"trace: {f.path}\n" and p.stderr == ""
    saves = ts.events(name="save", cat="ckpt")
    assert [e["args"] for e in saves] == [{"step": i, "bytes": 65536} for i in range(3)]
    assert [e["args"] for e in ts.events(name="saved_bytes")] == [
        {"total": 65536 * i} for i in (1, 2, 3)]
    for i, save in enumerate(saves):
        calls = ts.events(fname=str(data_dir / f"ckpt-{i}.bin"))
        assert [e["name"] for e in calls] == ["open", "write", "fsync", "close"]
        assert save["ts"] <= calls[0]["ts"] + 0.002
        assert calls[-1]["ts"] + calls[-1]["dur"] <= save["ts"] + save["dur"] + 0.002

    p = tracing.run_plain([exe], cwd=tmp_path, env={"IOTRACE_ENABLE": "0"})
    assert p.returncode == 0 and p.stderr == "example: not traced\n" and p.stdout == "trace: \n"
    assert not (tmp_path / "traces").exists()
