"""Lengths of unions of time intervals, per group, without a Python loop per interval."""

from __future__ import annotations

import numpy as np


def union_lengths(group: np.ndarray, start: np.ndarray, end: np.ndarray, n_groups: int,
                  presorted: bool = False) -> np.ndarray:
    """|∪ [start, end)| for each group 0..n_groups-1 (int64, same unit as the input).

    Groups are laid end to end on one axis (each shifted by its index times the whole span)
    so that one sort and one running maximum serve all of them. `presorted`: the input is
    already ordered by (group, start).
    """
    out = np.zeros(n_groups, np.int64)
    if len(start) == 0:
        return out
    if presorted:
        _add_segments(start, end, group, out)
        return out
    t0 = int(start.min())
    span = int(end.max()) - t0 + 1
    if span * n_groups < 2**62:
        shift = group.astype(np.int64) * span - t0
        s, e = start + shift, end + shift
        order = np.argsort(s, kind="stable")
        _add_segments(s[order], e[order], group[order], out)
    else:  # too many groups for one axis: one pass per group (groups are processes, not events)
        for g in np.unique(group):
            m = group == g
            order = np.argsort(start[m], kind="stable")
            _add_segments(start[m][order], end[m][order], group[m][order], out)
    return out


def _add_segments(s: np.ndarray, e: np.ndarray, g: np.ndarray, out: np.ndarray) -> None:
    """s sorted; add the length of each maximal run of overlapping intervals to out[group]."""
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = len(s) - 1
    np.add.at(out, g[first], reach[last] - s[first])
