"""Finding trace files and reading their text back, damage-tolerant, with bounded memory.

A trace (docs/trace-format.md) is `.pfw.zst` (independent zstd frames of whole lines),
`.pfw.gz` (one gzip member with full flushes; DFTracer may write several members), plain
`.pfw`, or `.iotc.zst` (the compact form: zstd frames of columns). The compression is
recognised by its magic bytes, and a compact frame by its own, not by the file name.

Two ways to read: `iter_blocks` gives the JSON text (a compact frame rendered back to its
lines by the format's own encoder: what `iotrace cat` prints); `iter_batches` gives the events
as columns (`_native.Batch`, an Arrow record batch for pyarrow): a compact frame decoded
straight from its columns, JSON text scanned, with no JSON text made on the way.

Reading goes frame by frame (zstd) or in small compressed blocks (gzip, plain), so raw text
is never held whole. Damage is read around and recorded as `Damage` records:

* zstd: a frame cut short yields its complete lines; a frame that fails to decode is
  skipped; bytes that are not a frame are skipped up to the next frame magic.
* gzip: a cut-off member yields up to its last complete line; corrupt deflate data is
  skipped up to the next full-flush marker (00 00 ff ff) from which inflating works again.

Only the standard library and the format's own compiled module (zstd decompression included)
are imported here: the tracer's commands use this module and must not pay for pyarrow or Dask.
"""

from __future__ import annotations

import collections
import glob
import json
import mmap
import os
import struct
import zlib
from dataclasses import dataclass
from collections.abc import Iterator

from . import _native

COMPACT_SUFFIX = ".iotc.zst"  # the compact form's files (the others are the JSON form)
TRACE_SUFFIXES = (".pfw", ".pfw.zst", ".pfw.gz", COMPACT_SUFFIX)
LIVE_SUFFIX = ".live"  # a process's record buffers beside its trace file (docs/trace-format.md)
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
COMPACT_MAGIC = b"IOTC"  # a compact frame's content starts with it
GZIP_MAGIC = b"\x1f\x8b"
FULL_FLUSH = b"\x00\x00\xff\xff"  # the empty stored block a deflate full flush ends with

PLAIN_BLOCK = 4 << 20  # bytes of plain text read at a time
GZIP_BLOCK = 64 << 10  # compressed bytes fed to zlib at a time


class TraceInputError(ValueError):
    """The paths given name no trace file (missing, empty folder, glob without match)."""


@dataclass(frozen=True)
class Damage:
    """One problem met while reading `path`; `offset` is a byte offset in the file as stored."""

    path: str
    offset: int
    kind: str  # truncated-frame, corrupt-frame, not-a-frame, truncated-gzip, corrupt-gzip, empty-file
    detail: str = ""


# --------------------------------------------------------------------------- discovery


def _is_trace_name(name: str) -> bool:
    return name.endswith(TRACE_SUFFIXES)


def trace_stem(path: str) -> str:
    """<name>-<host>-<pid>[-<n>]: a trace file's name without folder and suffix (any form)."""
    base = os.path.basename(path)
    return next((base[:-len(s)] for s in TRACE_SUFFIXES if base.endswith(s)), base)


def _walk(folder: str) -> list[str]:
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found += [os.path.join(root, f) for f in sorted(files) if _is_trace_name(f)]
    return found


def find_traces(paths: list[str]) -> list[str]:
    """Expand folders (recursively), globs and file names into a sorted list of trace files.

    A file named explicitly is taken whatever its name; folders and globs contribute the
    files ending in .pfw, .pfw.zst, .pfw.gz or .iotc.zst. Raises TraceInputError on a missing path, a
    glob without match, or when nothing at all is found.
    """
    if not paths:
        raise TraceInputError("no trace path given")
    found: list[str] = []
    for p in paths:
        if not p:
            raise TraceInputError("empty trace path given")
        if os.path.isdir(p):
            found += _walk(p)
        elif os.path.isfile(p):
            found.append(p)
        else:
            matches = sorted(glob.glob(p, recursive=True))
            if not matches:
                raise TraceInputError(f"no such file or folder: {p}")
            for m in matches:
                if os.path.isdir(m):
                    found += _walk(m)
                elif _is_trace_name(m):
                    found.append(m)
    if not found:
        raise TraceInputError(
            "no trace files (*.pfw, *.pfw.zst, *.pfw.gz, *.iotc.zst) found in: " + ", ".join(paths)
        )
    if len(paths) == 1 and os.path.isdir(paths[0]):
        return found  # one folder walked: no file twice
    seen: set[str] = set()
    unique = []
    for f in found:
        key = os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


