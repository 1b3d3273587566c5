"""The live file (docs/trace-format.md, "The live file"): a process's records are in a file it
maps the moment they are committed, so a process that dies of anything (SIGKILL included, no
code of it running) keeps its whole trace, and the first reader finishes it.

The workloads count what they did themselves (the size of a file they write one byte at a time,
the files they open), and each test checks the trace against that count exactly.
"""
from __future__ import annotations

import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from tracing import TraceSet, fresh_dir, run_plain, run_traced, tracer_env

import iotrace_format.reader as reader


def _start(exe, args, out, **env):
    e = tracer_env(out, {k: str(v) for k, v in env.items()})
    p = subprocess.Popen([exe, *map(str, args)], env=e, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n"
    return p


def _python_killed_when_ready(code, out, include=None):
    """Run Python `code` traced (no flush for a minute: all it did is in its live file), kill
    it with SIGKILL once it prints "ready", and load its traces: (TraceSet, pid)."""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env=tracer_env(out, {"IOTRACE_FLUSH_INTERVAL_MS": "60000"}, include=include))
    assert p.stdout.readline() == "ready\n"
    p.kill()
    p.wait(timeout=10)
    return TraceSet.load(out), p.pid


def _pwrite_offsets(ts, path):
    return [e["args"]["offset"] for e in ts.events(name="pwrite", fname=str(path))]


def test_killed_at_any_moment_keeps_every_call_once(cprog, tmp_path, data_dir):
    """SIGKILL at random moments of a process that records ~2 million calls a second, while its
    writer writes a frame every few ms: the finished trace holds every pwrite the process made
    exactly once (none lost with the process, none written twice by the writer and then again
    from the live file), in order. The file's size says how many there were; the last call may
    be missing (done, but killed before it was recorded)."""
    exe = cprog("kill_while_writing.c", name="kill_while_writing")
    rng = random.Random(22)
    for run in range(8):
        out = fresh_dir(tmp_path)
        data = data_dir / f"w{run}"
        p = _start(exe, [data], out, IOTRACE_FLUSH_INTERVAL_MS=rng.choice([2, 5, 20]))
        time.sleep(rng.uniform(0.02, 0.4))
        p.kill()
        assert p.wait(timeout=10) == -signal.SIGKILL
        done = os.path.getsize(data)
        ts = TraceSet.load(out)
        (f,) = ts.files
        assert f.closed and f.end["reason"] == "killed" and not f.bad_lines, run
        offsets = _pwrite_offsets(ts, data)
        assert offsets == list(range(len(offsets))), run  # each once, in order
        assert len(offsets) in (done, done - 1), (run, len(offsets), done)
        assert f.end["events"] == len(f.records) - 1


def test_killed_process_names_every_file_it_opened(cprog, tmp_path, data_dir):
    """The records name files by address; the live file says which path each address held. A
    process that opened 3000 files and was killed has every path named in its finished trace."""
    code = f"""
import os, sys
for i in range(3000):
    fd = os.open({str(data_dir)!r} + f"/f{{i:04d}}", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x")
    os.close(fd)
print("ready", flush=True)
import time
time.sleep(60)
"""
    ts, _ = _python_killed_when_ready(code, fresh_dir(tmp_path), include=[data_dir])
    opened = [e["fname"] for e in ts.events(name=("open", "open64", "openat", "openat64"))]
    assert opened == [str(data_dir / f"f{i:04d}") for i in range(3000)]
    assert ts.count("write", under=data_dir) == 3000 and ts.count("close", under=data_dir) == 3000
    assert "(unknown" not in str(ts.files[0].fh)


def test_a_clean_exit_leaves_no_live_file(trace, data_dir):
    """A process that ends normally finishes its own trace; its live file goes."""
    (data_dir / "x").write_text("hello")
    ts = trace(["cat", data_dir / "x"], include=[data_dir])
    assert not [n for n in os.listdir(ts.dir) if n.endswith(".live")]
    assert ts.count("read", fname=data_dir / "x") >= 1 and ts.files[0].end["reason"] == "exit"


