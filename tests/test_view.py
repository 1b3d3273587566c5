"""`iotrace view`: serves the trace on 127.0.0.1 as Perfetto's UI needs it."""

from __future__ import annotations

import http.client
import io
import threading

import pytest


from iotrace import view as view_mod
from iotrace.view import TraceServer, find_local_ui, ui_link


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "job.pftrace"
    path.write_bytes(b"\x0a\x02\x08\x01" * 1000)
    return path


def serving(trace, ui_dir=None):
    """A server on an ephemeral port, running in a thread."""
    server = TraceServer(str(trace), port=0, ui_dir=ui_dir)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def get(server, path, method="GET", headers=None):
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request(method, path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp, body


def test_link_is_perfettos_deep_link():
    assert ui_link("http://127.0.0.1:9001/job.pftrace") == \
        "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/job.pftrace"


def test_serves_the_trace_with_cors_headers(trace):
    server = serving(trace)
    try:
        assert server.link == ui_link(server.trace_url)
        resp, body = get(server, "/job.pftrace")
        assert resp.status == 200 and body == trace.read_bytes()
        assert resp.getheader("Access-Control-Allow-Origin") == "*"
        assert resp.getheader("Content-Length") == str(len(body))
        assert server.served.wait(5)  # set by the server thread just after the last byte
        assert get(server, "/other")[0].status == 404
    finally:
        server.shutdown()
        server.server_close()


def test_answers_the_private_network_preflight(trace):
    server = serving(trace)
    try:
        resp, _ = get(server, "/job.pftrace", "OPTIONS",
                      {"Origin": "https://ui.perfetto.dev",
                       "Access-Control-Request-Private-Network": "true"})
        assert resp.status == 204
        assert resp.getheader("Access-Control-Allow-Private-Network") == "true"
        assert resp.getheader("Access-Control-Allow-Origin") == "*"
    finally:
        server.shutdown()
        server.server_close()


def test_local_ui_mode(trace, tmp_path):
    ui = tmp_path / "ui"
    ui.mkdir()
    (ui / "index.html").write_text("<html>perfetto</html>")
    (tmp_path / "secret").write_text("no")
    server = serving(trace, ui_dir=str(ui))
    try:
        assert server.link == server.base + "/#!/?url=" + server.trace_url  # opens the trace at once
        assert get(server, "/")[1] == b"<html>perfetto</html>"
        assert get(server, "/vizviewer_info")[1] == b"{}"
        assert get(server, "/localtrace")[1] == trace.read_bytes()
        assert get(server, "/../secret")[0].status == 404
    finally:
        server.shutdown()
        server.server_close()


def test_find_local_ui(tmp_path, monkeypatch):
    (tmp_path / "index.html").write_text("x")
    assert find_local_ui(str(tmp_path)) == str(tmp_path)
    monkeypatch.setenv("IOTRACE_PERFETTO_UI", str(tmp_path))
    assert find_local_ui() == str(tmp_path)


def _view_once(path, monkeypatch) -> tuple[str, bytes, str]:
    """Run view(path, once=True) in a thread, fetch what it serves, and wait for it to exit:
    (the served name, the body, what view printed)."""
    out = io.StringIO()
    servers = []
    real = view_mod.TraceServer

    def recording(*args, **kwargs):
        servers.append(real(*args, **kwargs))
        return servers[-1]

    monkeypatch.setattr(view_mod, "TraceServer", recording)
    done = []
    t = threading.Thread(target=lambda: done.append(view_mod.view(str(path), port=0, once=True, out=out)))
    t.start()
    for _ in range(200):
        if servers and "Open:" in out.getvalue():
            break
        threading.Event().wait(0.05)
    printed = out.getvalue()
    resp, body = get(servers[0], "/" + servers[0].trace_name)
    t.join(10)
    assert done == [0] and resp.status == 200
    return servers[0].trace_name, body, printed


def test_view_once_prints_the_link_and_exits_after_the_fetch(trace, monkeypatch):
    name, body, printed = _view_once(trace, monkeypatch)
    assert "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:" in printed
    assert name == "job.pftrace" and body == trace.read_bytes()


def test_view_missing_file(tmp_path, capsys):
    assert view_mod.view(str(tmp_path / "nope.pftrace")) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("form", ["compact", "json"])
def test_view_serves_a_zstd_trace_as_its_json(tmp_path, monkeypatch, capfd, form):
    # Perfetto reads gzip but not zstd: a per-process .iotc.zst / .pfw.zst goes out as the
    # gzip'd JSON array it stands for, exactly the lines the readers decode.
    import gzip
    import sys

    from tracing import run_traced

    d = tmp_path / "d"
    d.mkdir()
    code = f"open({str(d / 'f')!r}, 'wb').write(b'x' * 300)"
    ts = run_traced([sys.executable, "-c", code], tmp_path, {"IOTRACE_FORMAT": form}, include=[d])
    (f,) = ts.files
    name, body, _ = _view_once(f.path, monkeypatch)
    suffix = ".iotc.zst" if form == "compact" else ".pfw.zst"
    assert f.path.endswith(suffix) and name == f.name[:-len(suffix)] + ".json.gz"
    assert gzip.decompress(body).decode() == f.text
    assert [e["args"]["ret"] for e in ts.events(name="write")] == [300]
    # a cut trace: served up to the damage, which is reported
    cut = tmp_path / ("cut" + suffix)
    raw = open(f.path, "rb").read()
    cut.write_bytes(raw[:len(raw) // 2])
    capfd.readouterr()
    _, body, _ = _view_once(cut, monkeypatch)
    text = gzip.decompress(body).decode()
    assert f.text.startswith(text) and len(text) < len(f.text)
    assert "iotrace view:" in capfd.readouterr().err