# --------------------------------------------------------------------------- live files


def _live_files(paths: list[str]) -> list[str]:
    found = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                found += [os.path.join(root, f) for f in sorted(files) if f.endswith(LIVE_SUFFIX)]
        elif os.path.isfile(p + LIVE_SUFFIX):
            found.append(p + LIVE_SUFFIX)
        elif not os.path.exists(p):
            found += [m for m in sorted(glob.glob(p + LIVE_SUFFIX, recursive=True)) if os.path.isfile(m)]
    return found


def _this_host() -> str:
    return os.uname().nodename.split(".")[0]


def settle_live(paths: list[str]) -> tuple[list[dict], list[Damage]]:
    """Finish the traces whose process ended before it could finish them itself (killed by a
    signal, SIGKILL and the OOM killer included): the records in its live file that are not in
    its trace file yet are added to it, with the end marker, and the live file goes. Returns
    what was finished, and a Damage record for each live file that stays: its process still
    runs, or ran on another host (`iotrace recover --force` finishes those once the job is over)."""
    finished, notes = [], []
    for live in _live_files(paths):
        trace = live[:-len(LIVE_SUFFIX)]
        try:
            info = _native.live_inspect(live)
        except ValueError as e:
            notes.append(Damage(trace, -1, "live-file", str(e)))
            continue
        if not info["closed"]:
            if info["host"] != _this_host():
                notes.append(Damage(trace, -1, "live-file",
                                    f"pid {info['pid']} ran on host {info['host']}: its last events are still "
                                    f"in {os.path.basename(live)}; once the job is over, `iotrace recover --force` "
                                    "adds them"))
                continue
            if _native.live_owner_alive(live):
                notes.append(Damage(trace, -1, "live-file",
                                    f"pid {info['pid']} is still running: its last events are not in its trace "
                                    "file yet"))
                continue
        try:
            finished.append(_native.live_finish(live))
        except ValueError as e:
            notes.append(Damage(trace, -1, "live-file", f"its last events could not be added: {e}"))
    return finished, notes


# --------------------------------------------------------------------------- codec + zstd frames


