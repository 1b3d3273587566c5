"""Opening a page in headless Chromium (Debian's chromium and chromedriver, driven by Selenium)
with the network cut off: what its plots hold, what the console said, what it asked the
network for, and a screenshot of the whole page."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

# per plot: its traces' types and point counts (as plotly.js decoded them: typed arrays arrive
# base64-encoded), and the trace groups it drew
PLOTS_JS = """
return Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => ({
  id: gd.id,
  traces: (gd._fullData || []).map(t => ({type: t.type,
    points: t.z ? t.z.length : (t.x ? t.x.length : (t.y ? t.y.length : 0))})),
  drawn: gd.querySelectorAll('g.trace, g.hm').length,
  height: gd.getBoundingClientRect().height}));
"""


@contextlib.contextmanager
def chromium(options):
    """A headless Chromium driven by chromedriver, with a temporary folder of its own (TMPDIR),
    removed when it quits (else each run leaves its SingletonSocket folder in /tmp)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    home = tempfile.mkdtemp(prefix="iotrace-chromium-")  # chromedriver makes its profile there
    d = webdriver.Chrome(service=Service(CHROMEDRIVER, env=dict(os.environ, TMPDIR=home)), options=options)
    try:
        yield d
    finally:
        d.quit()
        shutil.rmtree(home, ignore_errors=True)


def open_page(path: str, screenshot: str, width: int = 1400) -> dict:
    """Load `path` from a file:// URL; returns plots, console entries, the URLs requested,
    the findings' rule ids and evidence links, and the ids of the page's elements."""
    from selenium import webdriver

    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},1000",
              # no network: every name resolves to nothing and every proxied request goes nowhere
              "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", "--no-first-run"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    with chromium(o) as d:
        d.set_page_load_timeout(60)
        d.get("file://" + path)
        d.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => setTimeout(done, 200));")
        out = dict(
            plots=d.execute_script(PLOTS_JS),
            console=d.get_log("browser"),
            requests=_requests(d.get_log("performance")),
            findings=d.execute_script(
                "return Array.from(document.querySelectorAll('.finding')).map(e => e.dataset.rule)"),
            finding_text=d.execute_script(
                "return Array.from(document.querySelectorAll('.finding')).map(e => e.innerText)"),
            links=d.execute_script(
                "return Array.from(document.querySelectorAll('.finding a')).map(a => a.getAttribute('href'))"),
            ids=d.execute_script("return Array.from(document.querySelectorAll('[id]')).map(e => e.id)"),
            ranks=d.execute_script(  # the MPI ranks' rows, as shown: their cells' text
                "return Array.from(document.querySelectorAll('tr.rank')).map("
                "r => Array.from(r.cells).map(c => c.innerText))"),
            processes=d.execute_script(  # the processes table's rows, as shown: their cells' text
                "return Array.from(document.querySelectorAll('#processes tr')).slice(1).map("
                "r => Array.from(r.cells).map(c => c.innerText))"),
            process_heads=d.execute_script(
                "return Array.from(document.querySelectorAll('#processes th')).map(c => c.innerText)"),
            layers=d.execute_script(  # the layer split's rows, as shown: their cells' text
                "return Array.from(document.querySelectorAll('tr.layer')).map("
                "r => Array.from(r.cells).map(c => c.innerText))"),
            load_ms=d.execute_script(
                "const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd - t.startTime"))
        d.set_window_size(width, d.execute_script("return document.body.scrollHeight"))
        d.save_screenshot(screenshot)
        return out


def _requests(perf: list) -> list[str]:
    import json

    urls = []
    for e in perf:
        m = json.loads(e["message"])["message"]
        if m.get("method") == "Network.requestWillBeSent":
            urls.append(m["params"]["request"]["url"])
    return urls
