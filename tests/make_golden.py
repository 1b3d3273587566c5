#!/usr/bin/env python3
"""Make the golden traces of tests/golden/ (a script, not a test; see tests/golden/README.md).

    python3 tests/make_golden.py                       # make the sets that are missing
    python3 tests/make_golden.py --dftracer /path/to/venv/bin/python   # DFTracer 2.x from there
    python3 tests/make_golden.py --regenerate v4       # overwrite one set (never v3: pinned)

Sets (each a folder of tests/golden/):

* ``v3/``: tests/golden/workload.c traced by a build of the version-3 tracer library
  (``--old-lib``, default /tmp/base-build/libiotrace.so) in three forms: the default (compact,
  ``.iotc.zst``), ``IOTRACE_FORMAT=json`` (``.pfw.zst``) and ``IOTRACE_COMPRESSION=gzip``
  (``.pfw.gz``). Each run leaves two files, the main process and its fork child, renamed
  ``<form>-<role>.<suffix>``. Next to each, ``<file>.expected.json``: its JSON text, for the
  compact form every zstd frame rendered by that library's own ``iotrace_compact_to_json``.
* ``v<N>/``: the same with the current library (``iotrace.preload_path()``); N is the format
  version its traces say (7 today). A set is only ever written into the folder of the version
  its traces carry, so a later library cannot overwrite an older version's set. From version 7
  on, also tests/golden/workload_hdf5.c (every HDF5 call the tracer records; built against the
  HDF5 ``pkg-config`` finds: hdf5-serial, hdf5-openmpi or hdf5) in the three forms,
  ``<form>-hdf5.<suffix>``.
* ``live<N>/``: tests/golden/live_workload.c under the current library, killed by SIGKILL
  after a known set of calls: its trace file (the header only) and its live file, as they were
  left; N is the layout version of the live file (csrc/format/live.h). A reader must finish
  that trace from the live file of every version (tests/test_golden.py).
* ``dftracer2/``: the same workload under DFTracer 2.x (the pip package ``dftracer``), without
  and with ``DFTRACER_INC_METADATA=1``: ``no-metadata.pfw.gz``, ``with-metadata.pfw.gz``.
  The package is found with ``--dftracer`` (its package folder, or a Python that has it
  installed), else in this Python (``importlib.util.find_spec``); without it the set is skipped.
* ``dftracer1/``: ``handmade.pfw.gz``, a DFTracer 1.x-style trace written by hand (string
  ``ph``, ``[`` first, two gzip members).

Existing sets are kept unless named with ``--regenerate``. Data files go to the fixed folder
/tmp/iotrace-golden-data (so that the paths in the traces are stable) and the workload is
built in /tmp/iotrace-golden-build; both are recreated on every run.

tests/test_golden.py imports ``compile_workload``, ``find_dftracer`` and ``run_dftracer`` from
here to trace the workload with an installed DFTracer.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
WORKLOAD_SRC = GOLDEN / "workload.c"
WORKLOAD_HDF5_SRC = GOLDEN / "workload_hdf5.c"
LIVE_WORKLOAD_SRC = GOLDEN / "live_workload.c"
HDF5_FROM_VERSION = 7  # the first format version with HDF5 calls: its sets hold their traces
DATA_DIR = Path("/tmp/iotrace-golden-data")
BUILD_DIR = Path("/tmp/iotrace-golden-build")
DEFAULT_OLD_LIB = "/tmp/base-build/libiotrace.so"

# (form, extra environment, file suffix)
IOTRACE_FORMS = [
    ("compact", {}, ".iotc.zst"),
    ("json", {"IOTRACE_FORMAT": "json"}, ".pfw.zst"),
    ("gzip", {"IOTRACE_COMPRESSION": "gzip"}, ".pfw.gz"),
]
TRACE_SUFFIXES = (".iotc.zst", ".pfw.zst", ".pfw.gz", ".pfw")


class GoldenError(RuntimeError):
    pass


# -- the workload ----------------------------------------------------------------------------


def compile_workload(build_dir: str | os.PathLike = BUILD_DIR) -> Path:
    """Build tests/golden/workload.c into build_dir/workload (cc -O0, no fortify); its path."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise GoldenError("no C compiler (cc, gcc, clang) on PATH")
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    exe = build_dir / "workload"
    cmd = [cc, "-O0", "-fno-builtin", "-U_FORTIFY_SOURCE", "-D_GNU_SOURCE", "-pthread", "-o", str(exe),
           str(WORKLOAD_SRC), "-ldl"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise GoldenError(f"cannot build {WORKLOAD_SRC}: {' '.join(cmd)}\n{r.stderr}")
    return exe


def compile_hdf5_workload(build_dir: str | os.PathLike = BUILD_DIR, flags: list[str] = ()) -> Path:
    """Build tests/golden/workload_hdf5.c (with `flags`: -DDIR=... names another folder) against
    a shared HDF5 (pkg-config's hdf5-serial, hdf5-openmpi or hdf5) into build_dir/workload_hdf5;
    its path."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    hdf5 = None
    for pkg in ("hdf5-serial", "hdf5-openmpi", "hdf5"):
        r = subprocess.run(["pkg-config", "--cflags", "--libs", pkg], capture_output=True, text=True) \
            if shutil.which("pkg-config") else None
        if r is not None and r.returncode == 0:
            hdf5 = r.stdout.split()
            break
    if not cc or hdf5 is None:
        raise GoldenError("no C compiler or no HDF5 (pkg-config hdf5-serial / hdf5-openmpi / hdf5): "
                          "the HDF5 golden traces cannot be made")
    exe = Path(build_dir) / "workload_hdf5"
    cmd = [cc, "-O0", *flags, "-o", str(exe), str(WORKLOAD_HDF5_SRC), *hdf5]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise GoldenError(f"cannot build {WORKLOAD_HDF5_SRC}: {' '.join(cmd)}\n{r.stderr}")
    return exe


def clean_env() -> dict[str, str]:
    """This environment without LD_PRELOAD and any IOTRACE_* / DFTRACER_* setting."""
    return {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and not k.startswith(("IOTRACE_", "DFTRACER_"))}


def reset_data_dir(data_dir: str | os.PathLike = DATA_DIR) -> Path:
    data_dir = Path(data_dir)
    if data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    return data_dir


def _run(cmd, env, cwd) -> None:
    r = subprocess.run([str(c) for c in cmd], env=env, cwd=str(cwd), capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        raise GoldenError(f"{' '.join(map(str, cmd))} exited {r.returncode}\n"
                          f"stdout: {r.stdout}\nstderr: {r.stderr}")


# -- iotrace ---------------------------------------------------------------------------------


class CompactRenderer:
    """A tracer library's own iotrace_compact_to_json, through ctypes."""

    def __init__(self, lib_path: str | os.PathLike):
        self.lib_path = str(lib_path)
        self.lib = ctypes.CDLL(self.lib_path)  # RTLD_LOCAL: its wrappers stay out of our way
        f = self.lib.iotrace_compact_to_json
        f.restype = ctypes.c_void_p
        f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                      ctypes.POINTER(ctypes.c_int)]
        self.libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        self.libc.free.argtypes = [ctypes.c_void_p]
        self.libc.free.restype = None

    def frame(self, content: bytes) -> bytes:
        out_len = ctypes.c_size_t(0)
        damaged = ctypes.c_int(0)
        buf = ctypes.create_string_buffer(content, len(content))
        p = self.lib.iotrace_compact_to_json(buf, len(content), ctypes.byref(out_len),
                                             ctypes.byref(damaged))
        if not p:
            raise GoldenError(f"{self.lib_path}: a frame is not a compact block")
        try:
            text = ctypes.string_at(p, out_len.value)
        finally:
            self.libc.free(p)
        if damaged.value:
            raise GoldenError(f"{self.lib_path}: a frame renders as damaged")
        return text

    def file(self, raw: bytes) -> bytes:
        """Every zstd frame of a compact trace, decompressed and rendered, concatenated."""
        import zstandard

        out = []
        while raw:
            d = zstandard.ZstdDecompressor().decompressobj()
            content = d.decompress(raw)
            if not d.eof:
                raise GoldenError("a compact trace ends inside a zstd frame")
            out.append(self.frame(content))
            raw = d.unused_data
        return b"".join(out)


