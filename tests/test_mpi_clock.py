"""The clocks of an MPI job's ranks aligned (issue 25): each rank's offset to rank 0 measured by
ping-pongs at MPI_Init and MPI_Finalize (csrc/interpose/mpi_clock.cc), stored as iotrace_clock
records.

A node whose clock is off is faked with IOTRACE_CLOCK_SKEW_NS (rank 1 +50 ms, rank 2 -50 ms):
it moves the wall clock the tracer records, not the monotonic clock of the events. All ranks
run on this one host, so their monotonic clock is one: the truth every aligned time is checked
against is the event's own `ts` plus rank 0's wall-clock shift. A second host is faked by
rewriting the traces of ranks 2 and 3 (another host name, their monotonic clock 1000 s ahead).
tests/c/mpi_clock.c: rank r sleeps r * 20 ms, then a barrier (every rank leaves it at the same
moment), a file written, a second barrier, MPI_Finalize.
"""

import os
import shutil
import subprocess

import pytest
import tracing

RANKS = 4
MS = 1_000_000
SKEW = {1: 50 * MS, 2: -50 * MS}  # ns added to the rank's wall clock
HOST_B_AHEAD = 1000 * 1_000_000_000  # the faked second host's monotonic clock, ahead by 1000 s
TOLERANCE = 1 * MS  # what the issue asks: the skew removed to under 1 ms

need_mpi = pytest.mark.skipif(not (shutil.which("mpicc") and shutil.which("mpirun")),
                              reason="no MPI (mpicc, mpirun): .ci/setup installs Open MPI")


# --- a real job -----------------------------------------------------------------------------


def mpirun(n: int) -> list[str]:
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return ["mpirun", "-n", str(n), "--oversubscribe", *root]


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    build = tmp_path_factory.mktemp("mpi_clock")
    exe = build / "mpi_clock"
    subprocess.run(["mpicc", "-O1", "-o", str(exe), str(tracing.C_DIR / "mpi_clock.c")], check=True)
    skew = build / "skew.sh"  # a node whose clock is off, per rank
    cases = "".join(f"  {r}) export IOTRACE_CLOCK_SKEW_NS={ns};;\n" for r, ns in SKEW.items())
    skew.write_text(f'#!/bin/sh\ncase "$OMPI_COMM_WORLD_RANK" in\n{cases}esac\nexec "$@"\n')
    skew.chmod(0o755)
    return str(exe), str(skew)


