"""HDF5 -> MPI-IO -> POSIX, checked event by event (issue 25).

tests/c/hdf5_layers.c under mpirun -n 4, parallel HDF5 (Debian's libhdf5-openmpi, the MPI-IO
driver): every HDF5 call of every rank recorded with its file, object and exact bytes; each
dataset transfer holds the MPI-IO call it caused (MPI_File_write_at_all for a collective one,
MPI_File_write_at for an independent one: what HDF5 1.10's MPI-IO driver calls), and that the
POSIX calls under it, on the same thread inside its interval; the analyzer's layer split gives
hdf5, mpiio and posix each its own time. Then h5py, whose wheel brings its own HDF5 (loaded
RTLD_LOCAL, out of the tracer's RTLD_NEXT): its calls are recorded too, under the Python-level
events of iotrace.auto. And a process without HDF5 that calls an HDF5 name gets an error back.
"""

import os
import shutil
import subprocess

import pytest
import tracing
from mpi_launch import mpirun
from mpi_launch import run as run_mpi
from iotrace_analyzer.pipeline import Options, analyze
from pytrace_helpers import assert_inside, run_py

RANKS = 4
R, C, K = 16, 64, 1024  # tests/c/hdf5_layers.c
BLOCK = R * C * 8  # a rank's rows of /grid/data: 8 KiB
STEPS = RANKS * K * 8  # /grid/steps, extended: 32 KiB
H5F_ACC_TRUNC, H5F_ACC_RDONLY, H5F_SCOPE_GLOBAL = 2, 0, 1
INDEPENDENT, COLLECTIVE = 0, 1  # H5FD_mpio_xfer_t: the transfer mode asked (flags)
CONTIGUOUS_COLLECTIVE, CHUNK_COLLECTIVE = 4, 2  # H5D_mpio_actual_io_mode_t: what HDF5 did (mode)

POSIX_WRITES = ("pwrite", "pwrite64", "pwritev", "write")
POSIX_READS = ("pread", "pread64", "preadv", "read")


def hdf5_cc() -> tuple[list[str], list[str]] | None:
    """The compiler and the flags after the sources that build a program with parallel HDF5,
    shared (h5pcc alone links it statically on Debian: the program's calls would then bind
    inside it, out of the tracer's sight)."""
    if not (shutil.which("mpicc") and shutil.which("mpirun")):
        return None
    if shutil.which("pkg-config"):
        r = subprocess.run(["pkg-config", "--cflags", "--libs", "hdf5-openmpi"], capture_output=True, text=True)
        if r.returncode == 0:
            return ["mpicc", "-O0", "-g"], r.stdout.split()
    return (["h5pcc", "-shlib", "-O0", "-g"], []) if shutil.which("h5pcc") else None


def build(source: str, exe) -> None:
    cc, flags = hdf5_cc()
    subprocess.run([*cc, "-o", str(exe), str(tracing.C_DIR / source), *flags], check=True)


needs_phdf5 = pytest.mark.skipif(hdf5_cc() is None, reason="no parallel HDF5 (.ci/setup installs libhdf5-openmpi-dev)")