def test_a_running_process_live_file_is_left_alone(cprog, tmp_path, data_dir):
    """Reading a job while it runs: the live file of a running process is not touched (its
    process still writes it), and readers say its last events are not in the trace yet."""
    exe = cprog("kill_while_writing.c", name="kill_while_writing")
    out = fresh_dir(tmp_path)
    p = _start(exe, [data_dir / "w"], out, IOTRACE_FLUSH_INTERVAL_MS=60000)
    try:
        finished, notes = reader.settle_live([str(out)])
        assert not finished and len(notes) == 1 and "still running" in notes[0].detail
        assert [n for n in os.listdir(out) if n.endswith(".live")]
        cat = subprocess.run(["iotrace", "cat", str(out)], capture_output=True, text=True, timeout=60)
        assert "still running" in cat.stderr and cat.returncode == 1
    finally:
        p.kill()
        p.wait(timeout=10)
    finished, notes = reader.settle_live([str(out)])
    assert len(finished) == 1 and not notes and finished[0]["pid"] == p.pid


def test_iotrace_cat_finishes_a_dead_process_trace(cprog, tmp_path, data_dir):
    """`iotrace cat` (as every reader) finishes the trace of a process that died first."""
    exe = cprog("kill_while_writing.c", name="kill_while_writing")
    out = fresh_dir(tmp_path)
    p = _start(exe, [data_dir / "w"], out, IOTRACE_FLUSH_INTERVAL_MS=60000)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    cat = subprocess.run(["iotrace", "cat", str(out)], capture_output=True, text=True, timeout=60)
    assert cat.returncode == 0, cat.stderr
    n = cat.stdout.count('"name":"pwrite"')
    assert n in (os.path.getsize(data_dir / "w"), os.path.getsize(data_dir / "w") - 1)
    assert '"reason":"killed"' in cat.stdout
    assert not [x for x in os.listdir(out) if x.endswith(".live")]


def test_many_threads_killed_keep_their_records(tmp_path, data_dir):
    """64 threads, each writing its own file, their chunks spread over several segments of the
    live file (it grows as they record): all of it comes back after SIGKILL."""
    code = f"""
import os, sys, threading
d = {str(data_dir)!r}
def work(i):
    fd = os.open(f"{{d}}/t{{i}}", os.O_WRONLY | os.O_CREAT, 0o644)
    for k in range(2000):
        os.pwrite(fd, b"y", k)
    os.close(fd)
ts = [threading.Thread(target=work, args=(i,)) for i in range(64)]
for t in ts: t.start()
for t in ts: t.join()
print("ready", flush=True)
import time
time.sleep(60)
"""
    ts, _ = _python_killed_when_ready(code, fresh_dir(tmp_path), include=[data_dir])
    for i in range(64):
        evs = ts.events(name=("pwrite", "pwrite64"), fname=data_dir / f"t{i}")
        assert [e["args"]["offset"] for e in evs] == list(range(2000)), i
        assert len({e["tid"] for e in evs}) == 1


