"""The report page: OUT/report.html, one self-contained file (plotly.js inline, no network)
that shows the findings first, each linked to the plot of its evidence, then the time split,
I/O over time with the phases, the cost per call family, access sizes, offsets against time,
the top files and processes, and the job's identity. docs/report.md says why Plotly.

Everything drawn is aggregated (summary, activity.summarize): the page's size follows the
processes and bins, never the events.
"""

from __future__ import annotations

import os
import time
from functools import cache

import jinja2
import numpy as np
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from . import report

# the plot that shows each rule's evidence
EVIDENCE = {"io-bound": "time-split", "imbalance": "proc-io", "small-reads": "sizes", "small-writes": "sizes",
            "random-reads": "offsets", "random-writes": "offsets", "metadata-heavy": "cost",
            "sync-heavy": "cost", "software-loading": "cost", "pipe-traffic": "cost",
            "redundant-reads": "files", "checkpoint-stall": "io-time"}
LINE_PROCESSES = 16  # up to this many processes: a line each; more: a heat map process x time
HEAT_ROWS = 1000  # processes in the heat map, the most I/O first
TABLE_ROWS = 50  # rows of the processes and files tables
SPLIT_PROCESSES = 30  # processes in the time split, the most I/O first
PHASE_LANES = 8  # phase kinds drawn as lanes under the I/O timeline
CONFIG = {"displaylogo": False, "responsive": True}
COLORS = {"read": "#1f77b4", "write": "#d62728", "ops": "#555555"}
SPLIT = [("io_not_overlapped_us", "I/O not hidden by compute", "#d62728"),
         ("io_hidden_us", "I/O hidden by compute", "#ff9896"),
         ("compute_not_overlapped_us", "compute only", "#2ca02c"),
         ("other_us", "other traced work", "#9edae5"),
         ("untraced_us", "untraced (outside any event)", "#dddddd")]


def write(S: dict, page: dict, path: str) -> float:
    """Write the page; returns the seconds it took."""
    t0 = time.perf_counter()
    html = render(S, page)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(html)
    os.replace(tmp, path)
    return time.perf_counter() - t0


def render(S: dict, page: dict) -> str:
    job_start = S["job"]["start_ns"]
    labels = _labels(S)
    plots = []  # (section id, title, note, figure)
    plots.append(("time-split", "Time split per job and process", _split_note(S), _time_split(S, labels)))
    if S.get("phases", {}).get("split"):
        plots.append(("phase-split", "Time split per phase", "each event of the phase kinds with few events "
                      "(epochs, stages, checkpoints): its length against the I/O call time that started inside "
                      "it, of its own process and of all processes", _phase_split(S, labels)))
    plots.append(("io-time", "I/O over time, with the phases", "bandwidth and calls per second of the whole "
                  "job, in bins; below, the longest events of each @trace phase (one lane per kind)",
                  _io_time(S, page, job_start)))
    pt = page.get("proc_timeline")
    if pt is not None and len(pt["processes"]):
        heat = len(pt["processes"]) > LINE_PROCESSES
        plots.append(("proc-io", "I/O over time per process",
                      "bytes moved per second by each process (heat map: one row per process, the most I/O first)"
                      if heat else "bytes moved per second by each process", _proc_io(pt, labels, job_start, heat)))
    plots.append(("cost", "I/O cost per call family and per file class",
                  "call time: data calls against metadata (open, stat, seek, close...) and syncs; file classes "
                  "tell the job's data from the software it loads", _cost(S)))
    plots.append(("sizes", "Access sizes per call family", "calls per request size, as Darshan bins them",
                  _sizes(S)))
    if page.get("offsets"):
        plots.append(("offsets", "Offsets against time, top data files",
                      "a uniform sample of each file's data calls: a rising line is sequential access, a "
                      "scatter is random", _offsets(page["offsets"], labels, job_start)))
    findings = [dict(f, link=EVIDENCE.get(f["id"], "io-time"), figure=report._figure(f["value"]),
                     threshold=report._figure(f["threshold"]), brief=_evidence(f)) for f in S.get("findings") or []]
    figs = [dict(id=i, title=t, note=n, html=fig.to_html(full_html=False, include_plotlyjs=False,
                                                         div_id="plot-" + i, config=CONFIG))
            for i, t, n, fig in plots]
    return _template().render(
        S=S, job=S["job"], findings=findings, rules_ran=S.get("findings") is not None, plots=figs,
        plotlyjs=get_plotlyjs(), identity=_identity(S, labels), files=_files(S), processes=_processes(S, labels),
        damage=S.get("damage") or {}, size=report._size, dur=report._time)


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.PackageLoader("iotrace_analyzer", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]))
    return env.get_template("report.html.j2")