def json_form_text(path: str | os.PathLike) -> bytes:
    """The text of a JSON-form trace: every zstd frame or gzip member decompressed."""
    path = str(path)
    raw = Path(path).read_bytes()
    if path.endswith(".zst"):
        import zstandard

        out = []
        while raw:
            d = zstandard.ZstdDecompressor().decompressobj()
            out.append(d.decompress(raw))
            if not d.eof:
                raise GoldenError(f"{path} ends inside a zstd frame")
            raw = d.unused_data
        return b"".join(out)
    if path.endswith(".gz"):
        return gzip.decompress(raw)
    return raw


def process_args(text: bytes) -> dict:
    """args of the iotrace_process event (the first event line)."""
    for line in text.split(b"\n"):
        if line.startswith(b"{"):
            ev = json.loads(line.rstrip(b",]"))
            if ev.get("name") == "iotrace_process":
                return ev["args"]
            break
    raise GoldenError("no iotrace_process event first")


def trace_workload(lib: str | os.PathLike, exe: Path, form: str, extra: dict, suffix: str,
                   dest: Path, renderer: CompactRenderer, label: str | None = None) -> tuple[int, list[str]]:
    """Run the workload under `lib` in one form; move its traces to dest as <form>-<role><suffix>
    with <file>.expected.json (the main process and its fork child), or, given `label`, its one
    trace as <form>-<label><suffix>. Returns (format version, file names)."""
    reset_data_dir()
    out = BUILD_DIR / f"traces-{form}"
    if out.exists():
        shutil.rmtree(out)
    env = clean_env()
    env.update({"LD_PRELOAD": str(lib), "IOTRACE_DIR": str(out), "IOTRACE_ENABLE": "1",
                "IOTRACE_INCLUDE": str(DATA_DIR)})
    env.update(extra)
    _run([exe], env, BUILD_DIR)
    files = sorted(p for p in out.iterdir() if p.is_file())
    want = 1 if label else 2
    if len(files) != want or not all(p.name.endswith(suffix) for p in files):
        raise GoldenError(f"{lib} ({form}): expected {want} {suffix} files ({label or 'main, fork'}), got "
                          f"{[p.name for p in files]}")
    versions, names = set(), []
    for p in files:
        text = renderer.file(p.read_bytes()) if suffix == ".iotc.zst" else json_form_text(p)
        args = process_args(text)
        versions.add(args["version"])
        name = f"{form}-{label or args['role']}{suffix}"
        if name in names:
            raise GoldenError(f"two {name}")
        shutil.copyfile(p, dest / name)
        (dest / (name + ".expected.json")).write_bytes(text)
        names.append(name)
    if len(versions) != 1:
        raise GoldenError(f"{lib}: mixed format versions {versions}")
    return versions.pop(), names