def detect_codec(path: str) -> str:
    """"zstd", "gzip" or "plain": by the file's first bytes, by its name when they say nothing
    (a damaged start: the frame walker will resync at the next magic)."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head == ZSTD_MAGIC or _is_skippable(head):
        return "zstd"
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    if not head:
        return "plain"
    return codec_by_name(path)


def codec_by_name(path: str) -> str:
    """The codec a trace file's name says, without opening it: "zstd" (.zst, the compact form
    too), "gzip" (.gz) or "plain"."""
    if path.endswith(".zst"):
        return "zstd"
    if path.endswith(".gz"):
        return "gzip"
    return "plain"


def form_by_name(path: str) -> str:
    """What a trace file's name says it holds, without opening it: "compact" (COMPACT_SUFFIX:
    zstd frames of columns) or its codec (codec_by_name) for the JSON form."""
    return "compact" if path.endswith(COMPACT_SUFFIX) else codec_by_name(path)


def _is_skippable(head: bytes) -> bool:
    return len(head) == 4 and head[0] & 0xF0 == 0x50 and head[1:] == b"\x2a\x4d\x18"


def _frame_end(buf, pos: int, limit: int) -> tuple[int, str]:
    """End of the zstd frame starting at `pos`, from its header and block headers alone.

    Returns (end, status): status "ok", "truncated" (end is `limit`) or "bad" (not a frame).
    """
    head = bytes(buf[pos : pos + 4])
    if _is_skippable(head):
        if pos + 8 > limit:
            return limit, "truncated"
        (n,) = struct.unpack_from("<I", buf, pos + 4)
        end = pos + 8 + n
        return (end, "ok") if end <= limit else (limit, "truncated")
    if head != ZSTD_MAGIC:
        return pos, "bad"
    if pos + 5 > limit:
        return limit, "truncated"
    fhd = buf[pos + 4]
    if fhd & 0x08:  # reserved bit
        return pos, "bad"
    single = (fhd >> 5) & 1
    fcs_flag = fhd >> 6
    header = 1 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    header += (1 if single else 0, 2, 4, 8)[fcs_flag]
    p = pos + 4 + header
    while True:
        if p + 3 > limit:
            return limit, "truncated"
        b0, b1, b2 = buf[p], buf[p + 1], buf[p + 2]
        h = b0 | (b1 << 8) | (b2 << 16)
        last, btype, bsize = h & 1, (h >> 1) & 3, h >> 3
        if btype == 3:
            return pos, "bad"
        p += 3 + (1 if btype == 1 else bsize)
        if last:
            break
    if fhd & 0x04:  # content checksum
        p += 4
    return (p, "ok") if p <= limit else (limit, "truncated")


def zstd_frames(buf, start: int = 0, end: int | None = None, on_bad=None) -> Iterator[tuple[int, int, str]]:
    """Yield (start, end, status) of the frames in buf[start:end]; status "ok" or "truncated".

    Bytes that are not a frame are skipped to the next frame magic; `on_bad(offset, next)`
    is called for each such stretch.
    """
    limit = len(buf) if end is None else end
    pos = start
    while pos < limit:
        fend, status = _frame_end(buf, pos, len(buf))
        if status == "bad":
            nxt = buf.find(ZSTD_MAGIC, pos + 1, limit)
            nxt = limit if nxt < 0 else nxt
            if on_bad:
                on_bad(pos, nxt)
            pos = nxt
            continue
        yield pos, fend, status
        pos = fend


def _open_map(path: str):
    """mmap of the file, or b"" for an empty file (mmap refuses size 0)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


# --------------------------------------------------------------------------- decoding


def _note(damage: list | None, *args, at: int | None = None) -> None:
    """A Damage record at the end of `damage` (or at `at`: a frame decoded ahead, before the
    notes the walk made past it meanwhile)."""
    if damage is not None:
        damage.insert(len(damage) if at is None else at, Damage(*args))


def _whole_lines(tail: bytes, data: bytes) -> tuple[bytes, bytes]:
    """Join the carried partial line with new text; split off the new partial line."""
    data = tail + data if tail else data
    cut = data.rfind(b"\n") + 1
    return data[:cut], data[cut:]


def render_compact(content: bytes) -> tuple[bytes, bool]:
    """The JSON lines of one compact frame's content, and whether it was damaged (the lines
    before the damage are still given)."""
    return _native.compact_to_json(content)


# A mapped trace's pages already read are let go every this many bytes: they are clean pages of
# the page cache, but counted in the process's RSS, so a billion-event trace (1.5 GiB) read
# once looked like 1.5 GiB of memory (a Dask worker is restarted on its RSS).
RELEASE_BYTES = 64 << 20


def _release(buf: mmap.mmap, start: int, upto: int) -> int:
    """Drop the mapping's pages in [start, upto) (whole pages; read again, they come back
    from the page cache); the new start."""
    cut = upto - upto % mmap.PAGESIZE
    if cut > start and hasattr(mmap, "MADV_DONTNEED"):
        try:
            buf.madvise(mmap.MADV_DONTNEED, start, cut - start)
        except (OSError, ValueError):
            return start
        return cut
    return start


