"""Benchmark of iotrace-analyze on a Dask cluster at a billion events: time, events/s and peak
memory of each worker, from 1 to N workers (the scaling table).

Shapes (--shapes, each `name:PROCS:EVENTS_PER_PROCESS`, numbers may be written 1e9):
  ranks:5000:200000    5000 processes of 200k events (a job of many ranks: 1B events)
  one:1:1000000000     one process of 1B events (one trace file: a long training rank)

Traces come from the real tracer, replicated: benchmarks/gen_events.c under LD_PRELOAD (lseek +
pread of 1 byte in a loop) writes a template trace, then its blocks are written again under each
rank's pid (5000 ranks), or its I/O blocks again and again, each repetition later by the
template's span (one process of 1B events). Only each block's pid, first tid and first start
are rewritten (they are absolute in a block: docs/trace-format.md), so every event is the
tracer's own. Making 1B events by making 1B system calls took 9 s per 200k events here under
load: hours. Give --keep DIR to make them once and reuse them.

Each run is `iotrace-analyze TRACES -o OUT -q --engine dask --workers W --memory-limit LIMIT`
in a fresh process (a LocalCluster of W single-threaded workers, each limited by Dask to
LIMIT: paused near it, restarted past it). Peak RSS is sampled every 50 ms for the analyzer's
own process and for each of its descendants (the Dask workers); "worker peak" is the largest
of the descendants'. A run that exceeds the limit shows as a restart in Dask's log and a
failed run here, not as a slow one.

usage: python benchmarks/billion_bench.py [--shapes ranks:5000:200000,one:1:1e9] [--workers 1,2]
                                          [--memory-limit 2GiB] [--keep DIR] [--no-parquet]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))


def preload_path() -> str:
    out = subprocess.run(["iotrace", "preload-path"], capture_output=True, text=True, timeout=60)
    path = out.stdout.strip()
    if out.returncode or not os.path.exists(path):
        raise SystemExit("billion_bench: the tracer is not installed (iotrace preload-path failed)")
    return path


def _varint(b: bytes, i: int) -> tuple[int, int]:
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def _put(v: int) -> bytes:
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        if v:
            out.append(c | 0x80)
        else:
            out.append(c)
            return bytes(out)


def _zz(v: int) -> int:
    return (v << 1) ^ (v >> 63)


def _unzz(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


class Block:
    """One compact block (docs/trace-format.md): pid, resolution, rows and its 16 columns."""

    def __init__(self, b: bytes):
        assert b[:4] == b"IOTC", "not a compact block"
        self.version = b[4]
        self.pid, i = _varint(b, 5)
        self.res, i = _varint(b, i)
        self.rows, i = _varint(b, i)
        lens = []
        for _ in range(16):
            n, i = _varint(b, i)
            lens.append(n)
        self.cols = []
        for n in lens:
            self.cols.append(b[i:i + n])
            i += n
        self.texts = self.cols[0].count(0)  # text rows (the generator makes no span rows)

    def first(self, col: int) -> int:
        return _unzz(_varint(self.cols[col], 0)[0])

    def end(self) -> int:
        """The end (start + dur) of the block's last I/O row, in units of res."""
        gaps, durs, t, i, j = self.cols[3], self.cols[4], 0, 0, 0
        while i < len(gaps):
            g, i = _varint(gaps, i)
            d, j = _varint(durs, j)
            t += _unzz(g) + _unzz(d)
        return t

    def encode(self, pid: int, old_pid: int, shift: int = 0, text=None) -> bytes:
        cols = list(self.cols)
        if cols[1]:  # the first I/O row's tid is absolute (0 before it); the generator's is its pid
            v, i = _varint(cols[1], 0)
            if _unzz(v) == old_pid:
                cols[1] = _put(_zz(pid)) + cols[1][i:]
        if shift and cols[3]:  # the first row's start is absolute too (previous end 0)
            v, i = _varint(cols[3], 0)
            cols[3] = _put(_zz(_unzz(v) + shift)) + cols[3][i:]
        if self.texts:
            lens, texts, i, at = [], [], 0, 0
            while i < len(cols[12]):
                n, i = _varint(cols[12], i)
                t = cols[13][at:at + n]
                at += n
                t = t.replace(b'"pid":%d,' % old_pid, b'"pid":%d,' % pid).replace(
                    b'"tid":%d,' % old_pid, b'"tid":%d,' % pid)
                texts.append(text(t) if text else t)
                lens.append(len(texts[-1]))
            cols[12] = b"".join(_put(n) for n in lens)
            cols[13] = b"".join(texts)
        head = b"IOTC" + bytes([self.version]) + _put(pid) + _put(self.res) + _put(self.rows)
        return head + b"".join(_put(len(c)) for c in cols) + b"".join(cols)