def make_iotrace_set(lib: str | os.PathLike, exe: Path, want_version: int | None,
                     regenerate: set[str]) -> str:
    """Trace the workload with `lib` in every form into golden/v<version>/."""
    renderer = CompactRenderer(lib)
    stage = Path(tempfile.mkdtemp(prefix="golden-", dir=BUILD_DIR))
    version = None
    for form, extra, suffix in IOTRACE_FORMS:
        v, names = trace_workload(lib, exe, form, extra, suffix, stage, renderer)
        if version is not None and v != version:
            raise GoldenError(f"{lib}: version {v} in the {form} form, {version} before")
        version = v
    if version >= HDF5_FROM_VERSION:
        exe_hdf5 = compile_hdf5_workload(BUILD_DIR)
        for form, extra, suffix in IOTRACE_FORMS:
            v, _ = trace_workload(lib, exe_hdf5, form, extra, suffix, stage, renderer, label="hdf5")
            if v != version:
                raise GoldenError(f"{lib}: version {v} in the HDF5 workload's {form} form, {version} before")
    if want_version is not None and version != want_version:
        raise GoldenError(f"{lib} writes format version {version}, not {want_version}")
    set_name = f"v{version}"
    dest = GOLDEN / set_name
    if _has_traces(dest) and set_name not in regenerate:
        shutil.rmtree(stage)
        return f"{set_name}: kept (exists; --regenerate {set_name} to overwrite)"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.move(str(stage), str(dest))
    os.chmod(dest, 0o755)
    return f"{set_name}: written from {lib}: {sorted(p.name for p in dest.iterdir())}"


def live_version(path: Path) -> int:
    """The layout version a live file says (csrc/format/live.h: after the 8-byte magic)."""
    head = path.read_bytes()[:12]
    if head[:8] != b"IOTLIVE\n":
        raise GoldenError(f"{path}: not a live file")
    return int.from_bytes(head[8:12], "little")


