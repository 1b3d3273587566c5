"""Flows (arrows) between a parent's slices and its children's, found on columns.

Which arrows to draw comes from the process tree (labels.py); where they go is decided while
a file's batches go by, with bounded memory:

* a `fork` slice (cat `process`, name `fork`/`vfork`) starts the arrow to the child whose pid
  it returned;
* a spawned child (no fork event) gets its arrow from the parent's latest slice that starts
  at or before the child's start (the first such slice in file order when several start at
  that ns);
* the arrow ends at the child's earliest slice (the first one in file order among equals),
  in the first file of the child.

A candidate slice of the last two kinds is held back (the writer keeps it encoded) until a
better one comes or the file ends: at most one held slice per arrow, whatever the file's
size; a replaced candidate is written at once, the winners at the end with their arrows.
"""

from __future__ import annotations

import numpy as np

from .filters import codes_or_null, phases

FORK_NAMES = ("fork", "vfork")


class Flows:
    def __init__(self, flow_in: int, fork_flows: dict[int, int],
                 spawn_flows: list[tuple[int, int]]):
        self.flow_in = flow_in  # the arrow ending at this file's earliest slice (0: none)
        pids = sorted(fork_flows)
        self.fork_pids = np.array(pids, np.int64)
        self.fork_ids = np.array([fork_flows[p] for p in pids], np.uint64)
        self.starts = np.array([s for s, _ in spawn_flows], np.int64)  # sorted, ns
        self.spawn_ids = [i for _, i in spawn_flows]
        self.best_ts = np.zeros(len(spawn_flows), np.int64)
        self.best_slot = [-1] * len(spawn_flows)  # the writer's held slot per spawned child
        self.first_ts = 0
        self.first_slot = -1
        self.drawn_out: list[int] = []
        self.drawn_in: list[int] = []
        self.active = bool(flow_in or pids or spawn_flows)

    def batch(self, cols, rows: np.ndarray, writer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows of a batch to write now (held candidates taken out), and the fork arrows
        among them: (rows, flow_rows, flow_ids)."""
        no_flows = np.zeros(0, np.int64), np.zeros(0, np.uint64)
        xs = rows[phases(cols, ("X",))[rows]]
        if not len(xs):
            return (rows,) + no_flows
        f_rows, f_ids = self._forks(cols, xs) if len(self.fork_pids) else no_flows
        ts = cols.ints("ts_ns")
        ts = ts[xs] if ts is not None else np.zeros(len(xs), np.int64)
        new: dict[int, list] = {}  # row -> what it becomes a candidate for (j, or -1: first)
        if len(self.starts):
            order = np.argsort(ts, kind="stable")
            sts = ts[order]
            last = np.searchsorted(sts, self.starts, "right") - 1  # latest start <= the child's
            for j in np.flatnonzero(last >= 0).tolist():
                t = int(sts[last[j]])
                if self.best_slot[j] < 0 or t > self.best_ts[j]:
                    first_at_t = int(np.searchsorted(sts, t, "left"))  # earliest in file order
                    new.setdefault(int(xs[order[first_at_t]]), []).append(j)
                    self.best_ts[j] = t
        if self.flow_in:
            i = int(np.argmin(ts))
            if self.first_slot < 0 or ts[i] < self.first_ts:
                new.setdefault(int(xs[i]), []).append(-1)
                self.first_ts = int(ts[i])
        if not new:
            return rows, f_rows, f_ids
        replaced = []
        for row, what in new.items():
            flows = f_ids[f_rows == row].tolist()
            slot = writer.hold(cols, row, flows)
            for j in what:
                old = self.first_slot if j < 0 else self.best_slot[j]
                if old >= 0:
                    replaced.append(old)
                if j < 0:
                    self.first_slot = slot
                else:
                    self.best_slot[j] = slot
        held = set(self.best_slot) | {self.first_slot}
        for slot in dict.fromkeys(replaced):  # no longer a candidate for any arrow: write it
            if slot not in held:
                writer.release(slot)
        keep = ~np.isin(rows, list(new))
        fk = ~np.isin(f_rows, list(new))
        return rows[keep], f_rows[fk], f_ids[fk]

    def _forks(self, cols, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        names = cols.dictionary("name")
        cats = cols.dictionary("cat")
        fork = np.array([n in FORK_NAMES for n in names] + [False], np.bool_)
        process = np.array([c == "process" for c in cats] + [False], np.bool_)
        ret = cols.ints("ret")
        if ret is None or not fork.any() or not process.any():
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        m = (fork[codes_or_null(cols, "name", len(names))[xs]]
             & process[codes_or_null(cols, "cat", len(cats))[xs]])
        valid = cols.int_valid("ret")
        if valid is not None:
            m &= valid[xs]
        cand = xs[m]
        pid = ret[cand]
        pos = np.minimum(np.searchsorted(self.fork_pids, pid), len(self.fork_pids) - 1)
        hit = self.fork_pids[pos] == pid
        ids = self.fork_ids[pos[hit]]
        self.drawn_out += ids.tolist()
        return cand[hit], ids

    def finish(self, writer) -> None:
        """End of the file: attach the arrows to the winners and write them."""
        outs: dict[int, list[int]] = {}
        order: list[int] = []
        for j, slot in enumerate(self.best_slot):
            if slot >= 0:
                outs.setdefault(slot, []).append(self.spawn_ids[j])
                self.drawn_out.append(self.spawn_ids[j])
                order.append(slot)
        if self.first_slot >= 0:
            self.drawn_in.append(self.flow_in)
            order.append(self.first_slot)
        for slot in dict.fromkeys(order):
            writer.release(slot, self.flow_in if slot == self.first_slot else 0,
                           outs.get(slot, []))
