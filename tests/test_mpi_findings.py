"""The MPI job's diagnosis on workloads built to have each problem, and its silence on a clean
run (tests/c/mpi_patterns.c under mpirun -n 4, traced by the preload, with two busy loops
beside it as on a shared node): shared file or file per process, collective or independent,
the ranks' bytes, and the findings imbalance (one rank moving 5x the data), collective-wait
(the others standing in MPI_File_sync for it; a rank computing 4x as much), cpu-starved (a
rank with the others' work on a CPU that busy loops share), mpi-independent-small (4 KiB
independent writes to a shared file) and mpi-misaligned (1 MiB requests 512 B off the stripe),
each naming what the workload really did."""

import os
import shutil
import subprocess

import pytest
import tracing
from iotrace_analyzer.outputs import report
from iotrace_analyzer.pipeline import Options, analyze
from loss_scenarios import busy_load
from mpi_launch import mpirun
from mpi_launch import run as run_mpi

RANKS = 4
MiB = 1 << 20
MPI_RULES = {"imbalance", "collective-wait", "cpu-starved", "mpi-independent-small", "mpi-misaligned",
             "metadata-storm"}

pytestmark = pytest.mark.skipif(not (shutil.which("mpicc") and shutil.which("mpirun")),
                                reason="no MPI (mpicc, mpirun): .ci/setup installs Open MPI")


@pytest.fixture(scope="module")
def patterns(tmp_path_factory):
    exe = tmp_path_factory.mktemp("mpi") / "mpi_patterns"
    subprocess.run(["mpicc", "-O1", "-o", str(exe), str(tracing.C_DIR / "mpi_patterns.c")], check=True)
    return str(exe)


