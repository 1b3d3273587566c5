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

from iotrace_format.reader import find_traces, settle_live

from . import darshan_log
from .events import Events
from .traces import TraceFile

__all__ = ["Events", "Gathered", "TraceFile", "gather"]


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
    logs = darshan_log.logs_in(paths)
    if logs:  # Darshan logs (inputs/darshan.py)
        from .darshan import DarshanLog

        return Gathered([DarshanLog(p, os.path.getsize(p)) for p in logs] + made)
    recovered, notes = settle_live(paths)
    files = [TraceFile(f, os.path.getsize(f)) for f in find_traces(paths)]
    return Gathered(files + made, recovered, notes)