def _zstd_contents(path, buf, start, end, damage) -> Iterator[tuple[bytes, str, int]]:
    """(content, status, offset) of each frame that decodes (status "ok" or "truncated": the
    part of a cut frame that decodes); damage noted and read around."""
    pos = start
    released = start - start % mmap.PAGESIZE
    while pos < end:
        if pos - released >= RELEASE_BYTES and isinstance(buf, mmap.mmap):
            released = _release(buf, released, pos)
        fend, status = _frame_end(buf, pos, end)
        if status == "bad":
            nxt = buf.find(ZSTD_MAGIC, pos + 1, end)
            nxt = end if nxt < 0 else nxt
            _note(damage, path, pos, "not-a-frame", f"{nxt - pos} bytes skipped to the next frame")
            yield b"", "gap", pos
            pos = nxt
            continue
        # in C++, without the GIL, from the mapping in place (no copy of the frame)
        with memoryview(buf) as view:
            out, error = _native.inflate_frame(view[pos:fend])
        if error is not None:
            # A damaged block header can make the frame look longer than it is: resync at
            # the next magic after this frame's start rather than at its computed end.
            _note(damage, path, pos, "corrupt-frame", error)
            yield b"", "gap", pos
            nxt = buf.find(ZSTD_MAGIC, pos + 1, end)
            pos = end if nxt < 0 else nxt
            continue
        if status == "truncated":
            _note(damage, path, pos, "truncated-frame",
                  f"frame cut at byte {fend}; {len(out)} bytes decoded from it")
            yield out, status, pos
            nxt = buf.find(ZSTD_MAGIC, pos + 1, end)
            pos = end if nxt < 0 else nxt
            continue
        yield out, status, pos
        pos = fend


def _zstd_blocks(path, buf, start, end, damage) -> Iterator[bytes]:
    tail = b""
    for out, status, pos in _zstd_contents(path, buf, start, end, damage):
        if status == "gap":
            tail = b""
            continue
        if out[:4] == COMPACT_MAGIC:
            out, damaged = render_compact(out)
            if damaged and status == "ok":
                lines = out.count(b"\n")
                _note(damage, path, pos, "corrupt-frame",
                      f"compact frame damaged; {lines} lines rendered before it")
        text, tail = _whole_lines(tail, out)
        if status == "truncated":
            tail = b""  # the cut line is lost
        if text:
            yield text
    if tail:
        yield tail + b"\n"  # a clean stream whose last line lacks its newline


def _plain_blocks(path, start, end) -> Iterator[bytes]:
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        tail = b""
        while left > 0:
            data = f.read(min(PLAIN_BLOCK, left))
            if not data:
                break
            left -= len(data)
            text, tail = _whole_lines(tail, data)
            if text:
                yield text
        if tail:
            yield tail + b"\n"


def _gzip_resync(buf, pos: int) -> int:
    """Offset after the next full-flush marker from which inflating works, or -1."""
    while True:
        m = buf.find(FULL_FLUSH, pos)
        if m < 0:
            return -1
        cand = m + len(FULL_FLUSH)
        try:
            probe = zlib.decompressobj(-15).decompress(buf[cand : cand + 65536], 4096)
        except zlib.error:
            pos = m + 1
            continue
        if probe[:1] in (b"{", b"\n", b"[") or (not probe and cand >= len(buf) - 8):
            return cand
        pos = m + 1


