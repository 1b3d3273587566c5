"""Darshan logs in (issue 26): every real log the darshan wheel ships analyzes, its figures are
the counters pydarshan's own reader gives, and a damaged, cut, foreign or old log is a clear
error or a partial result that says what is missing, never a traceback."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

darshan = pytest.importorskip("darshan")

HERE = os.path.dirname(darshan.__file__)
LOGS = sorted({os.path.realpath(p) for p in glob.glob(os.path.join(HERE, "**", "*.darshan"), recursive=True)})
SAMPLE = os.path.join(HERE, "tests", "input", "sample.darshan")
DXT = os.path.join(HERE, "tests", "input", "sample-dxt-simple.darshan")


def analyze(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "iotrace_analyzer", *args], capture_output=True, text=True,
                       timeout=300)
    assert "Traceback" not in p.stderr, p.stderr
    if ok:
        assert p.returncode == 0, p.stderr
    return p


def summary_of(log: str, tmp_path, *args: str) -> dict:
    out = tmp_path / "s.json"
    analyze(log, "--summary", str(out), "-q", *args)
    return json.loads(out.read_text())


def _report(log: str):
    darshan.enable_experimental()
    r = darshan.DarshanReport(log, read_all=True)
    return r


def _sum(r, mod: str, counter: str) -> int:
    if mod not in r.records:
        return 0
    df = r.records[mod].to_df()
    return int(df["counters"][counter].sum()) if counter in df["counters"] else 0


def test_the_wheel_ships_logs():
    names = {os.path.basename(p) for p in LOGS}
    assert {"sample.darshan", "sample-dxt-simple.darshan", "sample-badost.darshan", "dxt.darshan",
            "noposix.darshan", "ior_hdf5_example.darshan"} <= names, names


@pytest.mark.parametrize("log", LOGS, ids=os.path.basename)
def test_figures_are_the_counters(log, tmp_path):
    """Bytes, calls and ranks as pydarshan's reader counts them; the job record as it says."""
    S = summary_of(log, tmp_path)
    r = _report(log)
    job = r.metadata["job"]
    d = S["darshan"]
    assert d["nprocs"] == job["nprocs"] and d["jobid"] == job["jobid"]
    assert d["run_time_s"] == pytest.approx(job["end_time_sec"] - job["start_time_sec"], abs=1)
    assert set(d["modules"]) == set(r.modules)
    read = _sum(r, "POSIX", "POSIX_BYTES_READ") + _sum(r, "STDIO", "STDIO_BYTES_READ")
    written = _sum(r, "POSIX", "POSIX_BYTES_WRITTEN") + _sum(r, "STDIO", "STDIO_BYTES_WRITTEN")
    classes = S["file_classes"].values()
    assert sum(c["bytes_read"] for c in classes) == read
    assert sum(c["bytes_written"] for c in classes) == written
    assert sum(p["bytes_read"] for p in S["processes"]) == read
    calls = {c["name"]: c for c in S["calls"]}
    for name, mod, counter in (("read", "POSIX", "POSIX_READS"), ("write", "POSIX", "POSIX_WRITES"),
                               ("open", "POSIX", "POSIX_OPENS"), ("fwrite", "STDIO", "STDIO_WRITES")):
        assert calls.get(name, {}).get("count", 0) == _sum(r, mod, counter), name
    # every rank with a record of its own is a process; a record of all ranks makes them all
    ranks = set()
    for mod in ("POSIX", "STDIO"):
        if mod in r.records:
            rk = r.records[mod].to_df()["counters"]["rank"]
            ranks |= set(range(job["nprocs"])) if (rk == -1).any() else set(rk.tolist())
    assert {p["rank"] for p in S["processes"]} == ranks
    assert S["job"]["processes"] == len(ranks)
    # the size histogram is Darshan's bins, summed
    h = S["access"]["write"]["size_histogram"]
    assert sum(h.values()) == sum(_sum(r, "POSIX", k) for k in
                                  [c for c in (r.records["POSIX"].to_df()["counters"].columns
                                               if "POSIX" in r.records else []) if c.startswith("POSIX_SIZE_WRITE_")])
    if "MPI-IO" in r.records:
        m = S["mpi"]
        assert m["collective"]["calls"] == _sum(r, "MPI-IO", "MPIIO_COLL_WRITES") + \
            _sum(r, "MPI-IO", "MPIIO_COLL_READS") + _sum(r, "MPI-IO", "MPIIO_SPLIT_READS") + \
            _sum(r, "MPI-IO", "MPIIO_SPLIT_WRITES")
        assert sum(f["bytes_written"] for f in m["files"]) == _sum(r, "MPI-IO", "MPIIO_BYTES_WRITTEN")
        assert m["from_counters"] is True
    # what counters cannot tell is said
    assert d["not_known"] and "collective-wait" in d["rules_skipped"]


