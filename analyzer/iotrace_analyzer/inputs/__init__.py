"""What an analysis reads, and the one place a new kind of input goes.

A source is one process's record of events (or several processes', in a peer's format that
keeps a job in one file). It has:
  path                its name (the summary's trace_file, the damage report's path);
  size                the bytes it takes where it is stored (the order tasks are run in);
  estimated_events()  about how many events it holds, without reading it (the task plan);
  batches(damage)     its events as the format layer's column batches (iotrace_format.reader:
                      rows, metadata lines, bad lines), damage noted in the list given.
Everything after that (inputs/read.py: a task's partial; the model; the analyses; the outputs)
is the same for every kind.

A new kind: a class with those four (as TraceFile, Events), recognised in `gather`. A kind
whose figures are not events (a Darshan log's counters: darshan.py) also has
  task(index, out_dir, compute_cats)  its own task: the partial of its figures, what it told
                      (FileResult) and its events' Parquet parts (read.TaskResult);
it is a task of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import glob

from iotrace_format.reader import TraceInputError, find_traces, settle_live

from . import darshan
from .darshan import DarshanLog
from .events import Events
from .traces import TraceFile

__all__ = ["DarshanLog", "Events", "Gathered", "TraceFile", "gather"]


@dataclass
class Gathered:
    sources: list
    recovered: list = field(default_factory=list)  # traces of processes that died, finished here
    notes: list = field(default_factory=list)  # live files left as they were (reader.Damage)


def gather(items: list) -> Gathered:
    """The sources of what was given: folders and files (trace files found under them, the
    traces of processes that died finished first), and sources made in Python as they are."""
    paths = [os.fspath(x) for x in items if isinstance(x, (str, os.PathLike))]
    made = [x for x in items if not isinstance(x, (str, os.PathLike))]
    if not paths:
        return Gathered(made)
    logs = _darshan_logs(paths)
    if logs:
        return Gathered(_darshan_sources(paths, logs) + made)
    recovered, notes = settle_live(paths)
    files = [TraceFile(f, os.path.getsize(f)) for f in find_traces(paths)]
    return Gathered(files + made, recovered, notes)


def _darshan_logs(paths: list[str]) -> list[str]:
    """The Darshan logs (*.darshan) named, or found under the folders and globs given."""
    found = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                found += [os.path.join(root, f) for f in sorted(files) if darshan.is_log(f)]
        elif os.path.isfile(p):
            if darshan.is_log(p):
                found.append(p)
        else:
            for m in sorted(glob.glob(p, recursive=True)):
                found += _darshan_logs([m]) if os.path.isdir(m) else [m] if darshan.is_log(m) else []
    return found


def _darshan_sources(paths: list[str], logs: list[str]) -> list:
    """The logs as sources, each checked (its header and job record: a log that cannot be read
    at all is an error here, before any task runs). Traces beside them are an error: a Darshan
    log and iotrace's traces are two records of jobs, not one job's, and are not merged."""
    rest = [p for p in paths if not (os.path.isfile(p) and darshan.is_log(p))]
    traces: list = []
    if rest:
        try:
            traces = [t for t in find_traces(rest) if not darshan.is_log(t)]
        except TraceInputError:
            traces = []
    if traces:
        raise TraceInputError(
            f"a mix of Darshan logs ({len(logs)}, e.g. {logs[0]}) and iotrace traces ({len(traces)}, e.g. "
            f"{traces[0]}): analyze them apart (a Darshan log is a job of its own; --compare sets two side by side)")
    out = []
    for p in dict.fromkeys(os.path.realpath(x) for x in logs):
        darshan.darshan_log.check(p)  # DarshanError (a TraceInputError) says what is wrong
        out.append(DarshanLog(p, os.path.getsize(p)))
    return out
