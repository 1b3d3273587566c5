"""iotrace beside Drishti (drishti-io) on every real Darshan log the darshan wheel ships: each
issue Drishti raises at its high or warn level, iotrace raises too, by the rule that checks the
same thing and naming the same files, when run with Drishti's thresholds (`--rules drishti`);
or the issue is one iotrace declines, for a reason checked here on the log (Drishti's redundant
traffic checks test the reverse of what they say). Drishti dies on some logs: that is recorded,
and iotrace must analyze them all the same.

`python3 tests/analyzer/test_darshan_drishti.py` prints the side-by-side table of docs/darshan.md.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

darshan = pytest.importorskip("darshan")

HERE = os.path.dirname(darshan.__file__)
LOGS = sorted({os.path.realpath(p) for p in glob.glob(os.path.join(HERE, "**", "*.darshan"), recursive=True)})
HIGH, WARN, INFO, OK = "high", "warn", "info", "ok"
# Drishti's issues by code and level (drishti-io 0.8, includes/module.py: message(code, ..., level))
LEVEL = {"S01": HIGH, "M01": WARN, "P01": INFO, "P02": INFO, "P03": INFO, "P04": INFO, "P05": HIGH, "P06": HIGH,
         "P07": HIGH, "P08": HIGH, "P09": WARN, "P10": WARN, "P11": HIGH, "P12": OK, "P13": HIGH, "P14": OK,
         "P15": HIGH, "P16": HIGH, "P17": HIGH, "P18": HIGH, "P19": HIGH, "P21": HIGH, "P22": HIGH, "M02": HIGH,
         "M03": HIGH, "M04": OK, "M05": OK, "M06": WARN, "M07": WARN, "M08": OK, "M09": HIGH, "M10": OK}
# the iotrace rule that checks what each of Drishti's issues checks
RULE = {"S01": "stdio-heavy", "M01": "mpiio-unused", "P05": "small-reads", "P06": "small-writes",
        "P07": "misaligned", "P08": "misaligned", "P11": "random-reads", "P13": "random-writes",
        "P15": "small-reads", "P16": "small-writes", "P17": "metadata-heavy", "P18": "file-imbalance",
        "P19": "file-imbalance", "P21": "file-imbalance", "P22": "file-imbalance", "M02": "mpi-independent-small",
        "M03": "mpi-independent-small", "M06": "mpi-blocking", "M07": "mpi-blocking"}


def _posix(r, counter: str):
    return r.records["POSIX"].to_df()["counters"][counter] if "POSIX" in r.records else None


def _reversed_traffic(direction: str):
    """Drishti's P09/P10 fire when the highest offset read (written) in any file is above the
    bytes read (written) in all: a file read or written with holes, not twice; iotrace's
    redundant-reads weighs each file's bytes against its extent. Declined when the log shows
    exactly that condition and no file was read more than its extent."""
    def check(S, r) -> bool:
        moved, top = (("POSIX_BYTES_READ", "POSIX_MAX_BYTE_READ") if direction == "read"
                      else ("POSIX_BYTES_WRITTEN", "POSIX_MAX_BYTE_WRITTEN"))
        b, m = _posix(r, moved), _posix(r, top)
        fired = m.max() > b.sum()
        twice = any(f["id"] == "redundant-reads" for f in S["findings"]) if direction == "read" else False
        return bool(fired) and not twice
    return check


def _no_calls(direction: str):
    """Drishti's M06/M07 fire when a job has no non-blocking MPI-IO reads (writes), also when
    it has no MPI-IO reads (writes) at all: nothing to make non-blocking."""
    def check(S, r) -> bool:
        d = (S.get("mpi") or {}).get("directions", {}).get(direction, {})
        return d.get("calls", 0) == 0
    return check


def _needs_sacct(S, r) -> bool:
    """M09 needs the job's node count from Slurm's accounting (sacct), which a log does not hold."""
    return shutil.which("sacct") is None


# issues iotrace declines: (why, the check that the reason holds on this log; else the issue is
# one iotrace's rule must raise)
DECLINED = {"P09": ("tests the reverse of its message (holes, not bytes read twice)", _reversed_traffic("read")),
            "P10": ("tests the reverse of its message (holes, not bytes written twice)", _reversed_traffic("write")),
            "M06": ("no MPI-IO reads to make non-blocking", _no_calls("read")),
            "M07": ("no MPI-IO writes to make non-blocking", _no_calls("write")),
            "M09": ("needs the node count from sacct", _needs_sacct)}


def drishti(log: str, cwd: str) -> tuple[list, str | None]:
    """Drishti's issues on a log: [(code, text, [files])], and None, or how it died."""
    exe = shutil.which("drishti")
    if exe is None:
        pytest.skip("drishti-io is not installed")
    p = subprocess.run([exe, "--issues", "--code", "--path", "--size", "2000", log], capture_output=True,
                       text=True, timeout=600, cwd=cwd, env=dict(os.environ, COLUMNS="2000"))
    if p.returncode != 0:
        last = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        return [], last[-1].strip() if last else f"exit {p.returncode}"
    issues = []
    for line in p.stdout.splitlines():
        m = re.search(r"▶ \[([A-Z]\d\d)\] (.*?)\s*│?$", line)
        if m:
            issues.append((m.group(1), m.group(2).strip(), []))
        elif "↪" in line and issues:
            issues[-1][2].extend(re.findall(r'"([^"]+)"', line))
    return issues, None