def run(exe: str, mode: str, tmp_path) -> tuple[dict, str]:
    """Trace one mode under load; its summary and text report."""
    data, out = tmp_path / "data", tmp_path / "traces"
    data.mkdir()
    for i in range(8):
        (data / f"input{i}.cfg").write_text(f"step = {i}\n")
    env = dict(os.environ, LD_PRELOAD=tracing.PRELOAD, IOTRACE_DIR=str(out))
    with busy_load(2):
        r = run_mpi([*mpirun(RANKS), exe, mode, str(data)], fresh=[out], env=env, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"{mode} done" in r.stdout
    S = analyze([str(out)], Options(engine="local", workers=1)).summary
    return S, report.text_report(S)


def findings(S: dict) -> dict:
    return {f["id"]: f for f in S.get("findings", []) if f["id"] in MPI_RULES}


def work_findings(S: dict) -> dict:
    """The findings about the job's work: a cpu-starved finding is the busy loops' doing (the
    load the tests run beside), true where the rank it names did the others' work, as every
    rank does in these modes but straggler and compute; checked here, then left out."""
    f = findings(S)
    if "cpu-starved" in f:
        _check_starved(S, f.pop("cpu-starved"))
    return f


def _check_starved(S: dict, finding: dict) -> int:
    """A cpu-starved finding's rank did the same work as the others (I/O calls and bytes within
    10% of their mean; its own CPU too, or what it used beyond theirs is at most half their mean
    and, at the share of a CPU it got, explains at most half of how late it was) and its host
    lacked CPUs as long as it kept each waiting; returns that rank."""
    rows = finding["evidence"]["processes"]
    late, others = rows[0], rows[1:]
    assert len(others) == RANKS - 1
    for k in ("io_calls", "bytes"):
        assert late[k] <= 1.1 * sum(r[k] for r in others) / len(others), (k, rows)
    kept = late["caused_wait_us"] / len(others)
    mean_cpu = sum(r["own_cpu_us"] for r in others) / len(others)
    whole = by_rank(S)[late["rank"]]
    got = min(whole["cpu_us"] / whole["wall_us"], 1.0)
    extra = late["own_cpu_us"] - mean_cpu
    assert late["own_cpu_us"] <= 1.1 * mean_cpu or (extra <= mean_cpu / 2 and extra / got <= kept / 2), (got, rows)
    assert late["host_cpu_wait_us"] >= kept
    assert "collective-wait" not in findings(S)
    return late["rank"]


def by_rank(S: dict) -> dict:
    return {r["rank"]: r for r in S["mpi"]["ranks"]}


def test_clean_collective_run_is_silent(patterns, tmp_path):
    S, text = run(patterns, "collective", tmp_path)
    m = S["mpi"]
    assert m["shape"] == "shared file" and m["shared_files"] == 1 and m["per_process_files"] == 0
    # each rank: one 4 MiB MPI_File_write_at_all and one MPI_File_read_at_all, nothing independent
    assert (m["collective"]["calls"], m["independent"]["calls"]) == (2 * RANKS, 0)
    assert m["collective"]["bytes_written"] == m["collective"]["bytes_read"] == RANKS * 4 * MiB
    assert sorted(by_rank(S)) == list(range(RANKS))
    assert all((r["bytes_written"], r["bytes_read"], r["mpiio_calls"]) == (4 * MiB, 4 * MiB, 4)
               for r in m["ranks"])  # open, write, read, close
    assert m["write_sizes"]["4M-10M"] == m["read_sizes"]["4M-10M"] == RANKS
    assert m["misaligned_calls"] == 0 and m["data_calls_with_offset"] == 2 * RANKS
    # the collective file calls and the barrier matched across the ranks
    assert m["collective_ops"]["calls"] == RANKS * 5 and m["collective_ops"]["unmatched_calls"] == 0
    assert work_findings(S) == {}, [f["title"] for f in findings(S).values()]
    assert "MPI-IO: 16 calls" in text and "shared file (1 shared, 0 per process)" in text


def test_small_independent_writes_to_a_shared_file(patterns, tmp_path):
    S, text = run(patterns, "small", tmp_path)
    m = S["mpi"]
    assert m["shape"] == "shared file"
    assert (m["independent"]["calls"], m["collective"]["calls"]) == (RANKS * 8192, 0)
    assert m["independent"]["bytes_written"] == RANKS * 8192 * 4096
    assert m["write_sizes"]["1K-10K"] == RANKS * 8192
    assert m["misaligned_calls"] == 0  # 4 KiB inside a stripe: small, not misaligned
    f = work_findings(S)
    assert set(f) == {"mpi-independent-small"}, [x["title"] for x in f.values()]
    (row,) = f["mpi-independent-small"]["evidence"]["files"]
    assert row["file"] == str(tmp_path / "data" / "shared.dat")
    assert (row["processes"], row["calls"], row["bytes"], row["collective_calls"]) == \
        (RANKS, RANKS * 8192, RANKS * 8192 * 4096, 0)
    assert f["mpi-independent-small"]["value"] == 4096.0
    assert "mpi-independent-small" in text


def test_file_per_process(patterns, tmp_path):
    S, _text = run(patterns, "perproc", tmp_path)
    m = S["mpi"]
    assert m["shape"] == "file per process" and (m["shared_files"], m["per_process_files"]) == (0, RANKS)
    files = {f["file"]: f for f in m["files"]}
    for r in range(RANKS):
        f = files[str(tmp_path / "data" / f"part{r}.dat")]
        assert (f["processes"], f["independent_calls"], f["bytes_written"]) == (1, 4, 4 * MiB)
    assert work_findings(S) == {}, [f["title"] for f in findings(S).values()]


def test_straggler_rank_named_by_imbalance_and_collective_wait(patterns, tmp_path):
    S, text = run(patterns, "straggler", tmp_path)
    ranks = by_rank(S)
    assert ranks[1]["bytes_written"] == 5 * 8 * MiB and ranks[1]["mpiio_calls"] == 5 * 32 + 3
    assert all(ranks[r]["bytes_written"] == 8 * MiB for r in (0, 2, 3))
    f = findings(S)
    assert {"imbalance", "collective-wait"} <= set(f), (
        [x["title"] for x in f.values()], S["mpi"]["collective_ops"],
        [(r["rank"], r["run_us"], r["slow_wait_us"], r["caused_wait_us"]) for r in S["mpi"]["ranks"]])
    imb = f["imbalance"]
    assert imb["title"].startswith("Rank 1 moves 2.5x") and imb["value"] == 2.5
    assert imb["evidence"]["processes"][0]["rank"] == 1
    cw = f["collective-wait"]
    assert "rank 1 holds them up" in cw["title"]
    top = cw["evidence"]["calls"][0]
    assert (top["name"], top["slowest_rank"]) == ("MPI_File_sync", 1)
    assert cw["evidence"]["processes"][0]["rank"] == 1
    # the others waited for rank 1 in the sync; rank 1 itself barely waited
    assert ranks[1]["caused_wait_us"] > 5 * ranks[1]["slow_wait_us"]
    assert "mpi-independent-small" not in f and "mpi-misaligned" not in f
    assert "rank 1 (pid" in text


def test_misaligned_requests(patterns, tmp_path):
    S, _text = run(patterns, "misaligned", tmp_path)
    m = S["mpi"]
    assert m["misaligned_calls"] == m["data_calls_with_offset"] == RANKS * 16
    f = findings(S)
    assert "mpi-misaligned" in f, [x["title"] for x in f.values()]
    assert f["mpi-misaligned"]["value"] == 1.0
    assert f["mpi-misaligned"]["evidence"]["calls"][0]["calls"] == RANKS * 16
    assert "imbalance" not in f and "mpi-independent-small" not in f


def test_mpi_report_page_in_chromium(patterns, tmp_path):
    """The straggler job's page: its findings, the ranks' plot (a bar per rank in each series)
    and table (a row per rank with its bytes), drawn in the browser."""
    from browser import open_page
    from test_report_page import _check_page, analyzed

    data, out = tmp_path / "data", tmp_path / "traces"
    data.mkdir()
    env = dict(os.environ, LD_PRELOAD=tracing.PRELOAD, IOTRACE_DIR=str(out))
    run_mpi([*mpirun(RANKS), patterns, "straggler", str(data)], fresh=[out], env=env, check=True, timeout=300)
    S = analyzed(str(out), str(tmp_path / "out"))
    shot = str(tmp_path / "page.png")
    page = open_page(str(tmp_path / "out" / "report.html"), shot)
    _check_page(page, shot)
    assert {"imbalance", "collective-wait"} <= set(page["findings"])
    plots = {p["id"]: p for p in page["plots"]}
    assert all(t["points"] == RANKS for t in plots["plot-mpi-ranks"]["traces"])
    assert [r[0] for r in page["ranks"]] == ["0", "1", "2", "3"]
    assert [r[5] for r in page["ranks"]] == ["8.0 MiB", "40.0 MiB", "8.0 MiB", "8.0 MiB"]
    assert "mpi" in page["ids"] and page["ids"].index("findings") < page["ids"].index("mpi")
    assert [r["rank"] for r in S["mpi"]["ranks"]] == [0, 1, 2, 3]


def test_metadata_storm(patterns, tmp_path):
    """Every rank stats, opens and reads the same 8 files 100 times: 4 x 8 x 100 x (stat, open,
    close) metadata calls on files 4 processes share."""
    S, text = run(patterns, "storm", tmp_path)
    f = work_findings(S)
    assert set(f) == {"metadata-storm"}, [x["title"] for x in f.values()]
    ev = f["metadata-storm"]["evidence"]
    inputs = {str(tmp_path / "data" / f"input{i}.cfg") for i in range(8)}
    rows = {r["file"]: r for r in ev["files"]}
    assert inputs <= set(rows)
    for name in inputs:  # each file: 4 ranks x 100 x (stat, open, close), 400 opens
        assert (rows[name]["processes"], rows[name]["opens"]) == (RANKS, RANKS * 100)
        assert rows[name]["metadata_calls"] == RANKS * 100 * 3
    assert ev["metadata_calls"] >= RANKS * 8 * 100 * 3
    assert "metadata-storm" in text


def test_readme_mpi_example(tmp_path):
    """The README's MPI lines, pasted as they are (their /tmp/ paths in a folder of the test's),
    build, trace and analyze the straggler job, and the report names rank 1 as the README says."""
    import re

    readme = (tracing.ROOT / "README.md").read_text()
    block = readme[readme.index("    mpicc -O2 -o /tmp/mpi_patterns"):]
    block = block[:block.index("\n\n")]
    script = "\n".join(line[4:] for line in block.splitlines()).replace("/tmp/", f"{tmp_path}/")
    if os.geteuid() == 0:
        script = script.replace("mpirun -n 4", "mpirun --allow-run-as-root -n 4")
    r = run_mpi(["bash", "-ec", script], fresh=[tmp_path / "mpi-traces"], cwd=tracing.ROOT, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    shown = re.findall(r"^    (\[WARN\] [\w-]+): .*rank 1|^    (\[WARN\] [\w-]+): Rank 1", readme, re.M)
    assert sorted(a or b for a, b in shown) == ["[WARN] collective-wait", "[WARN] imbalance"]
    assert "rank 1 holds them up" in r.stdout and "Rank 1 moves 2.5x the mean MPI-IO bytes" in r.stdout


def _psi() -> bool:
    try:
        with open("/proc/pressure/cpu") as f:
            return f.readline().startswith("some ")
    except OSError:
        return False


@pytest.mark.skipif(not _psi() or (os.cpu_count() or 1) < 2,
                    reason="needs two CPUs and the kernel's CPU pressure (/proc/pressure/cpu)")
def test_a_rank_short_of_cpu_is_cpu_starved_not_a_straggler(patterns, tmp_path):
    """Every rank does the same 20 steps (compute, a 64 KiB write, a barrier); rank 3 runs on
    the last CPU beside 4 busy loops pinned there, the others on CPU 0. The others wait for
    rank 3 at every barrier: cpu-starved names it, collective-wait (which would send the user
    to even out work that is even) does not come. Where other programs load CPU 0 as much (a
    busy machine), rank 3 is no later than the others: every rank is short of CPU alike, and
    cpu-starved names the four, each with its waiting for a CPU outside MPI calls."""
    data, out = tmp_path / "data", tmp_path / "traces"
    data.mkdir()
    env = dict(os.environ, LD_PRELOAD=tracing.PRELOAD, IOTRACE_DIR=str(out))
    last = str((os.cpu_count() or 2) - 1)
    busy = [subprocess.Popen(["taskset", "-c", last, "sh", "-c", "while :; do :; done"]) for _ in range(4)]
    try:
        r = run_mpi([*mpirun(RANKS), patterns, "starved", str(data)], fresh=[out], env=env, text=True, timeout=300)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    assert r.returncode == 0, r.stderr
    S = analyze([str(out)], Options(engine="local", workers=1)).summary
    ranks = by_rank(S)
    assert all(ranks[k]["bytes_written"] == 20 * 65536 for k in range(RANKS))
    f = findings(S)
    assert set(f) == {"cpu-starved"}, [x["title"] for x in f.values()]
    if "MPI ranks waited for a CPU outside MPI calls" in f["cpu-starved"]["title"]:  # all alike
        rows = f["cpu-starved"]["evidence"]["processes"]
        assert sorted(r["rank"] for r in rows) == list(range(RANKS)), rows
        for r in rows:  # their waiting outside MPI: not their CPU time, not their I/O
            k = ranks[r["rank"]]
            assert r["run_us"] == k["run_us"] and r["cpu_wait_us"] >= 0.3 * k["run_us"]
            assert r["cpu_wait_us"] <= k["run_us"] - k["mpi_us"] - k["mpiio_us"] - k["own_cpu_us"]
    else:
        assert _check_starved(S, f["cpu-starved"]) == 3
        assert "for rank 3, which did the same work" in f["cpu-starved"]["title"]
        # the others polled in the barriers: more CPU in all, the same outside MPI
        assert min(ranks[k]["cpu_us"] for k in range(3)) > ranks[3]["cpu_us"]
    assert report.text_report(S).count("cpu-starved") == 1


def test_a_rank_with_more_compute_is_a_straggler(patterns, tmp_path):
    """Rank 1 computes 4 times as much in each of the 20 steps, with the same I/O: the others
    wait for its work, and collective-wait names it (its own CPU time 4x theirs), not
    cpu-starved, however loaded the machine."""
    S, text = run(patterns, "compute", tmp_path)
    ranks = by_rank(S)
    others = [ranks[k]["own_cpu_us"] for k in (0, 2, 3)]
    assert ranks[1]["own_cpu_us"] > 3 * max(others)
    f = findings(S)
    assert set(f) == {"collective-wait"}, [x["title"] for x in f.values()]
    assert "rank 1 holds them up" in f["collective-wait"]["title"]
    assert f["collective-wait"]["evidence"]["processes"][0]["rank"] == 1
