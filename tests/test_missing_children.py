"""A child process that a traced parent started and that left no trace is reported as damage
(`missing-child`, docs/analyzer.md): a real traced job whose 3 fork children all write their
trace has none; the same job without one child's file names that child, its parent and `fork`
in summary.json, the text report, the warning and the report page."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

# the parent forks 3 children that each read the data file, waits for each, then reads it itself
FORK3 = r"""
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char buf[4096];
    for (int k = 0; k < 3; k++) {
        pid_t p = fork();
        if (p == 0) {
            int fd = open(argv[1], O_RDONLY);
            while (read(fd, buf, sizeof buf) > 0) {}
            close(fd);
            _exit(0);
        }
        waitpid(p, NULL, 0);
    }
    int fd = open(argv[1], O_RDONLY);
    while (read(fd, buf, sizeof buf) > 0) {}
    close(fd);
    return 0;
}
"""


def analyze_cli(traces, out) -> tuple[dict, subprocess.CompletedProcess]:
    """`iotrace-analyze TRACES -o OUT` (text report on stdout, warnings on stderr)."""
    p = subprocess.run([sys.executable, "-m", "iotrace_analyzer", str(traces), "-o", str(out), "--no-parquet"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f), p


@pytest.fixture(scope="module")
def fork3_job(tmp_path_factory):
    """The traced run: (trace folder, the parent's pid, the children's pids, the program)."""
    import tracing

    tmp = tmp_path_factory.mktemp("fork3")
    data = tmp / "data"
    data.write_bytes(os.urandom(20000))
    exe = tracing.compile_c(tmp, FORK3, name="fork3")
    ts = tracing.run_traced([exe, str(data)], tmp, include=[data])
    kids = [e["args"]["ret"] for e in ts.events(ts.pid, name="fork")]
    assert len(kids) == 3 and sorted(ts.pids) == sorted([ts.pid, *kids])
    for k in kids:
        assert ts.count("read", pid=k) >= 5  # 20000 bytes in 4096-byte reads, then EOF
    return ts, ts.pid, kids, exe


def test_every_child_traced_no_damage(fork3_job, tmp_path):
    ts, parent, kids, _exe = fork3_job
    S, p = analyze_cli(ts.dir, tmp_path / "out")
    assert S["job"]["processes"] == 4
    d = S["damage"]
    assert d["missing_children"] == [] and d["missing_child_count"] == 0
    assert d["damaged_files"] == 0 and d["by_kind"] == {}
    assert "missing-child" not in p.stdout + p.stderr and "without a trace" not in p.stdout
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'id="damage"' not in html


@pytest.fixture(scope="module")
def one_child_lost(fork3_job, tmp_path_factory):
    """The same run with the middle child's trace file deleted, analyzed by the command."""
    ts, parent, kids, exe = fork3_job
    tmp = tmp_path_factory.mktemp("lost")
    lost = tmp / "traces"
    shutil.copytree(ts.dir, lost)
    lost_pid = kids[1]
    (gone,) = ts.files_of(lost_pid)
    os.remove(lost / gone.name)
    (parent_file,) = ts.files_of(parent)
    S, p = analyze_cli(lost, tmp / "out")
    return S, p, tmp / "out", lost_pid, parent, str(lost / parent_file.name), exe


def test_deleted_child_trace_is_missing_child(one_child_lost):
    S, p, _out, pid, parent, parent_file, exe = one_child_lost
    assert S["job"]["processes"] == 3  # the parent and the two children that wrote a trace
    d = S["damage"]
    (m,) = d["missing_children"]
    assert (m["pid"], m["parent_pid"], m["started_by"], m["parent_trace"]) == (pid, parent, "fork", parent_file)
    assert m["program"] == exe  # a fork's child runs the parent's program
    assert m["host"] and 0 <= m["at_s"] < 60 and m["ts_us"] > 0
    assert d["missing_child_count"] == 1 and d["by_kind"] == {"missing-child": 1} and d["damaged_files"] == 1
    (rec,) = [r for r in d["records"] if r["kind"] == "missing-child"]
    assert rec["path"] == parent_file
    assert f"child pid {pid}" in rec["detail"] and "fork" in rec["detail"] and f"pid {parent}" in rec["detail"]
    assert "untraced" in rec["detail"] and "died before writing" in rec["detail"]
    # the text report: a row naming the child, fork and the parent
    rows = [ln.split() for ln in p.stdout.splitlines()]
    assert [r[1:4] for r in rows if len(r) >= 4 and r[1] == str(pid)] == [[str(pid), "fork", str(parent)]]
    assert "Child processes without a trace (1" in p.stdout
    # the warning on stderr and its record line
    assert "1 child process(es) without a trace" in p.stderr
    assert f"missing-child child pid {pid}" in p.stderr and f"fork of pid {parent}" in p.stderr


def test_deleted_child_trace_on_the_report_page(one_child_lost):
    S, _p, out, pid, parent, _parent_file, exe = one_child_lost
    html = (out / "report.html").read_text()
    i = html.index('<section class="damage" id="damage">')
    section = html[i:html.index("</section>", i)]
    assert "missing-child" in section and "Child processes without a trace (1)" in section
    row = section[section.index('<tr class="missing-child">'):]
    row = row[:row.index("</tr>")]
    assert f"<td>{pid}</td>" in row and f"<td>{parent}</td>" in row and "fork" in row and exe in row
    assert "1\n      child process(es) without a trace" in html  # the header links to it


def test_deleted_child_trace_page_in_chromium(one_child_lost, tmp_path):
    """The page with the damage section opens clean in headless Chromium, and the missing
    child's row is there."""
    browser = pytest.importorskip("browser")
    if not (shutil.which("chromium") or os.path.exists(browser.CHROMIUM)) or \
            not (shutil.which("chromedriver") or os.path.exists(browser.CHROMEDRIVER)):
        pytest.skip("no chromium/chromedriver")
    pytest.importorskip("selenium")
    _S, _p, out, pid, _parent, _f, _exe = one_child_lost
    page = browser.open_page(str(out / "report.html"), str(tmp_path / "shot.png"))
    assert [e for e in page["console"] if e["level"] in ("SEVERE", "ERROR")] == []
    assert {"damage", "missing-children"} <= set(page["ids"])
