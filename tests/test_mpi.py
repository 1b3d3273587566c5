"""An MPI job traced as the README says (`LD_PRELOAD=... IOTRACE_DIR=traces mpirun -n 4 ./app`):
every rank's trace, each with exactly the POSIX calls its rank made, named by its rank (from
the launcher's OMPI_COMM_WORLD_RANK) and the job id, and the analysis naming the ranks.
tests/c/mpi_io.c: each rank writes 4 blocks of 64 KiB to a file of its own and reads them back.
"""

import json
import os
import shutil
import subprocess

import pytest
import tracing
from mpi_launch import mpirun
from mpi_launch import run as run_mpi
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
    r = run_mpi(cmd, fresh=[out], env=env, text=True, timeout=120)
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
        # the file's name says the job and the rank
        assert os.path.basename(f.path).startswith(f"mpi_io-j777-r{rank}-"), f.path
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

    # Perfetto's process names: the ranks, also when the launcher is traced (its fork child's
    # image, before the exec, has no rank yet: the "orterun-host-9976")
    export = tmp_path / "job.json"
    e = subprocess.run(["iotrace", "export", "-o", str(export), str(out)], capture_output=True, text=True,
                       timeout=120)
    assert e.returncode == 0, e.stderr
    doc = json.loads(export.read_text())
    names = [ev["args"]["name"] for ev in (doc["traceEvents"] if isinstance(doc, dict) else doc)
             if ev.get("ph") == "M" and ev.get("name") == "process_name"]
    assert names[:RANKS] == [f"rank {r}" for r in range(RANKS)], names
    assert not [n for n in names if "fork" in n], names


# --- MPI-IO: every family, on a shared file and on a file per rank (tests/c/mpi_io_families.c)

K = 1024


def families(r: int) -> list[tuple]:
    """What rank `r` of mpi_io_families.c calls, in order: (call, file, size asked, bytes
    moved, byte offset); None where the call has none (a shared pointer's offset, a split
    call's end asks nothing)."""
    sh, own = "shared.dat", f"r{r}.dat"
    return [
        ("MPI_Init", None, None, None, None),
        ("MPI_File_open", sh, None, None, None),
        ("MPI_File_write_at", sh, 4 * K, 4 * K, r * 4 * K),
        ("MPI_File_write_at_all", sh, 16, 16, 64 * K + r * 8 * K),  # 2 doubles
        ("MPI_File_write_at_all", sh, 8 * K, 8 * K, 64 * K + r * 8 * K),
        ("MPI_File_seek", sh, None, None, None),
        ("MPI_File_write", sh, 4 * K, 4 * K, 128 * K + r * 8 * K),
        ("MPI_File_write_all", sh, 4 * K, 4 * K, 128 * K + r * 8 * K + 4 * K),  # 1024 ints
        ("MPI_File_write_at_all_begin", sh, 4 * K, 4 * K, 192 * K + r * 4 * K),
        ("MPI_File_write_at_all_end", sh, None, 4 * K, None),
        ("MPI_File_iwrite_at", sh, 4 * K, 4 * K, 256 * K + r * 4 * K),
        ("MPI_Wait", None, None, None, None),
        ("MPI_File_write_shared", sh, K, K, None),
        ("MPI_File_write_ordered", sh, K, K, None),
        ("MPI_File_sync", sh, None, None, None),
        ("MPI_Barrier", None, None, None, None),
        ("MPI_File_read_at", sh, 4 * K, 4 * K, r * 4 * K),
        ("MPI_File_read_at_all", sh, 8 * K, 8 * K, 64 * K + r * 8 * K),
        ("MPI_File_iread_at", sh, 4 * K, 4 * K, 256 * K + r * 4 * K),
        ("MPI_Wait", None, None, None, None),
        ("MPI_File_get_size", sh, None, None, None),
        ("MPI_File_close", sh, None, None, None),
        ("MPI_File_open", own, None, None, None),
        ("MPI_File_write_at", own, 64 * K, 64 * K, 0),
        ("MPI_File_write_at", own, 64 * K, 64 * K, 64 * K),
        ("MPI_File_seek", own, None, None, None),
        ("MPI_File_read", own, 64 * K, 64 * K, 0),
        ("MPI_File_write_at", own, 32, 32, 128 * K),  # 2 of a 16-byte derived type
        ("MPI_File_write_at", own, 48, 48, 128 * K + 32),  # 1 of a 48-byte one, made after that one's free
        ("MPI_File_write_at", own, 16, 16, 128 * K + 80),  # 4 ints
        ("MPI_File_close", own, None, None, None),
        ("MPI_Barrier", None, None, None, None),
        ("MPI_Finalize", None, None, None, None),
    ]


