"""The training loop's story from the events iotrace.auto (or the user) records: epochs, the
wait for each batch, samples read by the loader workers, checkpoints and data-library calls.

Categories read (docs/auto.md): `dataloader` (`epoch` per pass, `fetch` per batch, `sample`
per item), `checkpoint` (torch.save / torch.load) and `data` (numpy, h5py, PIL, parquet,
pandas calls). Per epoch of each loader: its length, batches, the time the loop waited for
data (the fetches inside it) and the rest (compute: the loop's own work), the first batch's
wait (worker start-up). Per-batch and per-sample events are kept as columns or counts, never
as Python objects per event.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .. import units

CATS = ("dataloader", "checkpoint", "data")
# The hooks' own events, by category and name (docs/auto.md): "data", "checkpoint" and "load"
# are natural names for a program's own @trace events too, and those are the program's.
HOOK_NAMES = {"dataloader": ("epoch", "fetch", "sample"), "checkpoint": ("torch.save", "torch.load")}
HOOK_DATA_PREFIXES = ("numpy.", "h5py.", "PIL.", "pyarrow.parquet.", "pandas.")
_BYTES = r'"bytes":(?P<b>-?\d+)'


def is_hook_event(cat: str, name: str) -> bool:
    """Whether an event of this category and name is one iotrace's hooks record."""
    if cat == "data":
        return name.startswith(HOOK_DATA_PREFIXES)
    return name in HOOK_NAMES.get(cat, ())


