"""Files are classed (data, software, system, pipe-socket, unknown) so that a Python job's own
start-up (thousands of stats on its interpreter and packages) is not counted as its I/O."""

import pytest
from conftest import end, fh, io, process, write_trace
from iotrace_analyzer.model import file_class
from iotrace_analyzer.model.file_class import classify, software_prefixes
from iotrace_analyzer.pipeline import Options, analyze

US = 1000

PREFIXES = software_prefixes(["/opt/conda/bin/python3.11", "/usr/bin/python3", "/usr/bin/tar", None])


def test_prefixes_of_the_interpreters():
    assert PREFIXES == ("/opt/conda/", "/usr/lib/python")


@pytest.mark.parametrize("path,cls", [
    ("/data/imagenet/train/n01440764/img_001.JPEG", "data"),
    ("/scratch/run7/ckpt/model-000100.pt", "data"),
    ("/dev/shm/batch-3.npz", "data"),
    ("/home/me/project/dataset.zip", "data"),
    ("/opt/conda/lib/python3.11/os.py", "software"),
    ("/opt/conda/lib/python3.11/site-packages/torch/_C.cpython-311-x86_64-linux-gnu.so", "software"),
    ("/opt/conda/bin/python3.11", "software"),
    ("/home/me/.local/lib/python3.11/site-packages/numpy/__init__.py", "software"),
    ("/usr/lib/python3.11/json/__init__.py", "software"),
    ("/home/me/project/model.py", "software"),
    ("/home/me/project/__pycache__/model.cpython-311.pyc", "software"),
    ("/usr/lib/x86_64-linux-gnu/libzstd.so.1.5.4", "software"),
    ("/root/.local/lib/python3.11/site-packages", "software"),
    ("/root/lib/python311.zip", "software"),
    ("/opt/conda", "software"),
    ("/etc/ld.so.cache", "system"),
    ("/proc/self/maps", "system"),
    ("/sys/devices/system/cpu/online", "system"),
    ("/dev/null", "system"),
    ("/usr/share/zoneinfo/UTC", "system"),
    # the MPI runtime's session folders, wherever TMPDIR puts them
    ("/tmp/ompi.vm.0/pid.20761/pmix_dstor_ds12_20761/initial-pmix_shared-segment-0", "system"),
    ("/scratch/tmp/ompi.nid001.1000/jf.0/1/3", "system"),
    ("/tmp/prte.nid001.1000/dvm.123/0", "system"),
    ("/scratch/run/ompi.results.dat", "data"),
    ("pipe:[81234]", "pipe-socket"),
    ("socket:[99]", "pipe-socket"),
    ("anon_inode:[eventfd]", "pipe-socket"),
    ("<unknown 00ff00ff00ff00ff>", "unknown"),
    (None, "unknown"),
])
def test_classify(path, cls):
    assert classify(path, PREFIXES) == cls