def _gzip_blocks(path, buf, damage) -> Iterator[bytes]:
    size = len(buf)
    pos = 0
    tail = b""
    dobj = zlib.decompressobj(31)
    raw = False  # after a resync we inflate raw deflate data (no gzip header)
    while pos < size:
        data = buf[pos : pos + GZIP_BLOCK]
        try:
            out = dobj.decompress(data)
        except zlib.error as e:
            _note(damage, path, pos, "corrupt-gzip", str(e))
            nxt = _gzip_resync(buf, pos + 1)
            tail = b""
            if nxt < 0:
                return
            pos, dobj, raw = nxt, zlib.decompressobj(-15), True
            continue
        text, tail = _whole_lines(tail, out)
        if text:
            yield text
        if dobj.eof:
            used = len(data) - len(dobj.unused_data)
            pos += used
            rest = buf[pos : pos + 2]
            if raw:
                pos += 8  # gzip trailer (CRC32, ISIZE) after the last raw deflate block
                rest = buf[pos : pos + 2]
            if rest == GZIP_MAGIC:  # another member (DFTracer writes several)
                dobj, raw = zlib.decompressobj(31), False
                continue
            if pos < size and buf[pos:size].strip(b"\0"):
                _note(damage, path, pos, "corrupt-gzip", f"{size - pos} bytes after the gzip stream")
            break
        pos += len(data)
    else:
        if not dobj.eof and size:
            _note(damage, path, size, "truncated-gzip",
                  "stream cut off; read up to the last complete line")
            tail = b""
    if tail:
        yield tail + b"\n"


def iter_blocks(path: str, damage: list | None = None) -> Iterator[bytes]:
    """Yield the decompressed text of a file as blocks of whole lines.

    Every block ends with a newline. Memory stays at about one zstd frame or a few MB.
    """
    size = os.path.getsize(path)
    if size == 0:
        _note(damage, path, 0, "empty-file", "the file is empty")
        return
    codec = detect_codec(path)
    if codec == "plain":
        yield from _plain_blocks(path, 0, size)
        return
    buf = _open_map(path)
    try:
        if codec == "zstd":
            yield from _zstd_blocks(path, buf, 0, size, damage)
        else:
            yield from _gzip_blocks(path, buf, damage)
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


SCAN_BYTES = 16 << 20  # JSON text scanned at a time into one batch


class _TextScan:
    """JSON text gathered and scanned into one batch each SCAN_BYTES."""

    def __init__(self, names_apart: bool = False) -> None:
        self.text: list[bytes] = []
        self.size = 0
        self.names_apart = names_apart

    def add(self, block: bytes):
        """The batch of the text so far once it is SCAN_BYTES, else None."""
        self.text.append(block)
        self.size += len(block)
        return self.flush() if self.size >= SCAN_BYTES else None

    def flush(self):
        """The batch of the text so far (None when there is none)."""
        if not self.text:
            return None
        batch = _native.scan_json(b"".join(self.text), self.names_apart)
        self.text, self.size = [], 0
        return batch


def _text_batches(blocks: Iterator[bytes], names_apart: bool = False) -> Iterator:
    scan = _TextScan(names_apart)
    for block in blocks:
        if (batch := scan.add(block)) is not None:
            yield batch
    if (batch := scan.flush()) is not None:
        yield batch


def batches_of_text(text: bytes) -> Iterator:
    """JSON lines in memory as column batches (as iter_batches gives a file's)."""
    return _text_batches(iter([text]))


AHEAD_FRAMES = 2  # compact frames given to `ahead` to decode before the one the reader takes


