"""`iotrace cat`: traces back as the JSON lines they stand for (the format layer only)."""
from __future__ import annotations

import argparse
import os
import sys


def cat(args: argparse.Namespace) -> int:
    """Write the JSON text of traces to stdout: a compact trace as the JSON lines it stands for
    (byte for byte what the JSON form writes), a JSON trace decompressed. With -o DIR, each
    trace becomes DIR/<name>-<host>-<pid>.pfw.gz instead: the JSON form with gzip, which
    Perfetto opens as it is and DFTracer's tools read. Damage is read around and reported on
    stderr (exit status 1)."""
    from iotrace_format import reader  # zstandard + the format's own module only

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
            for path in files:
                for block in reader.iter_blocks(path, damage):
                    out.write(block)
            out.flush()
        except BrokenPipeError:  # `iotrace cat x | head`
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    for d in damage:
        print(f"iotrace cat: {d.path}: {d.kind} at byte {d.offset}: {d.detail}", file=sys.stderr)
    return 1 if damage else 0


def add_parser(sub) -> argparse.ArgumentParser:
    c = sub.add_parser("cat", help="print traces as JSON lines (compact traces rendered back)",
                       description="Write the JSON text of trace files to stdout: a compact trace "
                                   "(.iotc.zst) as the JSON lines it stands for, a JSON trace "
                                   "decompressed. Damage is reported on stderr (exit status 1).")
    c.add_argument("traces", nargs="+", help="trace files, folders or globs")
    c.add_argument("-o", "--output", metavar="DIR",
                   help="write each trace as DIR/<name>-<host>-<pid>.pfw.gz instead (the JSON form "
                        "in gzip: Perfetto opens it as it is, DFTracer's tools read it)")
    c.set_defaults(func=cat)
    return c
