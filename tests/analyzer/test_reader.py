"""reader.py: discovery, frame-by-frame decoding, damage records."""

import os

import numpy as np
import pyarrow as pa
import pytest
from conftest import end, fh, io, process, write_trace
from iotrace_format.reader import (
    TRACE_SUFFIXES,
    TraceInputError,
    codec_by_name,
    detect_codec,
    find_traces,
    form_by_name,
    iter_lines,
    zstd_frames,
)


def sample_lines(n=10, pid=7):
    lines = [process(pid), fh("/data/a", pid)]
    lines += [io("read", pid, 1000 * i, 10, path="/data/a", fd=3, size=4, offset=4 * i, ret=4)
              for i in range(n)]
    lines.append(end(pid, len(lines)))
    return lines


@pytest.mark.parametrize("codec", ["zstd", "gzip", "plain"])
def test_clean_file_yields_every_line(tmp_path, codec):
    lines = sample_lines()
    p = write_trace(tmp_path / f"t.pfw.{codec}", lines, codec=codec)
    damage = []
    got = [ln.decode() for ln in iter_lines(p, damage)]
    assert got == lines
    assert damage == []


def test_zstd_truncated_reads_complete_frames(tmp_path):
    lines = sample_lines(20)
    p = write_trace(tmp_path / "t.pfw.zst", lines, lines_per_frame=4)
    size = os.path.getsize(p)
    with open(p, "r+b") as f:
        f.truncate(size - 5)
    damage = []
    got = list(iter_lines(p, damage))
    # the `[` line shares the first frame: frames hold lines [0..2], [3..6], ...; the last
    # frame (iotrace_end plus some reads) is cut: its complete lines may survive, never a partial one
    assert len(got) >= len(lines) - 4
    assert [g.decode() for g in got] == lines[: len(got)]
    assert [d.kind for d in damage] == ["truncated-frame"]


def test_zstd_corrupt_frame_is_skipped(tmp_path):
    lines = sample_lines(20)
    p = write_trace(tmp_path / "t.pfw.zst", lines, lines_per_frame=4)
    with open(p, "rb") as f:
        frames = list(zstd_frames(f.read()))
    assert len(frames) > 3
    start = frames[1][0]
    with open(p, "r+b") as f:  # break the second frame's block data, keep its header
        f.seek(start + 9)
        f.write(b"\xff" * 6)
    damage = []
    got = [g.decode() for g in iter_lines(p, damage)]
    assert [d.kind for d in damage] in (["corrupt-frame"], ["not-a-frame"])
    assert got[:2] == lines[:2]
    assert got[-1] == lines[-1]
    assert len(got) < len(lines)


def test_gzip_truncated(tmp_path):
    lines = sample_lines(30)
    p = write_trace(tmp_path / "t.pfw.gz", lines, codec="gzip", lines_per_frame=5)
    size = os.path.getsize(p)
    with open(p, "r+b") as f:
        f.truncate(size - 40)
    damage = []
    got = [g.decode() for g in iter_lines(p, damage)]
    assert got == lines[: len(got)]
    assert len(got) >= len(lines) - 6
    assert [d.kind for d in damage] == ["truncated-gzip"]


