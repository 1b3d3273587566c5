"""IOTRACE_INCLUDE / IOTRACE_EXCLUDE and the default exclusions (/proc /sys /dev, *.so*,
*.pyc): which files' events are written, by whole path components."""
from __future__ import annotations

import collections

import pytest

# open(path, O_RDONLY) + read 1 byte + close, for each argument; then a pipe write/close
FILT = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char** argv) {
  char c;
  for (int i = 1; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY);
    read(fd, &c, 1);
    close(fd);
  }
  int p[2];
  pipe(p);
  write(p[1], "x", 1);
  close(p[1]);
  close(p[0]);
  return 0;
}
"""


@pytest.fixture
def files(tmp_path):
    names = ["data/a", "data/sub/b", "data2/c", "data/skip/d", "data/libx.so", "data/liby.so.1.2",
             "data/m.pyc", "data/notso.sox", "other/e"]
    out = {}
    for n in names:
        p = tmp_path / n
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("z")
        out[n] = str(p)
    return out


def _per_file(ts):
    """{path: [call names]} of the events written."""
    got = collections.defaultdict(list)
    for e in ts.events():
        got[e["fname"]].append(e["name"])
    return dict(got)


def _run(cprog, trace, files, **kw):
    exe = cprog(FILT, name="filt")
    return trace([exe, *files.values(), "/proc/self/status", "/dev/null"], **kw)


def test_include_is_by_path_component(cprog, trace, files, tmp_path):
    ts = _run(cprog, trace, files, include=[tmp_path / "data"])
    got = _per_file(ts)
    three = ["open", "read", "close"]
    assert got == {files[n]: three for n in ("data/a", "data/sub/b", "data/skip/d", "data/notso.sox")}
    # data2/c shares the prefix "data" but not the folder; pipes name no included file


def test_include_trailing_slash_and_several(cprog, trace, files, tmp_path):
    ts = _run(cprog, trace, files, env={"IOTRACE_INCLUDE": f"{tmp_path}/data2/:{tmp_path}/other"})
    assert set(_per_file(ts)) == {files["data2/c"], files["other/e"]}
    assert ts.count("read") == 2 and ts.count("open") == 2 and ts.count("close") == 2


def test_exclude(cprog, trace, files, tmp_path):
    ts = _run(cprog, trace, files, include=[tmp_path], exclude=[tmp_path / "data/skip", tmp_path / "other"])
    got = _per_file(ts)
    assert set(got) == {files[n] for n in ("data/a", "data/sub/b", "data2/c", "data/notso.sox")}
    assert all(v == ["open", "read", "close"] for v in got.values())


def test_default_exclusions_and_unnamed_fds(cprog, trace, files, tmp_path):
    """No include: everything but /proc, /dev, shared libraries and .pyc; the pipe is named
    pipe:[inode] and recorded."""
    ts = _run(cprog, trace, files)
    got = _per_file(ts)
    mine = {p: v for p, v in got.items() if p and p.startswith(str(tmp_path))}
    assert set(mine) == {files[n] for n in ("data/a", "data/sub/b", "data2/c", "data/skip/d",
                                            "data/notso.sox", "other/e")}
    assert not any(p.startswith(("/proc", "/dev", "/sys")) for p in got if p)
    assert not any(p.endswith((".so", ".pyc")) or ".so." in p for p in got if p)
    pipes = [p for p in got if p and p.startswith("pipe:[")]
    assert len(pipes) == 1
    # the write end is learned at the write; the read end is named at its close (before the call)
    assert got[pipes[0]][:2] == ["write", "close"]
    (w,) = ts.events(name="write", fname=pipes[0])
    assert w["args"] == {"fhash": w["args"]["fhash"], "fd": w["args"]["fd"], "size": 1, "ret": 1}  # no offset: a pipe


def test_exclude_overrides_include(cprog, trace, files, tmp_path):
    ts = _run(cprog, trace, files, include=[tmp_path / "data"], exclude=[tmp_path / "data"])
    assert ts.count() == 0
    (f,) = ts.files  # the process still has its file: header, no events
    assert f.end["reason"] == "exit"


def test_trace_libs_env(cprog, trace, files, tmp_path):
    """IOTRACE_TRACE_LIBS=1 lifts the *.so* exclusion (not /proc or /dev)."""
    ts = _run(cprog, trace, files, include=[tmp_path / "data"], env={"IOTRACE_TRACE_LIBS": "1"})
    got = _per_file(ts)
    assert files["data/libx.so"] in got and files["data/liby.so.1.2"] in got
    assert files["data/m.pyc"] in got


def test_close_of_unlearned_fd_is_named(cprog, trace, files, tmp_path):
    exe = cprog(FILT, name="filt")
    ts = trace([exe])
    pipes = [e for e in ts.events(name="close")]
    assert len(pipes) == 2
    pipes_named = all(e["fname"] and e["fname"].startswith("pipe:[") for e in pipes)
    # an inherited fd under the included folder, closed without being used first
    prog = cprog(r"""
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char** argv) { return close(atoi(argv[1])); }
""", name="closefd")
    import subprocess
    import os
    from tracing import tracer_env, TraceSet, fresh_dir
    out = fresh_dir(tmp_path)
    fd = os.open(files["data/a"], os.O_RDONLY)
    try:
        subprocess.run([prog, str(fd)], env=tracer_env(out, include=[tmp_path / "data"]),
                       pass_fds=[fd], check=True)
    finally:
        os.close(fd)
    ts2 = TraceSet.load(out)
    inherited = [(e["name"], e["fname"]) for e in ts2.events()]
    assert pipes_named and inherited == [("close", files["data/a"])], (pipes, inherited)
