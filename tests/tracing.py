"""The test suite's one way to run something under the tracer and read what it wrote.

    ts = run_traced([exe, str(d)], tmp_path, include=[d])
    ts.count("read", fname=str(d / "data"))      # -> 3
    ev = ts.events(name="pread")[0]               # decoded event, ev["fname"] = path from FH
    ts.process(ts.pid)["role"]                     # -> "main"

`run_traced` sets LD_PRELOAD (the installed `libiotrace.so`) and IOTRACE_DIR (a fresh folder
under tmp_path) and removes every other IOTRACE_* variable of the calling environment, so
a test sees only the settings it passes.  `TraceSet` decodes every per-process file the run
left (zstd frames, gzip, plain) following docs/trace-format.md; `read_trace_file` decodes
one file.  `compile_c` builds a small C program (cc -O0), skipping the test when there is
no compiler.

Nothing here asserts the format: the decoders are tolerant (a crash-truncated file decodes
up to its last whole line) and record what they saw (`TraceFile.closed`, `.bad_lines`), so
tests/test_format.py can pin the shape and other tests can just count.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import os
import shutil
import subprocess
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable, Sequence

import iotrace

PRELOAD = iotrace.preload_path()
TRACE_SUFFIXES = (".pfw.zst", ".pfw.gz", ".pfw", ".iotc.zst")
# IOTRACE_TEST_FORMAT=json|compact runs every traced program of the suite in that form
# (IOTRACE_FORMAT); unset, the tracer's own default applies: compact with zstd, json with gzip
# or no compression. The decoders below render compact frames back to JSON lines.
TEST_FORMAT = os.environ.get("IOTRACE_TEST_FORMAT", "")
ZSTD_FORM = TEST_FORMAT or "compact"  # the form of a zstd trace (the default compression)
ZST_SUFFIX = ".iotc.zst" if ZSTD_FORM == "compact" else ".pfw.zst"  # the default file suffix
EVENT_PHASES = ("X", "i", "C")


def fnv1a_hex(path: str) -> str:
    """The tracer's file hash (64-bit FNV-1a of the path bytes), as 16 hex digits."""
    h = 14695981039346656037
    for b in os.fsencode(path):
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def uvarint(b: bytes, i: int) -> tuple[int, int]:
    """An unsigned LEB128 varint at b[i] (compact blocks, protobuf): (value, next index)."""
    v = shift = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, i


# -- decoding ----------------------------------------------------------------------------


