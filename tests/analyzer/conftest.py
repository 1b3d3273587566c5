"""Helpers that write small traces exactly as the tracer writes them (docs/trace-format.md).

Event lines follow csrc/format/encoder.cc byte for byte: fixed key order, ts/dur in µs with three
decimals, one event per line ending in `,`, the `iotrace_end` line ending in `]`.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib

import pytest
import zstandard


IO_KEYS = ("fhash", "fhash2", "fd", "fd2", "size", "offset", "ret", "bytes", "errno", "flags", "mode")


def fnv1a(path: str) -> int:
    h = 14695981039346656037
    for b in path.encode():
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def fhex(path: str) -> str:
    return f"{fnv1a(path):016x}"


def usec(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def js(s: str) -> str:
    return json.dumps(s, ensure_ascii=False, separators=(",", ":"))


def io(name, pid, ts_ns, dur_ns, tid=None, cat="posix", path=None, path2=None, **args):
    """An I/O event line; `path`/`path2` become fhash/fhash2; other args in the fixed order."""
    tid = pid if tid is None else tid
    if path is not None:
        args["fhash"] = fhex(path)
    if path2 is not None:
        args["fhash2"] = fhex(path2)
    parts = []
    for k in IO_KEYS:
        if k in args:
            v = args[k]
            parts.append(f'"{k}":"{v}"' if k.startswith("fhash") else f'"{k}":{int(v)}')
    return (f'{{"ph":"X","name":"{name}","cat":"{cat}","pid":{pid},"tid":{tid},'
            f'"ts":{usec(ts_ns)},"dur":{usec(dur_ns)},"args":{{{",".join(parts)}}}}}')


def span(name, cat, pid, ts_ns, dur_ns, tid=None, args=None):
    """A Python @trace / region event."""
    tid = pid if tid is None else tid
    a = json.dumps(args or {}, separators=(",", ":"))[1:-1]
    return (f'{{"ph":"X","name":{js(name)},"cat":{js(cat)},"pid":{pid},"tid":{tid},'
            f'"ts":{usec(ts_ns)},"dur":{usec(dur_ns)},"args":{{{a}}}}}')


def fh(path, pid, tid=None):
    tid = pid if tid is None else tid
    return (f'{{"ph":"M","name":"FH","pid":{pid},"tid":{tid},'
            f'"args":{{"name":{js(path)},"value":"{fhex(path)}"}}}}')


def meta(name, pid, args, tid=None, cat=None):
    tid = pid if tid is None else tid
    c = f',"cat":{js(cat)}' if cat else ""
    a = json.dumps(args, separators=(",", ":"))[1:-1]
    return f'{{"ph":"M","name":{js(name)}{c},"pid":{pid},"tid":{tid},"args":{{{a}}}}}'


def process(pid, host="node1", mono_ns=1_000_000_000, wall_ns=1_700_000_000_000_000_000, ppid=1,
            exe="/usr/bin/python3.11", role="main", **extra):
    args = {"version": 1, "hostname": host, "pid": pid, "ppid": ppid, "exe": exe,
            "cmdline": [exe, "train.py"], "wall_ns": wall_ns, "mono_ns": mono_ns, "role": role,
            "ranks": {}, "compression": "zstd"}
    args.update(extra)
    return meta("iotrace_process", pid, args, cat="process")


def end(pid, events, reason="exit", mono_ns=None, **extra):
    """iotrace_end; with `mono_ns` as iotrace 0.3 writes it (the end's time), `extra` after
    (cpu_ns, mpi_cpu_ns, host_cpu_wait_us)."""
    args = {"events": events, "reason": reason} if mono_ns is None else \
        {"mono_ns": mono_ns, "events": events, "reason": reason}
    return meta("iotrace_end", pid, dict(args, **extra), cat="process")


def trace_text(lines, closed=True) -> bytes:
    """`[`, then every line + `,`, the last + `]` when closed (the last line is iotrace_end)."""
    out = ["[\n"]
    for i, ln in enumerate(lines):
        last = closed and i == len(lines) - 1
        out.append(ln + ("]\n" if last else ",\n"))
    return "".join(out).encode()


def write_trace(path, lines, codec="zstd", closed=True, lines_per_frame=3) -> str:
    """Write a trace file: zstd as one frame per `lines_per_frame` lines (the `[` line in
    the first), gzip as one member with a full flush per group, or plain text."""
    text = trace_text(lines, closed)
    rows = text.splitlines(keepends=True)
    groups = [b"".join(rows[i : i + lines_per_frame]) for i in range(0, len(rows), lines_per_frame)]
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        if codec == "zstd":
            cctx = zstandard.ZstdCompressor(level=1)
            for g in groups:
                f.write(cctx.compress(g))
        elif codec == "gzip":
            c = zlib.compressobj(6, zlib.DEFLATED, 31)
            for g in groups:
                f.write(c.compress(g) + c.flush(zlib.Z_FULL_FLUSH))
            f.write(c.flush(zlib.Z_FINISH))
        else:
            f.write(text)
    return str(path)


@pytest.fixture
def tmp_traces(tmp_path):
    return tmp_path


__all__ = ["io", "span", "fh", "meta", "process", "end", "write_trace", "trace_text", "fhex",
           "gzip"]