def test_summary_separates_the_data_from_the_start_up(tmp_path):
    """A Python process stats 300 files of its interpreter, reads /proc and a pipe, then reads
    2 data files: the classes' totals are exact and the data files lead the file list."""
    p = 500
    py = "/opt/py/bin/python3.11"
    lines = [process(p, exe=py)]
    t = 1000 * US
    for k in range(300):
        path = f"/opt/py/lib/python3.11/site-packages/pkg{k}/__init__.py"
        lines += [fh(path, p), io("stat", p, t, 2 * US, path=path, ret=0)]
        t += 3 * US
    lines += [fh("/proc/self/status", p), io("read", p, t, 5 * US, path="/proc/self/status", fd=3,
                                              size=4096, ret=1200)]
    t += 10 * US
    lines += [fh("pipe:[42]", p), io("write", p, t, 4 * US, path="pipe:[42]", fd=5, size=64, ret=64)]
    t += 10 * US
    for k in range(2):
        path = f"/data/train/shard-{k}.npz"
        lines += [fh(path, p), io("open", p, t, 10 * US, path=path, ret=3, flags=0)]
        lines += [io("read", p, t + 20 * US, 100 * US, path=path, fd=3, size=1 << 20, offset=0,
                     ret=1 << 20)]
        t += 200 * US
    lines.append(end(p, 300 + 2 + 4))
    write_trace(tmp_path / "tr" / "python3.11-node1-500.pfw.zst", lines)
    S = analyze([str(tmp_path / "tr")], Options(engine="local")).summary
    fc = S["file_classes"]
    assert list(fc) == ["data", "software", "system", "pipe-socket"]
    assert fc["software"] == dict(files=300, count=300, time_us=600.0, bytes_read=0, bytes_written=0,
                                  metadata_count=300, metadata_time_us=600.0)
    assert fc["data"] == dict(files=2, count=4, time_us=220.0, bytes_read=2 << 20, bytes_written=0,
                              metadata_count=2, metadata_time_us=20.0)
    assert (fc["system"]["files"], fc["system"]["bytes_read"]) == (1, 1200)
    assert (fc["pipe-socket"]["files"], fc["pipe-socket"]["bytes_written"]) == (1, 64)
    files = S["files"]
    assert [f["file"] for f in files[:2]] == ["/data/train/shard-0.npz", "/data/train/shard-1.npz"]
    assert {f["class"] for f in files[:2]} == {"data"}
    assert len(files) == 2 + 20  # the top 20 of the others follow the data files
    # 302 of the job's 306 calls are metadata, but on its data files 2 of 4 (the opens)
    m = S["metadata_calls"]
    assert (m["count"], m["count_share"]) == (302, round(302 / 306, 6))
    assert m["data_files"] == dict(count=2, time_us=20.0, count_share=0.5, time_share=round(20 / 220, 6))
    assert {f["class"] for f in files[2:]} <= {"software", "system", "pipe-socket"}


def test_import_dirs_are_the_folders_only():
    """A Python process stats its working and script folders on every import, and the folders
    above its prefix: those folders are software; the files in them stay data."""
    procs = [dict(exe="/root/.pyenv/versions/3.11.7/bin/python3.11", cwd="/work/job",
                  cmdline=["python3", "-u", "scripts/train.py", "--data", "/data"]),
             dict(exe="/usr/bin/python3", cwd="/home/u", cmdline=["python3", "-c", "print(1)"]),
             dict(exe="/usr/bin/tar", cwd="/srv", cmdline=["tar", "cf", "x.tar", "in"])]
    dirs = file_class.import_dirs(procs)
    assert dirs == {"/root/.pyenv/versions", "/root/.pyenv", "/root", "/work/job", "/work/job/scripts",
                    "/home/u", "/usr/lib", "/usr"}  # /usr/lib/python's
    assert file_class.classify("/work/job", (), dirs) == "software"
    assert file_class.classify("/work/job/data.bin", (), dirs) == "data"
    assert file_class.classify("/srv", (), dirs) == "data"  # tar is no interpreter


def test_logs_and_the_interpreters_own_files():
    """stdout/stderr redirected to a file (told by the writes through fd 1 or 2) and *.log,
    *.out, *.err are logs; a venv's pyvenv.cfg is software; a tty stays system."""
    assert classify("/work/run.txt", stdio=True) == "log"
    assert classify("/work/run.txt") == "data"
    assert [classify(p) for p in ("/work/train.log", "/scratch/job.123.out", "/scratch/job.err")] == ["log"] * 3
    assert classify("/home/u/venv/pyvenv.cfg") == "software"
    assert classify("/dev/pts/0", stdio=True) == "system"
    assert classify("pipe:[123]", stdio=True) == "pipe-socket"


def test_classify_many_is_classify():
    """The columnar classification gives every path of the table above the class classify() gives."""
    import pyarrow as pa

    paths = [p for p, _c in test_classify.pytestmark[0].args[1] if p is not None]
    got = file_class.classify_many(pa.array(paths, pa.string()), PREFIXES)
    assert [file_class.CLASSES[i] for i in got] == [classify(p, PREFIXES) for p in paths]
