"""The compact form (IOTRACE_FORMAT=compact, `.iotc.zst`) against the JSON form it stands for.

Pinned here, with traced C programs (tests/c/compact_*.c):

* the same program gives the same lines in both forms, byte for byte apart from pid, tid and
  times; the events match what the program saw (ret, errno, offsets after scattered seeks);
* times decode exactly: every pread lies inside the program's own clock readings around it,
  at every IOTRACE_RESOLUTION, on two threads (negative gaps), without overlaps on a thread;
* frames: a frame holds 65,536 rows, files are named per frame (360 files, 145,082 events,
  every one resolved to its path), and the size (< 4 B/event, at least 2x below JSON);
* damage: cut files and damaged frames (`iotrace cat`, reader.iter_lines) give exactly the
  lines of the whole frames, and report the damage; the renderer survives random mutations;
* iotrace-analyze summarises both forms alike; `iotrace cat` prints JSON traces unchanged and
  compact traces as a valid JSON array.

Every run passes IOTRACE_FORMAT itself, so the file means the same under IOTRACE_TEST_FORMAT.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import iotrace
import iotrace_format
import pytest
import zstandard

import tracing
from tracing import TraceSet, parse_report, run_traced, uvarint
from iotrace_format import _native
from iotrace_format import reader

# tests/c/compact_workload.c: events per call name (it prints one report line per call)
WORKLOAD_COUNTS = {
    "creat": 1, "open": 3, "close": 3, "write": 16, "read": 27, "lseek": 26, "pread": 12,
    "pwrite": 8, "fstat": 1, "writev": 1, "readv": 1, "dup": 1, "stat": 2, "rename": 1,
    "unlink": 3, "fopen": 3, "fwrite": 10, "fseek": 1, "fread": 10, "fclose": 2,
}
WORKLOAD_SIZE = sum(1000 + 37 * i for i in range(16))  # a.bin after the 16 writes: 20440 B
MANY_FILES, MANY_PER_FILE = 360, 400  # tests/c/compact_many.c: 145,082 events
FRAME_ROWS = 65536  # rows per compact frame (csrc/output/writer.cc kCompactRows)
RESOLUTIONS = {"ns": 1, "10ns": 10, "100ns": 100, "us": 1000}
CLOCK_SLACK_NS = 50  # TSC -> CLOCK_MONOTONIC mapping error (csrc/core/clock.cc: ~10 ns)


# -- helpers ---------------------------------------------------------------------------------


def run_form(form: str, cmd, data: Path, base: Path, env: dict | None = None, **kw) -> TraceSet:
    """Run `cmd` traced in `form` (json|compact) with `data` recreated empty first (the same
    path for both forms, so file hashes agree), tracing only `data`."""
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    return run_traced(cmd, base, {"IOTRACE_FORMAT": form, **(env or {})}, include=[data],
                      trace_dir=tracing.fresh_dir(base, f"trace-{form}"), **kw)


def only_file(ts: TraceSet) -> str:
    (f,) = ts.files
    return f.path


def frames(raw: bytes) -> list[tuple[int, int, bytes]]:
    """(start, end, content) of each zstd frame of a whole file."""
    out = []
    for start, end, status in reader.zstd_frames(raw):
        assert status == "ok", (start, end, status)
        d = zstandard.ZstdDecompressor().decompressobj()
        out.append((start, end, d.decompress(raw[start:end])))
        assert d.eof and not d.unused_data
    return out


def render(content: bytes) -> bytes:
    """The JSON lines of an undamaged compact frame."""
    text, damaged = _native.compact_to_json(content)
    assert not damaged
    return text


def block_header(content: bytes) -> dict:
    """The header of a compact block (csrc/format/compact.cc finish): pid, res, rows, the 16 column
    lengths, and where the columns start."""
    assert content[:5] == b"IOTC\x01"
    vals, i = [], 5
    for _ in range(3 + 16):
        v, i = uvarint(content, i)
        vals.append(v)
    return dict(pid=vals[0], res=vals[1], rows=vals[2], lens=vals[3:], columns_at=i)


def event_lines(text: bytes) -> list[bytes]:
    """What reader.iter_lines yields for this text: lines without `[`, blanks, trailing , or ]."""
    out = []
    for line in text.split(b"\n"):
        line = line.strip()
        if line.endswith((b",", b"]")):
            line = line[:-1]
        if line and line != b"[":
            out.append(line)
    return out


def read_lines(path) -> tuple[list[bytes], list]:
    damage: list = []
    return list(reader.iter_lines(str(path), damage)), damage


def cat(*paths) -> subprocess.CompletedProcess:
    """`iotrace cat PATH...` as a command (bytes out)."""
    return subprocess.run([sys.executable, "-m", "iotrace", "cat", *map(str, paths)],
                          capture_output=True, timeout=60)


_MASK = re.compile(rb'"(pid|tid|ppid|wall_ns|mono_ns|cpu_ns|cpu_wait_ns|mpi_cpu_ns|host_cpu_wait_us)":\d+'
                   rb'|"(ts|dur)":-?[\d.]+|"form":"\w+"')


def masked(text: bytes) -> list[bytes]:
    """Lines with pid, tid, times and CPU times blanked: what two runs of one program share."""
    return [_MASK.sub(rb'"\1\2":_', line) for line in text.split(b"\n")]


def usec_to_ns(s: str) -> int:
    """'-12.345' (µs, 0-3 decimals as written) -> ns, exactly."""
    neg = s.startswith("-")
    whole, _, frac = s.lstrip("-").partition(".")
    v = int(whole) * 1000 + int((frac + "000")[:3])
    return -v if neg else v


def compile_prog(factory, source: str, flags=()) -> str:
    build = factory.getbasetemp() / "cbuild"
    build.mkdir(exist_ok=True)
    return tracing.compile_c(build, source, name=source[:-2], flags=flags)


# -- shared runs ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    """tests/c/compact_workload.c traced in both forms: {"json": TraceSet, "compact": ...}."""
    exe = compile_prog(tmp_path_factory, "compact_workload.c", flags=("-fno-builtin",))
    base = tmp_path_factory.mktemp("workload")
    data = base / "data"
    return {form: run_form(form, [exe, data], data, base) for form in ("json", "compact")}


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """tests/c/compact_many.c in both forms, one 32 MiB buffer drained at exit (so compact
    frames are cut by their row limit, not by drains): {"json": TraceSet, "compact": ...}."""
    exe = compile_prog(tmp_path_factory, "compact_many.c")
    base = tmp_path_factory.mktemp("many")
    data = base / "data"
    out = {}
    for form in ("json", "compact"):
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir()
        (data / "big.bin").write_bytes(bytes(range(256)) * 256)
        out[form] = run_traced([exe, data, str(MANY_FILES), str(MANY_PER_FILE)], base,
                               {"IOTRACE_FORMAT": form, "IOTRACE_BUFFER_SIZE": str(32 << 20)},
                               include=[data], flush_ms=60000,
                               trace_dir=tracing.fresh_dir(base, f"trace-{form}"))
    out["data"] = data
    return out


# -- 1. the same events in both forms ---------------------------------------------------------


def test_same_lines_in_both_forms(workload):
    """One program, traced as JSON and as compact: the same lines apart from pid, tid and times."""
    js, cp = workload["json"], workload["compact"]
    assert only_file(js).endswith(".pfw.zst") and only_file(cp).endswith(".iotc.zst")
    assert js.stdout == cp.stdout  # the program saw the same results
    assert cp.process()["form"] == "compact" and js.process()["form"] == "json"
    assert (cp.process()["compression"], cp.process()["version"]) == ("zstd", iotrace.FORMAT_VERSION)
    assert cp.files[0].closed and not cp.files[0].bad_lines
    jtext, ctext = js.files[0].text.encode(), cp.files[0].text.encode()
    assert masked(ctext) == masked(jtext)

    def strip(ts):
        return [(e["name"], e["cat"], e["args"], e["fname"], e["fname2"]) for e in ts.events()]

    assert strip(cp) == strip(js)
    assert len(strip(cp)) == sum(WORKLOAD_COUNTS.values()) == 132
    assert cp.counts() == WORKLOAD_COUNTS


MIXED_WORKLOAD = r"""
import os, sys, iotrace
fd = os.open(os.path.join(sys.argv[1], "out"), os.O_CREAT | os.O_WRONLY, 0o644)
for i in range(3000):
    os.write(fd, b"x" * (i % 7 + 1))
    if i % 3 == 0:
        iotrace.instant("mark", i=i)
    elif i % 5 == 0:
        iotrace.counter("c", v=i)
