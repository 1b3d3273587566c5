"""Ranks without MPI: a torchrun launch (python -m torch.distributed.run, which starts its
workers with RANK, LOCAL_RANK and WORLD_SIZE) traced by `iotrace run`: every worker's trace
named by its rank, the summary's processes, the Parquet table and the Perfetto export's
process names carrying it."""

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

WORKERS = 4
WORKER = r"""
import os, sys
r = int(os.environ["RANK"])
with open(os.path.join(sys.argv[1], f"shard{r}.bin"), "rb") as f:
    n = len(f.read())
print(f"rank {r} of {os.environ['WORLD_SIZE']} read {n}")
"""


def test_torchrun_workers_named_by_rank(tmp_path):
    pytest.importorskip("torch")
    data = tmp_path / "data"
    data.mkdir()
    for r in range(WORKERS):
        (data / f"shard{r}.bin").write_bytes(bytes([r]) * (r + 1) * 4096)
    script = tmp_path / "w.py"
    script.write_text(WORKER)
    traces = tmp_path / "traces"
    env = dict(os.environ, SLURM_JOB_ID="31337")
    p = subprocess.run(["iotrace", "run", "-o", str(traces), "--", sys.executable, "-m", "torch.distributed.run",
                        "--standalone", "--nproc-per-node", str(WORKERS), str(script), str(data)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert sorted(x for x in p.stdout.splitlines() if x.startswith("rank ")) == \
        [f"rank {r} of {WORKERS} read {(r + 1) * 4096}" for r in range(WORKERS)]
    names = sorted(os.listdir(traces))
    for r in range(WORKERS):  # the file of each worker says its job and rank
        assert len([n for n in names if f"-j31337-r{r}-" in n]) == 1, names

    out = tmp_path / "out"
    a = subprocess.run([sys.executable, "-m", "iotrace_analyzer", str(traces), "-o", str(out), "-q"],
                       capture_output=True, text=True, timeout=300)
    assert a.returncode == 0, a.stderr
    with open(out / "summary.json") as f:
        S = json.load(f)
    ranked = {p["rank"]: p for p in S["processes"] if p["rank"] is not None}
    assert sorted(ranked) == list(range(WORKERS))
    assert all(p["job_id"] == "31337" and p["bytes_read"] >= (r + 1) * 4096 for r, p in ranked.items())
    t = pq.read_table(out / "processes.parquet").to_pylist()
    assert sorted(r["rank"] for r in t if r["rank"] is not None) == list(range(WORKERS))
    assert {r["job_id"] for r in t} == {"31337"}

    export = tmp_path / "job.json"
    e = subprocess.run(["iotrace", "export", "-o", str(export), str(traces)], capture_output=True, text=True,
                       timeout=300)
    assert e.returncode == 0, e.stderr
    with open(export) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    shown = [ev["args"]["name"] for ev in events if ev.get("ph") == "M" and ev.get("name") == "process_name"]
    for r in range(WORKERS):
        assert any(n.startswith(f"rank {r}") for n in shown), shown
