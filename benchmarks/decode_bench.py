"""Benchmark: the read side's first two steps on one thread, per event, as every reader pays them
(the analyzer, the export, `iotrace cat`): a compact trace's zstd frames decompressed
(`_native.inflate_frame`), then decoded to columns (`_native.decode_compact`: names apart, as the
analyzer and the export's passes ask, and names among the meta lines, the reader's default, as
the export's look-up of names in other files asks), and the columns taken by pyarrow. (The
second decode is there because it once went quadratic, unseen: the columns were sized afresh
before each of the million file-name lines, 489 s for the 1M-files trace.)

Traces: those of benchmarks/many_files_bench.py (9M events of the real tracer: 1,000,000
distinct files read once, and the same calls on 64 files), generated there when missing, under
its --dir. Each figure is the median of --repeat passes over frames already in memory (the
file is read once first: the page cache is not what is measured).

Also: the decompression's time while another thread runs Python (a loop counting), against
its time alone: a call that holds the GIL waits for the loop's turns (python-zstandard's
decompressobj), one that releases it does not; sha256 of 64 MiB (hashlib releases the GIL)
for scale: what two threads on this machine's cores give each other.

usage: python benchmarks/decode_bench.py [--cases files1M-1p,files64-1p] [--dir DIR] [--repeat 5]
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import many_files_bench as mfb  # noqa: E402


def frames_of(path: str) -> list[bytes]:
    from iotrace_format import reader

    buf = open(path, "rb").read()
    out, pos = [], 0
    while pos < len(buf):
        end, status = reader._frame_end(buf, pos, len(buf))
        if status != "ok":
            raise SystemExit(f"{path}: a damaged frame at {pos}: not a benchmark input")
        out.append(buf[pos:end])
        pos = end
    return out


def timed(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def slowed(work) -> float:
    """work's time while a thread runs a Python loop, against its time alone."""
    t = time.perf_counter()
    work()
    alone = time.perf_counter() - t
    stop = threading.Event()

    def loop():
        n = 0
        while not stop.is_set():
            n += 1

    th = threading.Thread(target=loop)
    th.start()
    t = time.perf_counter()
    work()
    beside = time.perf_counter() - t
    stop.set()
    th.join()
    return beside / alone


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="files1M-1p,files64-1p")
    ap.add_argument("--dir", default="/tmp/iotrace-many-files")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import pyarrow as pa

    from iotrace_analyzer.engine import tune_process
    from iotrace_format import _native

    tune_process()  # the analyzer's malloc settings: freed blocks stay in the heap
    lib = mfb.preload_path()
    print(f"{'case':12s} {'events':>7s} {'frames':>6s} {'raw MB':>7s} {'inflate':>13s} "
          f"{'decode':>13s} {'names in meta':>13s} {'to Arrow':>13s}  slowed by a Python thread: inflate_frame, "
          "zstandard, sha256")
    for case in args.cases.split(","):
        (path,) = glob.glob(os.path.join(mfb.traces_of(args.dir, case, lib, False), "*.iotc.zst"))
        frames = frames_of(path)
        contents = [_native.inflate_frame(f)[0] for f in frames]
        events = sum(_native.decode_compact(c, True).rows for c in contents)

        def inflate(frames=frames):
            for f in frames:
                _native.inflate_frame(f)

        def decode(contents=contents):
            for c in contents:
                _native.decode_compact(c, True)

        def decode_meta(contents=contents):
            for c in contents:
                _native.decode_compact(c, False)

        def arrow(contents=contents):
            for c in contents:
                pa.record_batch(_native.decode_compact(c, True))

        def zstandard_inflate(frames=frames):
            import zstandard

            d = zstandard.ZstdDecompressor()
            for f in frames[:20]:  # (slowed many times: 20 frames tell)
                d.decompressobj().decompress(f)

        def sha256():
            import hashlib

            data = bytes(64 << 20)
            for _ in range(4):
                hashlib.sha256(data).digest()

        t_in, t_dec, t_meta, t_arrow = (timed(f, args.repeat) for f in (inflate, decode, decode_meta, arrow))
        shares = [slowed(w) for w in (inflate, zstandard_inflate, sha256)]
        raw = sum(len(c) for c in contents) / 1e6
        ns = 1e9 / events
        print(f"{case:12s} {events / 1e6:6.1f}M {len(frames):6d} {raw:7.1f} "
              f"{t_in:5.2f} s {t_in * ns:3.0f} ns {t_dec:5.2f} s {t_dec * ns:3.0f} ns "
              f"{t_meta:5.2f} s {t_meta * ns:3.0f} ns "
              f"{t_arrow:5.2f} s {t_arrow * ns:3.0f} ns  " + " ".join(f"{x:.1f}x" for x in shares),
              flush=True)


if __name__ == "__main__":
    main()
