"""The package's layers: the tracer (`iotrace`) stays light and depends on the format layer
(`iotrace_format`) at most; the analysis side (`iotrace_analyzer`, the analyzer and the
exporter) depends on the format layer; neither imports the other's internals."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("dask", "distributed", "pyarrow", "numba", "numpy", "pandas", "orjson", "iotrace_analyzer")
PACKAGES = {"iotrace": ROOT / "src" / "iotrace", "iotrace_format": ROOT / "src" / "iotrace_format",
            "iotrace_analyzer": ROOT / "analyzer" / "iotrace_analyzer"}
# who may import whom (besides itself and the standard library / third-party packages)
ALLOWED = {"iotrace": {"iotrace_format"}, "iotrace_format": set(),
           "iotrace_analyzer": {"iotrace_format"}}


def _imports(path: Path) -> set[str]:
    """Top-level package names a module imports (anywhere in it, function bodies included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_import_graph(package):
    """No module of a package imports a package it must not depend on."""
    ours = set(PACKAGES)
    bad = []
    for path in sorted(PACKAGES[package].rglob("*.py")):
        for name in _imports(path) & ours - {package} - ALLOWED[package]:
            bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True, env=_clean_env())
    return {m.split(".")[0] for m in out.stdout.split()}


def _clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}


def test_import_iotrace_loads_nothing_heavy():
    """`import iotrace` (and tracing with it) loads no Dask, pyarrow, numba or numpy."""
    loaded = _loaded_after("import iotrace\n@iotrace.trace\ndef f(): pass\nf()")
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_cat_loads_nothing_heavy(tmp_path):
    """`iotrace cat` of a compact trace needs the format layer only (-X importtime lists every
    module the command imported)."""
    trace = ROOT / "tests" / "golden" / "v4" / "compact-main.iotc.zst"
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "iotrace", "cat", str(trace)],
                         capture_output=True, text=True, env=_clean_env())
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = {ln.split("|")[-1].strip().split(".")[0] for ln in out.stderr.splitlines()
              if ln.startswith("import time:")}
    assert "iotrace_format" in loaded
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_analyzer_needs_no_compiler_run():
    """The analysis side compiles nothing at its first run (no numba)."""
    loaded = _loaded_after("import iotrace_analyzer.pipeline, iotrace_analyzer.analyses.summary, iotrace_analyzer.cli")
    assert "numba" not in loaded and "iotrace" not in loaded


def test_export_and_analyzer_of_traces_load_no_darshan(tmp_path):
    """Darshan logs are read only when one is given (inputs/darshan_log.py finds them; its
    reading, inputs/darshan.py and darshan_traces.py are imported then): `iotrace export` of
    traces loads no pydarshan, cffi, pyarrow, pandas or Dask, and `iotrace-analyze` of traces
    no pydarshan or cffi."""
    trace = ROOT / "tests" / "golden" / "v4"

    def loaded(args: list) -> set[str]:
        out = subprocess.run([sys.executable, "-X", "importtime", "-m", *args], capture_output=True, text=True,
                             env=_clean_env(), cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-2000:]
        return {ln.split("|")[-1].strip() for ln in out.stderr.splitlines() if ln.startswith("import time:")}

    export = loaded(["iotrace", "export", str(trace), "-o", str(tmp_path / "t.pftrace")])
    assert "iotrace_analyzer.export.merge" in export and "iotrace_analyzer.inputs.darshan_log" in export
    top = {m.split(".")[0] for m in export}
    assert not top & {"darshan", "cffi", "pyarrow", "dask", "distributed"}, top
    assert not [m for m in export if m.startswith("pandas.") or m.startswith("iotrace_analyzer.inputs.darshan_")
                and m != "iotrace_analyzer.inputs.darshan_log"]
    analyze = loaded(["iotrace_analyzer", str(trace), "-o", str(tmp_path / "a")])
    assert "pyarrow" in analyze
    top = {m.split(".")[0] for m in analyze}
    assert not top & {"darshan", "cffi"}, top
    assert "iotrace_analyzer.inputs.darshan" not in analyze and "iotrace_analyzer.inputs.darshan_traces" not in analyze
