"""Findings: what is wrong with a job's I/O, why, and what to try. One small function per rule
over the job (model.Job: rule(S, D, T) gets its summary S, the Job D and the rule's
thresholds T; no second pass over the events); each gives at most
one finding with a stable id, a severity, the figure that triggered it against its threshold,
the evidence (files, processes, calls, time windows, with counts, bytes and time) and advice.

Rules weigh the job's data files (file_class: the interpreter's imports, the system, pipes,
logs are not the job's data) unless they say otherwise, and shares are of wall time. A rule
whose calls cost less than `min_share` of the processes' wall time stays silent: a pattern
that costs nothing is not a problem. A data file's calls are split between its creation (the
processes that wrote it) and its use (those that only read or looked at it): a dataset
written once and read every epoch is judged by its reading, and its creation apart. Every threshold is
in THRESHOLDS, documented in docs/insights.md, and can be changed (`--rules FILE`,
`--threshold RULE.KEY=VALUE`).
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.compute as pc

from ..model import Job
from ..model.files import FileSizes, FileTable, py_sum, seq_sum, top_rows
from . import mpi
from iotrace_format import calls as _call_table

from .summary import SIZE_EDGES, SIZE_LABELS, STORAGE_SYNC_CALLS

CALL_TABLE = list(_call_table())  # (number, name, category, family) of every call the tracer records

SEVERITIES = ("high", "warn", "info")
MiB = 1 << 20

# rule id -> {key: (default, what it is)}; `enabled` is every rule's too
THRESHOLDS: dict = {
    "io-bound": {
        "wait_share": (0.25, "share of a loader's epoch time spent waiting for batches (warn)"),
        "wait_share_high": (0.5, "the same, high"),
        "io_share": (0.5, "without loader events: share of a process's wall time in I/O on data files"),
        "min_wall_s": (0.05, "processes shorter than this are not weighed"),
        "cpu_wait_share": (0.2, "share of its workers' wall time they were runnable but had no CPU: "
                                "the host's CPUs, not storage, are what the loop waits for"),
    },
    "pipe-traffic": {
        "min_bytes": (10 * MiB, "bytes through pipes and sockets..."),
        "share": (0.5, "...and at least this share of the bytes read from data files"),
        "min_share": (0.02, "and the calls it is about take at least this share of the processes' wall time"),
    },
    "small-reads": {
        "size": (1 * MiB, "a read asking for less than this is small (rounded down to a histogram edge)"),
        "share": (0.1, "share of the data files' reads that are small"),
        "min_calls": (1000, "and at least this many small reads"),
        "min_share": (0.02, "and the calls it is about take at least this share of the processes' wall time"),
    },
    "small-writes": {
        "size": (1 * MiB, "a write of less than this is small (rounded down to a histogram edge)"),
        "share": (0.1, "share of the data files' writes that are small"),
        "min_calls": (1000, "and at least this many small writes"),
        "min_share": (0.02, "and the calls it is about take at least this share of the processes' wall time"),
    },
    "random-reads": {
        "share": (0.2, "share of a data file's reads that start before the previous one ended"),
        "min_calls": (100, "and at least this many random reads in all"),
        "min_file_bytes": (1 * MiB, "files read up to less than this are not weighed (read-ahead takes them whole)"),
        "min_share": (0.02, "and the calls it is about take at least this share of the processes' wall time"),
    },
    "random-writes": {
        "share": (0.2, "share of a data file's writes that start before the previous one ended"),
        "min_calls": (100, "and at least this many random writes in all"),
        "min_file_bytes": (1 * MiB, "files written less than this are not weighed"),
        "min_share": (0.02, "and the calls it is about take at least this share of the processes' wall time"),
    },
    "metadata-heavy": {
        "time_share": (0.3, "share of the data files' I/O time in metadata calls (open, stat, close, lseek...)"),
        "time_share_high": (0.5, "the same, high"),
        "min_calls": (1000, "and at least this many metadata calls on data files"),
        "per_sample_files": (100, "file per sample: at least this many data files..."),
        "per_sample_reads": (8, "...each read in at most this many reads per open (np.load of a .npz: 6)..."),
        "per_sample_bytes": (4 * MiB, "...of at most this many bytes per open"),
        "min_share": (0.02, "and the calls it is about take at least this share of the processes' wall time"),
    },
    "redundant-reads": {
        "ratio": (2.0, "bytes read from a data file / its extent read (the furthest byte read)"),
        "min_bytes": (1 * MiB, "and at least this many bytes read again, in all"),
        "min_share": (0.02, "and the calls it is about take at least this share of the processes' wall time"),
    },
    "checkpoint-stall": {
        "time_share": (0.1, "share of a process's wall time spent saving checkpoints"),
        "time_share_high": (0.3, "the same, high"),
    },
    "sync-heavy": {
        "time_share": (0.2, "share of the I/O call time in fsync, fdatasync, msync"),
        "min_calls": (10, "and at least this many sync calls"),
        "per_write": (0.1, "or: sync calls per write call, with at least 100 syncs"),
        "min_share": (0.02, "and the calls it is about take at least this share of the processes' wall time"),
    },
    "imbalance": {
        "ratio": (1.5, "the busiest process's data I/O time (an MPI rank's: its MPI-IO bytes) / the mean of "
                  "its group (same role)"),
        "min_bytes": (1 * MiB, "MPI ranks: and the busiest moves at least this many bytes over the mean"),
        "min_time_s": (0.01, "groups whose busiest process has less I/O time are not weighed"),
        "min_share": (0.02, "and the calls it is about take at least this share of the processes' wall time"),
        "same_work": (1.1, "when the busiest makes no more data calls and moves no more bytes than this times "
                      "the others' mean, its I/O was slower, not more: said so, with other advice"),
    },
    "mpi-independent-small": {
        "size": (64 << 10, "independent MPI-IO calls smaller than this on average, on a file ranks share"),
        "min_calls": (64, "and at least this many of them on the file"),
        "min_share": (0.02, "and they take at least this share of the ranks' time from MPI_Init to MPI_Finalize"),
    },
    "mpi-misaligned": {
        "stripe": (1 * MiB, "the file system's stripe (Lustre) or block (GPFS) size"),
        "share": (0.5, "share of the MPI-IO data calls with an offset that cross a stripe boundary they need not"),
        "min_calls": (64, "and at least this many data calls with an offset"),
        "min_share": (0.02, "and they take at least this share of the ranks' time from MPI_Init to MPI_Finalize"),
    },
    "collective-wait": {
        "share": (0.1, "share of the ranks' time from MPI_Init to MPI_Finalize spent waiting in collective "
                  "calls for a slower rank's work"),
        "min_time_s": (0.05, "and at least this much waiting, summed over ranks"),
        "caused": (0.5, "and one rank causes at least this share of it (a straggler, not scattered noise)"),
        "same_work": (1.1, "not when the straggler's I/O calls, bytes and CPU time are each at most this times "
                      "the other ranks' mean and its host lacked CPUs long enough: cpu-starved"),
        "extra_cpu": (0.5, "its CPU time as the same also when what it used beyond the others' mean is at most "
                      "this share of that mean and, at the share of a CPU it got, of the time it kept each "
                      "other rank waiting"),
    },
    "cpu-starved": {
        "share": (0.1, "share of the ranks' time from MPI_Init to MPI_Finalize spent waiting in collective "
                  "calls for a slower rank"),
        "min_time_s": (0.05, "and at least this much waiting, summed over ranks"),
        "caused": (0.5, "and one rank causes at least this share of it"),
        "same_work": (1.1, "which did no more than this times the other ranks' mean I/O calls, bytes and CPU "
                      "time, while its host had a task waiting for a CPU at least as long as it kept each "
                      "other rank waiting (Linux PSI)"),
        "extra_cpu": (0.5, "its CPU time as the same also when what it used beyond the others' mean is at most "
                      "this share of that mean and, at the share of a CPU it got, of the time it kept each "
                      "other rank waiting"),
        "wait_share": (0.3, "outside MPI: share of a process's wall time its main thread was runnable with no "
                       "CPU to run on (cpu_wait)"),
        "min_wait_s": (1.0, "and at least this much of such waiting in that process"),
    },
    "metadata-storm": {
        "min_processes": (4, "data files opened or stat'ed by at least this many processes"),
        "share": (0.5, "and by at least this share of the job's processes"),
        "min_calls": (1000, "and at least this many metadata calls on them, summed"),
    },
    "misaligned": {
        "share": (0.1, "share of the POSIX data calls whose offset is not a multiple of the file system's block "
                  "(Darshan's POSIX_FILE_ALIGNMENT), or whose buffer is not aligned in memory"),
        "min_calls": (1000, "and at least this many misaligned calls"),
        "min_share": (0.02, "and the calls it is about take at least this share of the processes' wall time"),
    },
    "stdio-heavy": {
        "share": (0.1, "share of the bytes read and written through stdio (fread, fwrite, fprintf...)"),
        "min_bytes": (64 * MiB, "and at least this many bytes through stdio"),
        "min_share": (0.02, "and the stdio calls take at least this share of the processes' wall time"),
    },
    "file-imbalance": {
        "share": (0.15, "a file every rank used: its slowest and fastest rank's bytes (or time) apart by this share "
                  "of the file's bytes (or time)"),
        "rank_share": (0.3, "a file some ranks used: the most and least bytes a rank moved apart by this share of "
                       "the most"),
        "min_bytes": (1 * MiB, "and the gap is at least this many bytes (bytes), or min_time_s (time)"),
        "min_time_s": (0.01, "see min_bytes"),
        "min_share": (0.02, "and the files' I/O time is at least this share of the processes' wall time"),
    },
    "mpi-blocking": {
        "min_calls": (1000, "MPI-IO reads (or writes) all blocking: at least this many of them"),
        "min_share": (0.1, "and they take at least this share of the ranks' time from MPI_Init to MPI_Finalize "
                      "(what overlapping could hide)"),
    },
    "mpiio-unused": {
        "min_ranks": (2, "a job of at least this many ranks doing its I/O without MPI-IO"),
        "min_bytes": (1 << 30, "and moving at least this many bytes"),
        "min_share": (0.1, "and its data calls take at least this share of the processes' wall time"),
    },
    "software-loading": {
        "time_share": (0.1, "share of the job's wall time in I/O on the software it loads (imports)"),
        "min_calls": (1000, "and at least this many calls on software files"),
    },
}
# Named threshold sets (`--rules NAME`): `drishti`, Drishti's own thresholds (drishti-io 0.8,
# includes/config.py) and no minimum cost, so that iotrace says what Drishti says on the same log
# (tests/analyzer/test_darshan_drishti.py; docs/darshan.md sets the two side by side)
PROFILES = {
    "drishti": {
        "small-reads": {"size": 1 << 20, "share": 0.1, "min_calls": 1001, "min_share": 0},
        "small-writes": {"size": 1 << 20, "share": 0.1, "min_calls": 1001, "min_share": 0},
        "random-reads": {"share": 0.2, "min_calls": 1001, "min_file_bytes": 0, "min_share": 0},
        "random-writes": {"share": 0.2, "min_calls": 1001, "min_file_bytes": 0, "min_share": 0},
        "metadata-heavy": {"min_share": 0},
        "misaligned": {"share": 0.1, "min_calls": 1, "min_share": 0},
        "stdio-heavy": {"share": 0.1, "min_bytes": 1, "min_share": 0},
        "file-imbalance": {"share": 0.15, "rank_share": 0.3, "min_bytes": 0, "min_time_s": 0, "min_share": 0},
        "mpi-independent-small": {"size": 1 << 40, "min_calls": 1001, "min_share": 0},
        "mpi-blocking": {"min_calls": 0, "min_share": 0},
        "mpiio-unused": {"min_ranks": 1, "min_bytes": 0, "min_share": 0},
    },
}
WAIT_CATS = ("fetch",)  # @trace / iotrace.iter categories whose events are a loop's waits for data
CHECKPOINT_FILE = re.compile(r"(ckpt|checkpoint|\.pt$|\.pth$|\.safetensors$)", re.I)


def thresholds(overrides: dict | None = None) -> dict:
    """The thresholds in force: defaults, then `overrides` ({rule: {key: value}})."""
    out = {rid: dict({k: v[0] for k, v in keys.items()}, enabled=True) for rid, keys in THRESHOLDS.items()}
    for rid, keys in (overrides or {}).items():
        if rid not in out:
            raise ValueError(f"unknown rule {rid!r} (rules: {', '.join(sorted(out))})")
        for k, v in keys.items():
            if k not in out[rid]:
                raise ValueError(f"unknown threshold {rid}.{k} (known: {', '.join(sorted(out[rid]))})")
            if k == "enabled":
                out[rid][k] = v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes", "on")
            else:
                out[rid][k] = int(float(v)) if isinstance(THRESHOLDS[rid][k][0], int) else float(v)
    return out


def load_rules(path: str | None, sets: list[str] = ()) -> dict:
    """Overrides from a JSON (or, with Python 3.11+, TOML) file of {rule: {key: value}} and
    from RULE.KEY=VALUE strings, checked against THRESHOLDS. A size (a key ending in `size` or
    `bytes`) may be written 65536, "64K", "1M" or "1MiB" (powers of 1024). A ValueError names
    the file (with line:column for bad JSON) or the --threshold, and the key."""
    units = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

    def number(rid: str, k: str, v):
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ValueError(f"{rid}.{k}: {v!r} is not a number")
        if isinstance(v, str) and k.endswith(("size", "bytes")):
            m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(?:i?b)?\s*", v, re.I)
            if not m:
                raise ValueError(f"{rid}.{k}: {v!r} is not a size (bytes, or 64K, 1M, 1MiB)")
            return float(m.group(1)) * units[m.group(2).lower()]
        try:
            return float(v)
        except ValueError:
            raise ValueError(f"{rid}.{k}: {v!r} is not a number") from None

    def checked(where: str, over) -> dict:
        """`over` with its numbers read, checked alone so that an error names its source."""
        try:
            if not isinstance(over, dict) or not all(isinstance(v, dict) for v in over.values()):
                raise ValueError('wants {"rule": {"key": value}} (docs/insights.md)')
            over = {rid: {k: v if k == "enabled" or k not in THRESHOLDS.get(rid, {}) else number(rid, k, v)
                          for k, v in keys.items()} for rid, keys in over.items()}
            thresholds(over)  # unknown rules and keys
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        return over

    over: dict = {}
    if path in PROFILES and not os.path.exists(path):
        over = {rid: dict(keys) for rid, keys in PROFILES[path].items()}
        path = None
    if path:
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise ValueError(f"{path}: {e.strerror}") from None
        toml = path.endswith(".toml")
        try:
            if toml:
                import tomllib

                over = tomllib.loads(raw.decode())
            else:
                over = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
        except (ValueError, ImportError) as e:  # TOMLDecodeError, UnicodeDecodeError; no tomllib
            raise ValueError(f"{path}: not {'TOML' if toml else 'JSON'}: {e}") from None
        over = checked(path, over)
    for s in sets:
        key, _, value = s.partition("=")
        rid, _, k = key.rpartition(".")
        if not rid or not _:
            raise ValueError(f"--threshold wants RULE.KEY=VALUE, got {s!r}")
        for r, keys in checked(f"--threshold {s}", {rid: {k: value}}).items():
            over.setdefault(r, {}).update(keys)
    return thresholds(over)


def _wall_us(S) -> float:
    """The processes' wall time, summed: what a rule's cost (summed over processes) is a share of."""
    return S.get("time", {}).get("wall_us") or S["job"].get("wall_us") or 1.0


def _ranks_run_us(S) -> float:
    """The ranks' time from MPI_Init to MPI_Finalize, summed (0 where no rank says it, as in a
    Darshan log, whose job time is already that): the time MPI-IO calls can take. The rules on
    them weigh them against it, not against the processes' wall time, which also holds the
    launcher waiting and MPI's start and end: seconds each on a loaded node (4.9 s of a rank's
    5.6 with busy loops and a writing disk beside a 0.7 s run), none of it the job's I/O."""
    return sum(r.get("run_us") or 0.0 for r in (S.get("mpi") or {}).get("ranks", []))


