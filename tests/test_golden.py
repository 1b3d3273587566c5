"""Golden traces (tests/golden/, see its README.md) keep reading, with every reader, forever.

iotrace traces of each format version (tests/golden/v3/ to v7/; the compact form, the JSON form in
zstd and in gzip; a main process and its fork child; from v7 on, the HDF5 workload's process too):
* `iotrace cat FILE` prints exactly FILE.expected.json (the text the writing library itself
  rendered);
* `iotrace-analyze FILE` counts as many events and metadata events as that text has;
* `iotrace export FILE -o X.json.gz` writes as many X events as that text has.

DFTracer traces (tests/golden/dftracer1/: 1.x style, string ph; dftracer2/: written by DFTracer
2.2, numeric ph, ts in µs since the epoch), and fresh ones from the DFTracer installed for this
Python (or named by IOTRACE_TEST_DFTRACER: its package folder, or a Python that has it), with
and without DFTRACER_INC_METADATA: `iotrace-analyze` reports per call the count and bytes the
file's own events give, and `iotrace export` keeps every complete event.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import make_golden  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "golden"
TRACE_SUFFIXES = (".iotc.zst", ".pfw.zst", ".pfw.gz", ".pfw")
IOTRACE = [sys.executable, "-m", "iotrace"]
DAMAGE_KEYS = ('damaged_files', 'missing_metadata', 'unresolved_file_hashes')

# bytes moved (docs/analyzer.md): args.bytes if present, else ret when ret > 0, for these calls
DATA_CALLS = frozenset(
    "read pread pread64 readv preadv preadv64 preadv2 fread fgets getline getdelim "
    "write pwrite pwrite64 writev pwritev pwritev64 pwritev2 fwrite fputs copy_file_range "
    "sendfile sendfile64".split())
IO_CATS = ("posix", "stdio")


def _traces(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith(TRACE_SUFFIXES))


IOTRACE_SETS = sorted(d for d in GOLDEN.glob("v[0-9]*") if d.is_dir())
IOTRACE_GOLDEN = [p for d in IOTRACE_SETS for p in _traces(d)]
DFTRACER_GOLDEN = _traces(GOLDEN / "dftracer1") + _traces(GOLDEN / "dftracer2")


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.name}"


def _analyze_cmd() -> list[str]:
    """The iotrace-analyze command of this Python's installation."""
    exe = Path(sys.executable).parent / "iotrace-analyze"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("iotrace-analyze")
    return [found] if found else [sys.executable, "-m", "iotrace_analyzer"]


