"""The job as the analyses and the outputs see it: what every input told, merged.

`analyze` (pipeline.py) reads the inputs into per-task partials (summary.Partial), `summary.build`
merges them into one Job, the rules (insights.findings) read it, and the outputs (summary.json,
the text report, the report page, Parquet) write it. Nothing goes between those steps but a Job:
the summary holds the top of each table, the Job every row of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .files import FileSizes, FileTable


@dataclass
class Drawn:
    """What the report page draws beyond the summary, aggregated (activity.summarize,
    counters.summarize)."""

    proc_timeline: dict | None = None  # per process row, its binned I/O (the job timeline's bins)
    offsets: list = field(default_factory=list)  # the offsets of the files with most data calls
    phase_events: list = field(default_factory=list)  # per phase kind, its longest events
    counters: list = field(default_factory=list)  # per counter series, its points


@dataclass
class Job:
    """One job: its summary (summary.json's sections), every file's row, and what the rules and
    the page weigh beyond the summary."""

    summary: dict
    files: FileTable = field(default_factory=FileTable.empty)  # every file, as columns
    file_sizes: FileSizes | None = None  # each file's calls per (direction, size bin)
    data_by_pid: dict = field(default_factory=dict)  # pid -> its calls on data files
    cats_by_pid: dict = field(default_factory=dict)  # pid -> {@trace category: its union, us}
    # per (process, layer): host, pid, rank, layer, calls, time_ns, own_ns (the layer split)
    layers: list = field(default_factory=list)
    mpi_calls: object = None  # the MPI-IO calls, a pyarrow table (analyses/mpi.py COLUMNS), or None
    # per file, what an input of counters counts beyond the file table (a Darshan log: requests
    # not aligned to the file system's block, the fastest and slowest rank of a file every rank
    # used, the most and least bytes a rank moved, the bytes through STDIO: inputs/darshan.py
    # file_counters), a pyarrow table; None for traces (their rules read the calls)
    file_counters: object = None
    drawn: Drawn = field(default_factory=Drawn)
    traces: list = field(default_factory=list)  # load.FileResult per trace file read
    # the files of the file-per-sample pattern (a mask of `files`' rows), as the rules found it
    per_sample: np.ndarray | None = None