def test_find_traces(tmp_path):
    write_trace(tmp_path / "a" / "x-h-1.pfw.zst", sample_lines(1))
    write_trace(tmp_path / "a" / "sub" / "y-h-2.pfw.gz", sample_lines(1), codec="gzip")
    (tmp_path / "a" / "notes.txt").write_text("x")
    found = find_traces([str(tmp_path / "a")])
    assert [os.path.basename(f) for f in found] == ["x-h-1.pfw.zst", "y-h-2.pfw.gz"]
    assert len(find_traces([str(tmp_path / "a" / "*.pfw.zst")])) == 1
    with pytest.raises(TraceInputError, match="no such file"):
        find_traces([str(tmp_path / "missing")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceInputError, match="no trace files"):
        find_traces([str(tmp_path / "empty")])
    with pytest.raises(TraceInputError):
        find_traces([])


def test_empty_file_is_damage(tmp_path):
    p = tmp_path / "e.pfw.zst"
    p.write_bytes(b"")
    damage = []
    assert list(iter_lines(str(p), damage)) == []
    assert [d.kind for d in damage] == ["empty-file"]


def test_scanner_unescapes_strings():
    """JSON escapes in names and categories: the six one-letter ones, \\uXXXX, a surrogate
    pair; an unknown escape makes the line bad (counted), not a guess."""
    import pyarrow as pa
    from iotrace_format import _native

    name = r'q\"u\\o\/t\b\f\n\r\te \u00e9 \ud83d\ude00'
    good = f'{{"ph":"X","name":"{name}","cat":"c\\u0041t","pid":1,"tid":1,"ts":1.000,"dur":2.000}}'
    bad = '{"ph":"X","name":"x\\qy","cat":"c","pid":1,"tid":1,"ts":3.000,"dur":1.000}'
    b = _native.scan_json((good + "\n" + bad + "\n").encode())
    rows = pa.record_batch(b).to_pylist()
    assert [(r["name"], r["cat"]) for r in rows] == [('q"u\\o/t\b\f\n\r\te é 😀', "cAt")]
    assert b.bad_lines == 1


def test_codec_by_name_is_the_one_guess_of_the_reader_and_the_planner(tmp_path):
    """detect_codec falls back on the name where the first bytes say nothing, and the
    analyzer's planner sizes files by the same name rules (form_by_name)."""
    from iotrace_analyzer.inputs.traces import BYTES_PER_EVENT as _BYTES_PER_EVENT
    from iotrace_analyzer.inputs.traces import estimate as _estimate

    forms = {".pfw": "plain", ".pfw.zst": "zstd", ".pfw.gz": "gzip", ".iotc.zst": "compact"}
    assert set(forms) == set(TRACE_SUFFIXES)
    for suffix, form in forms.items():
        name = f"t{suffix}"
        assert form_by_name(name) == form
        assert codec_by_name(name) == ("zstd" if form == "compact" else form)
        assert _estimate(name, 1000) == int(1000 / _BYTES_PER_EVENT[form])
        p = tmp_path / name
        p.write_bytes(b"\x00\x00\x00\x00damaged start")
        assert detect_codec(str(p)) == codec_by_name(name)


def _mapped_kib(path: str) -> int:
    """Resident KiB of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            if "-" in line.split(" ", 1)[0]:
                inside = line.rstrip().endswith(path)
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def test_pages_read_are_let_go(tmp_path, monkeypatch):
    """A mapped trace's pages already read leave the process's RSS as it streams (a billion-
    event trace read once counted 1.5 GiB of clean file pages, and Dask restarts a worker on
    its RSS); the batches are the same as read with every page kept."""
    import pyarrow as pa
    from iotrace_format import reader
    from iotrace_format.reader import iter_batches

    p = 500
    events = [process(p), fh("/data/x", p)] + [
        io("pread64", p, (1000 + 3 * i) * 1000, 1000, path="/data/x", fd=3, size=1, offset=i % 4096, ret=1)
        for i in range(30000)] + [end(p, 30000)]
    path = str(tmp_path / "x-node1-500.pfw.zst")
    write_trace(path, events, lines_per_frame=2)
    assert os.path.getsize(path) > 1 << 20
    def content(b):
        return b.meta, pa.record_batch(b).to_pylist()

    kept = [content(b) for b in iter_batches(path)]
    monkeypatch.setattr(reader, "RELEASE_BYTES", 64 << 10)
    seen, most = [], 0
    for b in iter_batches(path):
        seen.append(content(b))
        most = max(most, _mapped_kib(path))
    assert seen == kept
    assert 0 < most < 512  # KiB resident at any time, of a file of more than 1 MiB


def test_names_apart_are_the_fh_lines_the_tracer_writes(tmp_path):
    """names_apart: the FH lines as the tracer writes them come as numbers and paths
    (Batch.names), in their order; every other line, an FH line with an escape or a hash that
    is not 16 hex digits included, stays among the meta lines, and the events are the same."""
    import orjson
    from conftest import fhex
    from iotrace_format import _native
    from iotrace_format.reader import iter_batches

    odd = '{"ph":"M","name":"FH","pid":7,"tid":7,"args":{"name":"/x","value":"not-hex"}}'
    lines = [process(7), fh("/data/a", 7), fh('/data/q"uote', 7), odd, fh("pipe:[12]", 7),
             io("read", 7, 1000, 10, path="/data/a", fd=3, size=4, offset=0, ret=4), fh("/data/b", 7)]
    text = "".join(ln + "\n" for ln in lines).encode()
    whole, apart = _native.scan_json(text), _native.scan_json(text, names_apart=True)
    assert whole.names is None and whole.name_count == 0
    hashes, offsets, paths = apart.names
    values = np.frombuffer(hashes, np.uint64)
    offs = np.frombuffer(offsets, np.int64)
    got = [(f"{int(v):016x}", paths[offs[i]:offs[i + 1]].decode()) for i, v in enumerate(values)]
    assert got == [(fhex(p), p) for p in ("/data/a", "pipe:[12]", "/data/b")]
    assert apart.name_count == 3
    assert [orjson.loads(m)["args"]["name"] for m in apart.meta if b'"FH"' in m] == ['/data/q"uote', "/x"]
    assert len(apart.meta) == len(whole.meta) - 3
    assert pa.record_batch(apart).equals(pa.record_batch(whole))
    # a file: the same through iter_batches (the JSON form here; the compact form's text rows
    # go through the same scanner: tests/test_compact.py)
    p = write_trace(tmp_path / "t.pfw.zst", lines)
    batches = list(iter_batches(p, [], names_apart=True))
    assert sum(b.name_count for b in batches) == 3
    assert sum(len(b.meta) for b in batches) == sum(len(b.meta) for b in iter_batches(p, [])) - 3


def test_names_apart_at_every_position_of_a_byte_that_needs_the_parser():
    """The scanner reads a path eight bytes a step: a quote, a backslash or a control character
    (escaped in the JSON text) anywhere in the path leaves the line to the JSON parser; bytes
    above 0x7F and DEL stay in the path (valid UTF-8), invalid UTF-8 is left to the parser, and
    a hash is 16 lowercase hex digits or the line is left too."""
    import json

    from conftest import fhex
    from iotrace_format import _native

    def line(path_json: str, value: str) -> bytes:
        return (b'{"ph":"M","name":"FH","pid":7,"tid":7,"args":{"name":' + path_json.encode()
                + b',"value":"' + value.encode() + b'"}}')

    apart_expected, lines = [], []
    for k in range(25):
        for special in ('"', "\\", "\x01", "\x1f", "é", "\x7f", "€", " "):
            path = "a" * k + special + "b" * (24 - k)
            lines.append(line(json.dumps(path, ensure_ascii=False), fhex(path)))
            if special not in ('"', "\\", "\x01", "\x1f"):
                apart_expected.append((fhex(path), path))
    for value in ("0123456789ABCDEF", "0123456789abcdeg", "0123456789abcde", "0123456789abcdef0",
                  "/0123456789abcde", ":0123456789abcde", "`0123456789abcde"):
        lines.append(line('"/v"', value))
    lines.append(line('"/0123456789"', "0123456789abcdef").replace(b"89", b"8\xff"))  # not UTF-8
    apart = _native.scan_json(b"".join(ln + b"\n" for ln in lines), names_apart=True)
    hashes, offsets, paths = apart.names
    values = np.frombuffer(hashes, np.uint64)
    offs = np.frombuffer(offsets, np.int64)
    got = [(f"{int(v):016x}", paths[offs[i]:offs[i + 1]].decode()) for i, v in enumerate(values)]
    assert got == apart_expected
    assert len(apart.meta) == len(lines) - len(apart_expected)
