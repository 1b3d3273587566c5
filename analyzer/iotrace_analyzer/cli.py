"""`iotrace-analyze TRACES... [-o OUT]`: summary tables on stdout, summary.json, the
report page (report.html), and (with -o) the events as a Parquet dataset."""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time

# Before numpy loads: one BLAS thread. The analyzer does no linear algebra; OpenBLAS's idle
# threads only spin beside the decoding (1.5% of the CPU of a 10M-event run).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .analyses import insights  # noqa: E402
from .outputs import report  # noqa: E402
from .pipeline import Options, analyze  # noqa: E402
from iotrace_format.reader import TraceInputError  # noqa: E402


def _version() -> str:
    """The installed distribution's version (the analyzer imports nothing of the tracer)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("iotrace")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="iotrace-analyze",
        description="Summarize iotrace / DFTracer traces and write them as Parquet.")
    p.add_argument("traces", nargs="*", help="trace files, folders or globs (.pfw, .pfw.zst, .pfw.gz, .iotc.zst)")
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"),
                   help="two runs side by side: trace folders, or earlier outputs (-o folders or summary.json)")
    p.add_argument("--version", action="version", version=f"iotrace-analyze {_version()}")
    p.add_argument("-o", "--output", "--out", dest="out", metavar="OUT",
                   help="output folder (made if missing): Parquet dataset, summary.json, report.html")
    p.add_argument("--summary", metavar="FILE", help="where to write summary.json (default OUT/summary.json)")
    p.add_argument("--report", metavar="FILE", help="where to write the report page (default OUT/report.html)")
    p.add_argument("--compute-cat", action="append", default=None, metavar="CAT",
                   help="category of compute events (repeatable; default: compute)")
    p.add_argument("--engine", choices=["auto", "local", "dask"], default="auto",
                   help="local: forked worker processes (a thread for one worker or one trace file); dask: a "
                        "local Dask cluster of single-threaded worker processes; auto (default): dask "
                        "with --scheduler or for 10 billion events or more, else local")
    p.add_argument("--scheduler", metavar="ADDRESS", help="use an existing Dask cluster")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes, forked or Dask's (default: the cores)")
    p.add_argument("--memory-limit", metavar="SIZE",
                   help="memory of each worker of a local Dask cluster (2GiB, 1.5GB; the engine is then dask): "
                        "Dask pauses a worker near it and restarts one past it (default: the machine's "
                        "memory shared out)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="rows in the top lists of the text report")
    p.add_argument("--no-parquet", action="store_true", help="with -o, skip the events dataset")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no text report on stdout (with -o, --summary or --report)")
    p.add_argument("--rules", metavar="FILE",
                   help="thresholds of the findings' rules: JSON (or TOML) {rule: {key: value}}, "
                        "sizes in bytes or as 64K, 1M; see docs/insights.md")
    p.add_argument("--threshold", action="append", default=[], metavar="RULE.KEY=VALUE",
                   help="one threshold (repeatable), e.g. small-reads.size=65536 or random-reads.enabled=false")
    p.add_argument("--no-findings", action="store_true", help="do not run the rules")
    return p


class _NoPandas:
    """A meta-path finder that answers "not installed" for pandas."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError(f"{name} is not loaded by iotrace-analyze", name=name)
        return None


def _without_pandas() -> None:
    """pyarrow imports pandas (0.4-0.9 s, in every worker that gets there first) the first
    time pa.array() sees a Python object, only to ask whether it is a pandas one; the analyzer
    makes no pandas objects. In the command's own process, that import fails at once."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())


def run() -> int:
    """The console script (and `python -m iotrace_analyzer`): main() in a process of its own."""
    _without_pandas()
    # The imports' objects (pyarrow, numpy) out of the cyclic collector's sight: its full
    # collections walked them all, and forked workers share them untouched.
    gc.freeze()
    rc = main()
    # The interpreter's teardown frees the job object by object (a million files' names and
    # tables: 0.15-0.2 s) and runs nothing this command needs: every output is written and
    # closed, every worker process and cluster ended, by now.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`): what was read is what counts
            pass
    os._exit(rc)


def _check_outputs(parser: argparse.ArgumentParser, args) -> None:
    """Usage errors about where the results go, said before any work."""
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        parser.error(f"argument -o/--output: {args.out} is a file: give a folder (made if missing)")
    for option, path in (("--summary", args.summary), ("--report", args.report)):
        if path and os.path.isdir(path):
            parser.error(f"argument {option}: {path} is a folder: give a file name")
    if args.quiet and not args.compare and not (args.out or args.summary or args.report):
        parser.error("-q/--quiet without -o OUT, --summary or --report would show and write nothing")
    if args.memory_limit is not None:
        from dask.utils import parse_bytes

        try:
            if parse_bytes(args.memory_limit) <= 0:
                raise ValueError
        except (ValueError, TypeError):
            parser.error(f"argument --memory-limit: {args.memory_limit!r} is not a size (2GiB, 1.5GB, 800MB)")
        if args.scheduler:
            parser.error("argument --memory-limit: an existing cluster's workers have their own limits "
                         "(dask worker --memory-limit)")
        if args.engine == "local":
            parser.error("argument --memory-limit: for the workers of a Dask cluster (--engine dask)")


class _CannotWrite(Exception):
    """An output that cannot be written, named as the person gave it."""


def _write_atomic(path: str, write) -> None:
    """write(temporary path) beside `path`, renamed to it when complete: no half-written file."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        raise _CannotWrite(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _publish_parquet(stage: str, out: str) -> None:
    """The dataset written into `stage` moved into `out`; the parts of an earlier run there
    go first (the analyzer's own names only), so the dataset is this run's alone."""
    events = os.path.join(out, "events")
    staged = os.path.join(stage, "events")
    if os.path.isdir(staged):
        os.makedirs(events, exist_ok=True)
        for name in os.listdir(events):
            if name.startswith("part-") and name.endswith(".parquet"):
                os.unlink(os.path.join(events, name))
        for name in os.listdir(staged):
            os.replace(os.path.join(staged, name), os.path.join(events, name))
    for name in os.listdir(stage):
        if name.endswith(".parquet"):
            os.replace(os.path.join(stage, name), os.path.join(out, name))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_outputs(parser, args)
    t0 = time.time()
    try:
        rules = insights.load_rules(args.rules, args.threshold)
    except (OSError, ValueError) as e:
        print(f"iotrace-analyze: error: rules: {e}", file=sys.stderr)
        return 2
    if args.compare:
        return _compare(args, rules)
    if not args.traces:
        parser.error("give trace files or folders (or --compare BEFORE AFTER)")
    out = args.out
    made = out is not None and not os.path.isdir(out)
    stage = None
    try:
        if out and not args.no_parquet:
            # The dataset goes into a folder of its own inside OUT and is moved into place
            # once the analysis succeeded: a failure leaves nothing half-written.
            try:
                os.makedirs(out, exist_ok=True)
                stage = tempfile.mkdtemp(prefix=".iotrace-analyze-", dir=out)
            except OSError as e:
                raise _CannotWrite(f"cannot write in {out}: {e.strerror or e}") from None
        return _analyze(args, rules, stage, t0)
    except _CannotWrite as e:
        print(f"iotrace-analyze: error: {e}", file=sys.stderr)
        return 1
    finally:
        if stage:
            shutil.rmtree(stage, ignore_errors=True)
        if made and os.path.isdir(out) and not os.listdir(out):
            os.rmdir(out)  # made for this run, which wrote nothing in it