def _run_us(S) -> float:
    return _ranks_run_us(S) or _wall_us(S)


def _costs(S, T, time_us, base_us: float | None = None) -> bool:
    """The calls a rule is about cost at least `min_share` of the wall time (or of `base_us`)."""
    return time_us >= T.get("min_share", 0.0) * (_wall_us(S) if base_us is None else base_us)


def _finding(rid, severity, title, value, threshold, evidence, advice) -> dict:
    """A finding as summary.json holds it; its evidence is what Evidence.of reads (and writes
    back: the JSON form is the structure's, whatever order the rule built its dict in)."""
    return dict(id=rid, severity=severity, title=title, value=round(float(value), 6),
                threshold=threshold, evidence=Evidence.of(evidence).to_json(), advice=advice)


def _file_ev(r: dict, **extra) -> dict:
    return dict(file=r["file"], processes=r["processes"], calls=r["count"], time_us=r["time_us"],
                bytes_read=r["bytes_read"], bytes_written=r["bytes_written"], **extra)


def _files(D: Job) -> FileTable:
    """Every file's row (files.FileTable; the rules weigh them as columns)."""
    return D.files


def _skip(D: Job, F: FileTable) -> np.ndarray:
    """The files of metadata-heavy's file-per-sample pattern, as a mask of F's rows."""
    m = D.per_sample
    return m if m is not None and len(m) == len(F) else np.zeros(len(F), bool)


# --------------------------------------------------------------------------- the evidence
# One structure per finding that every output renders: summary.json writes it (to_json, the
# pinned form), the text report and the report page draw its rows and notes (report.evidence).
# What a key is (its unit, which list is shown row by row, which groups are notes) is said here
# once, beside the rules that write the keys.

# the first of these that holds rows is shown row by row (software-loading's files are `top`: its
# `files` is their count)
ROW_LISTS = ("files", "processes", "loaders", "windows", "calls", "top")
NOTES = (("file_per_sample", "file per sample"), ("use", "reading the data"), ("create", "creating the data"),
         ("workers", "its workers"))  # groups shown as a line each, in this order
NAME_KEYS = ("file", "pid", "host", "name", "rank")  # what a row is about, not a figure of it
BYTE_KEYS = ("extent", "read_extent")  # bytes beside every key starting with "bytes"


def unit(key: str) -> str:
    """An evidence key's unit: "us" (a duration in microseconds: a key ending in _us), "bytes",
    or "" (a count, a share, a name: shown as it is)."""
    if key.endswith("_us"):
        return "us"
    return "bytes" if key.startswith("bytes") or key in BYTE_KEYS else ""


@dataclass(frozen=True)
class Figure:
    """One figure: its key in summary.json, the label the reports print, its value and unit."""
    key: str
    label: str
    value: Any
    unit: str

    @classmethod
    def of(cls, key: str, value) -> Figure:
        return cls(key, key.replace("_us", ""), value, unit(key))

    @property
    def shown(self) -> bool:
        """Printed in a row's line: a figure, not a name, a missing value or a nested list."""
        return self.key not in NAME_KEYS and self.value is not None and not isinstance(self.value, (list, dict))


@dataclass(frozen=True)
class Item:
    """A row of evidence (a file, a process, a call, a loader, a time window) or a group of
    figures (the file-per-sample pattern, the workers): its figures in summary.json's order."""
    figures: tuple[Figure, ...]

    @classmethod
    def of(cls, d: dict) -> Item:
        return cls(tuple(Figure.of(k, v) for k, v in d.items()))

    def get(self, key: str, default=None):
        return next((f.value for f in self.figures if f.key == key), default)

    @property
    def file(self) -> str | None:
        return self.get("file")

    @property
    def process(self) -> tuple[str | None, int] | None:
        """(host, pid) when the row is about a process."""
        keys = {f.key for f in self.figures}
        return (self.get("host"), self.get("pid")) if "pid" in keys else None

    @property
    def name(self) -> str:
        """What the row is about: its file, else its process (pid N), else its name."""
        keys = {f.key for f in self.figures}
        if self.file:
            return self.file
        if "pid" in keys:
            rank = self.get("rank")
            return f"rank {rank} (pid {self.get('pid')})" if rank is not None else f"pid {self.get('pid')}"
        return self.get("name", "")

    def to_json(self) -> dict:
        return {f.key: f.value for f in self.figures}


@dataclass(frozen=True)
class Group:
    """A key of the evidence holding one group of figures (file_per_sample, use, workers...)."""
    key: str
    item: Item

    def to_json(self) -> dict:
        return self.item.to_json()


@dataclass(frozen=True)
class Rows:
    """A key of the evidence holding a list of rows (files, processes, calls...)."""
    key: str
    items: tuple[Item, ...]

    def to_json(self) -> list:
        return [i.to_json() for i in self.items]


@dataclass(frozen=True)
class Note:
    """A line beside the rows: a group's figures under its label, or (item None) the cost as a
    share of the processes' wall time."""
    label: str
    item: Item | None = None
    share_of_wall: float | None = None