def make_live_set(lib: str | os.PathLike, regenerate: set[str]) -> str:
    """tests/golden/live_workload.c under `lib`, killed by its own SIGKILL: its trace file (the
    header frame only) and its live file, as they were left, into golden/live<N>/ (N: the live
    file's layout version). A 1 MiB cap keeps the live file at about that size."""
    exe = BUILD_DIR / "live_workload"
    subprocess.run(["cc", "-O0", "-fno-builtin", "-D_GNU_SOURCE", "-o", str(exe), str(LIVE_WORKLOAD_SRC)],
                   check=True)
    reset_data_dir()
    out = BUILD_DIR / "traces-live"
    if out.exists():
        shutil.rmtree(out)
    env = clean_env()
    env.update({"LD_PRELOAD": str(lib), "IOTRACE_DIR": str(out), "IOTRACE_INCLUDE": str(DATA_DIR),
                "IOTRACE_MAX_BUFFERED": "1M", "IOTRACE_FLUSH_INTERVAL_MS": "60000"})
    r = subprocess.run([str(exe), str(DATA_DIR)], env=env, cwd=str(BUILD_DIR), timeout=60)
    if r.returncode != -9:
        raise GoldenError(f"{exe} under {lib}: exit {r.returncode}, not SIGKILL")
    files = sorted(p for p in out.iterdir() if p.is_file())
    lives = [p for p in files if p.name.endswith(".live")]
    if len(files) != 2 or len(lives) != 1:
        raise GoldenError(f"{lib}: expected a trace file and its live file, got {[p.name for p in files]}")
    set_name = f"live{live_version(lives[0])}"
    dest = GOLDEN / set_name
    if dest.exists() and set_name not in regenerate:
        return f"{set_name}: kept (exists; --regenerate {set_name} to overwrite)"
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir()
    for p in files:
        shutil.copyfile(p, dest / p.name)
    # The file past its last segment is a hole (its size was set at start, for segments to
    # come): cut there, so the repository holds 72 KiB, not 2 MiB of zeros.
    live = dest / lives[0].name
    data = live.read_bytes()
    n = int.from_bytes(data[384:388], "little")  # live::Header::n_segments, then its segments
    end = max(int.from_bytes(data[392 + 16 * i:400 + 16 * i], "little")
              + int.from_bytes(data[400 + 16 * i:408 + 16 * i], "little") for i in range(n))
    if any(data[end:]):
        raise GoldenError(f"{live}: bytes past its last segment")
    live.write_bytes(data[:end])
    return f"{set_name}: written from {lib}: {[p.name for p in files]}"


def _has_traces(d: Path) -> bool:
    return d.is_dir() and any(p.name.endswith(TRACE_SUFFIXES) for p in d.iterdir())


# -- DFTracer --------------------------------------------------------------------------------


def _dftracer_pkg_from(spec: str) -> Path | None:
    """The dftracer package folder from a folder path or from a Python interpreter."""
    p = Path(spec)
    if p.is_dir():
        for cand in (p, p / "dftracer"):
            if (cand / "__init__.py").exists() or (cand / "lib64").is_dir():
                return cand.resolve()
        return None
    if p.is_file() and os.access(p, os.X_OK):
        code = ("import importlib.util as u; s = u.find_spec('dftracer'); "
                "print(list(s.submodule_search_locations)[0] if s else '')")
        r = subprocess.run([str(p), "-c", code], capture_output=True, text=True, timeout=60)
        out = r.stdout.strip()
        return Path(out).resolve() if r.returncode == 0 and out else None
    return None


def find_dftracer(spec: str | None = None) -> dict | None:
    """Where DFTracer's preload library is, or None.

    `spec`: the dftracer package folder, or a Python interpreter that has it installed; else the
    package installed for this Python (found without importing it). Returns {"pkg", "version",
    "preload", "ld_library_path"}."""
    pkg = None
    if spec:
        pkg = _dftracer_pkg_from(spec)
    else:
        s = importlib.util.find_spec("dftracer")
        if s is not None and s.submodule_search_locations:
            pkg = Path(list(s.submodule_search_locations)[0]).resolve()
    if pkg is None:
        return None
    preload = next((pkg / d / "libdftracer_preload.so" for d in ("lib64", "lib")
                    if (pkg / d / "libdftracer_preload.so").exists()), None)
    if preload is None:
        return None
    libdirs = [pkg / "lib", pkg.parent / "dftracer.libs"]  # as the package's own launcher sets it
    vfile = pkg / "_version.py"
    m = re.search(r"^__version__\b[^'\"\n]*['\"]([^'\"]+)['\"]", vfile.read_text(), re.M) \
        if vfile.exists() else None
    version = m.group(1) if m else ""
    return {"pkg": pkg, "version": version, "preload": preload,
            "ld_library_path": ":".join(str(d) for d in libdirs if d.is_dir())}


