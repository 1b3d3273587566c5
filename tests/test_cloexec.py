"""fds across exec: what the exec'd image's trace says about the fds it inherited, the ones the
kernel closed (O_CLOEXEC, F_SETFD FD_CLOEXEC, dup3 O_CLOEXEC) and a freed number opened again.

The tracer keeps no fd bookkeeping across exec (csrc/core/fd_table.h): the new image starts with an
empty table and learns an inherited fd from /proc/self/fd the first time it is used.  An fd the
kernel closed has no /proc entry: a call on it names no file (no `fhash`, docs/trace-format.md)
and is recorded only when no IOTRACE_INCLUDE is set (docs/configuration.md: with include,
"calls on no file ... are left out").  Each image writes its own file, same pid: the first has
`role` `main` and ends with reason `exec`, the next has `role` `exec`.
"""
from __future__ import annotations

import os
import socket

import pytest

from tracing import ZST_SUFFIX, fnv1a_hex, parse_report, run_plain

EBADF, ENOENT = 9, 2
O_CLOEXEC = os.O_CLOEXEC
F_SETFD = 2
HOST = socket.gethostname().split(".")[0]

# cloexec_before DIR MODE NEXT
BEFORE = r"""
/* Opens DIR/A (its fd is to be closed by the exec) and DIR/B (inherited), reads a little of
 * each, then execv(NEXT, {NEXT, DIR, fdB, fdGone, fdAlive}); MODE says how A's fd gets
 * close-on-exec:
 *   oflag  open(O_CLOEXEC)
 *   setfd  a plain open, then fcntl(F_SETFD, FD_CLOEXEC)
 *   dup3   a plain open (kept across the exec: fdAlive), dup3'ed with O_CLOEXEC onto fdB + 1
 * When the exec fails, reads 3 more bytes of A through fdGone and exits 1. */
#include <fcntl.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char** argv) {
  snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  const char* mode = argv[2];
  char buf[64];
  int gone = -1, alive = -1;
  if (!strcmp(mode, "oflag")) {
    gone = CALL("openA", open(P("A"), O_RDONLY | O_CLOEXEC));
  } else if (!strcmp(mode, "setfd")) {
    gone = CALL("openA", open(P("A"), O_RDONLY));
    CALL("setfd", fcntl(gone, F_SETFD, FD_CLOEXEC));
  } else {
    alive = CALL("openA", open(P("A"), O_RDONLY));
  }
  int b = CALL("openB", open(P("B"), O_RDONLY));
  if (alive >= 0) gone = CALL("dup3", dup3(alive, b + 1, O_CLOEXEC));
  CALL("readA", read(gone, buf, 3));
  CALL("readB", read(b, buf, 5));
  char sb[16], sg[16], sa[16];
  snprintf(sb, sizeof sb, "%d", b);
  snprintf(sg, sizeof sg, "%d", gone);
  snprintf(sa, sizeof sa, "%d", alive);
  char* args[] = {argv[3], argv[1], sb, sg, sa, NULL};
  execv(argv[3], args);
  say(1, "execfailed %d %d\n", -1, errno);
  CALL("readA", read(gone, buf, 3));
  return 1;
}
"""

# cloexec_after DIR FDB FDGONE FDALIVE
AFTER = r"""
/* The exec'd image: reads the inherited FDB, reads FDGONE (closed by the exec: EBADF), opens
 * DIR/C (which gets FDGONE's number back) and reads it twice, reads FDALIVE unless it is -1,
 * closes what it has. Exits 2 when C did not get FDGONE's number. */
#include <fcntl.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char** argv) {
  snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  int b = atoi(argv[2]), gone = atoi(argv[3]), alive = atoi(argv[4]);
  char buf[64];
  CALL("readB", read(b, buf, 7));
  CALL("readGone", read(gone, buf, 4));
  int c = CALL("openC", open(P("C"), O_RDONLY));
  CALL("readC", read(c, buf, 6));
  CALL("readC", read(c, buf, 6));
  if (alive >= 0) CALL("readA", read(alive, buf, 4));
  CALL("closeC", close(c));
  CALL("closeB", close(b));
  if (alive >= 0) CALL("closeA", close(alive));
  return c == gone ? 0 : 2;
}
"""

MODES = ["oflag", "setfd", "dup3"]


@pytest.fixture
def progs(cprog):
    return cprog(BEFORE, name="cloexec_before"), cprog(AFTER, name="cloexec_after")


def _make_files(d):
    for n in "ABC":
        (d / n).write_bytes(n.lower().encode() * 64)
    (d / "plain").mkdir(exist_ok=True)
    for n in "ABC":
        (d / "plain" / n).write_bytes(n.lower().encode() * 64)


def _fds(stdout):
    """{label: ret} of the program's report (the last one of a label)."""
    return {label: ret for label, ret, _ in parse_report(stdout)}


