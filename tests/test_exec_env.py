"""Every child a traced program starts stays traced, with its whole command line
(tests/c/exec_env.c; docs/configuration.md, IOTRACE_INHERIT): children given a cleared
environment (env -i, subprocess's env={}, posix_spawn) get LD_PRELOAD and the IOTRACE_*
settings back, a shell's relative IOTRACE_DIR becomes the absolute one, IOTRACE_ENABLE=0 in a
child's environment and IOTRACE_INHERIT=0 opt out, and argument lists and environments of
any length reach the child whole."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tracing import PRELOAD, TraceSet, run_plain, trace_files, tracer_env


@pytest.fixture
def prog(cprog):
    return cprog("exec_env.c", name="exec_env")


@pytest.fixture
def data(data_dir):
    f = data_dir / "f"
    f.write_text("twelve bytes")
    return f


def _shown(stdout: str) -> dict[str, str]:
    """What `exec_env show` printed: argc, envc, nvar and the tracer's variables."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith(("argc ", "envc ", "nvar ")):
            k, v = line.split()
            out[k] = v
        elif "=" in line and line.split("=", 1)[0].isupper():
            k, v = line.split("=", 1)
            out[k] = v
    return out


def _shows(ts: TraceSet) -> list:
    """The files of the `exec_env show` processes (the children of these tests)."""
    return [f for f in ts.files if f.header.get("cmdline", [])[1:2] == ["show"]]


def _check_child_traced(ts: TraceSet, prog, data, *, role="exec", preload=PRELOAD):
    """The exec_env child wrote its own file, with exactly its open and read of `data`, and saw
    the tracer's variables in its environment. `role`: exec for the next image of a process,
    main for a new process (vfork'd or spawned: no IOTRACE_ROLE is set for it)."""
    (child,) = _shows(ts)
    assert child.closed and child.end["reason"] == "exit"
    assert child.header["role"] == role
    names = [e["name"] for e in child.events() if e["fname"] == str(data)]
    assert names == ["open", "read", "close"], names
    (read,) = [e for e in child.events() if e["name"] == "read"]
    assert read["args"]["ret"] == 12
    # nobody else recorded them (a vfork child's calls are not the parent's)
    assert ts.count("read", fname=data) == 1 and ts.count("open", fname=data) == 1
    seen = _shown(ts.stdout)
    assert seen["LD_PRELOAD"] == preload
    assert seen["IOTRACE_DIR"] == ts.dir and os.path.isabs(seen["IOTRACE_DIR"])
    return child


def test_env_i_child_is_traced(prog, trace, data):
    """`env -i PROG`: env is traced, and so is PROG, in the same folder, with the settings the
    traced program started with (IOTRACE_NAME here: both files carry it)."""
    ts = trace(["env", "-i", prog, "show", data], env={"IOTRACE_NAME": "job"})
    child = _check_child_traced(ts, prog, data)
    assert child.pid == ts.pid  # env exec'd it
    first, second = ts.files_of(ts.pid)
    assert first.header["exe"] == os.path.realpath(shutil.which("env"))
    assert first.end["reason"] == "exec" and second is child
    assert all(os.path.basename(f.path).startswith("job-") for f in ts.files)
    seen = _shown(ts.stdout)
    # env -i gave it nothing; the tracer added LD_PRELOAD and IOTRACE_*, and the child's
    # tracer took IOTRACE_ROLE out again
    assert int(seen["envc"]) == sum(k == "LD_PRELOAD" or k.startswith("IOTRACE_")
                                    for k in tracer_env(ts.dir, {"IOTRACE_NAME": "job"}))
    assert seen["IOTRACE_ROLE"] == "(unset)"


def test_child_preload_entries_kept_after_ours(prog, trace, data):
    """A child whose LD_PRELOAD names other libraries only: this library goes first, theirs
    stay after it; a variable the child's environment sets stays the child's."""
    ts = trace(["env", "-i", "LD_PRELOAD=libm.so.6", "IOTRACE_NAME=own", prog, "show", data],
               env={"IOTRACE_NAME": "job"})
    _check_child_traced(ts, prog, data, preload=PRELOAD + ":libm.so.6")
    names = sorted(os.path.basename(f.path).split("-")[0] for f in ts.files)
    assert names == ["job", "own"]