def iotrace(log: str, out: str, *args: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "iotrace_analyzer", log, "--summary", out, "-q", *args],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    with open(out) as f:
        return json.load(f)


def evidence_files(f: dict) -> set:
    ev = f["evidence"]
    return {r["file"] for k in ("files", "top") for r in ev.get(k, []) if isinstance(r, dict) and r.get("file")}


def compare(log: str, tmp: str) -> dict:
    """Drishti's high and warn issues on a log and what iotrace (Drishti's thresholds) says of
    each: raised (rule, files), declined (why) or missed."""
    issues, died = drishti(log, tmp)
    S = iotrace(log, os.path.join(tmp, "s.json"), "--rules", "drishti")
    darshan.enable_experimental()
    r = darshan.DarshanReport(log, read_all=True)
    found = {f["id"]: f for f in S["findings"]}
    rows = []
    for code, text, files in issues:
        if LEVEL.get(code) not in (HIGH, WARN):
            continue
        if code in DECLINED and DECLINED[code][1](S, r):
            rows.append(dict(code=code, text=text, files=files, declined=DECLINED[code][0]))
            continue
        rule = RULE.get(code)
        f = found.get(rule)
        rows.append(dict(code=code, text=text, files=files, rule=rule, raised=f is not None,
                         missing=sorted(set(files) - (evidence_files(f) if f else set()))))
    return dict(issues=rows, died=died, iotrace=sorted(found), all_codes=[c for c, _t, _f in issues])


@pytest.mark.parametrize("log", LOGS, ids=os.path.basename)
def test_iotrace_raises_what_drishti_raises(log, tmp_path):
    c = compare(log, str(tmp_path))
    if c["died"]:
        # Drishti cannot read this log (dxt.darshan: an IndexError on its empty exe); iotrace does
        assert os.path.basename(log) in DRISHTI_DIES, c["died"]
        assert c["iotrace"] is not None
        return
    assert c["issues"] or c["all_codes"], "Drishti raised nothing at all: the parse is wrong"
    for row in c["issues"]:
        if "declined" not in row:
            assert row["rule"] and row["raised"], row
            assert not row["missing"], row


DRISHTI_DIES = {"dxt.darshan"}  # drishti-io 0.8: IndexError on the job's empty exe


def table() -> str:
    """The side-by-side table of docs/darshan.md, from the logs as they are."""
    import tempfile

    lines = ["| log | Drishti: high and warn | iotrace, Drishti's thresholds | iotrace, its own thresholds |",
             "|-----|------------------------|-------------------------------|------------------------------|"]
    for log in LOGS:
        with tempfile.TemporaryDirectory() as tmp:
            c = compare(log, tmp)
            S = iotrace(log, os.path.join(tmp, "d.json"))
        if c["died"]:
            dr = f"dies: `{c['died'][:60]}`"
        else:
            dr = ", ".join(f"{r['code']}" + (" (declined)" if "declined" in r else f"→{r['rule']}")
                           for r in c["issues"]) or "none"
        own = ", ".join(f"{f['id']} ({f['severity']})" for f in S["findings"]) or "none"
        lines.append(f"| {os.path.basename(log)[:40]} | {dr} | {', '.join(c['iotrace']) or 'none'} | {own} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
