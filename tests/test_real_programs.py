"""`iotrace run` over programs nobody here wrote (tar, cp -r, gzip, python), checked against
`strace -f` of the very same run: for the files under the included folder, the tracer records
as many open/read/write/stat/close (and copy_file_range) calls as the kernel saw syscalls.

strace watches the traced process itself (`strace -E LD_PRELOAD=...`), so both views are of
one execution.  Where a libc call and the syscalls legitimately differ, `explain()` says why
and by how much; every other difference is a failure.
"""
from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys

import pytest

from tracing import PRELOAD, TraceSet

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")

# traced libc calls -> the syscall group they end in
TRACE_GROUPS = {
    "open": {"open", "open64", "openat", "openat64", "creat", "creat64", "__open_2", "__open64_2",
             "__openat_2", "__openat64_2", "fopen", "fopen64", "freopen", "freopen64", "opendir"},
    "read": {"read", "pread", "pread64", "readv", "preadv", "preadv64", "preadv2"},
    "write": {"write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev64", "pwritev2"},
    "stat": {"stat", "lstat", "fstat", "fstatat", "statx", "stat64", "lstat64", "fstat64",
             "fstatat64", "__xstat", "__lxstat", "__fxstat", "__fxstatat", "__xstat64",
             "__lxstat64", "__fxstat64", "__fxstatat64"},
    "close": {"close", "fclose", "closedir"},
    "copy": {"copy_file_range"},
}
STRACE_GROUPS = {
    "open": {"open", "openat", "creat", "openat2"},
    "read": {"read", "pread64", "readv", "preadv", "preadv2"},
    "write": {"write", "pwrite64", "writev", "pwritev", "pwritev2"},
    "stat": {"stat", "lstat", "fstat", "newfstatat", "statx"},
    "close": {"close"},
    "copy": {"copy_file_range"},
}
SYSCALLS = sorted(set().union(*STRACE_GROUPS.values()))
PATH_ARG_CALLS = {"open", "openat", "creat", "openat2", "stat", "lstat", "newfstatat", "statx"}

LINE = re.compile(r"^(\d+)\s+(\w+)\((.*)$")
FD = re.compile(r"(-?\d+|AT_FDCWD)<([^>]*)>")
STR = re.compile(r'(?:(?:-?\d+|AT_FDCWD)(?:<[^>]*>)?, )?"([^"]*)"')
RET_FD = re.compile(r"= (\d+)<")


def _under(p, folder):
    return p is not None and (p == folder or p.startswith(folder + "/"))


def parse_strace(path):
    """[(pid, syscall, path, args text, line)] from `strace -f -y` output (a call split by
    another process's is counted on its `<unfinished ...>` line)."""
    out = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            pid, name, rest = int(m.group(1)), m.group(2), m.group(3)
            fd = FD.match(rest)
            p = None
            s = STR.match(rest) if name in PATH_ARG_CALLS else None
            if s:
                rel = s.group(1)
                if rel.startswith("/"):
                    p = os.path.normpath(rel)
                elif fd:  # relative (or "" with AT_EMPTY_PATH): against the dirfd's path
                    p = os.path.normpath(os.path.join(fd.group(2), rel)) if rel else fd.group(2)
            elif fd:
                p = fd.group(2)
            out.append((pid, name, p, rest, line))
    return out


def strace_and_trace(tmp_path, folder, cmd, cwd=None):
    trace_dir, log = tmp_path / "trace", tmp_path / "strace.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
    argv = ["strace", "-f", "-qq", "-y", "-o", str(log), "-e", "trace=" + ",".join(SYSCALLS),
            "-E", f"LD_PRELOAD={PRELOAD}", "-E", f"IOTRACE_DIR={trace_dir}",
            "-E", f"IOTRACE_INCLUDE={folder}", *map(str, cmd)]
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    calls = [c for c in parse_strace(log) if _under(c[2], str(folder))]
    return TraceSet.load(trace_dir), calls


def group_counts(names, groups):
    c = collections.Counter()
    for n in names:
        for g, members in groups.items():
            if n in members:
                c[g] += 1
    return c