def expected(n: int) -> list[tuple]:
    """The HDF5 calls each rank of hdf5_layers.c makes, in order: (call, object, size, bytes,
    flags, mode); None where the call has none."""
    data, units, steps = "/grid/data", "/grid/data/units", "/grid/steps"
    return [
        ("H5Fcreate", None, None, None, H5F_ACC_TRUNC, None),
        ("H5Gcreate2", "/grid", None, None, None, None),
        ("H5Dcreate2", data, 2 * n * BLOCK, None, None, None),  # its size as made
        ("H5Dwrite", data, BLOCK, BLOCK, COLLECTIVE, CONTIGUOUS_COLLECTIVE),
        ("H5Dwrite", data, BLOCK, BLOCK, INDEPENDENT, None),
        ("H5Acreate2", units, 16, None, None, None),
        ("H5Awrite", units, 16, 16, None, None),
        ("H5Aclose", units, None, None, None, None),
        ("H5Dcreate2", steps, 0, None, None, None),
        ("H5Dset_extent", steps, STEPS, None, None, None),
        ("H5Dwrite", steps, K * 8, K * 8, COLLECTIVE, CHUNK_COLLECTIVE),
        ("H5Dclose", steps, None, None, None, None),
        ("H5Dclose", data, None, None, None, None),
        ("H5Gclose", "/grid", None, None, None, None),
        ("H5Fflush", None, None, None, H5F_SCOPE_GLOBAL, None),
        ("H5Fclose", None, None, None, None, None),
        ("H5Fopen", None, None, None, H5F_ACC_RDONLY, None),
        ("H5Dopen2", data, None, None, None, None),
        ("H5Aopen", units, None, None, None, None),
        ("H5Aread", units, 16, 16, None, None),
        ("H5Aclose", units, None, None, None, None),
        ("H5Dread", data, BLOCK, BLOCK, COLLECTIVE, CONTIGUOUS_COLLECTIVE),
        ("H5Dread", data, BLOCK, BLOCK, INDEPENDENT, None),
        ("H5Dclose", data, None, None, None, None),
        ("H5Oopen", steps, None, None, None, None),
        ("H5Dread", steps, STEPS, STEPS, INDEPENDENT, None),  # H5S_ALL: the whole dataset
        ("H5Oclose", steps, None, None, None, None),
        ("H5Fclose", None, None, None, None, None),
    ]


