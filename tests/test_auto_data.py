"""Zero annotation for the data libraries of training pipelines (numpy, h5py, PIL,
pyarrow.parquet, pandas) and the rules every hook keeps: a library is hooked only once the
program imports it, nothing is imported for the program, and IOTRACE_AUTO=0 turns it off.
"""
from __future__ import annotations

import pytest

import tracing
from pytrace_helpers import py_events, run_py

DATA = """
    import json, os, sys
    import numpy as np
    here = os.getcwd()
    a = np.arange(1000, dtype=np.float64)
    np.save("a.npy", a)
    np.savez("ab.npz", a=a, b=a[:10])
    with open("c.npy", "wb") as f:          # an open file: bytes from the stream's growth
        np.save(f, a[:100])
    back = np.load("a.npy")
    z = np.load("ab.npz")
    assert float(back.sum()) == float(a.sum()) and z["b"].shape == (10,)
    a.tofile("raw.bin")
    raw = np.fromfile("raw.bin", dtype=np.float64)
    libs = sys.argv[1].split(",") if len(sys.argv) > 1 else []
    if "h5py" in libs:
        import h5py
        with h5py.File("d.h5", "w") as f:
            f.create_dataset("x", data=a.reshape(10, 100))
        with h5py.File("d.h5", "r") as f:
            ds = f["x"]
            rows = [ds[i] for i in range(3)]
    if "PIL" in libs:
        from PIL import Image
        Image.fromarray((a[:64].reshape(8, 8) % 256).astype(np.uint8)).save("i.png")
        with Image.open("i.png") as im:
            px = np.asarray(im).sum()
    if "pyarrow" in libs:
        import pyarrow as pa, pyarrow.parquet as pq
        pq.write_table(pa.table({"x": a}), "t.parquet")
        t = pq.read_table("t.parquet")
        assert t.num_rows == 1000
    if "pandas" in libs:
        import pandas as pd
        with open("t.csv", "w") as f:
            f.write("x,y\\n" + "".join(f"{i},{i * 2}\\n" for i in range(50)))
        df = pd.read_csv("t.csv")
        assert len(df) == 50
    sizes = {n: os.path.getsize(n) for n in os.listdir(".") if os.path.isfile(n)}
    print(json.dumps({"pid": os.getpid(), "sizes": sizes, "modules": sorted(
        m for m in ("torch", "h5py", "PIL", "pyarrow", "pandas") if m in sys.modules)}))
"""


def _libs() -> list[str]:
    have = []
    for m in ("h5py", "PIL", "pyarrow", "pandas"):
        try:
            __import__(m)
            have.append(m)
        except ImportError:
            pass
    return have


def test_numpy_calls_with_files_and_bytes(tmp_path):
    ts = run_py(DATA, tmp_path, mode="preload")
    sizes = ts.out["sizes"]
    got = [(e["name"], e["args"]) for e in py_events(ts, cat="data")]
    assert got == [
        ("numpy.save", {"file": "a.npy", "bytes": sizes["a.npy"]}),
        ("numpy.savez", {"file": "ab.npz", "bytes": sizes["ab.npz"]}),
        ("numpy.save", {"file": "c.npy", "bytes": sizes["c.npy"]}),  # f.name, as opened
        ("numpy.load", {"file": "a.npy", "bytes": sizes["a.npy"]}),
        ("numpy.load", {"file": "ab.npz", "bytes": sizes["ab.npz"]}),
        ("numpy.fromfile", {"file": "raw.bin", "bytes": sizes["raw.bin"]}),
    ]
    assert ts.out["modules"] == []  # numpy alone: no other library was imported for it


def test_data_libraries(tmp_path):
    libs = _libs()
    if not libs:
        pytest.skip("none of h5py, PIL, pyarrow, pandas is installed")
    ts = run_py(DATA, tmp_path, mode="preload", args=(",".join(libs),), timeout=120)
    sizes = ts.out["sizes"]
    events = [(e["name"], e["args"]) for e in py_events(ts, cat="data")
              if not e["name"].startswith("numpy.")]
    expect = []
    if "h5py" in libs:
        expect += [("h5py.File", {"file": "d.h5"}),  # created: no size yet
                   ("h5py.File", {"file": "d.h5", "bytes": sizes["d.h5"]})]
        expect += [("h5py.Dataset.read", {"file": "d.h5", "bytes": 800})] * 3
    if "PIL" in libs:
        expect += [("PIL.Image.open", {"file": "i.png", "bytes": sizes["i.png"]}),
                   ("PIL.Image.load", {"file": "i.png"})]
    if "pyarrow" in libs:
        expect += [("pyarrow.parquet.write_table", {"file": "t.parquet",
                                                    "bytes": sizes["t.parquet"]}),
                   ("pyarrow.parquet.read_table", {"file": "t.parquet",
                                                   "bytes": sizes["t.parquet"]})]
    if "pandas" in libs:
        expect += [("pandas.read_csv", {"file": "t.csv", "bytes": sizes["t.csv"]})]
    assert events == expect
    assert ts.out["modules"] == sorted(libs)


def test_no_library_is_imported_for_the_program(tmp_path):
    """The hooks wait for imports: a program that imports nothing gets nothing imported."""
    code = """
        import json, os, sys
        heavy = ("torch", "numpy", "h5py", "PIL", "pyarrow", "pandas", "iotrace_analyzer",
                 "dask", "psutil")
        print(json.dumps({"pid": os.getpid(), "iotrace": "iotrace" in sys.modules,
                          "auto": "iotrace.auto" in sys.modules,
                          "heavy": [m for m in heavy if m in sys.modules]}))
    """
    on = run_py(code, tmp_path, mode="preload")
    assert on.out == {"pid": on.out["pid"], "iotrace": True, "auto": True, "heavy": []}
    off = run_py(code, tmp_path, mode="preload", env={"IOTRACE_AUTO": "0"})
    assert off.out["iotrace"] is False and off.out["heavy"] == []
    untraced = run_py(code, tmp_path, mode="off")
    assert untraced.out["iotrace"] is False


def test_iotrace_auto_0(tmp_path):
    ts = run_py(DATA, tmp_path, mode="preload", env={"IOTRACE_AUTO": "0"})
    assert py_events(ts, cat="data") == []
    assert ts.count("write", fname=str(tmp_path / "a.npy")) >= 1


def test_already_imported_library_is_hooked_by_init(tmp_path):
    """iotrace.init() after the program imported numpy: hooked at once."""
    code = """
        import json, os
        import numpy as np
        import iotrace
        iotrace.init()
        np.save("x.npy", np.zeros(10))
        print(json.dumps({"pid": os.getpid()}))
    """
    ts = run_py(code, tmp_path, mode="off", env={"IOTRACE_DIR": str(tmp_path / "t")})
    evs = [e for e in tracing.TraceSet.load(tmp_path / "t").events(cat="data")]
    assert [(e["name"], e["args"]["file"]) for e in evs] == [("numpy.save", "x.npy")]
    assert ts.returncode == 0