def _labels(S: dict) -> dict:
    """(host, pid) -> a short name: pid and role, the host when the job has several."""
    many_hosts = S["job"]["hosts"] > 1
    out = {}
    for p in S["processes"]:
        name = f"{p['pid']} {p.get('role') or ''}".strip()
        out[(p["host"], p["pid"])] = f"{p['host']}:{name}" if many_hosts else name
    return out


def _seconds(ns, start: int) -> np.ndarray:
    return (np.asarray(ns, np.float64) - start) / 1e9


# --------------------------------------------------------------------------- the plots


def _split_rows(p: dict) -> dict:
    io, io_free = p["io_us"], p["io_not_overlapped_us"]
    both = io_free + p["compute_us"]
    wall = p.get("wall_us") or p["app_us"]
    return dict(io_not_overlapped_us=io_free, io_hidden_us=io - io_free,
                compute_not_overlapped_us=p["compute_not_overlapped_us"], other_us=max(p["app_us"] - both, 0),
                untraced_us=max(wall - p["app_us"], 0))


def _split_note(S: dict) -> str:
    t = S["time"]
    return (f"the job's processes spent {100 * t['io_share_of_wall']:.1f}% of their wall time in I/O, "
            f"{report._time(t['io_not_overlapped_us'])} of it not hidden by compute (summed over processes)")


def _time_split(S: dict, labels: dict) -> go.Figure:
    procs = sorted(S["processes"], key=lambda p: -p["io_us"])[:SPLIT_PROCESSES]
    rows = [("all processes", _split_rows(S["time"]))] + [(labels[(p["host"], p["pid"])], _split_rows(p))
                                                          for p in procs]
    fig = go.Figure()
    y = [r[0] for r in rows]
    for key, name, color in SPLIT:
        fig.add_bar(y=y, x=[r[1][key] / 1e6 for r in rows], name=name, orientation="h", marker_color=color,
                    hovertemplate="%{y}: %{x:.3f} s " + name + "<extra></extra>")
    fig.update_layout(barmode="stack", height=140 + 28 * len(rows), xaxis_title="seconds (process wall time)",
                      yaxis=dict(autorange="reversed", type="category"), margin=dict(l=10, r=10, t=40, b=40),
                      legend=dict(orientation="h", traceorder="normal", y=1.02, yanchor="bottom"))
    return fig


def _phase_split(S: dict, labels: dict) -> go.Figure:
    rows = S["phases"]["split"]
    y = [f"{r['name']} #{r['index']} ({labels.get((r['host'], r['pid']), r['pid'])})" for r in rows]
    fig = go.Figure()
    for key, name, color in (("duration_us", "length", "#7f7f7f"), ("io_us", "I/O call time, its process", "#d62728"),
                             ("io_all_us", "I/O call time, all processes", "#ff9896")):
        fig.add_bar(y=y, x=[r[key] / 1e6 for r in rows], name=name, orientation="h", marker_color=color,
                    hovertemplate="%{y}: %{x:.4f} s " + name + "<extra></extra>")
    fig.update_layout(barmode="group", height=140 + 40 * len(rows), xaxis_title="seconds",
                      yaxis=dict(autorange="reversed", type="category"), legend_orientation="h",
                      margin=dict(l=10, r=10, t=30, b=40))
    return fig


def _io_time(S: dict, page: dict, job_start: int) -> go.Figure:
    tl = S["timeline"]
    w = tl["bin_ns"] / 1e9
    x = _seconds(tl["start_ns"] + tl["bin_ns"] * (np.arange(len(tl["ops"])) + 0.5), job_start)
    kinds = [k for k in page.get("phase_events") or [] if k["events"]][:PHASE_LANES]
    rows = 3 if kinds else 2
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        row_heights=[0.4, 0.25, 0.35][:rows])
    fig.add_scatter(x=x, y=np.asarray(tl["bytes_read"]) / w / 1e6, name="read MB/s", line_color=COLORS["read"],
                    row=1, col=1)
    fig.add_scatter(x=x, y=np.asarray(tl["bytes_written"]) / w / 1e6, name="write MB/s",
                    line_color=COLORS["write"], row=1, col=1)
    fig.add_scatter(x=x, y=np.asarray(tl["ops"]) / w, name="I/O calls/s", line_color=COLORS["ops"], row=2, col=1)
    fig.update_yaxes(title_text="MB/s", row=1, col=1)
    fig.update_yaxes(title_text="calls/s", row=2, col=1)
    if kinds:
        for lane, k in enumerate(kinds):
            ev = k["events"]
            xs = np.empty(3 * len(ev))
            xs[0::3] = _seconds([e[2] for e in ev], job_start)
            xs[1::3] = _seconds([e[2] + e[3] for e in ev], job_start)
            xs[2::3] = np.nan
            name = f"{k['cat']}: {k['name']}"
            fig.add_scatter(x=xs, y=np.full(len(xs), lane), mode="lines", line_width=12, name=name, showlegend=False,
                            connectgaps=False, hovertemplate=name + " %{x:.4f} s<extra></extra>", row=3, col=1)
        fig.update_yaxes(tickvals=list(range(len(kinds))), ticktext=[f"{k['cat']}: {k['name']}" for k in kinds],
                         autorange="reversed", row=3, col=1)
        for s, d in _bands(kinds):  # the longest-running kind with few events shades the plots above
            fig.add_vrect(x0=(s - job_start) / 1e9, x1=(s + d - job_start) / 1e9, fillcolor="#bbbbbb",
                          opacity=0.2, line_width=0, row="all", col=1)
    fig.update_xaxes(title_text="seconds since the job's start", row=rows, col=1)
    fig.update_layout(height=560 if kinds else 420, legend_orientation="h", margin=dict(l=10, r=10, t=30, b=40),
                      hovermode="x")
    return fig


