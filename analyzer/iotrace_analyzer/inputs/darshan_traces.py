"""A Darshan log's DXT segments as iotrace trace files (JSON lines, docs/trace-format.md):
what `iotrace export` draws in Perfetto. Imports nothing of the analysis (pyarrow: the
export's memory)."""

from __future__ import annotations

import os

import numpy as np

from . import darshan_log
from .darshan_log import SUFFIX, DarshanError, file_hash, job_end


LANE_TID = 1 << 24  # the tid of a rank's k-th lane of overlapping calls: its pid + k * LANE_TID


def _lanes(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each call's lane: 0 for the calls of a rank that follow one another, 1, 2... for those
    that overlap a call still running (DXT records no threads: a multi-threaded rank's calls, or
    its asynchronous ones, overlap). A thread's slices must nest in Perfetto: one that starts
    inside another and ends after it would be cut; on a lane of its own it is drawn whole."""
    lane = np.full(len(ts), -1, np.int64)
    order = np.lexsort((-dur, ts))
    left = order
    k = 0
    while len(left):
        end = ts[left] + dur[left]
        # the first pass's calls: each starting at or after the end of the last one taken
        take = np.zeros(len(left), bool)
        last = np.iinfo(np.int64).min
        starts = ts[left].tolist()
        ends = end.tolist()
        for j in range(len(left)):
            if starts[j] >= last:
                take[j] = True
                last = ends[j]
        lane[left[take]] = k
        left = left[~take]
        k += 1
    return lane


def write_traces(path: str, folder: str, log_to=None) -> list[str]:
    """A Darshan log's DXT segments as iotrace trace files (JSON lines, docs/trace-format.md),
    one per rank, in `folder`: what `iotrace export` reads to draw them in Perfetto (each
    segment a slice of its rank's track, named read or write, under its layer's category). A
    rank's clock is the job's wall clock (mono_ns = wall_ns: no shift); its pid is the rank + 1
    (Perfetto's pid 0 is its idle process), its name `rank N`; calls that overlap one still
    running go on lanes of their own (_lanes). What of the log is damaged is said on `log_to`
    (the segments of a damaged DXT module are left out, as the analyzer leaves them). A log
    without DXT, or whose DXT could not be read, has no calls to draw: DarshanError."""
    log = darshan_log.read(path)
    for _kind, detail in log.damage:
        print(f"iotrace export: {path}: damaged: {detail}", file=log_to)
    segs = [(mod, s) for mod, s in log.dxt.items() if len(s)]
    if not segs:
        lost = [d for _k, d in log.damage if d.startswith("DXT_")]
        if lost:
            raise DarshanError(f"{path}: its DXT segments could not be read ({'; '.join(lost)}): nothing to draw "
                               "on a timeline (iotrace-analyze reads the counters that are whole)")
        raise DarshanError(f"{path}: no DXT segments (the job ran without DXT): a Darshan log without them has "
                           "counters only, nothing to draw on a timeline (iotrace-analyze reads its counters)")
    import orjson

    start = log.job["start_ns"]
    exe = log.exe.split(" ")[0] if log.exe else ""
    names = {i: n for i, n in log.names.items()}
    ranks = np.unique(np.concatenate([s.ranks for _m, s in segs]))
    hosts = {}
    for _m, s in segs:
        hosts.update(s.hosts)
    out = []
    stem = os.path.basename(path)[: -len(SUFFIX)][:40]
    for r in ranks.tolist():
        host = hosts.get(r) or "darshan"
        # Perfetto keeps pid and tid 0 for its idle process ("swapper"): rank r is pid r + 1
        pid = r + 1
        fn = os.path.join(folder, f"{stem}-j{log.job['jobid']}-r{r}-{host}-{pid}.pfw")
        proc = dict(version=6, hostname=host, pid=pid, exe=exe, cmdline=log.exe.split() if log.exe else [],
                    wall_ns=start, mono_ns=start, resolution_ns=1000, mpi_rank=r, mpi_size=log.job["nprocs"],
                    ranks={"darshan_jobid": str(log.job["jobid"])}, form="json")
        lines = [b"[", orjson.dumps(dict(ph="M", name="iotrace_process", pid=pid, tid=pid, args=proc)) + b","]
        lines.append(orjson.dumps(dict(ph="M", name="process_name", pid=pid, tid=pid,
                                       args=dict(name=f"rank {r}"))) + b",")
        used = set()
        evs = []
        for mod, s in segs:
            m = s.ranks == r
            if not m.any():
                continue
            cat = "posix" if mod == "DXT_POSIX" else "mpiio"
            ids = s.ids[m]
            used.update(np.unique(ids).tolist())
            # ns on the job's wall clock, whole (a double of epoch µs keeps quarter µs only)
            ts = start + np.round(s.start[m] * 1e9).astype(np.int64)
            dur = np.maximum(np.round((s.end[m] - s.start[m]) * 1e9).astype(np.int64), 0)
            w, off, ln = s.write[m], s.offset[m], s.length[m]
            evs.append((ts, dur, w, off, ln, ids, cat.encode()))
        ts = np.concatenate([e[0] for e in evs])
        dur = np.concatenate([e[1] for e in evs])
        lane = _lanes(ts, dur)
        tids = np.where(lane == 0, pid, pid + lane * LANE_TID)
        for k in range(1, int(lane.max()) + 1):
            lines.append(orjson.dumps(dict(ph="M", name="thread_name", pid=pid, tid=int(pid + k * LANE_TID),
                                           args=dict(name=f"rank {r}: overlapping calls {k}"))) + b",")
        body = []
        at = 0
        for e_ts, e_dur, w, off, ln, ids, cat in evs:
            tid = tids[at:at + len(e_ts)]
            at += len(e_ts)
            body += [b'{"ph":"X","name":"%s","cat":"%s","pid":%d,"tid":%d,"ts":%d.%03d,"dur":%d.%03d,'
                     b'"args":{"fhash":"%016x","size":%d,"offset":%d,"ret":%d}},'
                     % (b"write" if w[k] else b"read", cat, pid, tid[k], e_ts[k] // 1000, e_ts[k] % 1000,
                        e_dur[k] // 1000, e_dur[k] % 1000, ids[k], ln[k], off[k], ln[k]) for k in range(len(e_ts))]
        for i in sorted(used):
            h = file_hash(i)
            lines.append(orjson.dumps(dict(ph="M", name="FH", pid=pid, tid=pid,
                                           args=dict(name=names.get(i, f"<unknown {h}>"), value=h)))
                         + b",")
        lines += [body[k] for k in np.argsort(ts, kind="stable")]
        end = max(job_end(log), int(ts.max()))
        lines.append(orjson.dumps(dict(ph="M", name="iotrace_end", pid=pid, tid=pid,
                                       args=dict(mono_ns=end, events=len(body), reason="darshan"))) + b"]")
        with open(fn, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
        out.append(fn)
    return out
