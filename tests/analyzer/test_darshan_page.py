"""The report page of every real Darshan log the darshan wheel ships, opened in headless
Chromium (as tests/test_report_page.py opens a trace's): no error nor warning in the console,
nothing fetched, every plot drawn with points, the findings the summary's, each evidence link
leading to the page, and the Darshan section saying what the counters could not tell."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

darshan = pytest.importorskip("darshan")
HERE = os.path.dirname(darshan.__file__)
LOGS = sorted({os.path.realpath(p) for p in glob.glob(os.path.join(HERE, "**", "*.darshan"), recursive=True)})


@pytest.fixture(scope="module")
def browser():
    import browser as b

    if not (os.path.exists(b.CHROMIUM) and os.path.exists(b.CHROMEDRIVER)):
        pytest.skip("chromium and chromedriver are not installed (.ci/setup installs them)")
    return b.open_page


@pytest.mark.parametrize("log", LOGS, ids=os.path.basename)
def test_page_in_chromium(log, tmp_path, browser):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "iotrace_analyzer", log, "-o", str(out), "-q"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    S = json.loads((out / "summary.json").read_text())
    page = browser(str(out / "report.html"), str(tmp_path / "page.png"))
    assert [e for e in page["console"]] == [], page["console"]
    assert [u for u in page["requests"] if not u.startswith(("file:", "data:", "blob:", "about:"))] == []
    assert page["plots"]
    for plot in page["plots"]:
        assert plot["traces"] and all(t["points"] > 0 for t in plot["traces"]), plot
    assert page["findings"] == [f["id"] for f in S["findings"]]
    for link in page["links"]:
        assert link.startswith("#") and link[1:] in page["ids"], link
    assert "darshan" in page["ids"]
    assert page["ids"].index("findings") < page["ids"].index("darshan")
