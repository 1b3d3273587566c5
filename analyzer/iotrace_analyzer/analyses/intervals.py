"""The union of time intervals that grows block by block, with bounded memory."""

from __future__ import annotations

import numpy as np


def _runs(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """s sorted: (first index of each maximal run of overlapping intervals, its start, its end)."""
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = len(s) - 1
    return first, s[first], reach[last]


class Union:
    """The union of intervals added block by block, kept as sorted disjoint intervals, so
    that blocks of one process's events in any order give the exact union length.

    The intervals are a list of chunks, each sorted and disjoint, in time order: a block's
    intervals merge with the chunks they overlap only (in practice the end of the last one:
    a thread's events come in the order they end), so adding costs the block, not the
    union so far. Memory: a pair of int64 per disjoint interval. Past `limit` of them the
    oldest are summed and dropped, up to `horizon` ns before the latest end seen: the tracer
    writes a thread's events in the order they end, at least once per flush interval, so
    later events start before that only when they lasted longer than the horizon (a long
    call, a Python span); their part before it is then not counted (as if covered). Below
    the limit (1M disjoint intervals per process, 16 MiB) the union is exact.
    """

    __slots__ = ("chunks", "count", "closed", "closed_until", "limit", "horizon")

    def __init__(self, limit: int = 1 << 20, horizon: int = 60_000_000_000):
        self.chunks: list = []  # (starts, ends), sorted and disjoint, chunk after chunk
        self.count = 0  # intervals in the chunks
        self.closed = 0  # length of the union before closed_until, dropped
        self.closed_until = np.iinfo(np.int64).min
        self.limit = limit
        self.horizon = horizon

    def add_runs(self, start: np.ndarray, end: np.ndarray) -> None:
        """Add disjoint sorted runs (grouped_runs' output for one group)."""
        if len(start) == 0:
            return
        if self.closed_until > np.iinfo(np.int64).min:
            start = np.maximum(start, self.closed_until)
            keep = end > start
            start, end = start[keep], end[keep]
            if len(start) == 0:
                return
        lo = int(start.min())
        # the chunks (and the part of a chunk) that the new intervals may overlap
        tail_s, tail_e = [start], [end]
        while self.chunks and int(self.chunks[-1][1][-1]) >= lo:
            cs, ce = self.chunks.pop()
            self.count -= len(cs)
            cut = int(np.searchsorted(ce, lo, side="left"))
            if cut > 0:
                self.chunks.append((cs[:cut], ce[:cut]))
                self.count += cut
                tail_s.append(cs[cut:])
                tail_e.append(ce[cut:])
                break
            tail_s.append(cs)
            tail_e.append(ce)
        if len(tail_s) == 1:
            rs, re = start, end
        else:
            s, e = np.concatenate(tail_s), np.concatenate(tail_e)
            order = np.argsort(s, kind="stable")
            _first, rs, re = _runs(s[order], e[order])
        self.chunks.append((rs, re))
        self.count += len(rs)
        if self.count > self.limit:
            self._close()

    def _close(self) -> None:
        """Sum and drop the oldest chunks, down to half the limit (see the class)."""
        newest_end = int(self.chunks[-1][1][-1])
        while self.count > self.limit // 2 and len(self.chunks) > 1:
            cs, ce = self.chunks[0]
            if int(ce[-1]) > newest_end - self.horizon and self.count <= self.limit:
                break
            self.chunks.pop(0)
            self.count -= len(cs)
            self.closed += int((ce - cs).sum())
            self.closed_until = int(ce[-1])

    def merge(self, other: Union) -> None:
        self.closed += other.closed
        self.closed_until = max(self.closed_until, other.closed_until)
        for cs, ce in other.chunks:
            self.add_runs(cs, ce)

    def length(self) -> int:
        return self.closed + sum(int((ce - cs).sum()) for cs, ce in self.chunks)