@dataclass
class TrainingPart:
    """What one task's blocks hold of the training story (merged across tasks)."""

    epochs: list = field(default_factory=list)  # (host, pid, start_j, dur, args)
    fetch: dict = field(default_factory=dict)  # (host, pid) -> [ts_j arrays], [dur arrays]
    samples: dict = field(default_factory=dict)  # (host, pid) -> [count, dur, errors]
    checkpoints: list = field(default_factory=list)  # (host, pid, name, start_j, dur, args)
    data: dict = field(default_factory=dict)  # name -> [count, dur, bytes]

    def add(self, ev, procs: list, proc_of_row, cat_codes: np.ndarray, cat_vals: list,
            name_codes: np.ndarray, name_vals: list) -> None:
        wanted = [i for i, c in enumerate(cat_vals) if c in CATS]
        if not wanted:
            return
        rows = np.flatnonzero(np.isin(cat_codes, wanted))
        if not len(rows):
            return
        ts = np.asarray(ev.column("ts_ns"))[rows]
        dur = np.asarray(ev.column("dur_ns"))[rows]
        proc = (np.asarray(proc_of_row)[rows] if proc_of_row is not None
                else np.zeros(len(rows), np.int64))
        shifts = np.array([p[3] for p in procs], np.int64)
        ts = ts + shifts[proc]
        # strings per dictionary value, then taken per row (no Python per event)
        nv = np.array([str(v) for v in name_vals] + [""])  # a null name (-1) is the last, ""
        cv = np.array([str(v) for v in cat_vals])
        ni = np.where(name_codes[rows] >= 0, name_codes[rows], len(name_vals))
        ci = cat_codes[rows].astype(np.int64)
        names, cats = nv[ni], cv[ci]
        # the hooks' own events: decided once per distinct (category, name) of the block
        pairs, inv = np.unique(ci * len(nv) + ni, return_inverse=True)
        hook = np.array([is_hook_event(cv[p // len(nv)], nv[p % len(nv)]) for p in pairs], bool)[inv]
        if not hook.all():  # the program's own events in these categories
            rows, ts, dur, proc, names, cats = (x[hook] for x in (rows, ts, dur, proc, names, cats))
            if not len(rows):
                return
        args = ev.column("args")
        args = args.take(pa.array(rows)) if len(rows) < ev.num_rows else args
        args = args.combine_chunks() if isinstance(args, pa.ChunkedArray) else args

        loader = cats == "dataloader"
        for p in np.unique(proc):
            key = (procs[p][1], int(procs[p][2]))
            mine = proc == p
            f = np.flatnonzero(mine & loader & (names == "fetch"))
            if len(f):
                slot = self.fetch.setdefault(key, [[], []])
                slot[0].append(ts[f])
                slot[1].append(dur[f])
            s = np.flatnonzero(mine & loader & (names == "sample"))
            if len(s):
                failed = pc.sum(pc.match_substring(args.take(pa.array(s)), '"exception"'))
                slot = self.samples.setdefault(key, [0, 0, 0])
                slot[0] += len(s)
                slot[1] += int(dur[s].sum())
                slot[2] += int(failed.as_py() or 0)
        few = np.flatnonzero((loader & (names == "epoch")) | (cats == "checkpoint"))
        for i in few:
            host, pid = procs[proc[i]][1], int(procs[proc[i]][2])
            a = _args(args[int(i)].as_py())
            if cats[i] == "checkpoint":
                self.checkpoints.append((host, pid, str(names[i]), int(ts[i]), int(dur[i]), a))
            else:
                self.epochs.append((host, pid, int(ts[i]), int(dur[i]), a))
        d = np.flatnonzero(cats == "data")
        if len(d):
            m = pc.extract_regex(args.take(pa.array(d)), _BYTES)
            # a row without the pattern is a null struct whose field reads "": null it again
            nb = pc.if_else(pc.is_valid(m), pc.struct_field(m, "b"), pa.scalar(None, pa.string()))
            nbytes = pc.fill_null(pc.cast(nb, pa.int64()), 0).to_numpy(zero_copy_only=False)
            for name in np.unique(names[d]):
                m = names[d] == name
                slot = self.data.setdefault(str(name), [0, 0, 0])
                slot[0] += int(m.sum())
                slot[1] += int(dur[d][m].sum())
                slot[2] += int(nbytes[m].sum())

    def merge(self, o: TrainingPart) -> None:
        self.epochs += o.epochs
        self.checkpoints += o.checkpoints
        for k, (t, d) in o.fetch.items():
            slot = self.fetch.setdefault(k, [[], []])
            slot[0] += t
            slot[1] += d
        for k, v in o.samples.items():
            slot = self.samples.setdefault(k, [0, 0, 0])
            for j in range(3):
                slot[j] += v[j]
        for k, v in o.data.items():
            slot = self.data.setdefault(k, [0, 0, 0])
            for j in range(3):
                slot[j] += v[j]

    def compact(self) -> None:
        for slot in self.fetch.values():
            if len(slot[0]) > 1:
                slot[0] = [np.concatenate(slot[0])]
                slot[1] = [np.concatenate(slot[1])]


def _args(text) -> dict:
    if not text:
        return {}
    try:
        a = orjson.loads("{" + text + "}" if not text.startswith("{") else text)
    except orjson.JSONDecodeError:
        return {}
    return a if isinstance(a, dict) else {}


def _int(v, default=None):
    """An args value as an int, or `default` (a bool, a string or a float is not one)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def summarize(parts: list[TrainingPart]) -> dict:
    """The summary's `training` section (empty lists when the job has no such events)."""
    t = TrainingPart()
    for p in parts:
        t.merge(p)
    t.compact()
    loaders = []
    by_proc: dict = {}
    for host, pid, start, dur, a in t.epochs:
        if _int(a.get("loader")) is not None:  # the hooks' epochs always say their loader
            by_proc.setdefault((host, pid), []).append((start, dur, a))
    for (host, pid), eps in sorted(by_proc.items()):
        fts, fdur = t.fetch.get((host, pid), [[np.zeros(0, np.int64)], [np.zeros(0, np.int64)]])
        fts, fdur = (fts[0], fdur[0]) if fts else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        order = np.argsort(fts, kind="stable")
        fts, fdur = fts[order], fdur[order]
        per_loader: dict = {}
        for start, dur, a in sorted(eps, key=lambda e: e[0]):
            lo, hi = np.searchsorted(fts, [start, start + dur])  # fetches begun in the epoch
            wait = int(fdur[lo:hi].sum())
            per_loader.setdefault(a["loader"], []).append(dict(
                epoch=_int(a.get("epoch")), start_ns=int(start), duration_us=units.us(dur),
                batches=_int(a.get("batches"), int(hi - lo)), complete=a.get("complete") is not False,
                fetch_wait_us=units.us(wait), compute_us=units.us(max(dur - wait, 0)),
                wait_share=round(wait / dur, 6) if dur else 0.0,
                first_batch_wait_us=units.us(fdur[lo]) if hi > lo else None))
        for loader, rows in sorted(per_loader.items()):
            total = sum(r["duration_us"] for r in rows)
            wait = sum(r["fetch_wait_us"] for r in rows)
            loaders.append(dict(
                host=host, pid=pid, loader=loader, epochs=len(rows),
                batches=sum(r["batches"] or 0 for r in rows), epoch_time_us=round(total, 3),
                fetch_wait_us=round(wait, 3), wait_share=round(wait / total, 6) if total else 0.0,
                per_epoch=rows))
    n_samples = sum(v[0] for v in t.samples.values())
    sample_time = sum(v[1] for v in t.samples.values())
    samples = dict(count=n_samples, time_us=units.us(sample_time), errors=sum(v[2] for v in t.samples.values()),
                   processes=len(t.samples),
                   mean_us=units.us(sample_time / n_samples) if n_samples else None)
    batches_all = sum(len(np.concatenate(v[0])) if v[0] else 0 for v in t.fetch.values())
    ckpt = [dict(host=h, pid=p, name=n, file=a.get("file") if isinstance(a.get("file"), str) else None,
                 bytes=_int(a.get("bytes")), start_ns=s, duration_us=units.us(d),
                 bandwidth_MBps=units.mbps(a["bytes"], d)
                 if d and _int(a.get("bytes")) is not None else None)
            for h, p, n, s, d, a in sorted(t.checkpoints, key=lambda c: c[3])]
    data = [dict(name=k, count=v[0], time_us=units.us(v[1]), bytes=v[2])
            for k, v in sorted(t.data.items(), key=lambda kv: -kv[1][1])]
    return dict(loaders=loaders, batches=batches_all, samples=samples, checkpoints=ckpt,
                data_calls=data)