os.close(fd)
"""

PY_WORKLOAD = r"""
import asyncio, os, sys, iotrace
data = sys.argv[1]
fd = os.open(os.path.join(data, "p.bin"), os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"z" * 4096)

@iotrace.trace(cat="fetch", args=["i", "tag"])
def load(i, tag):
    return os.pread(fd, 64, i * 64)

@iotrace.trace
def nested(n):
    return [load(i, 'q"uote\\ é ' + chr(0x1F600)) for i in range(n)]

@iotrace.trace(name="gen.items")
def items(n):
    yield from range(n)

@iotrace.trace(cat="async")
async def task(k):
    await asyncio.sleep(0)
    os.pread(fd, 8, k)
    return k

async def main():
    return await asyncio.gather(*(task(k) for k in range(3)))

for step in range(20):
    with iotrace.region("step", cat="train", step=step) as r:
        nested(3)
        r.update(nbytes=step * 10)
    for x in iotrace.iter(items(2), name="batch"):
        pass
    iotrace.instant("mark", step=step)
    iotrace.counter("train", loss=1.0 / (step + 1))
asyncio.run(main())
os.close(fd)
"""


def kinds_of(path: str) -> Counter:
    """Rows per kind byte over all blocks of a compact file."""
    out: Counter = Counter()
    for _, _, content in frames(Path(path).read_bytes()):
        h = block_header(content)
        out.update(content[h["columns_at"]:h["columns_at"] + h["lens"][0]])
    return out


def test_python_events_same_lines_in_both_forms(tmp_path):
    """Python events (nested, generator, iterator, asyncio tasks on virtual tids, escaped and
    non-ASCII args) between I/O calls: the same lines in both forms, stored as span rows."""
    data = tmp_path / "data"
    cmd = [sys.executable, "-I", "-c", PY_WORKLOAD, data]
    js, cp = (run_form(form, cmd, data, tmp_path) for form in ("json", "compact"))
    assert masked(cp.files[0].text.encode()) == masked(js.files[0].text.encode())
    spans = [e for e in cp.events() if e["ph"] == "X" and e["cat"] not in ("posix", "stdio")]
    assert Counter(e["name"] for e in spans) == {
        "step": 20, "nested": 20, "load": 60, "gen.items": 40, "batch": 40, "task": 3}
    assert {e["tid"] for e in spans if e["name"] == "task"} != {cp.pid}  # virtual tids
    (f,) = [e for e in spans if e["name"] == "load"][:1]
    assert f["args"] == {"i": 0, "tag": 'q"uote\\ é \U0001F600'}
    rows = kinds_of(only_file(cp))
    assert rows[255] == len(spans)  # every complete Python event is a span row, not text


def test_fork_with_a_frame_open(tmp_path):
    """A fork while the parent's compact frame is still open (full buffers are drained into it,
    the frame is written only at the time bound): the child's frames name their own files."""
    code = """
import os, sys, time
fd = os.open(os.path.join(sys.argv[1], "x.bin"), os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"x" * 4096)
for i in range(3000):  # ~5 full 64 KiB buffers: drained into the open frame
    os.pread(fd, 1, i % 4096)
time.sleep(0.3)  # the writer drains them; the 60 s time bound keeps the frame open
pid = os.fork()
if pid == 0:
    for i in range(5):
        os.pread(fd, 2, i)
    os._exit(0)
os.waitpid(pid, 0)
"""
    data = tmp_path / "data"
    ts = run_form("compact", [sys.executable, "-I", "-c", code, data], data, tmp_path,
                  env={"IOTRACE_BUFFER_SIZE": "64k"}, flush_ms=60000)
    (child,) = [p for p in ts.pids if p != ts.pid]
    for f in ts.files:
        for _, _, content in frames(Path(f.path).read_bytes()):
            render(content)  # asserts the block is undamaged
    reads = [(e["args"]["size"], e["args"]["offset"])
             for e in ts.events(pid=child, name=("pread", "pread64"))]
    assert reads == [(2, i) for i in range(5)]
    assert ts.count(pid=ts.pid, name=("pread", "pread64")) == 3000


