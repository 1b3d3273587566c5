"""A small traced job written in the documented per-process format
(docs/trace-format.md), with every count known, for the export tests.

    rank 0 (pid 100, main): threads 100 and 101 ("loader"), forks 200,
                            spawns workers 300 and 301 (worker_id 1 and 0)
      fork child 200:       exec's into a second file (same pid, role exec)
    rank 1 (pid 400, main)

Each process reads and writes two files (FH lines), rank 0 also has a counter
with two values and an instant; rank 0's file is truncated (no closing `]`).
"""

from __future__ import annotations

import gzip
import os

import orjson
import zstandard

HOST = "node1"
T0 = 1_000_000.0  # µs on CLOCK_MONOTONIC
FILES = {"/data/a.bin": "00000000000000aa", "/data/b.bin": "00000000000000bb"}


class ProcWriter:
    def __init__(self, pid, role, ranks, parent_pid=None, start=T0, exe="/usr/bin/python3.11",
                 **extra):
        self.pid = pid
        self.events = []
        args = {"version": 1, "hostname": HOST, "pid": pid, "ppid": parent_pid or 1,
                "exe": exe, "cmdline": [exe], "wall_ns": 0, "mono_ns": int(start * 1000),
                "role": role, "ranks": ranks, "compression": "none", **extra}
        if parent_pid:
            args["parent_pid"] = parent_pid
        self.meta("iotrace_process", args)
        self.meta("process_name", {"name": os.path.basename(exe)})
        self.seen = set()

    def meta(self, name, args, tid=None):
        self.events.append({"ph": "M", "name": name, "pid": self.pid,
                            "tid": tid or self.pid, "args": args})

    def io(self, name, path, ts, dur, tid=None, **args):
        if path not in self.seen:
            self.seen.add(path)
            self.meta("FH", {"name": path, "value": FILES[path]}, tid)
        self.events.append({"ph": "X", "name": name, "cat": "posix", "pid": self.pid,
                            "tid": tid or self.pid, "ts": round(ts, 3), "dur": dur,
                            "args": {"fhash": FILES[path], **args}})

    def slice(self, name, cat, ts, dur, tid=None, **args):
        self.events.append({"ph": "X", "name": name, "cat": cat, "pid": self.pid,
                            "tid": tid or self.pid, "ts": round(ts, 3), "dur": dur,
                            "args": args})

    def other(self, **ev):
        self.events.append({"pid": self.pid, "tid": self.pid, **ev})

    def write(self, path, compression="none", closed=True):
        self.meta("iotrace_end", {"events": len(self.events), "reason": "exit"})
        lines = [orjson.dumps(e) for e in self.events]
        if not closed:
            lines.pop()  # a crash: no iotrace_end, no `]`
        text = b"[\n" + b",\n".join(lines) + (b"]\n" if closed else b",\n")
        if compression == "gzip":
            text = gzip.compress(text)
            path += ".gz"
        elif compression == "zstd":
            text = zstandard.ZstdCompressor().compress(text)
            path += ".zst"
        with open(path, "wb") as f:
            f.write(text)
        return path


def write_job(directory, compression="none"):
    """Write the job; returns the expected counts."""
    p = lambda name, pid, n="": os.path.join(directory, f"{name}-{HOST}-{pid}{n}.pfw")
    rank0 = ProcWriter(100, "main", {"RANK": "0", "WORLD_SIZE": "2"})
    rank0.meta("thread_name", {"name": "loader"}, tid=101)
    rank0.io("open", "/data/a.bin", T0 + 10, 2.5, ret=3, fd=3, flags=0)
    rank0.io("read", "/data/a.bin", T0 + 20, 5.125, ret=4096, fd=3, size=4096, offset=0)
    rank0.io("read", "/data/b.bin", T0 + 21, 3.0, tid=101, ret=100, size=100, fd=4)
    rank0.slice("train.step", "python", T0 + 30, 100.0, step=1)
    rank0.io("write", "/data/b.bin", T0 + 40, 1.5, ret=10, size=10, fd=4)  # inside the step
    rank0.slice("fork", "process", T0 + 150, 20.0, ret=200)
    rank0.slice("spawn.sleep", "python", T0 + 190, 5.0)  # last slice before worker 300
    rank0.slice("dataload", "python", T0 + 260, 10.0)  # last slice before worker 301
    rank0.other(ph="C", name="mem", ts=T0 + 50, args={"rss": 1000, "cache": 2.5})
    rank0.other(ph="C", name="mem", ts=T0 + 60, args={"rss": 1200, "cache": 3.5})
    rank0.other(ph="i", s="t", name="epoch", cat="python", ts=T0 + 70, args={})

    child = ProcWriter(200, "fork", {"RANK": "0"}, parent_pid=100, start=T0 + 160)
    child.io("read", "/data/a.bin", T0 + 175, 1.0, ret=7, size=7, fd=3)
    child.io("open", "/data/a.bin", T0 + 165, 2.0, ret=3, fd=3)  # earliest, written 2nd
    child.slice("execve", "process", T0 + 180, 1.0)
    exec_ = ProcWriter(200, "exec", {"RANK": "0"}, parent_pid=100, start=T0 + 182,
                       exe="/usr/bin/tar")
    exec_.io("write", "/data/b.bin", T0 + 185, 1.0, ret=5, size=5, fd=1)

    w300 = ProcWriter(300, "worker", {"RANK": "0"}, parent_pid=100, start=T0 + 200,
                      worker_id=1)
    w300.io("read", "/data/b.bin", T0 + 210, 2.0, ret=5, size=5, fd=5)
    w301 = ProcWriter(301, "worker", {"RANK": "0"}, parent_pid=100, start=T0 + 280,
                      worker_id=0)
    w301.io("read", "/data/a.bin", T0 + 290, 2.0, ret=-1, errno=9, size=5, fd=5)

    rank1 = ProcWriter(400, "main", {"RANK": "1", "WORLD_SIZE": "2"})
    rank1.io("read", "/data/b.bin", T0 + 15, 4.0, ret=8, size=8, fd=3)
    rank1.slice("epoch", "python", T0 + 15, 10.0)  # same start, written after the read

    paths = [rank0.write(p("python3.11", 100), compression, closed=False),
             child.write(p("python3.11", 200), compression),
             exec_.write(p("tar", 200, "-1"), compression),
             w300.write(p("python3.11", 300), compression),
             w301.write(p("python3.11", 301), compression),
             rank1.write(p("python3.11", 400), compression)]
    return {
        "paths": paths,
        "slices": 8 + 3 + 1 + 1 + 1 + 2,  # X events
        "instants": 1,
        "labels": {100: "rank 0", 200: "rank 0 · fork 0", 300: "rank 0 · worker 1",
                   301: "rank 0 · worker 0", 400: "rank 1"},
        "sort_order": [100, 200, 300, 301, 400],
        "threads": {(100, 100): "rank 0 · main", (100, 101): "rank 0 · loader",
                    (200, 200): "rank 0 · fork 0 · main",
                    (300, 300): "rank 0 · worker 1 · main",
                    (301, 301): "rank 0 · worker 0 · main", (400, 400): "rank 1 · main"},
        # (parent slice, child slice) of each arrow
        "flows": {("fork", "open"), ("spawn.sleep", "read"), ("dataload", "read")},
        "counters": {"mem rss": [1000, 1200], "mem cache": [2.5, 3.5]},
        "fnames": {"/data/a.bin": 5, "/data/b.bin": 5},
    }
