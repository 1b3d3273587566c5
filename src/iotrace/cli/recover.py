"""`iotrace recover`: finish the traces of processes that ended without finishing them.

A process keeps its records in its live file (`<trace>.live`, docs/trace-format.md) until its
writer has put them into its trace file. One that a signal ended (SIGKILL, the OOM killer, a
crash) leaves the live file behind; every reader finishes such a trace when the process ran on
the reader's host and is gone. A process of another host cannot be checked from here: once the
job is over, `--force` finishes those too.
"""
from __future__ import annotations

import argparse
import os
import sys


def recover(args: argparse.Namespace) -> int:
    from iotrace_format import _native, reader  # the format layer only

    lives = reader._live_files(args.traces)
    if not lives:
        print("iotrace recover: no live file found", file=sys.stderr)
        return 0
    host = reader._this_host()
    status = 0
    for live in lives:
        try:
            info = _native.live_inspect(live)
        except ValueError as e:
            print(f"iotrace recover: {e}", file=sys.stderr)
            status = 1
            continue
        if not info["closed"] and not args.force:
            if info["host"] != host:
                print(f"iotrace recover: {live}: pid {info['pid']} ran on {info['host']}, not here: "
                      "left alone (--force once the job is over)", file=sys.stderr)
                continue
            if _native.live_owner_alive(live):
                print(f"iotrace recover: {live}: pid {info['pid']} is still running: left alone",
                      file=sys.stderr)
                continue
        try:
            done = _native.live_finish(live)
        except ValueError as e:
            print(f"iotrace recover: {e}", file=sys.stderr)
            status = 1
            continue
        if done["closed"]:
            what = "complete already"
        else:
            how = done["end_reason"] if done["ended"] else "killed"
            what = f"{done['events']} events added, ended: {how}"
        print(f"{os.path.relpath(done['trace_path'])}: pid {done['pid']} on {done['host']}: {what}")
    return status


def add_parser(sub) -> argparse.ArgumentParser:
    r = sub.add_parser("recover", help="finish the traces of processes that died (their live files)",
                       description="Finish the traces whose process ended without finishing them (a "
                                   "signal, SIGKILL, the OOM killer): the records in its live file that "
                                   "its trace file lacks are added, with the end marker, and the live "
                                   "file goes. Readers do this by themselves for processes of their own "
                                   "host; --force finishes those of other hosts too, once the job is over.")
    r.add_argument("traces", nargs="+", help="trace folders, files or globs")
    r.add_argument("--force", action="store_true",
                   help="finish every live file, running process or not (the job is over; a process "
                        "of another host cannot be checked from here)")
    r.set_defaults(func=recover)
    return r