def test_compact_events_match_the_program(workload):
    """The compact events carry the rets, errnos, offsets and files the program had."""
    ts = workload["compact"]
    data = Path(ts.files[0].header["cmdline"][1])
    events = ts.events()
    report = parse_report(ts.stdout)
    assert [e["name"] for e in events] == [r[0] for r in report]
    for e, (_name, ret, err) in zip(events, report):
        assert e["args"]["ret"] == ret, (e, ret)
        if "errno" in e["args"]:
            assert (ret, e["args"]["errno"]) in ((-1, err), (0, err)), (e, err)  # fopen: NULL
    failed = [(e["name"], os.path.basename(e["fname"]), e["args"]["errno"])
              for e in events if "errno" in e["args"]]
    assert failed == [("stat", "missing", 2), ("open", "x", 2), ("open", "a.bin", 17),
                      ("fopen", "missing", 2), ("unlink", "b.bin", 2)]
    # offsets after scattered lseeks, preads at scattered offsets: far from the guessed position
    reads = [e for e in events if e["name"] == "read"][:24]
    assert [e["args"]["offset"] for e in reads] == [i * 7919 % WORKLOAD_SIZE for i in range(24)]
    assert [e["args"]["size"] for e in reads] == [100 + 13 * i for i in range(24)]
    preads = ts.events(name="pread")
    assert [e["args"]["offset"] for e in preads] == [i * 2039 % (WORKLOAD_SIZE + 600) for i in range(12)]
    assert [e["args"]["ret"] for e in preads] == \
        [max(0, min(512, WORKLOAD_SIZE - i * 2039 % (WORKLOAD_SIZE + 600))) for i in range(12)]
    (dup,) = ts.events(name="dup")
    assert (dup["args"]["fd"], dup["args"]["fd2"], dup["args"]["ret"]) == (3, 4, 4)
    (ren,) = ts.events(name="rename")
    assert (ren["fname"], ren["fname2"]) == (str(data / "a.bin"), str(data / "b.bin"))
    assert {e["fname"] for e in events} == {str(data / n) for n in
                                            ("a.bin", "b.bin", "s.txt", "missing", "nodir/x")}


