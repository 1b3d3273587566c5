"""What the commands say when they are given something they cannot use: one line naming the
argument or file and what to do, exit status 2 for usage errors (as argparse's own) and 1 for
failures at run time, and nothing half-written left behind. Every case runs the real command."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request

import pytest

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "v4")
IOTRACE = [sys.executable, "-m", "iotrace"]
ANALYZE = [sys.executable, "-m", "iotrace_analyzer"]


def cli(*args, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
    clean.update(env or {})
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=clean,
                          timeout=120, **kw)


def said(p: subprocess.CompletedProcess) -> list[str]:
    """The stderr lines other than argparse's usage lines."""
    lines = p.stderr.splitlines()
    return [ln for ln in lines if not ln.startswith("usage:") and not ln.startswith(" ")]


@pytest.fixture
def job(tmp_path):
    """A copy of the golden traces (a main process and its fork child in each form)."""
    d = tmp_path / "job"
    d.mkdir()
    for name in ("compact-main.iotc.zst", "compact-fork.iotc.zst"):
        shutil.copy(os.path.join(GOLDEN, name), d / name)
    return d


@pytest.fixture
def junk(tmp_path):
    """A trace file with no readable line."""
    path = tmp_path / "junk-h-1.pfw"
    path.write_bytes(b"\x00\x17 not a trace\n" * 4)
    return path


# -- 1. iotrace run: a trace folder it cannot write is refused before the program starts --------

@pytest.mark.parametrize("where", ["missing-parent", "regular-file", "unwritable"])
def test_run_refuses_a_trace_folder_it_cannot_write(tmp_path, where):
    marker = tmp_path / "ran"
    folder = {"missing-parent": "/proc/no-such/traces", "regular-file": str(tmp_path / "f"),
              "unwritable": "/proc"}[where]  # /proc: a folder nobody, root included, makes files in
    if where == "regular-file":
        (tmp_path / "f").write_text("mine")
    p = cli(*IOTRACE, "run", "-o", folder, "--", "sh", "-c", f"touch {marker}")
    assert p.returncode == 1, p.stderr
    (line,) = said(p)
    assert line.startswith(f"iotrace run: error: cannot write traces to {folder}: ") and "-o DIR" in line
    assert not marker.exists()  # the program never started
    if where == "regular-file":
        assert (tmp_path / "f").read_text() == "mine"


def test_run_makes_the_trace_folder_and_leaves_no_probe(tmp_path):
    out = tmp_path / "a" / "b"
    p = cli(*IOTRACE, "run", "-o", out, "--", "true")
    assert p.returncode == 0 and p.stderr == ""
    assert [n for n in os.listdir(out) if n.startswith(".iotrace-probe")] == []


# -- 2. iotrace-analyze -o naming a file --------------------------------------------------------

def test_analyze_output_that_is_a_file(tmp_path, job):
    f = tmp_path / "f"
    f.write_text("mine")
    p = cli(*ANALYZE, job, "-o", f)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    (line,) = said(p)
    assert "-o/--output" in line and str(f) in line and "is a file" in line
    assert f.read_text() == "mine"
    p = cli(*ANALYZE, job, "--summary", tmp_path)
    assert p.returncode == 2 and "--summary" in said(p)[0] and "is a folder" in said(p)[0]


# -- 3. iotrace view FOLDER ----------------------------------------------------------------------

