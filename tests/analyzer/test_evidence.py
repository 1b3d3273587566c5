"""One evidence structure per finding (insights.Evidence) that every output renders:
summary.json writes it key for key, the text report and the page print its rows and notes."""

import json
import os

import make_expected
import pytest
from iotrace_analyzer.analyses import insights
from iotrace_analyzer.outputs import report


def pinned_findings() -> list:
    out = []
    for name in sorted(os.listdir(make_expected.EXPECTED)):
        with open(os.path.join(make_expected.EXPECTED, name)) as f:
            out += [(name, f) for f in json.load(f)["summary"].get("findings") or []]
    return out


def test_every_pinned_finding_is_its_structure():
    """summary.json's evidence is the structure's JSON, in the same order, for every finding
    pinned (every rule, default and sensitive thresholds)."""
    found = pinned_findings()
    assert {f["id"] for _n, f in found} == set(insights.RULES)
    for name, f in found:
        ev = insights.Evidence.of_finding(f)
        assert json.dumps(ev.to_json()) == json.dumps(f["evidence"]), (name, f["id"])
        assert insights.Evidence.of(ev) is ev


def test_rows_notes_and_units():
    ev = insights.Evidence.of(dict(
        calls=[dict(name="fsync", count=3, time_us=1500.0)],
        files=[dict(file="/d/a", processes=1, time_us=2.0, bytes_read=2048, read_extent=1024, note=None),
               dict(file="/d/b", processes=2, time_us=1.0, bytes_read=0, read_extent=0, note="x")],
        file_per_sample=dict(files=200, opens=200, time_us=3e6),
        use=dict(files=0, opens=0), create=dict(files=3, opens=3), workers=None,
        share_of_wall=0.25, wait_categories=["fetch"]))
    # files before calls whatever the order; a list of names is a figure, not rows
    assert ev.rows.key == "files" and [r.file for r in ev.rows.items] == ["/d/a", "/d/b"]
    assert [(n.label, n.share_of_wall) for n in ev.notes] == [
        ("file per sample", None), ("creating the data", None), ("cost", 0.25)]
    a = ev.rows.items[0]
    assert [(g.label, g.unit) for g in a.figures] == [
        ("file", ""), ("processes", ""), ("time", "us"), ("bytes_read", "bytes"), ("read_extent", "bytes"),
        ("note", "")]
    assert [g.key for g in ev.figures] == ["workers", "share_of_wall", "wait_categories"]
    assert report.brief(a) == "/d/a (processes 1, time 2.000 us, bytes_read 2.0 KiB, read_extent 1.0 KiB)"
    assert report.evidence(dict(evidence=ev.to_json()))[2] == [
        "file per sample: files 200, opens 200, time 3.000 s", "creating the data: files 3, opens 3",
        "costs 25.0% of the processes' wall time"]


@pytest.mark.parametrize("row, name", [(dict(pid=7, host="h", count=1), "pid 7"),
                                       (dict(name="fsync", count=1), "fsync"),
                                       (dict(file=None, start_ns=5, duration_us=1.0), "")])
def test_a_row_is_about_a_file_a_process_or_a_name(row, name):
    item = insights.Item.of(row)
    assert item.name == name
    assert item.process == ((row["host"], row["pid"]) if "pid" in row else None)


def test_software_loading_shows_its_files():
    """software-loading's files are its `top` list (its `files` is their count): the text
    report and the page print them as rows, as every other rule's files."""
    (f,) = [f for name, f in pinned_findings() if f["id"] == "software-loading"]
    assert isinstance(f["evidence"]["files"], int) and f["evidence"]["top"]
    key, rows, _notes = report.evidence(f)
    assert key == "top" and len(rows) == len(f["evidence"]["top"])
    assert rows[0].startswith(f["evidence"]["top"][0]["file"] + " (processes ")
    assert f"    top: {rows[0]}; " in report.findings_text(dict(findings=[f]))
