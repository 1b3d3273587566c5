"""Helpers for the Python-layer tests (test_python_*.py), on top of tests/tracing.py.

    ts = run_py(CODE, tmp_path)                    # IOTRACE_ENABLE=1: Python events only
    ts = run_py(CODE, tmp_path, mode="preload")    # LD_PRELOAD: Python + POSIX, one file
    ts = run_py(CODE, tmp_path, mode="off")        # no tracer at all
    evs = py_events(ts, name="f")                  # X/i/C events of the Python layer
    assert_inside(child, parent)                   # interval containment, in integer ns

The program is always a subprocess (`sys.executable`): the core is per process and its file is
finished at exit.  CODE is dedented and written to a script file (so multiprocessing spawn can
re-import it as __mp_main__); the script's stdout is returned in `ts.stdout`, and `ts.out` is
the JSON object the script printed on its last stdout line (when there is one).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import tracing

PY = sys.executable
POSIX_CATS = ("posix", "stdio", "process")


def ns(x: float) -> int:
    """A trace time (µs with three decimals) as integer nanoseconds, exactly."""
    return int(round(x * 1000))


def span(e: dict) -> tuple[int, int]:
    """[start, end] of an X event in integer ns."""
    s = ns(e["ts"])
    return s, s + ns(e["dur"])


def assert_inside(child: dict, parent: dict) -> None:
    cs, ce = span(child)
    ps, pe = span(parent)
    assert ps <= cs and ce <= pe, (
        f"{child['name']} [{cs}, {ce}] not inside {parent['name']} [{ps}, {pe}]")


def clean_env(extra: dict | None = None) -> dict:
    """os.environ without IOTRACE_* and LD_PRELOAD, plus `extra`."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
    e.update({k: os.fspath(v) for k, v in (extra or {}).items()})
    return e


def write_script(tmp_path, code: str, name: str = "prog.py") -> Path:
    p = Path(tmp_path) / name
    n = 1
    while p.exists():
        p = Path(tmp_path) / f"{Path(name).stem}{n}.py"
        n += 1
    p.write_text(textwrap.dedent(code))
    return p


def run_py(code: str, tmp_path, mode: str = "enable", env: dict | None = None, *,
           args=(), check: bool = True, timeout: float = 60, include=None,
           script_name: str = "prog.py") -> tracing.TraceSet:
    """Run CODE (a Python script) under the tracer and load its traces.

    mode "enable": IOTRACE_ENABLE=1 (the Python layer alone); "preload": LD_PRELOAD as well
    (via tracing.run_traced: Python and POSIX events in one file); "off": neither (IOTRACE_DIR
    is still set, so a test can check that nothing is written there).
    """
    script = write_script(tmp_path, code, script_name)
    out = tracing.fresh_dir(tmp_path)
    cmd = [PY, str(script), *map(str, args)]
    if mode == "preload":
        ts = tracing.run_traced(cmd, tmp_path, env, include=include, trace_dir=out, check=check,
                                timeout=timeout, cwd=str(tmp_path))
    else:
        extra = {"IOTRACE_DIR": str(out)}
        if mode == "enable":
            extra["IOTRACE_ENABLE"] = "1"
        elif mode != "off":
            raise ValueError(mode)
        extra.update(env or {})
        p = subprocess.run(cmd, env=clean_env(extra), capture_output=True, text=True,
                           timeout=timeout, cwd=str(tmp_path))
        if check and p.returncode != 0:
            raise AssertionError(f"{script.name} exited with {p.returncode}\n"
                                 f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-3000:]}")
        ts = tracing.TraceSet.load(out, returncode=p.returncode, stdout=p.stdout,
                                   stderr=p.stderr)
    ts.out = last_json(ts.stdout)
    if isinstance(ts.out, dict) and "pid" in ts.out:
        ts.pid = ts.out["pid"]
    elif mode != "preload":
        ts.pid = None
    return ts


def last_json(stdout: str):
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") or line.startswith("["):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def py_events(ts: tracing.TraceSet, pid: int | None = None, name=None, cat: str | None = None,
              ph: str | None = None) -> list[dict]:
    """X/i/C events that are not POSIX/stdio/process events, filtered."""
    out = []
    for e in ts.events(pid=pid, name=name, cat=cat):
        if e.get("cat") in POSIX_CATS:
            continue
        if ph is not None and e["ph"] != ph:
            continue
        out.append(e)
    return out


def metadata(ts: tracing.TraceSet, name: str, pid: int | None = None) -> list[dict]:
    """M records of one name (thread_name, FH, ...) over the files of `pid` (default: all)."""
    return [r for f in ts.files if pid is None or f.pid == pid
            for r in f.records if r.get("ph") == "M" and r.get("name") == name]


def thread_names(ts: tracing.TraceSet, pid: int) -> dict[int, list[str]]:
    """tid -> every thread_name given to it in `pid`'s files, in file order."""
    out: dict[int, list[str]] = {}
    for r in metadata(ts, "thread_name", pid):
        out.setdefault(r["tid"], []).append(r["args"]["name"])
    return out
