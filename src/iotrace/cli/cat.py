"""`iotrace cat`: traces back as the JSON lines they stand for (the format layer only)."""
from __future__ import annotations

import argparse
import os
import sys


def cat(args: argparse.Namespace) -> int:
    """Write the JSON text of traces to stdout: a compact trace as the JSON lines it stands for
    (byte for byte what the JSON form writes), a JSON trace decompressed; several traces as one
    JSON array (their texts back to back would not be JSON). With -o DIR, each
    trace becomes DIR/<name>-<host>-<pid>.pfw.gz instead: the JSON form with gzip, which
    Perfetto opens as it is and DFTracer's tools read. Damage is read around and reported on
    stderr (exit status 1)."""
    from iotrace_format import reader  # the format's own module only

    if args.output and os.path.exists(args.output) and not os.path.isdir(args.output):
        args.parser.error(f"argument -o/--output: {args.output} is a file: give a folder (made if missing)")
    damage: list = []
    try:
        # A process that died left its last events in its live file: its trace is finished first.
        damage += reader.settle_live(args.traces)[1]
        files = reader.find_traces(args.traces)
    except reader.TraceInputError as e:
        print(f"iotrace cat: {e}", file=sys.stderr)
        return 2
    if args.output:
        import gzip

        os.makedirs(args.output, exist_ok=True)
        names = [reader.trace_stem(path) + ".pfw.gz" for path in files]
        if len(set(names)) < len(names):
            print("iotrace cat: two traces would get the same name in " + args.output, file=sys.stderr)
            return 2
        for path, name in zip(files, names):
            with gzip.open(os.path.join(args.output, name), "wb", compresslevel=6) as out:
                for block in reader.iter_blocks(path, damage):
                    out.write(block)
    else:
        out = sys.stdout.buffer
        try:
            if len(files) == 1:  # the trace's own text, byte for byte
                for block in reader.iter_blocks(files[0], damage):
                    out.write(block)
            else:
                _one_array(files, out, damage)
            out.flush()
        except BrokenPipeError:  # `iotrace cat x | head`
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    for d in damage:
        print(f"iotrace cat: {d.path}: {d.kind} at byte {d.offset}: {d.detail}", file=sys.stderr)
    return 1 if damage else 0


def _one_array(files: list[str], out, damage: list) -> None:
    """Several traces as one JSON array: each file's own brackets dropped, its events joined by
    commas (whether its lines end with one, as iotrace's do, or not, as DFTracer's; a trace cut
    short has no closing bracket)."""
    from iotrace_format import reader

    out.write(b"[")
    sep = b"\n"
    for path in files:
        for block in reader.iter_blocks(path, damage):
            # An event is a JSON object: whatever brackets, commas and spaces surround it go.
            events = [e for e in (line.strip(b" \t\r[],") for line in block.split(b"\n")) if e]
            if events:
                out.write(sep + b",\n".join(events))
                sep = b",\n"
    out.write(b"\n]\n")


def add_parser(sub) -> argparse.ArgumentParser:
    c = sub.add_parser("cat", help="print traces as JSON lines (compact traces rendered back)",
                       description="Write the JSON text of trace files to stdout: a compact trace "
                                   "(.iotc.zst) as the JSON lines it stands for, a JSON trace "
                                   "decompressed; several traces as one JSON array of all their "
                                   "events. Damage is reported on stderr (exit status 1).")
    c.add_argument("traces", nargs="+", help="trace files, folders or globs")
    c.add_argument("-o", "--output", metavar="DIR",
                   help="write each trace as DIR/<name>-<host>-<pid>.pfw.gz instead (the JSON form "
                        "in gzip: Perfetto opens it as it is, DFTracer's tools read it)")
    c.set_defaults(func=cat, parser=c)
    return c