def decompress(path: str | os.PathLike) -> bytes:
    """The text of a trace file, decompressed by its suffix.

    zstd: every independent frame in turn; a frame cut off at the end (crash) is dropped.
    gzip: the first member, inflated as far as it goes (a cut-off member gives what was
    flushed).  Plain: as is.  Compact (.iotc.zst): each frame rendered to its JSON lines by
    the tracer's encoder; a damaged or cut-off frame is dropped.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".iotc.zst"):
        return b"".join(compact_frames_text(raw))
    if path.endswith(".zst"):
        import zstandard

        out = io.BytesIO()
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True)
        try:
            while chunk := reader.read(1 << 20):
                out.write(chunk)
        except zstandard.ZstdError:
            pass  # a truncated last frame: keep the whole frames before it
        return out.getvalue()
    if path.endswith(".gz"):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            return d.decompress(raw)
        except zlib.error:
            return b""
    return raw


def compact_frames_text(raw: bytes) -> list[bytes]:
    """The JSON text of each whole, undamaged frame of a compact trace, in order."""
    import zstandard

    from iotrace_format import _native

    out = []
    while raw:
        d = zstandard.ZstdDecompressor().decompressobj()
        try:
            content = d.decompress(raw)
        except zstandard.ZstdError:
            break
        if not d.eof:
            break  # cut off
        rendered = _native.compact_to_json(content)
        if rendered is None or rendered[1]:
            break
        out.append(rendered[0])
        raw = d.unused_data
    return out


@dataclass
class TraceFile:
    """One per-process trace file, decoded line by line."""

    path: str
    text: str
    lines: list[str]
    records: list[dict]            # every parsed line (M, X, i, C) in file order
    bad_lines: list[str]           # lines that were not `[` / an object + `,` or `]`
    closed: bool                   # the last line ends with `]`

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def header(self) -> dict:
        """args of the iotrace_process event (empty if missing), with the changes of later
        iotrace_process_info events applied (a role learnt after the file was opened)."""
        head: dict = {}
        for r in self.records:
            if r.get("ph") == "M" and r.get("name") == "iotrace_process" and not head:
                head = dict(r.get("args", {}))
            elif r.get("ph") == "M" and r.get("name") == "iotrace_process_info" and head:
                head.update(r.get("args", {}))
        return head

    @property
    def pid(self) -> int | None:
        return self.header.get("pid")

    @property
    def end(self) -> dict | None:
        """args of the iotrace_end event but its time and CPU times (see end_ns, cpu), None
        when the file was not closed cleanly."""
        for r in reversed(self.records):
            if r.get("ph") == "M" and r.get("name") == "iotrace_end":
                return {k: v for k, v in r.get("args", {}).items() if k not in self.CPU_KEYS + ("mono_ns",)}
        return None

    CPU_KEYS = ("cpu_ns", "cpu_wait_ns", "mpi_cpu_ns", "host_cpu_wait_us")

    @property
    def cpu(self) -> dict:
        """The CPU figures of the iotrace_end event (cpu_ns, cpu_wait_ns; an MPI rank's
        mpi_cpu_ns and host_cpu_wait_us), {} when the file has none."""
        for r in reversed(self.records):
            if r.get("ph") == "M" and r.get("name") == "iotrace_end":
                return {k: v for k, v in r.get("args", {}).items() if k in self.CPU_KEYS}
        return {}

    @property
    def end_ns(self) -> int | None:
        """The iotrace_end event's time (CLOCK_MONOTONIC ns), None when not closed cleanly."""
        for r in reversed(self.records):
            if r.get("ph") == "M" and r.get("name") == "iotrace_end":
                return r["args"]["mono_ns"]
        return None

    @property
    def fh(self) -> dict[str, str]:
        """hash -> path, from the FH metadata events of this file."""
        return {r["args"]["value"]: r["args"]["name"] for r in self.records
                if r.get("ph") == "M" and r.get("name") == "FH"}

    def events(self) -> list[dict]:
        """X/i/C events in file order, with `fname`/`fname2` resolved from this file's FH
        (None when the event names no file, or its FH line is missing)."""
        fh = self.fh
        out = []
        for r in self.records:
            if r.get("ph") not in EVENT_PHASES:
                continue
            e = dict(r)
            a = e.get("args", {})
            e["fname"] = fh.get(a["fhash"]) if "fhash" in a else None
            e["fname2"] = fh.get(a["fhash2"]) if "fhash2" in a else None
            out.append(e)
        return out


def read_trace_file(path: str | os.PathLike) -> TraceFile:
    """Decode one trace file (tolerant: see TraceFile.bad_lines / .closed)."""
    text = decompress(path).decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    records, bad = [], []
    closed = False
    for i, line in enumerate(lines):
        if i == 0 and line == "[":
            continue
        body = line
        if line.endswith(","):
            body = line[:-1]
        elif line.endswith("]"):
            body = line[:-1]
            closed = True
        else:
            bad.append(line)
            continue
        try:
            records.append(json.loads(body))
        except ValueError:
            bad.append(line)
    return TraceFile(str(path), text, lines, records, bad, closed)


def trace_files(folder: str | os.PathLike) -> list[str]:
    """Every trace file in `folder`, sorted."""
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(TRACE_SUFFIXES))


# -- a set of traces (one run) -------------------------------------------------------------