def test_execve_with_empty_env_is_traced(prog, trace, data):
    """The program's own execve with an empty environment (no env(1) in between)."""
    ts = trace([prog, "clear", prog, data])
    _check_child_traced(ts, prog, data)
    first, _ = ts.files_of(ts.pid)
    (ev,) = [e for e in first.events() if e["cat"] == "process"]
    assert ev["name"] == "execve" and ev["fname"] == prog


def test_vfork_child_with_empty_env_is_traced(prog, trace, data):
    """vfork + execve(empty env) in C: the environment is made in the vfork child (no malloc:
    the heap is the parent's); the parent's file has none of the child's calls."""
    ts = trace([prog, "vfork_clear", prog, data])
    child = _check_child_traced(ts, prog, data, role="main")
    assert child.pid != ts.pid
    (parent,) = ts.files_of(ts.pid)
    assert parent.events() == [] and parent.end["reason"] == "exit"  # vfork is no event


PY_SUBPROCESS = r"""
import os, subprocess, sys
prog, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = subprocess.run([prog, "show", data], env={}, capture_output=True, text=True)
print(r.stdout, end="")
def vm_kb():
    # The process's mappings but the tracer's live file (its record buffers, which grow as the
    # process records more: docs/trace-format.md), in KiB.
    total = 0
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].endswith(".live"):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            total += (hi - lo) // 1024
    return total
# a big environment (built in a mapping in the vfork child), found by a PATH search (execve
# tried in each folder), n times: the mapping is reused and freed by the parent, not leaked
big = {f"V_{i}": "x" * 20 for i in range(300)}
big["PATH"] = "/nonexistent:" + os.path.dirname(prog)
before = None
for i in range(n):
    if i == 5:
        before = vm_kb()
    r = subprocess.run([os.path.basename(prog), "show", "-"], env=big, capture_output=True, text=True)
    assert "nvar 300" in r.stdout, r.stdout
print("vm_kb", before, vm_kb())
"""


def test_python_subprocess_env_empty_is_traced(prog, trace, data):
    """subprocess.run(..., env={}): CPython's _posixsubprocess vforks and calls execve through
    the PLT in the child; that child and 105 more with a big environment stay traced, and
    the memory their environments took in the vfork children is not left in the parent."""
    ts = trace([sys.executable, "-c", PY_SUBPROCESS, prog, data, "105"])
    children = _shows(ts)
    assert len(children) == 106 and all(f.header["role"] == "main" for f in children)
    assert len({f.pid for f in children}) == 106
    assert ts.count("read", fname=data) == 1 and ts.count("open", fname=data) == 1
    (py,) = ts.files_of(ts.pid)
    assert ts.count(name=["posix_spawn", "posix_spawnp"], pid=ts.pid) == 0  # the vfork path
    seen = _shown(ts.stdout)
    assert seen["LD_PRELOAD"] == PRELOAD and seen["IOTRACE_DIR"] == ts.dir
    # 100 children, 2 execve each: a leaked 8 KiB mapping per execve would be 1600 KiB
    (vm,) = [line.split() for line in ts.stdout.splitlines() if line.startswith("vm_kb ")]
    assert int(vm[2]) - int(vm[1]) < 400, vm


def test_child_env_enable_0_opts_out(prog, trace, data):
    """IOTRACE_ENABLE=0 in the child's environment: that child is untraced, and nothing is
    added to its environment."""
    ts = trace(["env", "-i", "IOTRACE_ENABLE=0", prog, "show", data])
    assert _shows(ts) == []
    assert [f.header["exe"] for f in ts.files] == [os.path.realpath(shutil.which("env"))]
    seen = _shown(ts.stdout)
    assert seen["LD_PRELOAD"] == "(unset)" and seen["IOTRACE_DIR"] == "(unset)"
    assert seen["envc"] == "1" and seen["IOTRACE_ENABLE"] == "0"


