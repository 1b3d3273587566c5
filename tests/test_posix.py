"""POSIX calls from C programs and from Python: every event, its file, size, offset, ret and
errno, pinned one by one (tests/c/posix_calls.c, tests/c/at_calls.c)."""
from __future__ import annotations

import os
import sys


from tracing import fnv1a_hex, parse_report, run_plain

O_CREAT, O_WRONLY, O_RDWR, O_TRUNC, O_APPEND = os.O_CREAT, os.O_WRONLY, os.O_RDWR, os.O_TRUNC, os.O_APPEND
ENOENT, EBADF, EINVAL, EEXIST = 2, 9, 22, 17
AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH = 0x100, 0x1000

# (name, path relative to the folder, args without fhash) for tests/c/posix_calls.c
POSIX_CALLS = [
    ("open", "data.bin", dict(ret=3, flags=O_CREAT | O_WRONLY | O_TRUNC, mode=0o640)),
    ("write", "data.bin", dict(fd=3, size=4096, offset=0, ret=4096)),
    ("write", "data.bin", dict(fd=3, size=100, offset=4096, ret=100)),
    ("pwrite", "data.bin", dict(fd=3, size=10, offset=8000, ret=10)),
    ("writev", "data.bin", dict(fd=3, size=48, offset=4196, ret=48)),
    ("pwritev", "data.bin", dict(fd=3, size=48, offset=9000, ret=48)),
    ("fsync", "data.bin", dict(fd=3, ret=0)),
    ("ftruncate", "data.bin", dict(fd=3, size=9048, ret=0)),
    ("close", "data.bin", dict(fd=3, ret=0)),
    ("open", "data.bin", dict(ret=3, flags=0)),
    ("read", "data.bin", dict(fd=3, size=1000, offset=0, ret=1000)),
    ("lseek", "data.bin", dict(fd=3, ret=5000, flags=0)),
    ("read", "data.bin", dict(fd=3, size=8192, offset=5000, ret=4048)),
    ("read", "data.bin", dict(fd=3, size=10, offset=9048, ret=0)),
    ("pread", "data.bin", dict(fd=3, size=50, offset=100, ret=50)),
    ("lseek", "data.bin", dict(fd=3, ret=0, flags=0)),
    ("readv", "data.bin", dict(fd=3, size=48, offset=0, ret=48)),
    ("preadv", "data.bin", dict(fd=3, size=48, offset=200, ret=48)),
    ("lseek", "data.bin", dict(fd=3, ret=9038, flags=0)),
    ("read", "data.bin", dict(fd=3, size=100, offset=9038, ret=10)),
    ("fstat", "data.bin", dict(fd=3, ret=0)),
    ("write", "data.bin", dict(fd=3, size=1, offset=9048, ret=-1, errno=EBADF)),
    ("lseek", "data.bin", dict(fd=3, offset=5, ret=-1, errno=EINVAL, flags=12345)),
    ("close", "data.bin", dict(fd=3, ret=0)),
    ("open", "missing", dict(ret=-1, errno=ENOENT, flags=0)),
    ("open", "data.bin", dict(ret=3, flags=O_WRONLY | O_APPEND)),
    ("read", "data.bin", dict(fd=3, size=10, ret=-1, errno=EBADF)),  # O_APPEND: offset unknown
    ("write", "data.bin", dict(fd=3, size=2, ret=2)),
    ("close", "data.bin", dict(fd=3, ret=0)),
    ("stat", "data.bin", dict(ret=0)),
    ("stat", "missing", dict(ret=-1, errno=ENOENT)),
    ("lstat", "data.bin", dict(ret=0)),
    ("fstatat", "data.bin", dict(ret=0, flags=0)),
    ("statx", "data.bin", dict(ret=0, flags=0)),
    ("statx", "missing", dict(ret=-1, errno=ENOENT, flags=0)),
    ("access", "data.bin", dict(ret=0, mode=os.R_OK)),
    ("access", "missing", dict(ret=-1, errno=ENOENT, mode=os.F_OK)),
    ("mkdir", "sub", dict(ret=0, mode=0o755)),
    ("mkdir", "sub", dict(ret=-1, errno=EEXIST, mode=0o755)),
    ("rename", "data.bin", dict(ret=0)),  # fname2 sub/moved.bin, checked below
    ("truncate", "sub/moved.bin", dict(size=10, ret=0)),
    ("unlink", "sub/moved.bin", dict(ret=0)),
    ("unlink", "sub/moved.bin", dict(ret=-1, errno=ENOENT)),
    ("rmdir", "sub", dict(ret=0)),
    ("rmdir", "sub", dict(ret=-1, errno=ENOENT)),
]

