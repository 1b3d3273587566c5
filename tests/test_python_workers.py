"""Worker processes: os.fork children (ending in os._exit or sys.exit), multiprocessing Pool(4)
with the fork, spawn and forkserver start methods, ProcessPoolExecutor, torch DataLoader.

For each run: one trace file per process, every task event in the file of the worker that ran
it (20 tasks -> 20 events summed over the workers), `parent_pid` of every worker = the main
process, role "worker" where iotrace was imported.

Parents of forkserver workers: the OS parent of a forkserver worker is the forkserver process
(header `ppid`), itself started by the main process; `parent_pid` is the *logical* parent that
multiprocessing records (`multiprocessing.parent_process()`), i.e. the main process, which is
what the Python layer writes for workers.  The forkserver's own file (under LD_PRELOAD) has
role "forkserver" and parent_pid = the main process.

Two modes: "enable" (IOTRACE_ENABLE=1: the Python layer alone, the core loaded by the iotrace
module) and "preload" (LD_PRELOAD: Python and POSIX events in one file per process).
"""
from __future__ import annotations

import collections

import pytest

from pytrace_helpers import assert_inside, py_events, run_py

# -- os.fork -----------------------------------------------------------------------------------

FORK_CODE = """
    import json, os, sys, iotrace

    @iotrace.trace(args=["i"])
    def task(i):
        return i

    task(-1)                       # recorded before the fork: the parent's, never the child's
    pid = os.fork()
    if pid == 0:
        for i in range(3):
            task(i)
        if sys.argv[1] == "_exit":
            os._exit(0)            # no atexit handlers, no Python shutdown
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    task(100)
    print(json.dumps({"pid": os.getpid(), "child": pid, "status": status}))
"""



def _check_fork(ts, reason):
    out = ts.out
    parent, child = out["pid"], out["child"]
    assert out["status"] == 0
    assert ts.pids == [parent, child]
    (pf,) = ts.files_of(parent)
    cfs = ts.files_of(child)
    assert len(cfs) == 1, [f.name for f in ts.files]
    cf = cfs[0]
    h = cf.header
    assert (h["role"], h["parent_pid"], h["ppid"], h["pid"]) == ("fork", parent, parent, child)
    assert "parent_pid" not in pf.header and pf.header["role"] == "main"
    assert [e["args"]["i"] for e in py_events(ts, pid=child, name="task")] == [0, 1, 2]
    assert [e["args"]["i"] for e in py_events(ts, pid=parent, name="task")] == [-1, 100]
    assert all(e["tid"] == child for e in py_events(ts, pid=child))
    assert cf.closed and cf.end["reason"] == reason
    assert pf.closed and pf.end["reason"] == "exit"


@pytest.mark.parametrize("ending", ["_exit", "sys.exit"])
def test_fork_child_preload(tmp_path, ending):
    ts = run_py(FORK_CODE, tmp_path, mode="preload", args=[ending], include=[tmp_path / "none"])
    _check_fork(ts, "_exit" if ending == "_exit" else "exit")
    # the parent's fork event names the child
    forks = ts.events(pid=ts.out["pid"], name="fork")
    assert [e["args"]["ret"] for e in forks] == [ts.out["child"]]
    (fork_ev,) = forks
    (after,) = [e for e in py_events(ts, pid=ts.out["pid"], name="task") if e["args"]["i"] == 100]
    assert fork_ev["ts"] + fork_ev["dur"] <= after["ts"]


def test_fork_child_sys_exit_enable(tmp_path):
    _check_fork(run_py(FORK_CODE, tmp_path, args=["sys.exit"]), "exit")


def test_fork_child_os_exit_enable(tmp_path):
    _check_fork(run_py(FORK_CODE, tmp_path, args=["_exit"]), "_exit")


# -- multiprocessing.Pool(4) -----------------------------------------------------------------

POOL_CODE = """
    import json, os, sys, multiprocessing as mp
    import iotrace

    @iotrace.trace(args=["i"])
    def inner(i):
        return i

    @iotrace.trace(name="task", cat="work", args=["i"])
    def task(i):
        inner(i)
        return i * i, os.getpid()

    if __name__ == "__main__":
        method = sys.argv[1]
        ctx = mp.get_context(method)
        pool = ctx.Pool(4)
        workers = sorted(p.pid for p in pool._pool)
        res = pool.map(task, range(20), chunksize=1)
        pool.close()          # workers leave on the sentinel: fork/forkserver ones via os._exit
        pool.join()
        assert [r[0] for r in res] == [i * i for i in range(20)]
        info = {"pid": os.getpid(), "workers": workers, "used": sorted({r[1] for r in res})}
        if method == "forkserver":
            from multiprocessing import forkserver
            info["forkserver"] = forkserver._forkserver._forkserver_pid
        if method != "fork":
            from multiprocessing import resource_tracker
            info["tracker"] = resource_tracker._resource_tracker._pid
        print(json.dumps(info))
"""

_POOL_RUNS: dict = {}