def test_shared_record_is_every_rank(tmp_path):
    """sample.darshan: one POSIX record reduced over its 2048 ranks: a file of 2048 processes,
    its bytes shared out between them to the byte."""
    S = summary_of(SAMPLE, tmp_path)
    r = _report(SAMPLE)
    df = r.records["POSIX"].to_df()["counters"]
    assert list(df["rank"]) == [-1]
    f = S["files"][0]
    assert f["processes"] == 2048 and f["bytes_written"] == int(df["POSIX_BYTES_WRITTEN"].iloc[0])
    per = [p["bytes_written"] for p in S["processes"]]
    assert max(per) - min(per) <= int(df["POSIX_BYTES_WRITTEN"].iloc[0]) // 2048 + 1 + \
        _sum(r, "STDIO", "STDIO_BYTES_WRITTEN")


def test_dxt_segments_are_the_events(tmp_path):
    """sample-dxt-simple.darshan: its DXT segments are the events, one per segment, in Parquet
    with their rank, file, offset, length and times; the counters' figures are not counted twice."""
    import pyarrow.parquet as pq

    out = tmp_path / "o"
    analyze(DXT, "-o", str(out), "-q")
    S = json.loads((out / "summary.json").read_text())
    r = _report(DXT)
    segs = []
    for mod, cat in (("DXT_POSIX", "posix"), ("DXT_MPIIO", "mpiio")):
        for rec in r.records[mod].to_df():
            for kind in ("read", "write"):
                for _i, s in rec[f"{kind}_segments"].iterrows():
                    segs.append((cat, kind, rec["rank"], r.name_records[rec["id"]], int(s["offset"]), int(s["length"]),
                                 round(s["start_time"], 6)))
    ev = pq.read_table(str(out / "events")).to_pylist()
    start = S["darshan"]["start_ns"]
    got = sorted((e["cat"], e["name"], e["pid"], e["fname"], e["offset"], e["size"],
                  round((e["ts_ns"] - start) / 1e9, 6)) for e in ev)
    assert got == sorted(segs) and len(got) == S["job"]["events"] > 0
    assert S["calls"] and {c["name"]: c["count"] for c in S["calls"]}["write"] == _sum(r, "POSIX", "POSIX_WRITES")


def test_a_folder_of_logs_and_a_mix(tmp_path):
    a, b = tmp_path / "logs" / "a.darshan", tmp_path / "logs" / "b.darshan"
    a.parent.mkdir()
    a.write_bytes(open(SAMPLE, "rb").read())
    b.write_bytes(open(DXT, "rb").read())
    out = tmp_path / "s.json"
    analyze(str(a.parent), "--summary", str(out), "-q")
    S = json.loads(out.read_text())
    assert len(S["darshan"]["logs"]) == 2 and S["input"]["files"] == 2
    (a.parent / "x-host-1.pfw").write_text("[\n")
    p = analyze(str(a.parent), ok=False)
    assert p.returncode == 2 and "a mix of Darshan logs" in p.stderr, p.stderr


