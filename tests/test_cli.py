"""The `iotrace` command itself: `run` passes the program's exit status, output and signals
through untouched and applies its options; `preload-path` names the library; `--version`;
subcommands of other packages plug in through the `iotrace.commands` entry points."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from importlib.metadata import version

import pytest

import iotrace
from tracing import TraceSet, decompress, run_traced

IOTRACE = [sys.executable, "-m", "iotrace"]


def iotrace_run(tmp_path, *args, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
    return subprocess.run([*IOTRACE, "run", *args], env=env, capture_output=True, text=True,
                          timeout=60, **kw)


def test_preload_path_is_the_packaged_library():
    out = subprocess.run([*IOTRACE, "preload-path"], capture_output=True, text=True, check=True)
    path = out.stdout.strip()
    assert path == iotrace.preload_path() and os.path.isfile(path)
    assert path.endswith("/iotrace/libiotrace.so")


def test_run_passes_exit_status_and_output(tmp_path):
    p = iotrace_run(tmp_path, "-o", str(tmp_path / "t"), "--",
                    "sh", "-c", "echo out; echo err >&2; printf '%s' \"$1\"; exit 3", "sh", "a b")
    assert (p.returncode, p.stdout, p.stderr) == (3, "out\na b", "err\n")
    ts = TraceSet.load(tmp_path / "t")
    assert len(ts.files) == 1 and ts.files[0].closed
    assert ts.files[0].header["cmdline"] == ["sh", "-c", "echo out; echo err >&2; printf '%s' \"$1\"; exit 3",
                                             "sh", "a b"]


def test_run_passes_the_signal_that_killed_the_program(tmp_path):
    p = iotrace_run(tmp_path, "-o", str(tmp_path / "t"), "--", "sh", "-c", "kill -TERM $$")
    assert p.returncode == -signal.SIGTERM
    (f,) = TraceSet.load(tmp_path / "t").files
    assert f.closed and f.end["reason"] == "killed"  # finished by the reader: its parent is untraced


def test_run_reports_a_missing_program(tmp_path):
    p = iotrace_run(tmp_path, "-o", str(tmp_path / "t"), "--", "no-such-program-here")
    assert p.returncode == 127 and "cannot run no-such-program-here" in p.stderr


def test_run_needs_a_command(tmp_path):
    p = iotrace_run(tmp_path, "-o", str(tmp_path / "t"))
    assert p.returncode == 2 and "no command given" in p.stderr


def test_run_options_include_exclude_compression(tmp_path):
    data = tmp_path / "data"
    (data / "keep").mkdir(parents=True)
    (data / "skip").mkdir()
    (data / "keep" / "a.txt").write_text("a" * 100)
    (data / "skip" / "b.txt").write_text("b" * 50)
    out = tmp_path / "t"
    p = iotrace_run(tmp_path, "-o", str(out), "--include", str(data), "--exclude", str(data / "skip"),
                    "--compression", "gzip", "--", "cat", str(data / "keep" / "a.txt"), str(data / "skip" / "b.txt"))
    assert p.returncode == 0 and p.stdout == "a" * 100 + "b" * 50
    names = os.listdir(out)
    assert len(names) == 1 and names[0].startswith("cat-") and names[0].endswith(".pfw.gz")
    ts = TraceSet.load(out)
    files = {e.get("fname") for e in ts.events() if e.get("fname")}
    assert files == {str(data / "keep" / "a.txt")}
    assert ts.count("open", fname=str(data / "keep" / "a.txt")) + \
        ts.count("openat", fname=str(data / "keep" / "a.txt")) == 1


def cat_traced(tmp_path, *options):
    """`iotrace run -o tmp/t --include tmp OPTIONS -- cat tmp/a.txt` (100 bytes): (trace folder,
    file read); the program's output came through."""
    data = tmp_path / "a.txt"
    data.write_text("a" * 100)
    out = tmp_path / "t"
    p = iotrace_run(tmp_path, "-o", str(out), "--include", str(tmp_path), *options,
                    "--", "cat", str(data))
    assert p.returncode == 0 and p.stdout == "a" * 100
    return out, data


def test_run_resolution_option(tmp_path):
    out, _ = cat_traced(tmp_path, "--resolution", "100ns")
    (f,) = TraceSet.load(out).files
    assert f.header["resolution_ns"] == 100
    xs = [line for line in f.lines if '"ph":"X"' in line]
    assert xs and all(re.search(r'"ts":\d+\.\d,"dur":\d+\.\d,', line) for line in xs)
    bad = iotrace_run(tmp_path, "--resolution", "3ns", "--", "true")
    assert bad.returncode == 2 and "invalid choice: '3ns'" in bad.stderr


