"""The clocks of an MPI job's ranks aligned (issue 25): each rank's offset to rank 0 measured by
ping-pongs at MPI_Init and MPI_Finalize (csrc/interpose/mpi_clock.cc), stored as iotrace_clock
records, and applied by the analyzer and the Perfetto export (iotrace_format.clock).

A node whose clock is off is faked with IOTRACE_CLOCK_SKEW_NS (rank 1 +50 ms, rank 2 -50 ms):
it moves the wall clock the tracer records, not the monotonic clock of the events. All ranks
run on this one host, so their monotonic clock is one: the truth every aligned time is checked
against is the event's own `ts` plus rank 0's wall-clock shift. A second host is faked by
rewriting the traces of ranks 2 and 3 (another host name, their monotonic clock 1000 s ahead).
tests/c/mpi_clock.c: rank r sleeps r * 20 ms, then a barrier (every rank leaves it at the same
moment), a file written, a second barrier, MPI_Finalize.
"""

import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import tracing
from mpi_launch import mpirun
from mpi_launch import run as run_mpi
from iotrace_format.clock import JobClock
from iotrace_format.reader import clock_records

RANKS = 4
MS = 1_000_000
SKEW = {1: 50 * MS, 2: -50 * MS}  # ns added to the rank's wall clock
HOST_B_AHEAD = 1000 * 1_000_000_000  # the faked second host's monotonic clock, ahead by 1000 s
TOLERANCE = 1 * MS  # what the issue asks: the skew removed to under 1 ms

need_mpi = pytest.mark.skipif(not (shutil.which("mpicc") and shutil.which("mpirun")),
                              reason="no MPI (mpicc, mpirun): .ci/setup installs Open MPI")


# --- the job clock's line (no MPI needed) ---------------------------------------------------


def test_job_clock_interpolates_between_measurements_and_holds_outside():
    info = {"wall_ns": 5_000, "mono_ns": 1_000}  # wall-clock shift 4000
    clocks = [{"at": "MPI_Finalize", "mono_ns": 3_000, "offset_ns": -300, "rtt_ns": 9},
              {"at": "MPI_Init", "mono_ns": 2_000, "offset_ns": -100, "rtt_ns": 7}]
    c = JobClock.of(info, clocks)
    assert c.measured and c.points == ((2_000, 3_900), (3_000, 3_700))
    assert [c.at(t) for t in (0, 2_000, 2_500, 2_999, 3_000, 10**12)] == [3_900, 3_900, 3_800, 3_700, 3_700,
                                                                          3_700]
    assert c.at(2_001) == 3_899  # -0.2 rounded down
    one = JobClock.of(info, clocks[1:])
    assert one.constant and one.at(0) == one.at(10**15) == 3_900
    plain = JobClock.of(info, [])
    assert not plain.measured and plain.at(123) == 4_000  # the wall-clock shift, as before
    assert JobClock.of({}, []).at(5) == 0  # no process record (DFTracer): no shift


def test_moved_times_keep_order_and_nesting():
    """The export moves start and end alike along the line: a child inside its parent stays
    inside, events keep their order, and the C++ line is Python's (JobClock.at)."""
    from iotrace_analyzer import _export
    from iotrace_format.reader import batches_of_text

    clock = JobClock(((1_000_000, 70), (2_000_000, -930)))  # a steep drift: -1 ns per 1000
    evs = [(999_990, 30), (1_000_000, 1_000_000), (1_000_001, 5), (1_400_000, 599_999),
           (1_999_999, 1), (2_000_000, 7), (1_500_000, 500_000)]
    text = b"".join(json.dumps({"ph": "X", "name": "e", "cat": "c", "pid": 1, "tid": 1, "ts": t / 1000,
                                "dur": d / 1000}).encode() + b",\n" for t, d in evs)
    batch = next(batches_of_text(b"[\n" + text))
    cols = _export.Columns(batch)
    cols.move_times(np.array([t for t, _ in clock.points]), np.array([s for _, s in clock.points]))
    ts, dur = cols.ints("ts_ns"), cols.ints("dur_ns")
    for (t, d), t2, d2 in zip(evs, ts, dur):
        assert t2 == clock.job_ns(t) and t2 + d2 == clock.job_ns(t + d)
    # (1_400_000, +599_999) ends 1 ns before its parent (1_000_000, +1_000_000): still inside
    assert ts[3] + dur[3] <= ts[1] + dur[1] and ts[6] + dur[6] == ts[1] + dur[1]
    order = np.argsort([t for t, _ in evs], kind="stable")
    assert list(np.diff(ts[order]) >= 0) == [True] * (len(evs) - 1)
    assert all(clock.job_ns(t) <= clock.job_ns(t + 1) for t in range(999_000, 2_001_000, 997))