def nested(ev: list[dict], outer: dict, names: tuple[str, ...]) -> list[dict]:
    """The events of `names` on `outer`'s thread inside its interval."""
    end = outer["ts"] + outer["dur"]
    return [e for e in ev if e["name"] in names and e["tid"] == outer["tid"] and e is not outer
            and outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= end]


def test_every_mpi_io_family_recorded_with_its_bytes_offsets_and_posix_calls(tmp_path):
    exe = tmp_path / "mpi_io_families"
    subprocess.run(["mpicc", "-O0", "-o", str(exe), str(tracing.C_DIR / "mpi_io_families.c")], check=True)
    data = tmp_path / "data"
    data.mkdir()
    out = tmp_path / "traces"
    env = dict(os.environ, LD_PRELOAD=tracing.PRELOAD, IOTRACE_DIR=str(out))
    r = run_mpi([*mpirun(RANKS), str(exe), str(data)], fresh=[out], env=env, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "size 278528" in r.stdout  # as untraced: 256 KiB + 4 ranks x 4 KiB

    ts = tracing.TraceSet.load(out)
    by_rank = {f.header["mpi_rank"]: f for f in ts.files if "mpi_rank" in f.header}
    assert sorted(by_rank) == list(range(RANKS))
    under_collective = 0
    for rank, f in by_rank.items():
        # the rank MPI gave matches the launcher's, and the world's size is said too
        assert f.header["ranks"]["OMPI_COMM_WORLD_RANK"] == str(rank) and f.header["mpi_size"] == RANKS
        ev = f.events()
        mpi = [e for e in ev if e.get("cat") in ("mpi", "mpiio")]
        got = [(e["name"], os.path.basename(e["fname"]) if e["fname"] else None, e["args"].get("size"),
                e["args"].get("bytes"), e["args"].get("offset")) for e in mpi]
        assert got == families(rank)
        assert all(e["args"]["ret"] == 0 for e in mpi)
        assert [e["fname"] for e in mpi if e["fname"]][0] == str(data / "shared.dat")
        # an independent call's POSIX call is nested in it, the same bytes at the same offset
        for e in mpi:
            if e["name"] in ("MPI_File_write_at", "MPI_File_write", "MPI_File_read_at", "MPI_File_read"):
                (p,) = nested(ev, e, ("pwrite", "pwrite64", "pread", "pread64"))
                assert (p["fname"], p["args"]["size"], p["args"]["offset"]) == \
                    (e["fname"], e["args"]["size"], e["args"]["offset"])
        # the 8 KiB collective write: its aggregators' POSIX writes, whatever rank makes them
        (coll,) = [e for e in mpi if e["name"] == "MPI_File_write_at_all" and e["args"]["size"] == 8 * K]
        under_collective += sum(p["args"]["size"] for p in nested(ev, coll, ("pwrite", "pwritev", "pwrite64")))
    assert under_collective == RANKS * 8 * K

    # the analysis: the ranks, and the layer split, MPI-IO's own time apart from the POSIX under it
    job = analyze([str(out)], Options(engine="local", workers=1))
    ranked = sorted(p["rank"] for p in job.summary["processes"] if p["rank"] is not None)
    assert ranked == list(range(RANKS))
    layers = {r["layer"]: r for r in job.summary["layers"]}
    assert layers["mpiio"]["calls"] == RANKS * sum(1 for c in families(0) if c[0].startswith("MPI_File"))
    assert 0 < layers["mpiio"]["own_us"] < layers["mpiio"]["time_us"]
    assert layers["mpi"]["calls"] == RANKS * 6
    # the MPI section: one shared file and one per rank; collective and independent data calls
    # counted as the program made them (a split or non-blocking call's bytes once, at its start)
    m = job.summary["mpi"]
    assert (m["shape"], m["shared_files"], m["per_process_files"]) == ("both", 1, RANKS)
    data = [c for c in families(0) if c[3] is not None and not c[0].endswith("_end")]
    coll = [c for c in data if "_all" in c[0] or "_ordered" in c[0]]
    assert m["collective"]["calls"] == RANKS * len(coll)
    assert m["independent"]["calls"] == RANKS * (len(data) - len(coll))
    assert m["nonblocking"]["calls"] == RANKS * 2
    moved = {r: sum(c[3] for c in data if c[0].startswith("MPI_File_write") or c[0].startswith("MPI_File_iwrite"))
             for r in range(RANKS)}
    assert [r["bytes_written"] for r in m["ranks"]] == [moved[r] for r in range(RANKS)]
    assert [r["rank"] for r in m["ranks"]] == list(range(RANKS))


# --- mpi4py: Python's MPI, whose extension module loads the MPI library RTLD_LOCAL

MPI4PY = r"""
import sys
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
r, n = comm.Get_rank(), comm.Get_size()
fh = MPI.File.Open(comm, sys.argv[1], MPI.MODE_CREATE | MPI.MODE_RDWR)
fh.Write_at_all(r * 65536, np.full(65536, r, np.uint8))
fh.Sync(); comm.Barrier(); fh.Sync()  # MPI's consistency: the others' writes seen from here on
buf = np.empty(4096, np.uint8)
fh.Read_at(((r + 1) % n) * 65536, buf)
fh.Close()
comm.Barrier()
with open(f"{sys.argv[1]}.rank{r}", "w") as out:  # not stdout: mpirun interleaves the ranks' lines
    out.write(f"rank {r} of {n} read {int(buf[0])}")
"""


def test_mpi4py_program_traced_with_its_ranks(tmp_path):
    """mpi4py's module is loaded by Python with RTLD_LOCAL, and the MPI library with it: the
    tracer finds the library where the program's calls would have gone (untraced and traced
    give the same output), records every MPI-IO call with its rank's bytes and offsets, and
    names the ranks MPI gave."""
    pytest.importorskip("mpi4py")
    import sys

    script = tmp_path / "m.py"
    script.write_text(MPI4PY)
    cmd = [*mpirun(RANKS), sys.executable, str(script), str(tmp_path / "shared.dat")]
    def said() -> list[str]:
        return [(tmp_path / f"shared.dat.rank{r}").read_text() for r in range(RANKS)]

    plain = run_mpi(cmd, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    untraced = said()
    out = tmp_path / "traces"
    env = dict(os.environ, LD_PRELOAD=tracing.PRELOAD, IOTRACE_DIR=str(out))
    traced = run_mpi(cmd, fresh=[out], env=env, text=True, timeout=120)
    assert traced.returncode == 0, traced.stderr
    assert said() == untraced == [f"rank {r} of {RANKS} read {(r + 1) % RANKS}" for r in range(RANKS)]

    ts = tracing.TraceSet.load(out)
    by_rank = {f.header["mpi_rank"]: f for f in ts.files if "mpi_rank" in f.header}
    assert sorted(by_rank) == list(range(RANKS))
    for r, f in by_rank.items():
        got = [(e["name"], e["args"].get("bytes"), e["args"].get("offset"))
               for e in f.events() if e.get("cat") == "mpiio"]
        assert got == [("MPI_File_open", None, None), ("MPI_File_write_at_all", 65536, r * 65536),
                       ("MPI_File_sync", None, None), ("MPI_File_sync", None, None),
                       ("MPI_File_read_at", 4096, ((r + 1) % RANKS) * 65536), ("MPI_File_close", None, None)]
        assert [e["name"] for e in f.events() if e.get("cat") == "mpi"] == \
            ["MPI_Init_thread", "MPI_Barrier", "MPI_Barrier", "MPI_Finalize"]
    S = analyze([str(out)], Options(engine="local", workers=1)).summary
    assert [(r["rank"], r["bytes_written"], r["bytes_read"]) for r in S["mpi"]["ranks"]] == \
        [(r, 65536, 4096) for r in range(RANKS)]
    assert S["mpi"]["shape"] == "shared file"


# --- Fortran: Open MPI's bindings call the PMPI_ names, where the wrappers stand too


def test_fortran_program_traced(tmp_path):
    """A Fortran MPI program (use mpi): every call recorded once, with its bytes and offsets,
    its rank from MPI and its clock measured, as for C."""
    if not shutil.which("mpif90"):
        pytest.skip("no mpif90 (Open MPI's Fortran wrapper: .ci/setup installs libopenmpi-dev)")
    exe = tmp_path / "fio"
    subprocess.run(["mpif90", "-o", str(exe), str(tracing.C_DIR / "mpi_fortran.f90")], check=True)
    out = tmp_path / "traces"
    env = dict(os.environ, LD_PRELOAD=tracing.PRELOAD, IOTRACE_DIR=str(out))
    r = run_mpi([*mpirun(RANKS), str(exe), str(tmp_path / "shared.dat")], fresh=[out], env=env, text=True,
                timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"fortran {RANKS} ranks done" in r.stdout
    K = 1024
    by_rank = {f.header["mpi_rank"]: f for f in tracing.TraceSet.load(out).files if "mpi_rank" in f.header}
    assert sorted(by_rank) == list(range(RANKS))
    for rank, f in by_rank.items():
        got = [(e["name"], e["args"].get("bytes"), e["args"].get("offset"))
               for e in f.events() if e.get("cat") in ("mpi", "mpiio")]
        assert got == [("MPI_Init", None, None), ("MPI_File_open", None, None),
                       ("MPI_File_write_at", 4 * K, rank * 4 * K),
                       ("MPI_File_write_at_all", 8 * K, 64 * K + rank * 8 * K),
                       ("MPI_File_read_at", 4 * K, rank * 4 * K), ("MPI_File_close", None, None),
                       ("MPI_Barrier", None, None), ("MPI_Finalize", None, None)]
        assert [c["args"]["at"] for c in f.records if c.get("name") == "iotrace_clock"] == ["MPI_Init", "MPI_Finalize"]
    assert (tmp_path / "shared.dat").stat().st_size == 64 * K + RANKS * 8 * K


VIEWS = """
import sys
from mpi4py import MPI
import numpy as np
comm = MPI.COMM_WORLD
r = comm.Get_rank()
f = MPI.File.Open(comm, sys.argv[1], MPI.MODE_CREATE | MPI.MODE_RDWR)
f.Write_at(r * 8, np.full(8, r, np.uint8))                 # the default view: offsets are bytes
f.Set_view(1024 + r * 4096, MPI.INT, MPI.INT)              # a displacement and 4-byte etypes
f.Write_at(3, np.arange(16, dtype=np.int32))               # etype 3: byte 1024 + r * 4096 + 12
comm.Barrier()
buf = np.zeros(1024, np.int32)
f.Read_at(1024 * (comm.Get_size() + 1), buf)               # past the end: nothing moved
f.Close()
"""


def test_offsets_through_a_view_and_a_read_past_the_end(tmp_path):
    """A write's offset in etypes is its byte offset while the file has the view MPI_File_open
    gives, and goes through the view after MPI_File_set_view (displacement + etypes of 4
    bytes); a successful write moved what it asked; a read past the end moved nothing."""
    pytest.importorskip("mpi4py")
    import sys

    script = tmp_path / "v.py"
    script.write_text(VIEWS)
    out = tmp_path / "traces"
    env = dict(os.environ, LD_PRELOAD=tracing.PRELOAD, IOTRACE_DIR=str(out))
    p = run_mpi([*mpirun(RANKS), sys.executable, str(script), str(tmp_path / "v.dat")], fresh=[out], env=env,
                text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    ts = tracing.TraceSet.load(out)
    by_rank = {f.header["mpi_rank"]: f for f in ts.files if "mpi_rank" in f.header}
    assert sorted(by_rank) == list(range(RANKS))
    for r, f in by_rank.items():
        got = [(e["name"], e["args"].get("size"), e["args"].get("bytes"), e["args"].get("offset"))
               for e in f.events() if e.get("cat") == "mpiio" and "_at" in e["name"]]
        assert got == [("MPI_File_write_at", 8, 8, r * 8),
                       ("MPI_File_write_at", 64, 64, 1024 + r * 4096 + 12),
                       ("MPI_File_read_at", 4096, 0, 1024 + r * 4096 + 4 * 1024 * (RANKS + 1))]
