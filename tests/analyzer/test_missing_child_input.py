"""`missing-child` damage on hand-written traces (the JSON-lines `.pfw` form, headers shaped as
`iotrace cat` prints a real one): a child that a parent's process event (fork, vfork, clone,
posix_spawn, posix_spawnp with ret > 0) started and of which the job has no trace on the
parent's host."""

import json

import pytest
from iotrace_analyzer.inputs import read
from iotrace_analyzer.cli import main
from iotrace_analyzer.pipeline import Options, analyze

from conftest import fhex, js, usec

MONO0 = 5_000_000_000_000  # the host's CLOCK_MONOTONIC at the parent's start, ns
WALL0 = 1_795_560_042_153_515_851
CONVERT = "/usr/bin/convert"


def header(pid, host="node1", mono_ns=MONO0, exe="/opt/app/bin/app", role="main", ppid=1, **extra):
    """An iotrace_process line as the tracer writes it (format version 4, the JSON form)."""
    args = {"version": 4, "hostname": host, "pid": pid, "ppid": ppid, "exe": exe,
            "cmdline": [exe, "--run"], "cwd": "/work", "wall_ns": WALL0 + (mono_ns - MONO0),
            "mono_ns": mono_ns, "resolution_ns": 1, "role": role, **extra,
            "ranks": {}, "compression": "none", "form": "json"}
    return {"ph": "M", "name": "iotrace_process", "pid": pid, "tid": pid, "args": args}


def fh_line(pid, path):
    return {"ph": "M", "name": "FH", "pid": pid, "tid": pid, "args": {"name": path, "value": fhex(path)}}


def proc_call(name, pid, ts_ns, ret, program=None, **args):
    """A process event (cat `process`): fork & co., ret the child's pid; `program` its fhash."""
    a = {"fhash": fhex(program)} if program else {}
    a.update(ret=ret, **args)
    return {"ph": "X", "name": name, "cat": "process", "pid": pid, "tid": pid,
            "ts": usec(ts_ns), "dur": "12.000", "args": a}


def read_line(pid, ts_ns, path="/data/x"):
    return {"ph": "X", "name": "read", "cat": "posix", "pid": pid, "tid": pid, "ts": usec(ts_ns),
            "dur": "3.000", "args": {"fhash": fhex(path), "fd": 3, "size": 8, "offset": 0, "ret": 8}}


def end_line(pid, events, mono_ns):
    return {"ph": "M", "name": "iotrace_end", "pid": pid, "tid": pid,
            "args": {"mono_ns": mono_ns, "events": events, "reason": "exit"}}


def write_pfw(path, events):
    """`[`, one event object per line followed by `,`, the last (iotrace_end) by `]`; `ts`
    and `dur` as the tracer writes them (decimal µs, three decimals)."""
    out = ["[\n"]
    for i, e in enumerate(events):
        text = json.dumps(e, separators=(",", ":"), ensure_ascii=False)
        for k in ("ts", "dur"):  # numbers, not strings
            if k in e:
                text = text.replace(f'"{k}":{js(e[k])}', f'"{k}":{e[k]}')
        out.append(text + ("]\n" if i == len(events) - 1 else ",\n"))
    path.write_text("".join(out))
    return str(path)


def process_file(tmp_path, pid, body, name="app", **hdr):
    """A whole file of one process: header, FH lines of the paths it names, body, end."""
    host = hdr.get("host", "node1")
    mono = hdr.get("mono_ns", MONO0)
    events = [header(pid, **hdr), fh_line(pid, "/data/x"), *body]
    events.append(end_line(pid, len(events), mono + 50_000_000))
    return write_pfw(tmp_path / f"{name}-{host}-{pid}.pfw", events)


def parent_with(tmp_path, *calls, pid=100, **hdr):
    """The parent's file: a read at its start (the job's), the given process calls, a read."""
    body = [read_line(pid, MONO0), fh_line(pid, CONVERT), *calls, read_line(pid, MONO0 + 30_000_000)]
    return process_file(tmp_path, pid, body, **hdr)


def child(tmp_path, pid, mono_ns, host="node1", role="spawn", name="convert", exe=CONVERT, ppid=100):
    return process_file(tmp_path, pid, [read_line(pid, mono_ns + 1000)], name=name, host=host,
                        mono_ns=mono_ns, role=role, exe=exe, ppid=ppid, parent_pid=ppid)


def missing(tmp_path, **kw):
    S = analyze([str(tmp_path)], Options(engine="local", findings=False, **kw)).summary
    return S["damage"]


@pytest.mark.parametrize("call", ["posix_spawn", "posix_spawnp", "vfork"])
def test_spawn_without_child_trace_names_call_and_program(tmp_path, call):
    parent = parent_with(tmp_path, proc_call(call, 100, MONO0 + 10_000_000, 4242, program=CONVERT))
    d = missing(tmp_path)
    assert d["missing_children"] == [dict(
        host="node1", pid=4242, parent_pid=100, parent_trace=parent, started_by=call,
        ts_us=(MONO0 + 10_000_000) / 1000, at_s=0.01, program=CONVERT)]
    assert d["missing_child_count"] == 1 and d["by_kind"] == {"missing-child": 1} and d["damaged_files"] == 1
    (r,) = d["records"]
    assert (r["path"], r["kind"], r["offset"]) == (parent, "missing-child", -1)
    assert f"child pid 4242 running {CONVERT}, started by {call} of pid 100" in r["detail"]


