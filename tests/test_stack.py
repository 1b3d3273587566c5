"""The tracer's share of the program's stack: a few hundred bytes per call.

The wrappers run on the program's thread and stack, signal handlers included, and those often
run on a small alternate stack (8 KiB is common: crash reporters, Rust's stack-overflow
handler). tests/c/stack_use.c runs each call inside a SIGUSR1 handler on a patterned alternate
stack and reports how deep the stack was used; traced, that may exceed the untraced depth by
at most 512 bytes. The slow paths that need room (learning an unknown fd's path, resolving a
relative path, the cwd) take it from scratch pages (csrc/core/scratch.h), not from the stack.
"""
from __future__ import annotations

import collections
import os
import resource

import pytest

from tracing import run_plain, run_traced

# Each call of stack_use.c: the slow paths (unknown fds and folders, relative and unnormalised
# paths, chdir's cwd) as well as the plain ones.
CASES = ["open", "open_creat", "open_dotdot", "open_relative", "openat", "openat_unknown_dir",
         "read", "write", "pread", "close", "close_unknown", "stat", "chdir", "stdio", "dir",
         "read_unknown_fd", "read_inherited_fd"]
BUDGET = 512  # bytes the tracer may add to a call's stack depth


@pytest.fixture
def stack_use(cprog):
    return cprog("stack_use.c", name="stack_use")


@pytest.fixture
def files(data_dir):
    (data_dir / "f").write_text("some bytes to read\n")
    (data_dir / "sub").mkdir()
    (data_dir / "inherited").write_text("from the parent\n")
    return data_dir


def _run(exe, alt: int, data_dir, tmp_path, traced: bool):
    """Both runs get the same inherited fd (open for reading, never seen opened by the tracer)."""
    fd = os.open(data_dir / "inherited", os.O_RDONLY)
    try:
        cmd = [exe, str(alt), data_dir, str(fd), *CASES]
        if traced:
            r = run_traced(cmd, tmp_path, check=False, pass_fds=(fd,))
        else:
            r = run_plain(cmd, pass_fds=(fd,))
    finally:
        os.close(fd)
    assert r.returncode == 0, f"{'traced' if traced else 'untraced'}: rc {r.returncode}; " \
                              f"stdout {r.stdout[-2000:]!r}; stderr {r.stderr[-2000:]!r}"
    depths = {}
    for line in r.stdout.splitlines():
        name, depth = line.split()
        depths[name] = int(depth)
    assert list(depths) == CASES, r.stdout
    return r, depths


def _table(plain: dict, traced: dict) -> str:
    return "\n".join(f"  {c:20} untraced {plain[c]:6} traced {traced[c]:6} (+{traced[c] - plain[c]})"
                     for c in CASES)


def test_tracer_adds_at_most_512_bytes_of_stack_to_any_call(stack_use, files, tmp_path):
    """On a 64 KiB alternate stack (nothing overflows; the kernel's signal frame takes 1-3 KiB
    of it, alike in both runs), each call's depth traced is at most its depth untraced + 512."""
    _, plain = _run(stack_use, 65536, files, tmp_path, traced=False)
    ts, traced = _run(stack_use, 65536, files, tmp_path, traced=True)
    print("\n" + _table(plain, traced))
    over = [c for c in CASES if traced[c] > plain[c] + BUDGET]
    assert not over, f"over budget: {over}\n{_table(plain, traced)}"
    # The calls were traced, those on fds the tracer had to learn inside the handler with
    # their files named.
    assert ts.count("read", fname=str(files / "inherited")) == 1
    assert ts.count("read", fname=str(files / "f")) >= 4
    assert ts.count("openat", fname=str(files / "f")) >= 4
    assert ts.count("open", fname=str(files / "f")) >= 6  # the relative and the ../ ones too


def test_every_call_fits_a_handler_on_an_8k_altstack(stack_use, files, tmp_path):
    """The same calls in a handler on an 8 KiB alternate stack (with a guard page below):
    none dies of a stack overflow traced."""
    p = run_plain([stack_use, "8192", files, "-1", "open"])
    if p.returncode != 0:
        pytest.skip(f"untraced, a handler's open overflows 8 KiB here (signal frame): {p}")
    _, plain = _run(stack_use, 8192, files, tmp_path, traced=False)
    _, traced = _run(stack_use, 8192, files, tmp_path, traced=True)
    assert all(traced[c] <= 8192 for c in CASES), _table(plain, traced)


def test_scratch_is_never_shared(cprog, data_dir, tmp_path):
    """200 threads (more than the pool has slots) resolve relative paths and learn unknown fds
    at once, interrupted every 100 us by a handler that does the same. Every event names its
    own file, and every one of them is there: the handler's too, wherever it landed (inside
    the tracer making a thread's state, taking a chunk, learning an fd)."""
    exe = cprog("scratch_stress.c", name="scratch_stress")
    (data_dir / "t").mkdir()
    # Each thread has two fd numbers of its own, far above those in use: under a hard limit
    # of 1024 fds, fewer threads.
    threads = 200 if resource.getrlimit(resource.RLIMIT_NOFILE)[1] >= 2048 else 100
    iters = 30
    ts = run_traced([exe, data_dir, str(threads), str(iters)], tmp_path)
    assert int(ts.stdout) > 0  # the handler ran
    mine = {str(data_dir / "t" / str(i)) for i in range(threads)}
    events = ts.events(under=data_dir)
    names = {e["fname"] for e in events}
    assert names <= mine | {str(data_dir), str(data_dir / "h")}, names - mine  # chdir: data_dir
    got = collections.Counter((e["name"], e["fname"]) for e in events if e["fname"] in mine)
    want = {"open": iters, "write": iters, "read": iters, "close": 2 * iters}
    wrong = {k: n for k, n in got.items() if n != want.get(k[0])}
    assert not wrong and len(got) == len(want) * threads, wrong
    runs = int(ts.stdout)
    h = collections.Counter(e["name"] for e in events if e["fname"] == str(data_dir / "h"))
    assert h == {"open": runs, "write": runs, "read": runs, "close": 2 * runs}, (runs, h)
