"""The fault suite: a traced program dies, exits and is attacked exactly as it would untraced,
and every trace says what it lost (C helpers in tests/c/fault_*.c, swap_trace.c)."""
from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import time

import pytest

from tracing import TraceSet, fresh_dir, read_trace_file, run_plain, tracer_env, trace_files


@pytest.fixture
def fault_die(cprog):
    return cprog("fault_die.c", name="fault_die")


def _events_on(ts, path):
    return [(e["name"], e["args"].get("size"), e["args"].get("ret")) for e in ts.events(fname=path)]


def test_double_free_dies_at_once_with_its_trace(fault_die, tmp_path, data_dir):
    """glibc aborts a double free inside free() with the arena locked (the writer thread makes
    the process multi-threaded): the tracer's last flush must not call malloc. Untraced the
    program dies of SIGABRT at once; traced too, 50 times out of 50, each trace complete."""
    plain = run_plain([fault_die, data_dir, "double-free"])
    assert plain.returncode == -signal.SIGABRT
    for i in range(50):
        out = fresh_dir(tmp_path)
        t0 = time.monotonic()
        p = subprocess.run([fault_die, data_dir, "double-free"], env=tracer_env(out),
                           capture_output=True, text=True, timeout=30)
        took = time.monotonic() - t0
        assert p.returncode == -signal.SIGABRT, (i, p.returncode, p.stderr)
        assert took < 1.0, f"run {i}: {took:.2f} s to die"
        ts = TraceSet.load(out)
        (f,) = ts.files
        assert f.end == {"events": len(f.records) - 1, "reason": f"signal:{int(signal.SIGABRT)}"}
        assert _events_on(ts, str(data_dir / "before")) == [("open", None, 3), ("write", 3, 3),
                                                             ("close", None, 0)]


def test_sigterm_inside_malloc_dies_within_a_second(fault_die, tmp_path, data_dir):
    """SIGTERM lands while three threads malloc and free past the tcache (arena locks held):
    the process dies of it within a second of the signal, 50 times out of 50, with the events
    recorded before it."""
    rng = random.Random(7)
    for i in range(50):
        out = fresh_dir(tmp_path)
        p = subprocess.Popen([fault_die, data_dir, "malloc-churn"], env=tracer_env(out),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline() == "ready\n"
            time.sleep(rng.uniform(0.0, 0.05))
            p.send_signal(signal.SIGTERM)
            t0 = time.monotonic()
            rc = p.wait(timeout=5)
            took = time.monotonic() - t0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
        assert rc == -signal.SIGTERM, (i, rc)
        assert took < 1.0, f"run {i}: {took:.2f} s to die"
        ts = TraceSet.load(out, pid=p.pid)
        (f,) = ts.files
        assert f.end is not None and f.end["reason"] == f"signal:{int(signal.SIGTERM)}"
        assert _events_on(ts, str(data_dir / "before")) == [("open", None, 3), ("write", 3, 3),
                                                             ("close", None, 0)]


def test_trace_file_swapped_for_a_symlink_is_never_written_through(cprog, tmp_path, data_dir):
    """A user swaps their trace file (in a folder they own) for a symlink to a file of root's:
    the traced program's later flushes (exit included) go to the file the tracer created, by
    its fd, and never through the symlink."""
    exe = cprog("swap_trace.c", name="swap_trace")
    victim = tmp_path / "victim"
    victim.write_bytes(b"root's file\n")
    before = victim.read_bytes()
    out = fresh_dir(tmp_path)
    p = subprocess.run([exe, data_dir, out, victim], capture_output=True, text=True, timeout=30,
                       env=tracer_env(out, {"IOTRACE_FLUSH_INTERVAL_MS": "10"}))
    assert p.returncode == 0, p.stderr
    assert victim.read_bytes() == before
    (moved,) = [n for n in os.listdir(out) if n.endswith(".moved")]
    # the moved file is the one the tracer created: it holds the whole trace, end included
    real = out / moved.removesuffix(".moved")
    assert os.path.islink(real)
    os.unlink(real)
    os.rename(out / moved, real)
    f = read_trace_file(real)
    assert f.end is not None and f.end["reason"] == "exit"
    names = [e["name"] for e in f.events() if e.get("fname") == str(data_dir / "b")]
    assert names == ["open", "write", "close"]


def test_folders_and_files_are_not_world_writable_under_umask_0(tmp_path):
    """A trace folder made under umask 000 is 0755 (never 0777), the file 0644."""
    out = tmp_path / "a" / "b" / "traces"
    env = tracer_env(out)
    p = subprocess.run(["sh", "-c", "umask 000; exec true"], env=env, timeout=30)
    assert p.returncode == 0
    for d in (tmp_path / "a", tmp_path / "a" / "b", out):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o755, d
    files = trace_files(out)
    assert files and all(stat.S_IMODE(os.stat(f).st_mode) == 0o644 for f in files)