def nested(ev: list[dict], outer: dict, names: tuple[str, ...]) -> list[dict]:
    """The events of `names` on `outer`'s thread inside its interval."""
    inside = [e for e in ev if e["name"] in names and e["tid"] == outer["tid"] and e is not outer
              and outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"]]
    for e in inside:
        assert_inside(e, outer)  # in integer ns, not only in µs
    return inside


@needs_phdf5
def test_hdf5_over_mpiio_over_posix(tmp_path):
    exe = tmp_path / "hdf5_layers"
    build("hdf5_layers.c", exe)
    data = tmp_path / "data"
    data.mkdir()
    out = tmp_path / "traces"
    env = dict(os.environ, LD_PRELOAD=tracing.PRELOAD, IOTRACE_DIR=str(out))
    r = run_mpi([*mpirun(RANKS), str(exe), str(data)], fresh=[out], env=env, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ok", str(RANKS)]  # every rank read back what it wrote

    path = str(data / "shared.h5")
    ts = tracing.TraceSet.load(out)
    by_rank = {f.header["mpi_rank"]: f for f in ts.files if "mpi_rank" in f.header}
    assert sorted(by_rank) == list(range(RANKS))
    base = set()  # /grid/data's first byte in the file, as each rank's MPI-IO calls say it
    coll_posix = {"w_data": [], "r_data": [], "w_steps": []}  # (offset, size) of the aggregators' calls
    for rank, f in by_rank.items():
        ev = f.events()
        h5 = [e for e in ev if e.get("cat") == "hdf5"]
        got = [(e["name"], e["fname2"], e["args"].get("size"), e["args"].get("bytes"), e["args"].get("flags"),
                e["args"].get("mode")) for e in h5]
        assert got == expected(RANKS)
        assert all(e["fname"] == path for e in h5)
        assert all(e["args"]["ret"] >= 0 for e in h5)  # ids, or 0
        writes = [e for e in h5 if e["name"] == "H5Dwrite"]
        reads = [e for e in h5 if e["name"] == "H5Dread"]

        # /grid/data: each transfer holds one MPI-IO call of its rank's rows, at the dataset's
        # address plus the rows' place; an independent one holds its POSIX call, the same bytes
        for h, mpi_name, block, posix in (
                (writes[0], "MPI_File_write_at_all", rank, POSIX_WRITES),
                (writes[1], "MPI_File_write_at", RANKS + rank, POSIX_WRITES),
                (reads[0], "MPI_File_read_at_all", rank, POSIX_READS),
                (reads[1], "MPI_File_read_at", RANKS + rank, POSIX_READS)):
            (m,) = nested(ev, h, ("MPI_File_write_at_all", "MPI_File_write_at", "MPI_File_read_at_all",
                                  "MPI_File_read_at"))
            assert (m["name"], m["fname"], m["args"]["size"], m["args"]["bytes"]) == (mpi_name, path, BLOCK, BLOCK)
            base.add(m["args"]["offset"] - block * BLOCK)
            under = nested(ev, m, posix)
            if mpi_name.endswith("_all"):  # what this rank wrote for the others, if an aggregator
                key = "w_data" if posix is POSIX_WRITES else "r_data"
                coll_posix[key] += [(p["args"]["offset"], p["args"]["ret"]) for p in under]
            else:
                (p,) = under
                assert (p["fname"], p["args"]["size"], p["args"]["offset"], p["args"]["ret"]) == \
                    (path, BLOCK, m["args"]["offset"], BLOCK)
            # no POSIX call on the file in the HDF5 call but under its MPI-IO calls
            assert len(nested(ev, h, posix)) == len(under)

        # /grid/steps, chunked: the collective write of the rank's chunk, its MPI-IO collective
        (m,) = nested(ev, writes[2], ("MPI_File_write_at_all", "MPI_File_write_at"))
        assert (m["name"], m["args"]["bytes"]) == ("MPI_File_write_at_all", K * 8)
        coll_posix["w_steps"] += [(p["args"]["offset"], p["args"]["ret"]) for p in nested(ev, m, POSIX_WRITES)]
        # ... read whole (H5S_ALL): its four chunks, each an MPI_File_read_at with its pread
        chunk_reads = [m for m in nested(ev, reads[2], ("MPI_File_read_at",)) if m["args"]["size"] == K * 8]
        assert len(chunk_reads) == RANKS
        assert sum(m["args"]["bytes"] for m in chunk_reads) == reads[2]["args"]["bytes"] == STEPS
        for m in chunk_reads:
            (p,) = nested(ev, m, POSIX_READS)
            assert (p["args"]["offset"], p["args"]["ret"]) == (m["args"]["offset"], K * 8)
        # the HDF5 call is on the file's POSIX calls only through MPI-IO: none outside its MPI calls
        mpi_of = [m for h in h5 for m in nested(ev, h, ("MPI_File_read_at", "MPI_File_write_at",
                                                        "MPI_File_read_at_all", "MPI_File_write_at_all"))]
        for h in h5:
            for p in [p for p in nested(ev, h, POSIX_WRITES + POSIX_READS) if p["fname"] == path]:
                assert any(m["tid"] == p["tid"] and m["ts"] <= p["ts"] <= m["ts"] + m["dur"] for m in mpi_of), p
    assert len(base) == 1  # every rank and call agree on where /grid/data is
    (start,) = base
    # the collectives' POSIX calls, whichever ranks made them, cover every rank's bytes once
    for key, first, size in (("w_data", start, RANKS * BLOCK), ("r_data", start, RANKS * BLOCK)):
        assert sum(n for _, n in coll_posix[key]) == size, key
        assert min(o for o, _ in coll_posix[key]) == first
        assert max(o + n for o, n in coll_posix[key]) == first + size
    assert sum(n for _, n in coll_posix["w_steps"]) == STEPS

    # the layer split: each layer its own time; HDF5's own less than its total (MPI-IO under it)
    job = analyze([str(out)], Options(engine="local", workers=1))
    layers = {row["layer"]: row for row in job.summary["layers"]}
    assert layers["hdf5"]["calls"] == RANKS * len(expected(RANKS))
    for name in ("hdf5", "mpiio", "posix"):
        assert layers[name]["own_us"] > 0, name
    assert layers["hdf5"]["own_us"] < layers["hdf5"]["time_us"]
    assert layers["mpiio"]["own_us"] < layers["mpiio"]["time_us"]


def test_h5py_recorded_through_its_own_hdf5(tmp_path):
    """h5py's wheel bundles an HDF5 (h5py.libs/libhdf5-*.so, loaded RTLD_LOCAL): h5py's calls
    reach the tracer's HDF5 names and go on to that copy; recorded with file, name and bytes,
    inside the Python-level events iotrace.auto writes for h5py."""
    pytest.importorskip("h5py")
    code = """
        import json, os
        import numpy as np, h5py
        a = np.arange(1000, dtype=np.float64)
        with h5py.File("d.h5", "w") as f:
            f.create_dataset("x", data=a.reshape(10, 100))
            f["x"].attrs["units"] = np.arange(3, dtype=np.int32)
        with h5py.File("d.h5", "r") as f:
            ds = f["x"]
            rows = [ds[i] for i in range(3)]
            units = ds.attrs["units"]
        assert rows[2][5] == 205 and list(units) == [0, 1, 2]
        print(json.dumps({"pid": os.getpid()}))
    """
    ts = run_py(code, tmp_path, mode="preload", timeout=120)
    path = str(tmp_path / "d.h5")
    ev = ts.events()
    h5 = [e for e in ev if e.get("cat") == "hdf5"]
    assert all(e["fname"] == path for e in h5)
    data = [(e["name"], e["fname2"], e["args"].get("bytes")) for e in h5
            if e["name"] in ("H5Dwrite", "H5Dread", "H5Awrite", "H5Aread")]
    assert data == [("H5Dwrite", "/x", 8000), ("H5Awrite", "/x/units", 12)] + \
        [("H5Dread", "/x", 800)] * 3 + [("H5Aread", "/x/units", 12)]
    names = [e["name"] for e in h5]
    assert names.count("H5Fcreate") == names.count("H5Fopen") == 1
    # h5py lets go of its ids (H5Idec_ref) rather than closing them: the file's last one closes it
    assert [e["args"]["ret"] for e in h5 if e["name"] == "H5Idec_ref" and e["fname2"] is None][-1] == 0
    # each h5py.Dataset.read (iotrace.auto's event) holds the H5Dread it made
    py_reads = [e for e in ev if e["name"] == "h5py.Dataset.read"]
    h5_reads = [e for e in h5 if e["name"] == "H5Dread"]
    assert len(py_reads) == len(h5_reads) == 3
    for p, h in zip(py_reads, h5_reads):
        assert_inside(h, p)
    # the file's POSIX writes are HDF5's: inside an HDF5 call (the file's flush at its last H5Idec_ref)
    for w in [e for e in ev if e["name"] in POSIX_WRITES and e["fname"] == path]:
        assert [h for h in h5 if h["tid"] == w["tid"] and h["ts"] <= w["ts"] <= h["ts"] + h["dur"]], w


def test_two_hdf5_copies_in_one_process(tmp_path):
    """h5py's HDF5 and another (the system's, through a library of the program's loaded as
    Python loads extensions, RTLD_LOCAL), both in use at once: each call goes to the copy its
    caller was linked to (a call to the other would fail: different versions, different ids),
    and each object is named by its own copy's ids, though the two give the same numbers."""
    pytest.importorskip("h5py")
    flags = hdf5_cc()
    if flags is None or shutil.which("pkg-config") is None:
        pytest.skip("no HDF5 to build a library with (.ci/setup installs libhdf5-openmpi-dev)")
    lib = tmp_path / "libother.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O0", "-o", str(lib), str(tracing.C_DIR / "hdf5_other.c"),
                    *flags[1]], check=True)
    code = """
        import ctypes, json, os, sys
        import numpy as np, h5py
        other = ctypes.CDLL(sys.argv[1])
        other.other_read.restype = ctypes.c_long
        with h5py.File("a.h5", "w") as f:
            x = f.create_dataset("x", data=np.arange(100, dtype=np.int32))
            wrote = other.other_write(b"b.h5", 10)  # its file and dataset open beside h5py's
            x[:10] = np.arange(10, dtype=np.int32)
            closed = other.other_close()
        with h5py.File("a.h5", "r") as f:
            a = int(f["x"][:].sum())
        print(json.dumps({"pid": os.getpid(), "results": [wrote, closed, other.other_read(b"b.h5"), a],
                          "copies": len({l.split()[-1] for l in open("/proc/self/maps") if "/libhdf5" in l
                                         and "_hl" not in l})}))
    """
    ts = run_py(code, tmp_path, mode="preload", args=(lib,), timeout=120)
    assert ts.out["copies"] == 2
    assert ts.out["results"] == [0, 0, 45, 4950]  # as untraced: each copy did its own work
    h5 = [e for e in ts.events() if e.get("cat") == "hdf5"]
    a, b = str(tmp_path / "a.h5"), str(tmp_path / "b.h5")
    transfers = [(e["name"], e["fname"], e["fname2"], e["args"]["bytes"]) for e in h5
                 if e["name"] in ("H5Dwrite", "H5Dread")]
    assert transfers == [("H5Dwrite", a, "/x", 400), ("H5Dwrite", b, "/v", 40), ("H5Dwrite", a, "/x", 40),
                         ("H5Dread", a, "/x", 400), ("H5Dread", b, "/v", 40)]
    # the same id in both copies: h5py's first file and the other's first file
    first = {e["fname"]: e["args"]["ret"] for e in h5 if e["name"] == "H5Fcreate"}
    assert first[a] == first[b]