# tests/c/at_calls.c: cwd- and dirfd-relative paths, dup'ed fds, mmap, directories.
AT_CALLS = [
    ("chdir", "", dict(ret=0)),
    ("open", "rel.txt", dict(ret=3, flags=O_CREAT | O_RDWR, mode=0o600)),
    ("write", "rel.txt", dict(fd=3, size=12, offset=0, ret=12)),
    ("open", "", dict(ret=4, flags=os.O_DIRECTORY)),
    ("mkdirat", "sub", dict(ret=0, mode=0o700)),
    ("openat", "sub/x.txt", dict(ret=5, flags=O_CREAT | O_WRONLY, mode=0o600)),  # "sub/../sub/./x.txt"
    ("close", "sub/x.txt", dict(fd=5, ret=0)),
    ("fstatat", "sub/x.txt", dict(ret=0, flags=AT_SYMLINK_NOFOLLOW)),
    ("unlinkat", "sub/x.txt", dict(ret=0, flags=0)),
    ("statx", "rel.txt", dict(ret=0, flags=0)),
    ("fstatat", "rel.txt", dict(fd=3, ret=0, flags=AT_EMPTY_PATH)),
    ("faccessat", "rel.txt", dict(ret=0, flags=0, mode=os.R_OK)),
    ("openat", "nope/x", dict(ret=-1, errno=ENOENT, flags=0)),
    ("dup", "rel.txt", dict(fd=3, fd2=5, ret=5)),
    ("write", "rel.txt", dict(fd=5, size=3, offset=12, ret=3)),   # the dup shares the offset
    ("dup2", "rel.txt", dict(fd=3, fd2=50, ret=50)),
    ("pread", "rel.txt", dict(fd=50, size=5, offset=6, ret=5)),
    ("fcntl", "rel.txt", dict(fd=3, fd2=60, ret=60, flags=0)),    # F_DUPFD
    ("read", "rel.txt", dict(fd=60, size=4, offset=15, ret=0)),
    ("close", "rel.txt", dict(fd=5, ret=0)),
    ("close", "rel.txt", dict(fd=50, ret=0)),
    ("close", "rel.txt", dict(fd=60, ret=0)),
    ("mmap", "rel.txt", dict(fd=3, size=4096, offset=0, ret=1, flags=1)),  # PROT_READ
    ("munmap", "rel.txt", dict(size=4096, ret=0)),                          # named from the map
    ("mmap", "rel.txt", dict(fd=3, size=4096, offset=3, ret=0, errno=EINVAL, flags=1)),
    ("close", "rel.txt", dict(fd=3, ret=0)),
    ("opendir", "", dict(ret=1)),
    *[("readdir", "", dict(fd=3, ret=1))] * 4,                      # . .. rel.txt sub
    ("readdir", "", dict(fd=3, ret=0)),                             # the end: NULL, no errno
    ("closedir", "", dict(fd=3, ret=0)),
    ("opendir", "nope", dict(ret=0, errno=ENOENT)),
    ("chdir", "sub", dict(ret=0)),
    ("open", "rel.txt", dict(ret=3, flags=0)),                       # "../rel.txt" from sub
    ("close", "rel.txt", dict(fd=3, ret=0)),
    ("fchdir", "", dict(fd=4, ret=0)),
    ("renameat", "rel.txt", dict(ret=0)),
    ("unlink", "sub/rel2.txt", dict(ret=0)),                         # relative to the fchdir'd cwd
    ("rmdir", "sub", dict(ret=0)),
    ("close", "", dict(fd=4, ret=0)),
]


def _path(d, rel):
    return str(d) if rel == "" else f"{d}/{rel}"


def _check_sequence(ts, d, expected):
    events = ts.events(pid=ts.pid)
    got = [(e["name"], e["fname"], {k: v for k, v in e["args"].items() if not k.startswith("fhash")})
           for e in events]
    want = [(n, _path(d, rel), args) for n, rel, args in expected]
    assert got == want
    for e in events:
        assert e["cat"] == "posix"
        assert e["args"]["fhash"] == fnv1a_hex(e["fname"])
        assert e["ph"] == "X" and e["tid"] == ts.pid and e["dur"] >= 0
    return events


def _check_report(ts, events, plain):
    """The program saw the same ret/errno traced and untraced, and the events say the same."""
    report = parse_report(ts.stdout)
    assert ts.stdout == plain.stdout  # ret, errno (777: untouched on success), fd numbers
    by_name = {}
    for name, ret, err in report:
        by_name.setdefault(name, []).append((ret, err))
    for name, seen in by_name.items():
        evs = [e for e in events if e["name"] == name]
        if len(evs) != len(seen):
            continue  # calls reported under another name (opendir, mmap) are checked in the table
        for e, (ret, err) in zip(evs, seen):
            assert e["args"]["ret"] == ret, (name, e, ret)
            assert e["args"].get("errno", 777) == err, (name, e, err)