def run_dftracer(dft: dict, exe: str | os.PathLike, out_dir: str | os.PathLike,
                 data_dir: str | os.PathLike, metadata: bool, cwd=None) -> list[Path]:
    """Run the workload (on files under data_dir) under DFTracer's preload library; the trace
    files it wrote into out_dir (out_dir/trace-<hash>-preload.pfw.gz)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = clean_env()
    ld = [dft["ld_library_path"]] + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else [])
    env.update({
        "LD_PRELOAD": str(dft["preload"]),
        "LD_LIBRARY_PATH": ":".join(p for p in ld if p),
        "DFTRACER_ENABLE": "1",
        "DFTRACER_INIT": "PRELOAD",
        "DFTRACER_LOG_FILE": str(out_dir / "trace"),
        "DFTRACER_DATA_DIR": str(data_dir),
        "DFTRACER_INC_METADATA": "1" if metadata else "0",
    })
    _run([exe, data_dir], env, cwd or out_dir)
    return sorted(p for p in out_dir.iterdir() if p.name.endswith((".pfw.gz", ".pfw")))


def make_dftracer2_set(dft: dict, exe: Path, regenerate: set[str]) -> str:
    dest = GOLDEN / "dftracer2"
    if _has_traces(dest) and "dftracer2" not in regenerate:
        return "dftracer2: kept (exists; --regenerate dftracer2 to overwrite)"
    stage = Path(tempfile.mkdtemp(prefix="golden-", dir=BUILD_DIR))
    for metadata, name in ((False, "no-metadata.pfw.gz"), (True, "with-metadata.pfw.gz")):
        reset_data_dir()
        out = BUILD_DIR / f"dftracer-{name.split('.')[0]}"
        if out.exists():
            shutil.rmtree(out)
        files = run_dftracer(dft, exe, out, DATA_DIR, metadata, cwd=BUILD_DIR)
        if len(files) != 1 or not files[0].name.endswith(".pfw.gz"):
            raise GoldenError(f"DFTracer (metadata={metadata}) wrote {[p.name for p in files]}, "
                              "expected one .pfw.gz")
        text = gzip.decompress(files[0].read_bytes())
        first = json.loads(text.split(b"\n", 1)[0])
        if first.get("ph") != 4 or first.get("name") != "HH":
            raise GoldenError(f"DFTracer's first line is not its numeric-ph HH event: {first}")
        shutil.copyfile(files[0], stage / name)
    (stage / "VERSION").write_text(f"dftracer {dft['version']}\n")
    if dest.exists():
        shutil.rmtree(dest)
    shutil.move(str(stage), str(dest))
    os.chmod(dest, 0o755)
    return f"dftracer2: written by dftracer {dft['version']} ({dft['preload']})"


# A DFTracer 1.x-style trace: "[" first, string ph, one event per line, no commas, integer µs
# since the epoch, HH/FH metadata, args.count for the size asked; written in two gzip members
# (DFTracer 1.x appends a member per flush).
DFTRACER1_LINES = [
    "[",
    '{"id":0,"name":"HH","cat":"dftracer","pid":300,"tid":300,"ph":"M","args":{"name":"node01","value":"aa11"}}',
    '{"id":1,"name":"FH","cat":"dftracer","pid":300,"tid":300,"ph":"M","args":{"hhash":"aa11","name":"/data/train/sample_0.npz","value":"f00d"}}',
    '{"id":2,"name":"open64","cat":"POSIX","pid":300,"tid":300,"ts":1700000000000100,"dur":80,"ph":"X","args":{"hhash":"aa11","fhash":"f00d","flags":0,"mode":0,"ret":5}}',
    '{"id":3,"name":"read","cat":"POSIX","pid":300,"tid":300,"ts":1700000000000200,"dur":50,"ph":"X","args":{"hhash":"aa11","fhash":"f00d","fd":5,"count":1024,"ret":1024}}',
    '{"id":4,"name":"read","cat":"POSIX","pid":300,"tid":300,"ts":1700000000000260,"dur":40,"ph":"X","args":{"hhash":"aa11","fhash":"f00d","fd":5,"count":1024,"ret":1024}}',
    '{"id":5,"name":"read","cat":"POSIX","pid":300,"tid":300,"ts":1700000000000310,"dur":20,"ph":"X","args":{"hhash":"aa11","fhash":"f00d","fd":5,"count":1024,"ret":512}}',
    '{"id":6,"name":"lseek64","cat":"POSIX","pid":300,"tid":300,"ts":1700000000000340,"dur":3,"ph":"X","args":{"hhash":"aa11","fhash":"f00d","fd":5,"offset":0,"whence":0,"ret":0}}',
    '{"id":7,"name":"close","cat":"POSIX","pid":300,"tid":300,"ts":1700000000000350,"dur":10,"ph":"X","args":{"hhash":"aa11","fhash":"f00d","fd":5,"ret":0}}',
    '{"id":8,"name":"FH","cat":"dftracer","pid":300,"tid":301,"ph":"M","args":{"hhash":"aa11","name":"/data/out/log.txt","value":"beef"}}',
    '{"id":9,"name":"fopen64","cat":"STDIO","pid":300,"tid":301,"ts":1700000000000400,"dur":30,"ph":"X","args":{"hhash":"aa11","fhash":"beef","mode":"a"}}',
    '{"id":10,"name":"fwrite","cat":"STDIO","pid":300,"tid":301,"ts":1700000000000440,"dur":15,"ph":"X","args":{"hhash":"aa11","fhash":"beef","size":1,"count":2048,"ret":2048}}',
    '{"id":11,"name":"fclose","cat":"STDIO","pid":300,"tid":301,"ts":1700000000000460,"dur":25,"ph":"X","args":{"hhash":"aa11","fhash":"beef"}}',
]


def make_dftracer1_set(regenerate: set[str]) -> str:
    dest = GOLDEN / "dftracer1"
    if _has_traces(dest) and "dftracer1" not in regenerate:
        return "dftracer1: kept (exists; --regenerate dftracer1 to overwrite)"
    dest.mkdir(parents=True, exist_ok=True)
    half = 6
    members = ["\n".join(DFTRACER1_LINES[:half]) + "\n", "\n".join(DFTRACER1_LINES[half:]) + "\n"]
    # mtime=0: the file's bytes do not depend on when it was made
    data = b"".join(gzip.compress(m.encode(), compresslevel=9, mtime=0) for m in members)
    (dest / "handmade.pfw.gz").write_bytes(data)
    return "dftracer1: written (handmade.pfw.gz)"


# -- main ------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old-lib", default=DEFAULT_OLD_LIB,
                    help="the version-3 tracer library (default %(default)s)")
    ap.add_argument("--dftracer", metavar="PATH",
                    help="the dftracer package folder, or a Python that has it installed")
    ap.add_argument("--regenerate", action="append", default=[], metavar="SET",
                    help="overwrite this set (v4, dftracer2, dftracer1, ...); repeatable")
    args = ap.parse_args(argv)
    regenerate = set(args.regenerate)
    if "v3" in regenerate:
        print("make_golden: refusing to regenerate v3: those files pin the compatibility of "
              "version-3 traces and must never change", file=sys.stderr)
        return 2

    import iotrace

    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    exe = compile_workload(BUILD_DIR)
    report = []
    if _has_traces(GOLDEN / "v3"):
        report.append("v3: kept (pinned)")
    elif not Path(args.old_lib).exists():
        report.append(f"v3: skipped ({args.old_lib} not found; --old-lib)")
    else:
        report.append(make_iotrace_set(args.old_lib, exe, 3, regenerate))
    report.append(make_iotrace_set(iotrace.preload_path(), exe, None, regenerate))
    report.append(make_live_set(iotrace.preload_path(), regenerate))
    dft = find_dftracer(args.dftracer)
    if _has_traces(GOLDEN / "dftracer2") and "dftracer2" not in regenerate:
        report.append("dftracer2: kept (exists; --regenerate dftracer2 to overwrite)")
    elif dft is None:
        msg = "dftracer2: skipped (no dftracer package found; --dftracer PATH)"
        if "dftracer2" in regenerate or args.dftracer:
            print("make_golden: " + msg, file=sys.stderr)
            return 2
        report.append(msg)
    else:
        report.append(make_dftracer2_set(dft, exe, regenerate))
    report.append(make_dftracer1_set(regenerate))
    for line in report:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
