"""Process life cycles (tests/c/proc.c): threads, fork + _exit, exec, fatal signals, SIGKILL
after a flush, IOTRACE_ENABLE=0, and the iotrace_process metadata."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from tracing import TEST_FORMAT, ZST_SUFFIX, TraceSet, fresh_dir, run_traced, tracer_env

O_TRUNC_CREAT_WR = os.O_CREAT | os.O_WRONLY | os.O_TRUNC


@pytest.fixture
def proc(cprog):
    return cprog("proc.c", name="proc")


def _file_writes(ts, path, pid=None):
    """[(name, size, offset, ret)] of the events on one file."""
    return [(e["name"], e["args"].get("size"), e["args"].get("offset"), e["args"]["ret"])
            for e in ts.events(fname=path, pid=pid)]


def _written(times, size):
    return ([("open", None, None, 3)] + [("write", size, i * size, size) for i in range(times)]
            + [("close", None, None, 0)])


def _check_eight_threads(ts, data_dir):
    (f,) = ts.files
    assert f.end["reason"] == "exit"
    tids = set()
    for i in range(8):
        path = f"{data_dir}/t{i}"
        evs = ts.events(fname=path)
        assert len({e["tid"] for e in evs}) == 1, "one thread per file"
        tid = evs[0]["tid"]
        assert tid != ts.pid and all(e["pid"] == ts.pid for e in evs)
        tids.add(tid)
        # fd numbers race between threads: compare the rest
        got = [(e["name"], e["args"].get("size"), e["args"].get("offset"), e["args"]["ret"] >= 0)
               for e in evs]
        assert got == [(n, s, o, True) for n, s, o, _ in _written(i + 1, 100)]
        # each thread's events are in its own order
        assert [e["ts"] for e in evs] == sorted(e["ts"] for e in evs)
    assert len(tids) == 8
    assert ts.counts() == {"open": 8, "write": 36, "close": 8}
    # every thread that wrote is named once (thread_name metadata, its tid)
    named = [r["tid"] for r in f.records if r.get("name") == "thread_name"]
    assert sorted(set(named)) == sorted(named) and tids <= set(named)


def test_eight_threads(proc, trace, data_dir):
    """Threads still alive at a flush (10 ms flushes, threads linger 200 ms)."""
    ts = trace([proc, "threads", data_dir, "200"], include=[data_dir], flush_ms=10)
    _check_eight_threads(ts, data_dir)


def test_eight_short_lived_threads(proc, trace, data_dir):
    """The usual case: threads end (and are joined) before the first flush."""
    ts = trace([proc, "threads", data_dir], include=[data_dir], check=False)
    assert ts.returncode == 0
    _check_eight_threads(ts, data_dir)


def test_fd_numbers_reused_across_threads(cprog, trace, data_dir):
    """4 threads x 3000 rounds of open + 3 writes + close: a number one thread closes is
    reopened by another at once. Every event keeps its own thread's file and offsets."""
    exe = cprog("fd_churn.c", name="fd_churn")
    ts = trace([exe, data_dir, "4", "3000"], include=[data_dir])
    owner = dict(tuple(map(int, line.split())) for line in ts.stdout.splitlines())
    assert len(owner) == 4 and len(set(owner.values())) == 4
    assert ts.counts() == {"open": 12000, "write": 36000, "close": 12000}
    for k, tid in owner.items():
        for j in range(4):
            evs = sorted(ts.events(fname=f"{data_dir}/t{k}-{j}"), key=lambda e: e["ts"])
            assert {e["tid"] for e in evs} == {tid}, (k, j)
            assert [e["name"] for e in evs] == ["open", "write", "write", "write", "close"] * 750
            writes = [(e["args"]["offset"], e["args"]["ret"]) for e in evs if e["name"] == "write"]
            assert writes == [(0, 10), (10, 10), (20, 10)] * 750, (k, j)
    # A close must not drop the entry another thread installed for the same number in the
    # meantime: the tracer would then ask /proc/self/fd about that fd again (readlinkat, lseek,
    # fcntl on the program's threads). strace -f slows each syscall, which widens the window
    # (about 100 lookups in 4 x 1000 rounds before the fix); only stdout (printf) is looked up.
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    log = data_dir.parent / "strace.log"
    trace(["strace", "-f", "-qq", "-e", "trace=readlinkat", "-o", log, exe, data_dir, "4", "1000"],
          include=[data_dir])
    lookups = [line for line in log.read_text().splitlines() if "/proc/self/fd/" in line]
    assert len(lookups) <= 1, lookups[:5]


