"""Presenting the summary: text tables for the terminal and summary.json (the report page is
report_page.py)."""

from __future__ import annotations

import json
import os

import orjson

from .. import units
from ..analyses import insights


def _figure(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def findings_text(S: dict) -> str:
    """The findings, most severe first: what, the figure against its threshold, the evidence
    in brief, what to try."""
    F = S.get("findings")
    if F is None:
        return ""
    if not F:
        return "Findings: none. No rule found a problem (docs/insights.md lists what they look for).\n"
    out = [f"Findings ({len(F)})", "-" * 40]
    for f in F:
        out.append(f"[{f['severity'].upper()}] {f['id']}: {f['title']}")
        out.append(f"    figure {_figure(f['value'])} against threshold {_figure(f['threshold'])}")
        key, rows, notes = evidence(f)
        if rows:
            out.append(f"    {key}: " + "; ".join(rows[:3]) + (f"; ... {len(rows) - 3} more" if len(rows) > 3 else ""))
        out += [f"    {n}" for n in notes]
        for a in f["advice"]:
            out.append(f"    try: {a}")
    return "\n".join(out) + "\n"


def evidence(f: dict) -> tuple[str | None, list[str], list[str]]:
    """A finding's evidence as the text report and the page show it (insights.Evidence, the
    structure summary.json writes): the name of its list of rows (files, processes...), each
    row in a line, then the lines of its notes (the file-per-sample pattern, the data's reading
    and creation apart, the workers a loop waits for, the cost)."""
    ev = insights.Evidence.of_finding(f)
    rows = ev.rows
    return (rows.key if rows else None, [brief(r) for r in rows.items] if rows else [],
            [note(n) for n in ev.notes])


def note(n: insights.Note) -> str:
    """A note's line: its label and figures, or the cost."""
    if n.item is None:
        return f"costs {100 * n.share_of_wall:.1f}% of the processes' wall time"
    return f"{n.label}: " + brief(n.item)


def value(fig: insights.Figure) -> str:
    """A figure's value in its unit: a duration, a size, or as it is."""
    if fig.unit == "us":
        return units.duration(fig.value)
    if fig.unit == "bytes":
        return units.size(fig.value)
    return f"{fig.value}"


def brief(r: insights.Item) -> str:
    """One evidence row in a line: its name, then its counts, bytes and times."""
    bits = [f"{fig.label} {value(fig)}" for fig in r.figures if fig.shown]
    name = r.name
    return f"{name} ({', '.join(bits)})" if name else ", ".join(bits)


def text_report(S: dict, top: int = 10) -> str:
    j, t = S["job"], S["time"]
    parts = [findings_text(S)] if "findings" in S else []
    parts += _darshan(S.get("darshan"))
    parts += [units.table("Job", ["figure", "value"], [
        ["wall time", units.duration(j.get("wall_us", j["duration_us"]))],
        ["events' span", units.duration(j["duration_us"])], ["processes", j["processes"]],
        ["threads", j["threads"]], ["hosts", j["hosts"]], ["files", j["files"]],
        ["events", j["events"]], ["metadata events", j["metadata_events"]],
    ])]
    wall = t.get("wall_us") or t["app_us"] or 1
    parts.append(units.table("Time (summed over processes; wall: start to end of each process; app: "
                        "the union of its traced events)", ["figure", "time", "% of wall"], [
        [k, units.duration(t[k + "_us"]), f"{100 * t[k + '_us'] / wall:.1f}"]
        for k in ("wall", "app", "io", "compute", "io_not_overlapped", "compute_not_overlapped",
                  "io_call_time", "ipc_wait") if k + "_us" in t]))
    parts.append(units.table("I/O calls", ["call", "count", "time", "bytes", "min", "p25", "mean",
                                      "median", "p75", "max", "MB/s"], [
        [c["name"], c["count"], units.duration(c["time_us"]), units.size(c["bytes"]), c["size_min"], c["size_p25"],
         c["size_mean"], c["size_median"], c["size_p75"], c["size_max"], c["bandwidth_MBps"]]
        for c in S["calls"][:top * 2]]))
    m = S["metadata_calls"]
    parts.append(f"Metadata calls: {m['count']} calls, {units.duration(m['time_us'])} "
                 f"({100 * m['count_share']:.1f}% of I/O calls, {100 * m['time_share']:.1f}% of I/O call time)\n")
    if "data_files" in m:
        md = m["data_files"]
        parts.append(f"  on data files: {md['count']} calls, {units.duration(md['time_us'])} "
                     f"({100 * md['count_share']:.1f}% of their calls, {100 * md['time_share']:.1f}% of their time)\n")
    fc = S.get("file_classes", {})
    if fc:
        parts.append(units.table("Files by class (data: the job's; software: what it loads; system; "
                            "pipe-socket)", ["class", "files", "calls", "time", "read", "written"], [
            [k, v["files"], v["count"], units.duration(v["time_us"]), units.size(v["bytes_read"]),
             units.size(v["bytes_written"])] for k, v in fc.items()]))
    parts.append(units.table("Files (top by I/O time, data first)",
                        ["file", "class", "calls", "time", "read", "written", "procs"], [
        [f["file"], f.get("class", ""), f["count"], units.duration(f["time_us"]), units.size(f["bytes_read"]),
         units.size(f["bytes_written"]), f["processes"]] for f in S["files"][:top]]))
    ranked = any(p.get("rank") is not None for p in S["processes"])  # a column of ranks where there are some
    parts.append(units.table("Processes (top by I/O time)", ["host", "pid", *(["rank"] if ranked else []), "role",
                                                          "events", "wall", "io",
                                                          "io not overlapped", "compute", "read", "written"], [
        [p["host"], p["pid"], *([p.get("rank")] if ranked else []), p.get("role"), p["events"],
         units.duration(p.get("wall_us", p["app_us"])), units.duration(p["io_us"]),
         units.duration(p["io_not_overlapped_us"]), units.duration(p["compute_us"]), units.size(p["bytes_read"]),
         units.size(p["bytes_written"])] for p in S["processes"][:top]]))
    if S["categories"]:
        parts.append(units.table("Categories of @trace events", ["category", "count", "time", "union",
                                                            "% of app"], [
            [c["cat"], c["count"], units.duration(c["time_us"]), units.duration(c["union_us"]),
             f"{100 * c['share_of_app']:.1f}"] for c in S["categories"]]))
    if S.get("layers"):
        parts.append(units.table("Time by layer (summed over threads; own: less the time of the "
                                 "calls nested in its calls)", ["layer", "calls", "time", "own", "% of own"], [
            [r["layer"], r["calls"], units.duration(r["time_us"]), units.duration(r["own_us"]),
             f"{100 * r['own_share']:.1f}"] for r in S["layers"]]))
    parts += _mpi(S.get("mpi"), top)
    parts += _training(S.get("training") or {}, top)
    parts += _counters(S.get("counters") or [], top)
    a = S["access"]
    parts.append(units.table("Access pattern (data calls with an offset)", ["", "first", "consecutive",
                                                                        "sequential", "random"], [
        [d, a[d]["first"], a[d]["consecutive"], a[d]["sequential"], a[d]["random"]]
        for d in ("read", "write")]))
    labels = list(a["read"]["size_histogram"])
    parts.append(units.table("Access sizes", ["", *labels], [
        [d, *a[d]["size_histogram"].values()] for d in ("read", "write")]))
    tl = S["timeline"]
    w = tl["bin_ns"] / 1e9
    peak_r = max(tl["bytes_read"] or [0]) / w / 1e6
    peak_w = max(tl["bytes_written"] or [0]) / w / 1e6
    parts.append(f"Timeline: {len(tl['ops'])} bins of {units.duration(tl['bin_ns'] / 1000)}; "
                 f"peak read {peak_r:.1f} MB/s, peak write {peak_w:.1f} MB/s, "
                 f"peak {max(tl['ops'] or [0]) / w:.0f} ops/s\n")
    d = S.get("damage", {})
    if d.get("damaged_files"):
        parts.append(f"Damaged input: {d['damaged_files']} file(s); {d['by_kind']}; "
                     f"{d['bad_lines']} bad line(s); missing metadata in {len(d['missing_metadata'])} file(s); "
                     f"{d['unresolved_file_hashes']} unresolved file hash(es)\n")
    if d.get("missing_child_count"):
        parts.append(units.table(
            f"Child processes without a trace ({d['missing_child_count']}; damage `missing-child`): "
            "started by a traced parent,\ntheir I/O is in no figure. They may have run untraced "
            "(a static or setuid program, IOTRACE_ENABLE=0) or died before writing anything.",
            ["host", "pid", "started by", "parent pid", "at", "program", "parent trace"],
            [[m["host"], m["pid"], m["started_by"], m["parent_pid"],
              f"{m['at_s']:.3f} s" if m.get("at_s") is not None else None, m.get("program"),
              m["parent_trace"]] for m in d["missing_children"][:top]]))
    return "\n".join(parts)


def _darshan(d: dict | None) -> list[str]:
    """What a Darshan log is, and what its counters could not tell (estimates, rules skipped)."""
    if not d:
        return []
    logs = d.get("logs", [d])
    lines = [f"Darshan log{'s' if len(logs) > 1 else ''} (counters per file and rank"
             + (", DXT segments as the events" if d["dxt"] else "; no DXT: no per-call events, no timeline") + ")"]
    for lg in logs:
        lines.append(f"  {lg['log']}: {lg['exe'] or '(no exe)'}; {lg['nprocs']} ranks, job {lg['jobid']}, "
                     f"{lg['run_time_s']:.1f} s; format {lg['format']}; modules "
                     + ", ".join(f"{m}" + (" (damaged, left out)" if v["damaged"] else "") + (" (partial)" if
                                 v["partial"] else "") for m, v in lg["modules"].items()))
        if lg.get("hints"):
            lines.append(f"    MPI-IO hints: {' '.join(lg['hints'])}")
    if d.get("missing"):
        lines.append(f"  no {', '.join(d['missing'])} module: its figures and rules are missing")
    lines.append("  estimated: " + "; ".join(d["estimated"]))
    lines.append("  not known: " + "; ".join(d["not_known"]))
    lines.append("  rules skipped: " + "; ".join(f"{k} ({v})" for k, v in d["rules_skipped"].items()))
    return ["\n".join(lines) + "\n"]


def _mpi(m: dict | None, top: int) -> list[str]:
    """The MPI job: its MPI-IO calls' shape, the ranks (the slowest first when there are many)."""
    if not m:
        return []
    c, i, ops = m["collective"], m["independent"], m["collective_ops"]
    n_data = c["calls"] + i["calls"]
    lines = [
        f"MPI-IO: {m['calls']} calls, {units.duration(m['time_us'])}; {m['shape']} "
        f"({m['shared_files']} shared, {m['per_process_files']} per process)",
        f"  data calls: {n_data}, collective {c['calls']} ({units.size(c['bytes_read'] + c['bytes_written'])}), "
        f"independent {i['calls']} ({units.size(i['bytes_read'] + i['bytes_written'])}); "
        f"non-blocking {m['nonblocking']['calls']}",
    ]
    if m.get("from_counters"):  # counted, not recorded call by call: no offsets, no waits
        lines.append("  counted (Darshan), not recorded call by call: bytes and time by kind are shared out by "
                     "count; not known: " + "; ".join(m.get("not_known", [])))
    else:
        lines += [
            f"  crossing a {units.size(m['stripe'])} stripe boundary they need not: {m['misaligned_calls']} of "
            f"{m['data_calls_with_offset']} with an offset",
            f"  collective calls matched across ranks: {ops['calls']}; waiting in them "
            f"{units.duration(ops['wait_us'])}, of which for a slower rank's work "
            f"{units.duration(ops['slow_wait_us'])}"]
    if m.get("slowest_to_median") is not None:
        lines.append(f"  slowest rank (data time): {m['slowest_rank']}, {m['slowest_to_median']:.2f}x the median")
    ranks = m["ranks"]
    shown = ranks if len(ranks) <= top else sorted(ranks, key=lambda r: -r["data_us"])[:top]
    title = "MPI ranks" + ("" if len(ranks) <= top else f" (the {top} of {len(ranks)} with the most data time)") + \
        " (data: MPI-IO data calls less their waits; waited: in collective calls for a slower rank; caused: " \
        "the others' waits for this one; POSIX: its own POSIX time)"
    table = units.table(title, ["rank", "host", "pid", "MPI-IO calls", "read", "written", "data", "waited",
                                "caused", "POSIX"], [
        [r["rank"], r["host"], r["pid"], r["mpiio_calls"], units.size(r["bytes_read"]), units.size(r["bytes_written"]),
         units.duration(r["data_us"]), units.duration(r["slow_wait_us"]), units.duration(r["caused_wait_us"]),
         units.duration(r["posix_us"])] for r in shown])
    return ["\n".join(lines) + "\n", table]


def _training(T: dict, top: int) -> list[str]:
    """The training loop: per epoch, how long the loop waited for data and how long it ran."""
    out = []
    for ld in T.get("loaders", []):
        rows = [[e["epoch"], "" if e["complete"] else "left early", e["batches"],
                 units.duration(e["duration_us"]), units.duration(e["fetch_wait_us"]), units.duration(e["compute_us"]),
                 f"{100 * e['wait_share']:.1f}",
                 units.duration(e["first_batch_wait_us"]) if e["first_batch_wait_us"] is not None else None]
                for e in ld["per_epoch"][:top * 2]]
        out.append(units.table(
            f"Training loop: DataLoader {ld['loader']} of pid {ld['pid']} ({ld['epochs']} epochs, "
            f"{ld['batches']} batches; waited for data {100 * ld['wait_share']:.1f}% of the time)",
            ["epoch", "", "batches", "time", "waiting for data", "compute", "% waiting",
             "first batch"], rows))
    smp = T.get("samples") or {}
    if smp.get("count"):
        out.append(f"Samples: {smp['count']} read in {smp['processes']} process(es), "
                   f"{units.duration(smp['time_us'])} in all, {units.duration(smp['mean_us'])} each"
                   + (f", {smp['errors']} failed" if smp.get("errors") else "") + "\n")
    if T.get("checkpoints"):
        ck = T["checkpoints"]
        out.append(units.table(f"Checkpoints ({len(ck)})", ["call", "file", "bytes", "time", "MB/s"], [
            [c["name"], c["file"], units.size(c["bytes"]), units.duration(c["duration_us"]), c["bandwidth_MBps"]]
            for c in sorted(ck, key=lambda c: -c["duration_us"])[:top]]))
    if T.get("data_calls"):
        out.append(units.table("Data library calls", ["call", "count", "time", "bytes"], [
            [d["name"], d["count"], units.duration(d["time_us"]), units.size(d["bytes"])]
            for d in T["data_calls"][:top]]))
    return out


def _counter_value(v, unit) -> str | None:
    """A counter's figure in its unit: bytes as MiB, percent as %."""
    if v is None:
        return None
    if unit == "bytes":
        mib = v / 1048576
        return f"{mib:.1f} MiB" if mib == 0 or abs(mib) >= 0.1 else f"{mib:.3f} MiB"
    if unit == "percent":
        return f"{v:.1f}%"
    return f"{v:.6g}"


def _counters(C: list, top: int) -> list[str]:
    """Counter series (ph C: the sampler's `process` samples, iotrace.counter values): per
    process and series, its samples and their min, mean, max and last value; the first `top`
    processes."""
    if not C:
        return []
    procs: list = []
    for c in C:
        if (c["host"], c["pid"]) not in procs:
            procs.append((c["host"], c["pid"]))
    shown = set(procs[:top])
    many_hosts = len({h for h, _p in procs}) > 1
    rows = [[f"{c['host']}:{c['pid']}" if many_hosts else c["pid"], c.get("role"), c["name"], c["key"], c["samples"],
             *(_counter_value(c[k], c.get("unit")) for k in ("min", "mean", "max", "last"))]
            for c in C if (c["host"], c["pid"]) in shown]
    more = f"; the first {top} of {len(procs)} processes, all in summary.json" if len(procs) > top else ""
    return [units.table(f"Counters (samples per process: --sample-ms, iotrace.counter{more})",
                   ["process", "role", "counter", "key", "samples", "min", "mean", "max", "last"], rows)]


def write_json(S: dict, path: str) -> None:
    """summary.json (or compare.json), indented. orjson: a job of 5000 processes has a 3 MB
    summary that the json module takes 0.1 s to write; json only for what orjson refuses
    (an int past 64 bits)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    try:
        data = orjson.dumps(S, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:
        data = json.dumps(S, indent=2).encode()
    with open(path, "wb") as f:
        f.write(data)