def _cut(src: str, dst, n: int) -> str:
    dst.write_bytes(open(src, "rb").read()[:n])
    return str(dst)


def test_bad_logs_are_clear_errors(tmp_path):
    """Not a log, a header cut off, an old format, a damaged job record: exit 2, the file and
    what is wrong named, no traceback."""
    data = open(SAMPLE, "rb").read()
    cases = {}
    (tmp_path / "random.darshan").write_bytes(os.urandom(4000))
    cases["random.darshan"] = "not a Darshan log"
    cases[os.path.basename(_cut(SAMPLE, tmp_path / "head.darshan", 200))] = "cut off in its header"
    old = bytearray(data)
    old[:8] = b"2.06\0\0\0\0"
    (tmp_path / "old.darshan").write_bytes(bytes(old))
    cases["old.darshan"] = "format '2.06' is not supported"
    job = bytearray(data)
    job[400:420] = bytes(20)  # inside the job record's compressed stream
    (tmp_path / "job.darshan").write_bytes(bytes(job))
    cases["job.darshan"] = "its job record"
    (tmp_path / "empty.darshan").write_bytes(b"")
    cases["empty.darshan"] = "only 0 bytes"
    for name, want in cases.items():
        p = analyze(str(tmp_path / name), ok=False)
        assert p.returncode == 2 and name in p.stderr and want in p.stderr, (name, p.stderr)


def test_damaged_modules_are_left_out_and_said(tmp_path):
    """A log cut inside its module regions: the job is analyzed from what is whole, and the
    summary's damage names each module left out."""
    for cut in (3000, 8000, 11000):
        log = _cut(SAMPLE, tmp_path / f"cut{cut}.darshan", cut)
        p = analyze(log, "--summary", str(tmp_path / "s.json"), "-q")
        S = json.loads((tmp_path / "s.json").read_text())
        kinds = S["damage"]["by_kind"]
        details = " ".join(r["detail"] for r in S["damage"]["records"])
        assert kinds.get("darshan-module", 0) >= 1 and "left out" in details, (cut, S["damage"])
        assert "damaged input" in p.stderr
        present = {m for m, d in S["darshan"]["modules"].items() if not d["damaged"]}
        assert all(S["darshan"]["modules"][m]["records"] for m in present & {"POSIX", "STDIO", "MPI-IO"})


def test_corrupted_bytes_inside_a_region(tmp_path):
    """Bytes flipped inside the names' region: zlib's checksum finds it; files go by their
    record ids, the figures stay."""
    data = bytearray(open(SAMPLE, "rb").read())
    for i in range(4000, 4100):
        data[i] ^= 0x5A
    (tmp_path / "c.darshan").write_bytes(bytes(data))
    S = summary_of(str(tmp_path / "c.darshan"), tmp_path)
    assert S["damage"]["by_kind"] == {"darshan-names": 1}
    assert S["files"][0]["file"].startswith("<unknown ") and S["files"][0]["bytes_written"] > 0


def test_no_posix_module(tmp_path):
    """noposix.darshan has STDIO and Lustre records only: analyzed, and the summary says POSIX
    is missing."""
    S = summary_of(os.path.join(HERE, "tests", "input", "noposix.darshan"), tmp_path)
    assert S["darshan"]["missing"] == ["POSIX"]
    assert {c["name"] for c in S["calls"]} <= {"fopen", "fdopen", "fread", "fwrite", "fseek", "fflush"}
    assert S["files"]


def _bench():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    import darshan_bench

    return darshan_bench


