"""iotrace export restores file names from FH lines (read by the writers, fh_line.h): the
tracer's lines, lines with escapes (read by the JSON parser), and a hash that only another
file of the job names (read again from the other files' FH lines, that task written again)."""

import gzip
import json

from conftest import end, fh, fhex, io, process, write_trace
from iotrace_analyzer.export.merge import export


def _events(path):
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def test_names_from_fh_lines_escapes_and_other_files(tmp_path):
    tr = tmp_path / "tr"
    plain, escaped, elsewhere = "/data/a.bin", '/data/b "quoted".bin', "/data/only-in-parent.bin"
    parent = [process(100), fh(plain, 100), fh(escaped, 100), fh(elsewhere, 100),
              io("read", 100, 1_001_000_000, 5_000, path=plain, fd=3, size=10, ret=10),
              io("read", 100, 1_002_000_000, 5_000, path=escaped, fd=4, size=10, ret=10)]
    parent.append(end(100, len(parent)))
    # the child uses a hash it never names (its FH line lost): the parent's name is restored
    child = [process(101, ppid=100, parent_pid=100, role="fork", mono_ns=1_010_000_000),
             io("read", 101, 1_011_000_000, 5_000, path=elsewhere, fd=5, size=10, ret=10)]
    child.append(end(101, len(child)))
    write_trace(str(tr / "python3-node1-100.pfw.zst"), parent)
    write_trace(str(tr / "python3-node1-101.pfw.zst"), child)
    out = str(tmp_path / "job.json.gz")
    export([str(tr)], out, jobs=2)
    reads = {(e["pid"], e["args"].get("fname"), e["args"].get("fhash")) for e in _events(out)
             if e.get("ph") == "X" and e.get("name") == "read"}
    assert reads == {(100, plain, None), (100, escaped, None), (101, elsewhere, None)}, reads


def test_a_hash_nobody_names_stays_a_hash(tmp_path):
    """(written as the fname: the hash itself)"""
    tr = tmp_path / "tr"
    lines = [process(200), io("read", 200, 1_001_000_000, 5_000, path="/nowhere", fd=3, size=1, ret=1)]
    lines.append(end(200, len(lines)))
    write_trace(str(tr / "python3-node1-200.pfw.zst"), lines)
    out = str(tmp_path / "job.json.gz")
    export([str(tr)], out, jobs=1)
    reads = [e["args"] for e in _events(out) if e.get("ph") == "X" and e.get("name") == "read"]
    assert reads == [{"fd": 3, "fname": fhex("/nowhere"), "ret": 1, "size": 1}]