def explain(ts, calls, folder):
    """What the syscalls show that no libc call of the program asked for, by group, with why.

    Returns ({group: n}, [reasons]); the caller checks syscalls == traced calls + n.
    """
    extra, why = collections.Counter(), []
    dirs = [e for e in ts.events(name={"opendir", "fdopendir"}, under=folder) if e["args"]["ret"] == 1]
    if dirs:
        extra["stat"] += len(dirs)
        why.append(f"{len(dirs)} x opendir/fdopendir: glibc fstat()s the directory fd inside "
                   "(its hidden __fstat64), one newfstatat syscall each, no public stat call")
    # glibc's fchmodat(..., AT_SYMLINK_NOFOLLOW) (tar restoring directory modes) works by
    # openat(O_PATH) + fstatat(fd, "") + chmod("/proc/self/fd/N") + close, all inside glibc
    opath = [(pid, int(RET_FD.search(line).group(1))) for pid, n, _, rest, line in calls
             if n == "openat" and "O_PATH" in rest and RET_FD.search(line)]
    if opath:
        extra["open"] += len(opath)
        extra["stat"] += len(opath)
        extra["close"] += len(opath)
        why.append(f"{len(opath)} x glibc fchmodat(AT_SYMLINK_NOFOLLOW): openat(O_PATH) + "
                   "newfstatat + close inside glibc; fchmodat itself is not an I/O call we trace")
    return extra, why


def check_same(ts, calls, folder, expect_groups):
    traced = group_counts((e["name"] for e in ts.events(under=folder)), TRACE_GROUPS)
    seen = group_counts((n for _, n, _, _, _ in calls), STRACE_GROUPS)
    extra, why = explain(ts, calls, folder)
    expected = traced + extra
    assert {g: seen[g] for g in TRACE_GROUPS} == {g: expected[g] for g in TRACE_GROUPS}, why
    # the data calls match file by file too
    for g in ("read", "write", "copy"):
        by_file_trace = collections.Counter(e["fname"] for e in ts.events(under=folder)
                                            if e["name"] in TRACE_GROUPS[g])
        by_file_strace = collections.Counter(p for _, n, p, _, _ in calls if n in STRACE_GROUPS[g])
        assert by_file_trace == by_file_strace, g
    # and every group the test is about was exercised
    for g in expect_groups:
        assert seen[g] > 0, g
    return seen, traced, why


@pytest.fixture
def tree(tmp_path):
    folder = tmp_path / "data"
    (folder / "src" / "sub").mkdir(parents=True)
    (folder / "src" / "a.txt").write_text("hello\n" * 1000)
    (folder / "src" / "b.bin").write_bytes(bytes(range(256)) * 300)
    (folder / "src" / "sub" / "c.txt").write_text("c" * 123)
    return folder


def test_tar_create(tmp_path, tree):
    ts, calls = strace_and_trace(tmp_path, tree, ["tar", "-cf", tree / "archive.tar", "-C", tree, "src"])
    seen, traced, why = check_same(ts, calls, str(tree), ["open", "read", "write", "stat", "close"])
    assert len(why) == 1  # tar walks directories with fdopendir
    assert ts.count("fdopendir", under=tree) == 2


def test_tar_extract(tmp_path, tree):
    subprocess.run(["tar", "-cf", tree / "archive.tar", "-C", tree, "src"], check=True)
    (tree / "x").mkdir()
    ts, calls = strace_and_trace(tmp_path, tree, ["tar", "-xf", tree / "archive.tar", "-C", tree / "x"])
    seen, traced, why = check_same(ts, calls, str(tree), ["open", "read", "write", "stat", "close"])
    assert any("fchmodat" in w for w in why)  # the two extracted directories
    assert (tree / "x" / "src" / "sub" / "c.txt").read_text() == "c" * 123


def test_cp_recursive(tmp_path, tree):
    ts, calls = strace_and_trace(tmp_path, tree, ["cp", "-r", tree / "src", tree / "copy"])
    seen, traced, why = check_same(ts, calls, str(tree), ["open", "stat", "close"])
    assert ts.count("opendir", under=tree) == 2
    # cp moves the data with copy_file_range when it can (no read/write syscalls then)
    assert seen["copy"] + seen["read"] > 0
    assert (tree / "copy" / "b.bin").read_bytes() == (tree / "src" / "b.bin").read_bytes()


def test_gzip(tmp_path, tree):
    ts, calls = strace_and_trace(tmp_path, tree, ["gzip", "-k", tree / "src" / "b.bin"])
    seen, traced, why = check_same(ts, calls, str(tree), ["open", "read", "write", "stat", "close"])
    assert why == []  # gzip: one libc call per syscall
    reads = ts.events(name="read", fname=tree / "src" / "b.bin")
    assert sum(e["args"]["ret"] for e in reads) == 256 * 300


def test_python_reading_files(tmp_path, tree):
    code = (f"import os\nd = {str(tree / 'src')!r}\n"
            "for n in sorted(os.listdir(d)):\n"
            "    p = os.path.join(d, n)\n"
            "    if os.path.isfile(p):\n"
            "        open(p, 'rb').read()\n")
    ts, calls = strace_and_trace(tmp_path, tree, [sys.executable, "-I", "-c", code], cwd=tmp_path)
    seen, traced, why = check_same(ts, calls, str(tree), ["open", "read", "stat", "close"])
    assert seen["read"] == 4  # two files: the read and the empty read at the end
