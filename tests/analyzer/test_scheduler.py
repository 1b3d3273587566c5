"""The analysis on an existing Dask cluster (`iotrace-analyze --scheduler ADDRESS`) gives the
summary the local run gives: on a cluster of a `dask scheduler` and two `dask worker`
processes started apart, and on one started by dask-jobqueue's own SLURMCluster (what
docs/mpi.md tells users to run), its jobs handed to a stand-in `sbatch` that starts each job
script on this machine (no Slurm here: the rest is the real dask-jobqueue and Dask)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from make_expected import hosts, pipeline  # synthetic jobs written as the tracer writes them

# the analyzer's own figures of a run, not the job's: left out of the comparison
OWN = ("input", "seconds", "findings_seconds", "report_seconds")


def job(tmp_path) -> str:
    """Two synthetic jobs in one folder: many processes over two hosts, forks, an exec, damage."""
    traces = tmp_path / "traces"
    traces.mkdir()
    pipeline(str(traces))
    hosts(str(traces))
    return str(traces)


def summary(traces: str, out: str, *args: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "iotrace_analyzer", traces, "-o", out, "-q", *args],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(out, "summary.json")) as f:
        S = json.load(f)
    return {k: v for k, v in S.items() if k not in OWN}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_workers(address: str, n: int) -> None:
    from dask.distributed import Client

    with Client(address, timeout=60) as c:
        c.wait_for_workers(n, timeout=120)


def test_separately_started_scheduler_and_workers(tmp_path):
    traces = job(tmp_path)
    local = summary(traces, str(tmp_path / "local"), "--engine", "local")
    address = f"tcp://127.0.0.1:{free_port()}"
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", address.rsplit(":", 1)[1], "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        time.sleep(1)
        for k in range(2):
            procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                           "--nthreads", "1", "--no-dashboard", "--name", f"w{k}"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for_workers(address, 2)
        remote = summary(traces, str(tmp_path / "remote"), "--scheduler", address)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
    assert remote == local
    assert local["job"]["processes"] >= 8 and local["job"]["hosts"] == 3


FAKE_SBATCH = """#!/bin/bash
# a stand-in for Slurm's sbatch: runs the job script here, in the background
set -e
exec 9> "$FAKE_SLURM/lock"; flock 9  # submissions come at once: one number each
id=$(( $(cat "$FAKE_SLURM/next" 2>/dev/null || echo 1000) + 1 )); echo $id > "$FAKE_SLURM/next"
cp "$1" "$FAKE_SLURM/job-$id.sh"  # the submitter deletes its file once sbatch returns, as Slurm allows
setsid bash "$FAKE_SLURM/job-$id.sh" > "$FAKE_SLURM/job-$id.log" 2>&1 < /dev/null 9>&- &
echo $! > "$FAKE_SLURM/job-$id.pid"
echo "Submitted batch job $id"
flock -u 9
"""
FAKE_SCANCEL = """#!/bin/bash
for id in "$@"; do kill -TERM -- -$(cat "$FAKE_SLURM/job-$id.pid") 2>/dev/null || true; done
"""


def test_dask_jobqueue_slurm_cluster(tmp_path, monkeypatch):
    dask_jobqueue = pytest.importorskip("dask_jobqueue")
    bin_dir, state = tmp_path / "bin", tmp_path / "slurm"
    bin_dir.mkdir()
    state.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("scancel", FAKE_SCANCEL), ("squeue", "#!/bin/bash\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM", str(state))
    traces = job(tmp_path)
    local = summary(traces, str(tmp_path / "local"), "--engine", "local")
    cluster = dask_jobqueue.SLURMCluster(cores=1, processes=1, memory="1GB", walltime="00:10:00",
                                         python=sys.executable, scheduler_options={"host": "127.0.0.1"},
                                         worker_extra_args=["--no-dashboard"], log_directory=str(state))
    try:
        assert "#SBATCH" in cluster.job_script()
        cluster.scale(jobs=2)
        wait_for_workers(cluster.scheduler_address, 2)
        remote = summary(traces, str(tmp_path / "remote"), "--scheduler", cluster.scheduler_address)
    finally:
        cluster.close()
        for pid in state.glob("job-*.pid"):
            try:
                os.killpg(int(pid.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert remote == local
    assert sorted(p.name for p in state.glob("job-*.log")) == ["job-1001.log", "job-1002.log"]


pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
