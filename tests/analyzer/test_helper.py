"""A task's helper thread (engine.Helper): it writes the task's Parquet and decodes the blocks
ahead of the one the task summarizes; the task takes back a block's decoding the helper has
not started. Jobs run once, in order, their errors where their results are asked for; blocks
decoded ahead come in the file's order with the damage noted in the file's order."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
import zstandard
from iotrace_analyzer.engine import Helper
from iotrace_format import _native, reader

GOLDEN = Path(__file__).parent.parent / "golden" / "v7" / "compact-hdf5.iotc.zst"  # 3 frames, 72 events


def test_jobs_run_once_in_order_taken_back_or_waited_for():
    h = Helper()
    me = threading.current_thread().name
    try:
        ran: list = []
        gate = threading.Event()
        h.submit(gate.wait)  # the helper busy until the gate opens
        jobs = [h.submit(lambda i=i: ran.append((i, threading.current_thread().name)) or i) for i in range(5)]
        # the helper has not started it: the asking thread runs it
        assert jobs[2].result() == 2 and ran == [(2, me)]
        # a job that is not to be taken back (a Parquet row group) is waited for
        held = h.submit(lambda: ran.append(("held", threading.current_thread().name)) or 9, stealable=False)
        gate.set()
        assert held.result() == 9
        assert ran == [(2, me), (0, "iotrace-helper"), (1, "iotrace-helper"), (3, "iotrace-helper"),
                       (4, "iotrace-helper"), ("held", "iotrace-helper")]
        # each once; a value given once (a decoded block is not kept by the helper's queue)
        assert [j.result() for j in jobs] == [0, 1, None, 3, 4] and len(ran) == 6

        def boom():
            raise ValueError("damaged")

        with pytest.raises(ValueError, match="damaged"):  # run here
            h.submit(boom).result()
        failed = h.submit(boom, stealable=False)
        with pytest.raises(ValueError, match="damaged"):  # run by the helper
            failed.result()
        gate2 = threading.Event()
        h.submit(gate2.wait)
        dropped = h.submit(ran.append, "dropped")
        dropped.cancel()
        gate2.set()
        assert h.submit(len, ran, stealable=False).result() == 6  # the helper went past it
        assert dropped.result() is None and "dropped" not in ran
    finally:
        h.close()
    assert not h.thread.is_alive()


def _damaged_file(tmp_path) -> tuple[str, list]:
    """Twelve compact blocks of a golden trace's: the sixth damaged inside, bytes that are no
    frame after it, the last cut; and the frames' offsets."""
    raw = GOLDEN.read_bytes()
    head, body, end = (raw[s:e] for s, e, _ in reader.zstd_frames(raw))
    content = zstandard.ZstdDecompressor().decompressobj().decompress(body)
    broken = zstandard.ZstdCompressor().compress(content[: len(content) // 2])
    parts = [head] + [body] * 5 + [broken, b"\x00" * 40] + [body] * 5 + [body[: len(body) // 2]]
    path = tmp_path / "damaged.iotc.zst"
    path.write_bytes(b"".join(parts))
    at = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    return str(path), at


def _read(path: str, helper, pause: float = 0.0) -> tuple[list, list]:
    damage: list = []
    got = []
    for b in reader.iter_batches(path, damage, names_apart=True, ahead=helper):
        got.append((b.rows, b.meta, b.names, b.damaged, pa.record_batch(b)))
        time.sleep(pause)  # a task summarizing: the helper decodes meanwhile
    return got, [(d.kind, d.offset) for d in damage]


@pytest.mark.parametrize("pause", [0.0, 0.02], ids=["task-takes-back", "helper-ahead"])
def test_blocks_decoded_ahead_come_in_order_with_their_damage(tmp_path, monkeypatch, pause):
    path, at = _damaged_file(tmp_path)
    alone, damage = _read(path, None)
    assert damage == [("corrupt-frame", at[6]), ("not-a-frame", at[7]), ("truncated-frame", at[13])]
    assert [rows for rows, *_ in alone] == [0] + [72] * 5 + [0] + [72] * 5  # (the cut frame: no block)
    threads: list = []
    decode = _native.decode_compact
    monkeypatch.setattr(_native, "decode_compact",
                        lambda *a: threads.append(threading.current_thread().name) or decode(*a))
    h = Helper()
    try:
        ahead, damage_ahead = _read(path, h, pause)
    finally:
        h.close()
    assert damage_ahead == damage  # the block's damage before what the walk met past it
    assert len(ahead) == len(alone) and len(threads) == 12
    for (rows, meta, names, damaged, rb), (rows2, meta2, names2, damaged2, rb2) in zip(ahead, alone):
        assert (rows, meta, names, damaged) == (rows2, meta2, names2, damaged2) and rb.equals(rb2)
    if pause:  # the helper decoded the blocks while the task paused
        assert threads.count("iotrace-helper") >= 9


def test_a_reader_that_stops_early_leaves_the_blocks_ahead_undecoded(tmp_path, monkeypatch):
    path, _at = _damaged_file(tmp_path)
    calls: list = []
    decode = _native.decode_compact
    monkeypatch.setattr(_native, "decode_compact", lambda *a: calls.append(1) or decode(*a))
    h = Helper()
    gate = threading.Event()
    try:
        h.submit(gate.wait, stealable=False)  # the helper busy: nothing is decoded ahead
        blocks = reader.iter_batches(path, [], names_apart=True, ahead=h)
        assert [next(blocks).rows for _ in range(3)] == [0, 72, 72]
        blocks.close()  # the two blocks given ahead are let go
        gate.set()
        assert h.submit(len, calls, stealable=False).result() == 3
    finally:
        gate.set()
        h.close()


ARENAS = r"""
import ctypes, re, sys, threading
from iotrace_analyzer import engine
if sys.argv[1] == "one":
    engine.one_arena()
all_in = threading.Barrier(3)
def work():
    all_in.wait()  # the three at once: none takes over an arena another has left
    blocks = [bytearray(256 << 10) for _ in range(4)]  # malloc'd in this thread's arena
    all_in.wait()
    del blocks
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL("libc.so.6")
buf, size = ctypes.c_char_p(), ctypes.c_size_t()
libc.open_memstream.restype = ctypes.c_void_p
f = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
libc.malloc_info(0, ctypes.c_void_p(f))
libc.fclose(ctypes.c_void_p(f))
print(len(re.findall(rb"<heap nr=", ctypes.string_at(buf, size.value))))
"""


@pytest.mark.parametrize("how, arenas", [("one", 1), ("default", 4)])
def test_one_arena_keeps_every_thread_in_the_main_heap(how, arenas):
    """engine.one_arena (the export's command, tune_process): threads started after it malloc in
    the main arena; without it each of three threads gets an arena of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    out = subprocess.run([sys.executable, "-c", ARENAS, how], capture_output=True, text=True, check=True,
                         env=env)
    assert int(out.stdout) == arenas