def _analyze(args, rules: dict, stage: str | None, t0: float) -> int:
    opts = _options(args, rules, out_dir=stage)
    try:
        job = analyze(args.traces, opts)
    except TraceInputError as e:
        print(f"iotrace-analyze: error: {e}", file=sys.stderr)
        return 2
    S = job.summary
    d = S["damage"]
    if S["job"]["events"] + S["job"]["metadata_events"] == 0 and "darshan" not in S:
        # Nothing to report: the error alone, and no output written.
        print(f"iotrace-analyze: error: no event could be read from {S['input']['files']} file(s) "
              f"({d['bad_lines']} bad line(s), {d['damaged_files']} damaged file(s)); nothing written",
              file=sys.stderr)
        return 1
    out = args.out
    json_path = args.summary or (os.path.join(out, "summary.json") if out else None)
    page_path = args.report or (os.path.join(out, "report.html") if out else None)
    S["input"]["seconds"] = round(time.time() - t0, 3)
    if page_path:
        from .outputs import report_page  # plotly and jinja2: only when a page is written

        try:  # written under a temporary name and renamed, as _write_atomic does
            S["input"]["report_seconds"] = round(report_page.write(S, job.drawn, page_path), 3)
        except OSError as e:
            raise _CannotWrite(f"cannot write {page_path}: {e.strerror or e}") from None
    if json_path:
        _write_atomic(json_path, lambda tmp: report.write_json(S, tmp))
    if stage:
        try:
            _publish_parquet(stage, out)
        except OSError as e:
            raise _CannotWrite(f"cannot move the dataset into {out}: {e.strerror or e}") from None
    if not args.quiet:
        print(report.text_report(S, args.top))
    if d["damaged_files"]:
        print(f"iotrace-analyze: warning: damaged input in {d['damaged_files']} file(s): "
              f"{d['by_kind'] or ''} {d['bad_lines']} bad line(s), "
              f"{len(d['missing_metadata'])} file(s) without metadata, "
              f"{d['unresolved_file_hashes']} unresolved file hash(es)"
              + (f", {d['missing_child_count']} child process(es) without a trace"
                 if d.get("missing_child_count") else "")
              + "; read around, see summary", file=sys.stderr)
        for r in d["records"][:10]:
            print(f"  {r['path']} @{r['offset']}: {r['kind']} {r['detail']}", file=sys.stderr)
    return 0


def _options(args, rules: dict, out_dir: str | None) -> Options:
    return Options(findings=not args.no_findings, rules=rules, out_dir=out_dir,
                   compute_cats=tuple(args.compute_cat or ["compute"]), engine=args.engine,
                   scheduler=args.scheduler, workers=args.workers, progress=args.progress,
                   memory_limit=args.memory_limit)


def _compare(args, rules) -> int:
    from .analyses import compare

    def analyze_traces(path):
        return analyze([path], _options(args, rules, out_dir=None)).summary

    try:
        A, B = (compare.load_side(p, analyze_traces, label) for p, label in zip(args.compare, ("before", "after")))
    except compare.UnreadableSide as e:
        print(f"iotrace-analyze: error: compare: {e}", file=sys.stderr)
        return 1
    except (TraceInputError, OSError, ValueError, KeyError) as e:
        print(f"iotrace-analyze: error: compare: {e}", file=sys.stderr)
        return 2
    C = compare.compare(A, B)
    if args.out:
        try:
            _write_atomic(os.path.join(args.out, "compare.json"), lambda tmp: report.write_json(C, tmp))
        except _CannotWrite as e:
            print(f"iotrace-analyze: error: {e}", file=sys.stderr)
            return 1
    print(compare.text(C, *args.compare), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
