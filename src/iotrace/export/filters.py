"""Cutting a big job down to what a person can look at.

`EventFilter` decides per event (--pid, --rank, --cat, --name, --from/--to,
--min-dur). --max-events is a time cut on top of it: `TimeHistogram` counts
the kept events per time bucket in a first pass, and `cutoff()` finds the
time before which at most N of them fall.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field


@dataclass
class EventFilter:
    pids: set[int] = field(default_factory=set)  # the traced pids (not Perfetto's)
    ranks: set[int] = field(default_factory=set)
    cats: list[str] = field(default_factory=list)  # glob patterns
    names: list[str] = field(default_factory=list)  # glob patterns
    window_from_us: float | None = None  # --from, since the job's start
    window_to_us: float | None = None  # --to, since the job's start
    start_us: float | None = None  # the window on the trace clock (set by at_job_start)
    end_us: float | None = None
    min_dur_us: float = 0.0
    max_events: int | None = None

    def keeps_process(self, pid: int, rank: int | None, ancestors: list[int]) -> bool:
        """--pid selects a process and its descendants; --rank a rank's whole tree."""
        if self.pids and not (self.pids & {pid, *ancestors}):
            return False
        return not self.ranks or rank in self.ranks

    def at_job_start(self, job_start_us: float) -> None:
        """Place the --from/--to window on the trace clock."""
        if self.window_from_us is not None:
            self.start_us = job_start_us + self.window_from_us
        if self.window_to_us is not None:
            self.end_us = job_start_us + self.window_to_us

    @property
    def per_event(self) -> bool:
        return bool(self.cats or self.names or self.min_dur_us
                    or self.start_us is not None or self.end_us is not None)

    def keeps(self, ev: dict) -> bool:
        """Whether a timed event (X, i, C) passes the per-event filters."""
        if self.cats and not _matches(ev.get("cat", ""), self.cats):
            return False
        if self.names and not _matches(ev.get("name", ""), self.names):
            return False
        ts = ev.get("ts", 0.0)
        dur = ev.get("dur", 0.0)
        if self.min_dur_us and ev.get("ph") == "X" and dur < self.min_dur_us:
            return False
        # An event is in the window when it overlaps it.
        if self.end_us is not None and ts > self.end_us:
            return False
        return self.start_us is None or ts + dur >= self.start_us

    # keeps() for many slices at once (the block-at-a-time .pftrace writer): the
    # same tests, so the two must change together.

    def keeps_cat(self, cat: str) -> bool:
        return not self.cats or _matches(cat, self.cats)

    def keeps_name(self, name: str) -> bool:
        return not self.names or _matches(name, self.names)

    def keeps_slice_times(self, ts, dur):
        """keeps()'s time tests for X events: ts and dur are float64 arrays of µs
        (the values orjson parses from the lines). A bool array."""
        import numpy as np

        keep = np.ones(len(ts), np.bool_)
        if self.min_dur_us:
            keep &= ~(dur < self.min_dur_us)
        if self.end_us is not None:
            keep &= ~(ts > self.end_us)
        if self.start_us is not None:
            keep &= ts + dur >= self.start_us
        return keep


def _matches(value: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


class TimeHistogram:
    """Event counts per time bucket, coarsened as needed to stay small."""

    MAX_BUCKETS = 1 << 16

    def __init__(self, shift: int = 0):
        self.shift = shift  # bucket width: 2**shift µs
        self.counts: dict[int, int] = {}

    def add(self, ts: float) -> None:
        key = int(ts) >> self.shift
        self.counts[key] = self.counts.get(key, 0) + 1
        if len(self.counts) > self.MAX_BUCKETS:
            self._coarsen(self.shift + 4)

    def merge(self, other: TimeHistogram) -> None:
        shift = max(self.shift, other.shift)
        self._coarsen(shift)
        for key, n in other.counts.items():
            key >>= shift - other.shift
            self.counts[key] = self.counts.get(key, 0) + n
        if len(self.counts) > self.MAX_BUCKETS:
            self._coarsen(self.shift + 4)

    def _coarsen(self, shift: int) -> None:
        counts: dict[int, int] = {}
        for key, n in self.counts.items():
            key >>= shift - self.shift
            counts[key] = counts.get(key, 0) + n
        self.counts, self.shift = counts, shift

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def cutoff(self, max_events: int) -> tuple[float | None, int]:
        """(t, kept): events with ts < t number `kept` <= max_events, the most a
        bucket boundary allows; t is None when everything fits."""
        if self.total <= max_events:
            return None, self.total
        kept = 0
        for key in sorted(self.counts):
            if kept + self.counts[key] > max_events:
                return float(key << self.shift), kept
            kept += self.counts[key]
        return None, kept  # not reached
