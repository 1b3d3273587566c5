"""The summary's `training` section against figures worked out by hand (docs/auto.md events).

Main process 100, DataLoader 0, times in µs:
  epoch 0 [1000, 2000): fetch [1000,1300) [1400,1450) [1500,1550) -> wait 400, compute 600
  epoch 1 [2000, 3000): fetch [2000,2100) [2200,2250)             -> wait 150, compute 850
  torch.save [3100, 3600) 4096 bytes -> 8.192 MB/s
  numpy.load x2: 100 and 200 bytes, 10 µs each
Workers 201 and 202 (role fork in their header, then iotrace_process_info: dataloader 0 / 1):
  samples 10 + 20 + 30 µs in 201; 5 + 5 µs in 202, the last one failed
"""
import json

import pyarrow.parquet as pq
from conftest import end, meta, process, span, write_trace
from iotrace_analyzer.pipeline import Options, analyze

US = 1000


def _main():
    p = 100
    ev = [process(p)]
    ev += [span("epoch", "dataloader", p, 1000 * US, 1000 * US,
                args={"loader": 0, "epoch": 0, "batches": 3}),
           span("epoch", "dataloader", p, 2000 * US, 1000 * US,
                args={"loader": 0, "epoch": 1, "batches": 2})]
    for i, (t, d) in enumerate([(1000, 300), (1400, 50), (1500, 50)]):
        ev.append(span("fetch", "dataloader", p, t * US, d * US, args={"epoch": 0, "batch": i}))
    for i, (t, d) in enumerate([(2000, 100), (2200, 50)]):
        ev.append(span("fetch", "dataloader", p, t * US, d * US, args={"epoch": 1, "batch": i}))
    ev.append(span("torch.save", "checkpoint", p, 3100 * US, 500 * US,
                   args={"file": "/ckpt/model.pt", "bytes": 4096}))
    ev.append(span("numpy.load", "data", p, 3700 * US, 10 * US, args={"file": "a.npy", "bytes": 100}))
    ev.append(span("numpy.load", "data", p, 3800 * US, 10 * US, args={"file": "b.npy", "bytes": 200}))
    return ev + [end(p, len(ev))]


def _worker(p, wid, durs, failed_last=False):
    ev = [process(p, role="fork", parent_pid=100)]
    t = 1010
    for i, d in enumerate(durs):
        a = {"index": i}
        if failed_last and i == len(durs) - 1:
            a["exception"] = "KeyError"
        ev.append(span("sample", "dataloader", p, t * US, d * US, args=a))
        t += 100
    ev.append(meta("iotrace_process_info", p, {"role": "dataloader", "parent_pid": 100,
                                                "worker_id": wid}))
    return ev + [end(p, len(ev))]


def test_training_section(tmp_path):
    write_trace(tmp_path / "t" / "main.pfw.zst", _main())
    write_trace(tmp_path / "t" / "w1.pfw.zst", _worker(201, 0, [10, 20, 30]))
    write_trace(tmp_path / "t" / "w2.pfw.zst", _worker(202, 1, [5, 5], failed_last=True))
    S = analyze([str(tmp_path / "t")], Options(out_dir=str(tmp_path / "out"), engine="local")).summary
    T = S["training"]
    (ld,) = T["loaders"]
    assert (ld["pid"], ld["loader"], ld["epochs"], ld["batches"]) == (100, 0, 2, 5)
    assert (ld["epoch_time_us"], ld["fetch_wait_us"], ld["wait_share"]) == (2000.0, 550.0, 0.275)
    assert [(e["epoch"], e["batches"], e["duration_us"], e["fetch_wait_us"], e["compute_us"],
             e["wait_share"], e["first_batch_wait_us"]) for e in ld["per_epoch"]] == [
        (0, 3, 1000.0, 400.0, 600.0, 0.4, 300.0), (1, 2, 1000.0, 150.0, 850.0, 0.15, 100.0)]
    assert T["batches"] == 5
    assert T["samples"] == dict(count=5, time_us=70.0, errors=1, processes=2, mean_us=14.0)
    (ck,) = T["checkpoints"]
    assert (ck["name"], ck["file"], ck["bytes"], ck["duration_us"], ck["bandwidth_MBps"]) == \
        ("torch.save", "/ckpt/model.pt", 4096, 500.0, 8.192)
    assert T["data_calls"] == [dict(name="numpy.load", count=2, time_us=20.0, bytes=300)]
    # the role learnt after the header, in the processes table
    procs = {r["pid"]: r for r in pq.read_table(tmp_path / "out" / "processes.parquet").to_pylist()}
    assert [(procs[p]["role"], procs[p]["parent_pid"], procs[p]["worker_id"]) for p in (201, 202)] \
        == [("dataloader", 100, 0), ("dataloader", 100, 1)]
    assert procs[100]["role"] == "main" and procs[100]["worker_id"] is None
    json.dumps(T)  # summary.json holds it as is


def test_no_training_section_without_those_events(tmp_path):
    p = 100
    write_trace(tmp_path / "t" / "a.pfw.zst",
                [process(p), span("step", "compute", p, 1000 * US, 10 * US), end(p, 2)])
    S = analyze([str(tmp_path / "t")], Options(engine="local")).summary
    assert S["training"] == dict(loaders=[], batches=0, samples=dict(
        count=0, time_us=0.0, errors=0, processes=0, mean_us=None), checkpoints=[], data_calls=[])


def test_a_programs_own_events_in_the_hooks_categories_are_its_own(tmp_path):
    """@trace(name="load", cat="data") and friends: the program's, not the hooks' (the analyzer
    once died on them parsing a missing `bytes`); the hooks' events beside them still count."""
    p = 100
    ev = [process(p),
          span("load", "data", p, 1000 * US, 10 * US, args={"path": "a.bin"}),
          span("load", "data", p, 1100 * US, 10 * US, args={"bytes": "12"}),
          span("checkpoint", "checkpoint", p, 1200 * US, 50 * US),
          span("epoch", "dataloader", p, 1300 * US, 50 * US, args={"loader": "x", "epoch": "one"}),
          span("numpy.load", "data", p, 1400 * US, 10 * US, args={"file": "a.npy", "bytes": 100}),
          span("numpy.save", "data", p, 1500 * US, 10 * US, args={"file": "b.npy"})]
    write_trace(tmp_path / "t" / "a.pfw.zst", ev + [end(p, len(ev))])
    S = analyze([str(tmp_path / "t")], Options(engine="local")).summary
    T = S["training"]
    assert T["loaders"] == [] and T["checkpoints"] == []
    assert T["data_calls"] == [dict(name="numpy.load", count=1, time_us=10.0, bytes=100),
                               dict(name="numpy.save", count=1, time_us=10.0, bytes=0)]
    cats = {c["cat"]: c["count"] for c in S["categories"]}
    assert cats == {"data": 4, "checkpoint": 1, "dataloader": 1}  # still the program's categories