def run_job(programs, tmp_path, name="traces", **env) -> "Job":
    exe, skew = programs
    out, data = tmp_path / name, tmp_path / f"{name}-data"
    data.mkdir()
    e = tracing.tracer_env(out, env)
    e["OMPI_MCA_mpi_warn_on_fork"] = "0"
    r = subprocess.run([*mpirun(RANKS), skew, exe, str(data)], env=e, capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stderr
    assert f"{RANKS} ranks done" in r.stdout
    return Job(out)


class Job:
    """The traces of one run of mpi_clock.c, by rank."""

    def __init__(self, folder):
        self.dir = str(folder)
        self.ts = tracing.TraceSet.load(folder)
        self.rank = {}
        for f in self.ts.files:
            if f.header.get("exe", "").endswith("/mpi_clock") and f.header.get("role") != "fork":
                self.rank[f.header["mpi_rank"]] = f
        assert sorted(self.rank) == list(range(RANKS))

    def base(self, r: int) -> int:
        """The rank's wall-clock shift (wall_ns - mono_ns: the skew included)."""
        h = self.rank[r].header
        return h["wall_ns"] - h["mono_ns"]

    def clocks(self, r: int) -> list[dict]:
        return [e["args"] for e in self.rank[r].records if e.get("name") == "iotrace_clock"]

    def calls(self, r: int, name: str) -> list[dict]:
        return [e for e in self.rank[r].events() if e["name"] == name]

    def barrier_ends(self, k: int) -> list[int]:
        """The true end of each rank's k-th barrier (rank order)."""
        return [self.truth(r, e["ts"] + e["dur"]) for r in range(RANKS)
                for e in self.calls(r, "MPI_Barrier")[k:k + 1]]

    def truth(self, r: int, ts_us: float) -> int:
        """An event time of rank r (its `ts`, µs) on the true job clock: one host, one monotonic
        clock, and rank 0's wall-clock shift."""
        return round(ts_us * 1000) + self.base(0)


@pytest.fixture(scope="module")
def job(programs, tmp_path_factory):
    return run_job(programs, tmp_path_factory.mktemp("job"))


def check_offsets(job: Job, slack_ns: int = 50_000) -> None:
    """Every rank measured twice (MPI_Init, MPI_Finalize); each offset undoes the skew within
    its bound (half its round trip, plus the slack of reading a clock pair) and under 1 ms."""
    for r in range(RANKS):
        clocks = job.clocks(r)
        assert [c["at"] for c in clocks] == ["MPI_Init", "MPI_Finalize"]
        if r == 0:
            assert all(c["offset_ns"] == 0 and c["rtt_ns"] == 0 for c in clocks)
            continue
        true = job.base(0) - job.base(r)  # what the offset must be: about -skew
        assert abs(true + SKEW.get(r, 0)) < slack_ns
        for c in clocks:
            assert 0 < c["rtt_ns"] < TOLERANCE
            assert abs(c["offset_ns"] - true) <= c["rtt_ns"] // 2 + slack_ns
            assert abs(c["offset_ns"] + SKEW.get(r, 0)) < TOLERANCE
        init, fin = (job.calls(r, n)[0] for n in ("MPI_Init", "MPI_Finalize"))
        # taken inside MPI_Init and MPI_Finalize (the program waits for it there), on the
        # events' clock
        for c, call in zip(clocks, (init, fin)):
            assert call["ts"] <= c["mono_ns"] / 1000 <= call["ts"] + call["dur"]


@need_mpi
def test_offsets_undo_the_skew(job):
    check_offsets(job)


def socket_calls_inside(job: Job, name: str) -> int:
    """The calls on sockets the ranks' main threads made inside their `name` call."""
    n = 0
    for r in range(RANKS):
        evs = job.rank[r].events()
        (call,) = job.calls(r, name)
        n += sum(1 for e in evs if e["tid"] == e["pid"] and call["ts"] <= e["ts"] < call["ts"] + call["dur"]
                 and (e.get("fname") or "").startswith("socket:"))
    return n


@need_mpi
def test_measurement_records_nothing_of_its_own(programs, tmp_path):
    """The exchange is no event of the program's: over TCP (Open MPI's tcp transport, whose
    sends and receives are readv/writev on sockets of the calling thread) the ranks' main
    threads make as many socket calls inside MPI_Init and MPI_Finalize as without the exchange
    (recorded, the exchange's would be 20 a rank at least). IOTRACE_MPI_CLOCK=0 measures
    nothing."""
    on = run_job(programs, tmp_path, "on", OMPI_MCA_btl="self,tcp")
    off = run_job(programs, tmp_path, "off", OMPI_MCA_btl="self,tcp", IOTRACE_MPI_CLOCK="0")
    check_offsets(on)
    assert all(off.clocks(r) == [] for r in range(RANKS))
    for name in ("MPI_Init", "MPI_Finalize"):
        assert socket_calls_inside(on, name) <= socket_calls_inside(off, name) + 2 * RANKS


def symbol_lookups(cmd: list[str], tmp_path, env: dict | None = None) -> list[str]:
    """The symbols the dynamic linker looked up for `cmd` under the tracer (LD_DEBUG=symbols),
    per process: each process's lookups as one text."""
    logs = tmp_path / "ld"
    logs.mkdir()
    e = tracing.tracer_env(tmp_path / "lookups", dict(env or {}, LD_DEBUG="symbols",
                                                      LD_DEBUG_OUTPUT=str(logs / "ld")))
    subprocess.run(cmd, env=e, check=True, capture_output=True, timeout=120)
    return [p.read_text(errors="replace") for p in sorted(logs.iterdir())]


def test_a_program_without_mpi_resolves_nothing_of_it(tmp_path):
    """A traced program that never calls MPI_Init looks no MPI symbol up: the measurement costs
    it nothing."""
    seen = symbol_lookups(["cat", "/proc/self/stat"], tmp_path)
    assert seen and all("symbol=" in text and "MPI" not in text for text in seen)


@need_mpi
def test_mpi_program_resolves_the_exchange(programs, tmp_path):
    """...while each rank of an MPI program looks PMPI_Comm_dup up (the same check, able to fail)."""
    seen = symbol_lookups([*mpirun(2), programs[0], str(tmp_path)], tmp_path)
    assert sum("symbol=PMPI_Comm_dup;" in text for text in seen) == 2


MPI4PY = r"""
import sys
from mpi4py import MPI
MPI.COMM_WORLD.Barrier()
print(f"rank {MPI.COMM_WORLD.Get_rank()} done")
"""


@need_mpi
def test_mpi4py_ranks_measure_too(tmp_path):
    """mpi4py loads the MPI library RTLD_LOCAL: the exchange finds it where the wrappers do."""
    pytest.importorskip("mpi4py")
    import sys

    script = tmp_path / "m.py"
    script.write_text(MPI4PY)
    out = tmp_path / "traces"
    r = subprocess.run([*mpirun(2), sys.executable, str(script)], env=tracing.tracer_env(out),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    by_rank = {f.header["mpi_rank"]: f for f in tracing.TraceSet.load(out).files if "mpi_rank" in f.header}
    assert sorted(by_rank) == [0, 1]
    for rank, f in by_rank.items():
        clocks = [e["args"] for e in f.records if e.get("name") == "iotrace_clock"]
        assert [c["at"] for c in clocks] == ["MPI_Init_thread", "MPI_Finalize"]
        assert all(abs(c["offset_ns"]) < TOLERANCE and (c["rtt_ns"] > 0) == (rank > 0) for c in clocks)


@need_mpi
def test_fork_child_keeps_its_ranks_clock(programs, tmp_path):
    """A rank's fork child (mpi_clock.c with MPI_CLOCK_FORK set: rank 1 forks one after the
    first barrier) says the rank's measurement again on its own clock pair: its job clock is
    its parent's."""
    job = run_job(programs, tmp_path, MPI_CLOCK_FORK="1")
    child = [f for f in job.ts.files
             if f.header.get("role") == "fork" and f.header.get("exe", "").endswith("/mpi_clock")]
    assert len(child) == 1
    parent = job.rank[1]
    c_clocks = [e["args"] for e in child[0].records if e.get("name") == "iotrace_clock"]
    assert [c["at"] for c in c_clocks] == ["MPI_Init"]
    pc, cc = job.clocks(1)[0], c_clocks[0]
    h, ph = child[0].header, parent.header
    assert cc["mono_ns"] == pc["mono_ns"] and cc["rtt_ns"] == pc["rtt_ns"]
    assert h["wall_ns"] - h["mono_ns"] + cc["offset_ns"] == ph["wall_ns"] - ph["mono_ns"] + pc["offset_ns"]
    write = [e for e in child[0].events() if e["name"] == "write" and (e.get("fname") or "").endswith("child.out")]
    assert len(write) == 1


# --- under load -----------------------------------------------------------------------------


@need_mpi
def test_alignment_under_load(programs, tmp_path):
    """Two busy loops beside the job (6 processes on the machine's 2 cores): the round trips
    grow, the rounds with the shortest still bound the error under 1 ms."""
    from loss_scenarios import busy_load

    with busy_load(2) as busy:
        job = run_job(programs, tmp_path)
        assert all(p.poll() is None for p in busy), "the load ended during the test"
    check_offsets(job)
