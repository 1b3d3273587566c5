"""The report page (OUT/report.html) opened in a real browser, offline, from a file:// URL: the
example pipeline's page and a 21-process job's (a heat map of process x time)."""
from __future__ import annotations

import json
import os
import sys

import pytest
from browser import open_page
from PIL import Image
from test_insights_real import PIPELINE, traced

SAMPLES, EPOCHS = 256, 2
PLOTS = ["plot-time-split", "plot-phase-split", "plot-io-time", "plot-proc-io", "plot-cost", "plot-sizes",
         "plot-offsets"]

# 20 forked children, each writing 16 x 64 KiB to its own file, then the parent reads them all
MANY = """
import os, sys
d = sys.argv[1]
pids = []
for k in range(20):
    pid = os.fork()
    if pid == 0:
        with open(os.path.join(d, f"part{k}"), "wb") as f:
            for _ in range(16):
                f.write(b"x" * 65536)
        os._exit(0)
    pids.append(pid)
for p in pids:
    os.waitpid(p, 0)
for k in range(20):
    with open(os.path.join(d, f"part{k}"), "rb") as f:
        while f.read(1 << 20):
            pass
"""


def analyzed(traces: str, out: str, *args: str) -> dict:
    import subprocess

    p = subprocess.run([sys.executable, "-m", "iotrace_analyzer", traces, "-o", out, "--no-parquet", "-q", *args],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def _check_page(page: dict, shot: str) -> None:
    """What every report page must hold in the browser."""
    errors = [e for e in page["console"] if e["level"] in ("SEVERE", "ERROR")]
    assert errors == [], errors
    assert page["console"] == [], page["console"]  # not even a warning
    assert [u for u in page["requests"] if not u.startswith(("file:", "data:", "blob:", "about:"))] == []
    for p in page["plots"]:
        assert p["traces"] and all(t["points"] > 0 for t in p["traces"]), p
        assert p["drawn"] >= 1 and p["height"] > 100, p
    for link in page["links"]:  # each finding's evidence link leads to a plot on the page
        assert link.startswith("#") and link[1:] in page["ids"], link
    im = Image.open(shot)
    assert im.width == 1400 and im.height > 3000
    assert len(im.convert("RGB").resize((200, 400)).getcolors(1 << 16)) > 50  # a page, not a blank


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("page")
    traces = traced(tmp, "traces", sys.executable, PIPELINE, "--data", str(tmp / "data"), "--layout", "small",
                    "--samples", str(SAMPLES), "--epochs", str(EPOCHS))
    # the file-per-sample finding whatever its cost on this machine (it costs 1-4% of the wall
    # here, about the 2% floor): the page is tested with two findings, one with file evidence
    S = analyzed(traces, str(tmp / "out"), "--threshold", "metadata-heavy.min_share=0")
    return S, str(tmp / "out" / "report.html"), tmp


def test_pipeline_report_in_chromium(pipeline):
    S, path, tmp = pipeline
    shot = str(tmp / "report.png")
    page = open_page(path, shot)
    _check_page(page, shot)
    assert [p["id"] for p in page["plots"]] == PLOTS
    plots = {p["id"]: p for p in page["plots"]}
    # the findings first, the same as summary.json's, in its order
    assert page["findings"] == [f["id"] for f in S["findings"]] and "metadata-heavy" in page["findings"]
    # each finding shows what the text report prints of it (report.evidence), in the browser
    from iotrace_analyzer.outputs import report
    for f, text in zip(S["findings"], page["finding_text"]):
        _key, rows, notes = report.evidence(f)
        for line in rows[:5] + notes:
            assert " ".join(line.split()) in " ".join(text.split()), (f["id"], line)
    ms = page["finding_text"][page["findings"].index("metadata-heavy")]
    assert "file per sample:" in ms and "reading the data:" in ms and "creating the data:" in ms
    assert page["ids"].index("findings") < page["ids"].index("plot-time-split")
    # one line per process (3: main and 2 loader workers), one bar row per process and the job
    assert [t["type"] for t in plots["plot-proc-io"]["traces"]] == ["scatter"] * 3
    assert all(t["points"] == 1 + 3 for t in plots["plot-time-split"]["traces"])
    # the phases split, longest events first: the 2 epochs and the dataset's writing, then as many
    # kinds with 16 events or fewer (batches, steps) as fit in 40 rows, each with all its events
    split = [(r["name"], r["index"]) for r in S["phases"]["split"]]
    assert sorted(split[:3]) == [("epoch", 0), ("epoch", 1), ("write_dataset", 0)]
    count = {k["name"]: k["count"] for k in S["phases"]["kinds"]}
    assert count["load_batch"] == SAMPLES * EPOCHS // 64  # batches of 64
    names = list(dict.fromkeys(n for n, _ in split))
    assert "load_batch" in names and "Dataset.__getitem__" not in names  # 512 events: not split
    assert split == [(n, k) for n in names for k in range(count[n])] and len(split) <= 40
    assert all(t["points"] == len(split) for t in plots["plot-phase-split"]["traces"])
    # size histograms: one bar trace per call family that moved data
    assert len(plots["plot-sizes"]["traces"]) == len(S["access"]["size_histogram_by_family"]) >= 2
    # the layer split: the pipeline's spans, its stdio and POSIX calls, its workers' start, each with its own time
    assert [r[0] for r in page["layers"]] == [r["layer"] for r in S["layers"]] == ["app", "stdio", "posix", "process"]
    for shown, r in zip(page["layers"], S["layers"]):
        assert shown[1] == str(r["calls"]) and shown[4] == f"{100 * r['own_share']:.1f}%"
    assert os.path.getsize(path) < 6 << 20


def test_many_processes_get_a_heat_map(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    traces = traced(tmp_path, "traces", sys.executable, "-c", MANY, str(data))
    S = analyzed(traces, str(tmp_path / "out"))
    assert S["job"]["processes"] == 21
    shot = str(tmp_path / "many.png")
    page = open_page(str(tmp_path / "out" / "report.html"), shot)
    _check_page(page, shot)
    plots = {p["id"]: p for p in page["plots"]}
    (heat,) = plots["plot-proc-io"]["traces"]
    assert heat == {"type": "heatmap", "points": 21}  # a row per process
    # 21 data files of 1 MiB: 20 written sequentially, then read back; the offsets plot has them
    assert S["file_classes"]["data"]["bytes_written"] == 20 << 20
    assert S["file_classes"]["data"]["bytes_read"] == 20 << 20


# the main process and 2 fork workers sample every 20 ms; the main records a user counter
COUNTED = """
import multiprocessing as mp, os, time, iotrace

def task(x):
    time.sleep(0.02)
    return x

if __name__ == "__main__":
    pool = mp.get_context("fork").Pool(2)
    pool.map(task, range(8))
    pool.close()
    pool.join()
    for step, loss in enumerate([2.0, 1.0, 0.5]):
        iotrace.counter("train", loss=loss, step=step)
    time.sleep(0.1)
"""


def test_counters_plot_in_chromium(tmp_path):
    import subprocess

    from test_insights_real import _env

    prog = tmp_path / "counted.py"
    prog.write_text(COUNTED)
    traces = tmp_path / "traces"
    subprocess.run([sys.executable, "-m", "iotrace", "run", "--sample-ms", "20", "-o", str(traces), "--",
                    sys.executable, str(prog)], env=_env(), check=True, capture_output=True, timeout=300)
    S = analyzed(str(traces), str(tmp_path / "out"))
    assert S["job"]["processes"] == 3
    shot = str(tmp_path / "counters.png")
    page = open_page(str(tmp_path / "out" / "report.html"), shot)
    _check_page(page, shot)  # no console message, every plot drawn
    ids = [p["id"] for p in page["plots"]]
    assert ids.index("plot-proc-io") + 1 == ids.index("plot-counters")
    plot = {p["id"]: p for p in page["plots"]}["plot-counters"]
    C = S["counters"]
    # a trace per series, the summary's: 5 sampler keys per process, then train's loss and step
    assert len(plot["traces"]) == len(C) == 3 * 5 + 2
    assert all(t["type"] == "scatter" for t in plot["traces"])
    assert [t["points"] for t in plot["traces"]] == [c["samples"] for c in C]  # short: every sample
    assert all(c["samples"] >= 2 for c in C)  # start and end samples at least, in every process
    # drawn: CPU % and RSS of each process, loss and step; I/O bytes and open files in the legend
    assert plot["drawn"] == 3 * 2 + 2
    assert plot["height"] > 3 * 200  # a panel per process and one for train


# one file per sample: 2000 files of 1 KiB (written before tracing), each opened and read whole once
PER_SAMPLE = """
import os, sys
d = sys.argv[1]
for name in sorted(os.listdir(d)):
    with open(os.path.join(d, name), "rb") as f:
        f.read()
"""


def test_file_per_sample_evidence_on_the_page(tmp_path):
    """The metadata-heavy finding's file-per-sample evidence (its files, opens, reads, time and
    bytes per open: insights.Evidence's note) is on the page as the text report prints it, with
    the figures of summary.json."""
    from iotrace_analyzer.analyses import insights
    from iotrace_analyzer.outputs import report

    data = tmp_path / "samples"
    data.mkdir()
    for k in range(2000):
        (data / f"s{k:05d}.bin").write_bytes(bytes([k % 256]) * 1024)
    traces = traced(tmp_path, "traces", sys.executable, "-c", PER_SAMPLE, str(data))
    S = analyzed(traces, str(tmp_path / "out"))
    (f,) = [f for f in S["findings"] if f["id"] == "metadata-heavy"]
    fps = f["evidence"]["file_per_sample"]
    assert fps["files"] == fps["opens"] == 2000 and fps["mean_bytes_per_open"] == 1024.0
    ev = insights.Evidence.of_finding(f)
    assert ev.to_json() == f["evidence"]  # the structure is summary.json's, key for key
    (note,) = [n for n in ev.notes if n.label == "file per sample"]
    line = report.note(note)
    assert line.startswith("file per sample: files 2000, opens 2000, reads ") and "time " in line
    shot = str(tmp_path / "per-sample.png")
    page = open_page(str(tmp_path / "out" / "report.html"), shot)
    _check_page(page, shot)
    card = " ".join(page["finding_text"][page["findings"].index("metadata-heavy")].split())
    assert line in card, (line, card)
    # and every other line the text report prints of the finding
    _key, rows, notes = report.evidence(f)
    for text in rows[:5] + notes:
        assert " ".join(text.split()) in card, text
    assert line in report.findings_text(S)


def test_cpu_starved_evidence_on_the_page(tmp_path):
    """A process that shared its CPU with a busy loop (test_insights_real's): the cpu-starved
    finding's evidence link leads to the processes table, whose row for the process shows its
    CPU time and its wait for a CPU as summary.json has them."""
    from iotrace_analyzer import units
    from test_insights_real import _sharer_run

    S, f = _sharer_run(tmp_path, "shared", busy=True)
    assert f is not None, S["findings"]
    shot = str(tmp_path / "starved.png")
    page = open_page(str(tmp_path / "shared-out" / "report.html"), shot)
    _check_page(page, shot)
    assert "cpu-starved" in page["findings"] and "#processes" in page["links"], page["links"]
    heads = page["process_heads"]
    (p,) = [p for p in S["processes"] if p["pid"] == f["evidence"]["processes"][0]["pid"]]
    (row,) = [r for r in page["processes"] if str(p["pid"]) in r[0]]
    assert row[heads.index("waited for a CPU")] == units.duration(p["cpu_wait_us"])
    assert row[heads.index("CPU time")] == units.duration(p["cpu_us"])