def _expected(mode, d, after, fd):
    """(first image, second image): [(name, fname, args without fhash)] in order."""
    A, B, C = f"{d}/A", f"{d}/B", f"{d}/C"
    a = fd["openA"]
    b = fd["openB"]
    g = fd["dup3"] if mode == "dup3" else a  # the fd the exec closes
    first = [("open", A, dict(ret=a, flags=O_CLOEXEC if mode == "oflag" else 0))]
    if mode == "setfd":
        first.append(("fcntl", A, dict(fd=a, ret=0, flags=F_SETFD)))
    first.append(("open", B, dict(ret=b, flags=0)))
    if mode == "dup3":
        first.append(("dup3", A, dict(fd=a, fd2=g, ret=g, flags=O_CLOEXEC)))
    first += [
        ("read", A, dict(fd=g, size=3, offset=0, ret=3)),
        ("read", B, dict(fd=b, size=5, offset=0, ret=5)),
        ("execv", after, {}),  # no ret: it did not come back
    ]
    second = [
        ("read", B, dict(fd=b, size=7, offset=5, ret=7)),  # learned before the read
        ("read", None, dict(fd=g, size=4, ret=-1, errno=EBADF)),   # no file, no offset
        ("open", C, dict(ret=g, flags=0)),                          # A's freed number
        ("read", C, dict(fd=g, size=6, offset=0, ret=6)),
        ("read", C, dict(fd=g, size=6, offset=6, ret=6)),
    ]
    if mode == "dup3":
        second.append(("read", A, dict(fd=a, size=4, offset=3, ret=4)))  # read 3 through the dup
    second += [("close", C, dict(fd=g, ret=0)), ("close", B, dict(fd=b, ret=0))]
    if mode == "dup3":
        second.append(("close", A, dict(fd=a, ret=0)))
    return first, second


def _got(tf):
    """The file's events as (name, fname, args without fhash)."""
    return [(e["name"], e["fname"], {k: v for k, v in e["args"].items() if not k.startswith("fhash")})
            for e in tf.events()]


def _run(trace, progs, data_dir, mode, **kw):
    before, after = progs
    _make_files(data_dir)
    # a long flush interval: the trace file's fd is never open in the program's fd space
    return trace([before, data_dir, mode, after], flush_ms=60000, **kw)


@pytest.mark.parametrize("mode", MODES)
def test_cloexec_fd_is_gone_and_its_number_reused_after_exec(mode, progs, trace, data_dir):
    before, after = progs
    ts = _run(trace, progs, data_dir, mode)
    assert ts.returncode == 0, ts.stdout
    fd = _fds(ts.stdout)
    a, b = fd["openA"], fd["openB"]
    g = fd["dup3"] if mode == "dup3" else a
    assert len({a, b, g}) == (3 if mode == "dup3" else 2)
    # the program saw the same fds, rets and errnos as without the tracer
    plain = run_plain([before, data_dir / "plain", mode, after])
    assert plain.returncode == 0 and ts.stdout == plain.stdout
    assert ("readGone", -1, EBADF) in parse_report(ts.stdout)
    assert fd["openC"] == g  # the kernel gave C the number the exec freed

    # one pid, two images, one file each
    assert ts.pids == [ts.pid]
    first, second = ts.files_of(ts.pid)
    assert len(ts.files) == 2
    assert os.path.basename(first.path) == f"cloexec_before-{HOST}-{ts.pid}{ZST_SUFFIX}"
    assert os.path.basename(second.path) == f"cloexec_after-{HOST}-{ts.pid}{ZST_SUFFIX}"
    assert first.pid == second.pid == ts.pid
    assert first.header["role"] == "main" and second.header["role"] == "exec"
    assert first.header["ppid"] == second.header["ppid"] == os.getpid()
    assert first.header["exe"] == os.path.realpath(before)
    assert second.header["exe"] == os.path.realpath(after)
    assert second.header["cmdline"] == [after, str(data_dir), str(b), str(g), str(a if mode == "dup3" else -1)]
    assert "parent_pid" not in first.header and "parent_pid" not in second.header
    assert first.closed and second.closed and not first.bad_lines and not second.bad_lines
    assert first.end == {"events": len(first.records) - 1, "reason": "exec"}
    assert second.end == {"events": len(second.records) - 1, "reason": "exit"}
    for tf in (first, second):
        for e in tf.events():
            assert e["pid"] == ts.pid and e["tid"] == ts.pid
            assert e["cat"] == ("process" if e["name"] == "execv" else "posix")
            if "fhash" in e["args"]:
                assert e["args"]["fhash"] == fnv1a_hex(e["fname"])
    # the second image starts after the first one's last event
    assert max(e["ts"] for e in first.events()) <= second.header["mono_ns"] / 1000
    assert second.header["mono_ns"] / 1000 <= min(e["ts"] for e in second.events())

    # every event of each image, in order
    want1, want2 = _expected(mode, data_dir, after, fd)
    assert _got(first) == want1
    assert _got(second) == want2

    # the closed fd: no name, no fhash, no offset; the new image never names A through it
    (bad,) = [e for e in second.events() if e["fname"] is None]
    assert bad["name"] == "read" and bad["args"] == {"fd": g, "size": 4, "ret": -1, "errno": EBADF}
    assert [e["fname"] for e in second.events() if e["args"].get("fd") == g] == [
        None, f"{data_dir}/C", f"{data_dir}/C", f"{data_dir}/C"]
    if mode == "dup3":  # A is still open in the new image, but only through its own fd
        assert second.fh == {fnv1a_hex(f"{data_dir}/{n}"): f"{data_dir}/{n}" for n in "BCA"}
    else:
        assert second.fh == {fnv1a_hex(f"{data_dir}/{n}"): f"{data_dir}/{n}" for n in "BC"}

    # counts per call, per file and per image
    A, B, C = (f"{data_dir}/{n}" for n in "ABC")
    if mode == "oflag":
        assert ts.counts(fname=A) == {"open": 1, "read": 1}
    elif mode == "setfd":
        assert ts.counts(fname=A) == {"open": 1, "fcntl": 1, "read": 1}
    else:
        assert ts.counts(fname=A) == {"open": 1, "dup3": 1, "read": 2, "close": 1}
        assert ts.counts(fname=A, pid=ts.pid) == ts.counts(fname=A)
    assert ts.counts(fname=B) == {"open": 1, "read": 2, "close": 1}
    assert ts.counts(fname=C) == {"open": 1, "read": 2, "close": 1}
    assert ts.counts(fname=after) == {"execv": 1}
    assert [e["name"] for e in ts.events() if e["fname"] is None] == ["read"]
    assert ts.count() == len(want1) + len(want2)