def test_posix_calls_exact(tmp_path, cprog, trace, data_dir):
    exe = cprog("posix_calls.c")
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = run_plain([exe, plain_dir])
    assert plain.returncode == 0
    # a long flush interval: the trace file's fd opens only at exit and does not shift the
    # program's fd numbers
    ts = trace([exe, data_dir], include=[data_dir], flush_ms=60000)
    events = _check_sequence(ts, data_dir, POSIX_CALLS)
    assert ts.stdout == plain.stdout
    _check_report(ts, events, plain)
    (rename,) = [e for e in events if e["name"] == "rename"]
    assert rename["fname2"] == f"{data_dir}/sub/moved.bin"
    assert rename["args"]["fhash2"] == fnv1a_hex(f"{data_dir}/sub/moved.bin")
    assert ts.counts(pid=ts.pid) == {
        "open": 4, "write": 4, "pwrite": 1, "writev": 1, "pwritev": 1, "fsync": 1, "ftruncate": 1,
        "close": 3, "read": 5, "lseek": 4, "pread": 1, "readv": 1, "preadv": 1, "fstat": 1,
        "stat": 2, "lstat": 1, "fstatat": 1, "statx": 2, "access": 2, "mkdir": 2, "rename": 1,
        "truncate": 1, "unlink": 2, "rmdir": 2}
    # failing calls carry errno, the others do not
    assert sum("errno" in e["args"] for e in events) == 10
    assert ts.files[0].end == {"events": len(ts.files[0].records) - 1, "reason": "exit"}


def test_at_calls_relative_paths_dup_mmap_dirs(tmp_path, cprog, trace, data_dir):
    exe = cprog("at_calls.c")
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = run_plain([exe, plain_dir])
    assert plain.returncode == 0
    ts = trace([exe, data_dir], include=[data_dir], flush_ms=60000)
    events = _check_sequence(ts, data_dir, AT_CALLS)
    assert ts.stdout == plain.stdout
    _check_report(ts, events, plain)
    assert "entries 4 777" in ts.stdout
    (ren,) = [e for e in events if e["name"] == "renameat"]
    assert ren["fname2"] == f"{data_dir}/sub/rel2.txt"
    # the anonymous map is memory, not I/O
    assert ts.count(["mmap", "munmap"]) == 3


def test_lseek_negative_offset_is_recorded(cprog, trace, data_dir):
    exe = cprog(r"""
#include <fcntl.h>
#include <unistd.h>
int main(int argc, char** argv) {
  char p[4096]; snprintf(p, sizeof p, "%s/f", argv[1]);
  int fd = open(p, O_CREAT | O_RDWR, 0600);
  write(fd, "0123456789abcdef", 16);
  lseek(fd, -10, SEEK_END);
  lseek(fd, -2, SEEK_CUR);
  close(fd);
  return 0;
}
""".replace("#include <fcntl.h>", "#include <fcntl.h>\n#include <stdio.h>"), name="negseek")
    ts = trace([exe, data_dir], include=[data_dir])
    seeks = ts.events(name="lseek")
    assert [(e["args"]["ret"], e["args"]["flags"]) for e in seeks] == [(6, 2), (4, 1)]
    assert [e["args"].get("offset") for e in seeks] == [-10, -2]


# -- Python ---------------------------------------------------------------------------------


def test_python_os_calls(trace, data_dir):
    src = data_dir / "in.bin"
    src.write_bytes(b"x" * 10000)
    code = f"""
import os
fd = os.open({str(src)!r}, os.O_RDONLY)
assert len(os.read(fd, 4000)) == 4000
assert len(os.read(fd, 8000)) == 6000
assert os.read(fd, 10) == b''
assert len(os.pread(fd, 100, 9950)) == 50
os.lseek(fd, 123, os.SEEK_SET)
assert len(os.read(fd, 7)) == 7
os.close(fd)
os.stat({str(src)!r})
try:
    os.open({str(data_dir / 'missing')!r}, os.O_RDONLY)
except FileNotFoundError as e:
    assert e.errno == 2
else:
    raise SystemExit('no error')
"""
    ts = trace([sys.executable, "-I", "-c", code], include=[data_dir])
    got = [(e["name"], e["fname"], {k: v for k, v in e["args"].items() if k != "fhash"})
           for e in ts.events()]
    p, m = str(src), str(data_dir / "missing")
    cloexec = os.O_CLOEXEC  # Python opens every fd non-inheritable
    assert got == [
        ("open64", p, dict(ret=3, flags=cloexec)),
        ("read", p, dict(fd=3, size=4000, offset=0, ret=4000)),
        ("read", p, dict(fd=3, size=8000, offset=4000, ret=6000)),
        ("read", p, dict(fd=3, size=10, offset=10000, ret=0)),
        ("pread64", p, dict(fd=3, size=100, offset=9950, ret=50)),
        ("lseek64", p, dict(fd=3, ret=123, flags=0)),
        ("read", p, dict(fd=3, size=7, offset=123, ret=7)),
        ("close", p, dict(fd=3, ret=0)),
        ("stat64", p, dict(ret=0)),
        ("open64", m, dict(ret=-1, errno=ENOENT, flags=cloexec)),
    ]