def read_blocks(path: str) -> list[Block]:
    import zstandard

    data = open(path, "rb").read()
    blocks, d = [], zstandard.ZstdDecompressor()
    while data:
        o = d.decompressobj()
        blocks.append(Block(o.decompress(data)))
        data = o.unused_data
    return blocks


def template(events: int, work: str) -> tuple[str, float]:
    """A trace of about EVENTS events by the real tracer (one process of gen_events)."""
    os.makedirs(work, exist_ok=True)
    exe = os.path.join(work, "gen_events")
    if not os.path.exists(exe):
        subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "gen_events.c")], check=True)
    out = os.path.join(work, f"template-{events}")
    shutil.rmtree(out, ignore_errors=True)
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    env = dict(os.environ, LD_PRELOAD=preload_path(), IOTRACE_DIR=out)
    t0 = time.perf_counter()
    # one child (the parent's own trace, a fork and a wait, is left out)
    subprocess.run([exe, data, str(max(events // 2, 1)), "1"], env=env, check=True)
    child = max((e for e in os.scandir(out)), key=lambda e: e.stat().st_size)
    return child.path, time.perf_counter() - t0


def generate(procs: int, per: int, traces: str, work: str) -> float:
    """PROCS traces of PER events each (PROCS > 1: the template's blocks under each process's
    pid; one process: the template's I/O blocks repeated until PER, each repetition shifted
    by the template's span); seconds taken."""
    import re

    import zstandard

    t0 = time.perf_counter()
    tpl_events = per if procs > 1 else min(per, 2_000_000)
    path, _ = template(tpl_events, work)
    blocks = read_blocks(path)
    old = blocks[0].pid
    os.makedirs(traces, exist_ok=True)
    cctx = zstandard.ZstdCompressor(level=3)
    if procs > 1:
        if procs > 89_999:
            raise SystemExit("billion_bench: at most 89999 processes (5-digit pids)")
        for k in range(procs):
            pid = 10_000 + k
            with open(os.path.join(traces, f"gen_events-bench-{pid}.iotc.zst"), "wb") as f:
                for b in blocks:
                    f.write(cctx.compress(b.encode(pid, old)))
        return time.perf_counter() - t0
    # one process: [header, first I/O block (its FH line), I/O blocks M..., last I/O block, end]
    # written as [header, first, M..., M shifted by the span of M, ... until PER, last, end]
    lead = [b for b in blocks if b.texts]
    head, tail = blocks[: blocks.index(lead[1]) + 1], blocks[-1]
    io = [b for b in blocks if not b.texts]
    mid, last = io[:-1], io[-1]
    if not mid:
        raise SystemExit("billion_bench: the template is too small to repeat")
    span = mid[-1].end() - mid[0].first(3) + 1000
    total = sum(b.rows for b in blocks) - sum(b.texts for b in blocks)
    shift = 0
    with open(os.path.join(traces, f"gen_events-bench-{old}.iotc.zst"), "wb") as f:
        for b in head + mid:
            f.write(cctx.compress(b.encode(old, old)))
        while total + mid[0].rows <= per:
            shift += span
            for b in mid:
                if total + b.rows > per:
                    break
                f.write(cctx.compress(b.encode(old, old, shift=shift)))
                total += b.rows
        shift += span
        f.write(cctx.compress(last.encode(old, old, shift=shift)))
        extra = total - (sum(b.rows for b in blocks) - sum(b.texts for b in blocks))

        def fix_end(t: bytes) -> bytes:
            t = re.sub(rb'"events":(\d+)', lambda m: b'"events":%d' % (int(m.group(1)) + extra), t)
            return re.sub(rb'"mono_ns":(\d+)', lambda m: b'"mono_ns":%d' % (int(m.group(1)) + shift), t)
        f.write(cctx.compress(tail.encode(old, old, text=fix_end)))
    return time.perf_counter() - t0


def run(traces: str, out: str, workers: int, limit: str, extra: list[str]) -> dict:
    """One analysis: wall s, CPU s, peak RSS of the main process and of the largest worker."""
    cmd = [sys.executable, "-m", "iotrace_analyzer", traces, "-o", out, "-q", "--no-progress",
           "--engine", "dask", "--workers", str(workers), "--memory-limit", limit, *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd)
    main = psutil.Process(proc.pid)
    peak_main = 0
    peaks: dict[int, int] = {}
    cpu: dict[int, float] = {}
    while proc.poll() is None:
        try:
            peak_main = max(peak_main, main.memory_info().rss)
            for c in main.children(recursive=True):
                try:
                    peaks[c.pid] = max(peaks.get(c.pid, 0), c.memory_info().rss)
                    t = c.cpu_times()
                    cpu[c.pid] = t.user + t.system
                except psutil.NoSuchProcess:
                    pass
            t = main.cpu_times()
            cpu[proc.pid] = t.user + t.system
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"billion_bench: iotrace-analyze failed with exit code {proc.returncode}")
    with open(os.path.join(out, "summary.json")) as f:
        S = json.load(f)
    return dict(wall=wall, cpu=sum(cpu.values()), peak_main=peak_main,
                peak_worker=max(peaks.values(), default=0), summary=S)


def parse_shape(item: str) -> tuple[str, int, int]:
    name, procs, per = item.split(":")
    return name, int(float(procs)), int(float(per))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="ranks:5000:200000,one:1:1e9",
                    help="comma-separated name:PROCS:EVENTS_PER_PROCESS")
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts (the scaling table)")
    ap.add_argument("--memory-limit", default="2GiB", help="memory limit of each Dask worker")
    ap.add_argument("--keep", help="folder for the generated traces (reused when present)")
    ap.add_argument("--no-parquet", action="store_true", help="summary only, no events dataset")
    args = ap.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    print(f"machine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
          f"Dask workers limited to {args.memory_limit} each", flush=True)
    base = args.keep or tempfile.mkdtemp(prefix="iotrace-billion-")
    os.makedirs(base, exist_ok=True)
    rows = []
    try:
        for item in args.shapes.split(","):
            name, procs, per = parse_shape(item)
            traces = os.path.join(base, f"traces-{name}-{procs * per}")
            if not os.path.isdir(traces) or not os.listdir(traces):
                took = generate(procs, per, traces, base)
                print(f"{name}: generated {procs} x {per:,} events in {took:.0f} s", flush=True)
            stored = sum(e.stat().st_size for e in os.scandir(traces))
            for w in counts:
                out = os.path.join(base, f"out-{name}-{w}")
                shutil.rmtree(out, ignore_errors=True)
                load = os.getloadavg()[0]
                r = run(traces, out, w, args.memory_limit, ["--no-parquet"] if args.no_parquet else [])
                S = r["summary"]
                ev = S["job"]["events"]
                rows.append((name, w, r["wall"], ev))
                print(f"{name:<6} {S['input']['files']:>5} files {stored / 2**30:6.2f} GiB  {w} worker(s)  "
                      f"{ev:>14,} events  {r['wall']:7.1f} s  {ev / r['wall'] / 1e6:5.2f} M events/s  "
                      f"CPU {r['cpu']:7.1f} s  peak RSS: worker {r['peak_worker'] / 2**30:5.2f} GiB, "
                      f"main {r['peak_main'] / 2**30:5.2f} GiB  [load before: {load:.1f}]", flush=True)
                if not args.keep:
                    shutil.rmtree(out, ignore_errors=True)
        print("\nscaling (time with 1 worker / time with W):")
        for name in dict.fromkeys(r[0] for r in rows):
            mine = [r for r in rows if r[0] == name]
            one = next((r[2] for r in mine if r[1] == 1), None)
            for _, w, wall, _ in mine:
                print(f"  {name:<6} {w} worker(s) {wall:7.1f} s" + (f"  x{one / wall:4.2f}" if one else ""))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