@pytest.mark.parametrize("version", ["1.10", "1.8"])
def test_hdf5_calling_itself_is_recorded_once(tmp_path, version):
    """An HDF5 whose H5Fcreate calls its own H5Fflush through its public name (tests/c/hdf5_fake.c:
    a stand-in; Debian's and h5py's HDF5 call themselves so only for H5Idec_ref): the program's
    calls are recorded, the library's own H5Fflush is not. An HDF5 1.8 (32-bit ids): nothing
    recorded, every call answered."""
    cc = tracing.c_compiler()
    if cc is None:
        pytest.skip("no C compiler")
    src = str(tracing.C_DIR / "hdf5_fake.c")
    lib = tmp_path / "libhdf5_fake.so"
    exe = tmp_path / "fake_main"
    subprocess.run([cc, "-shared", "-fPIC", "-O0", "-DFAKE_LIB", "-o", str(lib), src], check=True)
    subprocess.run([cc, "-O0", "-o", str(exe), src, f"-L{tmp_path}", "-lhdf5_fake", f"-Wl,-rpath,{tmp_path}"],
                   check=True)
    path = tmp_path / "x.h5"
    ts = tracing.run_traced([exe, path], tmp_path, {"FAKE_HDF5_VERSION": version})
    assert ts.stdout.split() == ["1", "2", "0"]  # both flushes made: the library's and the program's
    h5 = [(e["name"], e["fname"], e["args"].get("flags")) for e in ts.events() if e.get("cat") == "hdf5"]
    if version == "1.8":
        assert h5 == []
    else:
        assert h5 == [("H5Fcreate", str(path), 2), ("H5Fflush", str(path), 1), ("H5Fclose", str(path), None)]


def test_no_hdf5_no_harm(tmp_path):
    """A process without HDF5 that finds an HDF5 name (the tracer's, through dlsym) and calls it
    gets HDF5's error value back, and nothing is recorded or loaded."""
    code = """
        import ctypes, json, os
        h5 = ctypes.CDLL(None)
        h5.H5Fopen.restype = ctypes.c_int64
        h5.H5Fopen.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_int64]
        ret = h5.H5Fopen(b"nothing.h5", 0, 0)
        maps = open("/proc/self/maps").read()
        print(json.dumps({"pid": os.getpid(), "ret": ret, "hdf5_loaded": "libhdf5" in maps}))
    """
    ts = run_py(code, tmp_path, mode="preload")
    assert ts.out["ret"] == -1 and ts.out["hdf5_loaded"] is False
    assert [e for e in ts.events() if e.get("cat") == "hdf5"] == []