def test_run_format_option_and_cat(tmp_path):
    """By default (zstd) `iotrace run` writes the compact form, .iotc.zst, and `iotrace cat`
    prints it as the JSON lines of the same calls (cat(1) reading a 100-byte file: open, fstat,
    read 100, read 0, close); --format json, or gzip, writes those lines themselves."""
    out, data = cat_traced(tmp_path)
    (name,) = os.listdir(out)
    assert name.endswith(".iotc.zst")
    (f,) = TraceSet.load(out).files
    assert f.header["form"] == "compact" and f.closed
    reads = [(e["args"]["size"], e["args"]["offset"], e["args"]["ret"])
             for e in TraceSet.load(out).events(name="read", fname=data)]
    assert reads[0] == (reads[0][0], 0, 100) and reads[-1][1:] == (100, 0)
    text = subprocess.run([*IOTRACE, "cat", str(out / name)], capture_output=True, timeout=60)
    assert text.returncode == 0 and text.stderr == b""
    assert text.stdout.decode() == f.text  # the reader's frame walk gives what tests/tracing.py renders
    # (--format compact with gzip is a usage error: tests/test_cli_errors.py)
    for options, suffix in ((["--format", "json"], ".pfw.zst"), (["--compression", "gzip"], ".pfw.gz"),
                            (["--format", "compact", "--compression", "zstd"], ".iotc.zst")):
        sub = tmp_path / suffix.strip(".") / options[-1]
        sub.mkdir(parents=True)
        out, data = cat_traced(sub, *options)
        (name,) = os.listdir(out)
        assert name.endswith(suffix), options
        (g,) = TraceSet.load(out).files
        assert g.header["form"] == ("compact" if suffix == ".iotc.zst" else "json")
        if suffix != ".iotc.zst":  # the file decompresses to the lines; cat prints them too
            assert decompress(out / name).decode() == g.text
            again = subprocess.run([*IOTRACE, "cat", str(out / name)], capture_output=True, timeout=60)
            assert again.stdout.decode() == g.text
        assert [e["args"]["ret"] for e in TraceSet.load(out).events(name="read", fname=data)] == \
            [r[2] for r in reads]
    bad = iotrace_run(tmp_path, "--format", "binary", "--", "true")
    assert bad.returncode == 2 and "invalid choice: 'binary'" in bad.stderr


def test_run_records_what_direct_preload_records(tmp_path):
    # `iotrace run` is LD_PRELOAD plus variables: a real program (gzip) gives the same events.
    if not shutil.which("gzip"):
        pytest.skip("gzip is not installed")
    src = tmp_path / "in"
    src.mkdir()
    (src / "f.bin").write_bytes(os.urandom(300_000))
    p = iotrace_run(tmp_path, "-o", str(tmp_path / "a"), "--include", str(src), "--",
                    "gzip", "-k", "-f", str(src / "f.bin"))
    assert p.returncode == 0
    cli = TraceSet.load(tmp_path / "a")
    gz_size = os.path.getsize(src / "f.bin.gz")
    os.unlink(src / "f.bin.gz")  # the same starting point for the second run
    direct = run_traced(["gzip", "-k", "-f", str(src / "f.bin")], tmp_path, include=[str(src)])
    assert cli.counts() == direct.counts()
    # every byte accounted for: all of the input read, all of the output written
    assert sum(e["args"]["ret"] for e in cli.events(name="read", fname=str(src / "f.bin"))) == 300_000
    assert sum(e["args"]["ret"] for e in cli.events(name="write", fname=str(src / "f.bin.gz"))) == gz_size