@pytest.mark.parametrize("mode", MODES)
def test_closed_fd_read_is_left_out_with_include(mode, progs, trace, data_dir):
    """With IOTRACE_INCLUDE the EBADF read names no file and is not recorded; the program
    outside the folder takes the execv event with it; the rest is as without include."""
    ts = _run(trace, progs, data_dir, mode, include=[data_dir])
    fd = _fds(ts.stdout)
    assert ("readGone", -1, EBADF) in parse_report(ts.stdout)
    first, second = ts.files_of(ts.pid)
    want1, want2 = _expected(mode, data_dir, progs[1], fd)
    want1 = [w for w in want1 if w[0] != "execv"]
    want2 = [w for w in want2 if w[1] is not None]
    assert _got(first) == want1
    assert _got(second) == want2
    assert not [e for e in ts.events() if e["fname"] is None] and ts.count("execv") == 0
    assert [f.end["reason"] for f in (first, second)] == ["exec", "exit"]
    assert [f.header["role"] for f in (first, second)] == ["main", "exec"]


def test_failed_exec_keeps_the_cloexec_fd_and_its_name(progs, trace, data_dir):
    """execv comes back (ENOENT): no fd was closed, the tracer still knows A's fd. The first
    file ends with reason exec all the same; the failure and what follows go to a new file."""
    before, _ = progs
    _make_files(data_dir)
    missing = data_dir / "missing"
    ts = trace([before, data_dir, "oflag", missing], include=[data_dir], flush_ms=60000,
               check=False)
    assert ts.returncode == 1
    report = parse_report(ts.stdout)
    assert report[-2:] == [("execfailed", -1, ENOENT), ("readA", 3, 777)]
    a, b = _fds(ts.stdout)["openA"], _fds(ts.stdout)["openB"]
    A, B = f"{data_dir}/A", f"{data_dir}/B"
    assert ts.pids == [ts.pid]
    # by name: both headers carry the process's start time (mono_ns), so files_of cannot
    # order these two
    by_name = {os.path.basename(f.path): f for f in ts.files_of(ts.pid)}
    first = by_name.pop(f"cloexec_before-{HOST}-{ts.pid}{ZST_SUFFIX}")
    second = by_name.pop(f"cloexec_before-{HOST}-{ts.pid}-1{ZST_SUFFIX}")
    assert not by_name
    assert first.end["reason"] == "exec" and second.end["reason"] == "exit"
    # each file's end counts its own lines (the second's counted on from the first's once)
    assert [f.end["events"] for f in (first, second)] == [len(f.records) - 1 for f in (first, second)]
    assert [f.header["role"] for f in (first, second)] == ["main", "main"]
    want1 = [
        ("open", A, dict(ret=a, flags=O_CLOEXEC)),
        ("open", B, dict(ret=b, flags=0)),
        ("read", A, dict(fd=a, size=3, offset=0, ret=3)),
        ("read", B, dict(fd=b, size=5, offset=0, ret=5)),
        ("execv", str(missing), {}),
    ]
    want2 = [
        ("execv", str(missing), dict(ret=-1, errno=ENOENT)),
        ("read", A, dict(fd=a, size=3, offset=3, ret=3)),  # tracked on, not learned again
    ]
    assert _got(first) == want1
    assert _got(second) == want2
    assert ts.counts(fname=A) == {"open": 1, "read": 2}