def _zstd_batches(path, buf, start, end, damage, names_apart: bool = False, ahead=None) -> Iterator:
    """A compact frame decoded straight to columns; runs of JSON-form frames scanned. `ahead`:
    an executor (submit(fn, *args) -> a job: result() gives fn's, cancel()) that decodes the next
    compact frames meanwhile; the frames still come in order, their damage noted in order."""
    tail = b""
    scan = _TextScan(names_apart)
    # compact frames given to `ahead`: (job, status, pos, where its damage note would go: the
    # notes' count then, and how many notes of the frames before it had been put in then)
    pending: collections.deque = collections.deque()
    put_in = 0

    def decoded(batch, status, pos, at=None):
        nonlocal put_in
        if batch.damaged and status == "ok":
            lines = batch.rows + len(batch.meta) + batch.name_count
            _note(damage, path, pos, "corrupt-frame", f"compact frame damaged; {lines} lines decoded before it", at=at)
            put_in += 1
        return batch

    def oldest():
        job, status, pos, at, before = pending.popleft()
        # its note before those the walk made past this frame meanwhile
        return decoded(job.result(), status, pos, None if at is None else at + put_in - before)

    try:
        for out, status, pos in _zstd_contents(path, buf, start, end, damage):
            if status == "gap":
                tail = b""
                continue
            if out[:4] == COMPACT_MAGIC:
                if (text := scan.flush()) is not None:
                    yield text
                if ahead is None:
                    yield decoded(_native.decode_compact(out, names_apart), status, pos)
                    continue
                at = len(damage) if damage is not None else None
                pending.append((ahead.submit(_native.decode_compact, out, names_apart), status, pos, at, put_in))
                while len(pending) > AHEAD_FRAMES:
                    yield oldest()
                continue
            while pending:  # the frames before this text first
                yield oldest()
            whole, tail = _whole_lines(tail, out)
            if status == "truncated":
                tail = b""
            if whole and (text := scan.add(whole)) is not None:
                yield text
        while pending:
            yield oldest()
    finally:
        for job, *_ in pending:  # a reader that stopped early: not decoded for nothing
            job.cancel()
    if tail and (text := scan.add(tail + b"\n")) is not None:
        yield text
    if (text := scan.flush()) is not None:
        yield text


def iter_batches(path: str, damage: list | None = None, names_apart: bool = False,
                 ahead=None) -> Iterator:
    """The events of a file as column batches (`_native.Batch`: rows, meta lines, bad lines;
    `pyarrow.record_batch(batch)` gives the columns). Memory stays at about one frame, or 16 MB
    of text. `names_apart`: the file-name lines as the tracer writes them come in
    `Batch.names` (hashes, offsets and bytes of their paths), not among the meta lines.
    `ahead`: an executor that decodes the next compact frames meanwhile (_zstd_batches)."""
    size = os.path.getsize(path)
    if size == 0:
        _note(damage, path, 0, "empty-file", "the file is empty")
        return
    if detect_codec(path) != "zstd":
        yield from _text_batches(iter_blocks(path, damage), names_apart)
        return
    buf = _open_map(path)
    try:
        yield from _zstd_batches(path, buf, 0, size, damage, names_apart, ahead)
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


CLOCK_LINE = b'{"ph":"M","name":"iotrace_clock",'  # how the tracer starts the line (clock.py)


def clock_records(path: str) -> list[dict]:
    """The args of a file's iotrace_clock events (iotrace_format.clock), in file order, found in
    its decompressed text without decoding its events (a compact frame keeps metadata lines as
    their text): what a reader needs before a big file's events go by. Damage is read around
    silently (reading the events reports it)."""
    out: list[dict] = []

    def take(text) -> None:
        i = text.find(CLOCK_LINE)
        while i >= 0:
            j = text.find(b"\n", i)
            line = bytes(text[i : j if j >= 0 else len(text)]).rstrip().rstrip(b",]")
            try:
                args = json.loads(line).get("args")
            except ValueError:
                args = None
            if isinstance(args, dict):
                out.append(args)
            i = text.find(CLOCK_LINE, i + 1)

    size = os.path.getsize(path)
    if size and detect_codec(path) == "zstd":
        buf = _open_map(path)
        try:
            for content, _status, _pos in _zstd_contents(path, buf, 0, size, None):
                take(content)
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()
    else:
        for block in iter_blocks(path):
            take(block)
    return out


def iter_lines(path: str, damage: list | None = None) -> Iterator[bytes]:
    """Yield each event line of a trace without the `[` line, blank lines, and the trailing
    `,` or `]` of each line. Reads frame by frame with bounded memory; damage is appended
    to `damage` (if given) as Damage records and read around."""
    for block in iter_blocks(path, damage):
        for line in block.split(b"\n"):
            line = line.strip()
            if line.endswith((b",", b"]")):
                line = line[:-1].rstrip()
            if not line or line == b"[":
                continue
            if line.startswith(b"["):  # "[{...}" when the first event shares the line
                line = line[1:]
            yield line