def test_view_a_folder_serves_the_whole_job(tmp_path, job):
    """The folder is merged into one .pftrace (iotrace export), served once, then removed."""
    p = subprocess.Popen([*IOTRACE, "view", str(job), "--once", "-p", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in p.stdout:
            m = re.match(r"Serving (\S+) at (\S+)", line)
            if m:
                served, url = m.groups()
                break
        assert url and url.endswith("/job.pftrace"), p.stderr.read() if p.poll() is not None else ""
        body = urllib.request.urlopen(url, timeout=30).read()
        assert p.wait(30) == 0
    finally:
        p.kill()
    err = p.stderr.read()
    assert f"iotrace view: {job}: 2 processes" in err
    # Perfetto's protobuf: a Trace whose packets (field 1, length-delimited) come first
    assert len(body) > 1000 and body[0] == 0x0A
    assert not os.path.exists(served)


def test_view_a_folder_without_the_analysis_side(tmp_path, job):
    """Without iotrace[analyze], a folder gets a clear message (status 2), not "no such file"."""
    code = ("import sys, iotrace.cli as c; c._plugins = lambda: []  # no iotrace export\n"
            "sys.exit(c.main(sys.argv[1:]))")
    p = cli(sys.executable, "-c", code, "view", job)
    assert p.returncode == 2
    (line,) = said(p)
    assert f"{job} is a folder of traces: give one trace file" in line and "iotrace[analyze]" in line


def test_view_a_folder_without_traces(tmp_path):
    p = cli(*IOTRACE, "view", tmp_path)
    assert p.returncode == 2 and "no trace files" in p.stderr and "Traceback" not in p.stderr


def test_view_of_a_file_does_not_load_the_analyzer(tmp_path):
    p = cli(sys.executable, "-X", "importtime", "-m", "iotrace", "view", tmp_path / "none.pftrace")
    assert p.returncode == 2 and "no such file" in p.stderr
    loaded = {ln.split("|")[-1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}
    assert "iotrace_analyzer" not in loaded and "numpy" not in loaded


# -- 4. an unknown option of a subcommand ------------------------------------------------------

@pytest.mark.parametrize("command", ["run", "cat"])
def test_unknown_option_gives_the_subcommands_usage(tmp_path, command):
    p = cli(*IOTRACE, command, "--bogus", "--", "true", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.startswith(f"usage: iotrace {command} ")
    assert said(p) == [f"iotrace {command}: error: unrecognized arguments: --bogus"]
    assert os.listdir(tmp_path) == []  # no trace folder made


# -- 5. rules files --------------------------------------------------------------------------------

def test_rules_file_sizes_and_errors(tmp_path, job):
    from iotrace_analyzer.analyses import insights

    rules = tmp_path / "rules.json"
    rules.write_text('{"small-reads": {"size": "64K"}, "small-writes": {"size": "1MiB"}}')
    assert insights.load_rules(str(rules))["small-reads"]["size"] == 65536
    out = tmp_path / "ok"
    p = cli(*ANALYZE, job, "--rules", rules, "-q", "-o", out, "--no-parquet")
    assert p.returncode == 0, p.stderr
    assert cli(*ANALYZE, job, "--threshold", "small-reads.size=1M", "-q", "-o", out).returncode == 0

    out = tmp_path / "bad"
    rules.write_text('{"small-reads": {"size": "lots"}}')
    p = cli(*ANALYZE, job, "--rules", rules, "-o", out)
    assert p.returncode == 2
    (line,) = said(p)
    assert f"rules: {rules}: small-reads.size: 'lots' is not a size" in line
    for text, says in (('{"small-reads": {\n  "share": "high"}}', ": small-reads.share: 'high' is not a number"),
                       ("garbage\n", ":1:1: not JSON"),
                       ('{"small-reads": {"size": 1,}}', ":1:28: not JSON"),
                       ('{"small-reads": {"sise": 1}}', ": unknown threshold small-reads.sise")):
        rules.write_text(text)
        (line,) = said(cli(*ANALYZE, job, "--rules", rules, "-o", out))
        assert f"rules: {rules}{says}" in line, text
    p = cli(*ANALYZE, job, "--threshold", "small-reads.size=3x", "-o", out)
    assert p.returncode == 2 and "rules: --threshold small-reads.size=3x: small-reads.size:" in said(p)[0]
    p = cli(*ANALYZE, job, "--rules", tmp_path / "none.json", "-o", out)
    assert p.returncode == 2 and said(p) == [f"iotrace-analyze: error: rules: {tmp_path / 'none.json'}: "
                                             "No such file or directory"]
    assert not out.exists()


# -- 6. input without a readable event ------------------------------------------------------------

def test_analyze_nothing_readable_writes_nothing(tmp_path, junk):
    out = tmp_path / "out"
    p = cli(*ANALYZE, junk, "-o", out)
    assert p.returncode == 1 and p.stdout == ""  # no report
    (line,) = said(p)
    assert line.startswith("iotrace-analyze: error: no event could be read from 1 file(s)")
    assert not out.exists()
    # a folder of the user's: left as it was
    out.mkdir()
    (out / "mine").write_text("x")
    assert cli(*ANALYZE, junk, "-o", out, "--summary", tmp_path / "s.json").returncode == 1
    assert os.listdir(out) == ["mine"] and not (tmp_path / "s.json").exists()


def test_analyze_output_replaces_an_earlier_dataset(tmp_path, job):
    """The dataset is moved into OUT at the end: an earlier run's parts do not stay beside it."""
    out = tmp_path / "out"
    (out / "events").mkdir(parents=True)
    (out / "events" / "part-09999.parquet").write_bytes(b"old")
    (out / "events" / "notes.txt").write_text("mine")
    p = cli(*ANALYZE, job, "-o", out, "-q")
    assert p.returncode == 0, p.stderr
    parts = sorted(os.listdir(out / "events"))
    assert "part-09999.parquet" not in parts and "notes.txt" in parts
    assert [n for n in parts if n.startswith("part-")]
    assert {"summary.json", "report.html", "processes.parquet"} <= set(os.listdir(out))
    assert not [n for n in os.listdir(out) if n.startswith(".")]  # no staging folder left


# -- 7. iotrace export of input without a readable event -------------------------------------------

def test_export_nothing_readable_leaves_no_file(tmp_path, junk):
    out = tmp_path / "x.pftrace"
    p = cli(*IOTRACE, "export", junk, "-o", out)
    assert p.returncode == 1
    assert said(p) == [ln for ln in said(p) if "wrote" not in ln]
    assert said(p)[-1].startswith("iotrace export: error: no event could be read from 1 file(s)")
    assert sorted(os.listdir(tmp_path)) == [junk.name]  # no output, no temporary file
    # an earlier output stays as it was
    out.write_bytes(b"earlier")
    assert cli(*IOTRACE, "export", junk, "-o", out).returncode == 1
    assert out.read_bytes() == b"earlier" and sorted(os.listdir(tmp_path)) == [junk.name, out.name]


def test_export_output_errors_are_usage_errors(tmp_path, job):
    for output, words in ((tmp_path / "x.txt", "unknown output format"),
                          (tmp_path / "no" / "x.pftrace", "no folder"),
                          (tmp_path, "is a folder")):
        p = cli(*IOTRACE, "export", job, "-o", output)
        assert p.returncode == 2 and p.stderr.startswith("usage: iotrace export"), p.stderr
        assert "-o/--output" in said(p)[0] and words in said(p)[0]
    assert sorted(os.listdir(tmp_path)) == ["job"]


# -- 8. -q with nothing to write ----------------------------------------------------------------------

def test_quiet_needs_an_output(tmp_path, job):
    p = cli(*ANALYZE, job, "-q", cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    (line,) = said(p)
    assert "-q/--quiet" in line and "-o OUT" in line
    assert os.listdir(tmp_path) == ["job"]
    assert cli(*ANALYZE, job, "-q", "--summary", tmp_path / "s.json").returncode == 0


# -- 9. iotrace cat of several traces ------------------------------------------------------------------

def test_cat_several_traces_is_one_json_array(tmp_path):
    """Several inputs: one JSON array of all their events, in the files' order, whatever form
    each is in (compact, JSON with gzip, DFTracer's lines without commas, a trace cut short)."""
    names = ["compact-main.iotc.zst", "gzip-fork.pfw.gz", "json-main.pfw.zst"]
    paths = [os.path.join(GOLDEN, n) for n in names]
    alone = []
    for path in paths:
        p = subprocess.run([*IOTRACE, "cat", path], capture_output=True, timeout=60)
        assert p.returncode == 0
        alone.append(json.loads(p.stdout))
    dft = tmp_path / "dft.pfw"
    dft.write_text('[\n{"id":1,"name":"read","ph":"X"}\n{"id":2,"name":"write","ph":"X"}\n')
    cut = tmp_path / "cut.pfw"
    cut.write_text('[\n{"name":"a","ph":"i"},\n{"name":"b","ph":"i"},\n')
    p = subprocess.run([*IOTRACE, "cat", *paths, dft, cut], capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stderr == b""
    assert json.loads(p.stdout) == [e for events in alone for e in events] + \
        [{"id": 1, "name": "read", "ph": "X"}, {"id": 2, "name": "write", "ph": "X"},
         {"name": "a", "ph": "i"}, {"name": "b", "ph": "i"}]
    # one trace: its own text, byte for byte (tests/test_compact.py checks it further)
    one = subprocess.run([*IOTRACE, "cat", cut], capture_output=True, timeout=60)
    assert one.stdout == cut.read_bytes()


def test_cat_output_that_is_a_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("mine")
    p = cli(*IOTRACE, "cat", "-o", f, os.path.join(GOLDEN, "compact-main.iotc.zst"))
    assert p.returncode == 2 and "-o/--output" in said(p)[0] and "is a file" in said(p)[0]
    assert f.read_text() == "mine"


# -- 10. the compact form with gzip or no compression --------------------------------------------------

@pytest.mark.parametrize("options,env,named", [
    (["--format", "compact", "--compression", "gzip"], {}, "--format compact with --compression gzip"),
    (["--compression", "none"], {"IOTRACE_FORMAT": "compact"}, "IOTRACE_FORMAT=compact with --compression none"),
    (["--format", "compact"], {"IOTRACE_COMPRESSION": "gzip"}, "--format compact with IOTRACE_COMPRESSION=gzip"),
    ([], {"IOTRACE_FORMAT": "compact", "IOTRACE_COMPRESSION": "gzip"},
     "IOTRACE_FORMAT=compact with IOTRACE_COMPRESSION=gzip"),
])
def test_run_compact_is_always_zstd(tmp_path, options, env, named):
    out, marker = tmp_path / "t", tmp_path / "ran"
    p = cli(*IOTRACE, "run", "-o", out, *options, "--", "sh", "-c", f"touch {marker}", env=env)
    assert p.returncode == 2 and p.stderr.startswith("usage: iotrace run")
    (line,) = said(p)
    assert line == (f"iotrace run: error: {named}: the compact form is always zstd; use --format json "
                    f"for {named.split()[-1].split('=')[-1]}, or leave the compression out")
    assert not out.exists() and not marker.exists()