@dataclass(frozen=True)
class Evidence:
    """A finding's evidence: every key as summary.json writes it, in its order (scalars as
    Figures, dicts as Groups, lists of dicts as Rows); `rows` and `notes` are what the text
    report and the page show of it."""
    entries: tuple[Figure | Group | Rows, ...]

    @classmethod
    def of(cls, ev: dict | Evidence) -> Evidence:
        """The structure of a finding's evidence dict (a rule's, or summary.json's read back)."""
        if isinstance(ev, Evidence):
            return ev
        out = []
        for k, v in ev.items():
            if isinstance(v, dict):
                out.append(Group(k, Item.of(v)))
            elif isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
                out.append(Rows(k, tuple(Item.of(r) for r in v)))
            else:
                out.append(Figure.of(k, v))
        return cls(tuple(out))

    @classmethod
    def of_finding(cls, f: dict) -> Evidence:
        return cls.of(f["evidence"])

    def to_json(self) -> dict:
        return {e.key: e.to_json() if isinstance(e, (Group, Rows)) else e.value for e in self.entries}

    def entry(self, key: str):
        return next((e for e in self.entries if e.key == key), None)

    @property
    def rows(self) -> Rows | None:
        """The list shown row by row: the first of ROW_LISTS that has rows."""
        for k in ROW_LISTS:
            e = self.entry(k)
            if isinstance(e, Rows) and e.items:
                return e
        return None

    @property
    def notes(self) -> list[Note]:
        """The lines beside the rows: the groups of NOTES (the data's reading and creation when
        they have files), then the cost."""
        out = []
        for k, label in NOTES:
            e = self.entry(k)
            if isinstance(e, Group) and (k not in ("use", "create") or e.item.get("files")):
                out.append(Note(label, e.item))
        e = self.entry("share_of_wall")
        if isinstance(e, Figure) and isinstance(e.value, (int, float)):
            out.append(Note("cost", None, e.value))
        return out

    @property
    def figures(self) -> list[Figure]:
        """The finding's own figures (neither rows nor groups)."""
        return [e for e in self.entries if isinstance(e, Figure)]


# --------------------------------------------------------------------------- the rules


def _workers(S, D, pid) -> dict | None:
    """What the worker processes of `pid` (its children: loader or pool workers) do with their
    time: storage I/O on data files against their wall time, and the time they were runnable
    with no CPU to run on (the tracer's cpu_wait, of the workers whose end has it: all but those
    a signal ended whose parent waited for any child; None where none has it). None without
    workers."""
    by_pid = D.data_by_pid
    ws = [q for q in S["processes"] if q.get("parent_pid") == pid]
    if not ws:
        return None
    wall = sum(q.get("wall_us", 0) for q in ws)
    io = sum(min(by_pid.get(q["pid"], {}).get("time_us", 0.0), q["io_us"]) for q in ws)
    timed = [q for q in ws if q.get("cpu_wait_us") is not None]
    cpu_wait = sum(q["cpu_wait_us"] for q in timed) if timed else None
    timed_wall = sum(q.get("wall_us", 0) for q in timed)
    return dict(processes=len(ws), wall_us=round(wall, 3), data_io_us=round(io, 3),
                io_share=round(io / wall, 6) if wall else 0.0,
                ipc_wait_us=round(sum(q.get("ipc_wait_us", 0) for q in ws), 3),
                cpu_wait_us=round(cpu_wait, 3) if cpu_wait is not None else None, cpu_waits_of=len(timed),
                cpu_wait_share=round(cpu_wait / timed_wall, 6) if cpu_wait is not None and timed_wall else None)


def _workers_title(w: dict | None, T) -> str:
    """What the loop's workers do, for the finding's title."""
    if w is None:
        return ""
    text = f"; its {w['processes']} workers spend {100 * w['io_share']:.0f}% of their time in storage I/O"
    if _cpu_short(w, T):
        text += f" and {100 * w['cpu_wait_share']:.0f}% waiting for a CPU"
    return text


def _cpu_short(w: dict | None, T) -> bool:
    """The workers waited for a CPU a good part of their time: the host's CPUs are the limit."""
    return w is not None and w["cpu_wait_share"] is not None and w["cpu_wait_share"] >= T["cpu_wait_share"]


def _wait_advice(w: dict | None, T) -> list:
    """Advice for a loop waiting for data, by what its workers do."""
    if _cpu_short(w, T):
        return [f"The {w['processes']} workers waited for a CPU {100 * w['cpu_wait_share']:.0f}% of their "
                "time: the host's CPUs are the limit (more workers and loop threads than CPUs, or other work "
                "beside them). More workers would not help, nor would faster storage: fewer workers (at most "
                "the CPUs the job has, less the loop's), fewer threads per worker (OMP_NUM_THREADS, "
                "torch.set_num_threads), or cheaper decoding and augmentation",
                "Make each sample cheaper to read (see the other findings)"]
    if w is not None and w["io_share"] < 0.25:
        return [f"The {w['processes']} workers spend {100 * w['io_share']:.0f}% of their time in storage I/O: "
                "the rest goes to decoding and handing batches over (pickled through pipes). More workers, "
                "cheaper decoding, or batches in shared memory (torch DataLoader does) help; faster storage would not",
                "More prefetching, so the next batch is ready when a step ends"]
    return ["More loader workers or prefetching, so the next batch is ready when a step ends",
            "Make each sample cheaper to read (see the other findings)"]


def io_bound(S, D, T):
    """The loop waits for data; without loop events, processes whose wall time is mostly I/O
    on data files that no compute hid."""
    loaders = S.get("training", {}).get("loaders", [])
    if loaders:
        worst = max(loaders, key=lambda ld: ld["wait_share"])
        v = worst["wait_share"]
        if v < T["wait_share"]:
            return None
        sev = "high" if v >= T["wait_share_high"] else "warn"
        slow = max(worst["per_epoch"], key=lambda e: e["wait_share"])
        w = _workers(S, D, worst["pid"])
        return _finding(
            "io-bound", sev, f"The training loop waits for data {100 * v:.0f}% of its time"
            + _workers_title(w, T), v, T["wait_share"],
            dict(loaders=[dict(pid=ld["pid"], loader=ld["loader"], epochs=ld["epochs"], batches=ld["batches"],
                               epoch_time_us=ld["epoch_time_us"], fetch_wait_us=ld["fetch_wait_us"],
                               wait_share=ld["wait_share"]) for ld in loaders],
                 worst_epoch=dict(pid=worst["pid"], epoch=slow["epoch"], start_ns=slow["start_ns"],
                                  duration_us=slow["duration_us"], fetch_wait_us=slow["fetch_wait_us"],
                                  first_batch_wait_us=slow["first_batch_wait_us"]), workers=w),
            (_wait_advice(w, T)[:1] if _cpu_short(w, T) or (w is not None and w["io_share"] < 0.25) else [])
            + (["persistent_workers=True, so each epoch does not start workers again"] if _cpu_short(w, T)
               else ["More DataLoader workers (num_workers) and prefetch_factor, persistent_workers=True "
                     "so each epoch does not start workers again"])
            + ["Make each sample cheaper to read: bigger sequential reads, fewer files (shards), "
               "data on node-local storage or in memory; see the other findings"])
    # annotated loops: `fetch` events (iotrace.iter waits) beside compute in one process
    cats = D.cats_by_pid
    loops = []
    for p in S["processes"]:
        wait = sum(cats.get(p["pid"], {}).get(c, 0.0) for c in WAIT_CATS)
        if wait and p["compute_us"]:
            loops.append((wait / (wait + p["compute_us"]), p, wait))
    if loops:
        v, p, wait = max(loops, key=lambda x: x[0])
        if v < T["wait_share"]:
            return None
        w = _workers(S, D, p["pid"])
        return _finding(
            "io-bound", "high" if v >= T["wait_share_high"] else "warn",
            f"pid {p['pid']} waits for data {100 * v:.0f}% of its loop (waits against compute)"
            + _workers_title(w, T), v, T["wait_share"],
            dict(processes=[dict(host=q["host"], pid=q["pid"], role=q.get("role"), wait_us=round(wt, 3),
                                 compute_us=q["compute_us"], wall_us=q["wall_us"], wait_share=round(s, 6),
                                 storage_io_us=q["io_us"], ipc_wait_us=q.get("ipc_wait_us", 0))
                            for s, q, wt in sorted(loops, key=lambda x: -x[0])[:10]],
                 wait_categories=list(WAIT_CATS), workers=w),
            _wait_advice(w, T))
    by_pid = D.data_by_pid
    hits = []
    for p in S["processes"]:
        wall = p.get("wall_us", 0)
        d = by_pid.get(p["pid"])
        if not d or wall < T["min_wall_s"] * 1e6:
            continue
        # I/O that no compute hid (all of it when the process records no compute)
        share = min(d["time_us"], p["io_not_overlapped_us"], wall) / wall
        if share >= T["io_share"]:
            hits.append((share, p, d))
    if not hits:
        return None
    hits.sort(key=lambda h: -h[0])
    v = hits[0][0]
    return _finding(
        "io-bound", "warn", f"{len(hits)} process(es) spend {100 * v:.0f}% (most) of their wall time in I/O on data",
        v, T["io_share"],
        dict(processes=[dict(host=p["host"], pid=p["pid"], role=p.get("role"), wall_us=p["wall_us"],
                             data_io_us=d["time_us"], bytes_read=d["bytes_read"],
                             bytes_written=d["bytes_written"], share=round(s, 6)) for s, p, d in hits[:10]]),
        ["Overlap I/O with compute: read ahead in a thread or DataLoader workers, asynchronous writes",
         "Move fewer bytes or in bigger requests (see the other findings)"])


