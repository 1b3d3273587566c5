"""DFTracer input, damaged input, bad paths."""

import gzip
import os

import pytest
from conftest import end, fh, io, process, write_trace
from iotrace_analyzer.cli import main
from iotrace_analyzer.pipeline import Options, analyze

US = 1000

DFTRACER = """[
{"id":1,"name":"HH","cat":"dftracer","pid":300,"tid":300,"ph":"M","args":{"hhash":"aa11","name":"lassen7","value":"aa11"}}
{"id":2,"name":"FH","cat":"dftracer","pid":300,"tid":300,"ph":"M","args":{"hhash":"aa11","name":"/p/data/x.h5","value":"f00d"}}
{"id":3,"name":"open64","cat":"POSIX","pid":300,"tid":300,"ts":1700000000000100,"dur":20,"ph":"X","args":{"hhash":"aa11","fhash":"f00d","ret":5,"flags":0}}
{"id":4,"name":"read","cat":"POSIX","pid":300,"tid":300,"ts":1700000000000200,"dur":50,"ph":"X","args":{"hhash":"aa11","fhash":"f00d","fd":5,"count":1024,"ret":1024,"level":1}}
{"id":5,"name":"read","cat":"POSIX","pid":300,"tid":301,"ts":1700000000000230,"dur":40,"ph":"X","args":{"hhash":"aa11","fhash":"f00d","fd":5,"count":2048,"ret":2048}}
{"id":6,"name":"TorchDataset.__getitem__","cat":"dataloader","pid":300,"tid":300,"ts":1700000000000150,"dur":200,"ph":"X","args":{"hhash":"aa11"}}
{"id":7,"name":"close","cat":"POSIX","pid":300,"tid":300,"ts":1700000000000400,"dur":10,"ph":"X","args":{"hhash":"aa11","fhash":"f00d","fd":5,"ret":0}}
]
"""


@pytest.mark.parametrize("gz", [False, True])
def test_dftracer_input(tmp_path, gz):
    p = tmp_path / ("app-300.pfw.gz" if gz else "app-300.pfw")
    data = DFTRACER.encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    S = analyze([str(p)], Options(engine="local")).summary
    j = S["job"]
    assert (j["processes"], j["threads"], j["hosts"], j["files"], j["events"]) == (1, 2, 1, 1, 5)
    assert j["host_names"] == ["lassen7"]
    c = {r["name"]: r for r in S["calls"]}
    assert (c["read"]["count"], c["read"]["bytes"], c["read"]["time_us"]) == (2, 3072, 90)
    assert (c["read"]["size_min"], c["read"]["size_max"]) == (1024, 2048)  # DFTracer's count
    # I/O: [100,120) [200,250) [230,270) [400,410) -> 20 + 70 + 10 = 100 µs
    assert S["time"]["io_us"] == 100
    assert S["files"][0]["file"] == "/p/data/x.h5"
    assert S["categories"][0]["cat"] == "dataloader"
    assert S["damage"]["damaged_files"] == 0


def lines(n=30, pid=7):
    out = [process(pid), fh("/d/f", pid)]
    out += [io("read", pid, (1000 + 10 * i) * US, 2 * US, path="/d/f", fd=3, size=8, offset=8 * i, ret=8)
            for i in range(n)]
    return out + [end(pid, n + 2)]


def test_truncated_zstd_is_read_around(tmp_path, capsys):
    p = write_trace(tmp_path / "a-h-7.pfw.zst", lines(), lines_per_frame=4)
    write_trace(tmp_path / "b-h-8.pfw.zst", lines(pid=8))
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 3)
    assert main([str(tmp_path), "-o", str(tmp_path / "out"), "-q"]) == 0
    err = capsys.readouterr().err
    assert "truncated-frame" in err and "damaged input in 1 file" in err
    import json
    S = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert S["damage"]["by_kind"] == {"truncated-frame": 1}
    # 34 text lines ("[", process, FH, 30 reads, end) in frames of 4: the cut last frame held
    # read 29 and iotrace_end. Reads 0..28 of pid 7 survive, all 30 of pid 8.
    assert S["calls"][0]["count"] == 29 + 30