def test_cat_to_a_folder_writes_gzip_json_per_trace(tmp_path):
    """`iotrace cat -o DIR` turns each trace of a job (here a parent and its fork child, in the
    default compact form) into DIR/<name>-<host>-<pid>.pfw.gz: the same lines, in the gzip
    JSON form Perfetto opens as it is."""
    import gzip

    d = tmp_path / "d"
    d.mkdir()
    code = (f"import os\nopen({str(d / 'p')!r}, 'w').write('p' * 7)\npid = os.fork()\n"
            f"if pid == 0:\n    open({str(d / 'c')!r}, 'w').write('c' * 5)\n    os._exit(0)\n"
            "os.waitpid(pid, 0)\n")
    ts = run_traced([sys.executable, "-c", code], tmp_path, include=[d])
    assert len(ts.files) == 2 and all(f.name.endswith(".iotc.zst") for f in ts.files)
    out = tmp_path / "json"
    p = subprocess.run([*IOTRACE, "cat", "-o", str(out), os.path.dirname(ts.files[0].path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""
    assert sorted(os.listdir(out)) == sorted(f.name[:-len(".iotc.zst")] + ".pfw.gz" for f in ts.files)
    for f in ts.files:
        gz = out / (f.name[:-len(".iotc.zst")] + ".pfw.gz")
        assert gzip.decompress(gz.read_bytes()).decode() == f.text
    again = TraceSet.load(out)
    assert again.counts(fname=str(d / "c")) == ts.counts(fname=str(d / "c"))
    assert [e["args"]["ret"] for e in again.events(name="write")] == \
        [e["args"]["ret"] for e in ts.events(name="write")]


# -- versions and plugged-in subcommands (the `iotrace.commands` entry points) ----------


def _py(args, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
    env.update(kw.pop("env", {}))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, **kw)


def test_versions_agree():
    """One version, written once (src/iotrace/_version.py): the package, its metadata and both
    commands say the same."""
    assert iotrace.__version__ == version("iotrace")
    out = _py(["-m", "iotrace", "--version"])
    assert out.returncode == 0 and out.stdout.strip() == f"iotrace {iotrace.__version__}"
    out = _py(["-m", "iotrace_analyzer", "--version"])
    assert out.returncode == 0 and out.stdout.strip() == f"iotrace-analyze {iotrace.__version__}"


def test_export_is_a_plugin_listed_in_help():
    out = _py(["-m", "iotrace", "--help"])
    assert out.returncode == 0
    assert "export" in out.stdout and "run" in out.stdout and "cat" in out.stdout


def test_a_plugin_of_another_package(tmp_path):
    """A package that declares an `iotrace.commands` entry point adds a subcommand."""
    (tmp_path / "hello_plugin.py").write_text(
        "def add(sub):\n"
        "    p = sub.add_parser('hello', help='say hello')\n"
        "    p.add_argument('who')\n"
        "    p.set_defaults(func=lambda a: print('hello ' + a.who) or 3)\n")
    dist = tmp_path / "hello_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hello-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[iotrace.commands]\nhello = hello_plugin:add\n")
    env = {"PYTHONPATH": str(tmp_path)}
    out = _py(["-m", "iotrace", "hello", "world"], env=env)
    assert (out.returncode, out.stdout) == (3, "hello world\n"), out.stderr
    assert "hello" in _py(["-m", "iotrace", "--help"], env=env).stdout
    # a broken plugin is named on stderr and the built-in commands keep working
    (dist / "entry_points.txt").write_text("[iotrace.commands]\nhello = no_such_module:add\n")
    out = _py(["-m", "iotrace", "--help"], env=env)
    assert out.returncode == 0 and "'hello'" in out.stderr and "could not be loaded" in out.stderr


def test_builtin_commands_do_not_scan_plugins():
    """`iotrace run` and `iotrace cat` start without reading the installed packages' metadata."""
    out = _py(["-X", "importtime", "-m", "iotrace", "preload-path"])
    assert out.returncode == 0 and out.stdout.strip().endswith("libiotrace.so")
    assert os.path.exists(out.stdout.strip())
    loaded = {ln.split("|")[-1].strip() for ln in out.stderr.splitlines() if ln.startswith("import time:")}
    assert "importlib.metadata" not in loaded


def test_unknown_command():
    out = _py(["-m", "iotrace", "nosuch"])
    assert out.returncode == 2 and "invalid choice: 'nosuch'" in out.stderr


def test_analyze_command_in_a_process_of_its_own(tmp_path):
    """`iotrace-analyze` as users run it (python -m, the console script's run()): the report,
    summary.json and Parquet; pyarrow's look for pandas (a 0.4-0.9 s import) is answered
    "not installed" in that process, and the analysis does not need it."""
    import json

    trace = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "v4")
    out = _py(["-X", "importtime", "-m", "iotrace_analyzer", trace, "-o", str(tmp_path / "a")])
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = {ln.split("|")[-1].strip() for ln in out.stderr.splitlines() if ln.startswith("import time:")}
    assert "pyarrow.parquet" in loaded
    assert not [m for m in loaded if m.startswith("pandas.")]  # (tries of "pandas" are listed)
    S = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert S["job"]["processes"] > 0 and S["job"]["events"] > 0
    assert list((tmp_path / "a" / "events").glob("part-*.parquet"))
    assert "I/O" in out.stdout