def _small(S, D, T, rid, direction):
    col = 0 if direction == "read" else 1
    edge = max([i for i, e in enumerate(SIZE_EDGES) if e <= T["size"]] or [0])  # bins below it
    F = _files(D)
    skip = _skip(D, F) if direction == "read" else np.zeros(len(F), bool)  # metadata-heavy's
    data = F.is_class("data") & ~skip
    sizes = D.file_sizes or FileSizes(None, F, len(SIZE_LABELS))
    n_all, n_small = sizes.calls(col), sizes.calls(col, edge)
    total = int(n_all[data].sum())
    small = int(n_small[data].sum())
    hit = data & (n_small > 0)
    # the small calls' time, each file's call time shared out by count
    t = F["read_time_us" if direction == "read" else "write_time_us"]
    cost = seq_sum(t[hit] * n_small[hit] / n_all[hit])
    if not total or small < T["min_calls"] or small / total < T["share"] or not _costs(S, T, cost):
        return None
    v = small / total
    kind = "reads" if direction == "read" else "writes"
    moved = "bytes_read" if direction == "read" else "bytes_written"
    # files that are small themselves: no request size helps, fewer and bigger files do
    per_file = np.sort(F[moved][hit])
    n_files = len(per_file)
    median = int(per_file[n_files // 2]) if n_files else None
    tiny = median < SIZE_EDGES[edge] if n_files >= 10 else False
    title = (f"{100 * v:.0f}% of the data {kind} ({small} calls) are smaller than {SIZE_EDGES[edge] // 1024} KiB"
             + (f", on {n_files} files of {median / 1024:.1f} KiB (median)" if tiny else ""))
    rows = []
    for i in top_rows(hit, [-n_small], None, 10):  # the most small calls first
        h = sizes.histogram(int(i), col)
        rows.append((int(n_small[i]), F.row(i), int(n_all[i]), SIZE_LABELS[int(np.argmax(h))]))
    if tiny:
        advice = ([f"The files themselves are small: bigger {kind} cannot help. Pack the samples into fewer, "
                   "bigger files (shards: WebDataset/TFRecord, HDF5, one array file) "
                   + ("read sequentially" if direction == "read" else "written once")]
                  + (["If the files are written once and read many times, see what reading them costs"]
                     if direction == "write" else []))
    elif direction == "read":
        advice = ["Read in bigger requests: a bigger buffer (open(..., buffering=4 << 20)), reading a sample "
                  "whole, or samples packed into shards read sequentially (WebDataset, TFRecord, HDF5 chunks >= 1 MiB)"]
    else:
        advice = ["Gather writes in a buffer and write >= 1 MiB at a time (io.BufferedWriter with a big buffer, "
                  "setvbuf for stdio)"]
    return _finding(
        rid, "warn", title, v, T["share"],
        dict(calls=total, small_calls=small, size_limit=SIZE_EDGES[edge], time_us=round(cost, 3),
             share_of_wall=round(cost / _wall_us(S), 6), files_written=n_files if direction == "write" else None,
             median_file_bytes=median, files_left_to_metadata_heavy=int(skip.sum()) or None,
             files=[_file_ev(r, **{f"small_{kind}": n_s, kind: n, "usual_size": lab}) for n_s, r, n, lab in rows]),
        advice)


def small_reads(S, D, T):
    """Many reads far below what storage serves well (Drishti: < 1 MB, > 10% and > 1000)."""
    return _small(S, D, T, "small-reads", "read")


def small_writes(S, D, T):
    return _small(S, D, T, "small-writes", "write")


def _random(S, D, T, rid, direction):
    seq_k, rnd_k = f"{direction}_sequential", f"{direction}_random"
    size_k = "read_extent" if direction == "read" else "bytes_written"
    F = _files(D)
    # each column put in order once (a million files: a gather each)
    seq_c, rnd_c = F[seq_k], F[rnd_k]
    weighed = F.is_class("data") & (F[size_k] >= T["min_file_bytes"]) & ~_skip(D, F)  # metadata-heavy's
    data = weighed & (rnd_c != 0)
    seq = int(seq_c[weighed].sum())
    rnd = int(rnd_c[data].sum())
    t_k = "read_time_us" if direction == "read" else "write_time_us"
    cost = py_sum(F[t_k][data] * rnd_c[data] / np.maximum(rnd_c[data] + seq_c[data], 1))
    if rnd < T["min_calls"] or rnd / (seq + rnd) < T["share"] or not _costs(S, T, cost):
        return None
    v = rnd / (seq + rnd)
    data = F.rows(top_rows(data, [-rnd_c], None, 10))
    kind = "reads" if direction == "read" else "writes"
    return _finding(
        rid, "warn", f"{100 * v:.0f}% of the data {kind} jump backwards in their file ({rnd} calls)", v, T["share"],
        dict(sequential=seq, random=rnd,
             files=[_file_ev(r, sequential=r[seq_k], random=r[rnd_k],
                             random_share=round(r[rnd_k] / (r[rnd_k] + r[seq_k]), 6)) for r in data]),
        ["Read each file front to back (sort the sample indices of a shard; shuffle shards and a "
         "buffer instead of every sample)", "For random access, bigger chunks or the file in memory (mmap, "
         "node-local copy) cost less than many seeks"] if direction == "read" else
        ["Write in order, or gather the pieces in memory and write them once"])


def random_reads(S, D, T):
    """Reads that start before the previous read of the file (same process) ended."""
    return _random(S, D, T, "random-reads", "read")


def random_writes(S, D, T):
    return _random(S, D, T, "random-writes", "write")


def _part(F: FileTable, data: np.ndarray, part):
    """Sums over data files (a mask of F's rows) of one part of their calls: "use" (the
    processes that only read or looked at a file) or "create" (those that wrote it)."""
    meta_c, opens_c = F[f"{part}_metadata_count"], F[f"{part}_opens"]
    meta_n = int(meta_c[data].sum())
    meta_t = py_sum(F[f"{part}_metadata_time_us"][data])
    io_t = py_sum(F[f"{part}_time_us"][data])
    files = data & ((opens_c != 0) | (meta_c != 0))
    return dict(files=int(files.sum()), processes=int(F[f"{part}_processes"][files].max()) if files.any() else 0,
                opens=int(opens_c[data].sum()), metadata_calls=meta_n,
                metadata_time_us=round(meta_t, 3), io_time_us=round(io_t, 3),
                metadata_share=round(meta_t / io_t, 6) if io_t else 0.0)


def metadata_heavy(S, D, T):
    """Metadata calls dominating the data files' I/O time, and the file-per-sample pattern:
    many data files, each opened for one or two small reads. The data's use (reading it) and
    its creation (writing it, often once) are weighed apart, and the finding says which."""
    F = _files(D)
    data = F.is_class("data")
    use, create = _part(F, data, "use"), _part(F, data, "create")
    per_sample = _skip(D, F)  # findings() found it with these thresholds; empty without the pattern
    n_per_sample = int(per_sample.sum())
    ps_time = py_sum(F["use_time_us"][per_sample])

    def heavy(p):
        return (p["metadata_calls"] >= T["min_calls"] and p["metadata_share"] >= T["time_share"]
                and _costs(S, T, p["metadata_time_us"]))

    many = bool(n_per_sample) and _costs(S, T, ps_time)
    if heavy(use) or many:
        part, which = use, "use"
    elif heavy(create):
        part, which = create, "create"
    else:
        return None
    share = part["metadata_share"]
    key = f"{which}_metadata_time_us"
    ev = dict(phase="reading the data" if which == "use" else "creating the data",
              use=use, create=create,
              share_of_wall=round(max(part["metadata_time_us"], ps_time if many else 0.0) / _wall_us(S), 6),
              files=[_file_ev(r, metadata_calls=r[f"{which}_metadata_count"], metadata_time_us=r[key],
                              opens=r[f"{which}_opens"])
                     for r in F.rows(top_rows(data, [-F[key]], None, 10))])
    if which == "create":
        return _finding(
            "metadata-heavy", "warn",
            f"Creating the data files: metadata calls take {100 * share:.0f}% of the time writing "
            f"{part['files']} files ({part['metadata_calls']} calls)", share, T["time_share"], ev,
            ["Write the data into fewer, bigger files (shards, one array file per split) as it is "
             "created: one create and one close per shard, not per sample",
             "Created once and read many times, this is paid once: what the reading costs is weighed apart"])
    # high only when it costs much of the job too (10% of the wall time)
    cost = max(part["metadata_time_us"], ps_time if many else 0.0) / _wall_us(S)
    sev = "high" if share >= T["time_share_high"] and heavy(use) and cost >= 0.1 else "warn"
    if many:
        opens = int(F["use_opens"][per_sample].sum())
        ev["file_per_sample"] = dict(
            files=n_per_sample, opens=opens, reads=int(F["reads"][per_sample].sum()),
            time_us=round(ps_time, 3), share_of_wall=round(ps_time / _wall_us(S), 6),
            mean_bytes_per_open=round(int(F["bytes_read"][per_sample].sum()) / opens, 1) if opens else None,
            metadata_calls_per_open=round(int(F["use_metadata_count"][per_sample].sum()) / opens, 3)
            if opens else None)
    advice = ["Pack samples into fewer, bigger files read sequentially (WebDataset/TFRecord shards, HDF5, "
              "Parquet, LMDB): one open per shard instead of per sample"]
    per_open = use["metadata_calls"] / use["opens"] if use["opens"] else 0.0
    if per_open >= 10:  # a library seeking around each file, not the opens themselves
        advice.append(f"Each open is followed by {per_open:.0f} metadata calls (lseek, fstat...): the reading "
                      "library seeks around the file (a zip's directory, an HDF5 header); a format read in one "
                      "pass (.npy, raw records) avoids them")
    else:
        advice.append("Keep files open across epochs, and avoid stat/exists checks before each open")
    title = (f"Reading the data: metadata calls take {100 * share:.0f}% of its I/O time "
             f"({use['metadata_calls']} calls)" if heavy(use) else
             f"One file per sample: {n_per_sample} data files each opened for a few small reads "
             f"({100 * ps_time / _wall_us(S):.0f}% of the processes' wall time in their calls)")
    return _finding(
        "metadata-heavy", sev, title, share if heavy(use) else n_per_sample,
        T["time_share"] if heavy(use) else T["per_sample_files"], ev, advice)


def redundant_reads(S, D, T):
    """The same bytes read again: bytes read from a file well above its extent. Told apart:
    bytes read again within one open (a library reading a header or an index twice) and the
    file opened again (each epoch, or a cache that does not hold)."""
    F = _files(D)
    br, ex = F["bytes_read"], F["read_extent"]
    data = F.is_class("data") & (ex != 0)
    again_m = data & (br > ex)
    again_b = br - ex
    again = int(again_b[again_m].sum())
    extent = int(ex[data].sum())
    if not again_m.any() or again < T["min_bytes"]:
        return None
    read = int(br[data].sum())
    v = read / extent  # over all the data files read
    # the time of the reads that read bytes again, each file's read time shared out by bytes
    cost = py_sum(F["read_time_us"][again_m] * again_b[again_m] / br[again_m])
    if v < T["ratio"] or not _costs(S, T, cost):
        return None
    uo = F["use_opens"][data]
    opens = np.maximum(np.where(uo != 0, uo, F["opens"][data]), 1)  # the reading processes' opens
    per_open = read / int((opens * ex[data]).sum())
    opens_per_file = int(opens.sum()) / int(data.sum())
    epochs = max([ld["epochs"] for ld in S.get("training", {}).get("loaders", [])]
                 + [n["count"] for c in S.get("categories", []) for n in c["top_names"] if n["name"] == "epoch"] or [0])
    within = per_open >= 1.5  # each open reads its bytes more than once
    per_epoch = epochs >= 2 and opens_per_file <= epochs + 0.5  # opened about once per epoch
    expected = not within and per_epoch
    rows = [(int(again_b[i]), int(br[i]) / int(ex[i]), F.row(i)) for i in top_rows(again_m, [-again_b], None, 10)]
    causes = []
    if within:
        causes.append(f"each open reads {per_open:.1f}x what it needs")
    if opens_per_file >= 1.5:
        causes.append(f"each file is opened {opens_per_file:.1f} times"
                      + (f" (about once per epoch, {epochs})" if per_epoch else ""))
    advice = []
    if within:
        advice.append("Within one open the same bytes are read again: the reading library reads a header or "
                      "an index more than once (np.load of a .npz reads the zip directory again for each "
                      "member; small unbuffered reads re-read a block). A format read in one pass (.npy, raw "
                      "records in a shard) or one whole-file read into memory avoids it")
    if opens_per_file >= 1.5:
        advice.append("Across opens: cache what is read again, in memory when it fits (the page cache, a "
                      "dataset cached after the first epoch), or on node-local storage")
    if not within and opens_per_file < 1.5:
        advice.append("Within an epoch: read each sample once (check the sampler and the dataset's __getitem__)")
    return _finding(
        "redundant-reads", "info" if expected else "warn",
        f"Data files are read {v:.1f} times over ({again / MiB:.1f} MiB read again): " + ", ".join(causes or
                                                                                            ["reads overlap"]),
        v, T["ratio"],
        dict(bytes_read_again=again, extent=extent, epochs=epochs or None, per_open=round(per_open, 3),
             opens_per_file=round(opens_per_file, 3), time_us=round(cost, 3),
             share_of_wall=round(cost / _wall_us(S), 6),
             files=[_file_ev(r, read_extent=r["read_extent"], times=round(t, 3), opens=r["use_opens"] or r["opens"])
                    for _a, t, r in rows]),
        advice)


def checkpoint_stall(S, D, T):
    """Checkpoint saves holding the process (torch.save events), or writes to checkpoint-named
    files when there are none."""
    ck = [c for c in S.get("training", {}).get("checkpoints", []) if "load" not in c["name"]]
    walls = {(p["host"], p["pid"]): p.get("wall_us", 0) for p in S["processes"]}
    by_proc: dict = {}
    if ck:
        for c in ck:
            by_proc.setdefault((c["host"], c["pid"]), []).append(c)
        items = [(k, sum(c["duration_us"] for c in cs), sum(c["bytes"] or 0 for c in cs), cs, len(cs))
                 for k, cs in by_proc.items()]
    else:
        F = _files(D)
        files = _checkpoint_files(F)
        if not files.any():
            return None
        t = py_sum(F["write_time_us"][files])
        # the writers are not known per file here: weigh against the longest process
        k = max(walls, key=walls.get) if walls else ("", 0)
        items = [(k, t, int(F["bytes_written"][files].sum()),
                  [dict(file=r["file"], bytes=r["bytes_written"], duration_us=r["write_time_us"])
                   for r in F.rows(top_rows(files, [-F["write_time_us"]], None, 10))], int(files.sum()))]
    hits = [(t / walls[k], k, t, b, cs, n) for k, t, b, cs, n in items if walls.get(k)]
    if not hits:
        return None
    v, k, t, b, cs, n = max(hits, key=lambda h: h[0])
    if v < T["time_share"]:
        return None
    starts = sorted(c["start_ns"] for c in cs if "start_ns" in c)
    every = round(float(np.mean(np.diff(starts))) / 1000, 3) if len(starts) > 1 else None
    return _finding(
        "checkpoint-stall", "high" if v >= T["time_share_high"] else "warn",
        f"Checkpoints hold pid {k[1]} for {100 * v:.0f}% of its wall time", v, T["time_share"],
        dict(host=k[0], pid=k[1], checkpoints=n, time_us=round(t, 3), bytes=b,
             bandwidth_MBps=round(b / (t / 1e6) / 1e6, 3) if t and b else None, every_us=every,
             windows=[dict(start_ns=c.get("start_ns"), duration_us=c["duration_us"], file=c.get("file"),
                           bytes=c.get("bytes")) for c in sorted(cs, key=lambda c: -c["duration_us"])[:10]]),
        ["Save asynchronously (torch.distributed.checkpoint.async_save, or a background thread after "
         "copying the state to CPU) so the steps go on", "Save less often, or to node-local storage and "
         "copy out in the background; shard the checkpoint across ranks"])


def _checkpoint_files(F: FileTable) -> np.ndarray:
    """The data files written under a checkpoint's name (CHECKPOINT_FILE), as a mask. Many
    candidates are sifted by Arrow's regex first (a superset), then each by CHECKPOINT_FILE."""
    cand = F.is_class("data") & (F["bytes_written"] != 0)
    rows = np.flatnonzero(cand)
    if len(rows) > 4096:
        like = pc.match_substring_regex(F.files_at(rows), r"(?i)(ckpt|checkpoint|\.pt|\.pth|\.safetensors)")
        rows = rows[like.to_numpy(zero_copy_only=False)]
    out = np.zeros(len(F), bool)
    names = F.files_at(rows).to_pylist()
    out[[i for i, name in zip(rows, names) if CHECKPOINT_FILE.search(name)]] = True
    return out


def sync_heavy(S, D, T):
    """Time or frequency of the calls that force data to storage."""
    calls = {c["name"]: c for c in S["calls"]}
    syncs = [calls[n] for n in sorted(STORAGE_SYNC_CALLS) if n in calls]
    n = sum(c["count"] for c in syncs)
    t = sum(c["time_us"] for c in syncs)
    io_t = sum(c["time_us"] for c in S["calls"])
    writes = int(_files(D)["writes"].sum())
    share = t / io_t if io_t else 0.0
    by_time = n >= T["min_calls"] and share >= T["time_share"]
    by_count = n >= 100 and writes and n / writes >= T["per_write"]
    if not (by_time or by_count) or not _costs(S, T, t):
        return None
    return _finding(
        "sync-heavy", "warn", f"Sync calls take {100 * share:.0f}% of the I/O time ({n} calls)",
        share if by_time else n / writes, T["time_share"] if by_time else T["per_write"],
        dict(calls=[dict(name=c["name"], count=c["count"], time_us=c["time_us"]) for c in syncs],
             write_calls=writes, io_call_time_us=round(io_t, 3)),
        ["Sync once at the end of a file or a checkpoint, not after every write",
         "Where durability per write is not needed, drop the syncs (or O_SYNC/O_DSYNC opens)"])


def _rank_bytes(ranks: list, T: dict) -> dict | None:
    """MPI ranks moving very unequal bytes through MPI-IO (the bytes each asked for: a
    collective's aggregation does not move them between ranks here)."""
    if len(ranks) < 2:
        return None
    b = np.array([r["bytes_read"] + r["bytes_written"] for r in ranks], float)
    if b.max() <= 0 or b.max() / b.mean() < T["ratio"] or b.max() - b.mean() < T["min_bytes"]:
        return None
    ratio = float(b.max() / b.mean())
    g = sorted(ranks, key=lambda r: -(r["bytes_read"] + r["bytes_written"]))
    top = g[0]
    return _finding(
        "imbalance", "warn", f"Rank {top['rank']} moves {ratio:.1f}x the mean MPI-IO bytes of the {len(g)} ranks",
        ratio, T["ratio"],
        dict(role="MPI rank", processes=[dict(host=r["host"], pid=r["pid"], rank=r["rank"], data_io_us=r["data_us"],
                                              bytes_read=r["bytes_read"], bytes_written=r["bytes_written"])
                                         for r in g[:5] + (g[-3:] if len(g) > 5 else [])]),
        [f"Give every rank an equal share of the data (rank {top['rank']} holds the others up at each "
         "collective call)", "Check that one rank does not read or write for all (a rank-0 checkpoint, logging)"])


def imbalance(S, D, T):
    """Processes of one role (workers, forks) with very unequal I/O time on data. The ranks of
    an MPI job are weighed by the bytes each asks MPI-IO for, exact whatever the machine's load
    (their POSIX I/O is not theirs: a collective call's is done by a few aggregator ranks for
    all); a rank slow with the same bytes shows where it costs, in the others' waits for it
    (collective-wait)."""
    by_pid = D.data_by_pid
    ranks = (S.get("mpi") or {}).get("ranks", [])
    found = _rank_bytes(ranks, T)
    if found:
        return found
    in_mpi = {(r["host"], r["pid"]) for r in ranks}  # not weighed by time, nor their images before exec
    groups: dict = {}
    for p in S["processes"]:
        d = by_pid.get(p["pid"])
        if d and (p["host"], p["pid"]) not in in_mpi:
            groups.setdefault(p.get("role") or "process", []).append((d["time_us"], p, d))
    best = None
    for role, g in groups.items():
        if len(g) < 2:
            continue
        times = np.array([x[0] for x in g], float)
        if times.max() < T["min_time_s"] * 1e6:
            continue
        ratio = times.max() / times.mean()
        top = max(g, key=lambda x: x[0])[1]
        excess = times.max() - times.mean()  # what evening out could save the busiest
        if excess < T["min_share"] * (top.get("wall_us") or 1):
            continue
        if ratio >= T["ratio"] and (best is None or ratio > best[0]):
            best = (ratio, role, sorted(g, key=lambda x: -x[0]))
    if best is None:
        return None
    ratio, role, g = best
    who = f"The busiest {'' if role == 'process' else role + ' '}process"
    rows = [dict(host=p["host"], pid=p["pid"], rank=p.get("rank"), data_io_us=d["time_us"],
                 bytes_read=d["bytes_read"], bytes_written=d["bytes_written"], calls=d["calls"], cpu_us=p.get("cpu_us"))
            for _t, p, d in g[:5] + (g[-3:] if len(g) > 5 else [])]
    evidence = dict(role=role, processes=rows)
    if _same_io(g[0][2], [d for _t, _p, d in g[1:]], T["same_work"]):
        # the same calls and bytes as the others in more time: its I/O was slower, not more
        return _finding(
            "imbalance", "warn", f"{who} takes {ratio:.1f}x the mean data I/O time of its {len(g)} for the same "
            "calls and bytes: its calls were slower, not more", ratio, T["ratio"], evidence,
            ["Look at what sets it apart: its files on a slower or remote file system, a cold page cache where "
             "the others' was warm, its device or node", "Check the machine's load while it ran: on a busy CPU or "
             "disk the same calls take longer (the others' time is what they can take)"])
    return _finding(
        "imbalance", "warn", f"{who} does {ratio:.1f}x the mean data I/O time of its {len(g)}",
        ratio, T["ratio"], evidence,
        ["Spread the data evenly (a DistributedSampler, shards of equal size, more shards than workers)",
         "Check that one process does not read or write for all (logging, a rank-0 checkpoint)"])


def _no_more_work(top: dict, others: list, figures: list, tolerance: float) -> bool:
    """Each of `figures` (functions of a row) of `top` is at most `tolerance` times the others'
    mean: it did the others' work, so its longer time is not more work (imbalance, cpu-starved)."""
    return bool(others) and all(f(top) <= tolerance * sum(f(o) for o in others) / len(others) for f in figures)


def _same_io(top: dict, others: list, tolerance: float) -> bool:
    """The busiest process made no more data calls and moved no more bytes than the others."""
    return _no_more_work(top, others, [lambda d: d["calls"], lambda d: d["bytes_read"] + d["bytes_written"]],
                         tolerance)


def mpi_independent_small(S, D, T):
    """Small independent MPI-IO calls on a file the ranks share, where a collective call would
    let the MPI library merge them into few large requests (two-phase I/O)."""
    best, run = None, _run_us(S)
    for f in (S.get("mpi") or {}).get("files", []):
        n = f["independent_calls"]
        if f["processes"] < 2 or n < T["min_calls"]:
            continue
        mean = f["independent_bytes"] / n
        if mean < T["size"] and _costs(S, T, f["independent_time_us"], run) and \
                (best is None or f["independent_time_us"] > best["independent_time_us"]):
            best = f
    if best is None:
        return None
    mean = best["independent_bytes"] / best["independent_calls"]
    return _finding(
        "mpi-independent-small", "warn",
        f"{best['independent_calls']} independent MPI-IO calls of {mean / 1024:.1f} KiB on average to a file "
        f"{best['processes']} ranks share", mean, T["size"],
        dict(files=[dict(file=best["file"], processes=best["processes"], calls=best["independent_calls"],
                         time_us=best["independent_time_us"], bytes=best["independent_bytes"],
                         collective_calls=best["collective_calls"])]),
        ["Use the collective calls (MPI_File_write_at_all, MPI_File_read_all): the MPI library merges "
         "the ranks' small pieces into large requests by a few aggregators",
         "Or gather the data to fewer ranks and write larger blocks"])


def mpi_misaligned(S, D, T):
    """MPI-IO requests that touch a stripe more than their size needs (they start off a stripe
    boundary and cross one): each takes two storage servers' locks on Lustre, shares GPFS blocks
    with the neighbouring rank's request (Darshan's FILE_NOT_ALIGNED, Drishti's misaligned
    check, at the MPI-IO layer)."""
    t = D.mpi_calls
    if t is None:
        return None
    stripe = int(T["stripe"])
    name = t.column("name").to_pylist()
    counted = mpi.data_calls(name)[0] & np.array([c == "mpiio" for c in t.column("cat").to_pylist()], bool)
    off = pc.fill_null(t.column("offset"), -1).to_numpy(zero_copy_only=False)
    size = pc.fill_null(t.column("size"), 0).to_numpy(zero_copy_only=False)
    with_off = counted & (off >= 0)
    bad = with_off & mpi.misaligned(off, size, stripe)
    n, n_bad = int(with_off.sum()), int(bad.sum())
    bad_us = int(t.column("dur").to_numpy()[bad].sum()) / 1000
    if n < T["min_calls"] or not n_bad or not _costs(S, T, bad_us, _run_us(S)):
        return None
    share = n_bad / n
    if share < T["share"]:
        return None
    return _finding(
        "mpi-misaligned", "warn",
        f"{100 * share:.0f}% of the MPI-IO requests ({n_bad} of {n}) cross a {stripe / MiB:g} MiB stripe "
        "boundary they need not cross", share, T["share"],
        dict(calls=[dict(name="misaligned requests", calls=n_bad, time_us=round(bad_us, 3))], stripe=stripe),
        [f"Place each rank's blocks at multiples of the stripe size ({stripe / MiB:g} MiB here: `lfs getstripe` "
         "gives it on Lustre), padding records or headers if needed",
         "Set the MPI-IO hints striping_unit and cb_buffer_size to the stripe size (MPI_Info at MPI_File_open); "
         "with HDF5, H5Pset_alignment"])


def _straggler(S, T):
    """The ranks, the share of their run spent waiting in collective calls for a slower rank,
    and the rank that caused most of it, when the waiting passes T's share, time and
    concentration (collective-wait's and cpu-starved's common test); else None."""
    m = S.get("mpi") or {}
    ranks = [r for r in m.get("ranks", []) if r["run_us"]]
    if len(ranks) < 2:
        return None
    wait = sum(r["slow_wait_us"] for r in ranks)
    run = sum(r["run_us"] for r in ranks)
    share = wait / run if run else 0.0
    if share < T["share"] or wait < T["min_time_s"] * 1e6:
        return None
    late = max(ranks, key=lambda r: r["caused_wait_us"])
    caused = late["caused_wait_us"] / wait if wait else 0.0
    if caused < T["caused"]:
        return None
    return ranks, share, late, caused


def _starved(ranks: list, late: dict, T: dict) -> bool:
    """Whether the late rank's host, not its work, explains it: it made no more I/O calls and
    moved no more bytes than T's `same_work` times the other ranks' mean; it used no more CPU
    outside MPI calls (the others' polling while they wait is the MPI library's) than that, or
    its CPU beyond the others' mean is at most `extra_cpu` of that mean and, run at the share
    of a CPU it got (its CPU time over its wall time), takes at most `extra_cpu` of the time it
    kept each other rank waiting (measured under two busy loops: a starved rank of 4 on 2
    cores, doing the others' work, used 21 ms against their 16.7 and kept each waiting 60 ms;
    a rank computing 4x as much is a straggler whatever the host); and its host had a task
    waiting for a CPU (PSI, from MPI_Init's end) at least as long as that time. A rank late
    with the same work on a host short of CPUs was short of CPU time; evening out the work
    would change nothing."""
    others = [r for r in ranks if r is not late]
    if late.get("host_cpu_wait_us") is None or not others:
        return False
    kept = late["caused_wait_us"] / len(others)

    def io_bytes(r):
        return r["bytes_read"] + r["bytes_written"] + r["posix_bytes_read"] + r["posix_bytes_written"]

    if not _no_more_work(late, others, [lambda r: r.get("io_events", 0), io_bytes], T["same_work"]) or \
            late["host_cpu_wait_us"] < kept:
        return False
    if any(r.get("own_cpu_us") is None for r in ranks):  # unknown: as the same
        return True
    mean = sum(r["own_cpu_us"] for r in others) / len(others)
    got = min(late["cpu_us"] / late["wall_us"], 1.0) if late.get("cpu_us") and late.get("wall_us") else 1.0
    extra = late["own_cpu_us"] - mean
    return late["own_cpu_us"] <= T["same_work"] * mean or \
        (extra <= T["extra_cpu"] * mean and extra / got <= T["extra_cpu"] * kept)


def _rank_rows(ranks: list) -> list:
    return [dict(host=r["host"], pid=r["pid"], rank=r["rank"], caused_wait_us=r["caused_wait_us"],
                 slow_wait_us=r["slow_wait_us"], data_us=r["data_us"],
                 bytes=r["bytes_read"] + r["bytes_written"], io_calls=r.get("io_events", 0),
                 own_cpu_us=r.get("own_cpu_us"), host_cpu_wait_us=r.get("host_cpu_wait_us"), run_us=r["run_us"])
            for r in sorted(ranks, key=lambda r: -r["caused_wait_us"])[:8]]


def collective_wait(S, D, T):
    """Ranks standing still in collective calls (MPI-IO's _all calls, open, close, sync, MPI's
    barriers and reductions) while a slower rank finishes its work since the previous collective:
    the time a straggler costs the others. The k-th call of a name (and file) on each rank is one
    operation; MPI's start and end are left out (their length is the launch's), and so is the
    waiting for a rank that left the previous collective late (an aggregator: the collective's
    own cost, not a straggler's). A straggler with the others' work on a host short of CPUs is
    cpu-starved's instead."""
    found = _straggler(S, T)
    if found is None:
        return None
    ranks, share, late, caused = found
    if _starved(ranks, late, T):
        return None
    m = S["mpi"]
    return _finding(
        "collective-wait", "warn",
        f"Ranks wait {100 * share:.0f}% of their time (MPI_Init to MPI_Finalize) in collective calls for a "
        f"slower rank; rank {late['rank']} holds them up ({100 * caused:.0f}% of the waiting)", share, T["share"],
        dict(processes=_rank_rows(ranks),
             calls=[dict(name=o["name"], file=o["file"], slowest_rank=o["slowest"], wait_us=o["wait_us"])
                    for o in m["collective_ops"]["top"]]),
        [f"Look at what rank {late['rank']} does between the collective calls (its I/O, its compute): "
         "the others wait for it",
         "Even out the work per rank, or overlap it: non-blocking (MPI_File_iwrite_at_all) or split "
         "collectives let the early ranks go on"])


def cpu_starved(S, D, T):
    """The ranks wait in collective calls for a rank that did the same work as they did (I/O
    calls, bytes, CPU time) while its host had tasks waiting for a CPU: the node ran more
    runnable threads than it has cores (other programs, more ranks than cores), and the late rank
    got less CPU. The cause is the machine's, not the rank's work. Outside MPI: processes that
    waited for a CPU a good part of their run (_short_of_cpus)."""
    found = _straggler(S, T)
    if found is None:
        return _short_of_cpus(S, T, ranks_too=True)
    ranks, share, late, _caused = found
    if not _starved(ranks, late, T):
        return _short_of_cpus(S, T)
    short = late["host_cpu_wait_us"] / late["run_us"] if late["run_us"] else 0.0
    return _finding(
        "cpu-starved", "warn",
        f"Ranks wait {100 * share:.0f}% of their time in collective calls for rank {late['rank']}, which did "
        f"the same work as the others on a host short of CPUs ({100 * min(short, 1.0):.0f}% of its run with "
        "a task waiting for one)", share, T["share"],
        dict(processes=_rank_rows(ranks)),
        ["Run no more ranks and threads per node than it has cores (mpirun --map-by core, Slurm "
         "--ntasks-per-node, OMP_NUM_THREADS), and bind them (--bind-to core)",
         f"Look for other programs on rank {late['rank']}'s node (a shared node's other jobs, a busy "
         "daemon): the rank waited for a CPU, not for its I/O"])


def _short_of_cpus(S, T, ranks_too: bool = False):
    """Processes whose main thread was runnable with no CPU to run on (the tracer's cpu_wait)
    for a good share of their wall time: more busy processes and threads than the CPUs they
    have, or other programs beside them. Time the job spent neither computing nor in I/O, that
    neither faster storage nor more workers would give back. MPI ranks only with `ranks_too`
    (no straggler to tell: every rank short alike), and only for their waiting outside MPI
    calls (_rank_cpu_wait): a library polling in its waits keeps every rank runnable."""
    hits = []
    for p in S["processes"]:
        wait, wall = p.get("cpu_wait_us"), p.get("wall_us", 0)
        if wait is None or not wall or p.get("mpi_cpu_us") is not None:
            continue
        if wait >= T["min_wait_s"] * 1e6 and wait / wall >= T["wait_share"]:
            hits.append((wait / wall, p))
    for wait, run, p in _rank_cpu_wait(S) if ranks_too else ():
        if wait >= T["min_wait_s"] * 1e6 and wait / run >= T["wait_share"]:
            hits.append((wait / run, dict(p, wall_us=run, cpu_wait_us=round(wait, 3), run=True)))
    if not hits:
        return None
    hits.sort(key=lambda h: (-h[0], h[1]["pid"]))
    v, worst = hits[0]
    total = sum(p["cpu_wait_us"] for _, p in hits)
    waited = f"{worst['cpu_wait_us'] / 1e6:.1f} s of {worst['wall_us'] / 1e6:.1f} s"
    ranks = all(p.get("rank") is not None and p.get("mpi_cpu_us") is not None for _, p in hits)
    who, where = (f"rank {worst['rank']}", " outside MPI calls") if ranks else (f"pid {worst['pid']}", "")
    title = (f"{who} waited for a CPU{where} {100 * v:.0f}% of its run ({waited})" if len(hits) == 1
             else f"{len(hits)} {'MPI ranks' if ranks else 'processes'} waited for a CPU{where}, up to "
                  f"{100 * v:.0f}% of their run ({who}: {waited})")
    todo = (["Run no more ranks and threads per node than it has cores (mpirun --map-by core, Slurm "
             "--ntasks-per-node, OMP_NUM_THREADS), and bind them (--bind-to core)"] if ranks else
            ["Run no more busy processes and threads than the CPUs the job has: loader or pool workers "
             "(num_workers, Pool size), threads per process (OMP_NUM_THREADS, torch.set_num_threads), and "
             "the CPUs asked of the batch system (Slurm --cpus-per-task)"])
    return _finding(
        "cpu-starved", "warn", title + ": the host's CPUs were short", v, T["wait_share"],
        dict(processes=[dict(host=p["host"], pid=p["pid"], **({"rank": p["rank"]} if p.get("rank") is not None else {}),
                             role=p.get("role"), **{"run_us" if p.get("run") else "wall_us": p["wall_us"]},
                             cpu_us=p.get("cpu_us"), cpu_wait_us=p["cpu_wait_us"], wait_share=round(s, 6))
                        for s, p in hits[:10]],
             cpu_wait_us=round(total, 3)),
        [*todo,
         "Look for other programs on the host (a shared node's other jobs, a busy daemon): the time "
         "waiting for a CPU is neither compute nor I/O, and faster storage would not give it back"])


def _rank_cpu_wait(S) -> list:
    """(waiting for a CPU outside MPI calls, run, process) of each MPI rank, its run from
    MPI_Init's end to MPI_Finalize's start: of the time outside MPI calls, what was neither its
    own CPU time nor POSIX I/O, at most its cpu_wait (a rank polling in MPI waits is runnable
    there too, which says nothing of its work)."""
    procs = {(p["host"], p["pid"]): p for p in S["processes"] if p.get("mpi_cpu_us") is not None}
    out = []
    for r in (S.get("mpi") or {}).get("ranks", []):
        p = procs.get((r["host"], r["pid"]))
        if p is None or p.get("cpu_wait_us") is None or r.get("own_cpu_us") is None or not r["run_us"]:
            continue
        outside = r["run_us"] - r["mpi_us"] - r["mpiio_us"] - r["posix_us"] - r["own_cpu_us"]
        out.append((min(p["cpu_wait_us"], max(outside, 0.0)), r["run_us"], p))
    return out


def metadata_storm(S, D, T):
    """The same data files opened and stat'ed by many processes: every rank of a job reading the
    same inputs' metadata (configs, a dataset's index, a mesh), each call a request to the shared
    file system's metadata servers, multiplied by the ranks. (The software's own files are
    software-loading's.)"""
    F = _files(D)
    procs = S["job"]["processes"]
    many = max(T["min_processes"], T["share"] * procs)
    m = F.is_class("data") & (F["processes"] >= many)
    if not m.any():
        return None
    calls = int(F["metadata_count"][m].sum())
    if calls < T["min_calls"]:
        return None
    t = py_sum(F["metadata_time_us"][m])
    top = F.rows(top_rows(m, [-F["metadata_count"]], None, 10))
    return _finding(
        "metadata-storm", "warn",
        f"{int(m.sum())} data file(s) opened or stat'ed by {int(F['processes'][m].max())} processes each: "
        f"{calls} metadata calls on them", calls, T["min_calls"],
        dict(files=[_file_ev(r, metadata_calls=r["metadata_count"], metadata_time_us=r["metadata_time_us"],
                             opens=r["opens"]) for r in top],
             metadata_calls=calls, metadata_time_us=round(t, 3)),
        ["Read such files once (rank 0) and broadcast what they hold (MPI_Bcast, "
         "torch.distributed.broadcast_object_list), or stage them to node-local storage",
         "Keep files open and stat results cached instead of asking again per step"])


def software_loading(S, D, T):
    """The software's own loading (imports from site-packages, the interpreter's prefix): on a
    shared file system, thousands of stats and opens per process at start-up."""
    sw = S.get("file_classes", {}).get("software")
    wall = S["job"].get("wall_us", 0)
    if not sw or not wall:
        return None
    share = sw["time_us"] / wall
    if sw["count"] < T["min_calls"] or share < T["time_share"]:
        return None
    F = _files(D)
    top = F.rows(top_rows(F.is_class("software"), [-F["time_us"]], None, 5))
    return _finding(
        "software-loading", "info" if share < 2 * T["time_share"] else "warn",
        f"Loading the software takes {100 * share:.0f}% of the job's wall time ({sw['count']} calls on "
        f"{sw['files']} files)", share, T["time_share"],
        dict(files=sw["files"], calls=sw["count"], time_us=sw["time_us"], metadata_calls=sw["metadata_count"],
             top=[_file_ev(r) for r in top[:5]]),
        ["Install the environment on node-local storage or in a container image (squashfs) rather "
         "than on the shared file system", "Import heavy modules once per process; spawned workers "
         "import everything again (fork or forkserver start methods share the parent's imports)"])


def pipe_traffic(S, D, T):
    """Data passed between processes through pipes and sockets (pickled batches of a
    multiprocessing pool): copied twice, and the reads wait for the sender."""
    ps = S.get("file_classes", {}).get("pipe-socket")
    data = S.get("file_classes", {}).get("data", {})
    if not ps:
        return None
    moved = max(ps["bytes_read"], ps["bytes_written"])
    base = data.get("bytes_read", 0)
    if moved < T["min_bytes"] or moved < T["share"] * base or not _costs(S, T, ps["time_us"]):
        return None
    v = moved / base if base else float(moved)
    F = _files(D)
    top = F.rows(top_rows(F.is_class("pipe-socket"), [-F["time_us"]], None, 5))
    return _finding(
        "pipe-traffic", "info", f"{moved / MiB:.1f} MiB pass between processes through pipes or sockets "
        f"({v:.1f}x the bytes read from data files)", v, T["share"],
        dict(bytes_read=ps["bytes_read"], bytes_written=ps["bytes_written"], calls=ps["count"], time_us=ps["time_us"],
             files=[_file_ev(r) for r in top[:5]]),
        ["Hand batches over in shared memory (torch DataLoader's workers do; multiprocessing.shared_memory)",
         "Or read and decode in the training process's threads when decoding is light"])


def _counters(D: Job):
    """The per-file counters of an input that counts (Darshan's: model.Job.file_counters) as
    numpy columns and their file names, or None."""
    t = D.file_counters
    if t is None or not t.num_rows:
        return None
    return {k: t.column(k).to_numpy(zero_copy_only=False) for k in t.column_names}


def misaligned(S, D, T):
    """POSIX requests whose file offset is not a multiple of the file system's block (Darshan's
    POSIX_FILE_NOT_ALIGNED against POSIX_FILE_ALIGNMENT: Lustre's stripe, GPFS's block), or
    whose buffer is not aligned in memory: a request off a block boundary makes the file system
    read or lock the blocks it half covers (Drishti's misaligned checks)."""
    C = _counters(D)
    if C is None:
        return None
    calls = int(C["data_calls"].sum())
    f_bad, m_bad = int(C["file_not_aligned"].sum()), int(C["mem_not_aligned"].sum())
    if not calls:
        return None
    f_share, m_share = f_bad / calls, m_bad / calls
    share = max(f_share, m_share)
    bad = max(f_bad, m_bad)
    # what they cost: each file's I/O time shared out by its misaligned calls
    per = np.maximum(C["file_not_aligned"], C["mem_not_aligned"])
    cost = float((C["time_us"] * per / np.maximum(C["data_calls"], 1)).sum())
    if share < T["share"] or bad < T["min_calls"] or not _costs(S, T, cost):
        return None
    which = "file offsets" if f_share >= m_share else "memory buffers"
    block = int(C["file_alignment"].max())
    top = np.argsort(-per, kind="stable")[:10]
    files = [dict(file=C["file"][i], processes=int(C["ranks"][i]), calls=int(C["data_calls"][i]),
                  time_us=round(float(C["time_us"][i]), 3), file_not_aligned=int(C["file_not_aligned"][i]),
                  mem_not_aligned=int(C["mem_not_aligned"][i]), alignment=int(C["file_alignment"][i]))
             for i in top if per[i] > 0]
    return _finding(
        "misaligned", "warn",
        f"{100 * share:.0f}% of the POSIX data calls ({bad} of {calls}) are not aligned ({which}; the file "
        f"system's block: {block} bytes)", share, T["share"],
        dict(calls=calls, file_not_aligned=f_bad, mem_not_aligned=m_bad, file_alignment=block,
             mem_alignment=int(C["mem_alignment"].max()), time_us=round(cost, 3),
             share_of_wall=round(cost / _wall_us(S), 6), files=files),
        ["Place requests at multiples of the file system's block or stripe (`lfs getstripe` on Lustre), padding "
         "headers and records; with MPI-IO set striping_unit, with HDF5 H5Pset_alignment",
         "Fewer, bigger requests cross fewer block boundaries (see small-reads and small-writes)"])


def stdio_heavy(S, D, T):
    """Data moved through stdio (fread, fwrite, fprintf): a buffered, single-stream interface
    that serializes each rank's I/O through a small buffer and cannot aggregate across ranks
    (Drishti's STDIO check)."""
    cat = {name: c for _n, name, c, fam in CALL_TABLE if fam in ("read", "write")}
    by = {"stdio": [0, 0.0], "posix": [0, 0.0]}
    for c in S["calls"]:
        k = cat.get(c["name"])
        if k in by:
            by[k][0] += c["bytes"] or 0
            by[k][1] += c["time_us"]
    stdio_b, total = by["stdio"][0], by["stdio"][0] + by["posix"][0]
    if not total:
        return None
    share = stdio_b / total
    t = by["stdio"][1]
    if share < T["share"] or stdio_b < T["min_bytes"] or not _costs(S, T, t):
        return None
    ev = dict(bytes_stdio=stdio_b, bytes_posix=by["posix"][0], time_us=round(t, 3),
              share_of_wall=round(t / _wall_us(S), 6))
    C = _counters(D)
    if C is not None:
        b = C["stdio_bytes_read"] + C["stdio_bytes_written"]
        top = [i for i in np.argsort(-b, kind="stable")[:10] if b[i] > 0]
        ev["files"] = [dict(file=C["file"][i], processes=int(C["ranks"][i]), calls=int(C["stdio_calls"][i]),
                            bytes_read=int(C["stdio_bytes_read"][i]), bytes_written=int(C["stdio_bytes_written"][i]))
                       for i in top]
    return _finding(
        "stdio-heavy", "warn",
        f"{100 * share:.0f}% of the bytes ({stdio_b / MiB:.1f} MiB) go through stdio (fread, fwrite, fprintf)",
        share, T["share"], ev,
        ["Move bulk data with POSIX read/write of large blocks, or MPI-IO/HDF5 for files the ranks share; keep "
         "stdio for logs", "If stdio stays, give it a big buffer (setvbuf) so each call is not a small write"])


def file_imbalance(S, D, T):
    """Ranks moving very unequal bytes, or spending very unequal time, on a file they share:
    for a file every rank used, Darshan's fastest and slowest rank (Drishti's stragglers: their
    bytes or time apart by more than `share` of the file's); for a file some ranks used, the
    most and least bytes a rank read or wrote (Drishti's individual imbalance)."""
    C = _counters(D)
    if C is None:
        return None
    rows = []
    tot_b = (C["bytes_read"] + C["bytes_written"]).astype(float)
    gap_b = np.abs(C["slowest_rank_bytes"] - C["fastest_rank_bytes"]).astype(float)
    gap_t = np.abs(C["slowest_rank_time_us"] - C["fastest_rank_time_us"])
    shared = C["shared"] == 1
    for i in np.flatnonzero(shared):
        kinds = []
        if tot_b[i] and gap_b[i] / tot_b[i] > T["share"] and gap_b[i] >= T["min_bytes"]:
            kinds.append(("bytes", gap_b[i] / tot_b[i]))
        if C["time_us"][i] and gap_t[i] / C["time_us"][i] > T["share"] and gap_t[i] >= T["min_time_s"] * 1e6:
            kinds.append(("time", gap_t[i] / C["time_us"][i]))
        for kind, v in kinds:
            rows.append((v, kind, i))
    several = (~shared) & (C["ranks"] > 1)
    for d in ("read", "written"):
        hi, lo = C[f"rank_max_{d}"].astype(float), C[f"rank_min_{d}"].astype(float)
        for i in np.flatnonzero(several & (hi > 0)):
            v = (hi[i] - lo[i]) / hi[i]
            if v > T["rank_share"] and hi[i] - lo[i] >= T["min_bytes"]:
                rows.append((v, f"bytes {d}", i))
    if not rows:
        return None
    files_t = sum(float(C["time_us"][i]) for i in {r[2] for r in rows})
    if not _costs(S, T, files_t):
        return None
    rows.sort(key=lambda r: (-r[0], C["file"][r[2]]))
    v = rows[0][0]
    ev_rows = []
    for share, kind, i in rows[:10]:
        r = dict(file=C["file"][i], processes=int(C["ranks"][i]), kind=kind, imbalance=round(float(share), 6),
                 time_us=round(float(C["time_us"][i]), 3), bytes_read=int(C["bytes_read"][i]),
                 bytes_written=int(C["bytes_written"][i]))
        if kind in ("bytes", "time"):
            r.update(fastest_rank=int(C["fastest_rank"][i]), fastest_rank_bytes=int(C["fastest_rank_bytes"][i]),
                     fastest_rank_time_us=round(float(C["fastest_rank_time_us"][i]), 3),
                     slowest_rank=int(C["slowest_rank"][i]), slowest_rank_bytes=int(C["slowest_rank_bytes"][i]),
                     slowest_rank_time_us=round(float(C["slowest_rank_time_us"][i]), 3))
        else:
            d = kind.split()[1]
            r.update(most_rank=int(C[f"max_{d}_rank"][i]), bytes_most=int(C[f"rank_max_{d}"][i]),
                     least_rank=int(C[f"min_{d}_rank"][i]), bytes_least=int(C[f"rank_min_{d}"][i]))
        ev_rows.append(r)
    n_files = len({r[2] for r in rows})
    top = ev_rows[0]
    who = (f"rank {top['slowest_rank']} slowest" if "slowest_rank" in top else f"rank {top['most_rank']} the most")
    return _finding(
        "file-imbalance", "warn",
        f"Ranks share {n_files} file(s) unevenly: up to {100 * v:.0f}% apart in {top['kind']} ({who}, on "
        f"{top['file']})", v, T["share"],
        dict(files=ev_rows, time_us=round(files_t, 3), share_of_wall=round(files_t / _wall_us(S), 6)),
        ["Give every rank an equal part of the file (block sizes, the decomposition), or let fewer ranks write "
         "bigger parts (MPI-IO collective buffering, cb_nodes)", "A rank slow with the same bytes: look at its node "
         "and the file system's servers it hits (a slow OST: `lfs getstripe` of the file)"])


def mpi_blocking(S, D, T):
    """MPI-IO reads (or writes) that are all blocking while they take much of the job's time:
    non-blocking calls (MPI_File_iwrite_at, iwrite_all, split collectives) would let the ranks
    compute meanwhile (Drishti's blocking checks)."""
    m = S.get("mpi") or {}
    dirs = m.get("directions")
    if dirs is None and D.mpi_calls is not None:
        t = D.mpi_calls
        name = t.column("name").to_pylist()
        counted, is_r, is_w = mpi.data_calls(name)
        io = np.array([c == "mpiio" for c in t.column("cat").to_pylist()], bool) & counted
        nb = np.array([n.startswith("MPI_File_i") for n in name], bool)
        dur = t.column("dur").to_numpy()
        dirs = {d: dict(calls=int((io & x).sum()), nonblocking=int((io & x & nb).sum()),
                        time_us=int(dur[io & x].sum()) / 1000) for d, x in (("read", is_r), ("write", is_w))}
    if not dirs:
        return None
    ranks_run, run = _ranks_run_us(S), _run_us(S)
    of = "the ranks' time from MPI_Init to MPI_Finalize" if ranks_run else "the processes' wall time"
    hits = [(d, x) for d, x in dirs.items()
            if x["calls"] >= max(T["min_calls"], 1) and not x["nonblocking"] and _costs(S, T, x["time_us"], run)]
    if not hits:
        return None
    t = sum(x["time_us"] for _d, x in hits)
    kinds = " and ".join("reads" if d == "read" else "writes" for d, _x in hits)
    return _finding(
        "mpi-blocking", "info" if t < 0.2 * run else "warn",
        f"All MPI-IO {kinds} are blocking ({sum(x['calls'] for _d, x in hits)} calls, "
        f"{100 * t / run:.0f}% of {of})", t / run, T["min_share"],
        dict(calls=[dict(name=f"MPI-IO {d}s", calls=x["calls"], nonblocking=x["nonblocking"], time_us=x["time_us"])
                    for d, x in hits], **(dict(share_of_run=round(t / run, 6)) if ranks_run else {}),
             share_of_wall=round(t / _wall_us(S), 6)),
        ["Start the I/O and compute meanwhile: MPI_File_iwrite_at_all / MPI_File_iread_at_all (MPI 3.1), split "
         "collectives (MPI_File_write_all_begin/end), then MPI_Wait", "With HDF5, the asynchronous VOL connector"])


def mpiio_unused(S, D, T):
    """A job of MPI ranks whose I/O goes through POSIX or stdio alone: MPI-IO (or HDF5 or
    PnetCDF over it) would let the ranks' requests be aggregated (collective buffering) and
    tuned with hints (Drishti's interface check)."""
    if (S.get("mpi") or {}).get("calls"):
        return None
    ranks = {p["rank"] for p in S["processes"] if p.get("rank") is not None}
    data = S.get("file_classes", {}).get("data", {})
    moved = data.get("bytes_read", 0) + data.get("bytes_written", 0)
    if len(ranks) < T["min_ranks"] or moved < T["min_bytes"] or not _costs(S, T, data.get("time_us", 0.0)):
        return None
    shared = int((_files(D)["processes"][_files(D).is_class("data")] > 1).sum())
    return _finding(
        "mpiio-unused", "info",
        f"{len(ranks)} rank(s) move {moved / MiB:.1f} MiB through POSIX or stdio, without MPI-IO "
        f"({shared} data file(s) shared by ranks)", len(ranks), T["min_ranks"],
        dict(ranks=len(ranks), bytes=moved, time_us=data.get("time_us", 0.0), shared_files=shared,
             share_of_wall=round(data.get("time_us", 0.0) / _wall_us(S), 6)),
        ["For files the ranks share, MPI-IO collective calls (or HDF5/PnetCDF on MPI-IO) aggregate their requests "
         "into large ones and take hints (striping, cb_nodes)", "A file per rank of large sequential blocks "
         "needs none of this: the finding is about shared files and small requests"])


PARALLEL_FILES = 100_000  # files from which the rules run two at a time

RULES = {"io-bound": io_bound, "small-reads": small_reads, "small-writes": small_writes,
         "random-reads": random_reads, "random-writes": random_writes, "metadata-heavy": metadata_heavy,
         "redundant-reads": redundant_reads, "checkpoint-stall": checkpoint_stall, "sync-heavy": sync_heavy,
         "imbalance": imbalance, "software-loading": software_loading, "pipe-traffic": pipe_traffic,
         "mpi-independent-small": mpi_independent_small, "mpi-misaligned": mpi_misaligned,
         "collective-wait": collective_wait, "cpu-starved": cpu_starved, "metadata-storm": metadata_storm,
         "misaligned": misaligned,
         "stdio-heavy": stdio_heavy, "file-imbalance": file_imbalance, "mpi-blocking": mpi_blocking,
         "mpiio-unused": mpiio_unused}


def per_sample_files(D: Job, T: dict) -> np.ndarray:
    """The files of the file-per-sample pattern (metadata-heavy's thresholds), as a mask of the
    file rows, when the job has it: small reads and jumps within such files are its symptoms,
    not findings apart."""
    F = _files(D)
    uo, reads = F["use_opens"], F["reads"]
    m = F.is_class("data") & (uo != 0) & (reads != 0)
    q = np.where(m, uo, 1)
    m &= (reads / q <= T["per_sample_reads"]) & (F["bytes_read"] / q <= T["per_sample_bytes"])
    return m if int(m.sum()) >= T["per_sample_files"] else np.zeros(len(F), bool)


def findings(job: Job, th: dict | None = None) -> list[dict]:
    """Every rule's finding, most severe first (then by how far past its threshold)."""
    th = th or thresholds()
    S = job.summary
    job.per_sample = per_sample_files(job, th["metadata-heavy"]) \
        if th["metadata-heavy"]["enabled"] else np.zeros(len(job.files), bool)
    # an input that cannot tell what a rule needs (a Darshan log's counters) names it skipped
    skipped = (S.get("darshan") or {}).get("rules_skipped", {})
    todo = [(rule, th[rid]) for rid, rule in RULES.items() if th[rid]["enabled"] and rid not in skipped]
    if len(job.files) >= PARALLEL_FILES and (os.cpu_count() or 1) > 1:
        # the rules only read the job; over many files each is gathers and sums of columns that
        # release the GIL: two at a time (a million files: 0.38-0.47 -> 0.27-0.34 s)
        with ThreadPoolExecutor(2) as pool:
            found = list(pool.map(lambda r: r[0](S, job, r[1]), todo))
    else:
        found = [rule(S, job, t) for rule, t in todo]
    out = [f for f in found if f is not None]

    def key(f):
        over = f["value"] / f["threshold"] if f["threshold"] else 0.0
        return SEVERITIES.index(f["severity"]), -over, f["id"]

    return sorted(out, key=key)
