"""argparse wiring of `iotrace export`.

`iotrace` adds it through the entry point iotrace.commands:export (pyproject.toml); `python -m iotrace_analyzer.export`
runs it standalone. Nothing heavy is imported until the command runs.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

_UNITS = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "min": 60e6}


def duration_us(text: str, default_unit: str = "us") -> float:
    """'250us', '1.5ms', '2s', '10' (default unit) -> microseconds."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-zµ]*)\s*", text, re.I)
    if not m or (m.group(2) and m.group(2).lower() not in _UNITS):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 250us, 1.5ms, 2s)")
    return float(m.group(1)) * _UNITS[(m.group(2) or default_unit).lower()]


def _seconds(text: str) -> float:
    return duration_us(text, "s")


def _window(text: str) -> tuple[float, float]:
    """'START:END' (times as --from/--to take them) -> (from, to) in µs since the job's start."""
    start, sep, end = text.partition(":")
    if not sep or not start.strip() or not end.strip():
        raise argparse.ArgumentTypeError(f"not a window: {text!r} (START:END, e.g. 10:12.5s)")
    a, b = _seconds(start), _seconds(end)
    if b < a:
        raise argparse.ArgumentTypeError(f"the window ends before it starts: {text!r}")
    return a, b


def _count(text: str) -> int:
    try:
        n = int(float(text)) if "e" in text.lower() else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"not a number of slices: {text!r}")
    return n


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None


def _str_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def add_export_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "export", help="merge per-process traces into one Perfetto trace",
        description="Merge a job's per-process traces into one trace for the Perfetto UI: "
                    "processes labelled by rank and role, forks drawn as arrows, counters "
                    "as tracks, file names restored. The output format follows the name: "
                    ".pftrace (Perfetto protobuf: smallest, fastest to load), .json.gz or "
                    ".json (Chrome JSON).")
    p.add_argument("traces", nargs="+", metavar="TRACE",
                   help="trace files, folders or globs (*.pfw, *.pfw.zst, *.pfw.gz, *.iotc.zst)")
    p.add_argument("-o", "--output", required=True,
                   help="job.pftrace, job.json.gz or job.json")
    cut = p.add_argument_group("cutting the trace down")
    cut.add_argument("--pid", type=_int_list, action="extend", default=[],
                     help="only these processes and their descendants (comma-separated)")
    cut.add_argument("--rank", type=_int_list, action="extend", default=[],
                     help="only these ranks (with their workers)")
    cut.add_argument("--cat", type=_str_list, action="extend", default=[],
                     help="only events of these categories (globs: posix,stdio,python)")
    cut.add_argument("--name", type=_str_list, action="extend", default=[],
                     help="only events with these names (globs: read,write,'train.*')")
    cut.add_argument("--from", dest="start", type=_seconds, metavar="TIME",
                     help="only events after TIME since the job's start (10, 1.5s, 200ms)")
    cut.add_argument("--to", dest="end", type=_seconds, metavar="TIME",
                     help="only events before TIME since the job's start")
    cut.add_argument("--min-dur", type=duration_us, default=0.0, metavar="DUR",
                     help="only slices lasting at least DUR (250us, 1ms; plain numbers: µs)")
    cut.add_argument("--max-events", type=int, metavar="N",
                     help="keep the first N events in time; the output notes what was cut")
    cut.add_argument("--max-slices", type=_count, default=None, metavar="N",
                     help="the budget of slices (default 2000000, what the Perfetto UI opens; 0: "
                          "none): past it, runs of short calls of one name and file on a thread "
                          "are merged into one slice (their count, bytes, time in its args), "
                          "long and rare slices kept, I/O counter tracks added")
    cut.add_argument("--window", type=_window, metavar="START:END",
                     help="every event of this window in full detail, no budget (times as "
                          "--from/--to: 10:12.5s)")
    p.add_argument("-j", "--jobs", type=int, default=2,
                   help="worker processes (default 2)")
    p.set_defaults(func=run_export, parser=p)
    return p