def pool_run(tmp_path_factory, method, mode):
    key = (method, mode)
    if key not in _POOL_RUNS:
        d = tmp_path_factory.mktemp(f"pool-{method}-{mode}")
        _POOL_RUNS[key] = run_py(POOL_CODE, d, mode=mode, args=[method], timeout=90,
                                 include=[d / "none"])
    return _POOL_RUNS[key]


POOL_CASES = [
    pytest.param("fork", "preload", id="fork-preload"),
    pytest.param("spawn", "preload", id="spawn-preload"),
    pytest.param("forkserver", "preload", id="forkserver-preload"),
    pytest.param("fork", "enable", id="fork-enable"),
    pytest.param("spawn", "enable", id="spawn-enable"),
    pytest.param("forkserver", "enable", id="forkserver-enable"),
]


@pytest.mark.parametrize("method,mode", POOL_CASES)
def test_pool_one_trace_per_worker_with_every_event(tmp_path_factory, method, mode):
    ts = pool_run(tmp_path_factory, method, mode)
    info = ts.out
    main, workers = info["pid"], info["workers"]
    assert len(workers) == 4 and main not in workers
    assert set(info["used"]) <= set(workers)
    # one file per process: the main process, its 4 workers and the helper processes
    # multiprocessing starts itself (they never import iotrace: the start-up hook traces them
    # under IOTRACE_ENABLE=1 as under LD_PRELOAD)
    expected = {main, *workers} | {info[k] for k in ("forkserver", "tracker") if k in info}
    assert set(ts.pids) == expected, [f.name for f in ts.files]
    for w in workers:
        fs = ts.files_of(w)
        assert len(fs) == 1, [f.name for f in fs]
        h = fs[0].header
        assert h["parent_pid"] == main, h
        # the OS parent: main for fork and spawn, the forkserver for forkserver workers
        assert h["ppid"] == (info["forkserver"] if method == "forkserver" else main), h
        assert fs[0].closed
        assert fs[0].end["reason"] == ("exit" if method == "spawn" else "_exit")
    # every task in the file of the worker that ran it: 20 events in all, i = 0..19 once each
    tasks = py_events(ts, name="task")
    assert sorted(e["args"]["i"] for e in tasks) == list(range(20))
    assert {e["pid"] for e in tasks} == set(info["used"])
    assert all(e["cat"] == "work" and e["tid"] == e["pid"] for e in tasks)
    inner = py_events(ts, name="inner")
    assert len(inner) == 20
    by_i = {e["args"]["i"]: e for e in tasks}
    for e in inner:
        t = by_i[e["args"]["i"]]
        assert e["pid"] == t["pid"] and e["tid"] == t["tid"]
        assert_inside(e, t)
    assert py_events(ts, pid=main, name="task") == []
    if method == "forkserver" and mode == "preload":
        (fsf,) = ts.files_of(info["forkserver"])
        assert fsf.header["role"] == "forkserver" and fsf.header["parent_pid"] == main


@pytest.mark.parametrize("method,mode", [
    pytest.param("fork", "preload", id="fork-preload"),
    pytest.param("forkserver", "preload", id="forkserver-preload"),
    pytest.param("spawn", "preload", id="spawn-preload"),
    pytest.param("spawn", "enable", id="spawn-enable"),
])
def test_pool_worker_role(tmp_path_factory, method, mode):
    ts = pool_run(tmp_path_factory, method, mode)
    roles = {w: ts.process(w)["role"] for w in ts.out["workers"]}
    assert roles == {w: "worker" for w in ts.out["workers"]}
    assert ts.process(ts.out["pid"])["role"] == "main"


@pytest.mark.parametrize("method,mode", [
    pytest.param("fork", "preload", id="fork-preload"),
    pytest.param("spawn", "enable", id="spawn-enable"),
    pytest.param("spawn", "preload", id="spawn-preload"),
    pytest.param("forkserver", "preload", id="forkserver-preload"),
])
def test_pool_main_process_one_file(tmp_path_factory, method, mode):
    """spawn/forkserver start the resource tracker, the forkserver and spawn workers with
    _posixsubprocess (vfork + exec). The exec hook runs in the vfork child, which shares the
    parent's memory: it must not close the parent's file (it once did: reason 'exec', and the
    parent went on in <name>-<pid>-1, -2, ...)."""
    ts = pool_run(tmp_path_factory, method, mode)
    main = ts.out["pid"]
    fs = ts.files_of(main)
    assert [f.end["reason"] for f in fs] == ["exit"], [f.name for f in fs]
    h = fs[0].header
    assert h["role"] == "main" and "parent_pid" not in h


def test_subprocess_run_keeps_parent_in_one_file_preload(tmp_path):
    """subprocess.run: vfork + exec, as in test_pool_main_process_one_file."""
    ts = run_py("""
        import json, os, subprocess
        subprocess.run(["/bin/true"], check=True)
        subprocess.run(["/bin/true"], check=True)
        print(json.dumps({"pid": os.getpid()}))
    """, tmp_path, mode="preload", include=[tmp_path / "none"])
    fs = ts.files_of(ts.out["pid"])
    assert [f.end["reason"] for f in fs] == ["exit"], [f.name for f in fs]


