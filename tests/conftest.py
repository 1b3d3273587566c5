"""Shared fixtures for the tracer tests; the helpers themselves live in tests/tracing.py.

    def test_x(tmp_path, trace):
        ts = trace(["cat", "f"], include=[tmp_path])   # tracing.run_traced bound to tmp_path
    def test_y(tmp_path, cprog):
        exe = cprog("posix_calls.c")                   # tracing.compile_c bound to tmp_path
        exe = cprog("capi_linked.c", link_iotrace=True)  # linked with -liotrace, not preloaded
"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracing  # noqa: E402


def pytest_configure(config):
    """A suite started in the background (`cmd &`, nohup) inherits SIGINT, SIGQUIT and SIGHUP
    ignored, and so would every program it runs: the tests of default signal actions compare
    traced and untraced runs of programs that must start with the defaults."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGQUIT, signal.SIGHUP):  # nohup ignores SIGHUP
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)


@pytest.fixture
def trace(tmp_path):
    """run_traced(cmd, tmp_path, ...) with tmp_path already given."""

    def run(cmd, env=None, **kw):
        return tracing.run_traced(cmd, tmp_path, env, **kw)

    return run


def iotrace_link_flags() -> tuple[str, ...]:
    """cc flags that link a program with the installed libiotrace.so as docs/c-api.md says:
    its header, -liotrace, an rpath to its folder. compile_c puts flags before the source, so
    --no-as-needed keeps the library (with --as-needed, a -l before the objects that use it
    is dropped)."""
    lib = os.path.dirname(tracing.PRELOAD)
    return ("-I", os.path.join(lib, "include"), "-L", lib, f"-Wl,-rpath,{lib}",
            "-Wl,--no-as-needed", "-liotrace")


@pytest.fixture
def cprog(tmp_path_factory):
    """compile_c(dir, source, ...) building into one session folder (builds are cached);
    link_iotrace=True links the program with libiotrace.so (iotrace_link_flags)."""
    build = tmp_path_factory.getbasetemp() / "cbuild"
    build.mkdir(exist_ok=True)

    def build_it(source, name="prog", flags=(), link_iotrace=False):
        if link_iotrace:
            flags = (*flags, *iotrace_link_flags())
        return tracing.compile_c(build, source, name=name, flags=flags)

    return build_it


@pytest.fixture
def data_dir(tmp_path):
    """A folder for a test's data files, apart from the trace folder (tmp_path/trace)."""
    d = tmp_path / "data"
    d.mkdir()
    return d
