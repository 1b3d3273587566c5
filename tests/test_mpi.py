"""An MPI job traced as the README says (`LD_PRELOAD=... IOTRACE_DIR=traces mpirun -n 4 ./app`):
every rank's trace, each with exactly the POSIX calls its rank made, named by its rank (from
the launcher's OMPI_COMM_WORLD_RANK) and the job id, and the analysis naming the ranks.
tests/c/mpi_io.c: each rank writes 4 blocks of 64 KiB to a file of its own and reads them back.
"""

import os
import shutil
import subprocess

import pytest
import tracing
from iotrace_analyzer.pipeline import Options, analyze

RANKS = 4
BLOCK = 65536

pytestmark = pytest.mark.skipif(not (shutil.which("mpicc") and shutil.which("mpirun")),
                                reason="no MPI (mpicc, mpirun): .ci/setup installs Open MPI")


@pytest.fixture(scope="module")
def mpi_io(tmp_path_factory):
    build = tmp_path_factory.mktemp("mpi")
    exe = build / "mpi_io"
    subprocess.run(["mpicc", "-O0", "-o", str(exe), str(tracing.C_DIR / "mpi_io.c")], check=True)
    return str(exe)


def mpirun(n: int) -> list[str]:
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return ["mpirun", "-n", str(n), "--oversubscribe", *root]


@pytest.mark.parametrize("how", ["preload", "iotrace-run"])
def test_readme_mpirun_line_traces_every_rank(mpi_io, tmp_path, how):
    """`how`: the README's LD_PRELOAD line, or `iotrace run -o traces -- mpirun ...`."""
    data = tmp_path / "data"
    data.mkdir()
    out = tmp_path / "traces"
    env = dict(os.environ, SLURM_JOB_ID="777")
    cmd = [*mpirun(RANKS), mpi_io, str(data)]
    if how == "preload":
        env.update(LD_PRELOAD=tracing.PRELOAD, IOTRACE_DIR=str(out), IOTRACE_INCLUDE=str(data))
    else:
        cmd = ["iotrace", "run", "-o", str(out), "--include", str(data), "--", *cmd]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"{RANKS} ranks done" in r.stdout
    for rank in range(RANKS):  # the program's own results, as untraced
        assert (data / f"r{rank}.bin").read_bytes() == bytes([ord("a") + rank]) * (4 * BLOCK)

    ts = tracing.TraceSet.load(out)
    by_rank = {}
    for f in ts.files:
        ranks = f.header.get("ranks", {})
        if "OMPI_COMM_WORLD_RANK" in ranks and f.events():
            by_rank[int(ranks["OMPI_COMM_WORLD_RANK"])] = f
    assert sorted(by_rank) == list(range(RANKS))
    for rank, f in by_rank.items():
        assert f.end is not None and f.header["ranks"]["SLURM_JOB_ID"] == "777"
        mine = str(data / f"r{rank}.bin")
        ev = [e for e in f.events() if e.get("fname") == mine]
        calls = [(e["name"], e["args"].get("offset"), e["args"].get("ret")) for e in ev]
        writes = [c for c in calls if c[0].startswith("pwrite")]
        reads = [c for c in calls if c[0].startswith("pread")]
        assert [c[1:] for c in writes] == [(i * BLOCK, BLOCK) for i in range(4)]
        assert [c[1:] for c in reads] == [(i * BLOCK, BLOCK) for i in range(4)]
        assert len(ev) == 10  # open, 4 pwrite, 4 pread, close: nothing else on its file
        assert not [e for e in f.events() if e.get("fname", "") and e["fname"].startswith(str(data))
                    and e["fname"] != mine]  # no other rank's file

    S = analyze([str(out)], Options(engine="local", workers=1)).summary
    ranked = {p["rank"]: p for p in S["processes"] if p["rank"] is not None}
    assert sorted(ranked) == list(range(RANKS))
    assert all(p["job_id"] == "777" and p["io_events"] == 10 for p in ranked.values())
    calls = {c["name"]: (c["count"], c["bytes"]) for c in S["calls"]}
    assert calls["pwrite"] == calls["pread"] == (4 * RANKS, 4 * RANKS * BLOCK)
    assert S["damage"]["damaged_files"] == 0