# -- 2. times ---------------------------------------------------------------------------------


@pytest.mark.parametrize("resolution", list(RESOLUTIONS))
def test_times_decode_exactly(tmp_path_factory, resolution):
    """Each pread's [ts, ts+dur] lies within the program's clock readings around the call."""
    res = RESOLUTIONS[resolution]
    exe = compile_prog(tmp_path_factory, "compact_times.c")
    base = tmp_path_factory.mktemp(f"times-{resolution}")
    data = base / "data"
    n, threads = 2000, 2
    data.mkdir()
    (data / "f.bin").write_bytes(b"t" * 65536)
    ts = run_traced([exe, data / "f.bin", str(n), str(threads)], base,
                    {"IOTRACE_FORMAT": "compact", "IOTRACE_RESOLUTION": resolution},
                    include=[data])
    (f,) = ts.files
    assert f.path.endswith(".iotc.zst") and f.header["resolution_ns"] == res
    windows: dict[int, list[tuple[int, int]]] = {}
    for line in ts.stdout.splitlines():
        tid, before, after = map(int, line.split())
        windows.setdefault(tid, []).append((before, after))
    decimals = {1: 3, 10: 2, 100: 1, 1000: 0}[res]
    num = rf"-?\d+\.\d{{{decimals}}}" if decimals else r"-?\d+"
    times = re.compile(rf'^{{"ph":"X","name":"pread","cat":"posix","pid":\d+,"tid":(\d+),'
                       rf'"ts":({num}),"dur":({num}),')
    spans: dict[int, list[tuple[int, int]]] = {}
    for line in f.lines:
        if '"name":"pread"' in line:
            m = times.match(line)
            assert m, line
            start = usec_to_ns(m[2])
            spans.setdefault(int(m[1]), []).append((start, start + usec_to_ns(m[3])))
    assert sorted(spans) == sorted(windows) and len(spans) == threads
    slack = res // 2 + CLOCK_SLACK_NS  # start and end are each rounded to the nearest unit
    for tid, sp in spans.items():
        assert len(sp) == n
        for (s, e), (before, after) in zip(sp, windows[tid]):
            assert before - slack <= s <= e <= after + slack, (resolution, before, s, e, after)
        for (s0, e0), (s1, e1) in zip(sp, sp[1:]):
            assert s0 <= s1 and e0 <= s1, (resolution, (s0, e0), (s1, e1))  # in order, no overlap


# -- 3. many frames, many files, size ---------------------------------------------------------


def test_many_frames_and_files(many):
    """145,082 events over 360 files: frames cut at 65,536 rows, every event on its own file."""
    ts, data = many["compact"], many["data"]
    path = only_file(ts)
    assert path.endswith(".iotc.zst")
    fr = frames(Path(path).read_bytes())
    heads = [block_header(c) for _, _, c in fr]
    assert len(fr) >= 4
    # The file's start is written when the process starts, in a frame of its own: `[` (not a
    # row) and the header lines (iotrace_process, process_name).
    assert heads[0]["rows"] == 2 and render(fr[0][2]).startswith(b'[\n{"ph":"M","name":"iotrace_process"')
    assert [h["rows"] for h in heads[1:3]] in ([FRAME_ROWS] * 2, [FRAME_ROWS, FRAME_ROWS + 1],
                                               [FRAME_ROWS + 1, FRAME_ROWS])
    assert all(h["rows"] <= FRAME_ROWS + 1 for h in heads)
    assert {h["pid"] for h in heads} == {ts.pid} and {h["res"] for h in heads} == {1}
    assert b"".join(render(c) for _, _, c in fr).decode() == ts.files[0].text
    # Each frame lists its own files: the second names its new files (FH lines) and lists them
    # with big.bin (and the file open across the cut, if any) again, 8 bytes each.
    new_files = render(fr[2][2]).count(b'"ph":"M","name":"FH"')
    assert new_files > 0 and heads[2]["lens"][6] in (8 * (new_files + 1), 8 * (new_files + 2))

    n_io = MANY_FILES * MANY_PER_FILE
    assert ts.counts() == {"open": MANY_FILES + 1, "write": MANY_FILES, "close": MANY_FILES + 1,
                           "pread": n_io}
    assert len(ts.files[0].fh) == MANY_FILES + 1
    by_file: dict[str, list] = {}
    for e in ts.events():
        by_file.setdefault(e["fname"], []).append(e)
    assert len(by_file) == MANY_FILES + 1
    for i in range(MANY_FILES):
        evs = by_file[str(data / f"f{i:04d}")]
        assert [e["name"] for e in evs] == ["open", "write", "close"], i
        assert evs[1]["args"] == {"fhash": tracing.fnv1a_hex(str(data / f"f{i:04d}")), "fd": 4,
                                  "size": i + 1, "offset": 0, "ret": i + 1}
    big = by_file[str(data / "big.bin")]
    preads = [e for e in big if e["name"] == "pread"]
    assert [e["name"] for e in big] == ["open"] + ["pread"] * n_io + ["close"]
    assert [e["args"]["offset"] for e in preads] == [k * 256 % 65536 for k in range(n_io)]
    assert all(e["args"]["size"] == e["args"]["ret"] == 256 and e["args"]["fd"] == 3
               for e in preads)