@dataclass
class TraceSet:
    """The trace files of one run (a folder), with the run's outcome when run_traced made it."""

    dir: str
    files: list[TraceFile] = field(default_factory=list)
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    pid: int | None = None          # the pid of the process run_traced started

    @classmethod
    def load(cls, folder: str | os.PathLike, **kw) -> TraceSet:
        """The folder's traces, those of processes that died finished from their live files
        first (as every reader does: iotrace_format.reader.settle_live)."""
        from iotrace_format.reader import settle_live

        if os.path.isdir(folder):
            settle_live([os.fspath(folder)])
        return cls(os.fspath(folder), [read_trace_file(p) for p in trace_files(folder)], **kw)

    @property
    def pids(self) -> list[int]:
        return sorted({f.pid for f in self.files if f.pid is not None})

    def files_of(self, pid: int) -> list[TraceFile]:
        """The files of one pid (more than one after exec), in the order they were written."""
        fs = [f for f in self.files if f.pid == pid]
        return sorted(fs, key=lambda f: f.header.get("mono_ns", 0))

    def process(self, pid: int | None = None) -> dict:
        """iotrace_process args of `pid` (default: the started process); after exec, the last image."""
        fs = self.files_of(self.pid if pid is None else pid)
        if not fs:
            raise KeyError(f"no trace file for pid {pid}: {[f.name for f in self.files]}")
        return fs[-1].header

    def events(self, pid: int | None = None, name: str | Iterable[str] | None = None,
               fname: str | os.PathLike | None = None, cat: str | None = None,
               under: str | os.PathLike | None = None) -> list[dict]:
        """Decoded X/i/C events (with `fname`), filtered.

        pid: one process (all files of it); name: a call name or several; fname: the exact
        path; under: paths equal to or below a folder; cat: the category.
        """
        names = {name} if isinstance(name, str) else set(name) if name is not None else None
        fname = os.fspath(fname) if fname is not None else None
        under = os.fspath(under).rstrip("/") if under is not None else None
        out = []
        for f in self.files:
            if pid is not None and f.pid != pid:
                continue
            for e in f.events():
                if names is not None and e.get("name") not in names:
                    continue
                if cat is not None and e.get("cat") != cat:
                    continue
                if fname is not None and e.get("fname") != fname:
                    continue
                if under is not None:
                    p = e.get("fname") or ""
                    if not (p == under or p.startswith(under + "/")):
                        continue
                out.append(e)
        return out

    def count(self, name: str | Iterable[str] | None = None, **kw) -> int:
        """How many events match (same filters as events())."""
        return len(self.events(name=name, **kw))

    def counts(self, **kw) -> collections.Counter:
        """Counter of event names (same filters as events())."""
        return collections.Counter(e["name"] for e in self.events(**kw))


# -- running --------------------------------------------------------------------------------