def test_current_format_written_by_the_library(tmp_path):
    """Logs of format 3.41 (darshan 3.4 and 3.5: a 64-bit partial flag, 64 module slots),
    written by libdarshan-util's own put functions (benchmarks/darshan_bench.py): 8 ranks of 2
    files each plus a file all ranks wrote, and a DXT log of 4 ranks; every figure as written."""
    b = _bench()
    log = str(tmp_path / "c.darshan")
    b.write_counters(log, ranks=8, files=2, run_s=100.0)
    S = summary_of(log, tmp_path)
    assert S["darshan"]["format"] == "3.41" and S["darshan"]["nprocs"] == 8
    f = {r["file"]: r for r in S["files"]}
    assert f["/scratch/job/checkpoint.h5"]["processes"] == 8
    assert f["/scratch/job/checkpoint.h5"]["bytes_written"] == 16 * 8 * 4096
    assert f["/scratch/job/rank0003/out1.h5"]["bytes_read"] == 100 * 4096
    calls = {c["name"]: c["count"] for c in S["calls"]}
    assert calls["read"] == 16 * 100 and calls["write"] == 16 * 200 + 16 * 8 and calls["fwrite"] == 80
    assert sorted(p["rank"] for p in S["processes"]) == list(range(8))
    assert all(p["bytes_written"] == 2 * 200 * 4096 + 16 * 4096 + 800 for p in S["processes"])
    dxt = str(tmp_path / "d.darshan")
    n = b.write_dxt(dxt, segments=1000, ranks=4, files=2, run_s=10.0)
    S = summary_of(dxt, tmp_path)
    assert S["job"]["events"] == n == 1000 and S["darshan"]["dxt"]
    per = 1000 // 8  # segments per record: half writes (rounded down), then reads
    assert sum(S["timeline"]["bytes_written"]) == 8 * (per // 2) * 65536
    assert sum(S["timeline"]["bytes_read"]) == 8 * (per - per // 2) * 65536


def test_a_module_version_the_library_does_not_know(tmp_path):
    """A newer Darshan's module (a version the library cannot read): the rest is analyzed, the
    module is left out and named with its version, and a log without readable POSIX says so."""
    b = _bench()
    log = str(tmp_path / "new.darshan")
    b.MOD["POSIX"] = (1, 99)
    try:
        b.write_counters(log, ranks=4, files=1, run_s=10.0)
    finally:
        b.MOD["POSIX"] = (1, 4)
    p = analyze(log, "--summary", str(tmp_path / "s.json"), "-q")
    S = json.loads((tmp_path / "s.json").read_text())
    (rec,) = S["damage"]["records"]
    assert rec["kind"] == "darshan-module" and "POSIX records of module version 99" in rec["detail"]
    assert S["darshan"]["missing"] == ["POSIX"] and "darshan-module" in p.stderr
    assert {c["name"] for c in S["calls"]} == {"fopen", "fwrite"}  # the STDIO records are read


def test_a_log_as_a_source_of_events():
    """DarshanLog.batches: the DXT segments as the format layer's batches (what a reader of
    sources gets), the files named by FH lines."""
    import pyarrow as pa

    from iotrace_analyzer.inputs import gather

    (src,) = gather([DXT]).sources
    damage: list = []
    batches = list(src.batches(damage))
    rows = [r for b in batches for r in pa.record_batch(b).to_pylist()]
    assert damage == [] and len(rows) == 3 and {r["cat"] for r in rows} == {"posix", "mpiio"}
    names = b"".join(m for b in batches for m in b.meta)
    assert all(r["fhash"].encode() in names for r in rows) and b'"FH"' in names


def test_compare_two_logs(tmp_path):
    """--compare of two Darshan logs: IOR runs on Lustre, with a bad OST (sample-badost, 2048
    ranks) and without (sample-goodost, 48): the imbalance across ranks the bad OST made is
    fixed."""
    bad = os.path.join(HERE, "tests", "input", "sample-badost.darshan")
    good = os.path.join(HERE, "tests", "input", "sample-goodost.darshan")
    p = analyze("--compare", bad, good, "-o", str(tmp_path))
    C = json.loads((tmp_path / "compare.json").read_text())
    fixed = {f["id"] for f in C["findings"] if f["status"] == "fixed"}
    assert "imbalance" in fixed, C["findings"]
    assert "FIXED   imbalance" in p.stdout, p.stdout