def run_analyze(trace: Path | str, tmp_path: Path, what: str = "") -> dict:
    """`iotrace-analyze TRACE --no-parquet -q --summary S.json`; asserts exit 0; the summary."""
    out = tmp_path / "summary.json"
    cmd = _analyze_cmd() + [str(trace), "--no-parquet", "-q", "--summary", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, (
        f"iotrace-analyze exited {r.returncode} on {what or trace}\n"
        f"stderr (last 2000 chars): {r.stderr[-2000:]}")
    assert out.exists(), f"iotrace-analyze wrote no {out}"
    return json.loads(out.read_text())


def run_export(trace: Path | str, tmp_path: Path, what: str = "") -> list[dict]:
    """`iotrace export TRACE -o X.json.gz`; asserts exit 0; the exported events."""
    out = tmp_path / "export.json.gz"
    r = subprocess.run(IOTRACE + ["export", str(trace), "-o", str(out)], capture_output=True,
                       text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, (
        f"iotrace export exited {r.returncode} on {what or trace}\n"
        f"stderr (last 2000 chars): {r.stderr[-2000:]}")
    with gzip.open(out, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


# -- the sets are there ----------------------------------------------------------------------


def test_golden_sets_present():
    names = {d.name for d in IOTRACE_SETS}
    assert {"v3", "v4", "v5", "v6", "v7"} <= names, f"golden sets missing in {GOLDEN}: have {sorted(names)}"
    for d in IOTRACE_SETS:
        traces = _traces(d)
        roles = ("main", "fork", "hdf5") if int(d.name[1:]) >= make_golden.HDF5_FROM_VERSION else ("main", "fork")
        want = {f"{form}-{role}{suffix}" for form, _, suffix in make_golden.IOTRACE_FORMS for role in roles}
        assert {p.name for p in traces} == want, f"{d}: (compact, json, gzip) x {roles}"
        for t in traces:
            assert Path(str(t) + ".expected.json").exists(), f"{t} has no .expected.json"
    assert [p.name for p in _traces(GOLDEN / "dftracer1")] == ["handmade.pfw.gz"]
    assert [p.name for p in _traces(GOLDEN / "dftracer2")] == ["no-metadata.pfw.gz",
                                                               "with-metadata.pfw.gz"]


def test_current_set_has_every_hdf5_call():
    """The set of the current format version holds a row of every HDF5 call the tracer records
    (its HDF5 workload makes them all), so each is pinned for the readers to come."""
    import iotrace
    from iotrace_format import calls

    want = {name for _n, name, cat, _f in calls() if cat == "hdf5"}
    d = GOLDEN / f"v{iotrace.FORMAT_VERSION}"
    assert d.is_dir(), f"no golden set for format version {iotrace.FORMAT_VERSION}: tests/make_golden.py"
    for form, _, suffix in make_golden.IOTRACE_FORMS:
        text = expected_text(d / f"{form}-hdf5{suffix}").decode()
        seen = {json.loads(line.rstrip(",]"))["name"] for line in text.split("\n") if '"cat":"hdf5"' in line}
        assert seen == want, f"{form}: missing {sorted(want - seen)}"


# -- live files of every layout version -------------------------------------------------------

LIVE_SETS = sorted(d for d in GOLDEN.glob("live[0-9]*") if d.is_dir())
# tests/golden/live_workload.c's calls, in order: (name, size, offset, ret, file, flags, mode,
# second file); the file by its name under the data folder.
LIVE_CALLS = [
    ("open", None, None, 3, "live.bin", 577, 0o644, None),  # O_CREAT|O_WRONLY|O_TRUNC
    ("pwrite", 100, 0, 100, "live.bin", None, None, None),
    ("pwrite", 100, 100, 100, "live.bin", None, None, None),
    ("pwrite", 100, 200, 100, "live.bin", None, None, None),
    ("fsync", None, None, 0, "live.bin", None, None, None),
    ("close", None, None, 0, "live.bin", None, None, None),
    ("rename", None, None, 0, "live.bin", None, None, "moved.bin"),
    ("open", None, None, 3, "moved.bin", 0, None, None),
    ("pread", 50, 25, 50, "moved.bin", None, None, None),
    ("read", 10, 0, 10, "moved.bin", None, None, None),
    ("close", None, None, 0, "moved.bin", None, None, None),
]


def test_live_sets_present():
    names = {d.name for d in LIVE_SETS}
    assert {"live1", "live2", "live3"} <= names, f"live file sets missing in {GOLDEN}: have {sorted(names)}"


@pytest.mark.parametrize("live_set", LIVE_SETS, ids=lambda d: d.name)
def test_live_file_of_every_version_is_finished(live_set, tmp_path):
    """A process killed with its records only in its live file, by the library of each live
    layout version: `iotrace recover --force` finishes its trace with every call it made, in
    order, with its sizes, offsets, results, flags, mode and both files of the rename (the long
    form of a version-2 or 3 record beside the short one), and says it was killed (13 events: the
    11 calls and the names of the 2 files)."""
    from tracing import TraceSet

    for p in live_set.iterdir():
        shutil.copyfile(p, tmp_path / p.name)
    r = subprocess.run(IOTRACE + ["recover", "--force", str(tmp_path)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "13 events added, ended: killed" in r.stdout, (r.stdout, r.stderr)
    assert not list(tmp_path.glob("*.live"))
    (f,) = TraceSet.load(tmp_path).files
    base = lambda p: os.path.basename(p) if p else None  # noqa: E731
    got = [(e["name"], e["args"].get("size"), e["args"].get("offset"), e["args"].get("ret"), base(e["fname"]),
            e["args"].get("flags"), e["args"].get("mode"), base(e["fname2"]))
           for e in f.events() if e["ph"] == "X"]
    assert got == LIVE_CALLS
    assert f.closed and f.end["reason"] == "killed" and f.end["events"] == len(f.records) - 1


# -- iotrace traces of every version -------------------------------------------------------


def expected_text(trace: Path) -> bytes:
    return Path(str(trace) + ".expected.json").read_bytes()


def expected_counts(text: bytes) -> dict[str, int]:
    """Event lines of an expected JSON text: metadata (`"ph":"M"`), others, and X."""
    n = collections.Counter()
    for line in text.decode().split("\n"):
        if not line or line == "[":
            continue
        if '"ph":"M"' in line:
            n["metadata"] += 1
        else:
            n["events"] += 1
        if '"ph":"X"' in line:
            n["X"] += 1
    return n


@pytest.mark.parametrize("trace", IOTRACE_GOLDEN, ids=_id)
def test_cat_prints_expected(trace):
    want = expected_text(trace)
    r = subprocess.run(IOTRACE + ["cat", str(trace)], capture_output=True, timeout=120)
    assert r.returncode == 0, f"iotrace cat exited {r.returncode}: {r.stderr.decode()[-2000:]}"
    if r.stdout != want:
        got_lines, want_lines = r.stdout.split(b"\n"), want.split(b"\n")
        i = next((i for i, (a, b) in enumerate(zip(got_lines, want_lines)) if a != b),
                 min(len(got_lines), len(want_lines)))
        pytest.fail(f"iotrace cat {_id(trace)} differs from its .expected.json at line {i + 1} "
                    f"({len(r.stdout)} bytes, expected {len(want)}):\n"
                    f"  got:      {got_lines[i] if i < len(got_lines) else b'<end>'!r}\n"
                    f"  expected: {want_lines[i] if i < len(want_lines) else b'<end>'!r}")


@pytest.mark.parametrize("trace", IOTRACE_GOLDEN, ids=_id)
def test_analyze_counts_events(trace, tmp_path):
    n = expected_counts(expected_text(trace))
    S = run_analyze(trace, tmp_path)
    got = {"events": S["job"]["events"], "metadata": S["job"]["metadata_events"]}
    assert got == {"events": n["events"], "metadata": n["metadata"]}, (
        f"iotrace-analyze {_id(trace)}: job events/metadata_events {got}, the expected JSON has "
        f"{n['events']} event lines and {n['metadata']} metadata lines")
    d = S["damage"]
    if "-main." in trace.name:  # its fork child's trace is its -fork sibling, not given here
        child = _sibling(trace, "fork")
        assert [(m["pid"], m["parent_pid"], m["started_by"]) for m in d["missing_children"]] == [
            (_pid(child), _pid(trace), "fork")], f"the fork child of {_id(trace)} alone: {d}"
        assert d["by_kind"] == {"missing-child": 1} and d["damaged_files"] == 1, d
    else:
        assert d["damaged_files"] == 0 and d["missing_children"] == [], f"damage reported: {d}"


def _sibling(trace: Path, role: str) -> Path:
    return trace.with_name(trace.name.replace("-main.", f"-{role}.").replace("-fork.", f"-{role}."))


def _pid(trace: Path) -> int:
    """The pid of a golden trace's iotrace_process line."""
    for line in expected_text(trace).decode().split("\n"):
        if '"name":"iotrace_process"' in line:
            return json.loads(line.rstrip(",]"))["pid"]
    raise AssertionError(f"{trace}: no iotrace_process line")


@pytest.mark.parametrize("trace", [p for p in IOTRACE_GOLDEN if "-main." in p.name], ids=_id)
def test_analyze_main_with_its_fork_child(trace, tmp_path):
    """The main process and its fork child together: the child the main file started has its
    trace, so nothing is missing and nothing is damaged."""
    both = tmp_path / "both"
    both.mkdir()
    for t in (trace, _sibling(trace, "fork")):
        shutil.copy(t, both / t.name)
    S = run_analyze(both, tmp_path)
    assert S["job"]["processes"] == 2
    assert S["damage"]["damaged_files"] == 0 and S["damage"]["missing_children"] == [], S["damage"]


@pytest.mark.parametrize("trace", IOTRACE_GOLDEN, ids=_id)
def test_export_keeps_x_events(trace, tmp_path):
    n = expected_counts(expected_text(trace))
    events = run_export(trace, tmp_path)
    x = sum(1 for e in events if e.get("ph") == "X")
    assert x == n["X"], f"iotrace export {_id(trace)}: {x} X events, the expected JSON has {n['X']}"


# -- DFTracer traces -------------------------------------------------------------------------


def dftracer_lines(path: Path) -> list[dict]:
    """Every JSON event of a DFTracer trace: all gzip members (DFTracer may write several)
    inflated, `[`/`]` and blank lines skipped, trailing commas tolerated."""
    raw = path.read_bytes()
    text = gzip.decompress(raw) if path.name.endswith(".gz") else raw
    out = []
    for line in text.decode().split("\n"):
        line = line.strip().rstrip(",")
        if line in ("", "[", "]"):
            continue
        out.append(json.loads(line))
    return out


def is_complete(ev: dict) -> bool:
    return ev.get("ph") in (1, "1", "X")


def dftracer_truth(paths: list[Path]) -> dict:
    """From the files themselves: complete events, and per I/O call name (cat POSIX/STDIO)
    count and bytes moved (args.bytes, else ret when ret > 0, for read/write-like calls)."""
    calls = collections.defaultdict(lambda: [0, 0])
    complete = 0
    for p in paths:
        for ev in dftracer_lines(p):
            if not is_complete(ev):
                continue
            complete += 1
            if str(ev.get("cat", "")).lower() not in IO_CATS:
                continue
            c = calls[ev["name"]]
            c[0] += 1
            if ev["name"] in DATA_CALLS:
                a = ev.get("args") or {}
                if "bytes" in a:
                    c[1] += int(a["bytes"])
                elif isinstance(a.get("ret"), int) and a["ret"] > 0:
                    c[1] += a["ret"]
    return {"complete": complete, "calls": {k: tuple(v) for k, v in sorted(calls.items())}}


def summary_calls(S: dict) -> dict[str, tuple[int, int]]:
    """summary.json `calls`: a list of {"name", "count", "bytes", "time_us", ...}."""
    return {c["name"]: (c["count"], c["bytes"]) for c in sorted(S["calls"], key=lambda c: c["name"])}


def trace_form(paths: list[Path]) -> str:
    """How the file writes ph and ts, for the failure messages."""
    phs = {type(ev.get("ph")).__name__ + ":" + str(ev.get("ph")) for p in paths for ev in dftracer_lines(p)}
    numeric = any(ph.startswith("int:") for ph in phs)
    return (f"ph values {sorted(phs)}: "
            + ("numeric ph (DFTracer 2.x), integer ts in us since the epoch" if numeric
               else "string ph (DFTracer 1.x style)"))


def check_analyzer(paths: list[Path], target: Path, tmp_path: Path, what: str):
    what = f"{what} [{trace_form(paths)}]"
    truth = dftracer_truth(paths)
    assert truth["calls"], f"{what}: no POSIX/STDIO complete event in the trace itself"
    S = run_analyze(target, tmp_path, what)
    got = summary_calls(S)
    if got != truth["calls"]:
        diff = {k: {"trace": truth["calls"].get(k), "analyzer": got.get(k)}
                for k in sorted(set(got) | set(truth["calls"])) if got.get(k) != truth["calls"].get(k)}
        pytest.fail(
            f"iotrace-analyze on {what}: per-call (count, bytes) differ from the trace's own "
            f"events ({sum(c for c, _ in truth['calls'].values())} I/O calls in the trace, "
            f"{sum(c for c, _ in got.values())} in summary.json calls; job: events "
            f"{S.get('job', {}).get('events')}, complete_events {S.get('job', {}).get('complete_events')}, "
            f"metadata_events {S.get('job', {}).get('metadata_events')}; damage "
            f"{ {k: S.get('damage', {}).get(k) for k in DAMAGE_KEYS} })\n"
            f"  (call: trace vs analyzer) {diff}")


def check_export(paths: list[Path], target: Path, tmp_path: Path, what: str):
    what = f"{what} [{trace_form(paths)}]"
    truth = dftracer_truth(paths)
    events = run_export(target, tmp_path, what)
    x = sum(1 for e in events if e.get("ph") == "X")
    assert x == truth["complete"], (
        f"iotrace export on {what}: {x} X events written, the trace has {truth['complete']} "
        f"complete events (ph 1 or \"X\")")


@pytest.mark.parametrize("trace", DFTRACER_GOLDEN, ids=_id)
def test_dftracer_golden_analyze(trace, tmp_path):
    check_analyzer([trace], trace, tmp_path, f"golden {_id(trace)}")


@pytest.mark.parametrize("trace", DFTRACER_GOLDEN, ids=_id)
def test_dftracer_golden_export(trace, tmp_path):
    check_export([trace], trace, tmp_path, f"golden {_id(trace)}")


@pytest.fixture(scope="module")
def dftracer():
    spec = os.environ.get("IOTRACE_TEST_DFTRACER")
    dft = make_golden.find_dftracer(spec)
    if dft is None:
        where = f"IOTRACE_TEST_DFTRACER={spec}" if spec else f"this Python ({sys.executable})"
        pytest.skip(f"no dftracer package with libdftracer_preload.so found for {where}: "
                    "pip install dftracer, or set IOTRACE_TEST_DFTRACER to its package folder "
                    "or to a Python that has it")
    return dft


@pytest.fixture(scope="module")
def fresh_dftracer_traces(dftracer, tmp_path_factory):
    """The workload traced by the installed DFTracer: {"no-metadata": folder, "with-metadata": folder}."""
    base = tmp_path_factory.mktemp("dftracer")
    try:
        exe = make_golden.compile_workload(base / "build")
    except make_golden.GoldenError as e:
        if "no C compiler" in str(e):
            pytest.skip(str(e))
        raise
    out = {}
    for key, metadata in (("no-metadata", False), ("with-metadata", True)):
        data = base / f"data-{key}"
        data.mkdir()
        traces = base / f"traces-{key}"
        files = make_golden.run_dftracer(dftracer, exe, traces, data, metadata)
        assert files, f"DFTracer {dftracer['version']} ({dftracer['preload']}) wrote no trace in {traces}"
        out[key] = traces
    return out


@pytest.mark.parametrize("key", ["no-metadata", "with-metadata"])
def test_dftracer_fresh_analyze(fresh_dftracer_traces, dftracer, key, tmp_path):
    folder = fresh_dftracer_traces[key]
    check_analyzer(_traces(folder), folder, tmp_path,
                   f"a fresh DFTracer {dftracer['version']} trace ({key}, {folder})")


@pytest.mark.parametrize("key", ["no-metadata", "with-metadata"])
def test_dftracer_fresh_export(fresh_dftracer_traces, dftracer, key, tmp_path):
    folder = fresh_dftracer_traces[key]
    check_export(_traces(folder), folder, tmp_path,
                 f"a fresh DFTracer {dftracer['version']} trace ({key}, {folder})")
