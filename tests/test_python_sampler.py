"""IOTRACE_SAMPLE_MS: counter events named "process" (cpu_percent, rss_bytes, open_files, and
read_bytes/write_bytes where /proc/<pid>/io is readable): one as sampling starts and one as the
process ends, both by its main thread, and one per period between by a daemon thread. So every
process that samples has two at least, however short: main, fork children, multiprocessing
workers (fork and spawn), DataLoader workers.

The program goes through phases marked by instant events; the samples of each phase are
checked against what the phase did: busy loop (CPU), sleep (no CPU), 5 more open files,
200 MiB more resident memory.  A sample measured just before a phase change can be recorded
just after its instant (the sampler measures, then waits for the GIL, then records), so a
phase's samples are those whose window (previous sample, this sample] lies in the phase.
"""
from __future__ import annotations

import statistics

import pytest

from pytrace_helpers import metadata, ns, py_events, run_py

PERIOD_MS = 50
BASE_KEYS = {"cpu_percent", "rss_bytes", "open_files"}
IO_KEYS = {"read_bytes", "write_bytes"}

PHASES_CODE = """
    import json, os, sys, threading, time, iotrace

    iotrace.flush()                      # the trace file is open from now on: fds stay put
    def busy(sec):
        end = time.perf_counter() + sec
        while time.perf_counter() < end:
            pass

    iotrace.instant("busy")
    busy(0.8)
    iotrace.instant("idle")
    time.sleep(0.5)
    iotrace.instant("files")
    fs = [open(os.devnull) for _ in range(5)]
    iotrace.instant("files_open")        # after the 5 opens: later samples see 5 more fds
    time.sleep(0.4)
    iotrace.instant("memory")
    big = bytearray(b"\\x01") * (200 << 20)
    iotrace.instant("memory_held")
    time.sleep(0.4)
    iotrace.instant("end")
    sampler = [t for t in threading.enumerate() if t.name == "iotrace-sampler"]
    print(json.dumps({"pid": os.getpid(), "psutil": "psutil" in sys.modules,
                      "sampler_tid": sampler[0].native_id if sampler else None}))
"""


def _marks(ts):
    return {e["name"]: ns(e["ts"]) for e in py_events(ts, ph="i")}


def _between(samples, lo, hi):
    return [e for e in samples if lo <= ns(e["ts"]) <= hi]


def _samples(ts, pid):
    return sorted((e for e in py_events(ts, pid=pid, ph="C") if e["name"] == "process"),
                  key=lambda e: ns(e["ts"]))


def _check_samples(ts, pid):
    """The samples of `pid`: the first and the last by the main thread (tid == pid), the periodic
    ones between by the sampler thread, one per period."""
    samples = _samples(ts, pid)
    assert len(samples) >= 2, "no start and end samples"
    assert samples[0]["tid"] == pid and samples[-1]["tid"] == pid, [e["tid"] for e in samples]
    periodic = samples[1:-1]
    assert all(e["tid"] != pid for e in periodic)
    for e in samples:
        assert set(e["args"]) in (BASE_KEYS, BASE_KEYS | IO_KEYS), e["args"]
        assert e["pid"] == pid and "cat" not in e and "dur" not in e
        assert e["args"]["rss_bytes"] > 5 << 20 and e["args"]["open_files"] >= 3
        assert 0 <= e["args"]["cpu_percent"] <= 100 * 64
    times = [ns(e["ts"]) for e in periodic]
    gaps = [b - a for a, b in zip(times, times[1:])]
    # one sampler, one sample per period (never two samplers: gaps would halve)
    assert not gaps or min(gaps) >= (PERIOD_MS - 5) * 1_000_000, gaps
    return samples


def _windows(samples, lo, hi):
    """Samples whose whole measuring window (previous sample, this sample] lies in [lo, hi]:
    measured in that phase for sure, however late the sampler thread was scheduled."""
    times = sorted((ns(e["ts"]), i) for i, e in enumerate(samples))
    out = []
    for (t0, _), (t1, i) in zip(times, times[1:]):
        if lo <= t0 and t1 <= hi:
            out.append(samples[i])
    return out