VFORK_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
/* vfork, and in the child open + dup2 onto stdout + close before exec: the parent then writes
 * to its own file and its own stdout. */
int main(int argc, char** argv) {
  char a[4096], b[4096];
  snprintf(a, sizeof a, "%s/a", argv[1]);
  snprintf(b, sizeof b, "%s/b", argv[1]);
  int fd = open(a, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  pid_t pid = vfork();
  if (pid == 0) {
    int out = open(b, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    dup2(out, 1);
    close(out);
    execl("/bin/echo", "echo", "child", (char*)0);
    _exit(127);
  }
  int status;
  waitpid(pid, &status, 0);
  write(fd, "xyz", 3);
  write(1, "parent\n", 7);
  close(fd);
  printf("%d\n", (int)pid);
  return 0;
}
"""


def test_vfork_child_stays_out_of_the_parents_trace_and_fd_table(cprog, trace, data_dir):
    exe = cprog(VFORK_C, name="vforker")
    ts = trace([exe, data_dir])
    child = int(ts.stdout.split()[-1])
    assert ts.stdout.startswith("parent\n") and (data_dir / "b").read_text() == "child\n"
    parent = ts.pid
    # the parent's own calls, and none of the child's (its open of b, dup2, close)
    assert ts.counts(pid=parent, under=data_dir) == {"open": 1, "write": 1, "close": 1}
    assert ts.count(pid=parent, name=["dup2"]) == 0
    (w,) = [e for e in ts.events(pid=parent, name="write") if e["args"]["fd"] == 1]
    assert w["fname"].startswith("pipe:") and w["args"]["ret"] == 7  # the test's pipe, not b
    # the exec'd child (echo) writes its own file, under its own pid, and its stdout is b
    (echo,) = ts.files_of(child)
    assert echo.header["ppid"] == parent and echo.header["exe"].endswith("/echo")
    assert {e["fname"] for e in ts.events(pid=child) if e["args"].get("fd") == 1} == {str(data_dir / "b")}


def test_fork_child_ends_in_exit(proc, trace, data_dir):
    ts = trace([proc, "fork", data_dir], include=[data_dir])
    child = int(ts.stdout.split()[1])
    assert ts.stdout == f"child {child} 3\n"  # the child's _exit(3) status came through
    assert sorted(ts.pids) == sorted([ts.pid, child])
    parent_meta, child_meta = ts.process(ts.pid), ts.process(child)
    assert parent_meta["role"] == "main" and "parent_pid" not in parent_meta
    assert child_meta["role"] == "fork" and child_meta["parent_pid"] == ts.pid
    assert child_meta["ppid"] == ts.pid and child_meta["pid"] == child
    (pf,), (cf,) = ts.files_of(ts.pid), ts.files_of(child)
    assert pf.end["reason"] == "exit" and cf.end["reason"] == "_exit"
    assert pf.closed and cf.closed
    (fork,) = ts.events(name="fork")
    assert fork["pid"] == ts.pid and fork["cat"] == "process" and fork["args"] == {"ret": child}
    assert _file_writes(ts, f"{data_dir}/parent") == _written(1, 10)
    assert _file_writes(ts, f"{data_dir}/parent2") == _written(1, 30)
    assert _file_writes(ts, f"{data_dir}/child") == _written(2, 20)
    assert ts.count(pid=child) == 4 and ts.count(pid=ts.pid) == 7
    # nothing of the parent's buffer is repeated in the child's file
    assert ts.count(pid=child, fname=f"{data_dir}/parent") == 0


def test_python_fork_and_os_exit(trace, data_dir):
    code = f"""
import os
pid = os.fork()
if pid == 0:
    with open({str(data_dir / 'c')!r}, 'wb', buffering=0) as f:
        f.write(b'x' * 5)
    os._exit(7)
_, st = os.waitpid(pid, 0)
print(pid, os.waitstatus_to_exitcode(st))
"""
    ts = trace([sys.executable, "-I", "-c", code], include=[data_dir])
    child, code_ = map(int, ts.stdout.split())
    assert code_ == 7
    (cf,) = ts.files_of(child)
    assert cf.end["reason"] == "_exit" and cf.header["role"] == "fork"
    assert cf.header["parent_pid"] == ts.pid
    (w,) = ts.events(name="write", pid=child)
    assert (w["args"]["size"], w["args"]["offset"], w["args"]["ret"]) == (5, 0, 5)
    assert ts.events(name="fork", pid=ts.pid)[0]["args"]["ret"] == child


def test_exec_keeps_one_file_per_image(proc, trace, data_dir):
    prog = data_dir / "prog"  # under the included folder, so the exec event is kept
    shutil.copy(proc, prog)
    ts = trace([proc, "exec", data_dir, prog], include=[data_dir])
    first, second = ts.files_of(ts.pid)
    assert first.end["reason"] == "exec" and first.closed
    assert second.end["reason"] == "exit" and second.closed
    host = socket.gethostname().split(".")[0]
    assert os.path.basename(first.path) == f"proc-{host}-{ts.pid}{ZST_SUFFIX}"
    assert os.path.basename(second.path) == f"prog-{host}-{ts.pid}{ZST_SUFFIX}" or \
        os.path.basename(second.path) == f"prog-{host}-{ts.pid}-1{ZST_SUFFIX}"
    assert first.header["exe"] == os.path.realpath(proc)
    assert second.header["exe"] == str(prog)
    assert second.header["cmdline"] == [str(prog), "after", str(data_dir)]
    evs = first.events()
    assert [e["name"] for e in evs] == ["open", "write", "close", "execv"]
    assert evs[-1]["fname"] == str(prog) and evs[-1]["cat"] == "process"
    assert "ret" not in evs[-1]["args"]  # a successful exec does not come back
    assert [e["name"] for e in second.events()] == ["open", "write", "write", "close"]
    assert _file_writes(ts, f"{data_dir}/after") == _written(2, 12)


def test_exec_same_program_adds_suffix(proc, trace, data_dir, tmp_path):
    """exec of the same name keeps the pid: the second file gets -1."""
    ts = trace([proc, "exec", data_dir, proc], include=[data_dir])
    host = socket.gethostname().split(".")[0]
    assert sorted(os.path.basename(f.path) for f in ts.files) == [
        f"proc-{host}-{ts.pid}-1{ZST_SUFFIX}", f"proc-{host}-{ts.pid}{ZST_SUFFIX}"]
    assert [f.end["reason"] for f in ts.files_of(ts.pid)] == ["exec", "exit"]


def test_exec_image_role(proc, trace, data_dir):
    ts = trace([proc, "exec", data_dir, proc], include=[data_dir])
    assert [f.header["role"] for f in ts.files_of(ts.pid)] == ["main", "exec"]


def test_sigsegv_leaves_a_complete_file(proc, trace, data_dir):
    ts = trace([proc, "segv", data_dir], include=[data_dir], check=False)
    assert ts.returncode == -signal.SIGSEGV  # the program still dies of its signal
    (f,) = ts.files
    assert f.closed and f.lines[-1].endswith("]") and not f.bad_lines
    assert f.end == {"events": len(f.records) - 1, "reason": "killed"}
    assert _file_writes(ts, f"{data_dir}/s") == _written(3, 7)


def _start(proc, tmp_path, data_dir, flush_ms):
    out = fresh_dir(tmp_path)
    env = tracer_env(out, include=[data_dir], flush_ms=flush_ms)
    p = subprocess.Popen([proc, "wait", str(data_dir)], env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n"
    return p, out


def test_sigterm_from_outside(proc, tmp_path, data_dir):
    p, out = _start(proc, tmp_path, data_dir, flush_ms=60000)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == -signal.SIGTERM
    ts = TraceSet.load(out)
    (f,) = ts.files
    assert f.closed and f.end["reason"] == "killed"
    assert _file_writes(ts, f"{data_dir}/k") == _written(5, 10)


def test_sigkill_keeps_everything_recorded(proc, tmp_path, data_dir):
    """SIGKILL runs no code of the process: what it recorded is in its live file, and the first
    reader finishes the trace from it (here nothing was flushed before: a one-minute interval).
    The trace then ends as a killed process's does."""
    p, out = _start(proc, tmp_path, data_dir, flush_ms=60000)
    p.kill()
    assert p.wait(timeout=10) == -signal.SIGKILL
    assert any(n.endswith(".live") for n in os.listdir(out))
    ts = TraceSet.load(out)
    assert not any(n.endswith(".live") for n in os.listdir(out))
    (f,) = ts.files
    assert f.closed and f.end["reason"] == "killed" and f.end["events"] == len(f.records) - 1
    assert not f.bad_lines
    assert _file_writes(ts, f"{data_dir}/k") == _written(5, 10)
    assert f.header["pid"] == p.pid


def test_sigkill_keeps_a_quiet_thread_while_another_fills_buffers(tmp_path, data_dir):
    """The flush interval holds for every thread even when a busy thread fills a buffer more
    often than the interval (each full buffer wakes the writer, which then had never timed out
    and left the quiet thread's buffer unwritten)."""
    code = f"""
import os, sys, threading, time
big = os.open({str(data_dir / 'big')!r}, os.O_RDWR | os.O_CREAT, 0o644)
os.write(big, b'x' * 4096)
def busy():
    while True:  # ~20,000 calls/s: a 64 KiB buffer (~580 events) fills every ~30 ms
        for _ in range(100):
            os.pread(big, 1, 0)
        time.sleep(0.005)
threading.Thread(target=busy, daemon=True).start()
def quiet():
    fd = os.open({str(data_dir / 'lone')!r}, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b'y' * 7)
    print('ready', flush=True)
    time.sleep(60)
threading.Thread(target=quiet, daemon=True).start()
time.sleep(60)
"""
    out = fresh_dir(tmp_path)
    env = tracer_env(out, include=[data_dir], flush_ms=200,
                     env={"IOTRACE_BUFFER_SIZE": "64k"})
    p = subprocess.Popen([sys.executable, "-I", "-c", code], env=env, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        time.sleep(1.0)  # five flush intervals, ~30 full buffers
    finally:
        p.kill()
    assert p.wait(timeout=10) == -signal.SIGKILL
    ts = TraceSet.load(out)
    writes = [(e["args"]["size"], e["args"]["ret"]) for e in ts.events(fname=data_dir / "lone",
                                                                      name="write")]
    assert writes == [(7, 7)]
    assert ts.count(name=("pread", "pread64"), fname=data_dir / "big") > 2000  # the busy thread's


CPU_BURN = """
import os, sys, time
def burn(s):
    t = time.process_time()
    while time.process_time() - t < s:
        pass
pid = os.fork()
if pid == 0:
    burn(0.1)
    os._exit(0)
burn(0.3)
os.waitpid(pid, 0)
os.execv(sys.executable, [sys.executable, "-c", "pass"])
"""


def test_end_records_the_cpu_time_of_each_image(trace):
    """iotrace_end's cpu_ns: the CPU time of the process from its file's start: a fork child's
    from the fork (0.1 s burnt), the parent's its own 0.3 s and start-up, the image after exec
    without its predecessor's. No MPI: no mpi_cpu_ns, no host_cpu_wait_us."""
    ts = trace([sys.executable, "-c", CPU_BURN])
    first, after = ts.files_of(ts.pid)
    (child_pid,) = [p for p in ts.pids if p != ts.pid]
    (child,) = ts.files_of(child_pid)
    assert (first.end["reason"], child.end["reason"], after.end["reason"]) == ("exec", "_exit", "exit")
    assert set(first.cpu) == set(child.cpu) == set(after.cpu) == {"cpu_ns", "cpu_wait_ns"}
    # at most its wall time, and the loading before the file's start (the kernel counts it too)
    assert 0.29e9 <= first.cpu["cpu_ns"] <= first.end_ns - first.header["mono_ns"] + 0.02e9
    assert 0.09e9 <= child.cpu["cpu_ns"] < 0.2e9
    assert after.cpu["cpu_ns"] < 0.2e9  # an interpreter's start, not the 0.3 s before the exec


def test_enable_0_creates_no_file(proc, trace, data_dir, tmp_path):
    ts = trace([proc, "after", data_dir], include=[data_dir], env={"IOTRACE_ENABLE": "0"})
    assert ts.files == [] and not os.path.exists(ts.dir)
    assert (data_dir / "after").stat().st_size == 24  # the program itself ran


def test_process_metadata(proc, trace, data_dir):
    ranks = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "SLURM_PROCID": "3", "SLURM_JOB_ID": "90210"}
    wall0, mono0 = time.time_ns(), time.monotonic_ns()
    ts = trace([proc, "after", data_dir], include=[data_dir], env=ranks, compression="gzip", cwd=data_dir)
    wall1, mono1 = time.time_ns(), time.monotonic_ns()
    (f,) = ts.files
    m = f.header
    assert m == {
        "version": 7, "hostname": socket.gethostname().split(".")[0], "pid": ts.pid,
        "ppid": os.getpid(), "exe": os.path.realpath(proc),
        "cmdline": [proc, "after", str(data_dir)], "cwd": os.path.realpath(data_dir),
        "wall_ns": m["wall_ns"], "mono_ns": m["mono_ns"],
        "resolution_ns": 1, "role": "main", "ranks": ranks,
        # the compact form is always zstd (its frames are what make it readable)
        "compression": "zstd" if TEST_FORMAT == "compact" else "gzip",
        "form": TEST_FORMAT or "json"}
    assert wall0 <= m["wall_ns"] <= wall1
    assert mono0 <= m["mono_ns"] <= mono1  # CLOCK_MONOTONIC, as Python's monotonic_ns
    for e in ts.events():
        assert m["mono_ns"] / 1000 <= e["ts"] <= mono1 / 1000
    (pn,) = [r for r in f.records if r.get("name") == "process_name"]
    assert pn["args"] == {"name": "proc"} and pn["pid"] == ts.pid
    assert f.records[0]["name"] == "iotrace_process"
    # no rank variables: an empty object
    ts2 = trace([proc, "after", data_dir], include=[data_dir])
    assert ts2.process()["ranks"] == {}


def test_trace_name_from_env(proc, trace, data_dir):
    ts = trace([proc, "after", data_dir], include=[data_dir], env={"IOTRACE_NAME": "job7"})
    host = socket.gethostname().split(".")[0]
    (f,) = ts.files
    assert os.path.basename(f.path) == f"job7-{host}-{ts.pid}{ZST_SUFFIX}"


def test_signal_dispositions_look_default_to_the_program(tmp_path):
    # The flushing handler stands in for the default action without showing: the program sees
    # SIG_DFL, its own handlers replace ours, and SIG_DFL set again keeps the flush.
    code = r"""
import os, signal
print([signal.getsignal(s) == signal.SIG_DFL for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGSEGV)])
seen = []
signal.signal(signal.SIGUSR1, lambda *a: seen.append("usr1"))
os.kill(os.getpid(), signal.SIGUSR1)
print(seen, signal.getsignal(signal.SIGUSR1) not in (None, signal.SIG_DFL))
print(signal.signal(signal.SIGTERM, signal.SIG_DFL) == signal.SIG_DFL, flush=True)
os.kill(os.getpid(), signal.SIGTERM)
"""
    ts = run_traced([sys.executable, "-c", code], tmp_path, check=False)
    assert ts.returncode == -signal.SIGTERM
    assert ts.stdout.splitlines() == ["[True, True, True]", "['usr1'] True", "True"]
    (f,) = [f for f in ts.files_of(ts.pid)]
    assert f.closed and f.end["reason"] == "killed"


def test_tracer_holds_no_fd_of_the_program(tmp_path):
    # The writer has a private fd table: the program's fds are the same traced or not, before
    # and after flushes, and the next fd it opens gets the same number.
    code = r"""
import os, time, iotrace
def fds():
    return sorted(int(x) for x in os.listdir("/proc/self/fd"))
before = fds()
for i in range(3):
    open("/etc/hostname").read()
    iotrace.flush()
    time.sleep(0.05)
fd = os.open("/etc/hostname", os.O_RDONLY)
print(before, fds(), fd)
"""
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if not k.startswith("IOTRACE")})
    ts = run_traced([sys.executable, "-c", code], tmp_path, flush_ms=20)
    assert plain.returncode == 0 and ts.stdout == plain.stdout  # same fds, same numbers
    (f,) = ts.files_of(ts.pid)
    assert f.closed and len(ts.events(name="read", fname="/etc/hostname")) >= 3


CPU_SHARED = """
import os, sys, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one CPU for both processes
def burn(s):
    t = time.process_time()
    while time.process_time() - t < s:
        pass
pid = os.fork()
burn(0.2)  # both at once: each runnable, one CPU
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
burn(0.05)  # alone
"""


def test_end_records_the_wait_for_a_cpu(trace):
    """iotrace_end's cpu_wait_ns: how long the process's main thread was runnable with no CPU
    (the run queue's delay). A parent and its fork child, both burning 0.2 s of CPU on one CPU,
    each wait about as long as the other runs: at least a third of their CPU time here (a
    busy machine makes it more, never less); each wait is within the process's life."""
    ts = trace([sys.executable, "-c", CPU_SHARED])
    (main,) = ts.files_of(ts.pid)
    (child_pid,) = [p for p in ts.pids if p != ts.pid]
    (child,) = ts.files_of(child_pid)
    for f in (main, child):
        wait, cpu = f.cpu["cpu_wait_ns"], f.cpu["cpu_ns"]
        assert wait >= 0.2e9 / 3 and cpu >= 0.2e9, f.cpu
        assert wait + cpu <= f.end_ns - f.header["mono_ns"] + 0.05e9, f.cpu  # (start-up before the file)