def test_segments_the_writer_had_ahead_keep_their_records(cprog, tmp_path, data_dir):
    """A pool of 512 threads recording 11 MB at once: once the live file's last segment is half
    carved, the writer has the next one ahead (its pages written with zeros, through an fd of
    its own, into a range of the file it reserved first) and the threads carve it. strace shows
    those writes; after SIGKILL every write of every thread is in the finished trace once, in
    order: none of the zeros landed on a chunk a thread had already carved."""
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    exe = cprog("pool_killed.c", name="pool_killed", flags=("-pthread",))
    out, log = fresh_dir(tmp_path), tmp_path / "strace.log"
    threads, writes = 512, 300
    p = subprocess.Popen(["strace", "-f", "-qq", "-y", "--seccomp-bpf", "-e", "trace=pwritev", "-o", log,
                          exe, data_dir, str(threads), str(writes)], stdout=subprocess.PIPE, text=True,
                         env=tracer_env(out, {"IOTRACE_FLUSH_INTERVAL_MS": "60000"}, include=[data_dir]))
    try:
        assert p.stdout.readline() == "ready\n"
        (pool,) = psutil.Process(p.pid).children()
        pool.kill()
        p.wait(timeout=30)
    finally:
        p.kill()
    zeros = [line for line in log.read_text().splitlines() if "pwritev(" in line and ".live>" in line
             and "/pool_killed-" in line]  # strace's own image in that process had one too
    assert all('iov_base="\\0\\0\\0\\0' in line for line in zeros)  # zeros, nothing else
    # The first part of the file, by the process as it starts (offset 0); the rest of each
    # segment by the threads that carve into it (zero_last), in steps; the writer's spares whole.
    first = [line for line in zeros if line.startswith(f"{pool.pid} ")]
    assert len(first) == 1 and ", 0) = " in first[0]
    assert [line for line in zeros if not line.startswith(f"{pool.pid} ")]
    # (a write that another thread's call cut in strace's output ends "<unfinished ...>")
    offsets = sorted(int(re.search(r", (\d+)(?:\) = \d+| <unfinished \.\.\.>)$", line)[1]) for line in zeros)
    first_end = 512 << 10  # the first segment's size; it starts past the header's page(s)
    assert offsets[0] == 0 and any(0 < o <= first_end for o in offsets), offsets  # zero_last
    assert any(o > first_end for o in offsets), offsets  # past it: grown segments, spares
    ts = TraceSet.load(out)
    (f,) = [f for f in ts.files if f.pid == pool.pid and f.name.startswith("pool_killed")]  # after the exec
    assert f.end["reason"] == "killed" and not f.bad_lines
    by_file = {}
    for e in ts.events(name="write", under=data_dir):
        by_file.setdefault(e["fname"], []).append(e)
    for i in range(threads):
        evs = by_file[str(data_dir / f"t{i}")]
        assert [e["args"]["offset"] for e in evs] == list(range(writes)), i
        assert len({e["tid"] for e in evs}) == 1


def test_a_pool_after_the_fds_are_used_up_keeps_every_record(cprog, tmp_path, data_dir):
    """A program that used up its fds (RLIMIT_NOFILE 32, /dev/null opened until EMFILE), then
    starts 64 threads recording ~1 MiB: the tracer can open no fd to make its live file's
    pages ready (its first segment's rest, the writer's next segments), so it has them through
    the mapping. The program opens as many files as untraced, and every pwrite of every thread
    is in the trace once, in its order, with its thread."""
    exe = cprog("pool_no_fds.c", name="pool_no_fds", flags=("-pthread",))
    threads, writes = 64, 300
    cmd = [exe, data_dir / "out", str(threads), str(writes)]
    plain = run_plain(cmd)
    assert (plain.returncode, plain.stdout) == (0, f"fds 28 wrote {threads * writes}\n"), plain
    ts = run_traced(cmd, tmp_path, include=[data_dir])
    assert ts.stdout == plain.stdout
    evs = ts.events(name=("pwrite", "pwrite64"), fname=data_dir / "out")
    assert len(evs) == threads * writes
    by_tid = {}
    for e in evs:
        by_tid.setdefault(e["tid"], []).append(e["args"]["offset"])
    assert sorted(by_tid.values()) == [list(range(i * writes, (i + 1) * writes)) for i in range(threads)]
    assert (data_dir / "out").stat().st_size == threads * writes


def test_a_process_ended_as_it_starts_leaves_a_whole_trace_or_none(tmp_path):
    """SIGTERM at random moments of a traced `/bin/true`'s first milliseconds, as a pool
    terminates the workers it has just spawned. The tracer holds signals while it makes its
    files: a process the signal ends then has them whole (its trace has its header, its live
    file is read and gone), and one ended before the tracer started has none. Never an empty
    trace beside a live file cut short (seen once in 20 runs of benchmarks/loss_rate.py's
    pool-spawn scenario on a loaded machine, before)."""
    true = shutil.which("true")
    rng = random.Random(54)
    whole = 0
    for i in range(150):
        out = tmp_path / f"t{i}"
        p = subprocess.Popen([true], env=tracer_env(out))
        time.sleep(rng.uniform(0, 0.003))
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)
        if not out.exists():
            continue
        notes = reader.settle_live([str(out)])[1]
        assert not notes, (i, [(n.kind, n.detail) for n in notes])
        ts = TraceSet.load(out)
        assert [f.pid for f in ts.files] == [p.pid], (i, os.listdir(out))
        assert not [n for n in os.listdir(out) if n.endswith(".live")], (i, os.listdir(out))
        whole += 1
    assert whole >= 10, whole  # the signal met the tracer at work, not only before it