def _check_phases(ts, samples):
    m = _marks(ts)
    span_ms = (m["end"] - m["busy"]) / 1e6
    inside = _between(samples, m["busy"], m["end"])
    assert len(inside) <= span_ms / PERIOD_MS + 1
    assert len(inside) >= 10, (len(inside), span_ms)      # ~36 when the machine is quiet
    busy = _windows(samples, m["busy"], m["idle"])
    idle = _windows(samples, m["idle"], m["files"])
    t0 = m["busy"]
    when = ({k: round((v - t0) / 1e6, 1) for k, v in m.items()},
            [round((ns(e["ts"]) - t0) / 1e6, 1) for e in samples])  # ms since "busy"
    assert len(busy) >= 1 and len(idle) >= 1, when  # ~16 and ~10 on a quiet machine
    cpu_busy = [e["args"]["cpu_percent"] for e in busy]
    # the first idle sample's window still holds the end of the busy loop: leave it out
    cpu_idle = [e["args"]["cpu_percent"] for e in idle[1:]] or [idle[0]["args"]["cpu_percent"]]
    print(f"cpu_percent busy {cpu_busy} idle {cpu_idle}")
    # a busy loop: ~100 % of a core on a quiet machine, less on a loaded one; sleeping: ~0.
    # CPU time comes in 10 ms ticks: one tick in a 50 ms window reads as ~20 %
    busy_mean, idle_mean = statistics.mean(cpu_busy), statistics.mean(cpu_idle)
    # one window may catch two ticks of the writer thread's own flush (40 %): not more
    assert idle_mean <= 10 and sorted(cpu_idle)[-2 if len(cpu_idle) > 1 else -1] <= 25, cpu_idle
    assert busy_mean >= idle_mean + 10, (cpu_busy, cpu_idle)
    # exactly 5 more open files once they are open, as many as before until then
    before = {e["args"]["open_files"] for e in _windows(samples, m["busy"], m["files"])}
    after = {e["args"]["open_files"] for e in _windows(samples, m["files_open"], m["end"])}
    assert len(before) == 1 and after == {before.pop() + 5}, (before, after)
    # 200 MiB more resident once allocated
    rss_before = [e["args"]["rss_bytes"] for e in _windows(samples, m["files_open"], m["memory"])]
    rss_after = [e["args"]["rss_bytes"] for e in _windows(samples, m["memory_held"], m["end"])]
    assert rss_before and rss_after
    assert min(rss_after) - max(rss_before) >= 190 << 20, (rss_before, rss_after)


def test_sampler_counters_follow_the_program(tmp_path):
    ts = run_py(PHASES_CODE, tmp_path, env={"IOTRACE_SAMPLE_MS": str(PERIOD_MS)})
    pid = ts.pid
    assert ts.out["psutil"] is True
    samples = _check_samples(ts, pid)
    _check_phases(ts, samples)
    # the periodic ones on the sampler thread, which is named
    tid = ts.out["sampler_tid"]
    assert {e["tid"] for e in samples[1:-1]} == {tid} and tid != pid
    names = [r["args"]["name"] for r in metadata(ts, "thread_name", pid) if r["tid"] == tid]
    assert names[-1] == "iotrace-sampler"


def test_sampler_under_preload_one_file_one_sampler(tmp_path):
    ts = run_py(PHASES_CODE, tmp_path, mode="preload", env={"IOTRACE_SAMPLE_MS": str(PERIOD_MS)},
                include=[tmp_path / "none"])
    pid = ts.pid
    assert len(ts.files_of(pid)) == 1
    _check_phases(ts, _check_samples(ts, pid))


def test_sampler_via_init(tmp_path):
    ts = run_py("""
        import json, os, sys, time, iotrace
        assert not iotrace.active()
        ok = iotrace.init(dir=sys.argv[1], sample_ms=50)
        iotrace.instant("start")
        time.sleep(0.5)
        iotrace.instant("end")
        print(json.dumps({"pid": os.getpid(), "ok": ok}))
    """, tmp_path, mode="off", args=[tmp_path / "trace"])
    assert ts.out["ok"] is True
    samples = _check_samples(ts, ts.pid)
    m = _marks(ts)
    assert 6 <= len(_between(samples, m["start"], m["end"])) <= 11


@pytest.mark.parametrize("env", [{}, {"IOTRACE_SAMPLE_MS": "0"}], ids=["unset", "zero"])
def test_no_sampler_unless_asked(tmp_path, env):
    ts = run_py("""
        import json, os, sys, threading, time, iotrace
        time.sleep(0.3)
        print(json.dumps({"pid": os.getpid(), "psutil": "psutil" in sys.modules,
                          "threads": sorted(t.name for t in threading.enumerate())}))
    """, tmp_path, env=env)
    assert ts.out["psutil"] is False and ts.out["threads"] == ["MainThread"]
    assert [e for e in py_events(ts, ph="C")] == []
    assert [f.pid for f in ts.files] == [ts.pid]


def test_sampler_restarts_in_fork_child(tmp_path):
    ts = run_py("""
        import json, os, sys, threading, time, iotrace
        time.sleep(0.2)
        pid = os.fork()
        if pid == 0:
            iotrace.instant("child_start")
            time.sleep(0.5)
            iotrace.instant("child_end")
            tid = [t.native_id for t in threading.enumerate() if t.name == "iotrace-sampler"]
            print(json.dumps({"child_sampler": tid}), flush=True)
            sys.exit(0)
        os.waitpid(pid, 0)
        print(json.dumps({"pid": os.getpid(), "child": pid}))
    """, tmp_path, env={"IOTRACE_SAMPLE_MS": str(PERIOD_MS)})
    parent, child = ts.out["pid"], ts.out["child"]
    assert ts.pids == [parent, child]
    child_samples = _check_samples(ts, child)
    parent_samples = _check_samples(ts, parent)
    m = _marks(ts)
    assert 6 <= len(_between(child_samples, m["child_start"], m["child_end"])) <= 11
    # the child's own sampler thread, a new tid; the parent kept sampling meanwhile
    (child_tid,) = {e["tid"] for e in child_samples[1:-1]}
    assert child_tid not in {e["tid"] for e in parent_samples} and child_tid != child
    assert len(_between(parent_samples, m["child_start"], m["child_end"])) >= 6


