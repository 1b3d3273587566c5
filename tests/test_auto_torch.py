"""Zero annotation: a PyTorch script with no iotrace import, traced as users run it.

The script reads 10 files through a DataLoader (batch_size 4: batches of 4, 4 and 2) for two
epochs, then saves and loads a checkpoint. Under the tracer the Python layer hooks torch by
itself (the start-up .pth, iotrace.auto), so every run must show exactly: 6 `fetch` and 2
`epoch` events in the main process, 20 `sample` events (in the workers, or in the main process
without workers), one `torch.save` and one `torch.load` whose bytes are the file's size, and
loader workers labelled role "dataloader" with their worker_id and the main process as parent.
With IOTRACE_AUTO=0 none of these events exist.
"""
from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest

import iotrace_format
import tracing
from pytrace_helpers import PY, clean_env, py_events, run_py, write_script

torch = pytest.importorskip("torch", reason="torch is not installed: .ci/setup installs the "
                                            "2.13.0 CPU wheel")

SCRIPT = """
    import json, os, sys
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Files(Dataset):
        def __init__(self, folder):
            self.paths = [os.path.join(folder, f"s{i}.bin") for i in range(10)]
        def __len__(self):
            return len(self.paths)
        def __getitem__(self, i):
            with open(self.paths[i], "rb") as f:
                return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).float().sum()

    if __name__ == "__main__":
        workers, method, persistent = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
        folder = os.path.join(os.getcwd(), "data")
        os.makedirs(folder, exist_ok=True)
        for i in range(10):
            with open(os.path.join(folder, f"s{i}.bin"), "wb") as f:
                f.write(bytes([i]) * (100 + i))
        loader = DataLoader(Files(folder), batch_size=4, num_workers=workers,
                            multiprocessing_context=None if method == "-" else method,
                            persistent_workers=persistent)
        sums = []
        for epoch in range(2):
            for batch in loader:
                sums += batch.tolist()
        ckpt = os.path.join(os.getcwd(), "model.pt")
        torch.save({"w": torch.arange(1000.0)}, ckpt)
        state = torch.load(ckpt)
        print(json.dumps({"pid": os.getpid(), "sums": sums, "ckpt": ckpt,
                          "w": float(state["w"].sum())}))
"""

EXPECTED_SUMS = [float(i * (100 + i)) for i in range(10)] * 2


def _run(tmp_path, workers: int, method: str, persistent: bool, mode: str = "preload",
         env: dict | None = None):
    ts = run_py(SCRIPT, tmp_path, mode=mode, env=env, args=(workers, method, int(persistent)),
                timeout=180)
    assert ts.out["sums"] == EXPECTED_SUMS
    return ts


CASES = [  # workers, start method, persistent_workers
    (0, "-", False),
    (1, "fork", False),
    (2, "fork", False),
    (2, "fork", True),
    (2, "spawn", False),
    (2, "spawn", True),
    (2, "forkserver", False),
]


@pytest.mark.parametrize("workers,method,persistent", CASES,
                         ids=[f"{w}w-{m}-{'persistent' if p else 'fresh'}" for w, m, p in CASES])