def test_recovered_trace_keeps_the_process_header(tmp_path, data_dir):
    """The live file holds the process's header lines: a process killed before its writer wrote
    anything but the file's start still names its command line, parent and role."""
    out = fresh_dir(tmp_path)
    code = "import time; open('/dev/null').close(); print('ready', flush=True); time.sleep(60)"
    ts, pid = _python_killed_when_ready(code, out)
    h = ts.process(pid)
    assert h["cmdline"][-1] == code and h["ppid"] == os.getpid() and h["role"] == "main"


def test_run_traced_helper_sees_recovered_traces(trace, data_dir):
    """The suite's own loader finishes live files too (as iotrace_format.reader does)."""
    ts = run_traced(["sh", "-c", f"echo hi > {data_dir}/a; kill -9 $$"], data_dir.parent, check=False)
    assert ts.returncode == -signal.SIGKILL
    assert ts.files and all(f.closed for f in ts.files)


def test_traced_parent_that_reaps_a_killed_child_names_the_signal(cprog, tmp_path, data_dir):
    """A child that a signal ends runs no code of the tracer's; the traced parent that reaps it
    (a shell's wait, Python's waitpid) finishes its trace there and then, with the signal as
    the end's reason and the CPU time the child had; a reader finishing it later could only say
    "killed"."""
    exe = cprog("kill_while_writing.c", name="kill_while_writing")
    for parent, how in (("bash", "shell"), (sys.executable, "python")):
        out = fresh_dir(tmp_path)
        data = data_dir / f"w-{how}"
        if how == "shell":
            cmd = ["bash", "-c", f'"$1" "$2" & sleep 0.3; kill -{int(signal.SIGUSR1)} $!; wait $!; '
                   'echo "status $?"', "bash", exe, data]
        else:
            code = ("import subprocess, sys, time, signal\n"
                    "p = subprocess.Popen([sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE)\n"
                    "p.stdout.readline(); time.sleep(0.1); p.send_signal(signal.SIGUSR1)\n"
                    "print('status', p.wait())\n")
            cmd = [parent, "-c", code, exe, data]
        p = subprocess.run(cmd, env=tracer_env(out), capture_output=True, text=True, timeout=60)
        assert p.stdout.split()[-1] in (str(128 + signal.SIGUSR1), str(-signal.SIGUSR1)), (how, p.stdout)
        # Finished by the parent: no live file left for a reader.
        assert not [n for n in os.listdir(out) if n.endswith(".live")], how
        ts = TraceSet.load(out)
        (child,) = [f for f in ts.files if f.header["exe"].endswith("kill_while_writing")]
        assert child.end["reason"] == f"signal:{int(signal.SIGUSR1)}", how
        offsets = [e["args"]["offset"] for e in child.events() if e["name"] == "pwrite"]
        assert offsets == list(range(len(offsets))) and len(offsets) in (
            os.path.getsize(data), os.path.getsize(data) - 1), how
        # and the CPU time it had (wait4's rusage): at least its pwrites' (a call of the page
        # cache takes more than 100 ns), at most its two threads' (its own and the tracer's
        # writer, which compresses beside it) over its life
        cpu, life = child.cpu["cpu_ns"], child.end_ns - child.header["mono_ns"]
        assert len(offsets) * 100 <= cpu <= 2 * life + 20_000_000, (how, cpu, life, len(offsets))
        # and its main thread's wait for a CPU, read from /proc before the parent reaped it: where
        # the wait named the child (Python's waitpid(pid)); a shell's waits for any child
        # (wait4(-1)) get none
        if how == "python":
            assert 0 <= child.cpu["cpu_wait_ns"] <= life + 20_000_000, (child.cpu, life)
        else:
            assert "cpu_wait_ns" not in child.cpu, child.cpu


