"""The analyzer's outputs are those pinned in tests/analyzer/expected/ (make_expected.py): on
every golden trace set and on the synthetic jobs, with the default thresholds and with every
rule made sensitive, summary.json (findings included), the text report, what the report page
draws and the Parquet tables (schema, rows, content) are the same, but for the analyzer's own
timings and the paths of the repository and of the temporary folder.

A change that alters an output on purpose (a bug fixed) rewrites the records with
`python3 tests/analyzer/make_expected.py` and says why in its commit."""

import json
import os

import make_expected
import pytest

NAMES = sorted(make_expected.workloads())
_records: dict = {}


def records(name: str) -> dict:
    if name not in _records:
        _records[name] = dict(make_expected.compute({name}))
    return _records[name]


def test_every_workload_has_its_records():
    files = set(os.listdir(make_expected.EXPECTED))
    want = {f"{n}.{rs}.json" for n in NAMES for rs in make_expected.rule_sets()}
    assert want <= files, f"missing: {sorted(want - files)} (python3 tests/analyzer/make_expected.py)"
    assert sum(os.path.getsize(os.path.join(make_expected.EXPECTED, f)) for f in files) < 2 << 20


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rules", ["default", "sensitive"])
def test_outputs_as_expected(name, rules):
    fname = f"{name}.{rules}.json"
    with open(os.path.join(make_expected.EXPECTED, fname)) as f:
        want = json.load(f)
    got = json.loads(json.dumps(records(name)[fname]))
    d = make_expected.diff(want, got)
    assert not d, f"{fname} differs:\n" + "\n".join(d)


@pytest.mark.parametrize("name", ["streams", "many-files-8p", "pipeline"])
def test_outputs_with_one_worker(name):
    """One worker: a single trace's Parquet written by the task itself (no thread of its
    own), several traces' tasks one after the other in this process. The same outputs, but
    for the workers and tasks that the input section counts."""
    for fname, got in make_expected.compute({name}, workers=1):
        with open(os.path.join(make_expected.EXPECTED, fname)) as f:
            want = json.load(f)
        got = json.loads(json.dumps(got))
        for rec in (want, got):
            for k in ("workers", "tasks"):
                rec["summary"]["input"].pop(k)
        d = make_expected.diff(want, got)
        assert not d, f"{fname} with one worker differs:\n" + "\n".join(d)