def test_cli_reports_posix_spawn_child(tmp_path, capsys):
    traces = tmp_path / "traces"
    traces.mkdir()
    parent_with(traces, proc_call("posix_spawn", 100, MONO0 + 10_000_000, 4242, program=CONVERT))
    assert main([str(traces), "-o", str(tmp_path / "out"), "--no-parquet"]) == 0
    cap = capsys.readouterr()
    assert "posix_spawn" in cap.out and "4242" in cap.out and CONVERT in cap.out
    assert "1 child process(es) without a trace" in cap.err and "posix_spawn of pid 100" in cap.err
    S = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [(m["pid"], m["started_by"], m["program"]) for m in S["damage"]["missing_children"]] == [
        (4242, "posix_spawn", CONVERT)]
    html = (tmp_path / "out" / "report.html").read_text()
    assert '<tr class="missing-child">' in html and "<td>4242</td>" in html and CONVERT in html


def test_traced_children_are_not_missing(tmp_path):
    """A spawned child's file (post-exec image only), a fork child with a pre-exec and an
    exec image: both are traced."""
    parent_with(tmp_path, proc_call("posix_spawn", 100, MONO0 + 10_000_000, 4242, program=CONVERT),
                proc_call("fork", 100, MONO0 + 20_000_000, 4243))
    child(tmp_path, 4242, MONO0 + 10_500_000)
    child(tmp_path, 4243, MONO0 + 20_200_000, role="fork", name="app", exe="/opt/app/bin/app")
    child(tmp_path, 4243, MONO0 + 20_900_000, role="exec", name="convert")
    d = missing(tmp_path)
    assert d["missing_children"] == [] and d["damaged_files"] == 0 and d["by_kind"] == {}


def test_only_the_exec_image_counts_for_the_child(tmp_path):
    """An exec'd fork child whose pre-exec image left no file: its exec image is its trace."""
    parent_with(tmp_path, proc_call("fork", 100, MONO0 + 10_000_000, 4243))
    child(tmp_path, 4243, MONO0 + 11_000_000, role="exec")
    assert missing(tmp_path)["missing_children"] == []


def test_same_pid_on_another_host_is_not_the_child(tmp_path):
    parent_with(tmp_path, proc_call("fork", 100, MONO0 + 10_000_000, 4242))
    child(tmp_path, 4242, MONO0 + 10_500_000, host="node2")
    child(tmp_path, 100, MONO0, host="node2", role="main", name="app")  # the parent's pid too
    d = missing(tmp_path)
    assert [(m["host"], m["pid"], m["started_by"], m["program"]) for m in d["missing_children"]] == [
        ("node1", 4242, "fork", "/opt/app/bin/app")]  # a fork's child runs the parent's program


def test_earlier_process_with_the_pid_is_not_the_child(tmp_path):
    """pid 4242 ran and ended before the fork that got 4242 again: that file is not the child's."""
    parent_with(tmp_path, proc_call("fork", 100, MONO0 + 10_000_000, 4242))
    child(tmp_path, 4242, MONO0 - 2_000_000_000, role="fork", name="app")
    assert [m["pid"] for m in missing(tmp_path)["missing_children"]] == [4242]


def test_failed_calls_and_threads_are_not_children(tmp_path):
    parent_with(tmp_path,
                proc_call("posix_spawn", 100, MONO0 + 1_000_000, -1, program=CONVERT, errno=2),
                proc_call("fork", 100, MONO0 + 2_000_000, -1, errno=11),
                proc_call("clone", 100, MONO0 + 3_000_000, 4300, flags=0x10000 | 0x100),  # CLONE_THREAD
                proc_call("clone", 100, MONO0 + 4_000_000, 4301, flags=17),  # SIGCHLD: a process
                proc_call("execve", 100, MONO0 + 5_000_000, -1, program=CONVERT, errno=2))
    d = missing(tmp_path)
    assert [(m["pid"], m["started_by"], m["program"]) for m in d["missing_children"]] == [
        (4301, "clone", "/opt/app/bin/app")]


def test_children_found_across_tasks(tmp_path, monkeypatch):
    """Every file its own task (and streamed block by block) on forked workers: the check runs
    where the tasks' results are combined."""
    monkeypatch.setattr(read, "SMALL_FILE_EVENTS", 0)
    parent_with(tmp_path, *(proc_call("fork", 100, MONO0 + k * 1_000_000, 4000 + k) for k in range(1, 6)))
    for k in (1, 2, 4, 5):
        child(tmp_path, 4000 + k, MONO0 + k * 1_000_000 + 300_000, role="fork", name="app")
    d = missing(tmp_path, workers=2)
    assert [(m["pid"], m["parent_pid"]) for m in d["missing_children"]] == [(4003, 100)]