# --- a real job -----------------------------------------------------------------------------



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
    r = run_mpi([*mpirun(RANKS), skew, exe, str(data)], fresh=[out], env=e, text=True, timeout=180)
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
    (recorded, the exchange's would be 20 a rank at least; the library's own polls in the rest
    of MPI_Finalize vary with how long a rank waits for the others: +9 for 4 ranks once, under
    CI's load, so up to 5 a rank is allowed). IOTRACE_MPI_CLOCK=0 measures nothing."""
    on = run_job(programs, tmp_path, "on", OMPI_MCA_btl="self,tcp")
    off = run_job(programs, tmp_path, "off", OMPI_MCA_btl="self,tcp", IOTRACE_MPI_CLOCK="0")
    check_offsets(on)
    assert all(off.clocks(r) == [] for r in range(RANKS))
    for name in ("MPI_Init", "MPI_Finalize"):
        assert socket_calls_inside(on, name) <= socket_calls_inside(off, name) + 5 * RANKS


def symbol_lookups(cmd: list[str], tmp_path, env: dict | None = None) -> list[str]:
    """The symbols the dynamic linker looked up for `cmd` under the tracer (LD_DEBUG=symbols),
    per process: each process's lookups as one text."""
    logs = tmp_path / "ld"
    logs.mkdir()
    e = tracing.tracer_env(tmp_path / "lookups", dict(env or {}, LD_DEBUG="symbols",
                                                      LD_DEBUG_OUTPUT=str(logs / "ld")))
    run_mpi(cmd, fresh=[logs, tmp_path / "lookups"], env=e, check=True, timeout=120)
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


def analyzed_times(job_model, job: Job, name: str) -> dict:
    """rank -> [(start, end) ns on the job clock] of the rank's `name` calls, as the analyzer's
    model has them (Job.mpi_calls: the MPI calls on the job clock)."""
    t = job_model.mpi_calls.to_pydict()
    pid_rank = {f.header["pid"]: r for r, f in job.rank.items()}
    out: dict = {}
    for n, pid, ts, dur in sorted(zip(t["name"], t["pid"], t["ts"], t["dur"]), key=lambda x: x[2]):
        if n == name and pid in pid_rank:
            out.setdefault(pid_rank[pid], []).append((ts, ts + dur))
    return out


def check_analyzer(job: Job, monkeypatch, streamed: bool) -> None:
    """The analyzer's job clock against the truth: MPI_Init, both barriers and MPI_Finalize of
    every rank within 1 ms of their true time, the barriers' ends within 1 ms of each other
    beyond what they truly differ by; with the wall-clock shift alone ranks 1 and 2 would be
    50 ms off."""
    from iotrace_analyzer.inputs import read
    from iotrace_analyzer.pipeline import Options, analyze

    # streamed: every file summarized block by block, its clock found before its events
    monkeypatch.setattr(read, "SMALL_FILE_EVENTS", 0 if streamed else 1 << 15)
    model = analyze([job.dir], Options(engine="local", workers=1))
    for name in ("MPI_Init", "MPI_Barrier", "MPI_Finalize"):
        got = analyzed_times(model, job, name)
        assert sorted(got) == list(range(RANKS))
        for r in range(RANKS):
            true = [(job.truth(r, e["ts"]), job.truth(r, e["ts"] + e["dur"])) for e in job.calls(r, name)]
            assert len(got[r]) == len(true)
            for (s, e), (ts, te) in zip(got[r], true):
                assert abs(s - ts) < TOLERANCE and abs(e - te) < TOLERANCE
    bars = analyzed_times(model, job, "MPI_Barrier")
    for k in range(2):
        ends = [bars[r][k][1] for r in range(RANKS)]
        true = job.barrier_ends(k)
        assert max(ends) - min(ends) < max(true) - min(true) + TOLERANCE
        uncorrected = [t - job.base(0) + job.base(r) for r, t in enumerate(true)]  # wall-clock shift alone
        assert [abs(u - t) > 49 * MS for u, t in zip(uncorrected, true)] == [False, True, True, False]


@need_mpi
@pytest.mark.parametrize("streamed", [False, True])
def test_analyzer_puts_ranks_on_one_time_line(job, monkeypatch, streamed):
    check_analyzer(job, monkeypatch, streamed)


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
    r = run_mpi([*mpirun(2), sys.executable, str(script)], fresh=[out], env=tracing.tracer_env(out), text=True,
                timeout=120)
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


# --- the Perfetto export ---------------------------------------------------------------------


def fake_second_host(job: Job, dest) -> dict:
    """The ranks' traces as JSON lines, ranks 2 and 3 moved to host `vmB` whose monotonic
    clock is HOST_B_AHEAD ahead (every `ts` and `mono_ns` of theirs). Returns rank -> host."""
    os.makedirs(dest)
    hosts = {}
    for r, f in job.rank.items():
        text = "\n".join(f.lines) + "\n"
        host = f.header["hostname"]
        if r >= 2:
            text = text.replace(f'"hostname":"{host}"', '"hostname":"vmB"')
            text = re.sub(r'("ts":)(\d+)\.(\d+)', lambda m: f'{m[1]}{int(m[2]) + HOST_B_AHEAD // 1000}.{m[3]}', text)
            text = re.sub(r'("mono_ns":)(\d+)', lambda m: f"{m[1]}{int(m[2]) + HOST_B_AHEAD}", text)
            host = "vmB"
        hosts[r] = host
        with open(os.path.join(dest, f"mpi_clock-{host}-{f.header['pid']}.pfw"), "w") as out:
            out.write(text)
    return hosts


def exported_barriers(path: str, job: Job) -> dict:
    """rank -> [(ts, end) ns] of its MPI_Barrier slices, as Perfetto's trace processor reads
    the export (a process by its pid: the export's pid less the host's bits, labels.PID_BITS)."""
    from iotrace_analyzer.export.labels import PID_BITS
    from perfetto_tp import load_trace

    rank = {f.header["pid"]: r for r, f in job.rank.items()}
    with load_trace(path) as tp:
        rows = tp.query("select s.ts as ts, s.dur as dur, p.pid as pid from slice s "
                        "join thread_track tt on s.track_id = tt.id join thread using(utid) "
                        "join process p using(upid) where s.name = 'MPI_Barrier' order by s.ts")
    out: dict = {}
    for row in rows:
        out.setdefault(rank[row["pid"] & ((1 << PID_BITS) - 1)], []).append((row["ts"], row["ts"] + row["dur"]))
    return out


@need_mpi
@pytest.mark.parametrize("fmt", ["pftrace", "json"])
def test_export_puts_two_hosts_on_one_time_line(job, tmp_path, fmt):
    """Two hosts: every rank on rank 0's time line, each barrier within 1 ms of its true time
    (rank 0's exactly as written); without the measured offsets (the records taken out) ranks
    1 and 2 would be 100 ms apart, and raw the second host 1000 s away."""
    from iotrace_analyzer.export.merge import export
    from perfetto_tp import require_trace_processor

    require_trace_processor()
    fake_second_host(job, tmp_path / "two")
    out = str(tmp_path / f"two.{fmt}")
    export([str(tmp_path / "two")], out)
    got = exported_barriers(out, job)
    assert sorted(got) == list(range(RANKS))
    base = job.base(0)  # rank 0's times stay as written: the truth less rank 0's shift
    for r in range(RANKS):
        true = [(job.truth(r, e["ts"]) - base, job.truth(r, e["ts"] + e["dur"]) - base)
                for e in job.calls(r, "MPI_Barrier")]
        assert len(got[r]) == len(true) == 2
        for (s, e), (ts, te) in zip(got[r], true):
            if r == 0 and fmt == "pftrace":
                assert (s, e) == (ts, te)
            assert abs(s - ts) < TOLERANCE and abs(e - te) < TOLERANCE
    for k in range(2):
        ends = [got[r][k][1] for r in range(RANKS)]
        true = job.barrier_ends(k)
        assert max(ends) - min(ends) < max(true) - min(true) + TOLERANCE

    # the same traces without their iotrace_clock records: the wall-clock shift alone
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in os.listdir(tmp_path / "two"):
        lines = (tmp_path / "two" / name).read_text().splitlines(keepends=True)
        (bare / name).write_text("".join(x for x in lines if '"iotrace_clock"' not in x))
    export([str(bare)], str(tmp_path / f"bare.{fmt}"))
    off = exported_barriers(str(tmp_path / f"bare.{fmt}"), job)
    assert abs((off[1][0][1] - off[2][0][1]) - (got[1][0][1] - got[2][0][1]) - 100 * MS) < TOLERANCE


@need_mpi
def test_export_of_one_host_keeps_its_clock(job, tmp_path):
    """One host: its monotonic clock is the job's already; the export writes every rank's
    times as the trace has them, measured offsets or not."""
    from iotrace_analyzer.export.merge import export
    from perfetto_tp import require_trace_processor

    require_trace_processor()
    out = str(tmp_path / "one.pftrace")
    export([job.dir], out)
    got = exported_barriers(out, job)
    for r in range(RANKS):
        assert got[r] == [(round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
                          for e in job.calls(r, "MPI_Barrier")]


def test_clock_records_are_found_without_decoding(tmp_path):
    """reader.clock_records: the iotrace_clock lines of a JSON-form file, in file order."""
    lines = [{"ph": "M", "name": "iotrace_process", "pid": 1, "tid": 1, "args": {"wall_ns": 9, "mono_ns": 1}},
             {"ph": "M", "name": "iotrace_clock", "pid": 1, "tid": 1,
              "args": {"at": "MPI_Init", "mono_ns": 5, "offset_ns": -3, "rtt_ns": 2}},
             {"ph": "X", "name": "read", "cat": "posix", "pid": 1, "tid": 1, "ts": 0.006, "dur": 0.001, "args": {}},
             {"ph": "M", "name": "iotrace_clock", "pid": 1, "tid": 1,
              "args": {"at": "MPI_Finalize", "mono_ns": 7, "offset_ns": -4, "rtt_ns": 2}}]
    text = "[\n" + "".join(json.dumps(x, separators=(",", ":")) + ",\n" for x in lines)
    for name, data in (("a.pfw", text.encode()),):
        (tmp_path / name).write_bytes(data)
        assert [c["at"] for c in clock_records(str(tmp_path / name))] == ["MPI_Init", "MPI_Finalize"]


def test_streamed_file_takes_clocks_found_before_its_events(tmp_path, monkeypatch):
    """A big file is summarized block by block as it streams; its measurements, written at its
    end, are read first (reader.clock_records), so its first blocks are shifted by them too,
    each block by the line at its own time: before MPI_Init the first offset, between the two
    the line between them, after MPI_Finalize the last."""
    import iotrace_format.reader as reader
    from iotrace_analyzer.inputs import read
    from iotrace_analyzer.pipeline import Options, analyze

    base, s = 10**18, 10**9
    head = {"version": 6, "hostname": "h", "pid": 7, "ppid": 1, "exe": "/bin/x", "cmdline": ["x"],
            "wall_ns": base + s, "mono_ns": s, "role": "main", "ranks": {"OMPI_COMM_WORLD_RANK": "1"}}
    lines = [{"ph": "M", "name": "iotrace_process", "pid": 7, "tid": 7, "args": head}]
    lines += [{"ph": "X", "name": "MPI_Barrier", "cat": "mpi", "pid": 7, "tid": 7, "ts": t * 1e6, "dur": 1.0,
               "args": {"ret": 0}} for t in (1.5, 3, 5)]
    lines += [{"ph": "M", "name": "iotrace_clock", "pid": 7, "tid": 7,
               "args": {"at": at, "mono_ns": t * s, "offset_ns": off, "rtt_ns": 1000}}
              for at, t, off in (("MPI_Init", 2, 0), ("MPI_Finalize", 4, -MS))]
    lines.append({"ph": "M", "name": "iotrace_end", "pid": 7, "tid": 7,
                  "args": {"mono_ns": 6 * s, "events": len(lines), "reason": "exit"}})
    (tmp_path / "x-h-7.pfw").write_text("[\n" + "".join(json.dumps(x, separators=(",", ":")) + ",\n"
                                                         for x in lines)[:-2] + "]\n")
    monkeypatch.setattr(read, "SMALL_FILE_EVENTS", 0)  # streamed
    monkeypatch.setattr(reader, "PLAIN_BLOCK", 1)  # a line a block,
    monkeypatch.setattr(reader, "SCAN_BYTES", 1)  # a block a batch
    passes = []
    monkeypatch.setattr(read, "clock_records", lambda path: passes.append(path) or clock_records(path))
    model = analyze([str(tmp_path)], Options(engine="local", workers=1))
    starts = sorted(model.mpi_calls.column("ts").to_pylist())
    assert starts == [base + s * 3 // 2, base + 3 * s - MS // 2, base + 5 * s - MS]
    # the measurements were met after the first events: the file was read again, clocks first
    assert len(passes) == 1
    assert model.summary["job"]["events"] == 3 and model.summary["processes"][0]["events"] == 3


@pytest.mark.parametrize("workers", [1, 2])
def test_streamed_file_without_clocks_is_read_once(tmp_path, monkeypatch, workers):
    """A streamed file with no measured clock (no MPI, no torch.distributed: most files) is
    not read ahead for one; with a measurement before its first event it is read ahead then,
    and nothing is read twice. Its figures and Parquet rows are those of the same file read
    whole (its clocks all known before it is summarized). With two workers for its one task,
    its Parquet is written by a thread of its own: the same, also when the file starts over."""
    import iotrace_format.reader as reader
    import pyarrow.parquet as pq
    from iotrace_analyzer.inputs import read
    from iotrace_analyzer.pipeline import Options, analyze

    base, s = 10**18, 10**9
    head = {"version": 6, "hostname": "h", "pid": 7, "ppid": 1, "exe": "/bin/x", "cmdline": ["x"],
            "wall_ns": base + s, "mono_ns": s, "role": "main", "ranks": {}}
    clock = {"ph": "M", "name": "iotrace_clock", "pid": 7, "tid": 7,
             "args": {"at": "MPI_Init", "mono_ns": s, "offset_ns": -MS, "rtt_ns": 1000}}
    reads = [{"ph": "X", "name": "read", "cat": "posix", "pid": 7, "tid": 7, "ts": 2e6 + 10 * i, "dur": 2.0,
              "args": {"fd": 3, "size": 100, "ret": 100}} for i in range(50)]
    monkeypatch.setattr(reader, "PLAIN_BLOCK", 1)
    monkeypatch.setattr(reader, "SCAN_BYTES", 1)
    passes, threaded_out = [], []
    monkeypatch.setattr(read, "clock_records", lambda path: passes.append(path) or clock_records(path))
    parquet_out = read.ParquetOut
    monkeypatch.setattr(read, "ParquetOut", lambda *a: threaded_out.append(a[2] is not None)
                        or parquet_out(*a))
    # no clock; one before the events (read ahead then); one after ten of them (the file
    # read again, its Parquet part made anew)
    for where, clocks, want in ((0, [], 0), (0, [clock], 1), (10, [clock], 1)):
        lines = [{"ph": "M", "name": "iotrace_process", "pid": 7, "tid": 7, "args": head},
                 *reads[:where], *clocks, *reads[where:]]
        d = tmp_path / f"c{len(clocks)}-{where}"
        d.mkdir()
        (d / "x-h-7.pfw").write_text("[\n" + "".join(json.dumps(x, separators=(",", ":")) + ",\n"
                                                    for x in lines)[:-2] + "]\n")
        got = {}
        for streamed in (True, False):
            passes.clear()
            monkeypatch.setattr(read, "SMALL_FILE_EVENTS", 0 if streamed else 1 << 15)
            out = tmp_path / f"o{len(clocks)}-{where}{streamed}"
            job = analyze([str(d)], Options(engine="local", workers=workers, out_dir=str(out)))
            if streamed:
                assert len(passes) == want
            assert set(threaded_out) == {workers == 2}  # the helper thread with a spare worker
            threaded_out.clear()
            assert len(os.listdir(out / "events")) == 1  # one part, each event in it once (below)
            events = pq.read_table(out / "events").sort_by("ts_ns")
            got[streamed] = (job.summary["job"], job.summary["processes"], events.column("ts_ns").to_pylist())
        assert got[True] == got[False]
        assert got[True][0]["events"] == 50 and got[True][1][0]["bytes_read"] == 5000
        assert len(got[True][2]) == 50
        assert got[True][2][0] == 2 * s  # (Parquet keeps the process's own clock)
        assert got[True][0]["start_ns"] == base + 2 * s - (MS if clocks else 0)


# --- under load -----------------------------------------------------------------------------


@need_mpi
def test_alignment_under_load(programs, tmp_path, monkeypatch):
    """Two busy loops beside the job (6 processes on the machine's 2 cores): the round trips
    grow, the rounds with the shortest still bound the error under 1 ms."""
    from loss_scenarios import busy_load

    with busy_load(2) as busy:
        job = run_job(programs, tmp_path)
        assert all(p.poll() is None for p in busy), "the load ended during the test"
    check_offsets(job)
    check_analyzer(job, monkeypatch, streamed=False)