def _bands(kinds: list) -> list:
    """The events of the first phase kind with 2 to 50 events (epochs, stages): shading."""
    for k in kinds:
        if 2 <= len(k["events"]) <= 50:
            return [(e[2], e[3]) for e in k["events"]]
    return []


def _proc_io(pt: dict, labels: dict, job_start: int, heat: bool) -> go.Figure:
    w = pt["bin_ns"] / 1e9
    nb = pt["ops"].shape[1]
    x = _seconds(pt["start_ns"] + pt["bin_ns"] * (np.arange(nb) + 0.5), job_start)
    moved = (pt["read"] + pt["written"]) / w / 1e6
    names = [labels.get((p["host"], p["pid"]), str(p["pid"])) for p in pt["processes"]]
    fig = go.Figure()
    if not heat:
        for name, row in zip(names, moved):
            fig.add_scatter(x=x, y=row, name=name, mode="lines", hovertemplate=name + ": %{y:.2f} MB/s<extra></extra>")
        fig.update_layout(height=360, yaxis_title="MB/s (read + written)", legend_orientation="h")
    else:
        order = np.argsort(-pt["io_ns"].sum(axis=1), kind="stable")[:HEAT_ROWS]
        z = moved[order].astype(np.float32)
        busy = z[z > 0]
        # colours up to the 99th percentile: one burst does not wash out every other row
        top = float(np.percentile(busy, 99)) if len(busy) else 1.0
        fig.add_heatmap(z=z, x=x, y=[names[i] for i in order], colorscale="Viridis", zmin=0, zmax=top,
                        colorbar_title="MB/s", hovertemplate="%{y} at %{x:.3f} s: %{z:.2f} MB/s<extra></extra>")
        fig.update_layout(height=min(200 + max(4, min(14, 800 // len(order))) * len(order), 1400),
                          yaxis=dict(type="category", autorange="reversed", title="process"))
    fig.update_layout(xaxis_title="seconds since the job's start", margin=dict(l=10, r=10, t=30, b=40))
    return fig


def _cost(S: dict) -> go.Figure:
    from iotrace_format import call_families

    fam = call_families()
    by: dict = {}
    for c in S["calls"]:
        f = fam.get(c["name"], "other")
        slot = by.setdefault(f, [0.0, 0])
        slot[0] += c["time_us"]
        slot[1] += c["count"]
    fams = sorted(by, key=lambda f: -by[f][0])
    classes = S.get("file_classes") or {}
    fig = make_subplots(rows=1, cols=2, subplot_titles=("call time per call family", "call time per file class"),
                        horizontal_spacing=0.18)
    fig.add_bar(y=fams, x=[by[f][0] / 1e6 for f in fams], orientation="h", marker_color="#9467bd",
                customdata=[by[f][1] for f in fams], name="call family",
                hovertemplate="%{y}: %{x:.4f} s in %{customdata} calls<extra></extra>", row=1, col=1)
    cl = list(classes)
    fig.add_bar(y=cl, x=[classes[c]["time_us"] / 1e6 for c in cl], orientation="h", marker_color="#8c564b",
                customdata=[[classes[c]["files"], classes[c]["metadata_time_us"] / 1e6] for c in cl],
                name="file class", hovertemplate="%{y}: %{x:.4f} s, %{customdata[0]} files, "
                "%{customdata[1]:.4f} s metadata<extra></extra>",
                row=1, col=2)
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title_text="seconds")
    fig.update_layout(height=max(300, 60 + 26 * max(len(fams), len(cl))), showlegend=False,
                      margin=dict(l=10, r=10, t=40, b=40))
    return fig


def _sizes(S: dict) -> go.Figure:
    H = S["access"].get("size_histogram_by_family") or {
        f"all {d}": S["access"][d]["size_histogram"] for d in ("read", "write")}
    fig = go.Figure()
    for fam, h in H.items():
        fig.add_bar(x=list(h), y=list(h.values()), name=fam, hovertemplate=fam + " %{x} B: %{y} calls<extra></extra>")
    fig.update_layout(barmode="group", height=360, xaxis_title="request size (bytes)", yaxis_title="calls",
                      yaxis_type="log", legend_orientation="h", margin=dict(l=10, r=10, t=30, b=40))
    return fig


def _offsets(files: list, labels: dict, job_start: int) -> go.Figure:
    n = len(files)
    cols = 2 if n > 1 else 1
    nrows = -(-n // cols)
    titles = [f"{_short(f['file'])}: {f['calls']} calls" for f in files]
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=titles, vertical_spacing=0.5 / max(nrows, 1) / 2 + 0.05)
    for k, f in enumerate(files):
        r, c = k // cols + 1, k % cols + 1
        t = _seconds(f["ts_ns"], job_start)
        for write, name in ((False, "read"), (True, "write")):
            m = f["write"] == write
            if not m.any():
                continue
            fig.add_scatter(x=t[m], y=f["offset"][m], mode="markers", marker=dict(size=4, color=COLORS[name]),
                            name=name, legendgroup=name, showlegend=k == 0 or not any(
                                (g["write"] == write).any() for g in files[:k]),
                            customdata=np.stack([f["length"][m], f["pid"][m]], axis=1),
                            hovertemplate=name + " %{customdata[0]} B at %{y} by pid %{customdata[1]}, "
                            "%{x:.4f} s<extra></extra>", row=r, col=c)
        fig.update_yaxes(title_text="offset (bytes)", row=r, col=c)
    fig.update_xaxes(title_text="seconds since the job's start")
    fig.update_layout(height=150 + 260 * nrows, margin=dict(l=10, r=10, t=40, b=40), legend_orientation="h")
    return fig


def _short(path: str, keep: int = 48) -> str:
    return path if len(path) <= keep else "..." + path[-keep:]


# --------------------------------------------------------------------------- the tables


def _evidence(f: dict) -> list[str]:
    ev = f["evidence"]
    for key in ("files", "processes", "loaders", "windows", "calls"):
        rows = ev.get(key)
        if isinstance(rows, list) and rows:
            return [report._brief(r) for r in rows[:5]] + ([f"... {len(rows) - 5} more"] if len(rows) > 5 else [])
    return []


def _files(S: dict) -> list[dict]:
    return [dict(f, time=report._time(f["time_us"]), read=report._size(f["bytes_read"]),
                 written=report._size(f["bytes_written"])) for f in S["files"][:TABLE_ROWS]]


def _processes(S: dict, labels: dict) -> list[dict]:
    out = []
    for p in S["processes"][:TABLE_ROWS]:
        out.append(dict(p, label=labels[(p["host"], p["pid"])], wall=report._time(p.get("wall_us") or p["app_us"]),
                        io=report._time(p["io_us"]), io_free=report._time(p["io_not_overlapped_us"]),
                        compute=report._time(p["compute_us"]), read=report._size(p["bytes_read"]),
                        written=report._size(p["bytes_written"]), share=f"{100 * p['io_share_of_wall']:.1f}%"))
    return out


def _identity(S: dict, labels: dict) -> dict:
    """The job: its hosts, command lines (the distinct ones, with how many processes ran
    each), roles and the process tree (parent -> children), the first TABLE_ROWS."""
    procs = S["processes"]
    cmds: dict = {}
    roles: dict = {}
    for p in procs:
        c = " ".join(p.get("cmdline") or []) or "(not recorded)"
        cmds[c] = cmds.get(c, 0) + 1
        r = p.get("role") or "(unknown)"
        roles[r] = roles.get(r, 0) + 1
    pids = {p["pid"] for p in procs}
    tree = sorted(procs, key=lambda p: (p.get("parent_pid") in pids, p.get("parent_pid") or 0, p["pid"]))
    return dict(hosts=S["job"].get("host_names") or [], commands=sorted(cmds.items(), key=lambda kv: -kv[1]),
                roles=sorted(roles.items(), key=lambda kv: -kv[1]),
                tree=[dict(label=labels[(p["host"], p["pid"])], parent=p.get("parent_pid"), role=p.get("role"),
                           end=p.get("end_reason"), cmd=" ".join(p.get("cmdline") or []))
                      for p in tree[:TABLE_ROWS]], more=max(len(procs) - TABLE_ROWS, 0))