def test_dataloader_and_checkpoints_without_annotation(tmp_path, workers, method, persistent):
    ts = _run(tmp_path, workers, method, persistent)
    main = ts.out["pid"]

    fetch = py_events(ts, cat="dataloader", name="fetch")
    assert {e["pid"] for e in fetch} == {main}
    assert [(e["args"]["epoch"], e["args"]["batch"]) for e in fetch] == \
        [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    epochs = py_events(ts, cat="dataloader", name="epoch")
    assert [(e["pid"], e["args"]) for e in epochs] == \
        [(main, {"loader": 0, "epoch": 0, "batches": 3}),
         (main, {"loader": 0, "epoch": 1, "batches": 3})]
    for ep in epochs:  # each pass holds its three waits
        inside = [f for f in fetch if f["args"]["epoch"] == ep["args"]["epoch"]]
        assert all(ep["ts"] <= f["ts"] and f["ts"] + f["dur"] <= ep["ts"] + ep["dur"] + 0.002
                   for f in inside)

    samples = py_events(ts, cat="dataloader", name="sample")
    assert sorted(e["args"]["index"] for e in samples) == sorted(list(range(10)) * 2)
    sample_pids = collections.Counter(e["pid"] for e in samples)
    if workers == 0:
        assert set(sample_pids) == {main}
    else:
        assert main not in sample_pids
        n_procs = workers if persistent else 2 * workers  # fresh workers every epoch
        assert len(sample_pids) == n_procs
        ids = collections.Counter()
        for pid in sample_pids:
            p = ts.process(pid)
            assert p["role"] == "dataloader", p
            assert p["parent_pid"] == main
            ids[p["worker_id"]] += 1
        assert ids == {w: n_procs // workers for w in range(workers)}
        # each sample's reads are in its worker's file, inside the sample
        reads = [e for e in ts.events(name="read", under=tmp_path / "data")]
        assert len(reads) >= 20 and {e["pid"] for e in reads} == set(sample_pids)

    ckpt, size = ts.out["ckpt"], os.path.getsize(ts.out["ckpt"])
    saves = py_events(ts, cat="checkpoint", name="torch.save")
    loads = py_events(ts, cat="checkpoint", name="torch.load")
    assert [e["args"] for e in saves] == [{"file": ckpt, "bytes": size}]
    assert [e["args"] for e in loads] == [{"file": ckpt, "bytes": size}]
    assert saves[0]["pid"] == loads[0]["pid"] == main
    # what torch wrote is what the event says; the tracer's look at the size is not recorded
    written = sum(e["args"].get("ret", 0) for e in ts.events(pid=main, fname=ckpt)
                  if e["name"] in iotrace_format.calls_of("write"))
    assert written == size
    by_path = {"stat", "stat64", "__xstat", "__xstat64", "statx", "lstat", "lstat64", "fstatat",
               "fstatat64", "access", "faccessat"}  # (Python's open() fstats its own fd)
    assert [e["name"] for e in ts.events(pid=main, fname=ckpt) if e["name"] in by_path] == []


def test_export_labels_loader_workers(tmp_path):
    """Forked loader workers learn their role after their trace opened (an
    iotrace_process_info line): the Perfetto export labels them by it, numbered by worker_id,
    under the main process."""
    from iotrace_analyzer.export.merge import export
    from perfetto_tp import load_trace

    ts = _run(tmp_path, 2, "fork", True)
    main = ts.out["pid"]
    workers = sorted(pid for pid in ts.pids if ts.process(pid).get("role") == "dataloader")
    assert len(workers) == 2
    out = str(tmp_path / "job.pftrace")
    export([ts.dir], out, jobs=1)
    with load_trace(out) as tp:
        names = {r["pid"]: r["name"] for r in tp.query("select pid, name from process where pid > 0")}
    main_label = names[main]
    assert {names[w] for w in workers} == {f"{main_label} · dataloader {ts.process(w)['worker_id']}"
                                           for w in workers}
    assert {ts.process(w)["worker_id"] for w in workers} == {0, 1}


def test_python_layer_alone_records_the_same(tmp_path):
    """IOTRACE_ENABLE=1 without the interposer: the same Python events, no iotrace import."""
    ts = _run(tmp_path, 2, "fork", False, mode="enable")
    assert len(py_events(ts, cat="dataloader", name="fetch")) == 6
    assert len(py_events(ts, cat="dataloader", name="epoch")) == 2
    assert len(py_events(ts, cat="dataloader", name="sample")) == 20
    assert len(py_events(ts, cat="checkpoint")) == 2
    assert ts.events(cat="posix") == []


def test_iotrace_auto_0_records_none_of_them(tmp_path):
    ts = _run(tmp_path, 2, "spawn", False, env={"IOTRACE_AUTO": "0"})
    assert py_events(ts, cat="dataloader") == [] and py_events(ts, cat="checkpoint") == []
    main = ts.out["pid"]
    assert ts.count("read", under=tmp_path / "data") >= 20  # POSIX tracing goes on
    # without the Python layer, spawned workers keep the role the core gives them
    assert {ts.process(f.pid)["role"] for f in ts.files if f.pid != main} <= \
        {"spawn", "resource_tracker"}


def test_iotrace_run_on_by_default_and_no_auto(tmp_path):
    script = write_script(tmp_path, SCRIPT)
    for flag, expect in (([], 6), (["--no-auto"], 0)):
        out = tmp_path / f"t{len(flag)}"
        p = subprocess.run([sys.executable, "-m", "iotrace", "run", "-o", str(out), *flag, "--",
                            PY, str(script), "0", "-", "0"], cwd=tmp_path, env=clean_env(),
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        ts = tracing.TraceSet.load(out)
        fetch = [e for e in ts.events(cat="dataloader") if e["name"] == "fetch"]
        assert len(fetch) == expect


ERRORS = """
    import json, sys
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Bad(Dataset):
        def __len__(self):
            return 8
        def __getitem__(self, i):
            if i == 5:
                raise KeyError(f"no sample {i}")
            return i

    if __name__ == "__main__":
        loader = DataLoader(Bad(), batch_size=2, num_workers=int(sys.argv[1]))
        got = []
        try:
            for b in loader:
                got += b.tolist()
        except KeyError as e:
            print(json.dumps({"type": type(e).__name__, "got": got,
                              "first_line": str(e).splitlines()[0]}))
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_exception_in_getitem_propagates_unchanged(tmp_path, workers):
    plain = run_py(ERRORS, tmp_path, mode="off", args=(workers,), timeout=120)
    traced = run_py(ERRORS, tmp_path, mode="preload", args=(workers,), timeout=120)
    assert traced.out == plain.out and plain.out["type"] == "KeyError"
    assert plain.out["got"] == [0, 1, 2, 3]
    failed = [e for e in py_events(traced, cat="dataloader", name="sample")
              if "exception" in e["args"]]
    assert [e["args"] for e in failed] == [{"index": 5, "exception": "KeyError"}]
    fetch = py_events(traced, cat="dataloader", name="fetch")
    assert [e["args"].get("exception") for e in fetch] == [None, None, "KeyError"]


SHAPES = """
    import json, os
    import torch
    from torch.utils.data import DataLoader, Dataset, IterableDataset

    class Batched(Dataset):            # __getitems__: one call per batch
        def __len__(self):
            return 10
        def __getitems__(self, idx):
            return [torch.tensor(i) for i in idx]
        def __getitem__(self, i):
            raise AssertionError("not used when __getitems__ exists")

    class Stream(IterableDataset):     # iterable: one sample per item drawn
        def __iter__(self):
            return iter(range(7))

    if __name__ == "__main__":
        for b in DataLoader(Batched(), batch_size=4):
            pass
        for b in DataLoader(Stream(), batch_size=3):
            pass
        loader = DataLoader(list(range(20)), batch_size=5)
        for i, b in enumerate(loader):  # a pass left early, then a full one
            if i == 1:
                break
        for b in loader:
            pass
        print(json.dumps({"pid": os.getpid()}))
"""


def test_getitems_iterable_and_passes_left_early(tmp_path):
    ts = run_py(SHAPES, tmp_path, mode="preload", timeout=120)
    samples = py_events(ts, cat="dataloader", name="sample")
    batched = [e.get("args") for e in samples[:3]]
    assert batched == [{"index": 0, "count": 4}, {"index": 4, "count": 4},
                       {"index": 8, "count": 2}]
    assert [e.get("args", {}) for e in samples[3:10]] == [{}] * 7  # the stream's 7 items
    assert len(samples) == 3 + 7 + 2 * 5 + 20
    epochs = [e["args"] for e in py_events(ts, cat="dataloader", name="epoch")]
    assert epochs == [{"loader": 0, "epoch": 0, "batches": 3},
                      {"loader": 1, "epoch": 0, "batches": 3},
                      {"loader": 2, "epoch": 0, "batches": 2, "complete": False},
                      {"loader": 2, "epoch": 1, "batches": 4}]