def test_python_open_read_write(trace, data_dir):
    src, dst = data_dir / "in.bin", data_dir / "out.txt"
    src.write_bytes(b"y" * 10000)
    code = f"""
with open({str(src)!r}, 'rb') as f:
    assert len(f.read()) == 10000
with open({str(dst)!r}, 'w') as f:
    f.write('hello\\n' * 3)
with open({str(src)!r}, 'rb', buffering=0) as f:
    f.seek(500)
    assert len(f.read(300)) == 300
"""
    ts = trace([sys.executable, "-I", "-c", code], include=[data_dir])
    reads = ts.events(name="read", fname=src)
    # read() of a whole file: one read of size+1 at 0, then the empty read at the end
    assert [(e["args"]["size"], e["args"]["offset"], e["args"]["ret"]) for e in reads] == [
        (10001, 0, 10000), (1, 10000, 0), (300, 500, 300)]
    (w,) = ts.events(name="write", fname=dst)
    assert (w["args"]["size"], w["args"]["offset"], w["args"]["ret"]) == (18, 0, 18)
    (o,) = ts.events(name="open64", fname=dst)
    assert o["args"]["flags"] == os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    assert o["args"]["mode"] == 0o666
    assert ts.count("open64", fname=src) == 2
    assert ts.count("close", fname=src) == 2 and ts.count("close", fname=dst) == 1
    if sys.version_info[:2] == (3, 11):  # what io.open itself asks for, in 3.11
        assert ts.counts(fname=src) == {"open64": 2, "fstat64": 3, "lseek64": 3, "read": 3,
                                        "close": 2}


def test_inherited_fd_offsets_start_where_the_parent_left_them(cprog, trace, data_dir):
    # stdin redirected from a file the shell already read 3 bytes of: the tracer learns fd 0
    # from /proc/self/fd before the first read, so that read is at offset 3, not after itself
    exe = cprog(r"""
#include <unistd.h>
int main(void) { char b[16]; read(0, b, 5); read(0, b, 5); lseek(0, 1, SEEK_SET); read(0, b, 2); return 0; }
""", name="rd_stdin")
    src = data_dir / "in.txt"
    src.write_bytes(b"0123456789abcdef")
    fd = os.open(src, os.O_RDONLY)
    try:
        assert os.read(fd, 3) == b"012"
        ts = trace([exe], include=[data_dir], stdin=fd)
    finally:
        os.close(fd)
    assert ts.counts(fname=str(src)) == {"read": 3, "lseek": 1}
    reads = [(e["args"]["offset"], e["args"]["ret"]) for e in ts.events(name="read", fname=str(src))]
    assert reads == [(3, 5), (8, 5), (1, 2)]


def test_errno_of_successful_calls_is_the_programs(cprog, trace, data_dir, tmp_path):
    # The tracer looks unknown fds up in /proc/self/fd before a call (lseek on a pipe fails
    # with ESPIPE there): a call that succeeds must still leave errno as the program set it
    # (fgets at EOF, readdir at the end: programs tell the end from an error by errno), and
    # main starts with errno 0. Same output traced and untraced, and every call recorded.
    exe = cprog("errno_kept.c", name="errno_kept")
    plain_dir, traced_dir = tmp_path / "plain", data_dir
    plain_dir.mkdir()
    plain = run_plain([exe, plain_dir], input="abc\n")
    assert plain.returncode == 0 and plain.stdout.startswith("main 0\nfgets 1 0\nfgets-eof 0 0\n")
    ts = trace([exe, traced_dir], input="abc\n")
    assert ts.stdout == plain.stdout
    f = str(traced_dir / "f")
    assert ts.counts(fname=f) == {"open": 1, "pwrite": 1, "lseek": 1, "read": 1, "close": 1,
                                  "fopen": 1, "fread": 1, "fclose": 1}
    assert [e["args"]["ret"] for e in ts.events(name="read", fname=f)] == [4]
    pipe_reads = [e["args"]["ret"] for e in ts.events(name="read")
                  if (e.get("fname") or "").startswith("pipe:")]
    assert pipe_reads == [2, 0]