def run_export(args: argparse.Namespace) -> int:
    # Before numpy loads: one BLAS thread (no linear algebra here; idle OpenBLAS threads spin
    # beside the writers: 1% of an export's CPU).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from .. import engine
        from .budget import DEFAULT_MAX_SLICES
        from .filters import EventFilter
        from .merge import NothingRead, budget_text, export, output_format, reader
    except ImportError as exc:  # the tracer was installed without the analysis extra
        print(f"iotrace export: {exc}: install the analysis side with "
              "pip install 'iotrace[analyze]'", file=sys.stderr)
        return 2

    why = None
    if os.path.isdir(args.output):
        why = f"{args.output} is a folder: give a file name (job.pftrace)"
    elif not os.path.isdir(os.path.dirname(os.path.abspath(args.output))):
        why = f"no folder {os.path.dirname(os.path.abspath(args.output))} to write {args.output} in"
    else:
        try:
            output_format(args.output)
        except ValueError as exc:
            why = str(exc)
    if why:  # what parser.error says, returned rather than exited (main() is called in-process)
        args.parser.print_usage(sys.stderr)
        print(f"{args.parser.prog}: error: argument -o/--output: {why}", file=sys.stderr)
        return 2
    if args.window and (args.start is not None or args.end is not None):
        why = "--window is a --from and a --to: give one or the others"
    elif args.window and args.max_slices:
        why = "--window writes every event of the window: it takes no --max-slices"
    if why:
        args.parser.print_usage(sys.stderr)
        print(f"{args.parser.prog}: error: {why}", file=sys.stderr)
        return 2
    start, end = args.window or (args.start, args.end)
    max_slices = 0 if args.window else DEFAULT_MAX_SLICES if args.max_slices is None else args.max_slices
    filt = EventFilter(pids=set(args.pid), ranks=set(args.rank), cats=args.cat,
                       names=args.name, min_dur_us=args.min_dur, max_events=args.max_events,
                       window_from_us=start, window_to_us=end)
    engine.one_arena()  # this command's process is the export's own
    try:
        res = export(args.traces, args.output, filt, jobs=args.jobs, max_slices=max_slices)
    except NothingRead as exc:  # a runtime failure, not a usage error: status 1
        print(f"iotrace export: error: {exc}", file=sys.stderr)
        return 1
    except (reader().TraceInputError, ValueError) as exc:
        print(f"iotrace export: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        # Beside the output: its temporary folder or file, which the person never named.
        beside = not exc.filename or os.path.dirname(os.path.abspath(exc.filename)) == \
            os.path.dirname(os.path.abspath(args.output))
        what = f"cannot write {args.output}" if beside else str(exc.filename)
        print(f"iotrace export: error: {what}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {res.output}: {res.processes} processes, {res.threads} threads, "
          f"{res.events} events, {res.flows} flows", file=sys.stderr)
    if res.budget and res.budget["merging"]:
        print("budget: " + budget_text(res.budget), file=sys.stderr)
    elif res.budget and res.budget.get("skipped"):
        print(f"budget: --max-slices {res.budget['max_slices']} not applied: {res.budget['skipped']}",
              file=sys.stderr)
    elif args.window:
        print(f"window {args.window[0] / 1e6:g}-{args.window[1] / 1e6:g} s: every event, no budget",
              file=sys.stderr)
    left = []
    if res.filtered:
        left.append(f"{res.filtered} events by the filters")
    if res.cut:
        left.append(f"{res.cut} events after the --max-events cut")
    if res.bad_lines or res.damaged:
        left.append(f"{res.bad_lines} unreadable lines, {res.damaged} damaged places")
    if left:
        print("left out: " + "; ".join(left), file=sys.stderr)
    return 1 if res.errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m iotrace_analyzer.export")
    sub = parser.add_subparsers(dest="command", required=True)
    add_export_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)