def tracer_env(trace_dir: str | os.PathLike, env: dict | None = None, *, include=None,
               exclude=None, compression: str | None = None, flush_ms: int | None = None,
               base: dict | None = None) -> dict:
    """The environment of a traced run: `base` (default os.environ) without IOTRACE_* and
    LD_PRELOAD, then LD_PRELOAD/IOTRACE_DIR and the options, then `env` on top."""
    e = {k: v for k, v in (os.environ if base is None else base).items()
         if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
    e["LD_PRELOAD"] = PRELOAD
    e["IOTRACE_DIR"] = os.fspath(trace_dir)
    if TEST_FORMAT:
        e["IOTRACE_FORMAT"] = TEST_FORMAT
    if include:
        e["IOTRACE_INCLUDE"] = ":".join(os.fspath(p) for p in include)
    if exclude:
        e["IOTRACE_EXCLUDE"] = ":".join(os.fspath(p) for p in exclude)
    if compression:
        e["IOTRACE_COMPRESSION"] = compression
    if flush_ms is not None:
        e["IOTRACE_FLUSH_INTERVAL_MS"] = str(flush_ms)
    if env:
        e.update({k: os.fspath(v) for k, v in env.items()})
    return e


_run_counter = collections.Counter()


def fresh_dir(tmp_path: str | os.PathLike, stem: str = "trace") -> Path:
    """A new, not yet existing folder name under tmp_path (trace, trace-1, ...)."""
    tmp_path = Path(tmp_path)
    n = 0
    while True:
        p = tmp_path / (stem if n == 0 else f"{stem}-{n}")
        if not p.exists():
            return p
        n += 1


def run_traced(cmd: Sequence[str | os.PathLike], tmp_path: str | os.PathLike, env: dict | None = None,
               *, include=None, exclude=None, compression: str | None = None,
               flush_ms: int | None = None, trace_dir: str | os.PathLike | None = None,
               check: bool = True, timeout: float = 60, **kw) -> TraceSet:
    """Run `cmd` under the tracer (LD_PRELOAD) and load what it wrote.

    The traces go to `trace_dir` (default: a fresh tmp_path/trace[-n]).  include/exclude are
    lists of paths (IOTRACE_INCLUDE/EXCLUDE), compression zstd|gzip|none, flush_ms the flush
    interval; `env` adds or overrides variables.  check=True fails on a non-zero exit status
    (pass check=False for programs that are meant to die).  Other keywords go to
    subprocess.run (cwd=..., input=...).  The returned TraceSet has returncode, stdout,
    stderr and pid (the started process's pid, from its trace file when it wrote one).
    """
    out = Path(trace_dir) if trace_dir is not None else fresh_dir(tmp_path)
    e = tracer_env(out, env, include=include, exclude=exclude, compression=compression,
                   flush_ms=flush_ms)
    argv = [os.fspath(c) for c in cmd]
    given = kw.pop("input", None)  # text for the program's stdin, a pipe
    if given is not None:
        kw["stdin"] = subprocess.PIPE
    p = subprocess.Popen(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         **kw)
    try:
        so, se = p.communicate(given, timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        so, se = p.communicate()
        raise AssertionError(f"{argv} timed out under the tracer; stderr: {se[-2000:]}") from None
    if check and p.returncode != 0:
        raise AssertionError(f"{argv} exited with {p.returncode} under the tracer\n"
                             f"stdout: {so[-2000:]}\nstderr: {se[-2000:]}")
    ts = TraceSet.load(out, returncode=p.returncode, stdout=so, stderr=se, pid=p.pid)
    return ts


def run_plain(cmd: Sequence[str | os.PathLike], **kw) -> subprocess.CompletedProcess:
    """Run `cmd` without the tracer (no LD_PRELOAD, no IOTRACE_*), capturing text output."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
    e.update(kw.pop("env", None) or {})
    return subprocess.run([os.fspath(c) for c in cmd], env=e, capture_output=True, text=True,
                          timeout=kw.pop("timeout", 60), **kw)


# -- C programs -----------------------------------------------------------------------------

ROOT = Path(__file__).parent.parent  # the repository
C_DIR = Path(__file__).parent / "c"
_CC_CACHE = {}


def c_compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")


def compile_c(tmp_path: str | os.PathLike, source: str, name: str = "prog",
              flags: Sequence[str] = ()) -> str:
    """Build a C program with `cc -O0 -D_GNU_SOURCE -pthread` and return its path.

    `source` is C text, or the name of a file in tests/c/ (e.g. "posix_calls.c").  Skips the
    test (pytest.skip) with the reason when there is no C compiler; fails with the compiler's
    message when the source does not build.  Builds are cached per source and flags for the
    session.  -O0 and no _FORTIFY_SOURCE: the program calls the plain symbols (read, not
    __read_chk) so the event names are known.
    """
    import pytest

    cc = c_compiler()
    if not cc:
        pytest.skip("no C compiler (cc/gcc/clang) on PATH: the C test programs cannot be built")
    if source.endswith(".c") and "\n" not in source:
        source = (C_DIR / source).read_text()
    key = hashlib.sha1((source + "\0" + "\0".join(flags)).encode()).hexdigest()[:16]
    cached = _CC_CACHE.get(key)
    if cached and os.path.exists(cached):
        return cached
    build = Path(tmp_path) / f"build-{name}-{key}"
    build.mkdir(parents=True, exist_ok=True)
    src = build / f"{name}.c"
    src.write_text(source)
    exe = build / name
    r = subprocess.run([cc, "-O0", "-g", "-U_FORTIFY_SOURCE", "-D_GNU_SOURCE", "-pthread",
                        "-I", str(C_DIR), *flags, "-o", str(exe), str(src)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"cc failed for {name}:\n{r.stderr}")
    _CC_CACHE[key] = str(exe)
    return str(exe)


def parse_report(stdout: str) -> list[tuple[str, int, int]]:
    """Lines `name ret errno` that the C test programs print (tests/c/report.h)."""
    out = []
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].lstrip("-").isdigit():
            out.append((parts[0], int(parts[1]), int(parts[2])))
    return out