def test_names_apart_in_compact_frames(many):
    """A reader that asks for the file names apart (the analyzer) gets each frame's FH lines as
    numbers and paths, the same as its rendered FH lines, and the rest of its lines as before."""
    fr = frames(Path(only_file(many["compact"])).read_bytes())
    names, meta = [], 0
    for _, _, c in fr:
        b, apart = _native.decode_compact(c), _native.decode_compact(c, names_apart=True)
        hashes, offsets, paths = apart.names
        offs = [int.from_bytes(offsets[8 * i:8 * i + 8], "little") for i in range(len(offsets) // 8)]
        got = [(f"{int.from_bytes(hashes[8 * i:8 * i + 8], 'little'):016x}", paths[offs[i]:offs[i + 1]].decode())
               for i in range(len(hashes) // 8)]
        fh = [json.loads(ln.rstrip(b",]"))["args"] for ln in render(c).splitlines() if b'"name":"FH"' in ln]
        assert got == [(a["value"], a["name"]) for a in fh]
        assert len(apart.meta) == len(b.meta) - len(got) and b.rows == apart.rows
        names += got
        meta += len(apart.meta)
    assert len(names) == MANY_FILES + 1 and meta >= 2


def test_compact_size(many):
    """The compact file takes < 4 B per event, and the JSON form of the same run at least 2x more."""
    cp, js = only_file(many["compact"]), only_file(many["json"])
    events = 2 * MANY_FILES + 2 + MANY_FILES * MANY_PER_FILE + MANY_FILES
    assert many["compact"].count() == events
    assert tracing.decompress(js).count(b'"ph":"X"') == events
    per_event = os.path.getsize(cp) / events
    assert per_event < 4.0, per_event
    assert os.path.getsize(js) >= 2 * os.path.getsize(cp), (os.path.getsize(js), os.path.getsize(cp))


# -- 4. damage ----------------------------------------------------------------------------------


def test_cut_file_gives_the_whole_frames(many, tmp_path):
    """A compact file cut anywhere: exactly the lines of the whole frames before the cut, and one
    truncated-frame damage (none when cut between frames)."""
    raw = Path(only_file(many["compact"])).read_bytes()
    fr = frames(raw)
    texts = [render(c) for _, _, c in fr]
    (s0, e0, _), (s1, e1, _), (s2, e2, _) = fr[:3]
    last_s, last_e, _ = fr[-1]
    # a frame ends in its 4-byte content checksum: cuts 5 bytes before the end fall in its data
    cuts = [last_s + 4, (last_s + last_e) // 2, last_e - 5,  # inside the last frame
            s2 + 20, (s2 + e2) // 2, e2 - 5, (s1 + e1) // 2, s0 + 12, e0 - 5,
            s1, s2]  # between frames: a clean shorter file
    cut = tmp_path / "cut.iotc.zst"
    for i, n in enumerate(cuts):
        k = max(j for j, (s, _, _) in enumerate(fr) if s <= n)  # the frame the cut is in
        whole = b"".join(texts[:k])
        cut.write_bytes(raw[:n])
        lines, damage = read_lines(cut)
        assert lines == event_lines(whole), n
        at_boundary = n == fr[k][0]
        assert [(d.kind, d.offset) for d in damage] == ([] if at_boundary else
                                                        [("truncated-frame", fr[k][0])]), n
        if i in (0, 1, 2, 7, 9):  # the command, for a few of them
            r = cat(cut)
            assert r.stdout == whole, n
            assert r.returncode == (0 if at_boundary else 1), (n, r.stderr)
            assert (b"truncated-frame" in r.stderr) == (not at_boundary), r.stderr


def test_cut_in_the_checksum_keeps_the_frame(many, tmp_path):
    """Cut inside the last frame's checksum: its rows are all there, so they are read, and the
    cut is still reported."""
    raw = Path(only_file(many["compact"])).read_bytes()
    fr = frames(raw)
    cut = tmp_path / "cut.iotc.zst"
    cut.write_bytes(raw[:fr[-1][1] - 2])
    lines, damage = read_lines(cut)
    assert lines == event_lines(b"".join(render(c) for _, _, c in fr))
    assert [(d.kind, d.offset) for d in damage] == [("truncated-frame", fr[-1][0])]


def test_frames_inflate_as_zstandard_does(many):
    """The reader's zstd decompression (C++, without the GIL) gives what python-zstandard's
    stream decoder gives for every frame, whole, cut anywhere, or with a bit flipped: the same
    content, and an error exactly where zstandard raises one. Each run traces anew: other
    frames, other damage."""
    import random

    raw = Path(only_file(many["compact"])).read_bytes()
    rng = random.Random(7)
    errors = cut = 0
    for start, end, _ in frames(raw):
        for k in range(40):
            data = bytearray(raw[start:end])
            if k == 0:
                pass
            elif k % 2:
                data = data[:rng.randrange(len(data))]
                cut += 1
            else:
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
            try:
                want, want_error = zstandard.ZstdDecompressor().decompressobj().decompress(bytes(data)), None
            except zstandard.ZstdError as e:
                want, want_error = b"", str(e)
            got, error = _native.inflate_frame(bytes(data))
            # (the message may name another check: zstandard bundles its own zstd)
            assert (got, error is None) == (want, want_error is None), (start, k, error, want_error)
            assert error is None or error.startswith("zstd decompressor error: ")
            errors += error is not None
    assert cut >= 20 * len(frames(raw)) and errors > 0


def test_damaged_middle_frame_is_read_around(many, tmp_path):
    """Flipped bytes at the end of the second frame's compressed data: that frame is reported
    corrupt, the frames before and after it are read whole."""
    raw = bytearray(Path(only_file(many["compact"])).read_bytes())
    fr = frames(bytes(raw))
    texts = [render(c) for _, _, c in fr]
    s, e, _ = fr[1]
    # The end of the last block: the sequence streams zstd reads first (flips further in can
    # decode to wrong bytes without an error: see test_flipped_bit_is_never_silent).
    raw[e - 16:e] = bytes(b ^ 0xFF for b in raw[e - 16:e])
    bad = tmp_path / "flipped.iotc.zst"
    bad.write_bytes(raw)
    r = cat(bad)
    assert r.returncode == 1
    assert r.stdout == texts[0] + b"".join(texts[2:])
    assert b"corrupt-frame at byte %d" % s in r.stderr, r.stderr
    lines, damage = read_lines(bad)
    assert lines == event_lines(r.stdout)
    assert [(d.kind, d.offset) for d in damage] == [("corrupt-frame", s)]


def test_flipped_bit_is_never_silent(workload, tmp_path):
    """A bit flipped anywhere in a compact file: damage is reported, or the lines are unchanged."""
    path = only_file(workload["compact"])
    raw = Path(path).read_bytes()
    text = b"".join(reader.iter_blocks(path))
    flipped = tmp_path / "bit.iotc.zst"
    silent = []
    for i in range(len(raw)):
        b = bytearray(raw)
        b[i] ^= 0x01
        flipped.write_bytes(b)
        damage: list = []
        if b"".join(reader.iter_blocks(str(flipped), damage)) != text and not damage:
            silent.append(i)
    assert not silent, f"{len(silent)} of {len(raw)} flips give wrong lines silently: {silent[:10]}"


def test_damaged_compact_block_renders_up_to_the_damage(many, tmp_path):
    """A valid zstd frame whose compact block has a bad row: the rows before it, corrupt-frame, and
    the frames after it."""
    raw = Path(only_file(many["compact"])).read_bytes()
    fr = frames(raw)
    texts = [render(c) for _, _, c in fr]
    content = bytearray(fr[1][2])
    h = block_header(bytes(content))
    k = 1000  # kinds[k] = 255: no such call
    kinds = content[h["columns_at"]:h["columns_at"] + h["lens"][0]]
    io_rows_before = sum(1 for b in kinds[:k] if b != 0)
    content[h["columns_at"] + k] = 0xFF
    partial, damaged = _native.compact_to_json(bytes(content))
    assert damaged
    assert texts[1].startswith(partial) and partial.endswith(b"\n")
    assert partial.count(b"\n") == k and partial.count(b'"ph":"X"') == io_rows_before

    frame = zstandard.ZstdCompressor().compress(bytes(content))
    bad = tmp_path / "block.iotc.zst"
    bad.write_bytes(raw[:fr[1][0]] + frame + raw[fr[1][1]:])
    r = cat(bad)
    assert r.returncode == 1
    assert r.stdout == texts[0] + partial + b"".join(texts[2:])
    assert b"corrupt-frame at byte %d" % fr[1][0] in r.stderr, r.stderr
    lines, damage = read_lines(bad)
    assert lines == event_lines(r.stdout)
    assert [(d.kind, d.offset) for d in damage] == [("corrupt-frame", fr[1][0])]


def raw_block_frame(content: bytes) -> bytes:
    """A zstd frame holding `content` in one raw (stored) block: what zstd writes for a small
    incompressible block, e.g. a frame of one I/O row from a periodic flush."""
    assert len(content) < 1 << 17
    fhd = 0x20 | (0x40 if len(content) >= 256 else 0)  # single segment, 1 or 2-byte content size
    size = bytes([len(content)]) if len(content) < 256 else (len(content) - 256).to_bytes(2, "little")
    block = ((len(content) << 3) | 1).to_bytes(3, "little")  # last block, raw
    return reader.ZSTD_MAGIC + bytes([fhd]) + size + block + content


def test_cut_raw_block_frames_anywhere(workload, tmp_path):
    """Compact frames stored as raw zstd blocks, cut at every byte: the whole frames before the
    cut, damage unless the cut is between frames, never an exception."""
    contents = [c for _, _, c in frames(Path(only_file(workload["compact"])).read_bytes())]
    texts = [render(c) for c in contents]
    parts = [raw_block_frame(c) for c in contents]
    raw = b"".join(parts)
    starts = [sum(map(len, parts[:i])) for i in range(len(parts))]
    whole_file = tmp_path / "raw.iotc.zst"
    whole_file.write_bytes(raw)
    assert read_lines(whole_file) == (event_lines(b"".join(texts)), [])
    cut = tmp_path / "cut.iotc.zst"
    for n in range(len(raw)):
        k = max(j for j, s in enumerate(starts) if s <= n)
        cut.write_bytes(raw[:n])
        damage: list = []
        text = b"".join(reader.iter_blocks(str(cut), damage)) if n else b""
        assert text == b"".join(texts[:k]), n
        assert bool(damage) == (n != starts[k]), (n, damage)


# -- 5. the renderer against random input -------------------------------------------------------

FUZZ = r"""
import random, sys
from iotrace_format import _native

small, big = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
rng = random.Random(20261122)
seen = {"none": 0, "damaged": 0, "clean": 0}

def check(data, full=None):
    r = _native.compact_to_json(bytes(data))
    if r is None:
        assert len(data) < 4 or data[:4] != b"IOTC", data[:8]
        seen["none"] += 1
        return None
    text, damaged = r
    assert isinstance(text, bytes) and isinstance(damaged, bool)
    seen["damaged" if damaged else "clean"] += 1
    if full is not None:  # a cut block: damaged, and only lines of the whole block
        assert damaged and full.startswith(text), len(data)
    return r

full = check(small)[0]
for n in range(len(small)):  # every truncation
    if n < 4:
        assert check(small[:n]) is None  # shorter than the magic: not a block
    else:  # from the magic on, a cut block (one cut inside its header renders nothing)
        check(small[:n], full)
for content, rounds in ((small, 2500), (big, 150)):
    for _ in range(rounds):
        d = bytearray(content)
        what = rng.randrange(4)
        if what == 0:  # flip a few bytes
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(d))
                d[i] ^= 1 << rng.randrange(8) if rng.random() < 0.5 else rng.randrange(1, 256)
        elif what == 1:  # a byte in the header (varints: rows, column lengths)
            i = rng.randrange(5, min(40, len(d)))
            d[i] = rng.randrange(256)
        elif what == 2:  # insert random bytes
            i = rng.randrange(len(d) + 1)
            d[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:  # delete a stretch
            i = rng.randrange(len(d))
            del d[i:i + rng.randint(1, 32)]
        check(d)
print(seen["none"], seen["damaged"], seen["clean"])
"""


def test_renderer_survives_mutations(workload, many, tmp_path):
    """~4000 truncated and mutated compact blocks: compact_to_json never crashes, and a cut block is
    always reported damaged."""
    small = frames(Path(only_file(workload["compact"])).read_bytes())[1][2]  # [0]: the header alone
    big = frames(Path(only_file(many["compact"])).read_bytes())[2][2]
    (tmp_path / "small").write_bytes(small)
    (tmp_path / "big").write_bytes(big)
    (tmp_path / "fuzz.py").write_text(FUZZ)
    assert len(small) > 1000
    r = subprocess.run([sys.executable, tmp_path / "fuzz.py", tmp_path / "small", tmp_path / "big"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])  # a signal: negative
    none, damaged, clean = map(int, r.stdout.split())
    assert none >= 5 and damaged > len(small) and clean > 0, r.stdout


# -- 6. iotrace-analyze ---------------------------------------------------------------------------


def test_analyzer_agrees_on_both_forms(workload, tmp_path):
    """iotrace-analyze gives the same call counts, bytes, files and access patterns for both forms."""
    from iotrace_analyzer.cli import main

    sums = {}
    for form in ("json", "compact"):
        out = tmp_path / f"{form}.json"
        assert main([workload[form].dir, "--summary", str(out), "-q", "--engine", "local"]) == 0
        sums[form] = json.loads(out.read_text())
    for S in sums.values():
        assert S["damage"]["damaged_files"] == 0
        assert S["job"]["events"] == S["job"]["complete_events"] == 132

    def calls(S):
        return {c["name"]: (c["count"], c["bytes"], c["errors"], c["size_min"], c["size_max"])
                for c in S["calls"]}

    def files(S):
        return {f["file"]: (f["count"], f["bytes_read"], f["bytes_written"]) for f in S["files"]}

    def access(S):
        return {op: {k: S["access"][op][k] for k in ("first", "consecutive", "sequential", "random")}
                for op in ("read", "write")}

    js, cp = sums["json"], sums["compact"]
    assert calls(cp) == calls(js) and files(cp) == files(js) and access(cp) == access(js)
    assert {k: v[0] for k, v in calls(cp).items()} == WORKLOAD_COUNTS
    report = parse_report(workload["compact"].stdout)
    assert calls(cp)["pread"][1] == sum(r for name, r, _ in report if name == "pread")
    assert calls(cp)["write"][1] == WORKLOAD_SIZE


def test_decoded_columns_equal_the_rendered_lines(workload, many, tmp_path):
    """The analyzer's column decoder gives, row for row, the values of the lines the same
    block renders to: frames of 65,536 rows whose args are present on some calls and null on
    others (validity bits across every word boundary), and frames where span rows and text
    rows (instants, counters) come between the I/O rows (the decoder stores I/O rows in place
    and pushes the others: the columns change mode row by row)."""
    import pyarrow as pa

    data = tmp_path / "data"
    py = run_form("compact", [sys.executable, "-I", "-c", PY_WORKLOAD, data], data, tmp_path / "py")
    kinds = kinds_of(only_file(py))
    assert kinds[255] == 183 and kinds[0] and sum(n for k, n in kinds.items() if 0 < k < 255) == 66
    # writes with an instant or a counter (text rows) right after some of them
    mixed = run_form("compact", [sys.executable, "-I", "-c", MIXED_WORKLOAD, data], data, tmp_path / "mixed")
    write = 1 + next(n for n, name, _cat, _family in iotrace_format.calls() if name == "write")
    blocks = [(block_header(c), c) for _, _, c in frames(Path(only_file(mixed)).read_bytes())]
    kind_rows = [c[h["columns_at"]:h["columns_at"] + h["lens"][0]] for h, c in blocks]
    assert sum(k.count(bytes([write, 0])) for k in kind_rows) == 1000 + 400  # instants, counters
    ints = ("fd", "fd2", "size", "offset", "ret", "bytes", "errno", "flags", "mode")
    checked = 0
    for ts in (workload["compact"], many["compact"], py, mixed):
        for _, _, content in frames(Path(only_file(ts)).read_bytes()):
            rows = pa.record_batch(_native.decode_compact(content)).to_pylist()
            lines = [e for e in map(json.loads, event_lines(render(content))) if e["ph"] != "M"]
            assert len(rows) == len(lines)
            for r, e in zip(rows, lines):
                a = e.get("args", {})
                assert (r["ph"], r["name"], r["cat"], r["pid"], r["tid"]) == \
                    (e["ph"], e["name"], e.get("cat"), e["pid"], e["tid"])
                assert (r["ts_ns"], r["dur_ns"]) == (round(e["ts"] * 1000),
                                                     round(e["dur"] * 1000) if "dur" in e else None)
                assert (r["fhash"], r["fhash2"]) == (a.get("fhash"), a.get("fhash2"))
                assert {k: r[k] for k in ints} == {k: a.get(k) for k in ints}, e
            checked += len(rows)
    py_events = sum(1 for e in (*py.events(), *mixed.events()) if e["ph"] != "M")
    assert checked == 132 + 145_082 + py_events  # the workload's events, many's, the Python ones'


# -- 7. iotrace cat ------------------------------------------------------------------------------


def test_cat_json_trace_is_its_text(workload):
    """`iotrace cat` on a JSON trace prints its decompressed text unchanged."""
    path = only_file(workload["json"])
    with open(path, "rb") as f:
        text = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()
    r = cat(path)
    assert (r.returncode, r.stderr) == (0, b"")
    assert r.stdout == text and text.startswith(b"[\n") and text.endswith(b"]\n")


def test_cat_compact_trace_is_a_json_array(workload, tmp_path):
    """`iotrace cat` on a closed compact trace prints one valid JSON array; no trace: status 2."""
    ts = workload["compact"]
    r = cat(ts.dir)
    assert (r.returncode, r.stderr) == (0, b"")
    records = json.loads(r.stdout)
    assert records == ts.files[0].records
    assert Counter(e["name"] for e in records if e["ph"] == "X") == WORKLOAD_COUNTS
    assert records[0]["name"] == "iotrace_process" and records[-1]["name"] == "iotrace_end"
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cat(empty)
    assert r.returncode == 2 and b"no trace files" in r.stderr