# --- start and end samples: a process shorter than a period has exactly two -------------------

LONG_MS = 60_000  # a period no process of these tests lives through: only start and end samples


def _start_end(ts, pid, inside=()):
    """Exactly the start and the end sample, both by the main thread, around `inside` (events of
    the process that must fall between them)."""
    samples = _samples(ts, pid)
    assert len(samples) == 2, (pid, samples)
    first, last = samples
    assert first["tid"] == pid and last["tid"] == pid
    for e in samples:
        assert set(e["args"]) in (BASE_KEYS, BASE_KEYS | IO_KEYS), e["args"]
        assert e["args"]["rss_bytes"] > 5 << 20 and e["args"]["open_files"] >= 3
    for e in inside:
        assert ns(first["ts"]) <= ns(e["ts"]) <= ns(last["ts"]), (e, samples)
    return samples


@pytest.mark.parametrize("mode", ["enable", "preload"])
def test_short_process_has_start_and_end_samples(tmp_path, mode):
    ts = run_py("""
        import json, os, time, iotrace
        def busy(sec):
            end = time.perf_counter() + sec
            while time.perf_counter() < end:
                pass
        iotrace.instant("work")
        busy(0.1)
        print(json.dumps({"pid": os.getpid()}))
    """, tmp_path, mode=mode, env={"IOTRACE_SAMPLE_MS": str(LONG_MS)}, include=[tmp_path / "none"])
    first, last = _start_end(ts, ts.pid, py_events(ts, name="work"))
    # the end sample's CPU: from the start sample on, mostly the 100 ms busy loop
    assert last["args"]["cpu_percent"] > 0
    assert 0 <= first["args"]["cpu_percent"] <= 100 * 64


WORKERS_CODE = """
    import json, multiprocessing as mp, os, sys, time, iotrace

    def task(x):
        iotrace.instant("task", x=x)
        time.sleep(0.01)
        return os.getpid()

    if __name__ == "__main__":
        iotrace.instant("main")
        workers = {}
        for method in ("fork", "spawn"):
            pool = mp.get_context(method).Pool(2)
            workers[method] = sorted(set(pool.map(task, range(8), chunksize=1)))
            pool.close()   # workers leave on the sentinel: fork ones by os._exit, spawn by exit
            pool.join()
        pid = os.fork()    # a plain fork child that ends by os._exit
        if pid == 0:
            iotrace.instant("child")
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.1)
        print(json.dumps({"pid": os.getpid(), "workers": workers, "child": pid}))
"""


@pytest.mark.parametrize("mode", ["enable", "preload"])
def test_every_process_has_start_and_end_samples(tmp_path, mode):
    ts = run_py(WORKERS_CODE, tmp_path, mode=mode, env={"IOTRACE_SAMPLE_MS": str(LONG_MS)},
                include=[tmp_path / "none"], timeout=120)
    main, child = ts.pid, ts.out["child"]
    workers = ts.out["workers"]["fork"] + ts.out["workers"]["spawn"]
    assert len(set(workers)) == len(workers) >= 2  # a pool's map may all land on one worker
    job = set(ts.pids)
    assert {main, child, *workers} <= job
    # every process of the job, the spawn context's resource tracker too
    for pid in job:
        inside = [e for e in py_events(ts, pid=pid, ph="i")]
        _start_end(ts, pid, inside)
    for pid in workers:
        assert py_events(ts, pid=pid, name="task")  # the events were between the two samples
    assert py_events(ts, pid=child, name="child")


def test_periodic_samples_between_start_and_end(tmp_path):
    """With a short period: the start sample, the periodic ones, the end sample, in each worker."""
    ts = run_py(WORKERS_CODE, tmp_path, env={"IOTRACE_SAMPLE_MS": "20"}, timeout=120)
    for pid in ts.pids:
        samples = _samples(ts, pid)
        assert len(samples) >= 2
        assert samples[0]["tid"] == pid and samples[-1]["tid"] == pid
        assert all(e["tid"] != pid for e in samples[1:-1])
    # the main process ran for 100 ms after its pools at least: periodic samples there
    assert len(_samples(ts, ts.pid)) >= 2 + 3


def test_dataloader_workers_have_start_and_end_samples(tmp_path):
    pytest.importorskip("torch")
    ts = run_py("""
        import json, os, iotrace, torch
        from torch.utils.data import DataLoader, Dataset

        class D(Dataset):
            def __len__(self):
                return 8
            def __getitem__(self, i):
                return torch.tensor([os.getpid()])

        pids = set()
        for batch in DataLoader(D(), batch_size=2, num_workers=2):
            pids |= set(batch.flatten().tolist())
        print(json.dumps({"pid": os.getpid(), "workers": sorted(pids)}))
    """, tmp_path, env={"IOTRACE_SAMPLE_MS": str(LONG_MS)}, timeout=180)
    assert len(ts.out["workers"]) == 2
    for pid in [ts.pid, *ts.out["workers"]]:
        _start_end(ts, pid)