def test_subprocess_child_stays_out_of_the_parents_trace_and_fd_table(tmp_path):
    """_posixsubprocess vforks, and its child dup2s the pipes onto 0/1/2 and closes fds through
    the PLT before exec. Those calls are the child's: none is in the parent's file, and the
    parent's own fd 1 still names its stdout afterwards (it once named the child's pipe)."""
    ts = run_py("""
        import json, os, subprocess
        os.write(1, b"one\\n")
        r = subprocess.run(["/bin/echo", "hi"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, check=True)
        os.write(1, b"two\\n")
        print(json.dumps({"pid": os.getpid(), "child": r.stdout.decode()}))
    """, tmp_path, mode="preload")
    assert ts.stdout.startswith("one\ntwo\n") and ts.out["child"] == "hi\n"
    parent = ts.out["pid"]
    writes = [e for e in ts.events(pid=parent, name="write") if e["args"]["fd"] == 1]
    assert [e["args"]["ret"] for e in writes[:2]] == [4, 4]
    assert writes[0]["fname"] == writes[1]["fname"]  # the parent's stdout pipe, both times
    assert ts.count(pid=parent, name=["dup2", "dup3"]) == 0  # the child's, not recorded here
    # the child's exec'd image (echo) writes its own file, naming the parent
    (echo,) = [f for f in ts.files if f.header["exe"].endswith("/echo")]
    assert echo.header["ppid"] == parent
    (out,) = {e["fname"] for e in ts.events(pid=echo.pid) if e["args"].get("fd") == 1}
    assert out.startswith("pipe:") and out != writes[0]["fname"]  # its stdout: the run's pipe


# -- ProcessPoolExecutor ---------------------------------------------------------------------

PPE_CODE = """
    import json, os, sys, multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    import iotrace

    @iotrace.trace(args=["i"])
    def task(i):
        return i + 1, os.getpid()

    if __name__ == "__main__":
        ex = ProcessPoolExecutor(max_workers=4, mp_context=mp.get_context(sys.argv[1]))
        res = list(ex.map(task, range(20)))
        workers = sorted(ex._processes)
        ex.shutdown(wait=True)
        assert [r[0] for r in res] == list(range(1, 21))
        print(json.dumps({"pid": os.getpid(), "workers": workers,
                          "used": sorted({r[1] for r in res})}))
"""


@pytest.mark.parametrize("method,mode", [
    pytest.param("fork", "preload", id="fork-preload"),
    pytest.param("spawn", "enable", id="spawn-enable"),
])
def test_process_pool_executor(tmp_path, method, mode):
    ts = run_py(PPE_CODE, tmp_path, mode=mode, args=[method], timeout=90,
                include=[tmp_path / "none"])
    main, workers = ts.out["pid"], ts.out["workers"]
    assert 1 <= len(workers) <= 4 and set(ts.out["used"]) <= set(workers)
    if method == "fork":
        assert len(workers) == 4          # fork: all started up front
    tasks = py_events(ts, name="task")
    assert sorted(e["args"]["i"] for e in tasks) == list(range(20))
    assert {e["pid"] for e in tasks} == set(ts.out["used"])
    for w in workers:
        (f,) = ts.files_of(w)
        assert f.header["parent_pid"] == main and f.header["ppid"] == main
        assert f.closed
    assert py_events(ts, pid=main, name="task") == []
    if method == "fork":
        assert collections.Counter(ts.process(w)["role"] for w in workers) == {"worker": 4}


# -- torch DataLoader --------------------------------------------------------------------------


def test_dataloader_workers(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed (deliberately not installed "
                                        "here): the DataLoader worker test needs it")
    ts = run_py("""
        import json, os, torch, iotrace
        from torch.utils.data import DataLoader, Dataset

        class DS(Dataset):
            def __len__(self):
                return 16

            @iotrace.trace(name="getitem", args=["i"])
            def __getitem__(self, i):
                return torch.tensor([i, os.getpid()])

        if __name__ == "__main__":
            dl = DataLoader(DS(), batch_size=4, num_workers=2,
                            worker_init_fn=iotrace.dataloader_worker_init)
            seen = []
            for b in iotrace.iter(dl, name="fetch"):
                seen += b[:, 0].tolist()
            print(json.dumps({"pid": os.getpid(), "seen": sorted(seen)}))
    """, tmp_path)
    assert ts.out["seen"] == list(range(16))
    main = ts.out["pid"]
    # (the automatic events of the same loader, cat "dataloader", are tests/test_auto_torch.py's)
    assert [e["args"]["index"] for e in py_events(ts, pid=main, name="fetch", cat="python")] == \
        [0, 1, 2, 3]
    items = py_events(ts, name="getitem")
    assert sorted(e["args"]["i"] for e in items) == list(range(16))
    wpids = {e["pid"] for e in items}
    assert main not in wpids
    for w in wpids:
        assert ts.process(w)["role"] == "dataloader" and ts.process(w)["parent_pid"] == main
    assert sorted(ts.process(w)["worker_id"] for w in wpids) == [0, 1]