def test_iotrace_recover_finishes_and_says_what_it_did(cprog, tmp_path, data_dir):
    """`iotrace recover DIR`: the trace of a process that died is finished, with a line on it;
    a running process's live file is left alone unless --force."""
    exe = cprog("kill_while_writing.c", name="kill_while_writing")
    out = fresh_dir(tmp_path)
    dead = _start(exe, [data_dir / "dead"], out, IOTRACE_FLUSH_INTERVAL_MS=60000)
    dead.kill()
    dead.wait(timeout=10)
    running = _start(exe, [data_dir / "running"], out, IOTRACE_FLUSH_INTERVAL_MS=60000)
    try:
        r = subprocess.run(["iotrace", "recover", str(out)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert f"pid {dead.pid} " in r.stdout and "ended: killed" in r.stdout
        assert f"pid {running.pid} is still running: left alone" in r.stderr
        lives = [n for n in os.listdir(out) if n.endswith(".live")]
        assert len(lives) == 1 and f"-{running.pid}." in lives[0]
    finally:
        running.kill()
        running.wait(timeout=10)
    r = subprocess.run(["iotrace", "recover", "--force", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and f"pid {running.pid} " in r.stdout, (r.stdout, r.stderr)
    assert not [n for n in os.listdir(out) if n.endswith(".live")]


@pytest.mark.parametrize("end", ["exit", "killed"])
def test_values_past_the_short_record_are_kept(cprog, tmp_path, data_dir, end):
    """The live record holds the size and the duration in 32 bits (record.h, IoLive); larger
    ones go whole into its long form. A pread asking 5 GiB and a read blocking for 4.6 s (more
    than 2^32 ticks or ns) keep their values, through the process's own writer (exit) and
    through a reader finishing a killed process's live file, and the short pread after them too."""
    exe = cprog("wide_values.c", name="wide_values")
    (data_dir / "ten").write_bytes(b"0123456789")
    out = fresh_dir(tmp_path)
    e = tracer_env(out, {"IOTRACE_FLUSH_INTERVAL_MS": "60000"})
    p = subprocess.Popen([exe, data_dir / "ten", "wait" if end == "killed" else "exit"], env=e,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    time.sleep(4.6)
    p.stdin.write("x")
    p.stdin.flush()
    assert p.stdout.readline() == "ready\n"
    if end == "killed":
        p.kill()
    assert p.wait(timeout=30) == (-signal.SIGKILL if end == "killed" else 0)
    ts = TraceSet.load(out)
    (f,) = ts.files
    assert f.closed and f.end["reason"] == end
    preads = [(e["args"]["size"], e["args"]["offset"], e["args"]["ret"])
              for e in ts.events(name="pread", fname=data_dir / "ten")]
    assert preads == [(5 << 30, 0, 10), (7, 1, 7)]
    (blocked,) = [e for e in f.events() if e["ph"] == "X" and e["name"] == "read" and e["args"].get("fd") == 0]
    assert blocked["args"]["size"] == 1 and blocked["args"]["ret"] == 1
    assert 4.4e6 <= blocked["dur"] <= 60e6  # µs


def _live_chunk_tids(live: Path) -> list[int]:
    """The tid of every chunk a thread holds (open or sealed) in a live file, read from its
    layout as docs/trace-format.md gives it (csrc/format/live.h: the segment list at byte 392 of
    the header, after n_segments at 384; a chunk's header: magic, cap, committed, state, durable,
    pending, tid, size_class)."""
    data = live.read_bytes()
    (n,) = struct.unpack_from("<I", data, 384)
    tids = []
    for i in range(n):
        off, size = struct.unpack_from("<QQ", data, 392 + 16 * i)
        at = off
        while at + 32 <= off + size:
            magic, _cap, _committed, state, _durable, _pending, tid, cls = struct.unpack_from("<IIIIIIiI", data, at)
            if magic != 0x4B4E4843:
                break  # not carved yet
            if state in (1, 2):
                tids.append(tid)
            at += 1 << cls
    return tids


def test_threads_whose_calls_are_all_filtered_take_no_chunk(cprog, tmp_path, data_dir):
    """A thread gets its state and its first chunk of the live file with its first record kept:
    64 threads that only read /proc (never traced) hold no chunk; the main thread, which read one
    included file, holds one, with its record in it."""
    exe = cprog("filtered_threads.c", name="filtered_threads", flags=("-pthread",))
    (data_dir / "x").write_bytes(b"x" * 10)
    out = fresh_dir(tmp_path)
    p = _start(exe, [data_dir / "x", 64], out, IOTRACE_INCLUDE=data_dir, IOTRACE_FLUSH_INTERVAL_MS=60000)
    try:
        (live,) = [Path(out) / n for n in os.listdir(out) if n.endswith(".live")]
        assert _live_chunk_tids(live) == [p.pid]
    finally:
        p.kill()
        p.wait(timeout=10)
    ts = TraceSet.load(out)
    assert [e["name"] for e in ts.events(under=data_dir) if e["ph"] == "X"] == ["open", "read", "close"]


# Where the live file's header keeps what the trace file has told of its losses
# (csrc/format/live.h, Header; little-endian x86-64): dropped, file_lost, file_unsaid,
# file_drops_said, lost_errno.
_DROPPED, _FILE_LOST, _FILE_UNSAID, _FILE_DROPS_SAID, _LOST_ERRNO = 1360, 1376, 1472, 1480, 1496


@pytest.mark.parametrize("unsaid", [0, 5])
def test_a_reader_tells_each_loss_once(tmp_path, data_dir, unsaid):
    """A reader that finishes a dead process's file tells the losses the file has not told, and
    only those: here the process had 7 events dropped, 3 of them told in its file already, and
    `unsaid` lines lost to a full disk and not told yet (its header says so, set by hand on a
    killed process's live file). Told twice, the drops made the analyzer count one more loss
    than the end record in CI (test_disk_full_says_so_once_and_the_trace_counts_the_loss)."""
    (data_dir / "x").write_bytes(b"x" * 10)
    out = fresh_dir(tmp_path)
    code = f"open({str(data_dir / 'x')!r}).read(); print('ready', flush=True); import time; time.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env=tracer_env(out, {"IOTRACE_FLUSH_INTERVAL_MS": "60000"}, include=[data_dir]))
    assert p.stdout.readline() == "ready\n"
    p.kill()
    p.wait(timeout=10)
    (live,) = [Path(out) / n for n in os.listdir(out) if n.endswith(".live")]
    head = bytearray(live.read_bytes()[:4096])
    assert struct.unpack_from("<Q", head, _DROPPED) + struct.unpack_from("<Q", head, _FILE_LOST) == (0, 0)
    struct.pack_into("<Q", head, _DROPPED, 7)
    struct.pack_into("<Q", head, _FILE_LOST, unsaid)
    struct.pack_into("<QQ", head, _FILE_UNSAID, unsaid, 3)
    struct.pack_into("<i", head, _LOST_ERRNO, 28 if unsaid else 0)  # ENOSPC
    with open(live, "r+b") as f:
        f.write(head)
    (f,) = TraceSet.load(out).files
    told = [r["args"] for r in f.records if r.get("name") == "iotrace_lost"]
    why = "No space left on device" if unsaid else "no trace buffer could be had"
    assert told == [{"events": 4 + unsaid, "reason": why}]
    assert f.end["reason"] == "killed" and f.end["dropped"] == 7 and f.end.get("lost", 0) == unsaid
    assert [e["name"] for e in TraceSet.load(out).events(under=data_dir) if e["ph"] == "X"][:1] == ["open64"]


def test_waits_for_one_child_behave_as_untraced(cprog, tmp_path):
    """The tracer peeks at the child a waitpid(pid) or wait4(pid) names (waitid with WNOWAIT)
    before the wait reaps it, to read a killed child's wait for a CPU: every kind of wait
    returns what it returns untraced (WNOHANG on a running child, a stop with WUNTRACED, a
    continue with WCONTINUED, EINTR from a handler without SA_RESTART, a kill through wait4,
    an exit, ECHILD, a NULL status), and the killed child's end has the figure."""
    exe = cprog("wait_kinds.c", name="wait_kinds")
    plain = run_plain([exe])
    assert plain.returncode == 0 and plain.stdout.splitlines() == [
        "nohang-running 0", "stopped 1 1 19", "continued 1 1", "interrupted -1 Interrupted system call",
        "killed 1 1 15", "exited 1 1 7", "gone -1 No child processes", "null-status 1"], plain.stdout
    out = fresh_dir(tmp_path)
    p = subprocess.run([exe], env=tracer_env(out), capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (0, plain.stdout)
    ts = TraceSet.load(out)
    (killed,) = [f for f in ts.files if f.end["reason"] == "signal:15"]
    life = killed.end_ns - killed.header["mono_ns"]
    assert 0 <= killed.cpu["cpu_wait_ns"] <= life + 20_000_000, killed.cpu