@pytest.mark.parametrize("how", ["env -i", "subprocess"])
def test_inherit_0_leaves_cleared_children_untraced(prog, trace, data, how):
    """IOTRACE_INHERIT=0 on the traced program: a child whose environment lacks LD_PRELOAD runs
    untraced, with the environment it was given."""
    cmd = (["env", "-i", prog, "show", data] if how == "env -i"
           else [sys.executable, "-c", PY_SUBPROCESS, prog, data, "0"])
    ts = trace(cmd, env={"IOTRACE_INHERIT": "0"})
    assert _shows(ts) == []
    assert ts.files and ts.count("read", fname=data) == 0
    seen = _shown(ts.stdout)
    assert seen["LD_PRELOAD"] == "(unset)" and seen["IOTRACE_DIR"] == "(unset)"


def test_relative_trace_dir_one_folder(tmp_path):
    """A bare LD_PRELOAD with IOTRACE_DIR=traces, started in A: bash passes its own copy
    (traces) to what it runs after cd ../B and, in a subshell, cd ../C; every process's trace
    still goes to A/traces, and no other traces folder appears."""
    if not shutil.which("bash"):
        pytest.skip("no bash")
    for d in "ABC":
        (tmp_path / d).mkdir()
    (tmp_path / "B" / "f").write_text("in B\n")
    (tmp_path / "C" / "g").write_text("in C\n")
    env = tracer_env("traces")
    assert env["IOTRACE_DIR"] == "traces"
    p = subprocess.run(["bash", "-c", "cd ../B; cat f; (cd ../C; ls)"], cwd=tmp_path / "A", env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "in B\ng\n"
    ts = TraceSet.load(tmp_path / "A" / "traces")
    exes = {os.path.basename(f.header["exe"]) for f in ts.files}
    assert {"bash", "cat", "ls"} <= exes, exes
    assert ts.count("read", fname=tmp_path / "B" / "f") >= 1
    assert ts.count("opendir", under=tmp_path / "C") + ts.count("openat", under=tmp_path / "C") >= 1
    elsewhere = [p for d, _, _ in os.walk(tmp_path) for p in trace_files(d)
                 if os.path.dirname(p) != str(tmp_path / "A" / "traces")]
    assert elsewhere == []
    assert sorted(os.listdir(tmp_path / "B")) == ["f"] and sorted(os.listdir(tmp_path / "C")) == ["g"]


def test_exec_chain_through_a_shell_leaves_no_live_file(tmp_path, data):
    """env execs bash (a failed attempt first: a folder of PATH without it), bash execs cat,
    cat reads: three images of one process, three trace files ending "exec", "exec", "exit",
    and no live file left (each image removes the one before it, and bash, which keeps its
    own copy of the environment, must not pass on the live file of env's image instead of its
    own)."""
    bash = shutil.which("bash")
    if not bash:
        pytest.skip("no bash")
    empty = data.parent / "nobin"
    empty.mkdir()
    path = f"{empty}:{os.path.dirname(bash)}:{os.environ.get('PATH', '')}"
    out = tmp_path / "trace"
    p = subprocess.run(["env", f"PATH={path}", "bash", "-c", f"exec cat {data}"], env=tracer_env(out),
                       capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (0, "twelve bytes"), p.stderr
    # before any reader settles what is left
    assert [n for n in os.listdir(out) if n.endswith(".live")] == []
    ts = TraceSet.load(out)
    ends = {os.path.basename(f.header["exe"]): f.end["reason"] for f in ts.files}
    assert ends == {"env": "exec", "bash": "exec", "cat": "exit"}, ends
    assert len({f.header["pid"] for f in ts.files}) == 1
    assert ts.count("read", fname=data) == 2  # the 12 bytes, then the end of the file


@pytest.mark.parametrize("form", ["execl", "execle", "execlp", "execv"])
def test_5000_arguments_reach_the_child(prog, trace, form):
    """5000 arguments after argv[0]: argc 5001 in the child, traced as untraced (the variadic
    forms used to stop at 4096, execle then took an argument for its envp)."""
    args = [prog, form, prog] if form != "execv" else [prog, form, "5000", prog]
    plain = run_plain(args)
    assert plain.returncode == 0, plain.stderr
    ts = trace(args)
    assert _shown(plain.stdout)["argc"] == _shown(ts.stdout)["argc"] == "5001"
    first, child = ts.files_of(ts.pid)
    assert [e["name"] for e in first.events() if e["cat"] == "process"] == [form]
    assert child.header["role"] == "exec" and len(child.header["cmdline"]) == 5001


def test_70035_environment_variables_reach_the_child(prog, trace):
    """execve with this environment plus 70,035 variables: all of them reach the child (they
    used to stop at 65,536), traced as untraced; the traced child also has the tracer's."""
    args = [prog, "execve_env", "70035", prog]
    plain = run_plain(args)
    assert plain.returncode == 0, plain.stderr
    ts = trace(args)
    p, t = _shown(plain.stdout), _shown(ts.stdout)
    assert p["nvar"] == t["nvar"] == "70035"
    tracer_vars = sum(k == "LD_PRELOAD" or k.startswith("IOTRACE_") for k in tracer_env(ts.dir))
    assert int(t["envc"]) == int(p["envc"]) + tracer_vars
    assert [f.header["role"] for f in ts.files_of(ts.pid)] == ["main", "exec"]


@pytest.mark.parametrize("env", ["inherit", "null", "nopreload", "empty"])
@pytest.mark.parametrize("call", ["posix_spawn", "posix_spawnp"])
def test_posix_spawn(prog, trace, data, call, env):
    """One posix_spawn[p] event in the parent (the program as its file, the child's pid as
    ret); the child is traced whatever environment it was given."""
    if call == "posix_spawnp":  # a bare name, looked up in PATH
        path_env = {"PATH": os.path.dirname(prog) + ":" + os.environ.get("PATH", "")}
        ts = trace([prog, "spawnp", os.path.basename(prog), data, env], env=path_env)
        program = os.path.basename(prog)
    else:
        ts = trace([prog, "spawn", prog, data, env])
        program = prog
    (line,) = [x for x in ts.stdout.splitlines() if x.startswith("spawned ")]
    rc, pid, status = map(int, line.split()[1:])
    assert (rc, status) == (0, 0) and pid > 0
    (ev,) = ts.events(pid=ts.pid, cat="process")
    assert ev["name"] == call and ev["fname"] == program
    assert ev["args"]["ret"] == pid and "errno" not in ev["args"]
    child = _check_child_traced(ts, prog, data, role="main")
    assert child.pid == pid


def test_posix_spawn_failure(prog, trace, data, tmp_path):
    """A program that is not there: the returned error is the event's errno, ret -1."""
    missing = tmp_path / "missing"
    ts = trace([prog, "spawn", missing, data, "empty"], check=False)
    (line,) = [x for x in ts.stdout.splitlines() if x.startswith("spawned ")]
    assert int(line.split()[1]) == 2  # ENOENT
    (ev,) = ts.events(pid=ts.pid, cat="process")
    assert ev["name"] == "posix_spawn" and ev["fname"] == str(missing)
    assert ev["args"]["ret"] == -1 and ev["args"]["errno"] == 2
    assert len(ts.files) == 1


@pytest.mark.parametrize("given", [None, "rel/traces"])
def test_disabled_preload_leaves_the_environment_alone(tmp_path, given):
    """IOTRACE_ENABLE=0 under LD_PRELOAD: the program's environment is exactly the one it was
    given (the folder is made absolute and set only for a process that traces: a disabled one
    once showed IOTRACE_DIR=<its cwd> to the program)."""
    extra = {"IOTRACE_ENABLE": "0", **({"IOTRACE_DIR": given} if given else {})}
    plain = run_plain(["env"], env=extra, cwd=tmp_path)
    disabled = run_plain(["env"], env={**extra, "LD_PRELOAD": PRELOAD}, cwd=tmp_path)
    assert plain.returncode == disabled.returncode == 0
    shown = sorted(v for v in disabled.stdout.splitlines() if not v.startswith("LD_PRELOAD="))
    assert shown == sorted(plain.stdout.splitlines())
    assert any(v.startswith("IOTRACE_ENABLE=0") for v in shown)
    assert not any(v.startswith("IOTRACE_DIR=") for v in shown) if not given else \
        f"IOTRACE_DIR={given}" in shown
    assert list(tmp_path.iterdir()) == []  # and it made no folder or file