def test_corrupt_frame_and_bad_line(tmp_path):
    ls = lines(20)
    ls.insert(5, '{"ph":"X","name":"read",garbage')
    p = write_trace(tmp_path / "a-h-7.pfw.zst", ls, lines_per_frame=4)
    raw = bytearray(open(p, "rb").read())
    # find the third frame's magic and break its block content
    starts = [i for i in range(len(raw)) if raw[i:i + 4] == b"\x28\xb5\x2f\xfd"]
    raw[starts[2] + 10: starts[2] + 16] = b"\xff" * 6
    open(p, "wb").write(bytes(raw))
    S = analyze([p], Options(engine="local")).summary
    d = S["damage"]
    assert d["bad_lines"] == 1 and "garbage" in d["bad_line_examples"][0]
    assert d["damaged_files"] == 1
    assert d["by_kind"].pop("lost-events") == 1  # iotrace_end counts 22 events, 19 lines were read
    assert sum(d["by_kind"].values()) == 1  # the broken frame
    assert S["calls"][0]["count"] == 20 - 4  # one frame of four reads lost


def test_missing_metadata_is_counted(tmp_path):
    ls = lines(5)[2:]  # no iotrace_process, no FH
    write_trace(tmp_path / "a-h-7.pfw.zst", ls)
    S = analyze([str(tmp_path)], Options(engine="local")).summary
    assert S["damage"]["missing_metadata"] == [str(tmp_path / "a-h-7.pfw.zst")]
    assert S["damage"]["unresolved_file_hashes"] == 1
    assert S["calls"][0]["count"] == 5
    assert S["files"][0]["file"].startswith("<unknown ")


def test_crashed_file_without_end(tmp_path):
    write_trace(tmp_path / "a-h-7.pfw.zst", lines(5)[:-1], closed=False)
    S = analyze([str(tmp_path)], Options(engine="local")).summary
    assert S["calls"][0]["count"] == 5 and S["damage"]["damaged_files"] == 0


def test_empty_and_missing_paths_fail(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2
    assert "no trace files" in capsys.readouterr().err


def test_empty_file_is_reported(tmp_path):
    (tmp_path / "e-h-1.pfw.zst").write_bytes(b"")
    write_trace(tmp_path / "a-h-7.pfw.zst", lines(3))
    S = analyze([str(tmp_path)], Options(engine="local")).summary
    assert S["damage"]["by_kind"] == {"empty-file": 1}
    assert S["calls"][0]["count"] == 3


def test_dftracer_bulk_uses_json_reader(tmp_path):
    # > 1000 general-path lines go through pyarrow's JSON reader (not line by line)
    n = 1500
    lines = ['[', '{"id":1,"name":"FH","cat":"dftracer","pid":9,"tid":9,"ph":"M",'
             '"args":{"name":"/p/big.bin","value":"b1g"}}']
    for i in range(n):
        lines.append(f'{{"id":{i + 2},"name":"pread","cat":"POSIX","pid":9,"tid":9,'
                     f'"ts":{1000 + 10 * i},"dur":4,"ph":"X","args":{{"fhash":"b1g","fd":3,'
                     f'"count":512,"offset":{512 * i},"ret":512}}}}')
    p = tmp_path / "big.pfw.gz"
    p.write_bytes(gzip.compress(("\n".join(lines) + "\n]\n").encode()))
    S = analyze([str(p)], Options(engine="local")).summary
    c = S["calls"][0]
    assert (c["name"], c["count"], c["bytes"], c["time_us"], c["size_median"]) == ("pread", n, 512 * n, 4 * n, 512.0)
    assert S["time"]["io_us"] == 4 * n
    assert S["access"]["read"]["consecutive"] == n - 1
    assert S["files"][0]["file"] == "/p/big.bin"
