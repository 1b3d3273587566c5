"""The report page: OUT/report.html, one self-contained file (plotly.js inline, no network)
that shows the findings first, each linked to the plot of its evidence, then the time split,
I/O over time with the phases, the counters per process (--sample-ms, iotrace.counter), the
cost per call family, access sizes, offsets against time,
the top files and processes, and the job's identity. docs/report.md says why Plotly.

Everything drawn is aggregated (summary, activity.summarize): the page's size follows the
processes and bins, never the events.
"""

from __future__ import annotations

import base64
import os
import time
from functools import cache

import jinja2
import numpy as np
import orjson
from plotly.offline import get_plotlyjs

from .. import units
from ..model import Drawn
from . import report

# the plot that shows each rule's evidence
EVIDENCE = {"io-bound": "time-split", "imbalance": "proc-io", "small-reads": "sizes", "small-writes": "sizes",
            "random-reads": "offsets", "random-writes": "offsets", "metadata-heavy": "cost",
            "sync-heavy": "cost", "software-loading": "cost", "pipe-traffic": "cost",
            "redundant-reads": "files", "checkpoint-stall": "io-time", "collective-wait": "mpi-ranks",
            "cpu-starved": "mpi-ranks",
            "mpi-independent-small": "mpi", "mpi-misaligned": "mpi", "metadata-storm": "files",
            "misaligned": "files", "stdio-heavy": "files", "file-imbalance": "files", "mpi-blocking": "mpi",
            "mpiio-unused": "files"}
LINE_PROCESSES = 16  # up to this many processes: a line each; more: a heat map process x time
HEAT_ROWS = 1000  # processes in the heat map, the most I/O first
TABLE_ROWS = 50  # rows of the processes and files tables
SPLIT_PROCESSES = 30  # processes in the time split, the most I/O first
PHASE_LANES = 8  # phase kinds drawn as lanes under the I/O timeline
COUNTER_PANELS = 24  # counter plots: one panel per (process, counter name), the first these many
# the sampler's keys drawn at first; its others (read_bytes, write_bytes, open_files) a click away
COUNTER_SHOWN = ("cpu_percent", "rss_bytes")
CONFIG = {"displaylogo": False, "responsive": True}
# plotly.py's default look (its "plotly" template), named here so the page needs no template lookup
TEMPLATE = dict(layout=dict(paper_bgcolor="white", plot_bgcolor="#E5ECF6", font=dict(color="#2a3f5f"),
                            xaxis=dict(gridcolor="white", zerolinecolor="white"),
                            yaxis=dict(gridcolor="white", zerolinecolor="white"),
                            colorway=["#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3",
                                      "#FF6692", "#B6E880", "#FF97FF", "#FECB52"]))
COLORS = {"read": "#1f77b4", "write": "#d62728", "ops": "#555555"}
SPLIT = [("io_not_overlapped_us", "I/O not hidden by compute", "#d62728"),
         ("io_hidden_us", "I/O hidden by compute", "#ff9896"),
         ("compute_not_overlapped_us", "compute only", "#2ca02c"),
         ("ipc_us", "waiting on other processes (pipes, sockets)", "#c5b0d5"),
         ("other_us", "other traced work", "#9edae5"),
         ("untraced_us", "untraced (outside any event)", "#dddddd")]


def write(S: dict, drawn: Drawn, path: str) -> float:
    """Write the page; returns the seconds it took."""
    t0 = time.perf_counter()
    html = render(S, drawn)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(html)
    os.replace(tmp, path)
    return time.perf_counter() - t0


def render(S: dict, drawn: Drawn) -> str:
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
                  _io_time(S, drawn, job_start)))
    pt = drawn.proc_timeline
    if pt is not None and len(pt["processes"]):
        heat = len(pt["processes"]) > LINE_PROCESSES
        plots.append(("proc-io", "I/O over time per process",
                      "bytes moved per second by each process (heat map: one row per process, the most I/O first)"
                      if heat else "bytes moved per second by each process", _proc_io(pt, labels, job_start, heat)))
    if drawn.counters:
        plots.append(("counters", "Counters per process", _counters_note(drawn.counters),
                      _counters(drawn.counters, labels, job_start)))
    mpi = S.get("mpi")
    if mpi and mpi["ranks"]:
        plots.append(("mpi-ranks", "MPI ranks", _mpi_note(mpi), _mpi_ranks(mpi)))
    plots.append(("cost", "I/O cost per call family and per file class",
                  "call time: data calls against metadata (open, stat, seek, close...) and syncs; file classes "
                  "tell the job's data from the software it loads", _cost(S)))
    plots.append(("sizes", "Access sizes per call family", "calls per request size, as Darshan bins them",
                  _sizes(S)))
    if drawn.offsets:
        plots.append(("offsets", "Offsets against time, top data files",
                      "a uniform sample of each file's data calls: a rising line is sequential access, a "
                      "scatter is random", _offsets(drawn.offsets, labels, job_start)))
    # a finding's plot when the page drew it, else the table that holds its evidence (a Darshan
    # log without DXT has no per-process timeline)
    shown = {p[0] for p in plots} | {"files", "processes", "job"} | ({"mpi"} if S.get("mpi") else set())

    def link(rid: str) -> str:
        where = EVIDENCE.get(rid, "io-time")
        # (cpu-starved outside MPI: the processes table's wait for a CPU)
        return where if where in shown else "processes" if where in ("proc-io", "time-split", "mpi-ranks") \
            else "files"

    findings = [dict(f, link=link(f["id"]), figure=report._figure(f["value"]),
                     threshold=report._figure(f["threshold"]), brief=_evidence(f)) for f in S.get("findings") or []]
    figs = [dict(id=i, title=t, note=n, html=_plot_html("plot-" + i, fig)) for i, t, n, fig in plots]
    return _template().render(
        S=S, job=S["job"], findings=findings, rules_ran=S.get("findings") is not None, plots=figs,
        plotlyjs=get_plotlyjs(), identity=_identity(S, labels), files=_files(S), processes=_processes(S, labels),
        damage=S.get("damage") or {}, size=units.size, dur=units.duration, mpi=S.get("mpi"), darshan=S.get("darshan"),
        mpi_ranks=(S.get("mpi") or {}).get("ranks", [])[:TABLE_ROWS])


def _plot_html(div_id: str, fig: dict) -> str:
    """A figure's div and the script that draws it with plotly.js (what plotly.io.to_html
    writes; here without plotly.py's serializer, whose imports cost more than the page)."""
    spec = orjson.dumps(dict(fig, config=CONFIG), option=orjson.OPT_SERIALIZE_NUMPY).decode()
    spec = spec.replace("</", "<\\/")  # no "</script>" inside the script, whatever a file is called
    height = fig["layout"].get("height", 450)
    return (f'<div id="{div_id}" class="plotly-graph-div" style="height:{height}px; width:100%;"></div>'
            f'<script>(function () {{ const f = {spec}; Plotly.newPlot("{div_id}", f.data, f.layout, f.config); }})();'
            "</script>")


@cache
def _template() -> jinja2.Template:
    """The page's template, compiled once per user (Jinja's bytecode cache, in the temp folder:
    compiling it took 0.2 s of every run); compiled each time where that folder cannot be used."""
    def env(**kw) -> jinja2.Environment:
        return jinja2.Environment(loader=jinja2.PackageLoader("iotrace_analyzer.outputs", "templates"),
                                  autoescape=jinja2.select_autoescape(["html", "j2"]), **kw)

    try:
        return env(bytecode_cache=jinja2.FileSystemBytecodeCache()).get_template("report.html.j2")
    except (OSError, RuntimeError):  # (RuntimeError: a folder another user owns)
        return env().get_template("report.html.j2")


def _labels(S: dict) -> dict:
    """(host, pid) -> a short name: pid and role, the host when the job has several."""
    many_hosts = S["job"]["hosts"] > 1
    out = {}
    for p in S["processes"]:
        key = (p["host"], p["pid"])
        if key in out and p.get("rank") is None:  # an exec'd image of a ranked process: its rank's name
            continue
        name = f"{p['pid']} {p.get('role') or ''}".strip()
        if p.get("rank") is not None:
            name = f"rank {p['rank']} ({p['pid']})"
        out[key] = f"{p['host']}:{name}" if many_hosts else name
    return out


def _seconds(ns, start: int) -> np.ndarray:
    return (np.asarray(ns, np.float64) - start) / 1e9


# --------------------------------------------------------------------------- the plots
# Figures are plain dicts in plotly's figure schema (graph_objects' validators cost more than the
# rest of the page); numpy arrays go in as plotly.js typed-array specs (base64), not as decimal
# text.


def _typed(a) -> dict:
    """A numpy array (1 or 2 dimensions) as a plotly.js typed-array spec: float64, or float32
    when it comes as float32."""
    a = np.asarray(a)
    a = np.ascontiguousarray(a if a.dtype == np.float32 else a.astype(np.float64, copy=False))
    spec = {"dtype": "f4" if a.dtype == np.float32 else "f8", "bdata": base64.b64encode(a.tobytes()).decode("ascii")}
    if a.ndim == 2:
        spec["shape"] = f"{a.shape[0]}, {a.shape[1]}"
    return spec


def _fig(data: list, **layout) -> dict:
    layout.setdefault("margin", dict(l=10, r=10, t=40, b=40))
    layout.setdefault("template", TEMPLATE)
    return dict(data=data, layout=layout)


def _hbars(rows: list, series: list) -> list:
    """Horizontal bars: one trace per (key, name, colour) of `series` over `rows` (label, dict)."""
    y = [r[0] for r in rows]
    return [dict(type="bar", orientation="h", y=y, x=[r[1][key] / 1e6 for r in rows], name=name,
                 marker=dict(color=color), hovertemplate="%{y}: %{x:.4f} s " + name + "<extra></extra>")
            for key, name, color in series]


def _split_rows(p: dict) -> dict:
    io, io_free = p["io_us"], p["io_not_overlapped_us"]
    both = io_free + p["compute_us"]
    wall = p.get("wall_us") or p["app_us"]
    ipc = p.get("ipc_wait_us", 0)  # not I/O: other processes are waited for
    return dict(io_not_overlapped_us=io_free, io_hidden_us=io - io_free,
                compute_not_overlapped_us=p["compute_not_overlapped_us"], ipc_us=ipc,
                other_us=max(p["app_us"] - both - ipc, 0),
                untraced_us=max(wall - p["app_us"], 0))


def _split_note(S: dict) -> str:
    t = S["time"]
    return (f"the job's processes spent {100 * t['io_share_of_wall']:.1f}% of their wall time in I/O, "
            f"{units.duration(t['io_not_overlapped_us'])} of it not hidden by compute (summed over processes)")


def _time_split(S: dict, labels: dict) -> dict:
    procs = sorted(S["processes"], key=lambda p: -p["io_us"])[:SPLIT_PROCESSES]
    rows = [("all processes", _split_rows(S["time"]))] + [(labels[(p["host"], p["pid"])], _split_rows(p))
                                                          for p in procs]
    return _fig(_hbars(rows, SPLIT), barmode="stack", height=140 + 28 * len(rows),
                xaxis=dict(title=dict(text="seconds (process wall time)")),
                yaxis=dict(autorange="reversed", type="category", automargin=True),
                legend=dict(orientation="h", traceorder="normal", y=1.02, yanchor="bottom"))


MPI_SERIES = [("data_us", "MPI-IO data calls (less their waits)", "#1f77b4"),
              ("slow_wait_us", "waiting in collective calls for a slower rank", "#ff7f0e"),
              ("other_wait_us", "other waiting in collective calls", "#ffbb78"),
              ("posix_us", "POSIX calls (own time)", "#2ca02c")]


def _mpi_note(m: dict) -> str:
    ops = m["collective_ops"]
    return (f"per rank: {m['shape']}; {m['collective']['calls']} collective and {m['independent']['calls']} "
            f"independent MPI-IO data calls; the ranks waited {units.duration(ops['wait_us'])} in collective "
            f"calls, {units.duration(ops['slow_wait_us'])} of it for a slower rank's work"
            + (f"; slowest rank {m['slowest_rank']} at {m['slowest_to_median']:.2f}x the median data time"
               if m.get("slowest_to_median") is not None else ""))


def _mpi_ranks(m: dict) -> dict:
    """One bar per rank (the SPLIT_PROCESSES with the most data time when there are more)."""
    ranks = m["ranks"]
    if len(ranks) > SPLIT_PROCESSES:
        ranks = sorted(ranks, key=lambda r: -r["data_us"])[:SPLIT_PROCESSES]
    rows = [(f"rank {r['rank']}" if r["rank"] is not None else f"{r['host']}:{r['pid']}",
             dict(r, other_wait_us=max(r["collective_wait_us"] - r["slow_wait_us"], 0.0))) for r in ranks]
    return _fig(_hbars(rows, MPI_SERIES), barmode="stack", height=140 + 28 * len(rows),
                xaxis=dict(title=dict(text="seconds")),
                yaxis=dict(autorange="reversed", type="category", automargin=True),
                legend=dict(orientation="h", traceorder="normal", y=1.02, yanchor="bottom"))


def _phase_split(S: dict, labels: dict) -> dict:
    rows = [(f"{r['name']} #{r['index']} ({labels.get((r['host'], r['pid']), r['pid'])})", r)
            for r in S["phases"]["split"]]
    series = [("duration_us", "length", "#7f7f7f"), ("io_us", "I/O call time, its process", "#d62728"),
              ("io_all_us", "I/O call time, all processes", "#ff9896")]
    return _fig(_hbars(rows, series), barmode="group", height=140 + 40 * len(rows),
                xaxis=dict(title=dict(text="seconds")),
                yaxis=dict(autorange="reversed", type="category", automargin=True),
                legend=dict(orientation="h", y=1.02, yanchor="bottom"))


def _io_time(S: dict, drawn: Drawn, job_start: int) -> dict:
    tl = S["timeline"]
    w = tl["bin_ns"] / 1e9
    x = _typed(_seconds(tl["start_ns"] + tl["bin_ns"] * (np.arange(len(tl["ops"])) + 0.5), job_start))
    kinds = [k for k in drawn.phase_events or [] if k["events"]][:PHASE_LANES]
    data = [dict(type="scatter", x=x, y=_typed(np.asarray(tl["bytes_read"]) / w / 1e6), name="read MB/s",
                 line=dict(color=COLORS["read"])),
            dict(type="scatter", x=x, y=_typed(np.asarray(tl["bytes_written"]) / w / 1e6), name="write MB/s",
                 line=dict(color=COLORS["write"])),
            dict(type="scatter", x=x, y=_typed(np.asarray(tl["ops"]) / w), name="I/O calls/s", yaxis="y2",
                 line=dict(color=COLORS["ops"]))]
    # rows from the bottom: phase lanes (when any), calls/s, MB/s; one x axis for all
    domains = [[0.65, 1.0], [0.4, 0.61], [0.0, 0.36]] if kinds else [[0.42, 1.0], [0.0, 0.36]]
    layout = dict(xaxis=dict(title=dict(text="seconds since the job's start"), anchor="y3" if kinds else "y2"),
                  yaxis=dict(title=dict(text="MB/s"), domain=domains[0]),
                  yaxis2=dict(title=dict(text="calls/s"), domain=domains[1]),
                  height=560 if kinds else 420, legend=dict(orientation="h"), hovermode="x", shapes=[])
    if kinds:
        for lane, k in enumerate(kinds):
            ev = k["events"]
            xs = np.empty(3 * len(ev))
            xs[0::3] = _seconds([e[2] for e in ev], job_start)
            xs[1::3] = _seconds([e[2] + e[3] for e in ev], job_start)
            xs[2::3] = np.nan
            name = f"{k['cat']}: {k['name']}"
            data.append(dict(type="scatter", x=_typed(xs), y=_typed(np.full(len(xs), float(lane))), mode="lines",
                             line=dict(width=12), name=name, showlegend=False, connectgaps=False, yaxis="y3",
                             hovertemplate=name + " %{x:.4f} s<extra></extra>"))
        layout["yaxis3"] = dict(domain=domains[2], tickvals=list(range(len(kinds))), autorange="reversed",
                                ticktext=[f"{k['cat']}: {k['name']}" for k in kinds], automargin=True)
        for s_, d in _bands(kinds):  # the first kind with few events (epochs) shades the plots
            layout["shapes"].append(dict(type="rect", xref="x", yref="paper", x0=(s_ - job_start) / 1e9,
                                         x1=(s_ + d - job_start) / 1e9, y0=0, y1=1, fillcolor="#bbbbbb",
                                         opacity=0.2, line=dict(width=0), layer="below"))
    return _fig(data, **layout)


def _bands(kinds: list) -> list:
    """The events of the first phase kind with 2 to 50 events (epochs, stages): shading."""
    for k in kinds:
        if 2 <= len(k["events"]) <= 50:
            return [(e[2], e[3]) for e in k["events"]]
    return []


def _proc_io(pt: dict, labels: dict, job_start: int, heat: bool) -> dict:
    w = pt["bin_ns"] / 1e9
    nb = pt["ops"].shape[1]
    xs = _seconds(pt["start_ns"] + pt["bin_ns"] * (np.arange(nb) + 0.5), job_start)
    moved = (pt["read"] + pt["written"]) / w / 1e6
    names = [labels.get((p["host"], p["pid"]), str(p["pid"])) for p in pt["processes"]]
    axis = dict(title=dict(text="seconds since the job's start"))
    if not heat:
        data = [dict(type="scatter", x=_typed(xs), y=_typed(row), name=name, mode="lines",
                     hovertemplate=name + ": %{y:.2f} MB/s<extra></extra>") for name, row in zip(names, moved)]
        return _fig(data, height=360, xaxis=axis, yaxis=dict(title=dict(text="MB/s (read + written)")),
                    legend=dict(orientation="h"))
    order = np.argsort(-pt["io_ns"].sum(axis=1), kind="stable")[:HEAT_ROWS]
    z = moved[order].astype(np.float32)
    busy = z[z > 0]
    # colours up to the 99th percentile: one burst does not wash out every other row
    top = float(np.percentile(busy, 99)) if len(busy) else 1.0
    data = [dict(type="heatmap", z=_typed(z), x=_typed(xs), y=[names[i] for i in order], colorscale="Viridis",
                 zmin=0, zmax=top, colorbar=dict(title=dict(text="MB/s")),
                 hovertemplate="%{y} at %{x:.3f} s: %{z:.2f} MB/s<extra></extra>")]
    return _fig(data, height=min(200 + max(4, min(14, 800 // len(order))) * len(order), 1400), xaxis=axis,
                yaxis=dict(type="category", autorange="reversed", title=dict(text="process"), automargin=True))


def _counter_panels(series: list) -> list:
    """(host, pid, counter name) -> its series, in the summary's order (by process)."""
    panels: dict = {}
    for s in series:
        panels.setdefault((s["host"], s["pid"], s["name"]), []).append(s)
    return list(panels.items())


def _counters_note(series: list) -> str:
    n = len(_counter_panels(series))
    more = f"; the first {COUNTER_PANELS} of {n} (summary.json has them all)" if n > COUNTER_PANELS else ""
    return ("each process's counter samples, one panel per counter: CPU % and resident memory from "
            "--sample-ms (I/O bytes and open files in the legend), the program's iotrace.counter values; "
            f"a series of more than 512 samples shows each time bin's lowest and highest{more}")


def _counters(series: list, labels: dict, job_start: int) -> dict:
    """A panel per (process, counter name) under one time axis: its keys as lines, bytes in MiB
    on a right-hand axis, the rest (CPU %, the program's values) on the left."""
    panels = _counter_panels(series)[:COUNTER_PANELS]
    n = len(panels)
    colorway = TEMPLATE["layout"]["colorway"]
    groups: dict = {}  # legend group (counter name, key) -> colour; shown in the legend once
    data = []
    layout = dict(height=120 + 230 * n, hovermode="closest", legend=dict(orientation="h", y=1.0, yanchor="bottom"),
                  annotations=[], margin=dict(l=10, r=10, t=60, b=40))
    step, gap = 1.0 / n, min(0.3 / n, 0.08)
    for k, ((host, pid, name), ss) in enumerate(panels):
        xa, ya, yb = str(k + 1) if k else "", str(2 * k + 1) if k else "", str(2 * k + 2)
        top = 1.0 - k * step
        domain = [max(top - step + gap, 0.0), top - gap / 4]
        label = labels.get((host, pid), str(pid))
        left, right = [], []
        for s in ss:
            unit = s.get("unit")
            group = f"{name}: {s['key']}"
            new = group not in groups
            color = groups.setdefault(group, colorway[len(groups) % len(colorway)])
            mib = unit == "bytes"
            (right if mib else left).append(s["key"])
            shown = name != "process" or s["key"] in COUNTER_SHOWN
            fmt = "%{y:.1f} MiB" if mib else "%{y:.1f} %" if unit == "percent" else "%{y:.6g}"
            data.append(dict(type="scatter", mode="lines+markers", x=_typed(_seconds(s["ts_ns"], job_start)),
                             y=_typed(np.asarray(s["value"], np.float64) / (1 << 20 if mib else 1)),
                             name=group + (" (MiB)" if mib else " (%)" if unit == "percent" else ""),
                             legendgroup=group, showlegend=new, visible=True if shown else "legendonly",
                             line=dict(color=color, width=1.5), marker=dict(color=color, size=4),
                             xaxis="x" + xa, yaxis="y" + (yb if mib else ya),
                             hovertemplate=f"{label} {group}: {fmt} at %{{x:.3f}} s<extra></extra>"))
        layout["xaxis" + xa] = dict(anchor="y" + ya, matches="x" if k else None, showticklabels=True,
                                    title=dict(text="seconds since the job's start") if k == n - 1 else None)
        layout["yaxis" + ya] = dict(domain=domain, anchor="x" + xa, automargin=True, rangemode="tozero",
                                    title=dict(text="CPU %" if "cpu_percent" in left else ", ".join(left)))
        if right:
            layout["yaxis" + yb] = dict(overlaying="y" + ya, side="right", anchor="x" + xa, rangemode="tozero",
                                        title=dict(text="MiB"), showgrid=False, automargin=True,
                                        tickmode="auto")
        layout["annotations"].append(dict(text=f"<b>{label}</b>: {name}", x=0, xref="paper", y=domain[1],
                                          yref="paper", yanchor="bottom", xanchor="left", showarrow=False))
    for ax in [v for key, v in layout.items() if key.startswith("xaxis")]:
        if ax.get("matches") is None:
            ax.pop("matches", None)
        if ax.get("title") is None:
            ax.pop("title", None)
    return _fig(data, **layout)


def _cost(S: dict) -> dict:
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
    cl = list(classes)
    data = [dict(type="bar", orientation="h", y=fams, x=[by[f][0] / 1e6 for f in fams], marker=dict(color="#9467bd"),
                 customdata=[by[f][1] for f in fams], name="call family",
                 hovertemplate="%{y}: %{x:.4f} s in %{customdata} calls<extra></extra>"),
            dict(type="bar", orientation="h", y=cl, x=[classes[c]["time_us"] / 1e6 for c in cl], xaxis="x2",
                 yaxis="y2", marker=dict(color="#8c564b"), name="file class",
                 customdata=[[classes[c]["files"], classes[c]["metadata_time_us"] / 1e6] for c in cl],
                 hovertemplate="%{y}: %{x:.4f} s, %{customdata[0]} files, %{customdata[1]:.4f} s "
                 "metadata<extra></extra>")]
    seconds = dict(text="seconds")
    return _fig(data, height=max(300, 80 + 26 * max(len(fams), len(cl))), showlegend=False,
                xaxis=dict(domain=[0, 0.42], title=seconds), xaxis2=dict(domain=[0.58, 1], title=seconds, anchor="y2"),
                yaxis=dict(autorange="reversed", type="category", automargin=True),
                yaxis2=dict(autorange="reversed", type="category", anchor="x2", automargin=True),
                annotations=[dict(text=t, x=x, xref="paper", y=1.08, yref="paper", showarrow=False, xanchor="center")
                             for t, x in (("call time per call family", 0.21), ("call time per file class", 0.79))])


def _sizes(S: dict) -> dict:
    H = S["access"].get("size_histogram_by_family") or {
        f"all {d}": S["access"][d]["size_histogram"] for d in ("read", "write")}
    data = [dict(type="bar", x=list(h), y=list(h.values()), name=fam,
                 hovertemplate=fam + " %{x} B: %{y} calls<extra></extra>") for fam, h in H.items()]
    return _fig(data, barmode="group", height=360, xaxis=dict(title=dict(text="request size (bytes)")),
                yaxis=dict(title=dict(text="calls"), type="log"), legend=dict(orientation="h"))


def _offsets(files: list, labels: dict, job_start: int) -> dict:
    n = len(files)
    cols = 2 if n > 1 else 1
    nrows = -(-n // cols)
    data, shown = [], set()
    layout = dict(grid=dict(rows=nrows, columns=cols, pattern="independent", ygap=0.45, xgap=0.12),
                  height=150 + 280 * nrows, legend=dict(orientation="h"))
    for k, f in enumerate(files):
        ax = "" if k == 0 else str(k + 1)
        t = _seconds(f["ts_ns"], job_start)
        for write, name in ((False, "read"), (True, "write")):
            m = f["write"] == write
            if not m.any():
                continue
            data.append(dict(type="scatter", x=_typed(t[m]), y=_typed(f["offset"][m]), mode="markers",
                             marker=dict(size=4, color=COLORS[name]), name=name, legendgroup=name,
                             showlegend=name not in shown, xaxis="x" + ax, yaxis="y" + ax,
                             customdata=np.stack([f["length"][m], f["pid"][m]], axis=1).tolist(),
                             hovertemplate=name + " %{customdata[0]} B at %{y} by pid %{customdata[1]}, "
                             "%{x:.4f} s<extra></extra>"))
            shown.add(name)
        layout["xaxis" + ax] = dict(title=dict(text=f"{_short(f['file'])}: {f['calls']} calls (seconds)"))
        layout["yaxis" + ax] = dict(title=dict(text="offset (bytes)"))
    return _fig(data, **layout)


def _short(path: str, keep: int = 48) -> str:
    return path if len(path) <= keep else "..." + path[-keep:]


# --------------------------------------------------------------------------- the tables


def _evidence(f: dict) -> list[str]:
    """The same evidence as the text report's (report.evidence: insights.Evidence's rows and notes, the
    structure summary.json writes), five rows shown."""
    _key, rows, notes = report.evidence(f)
    return rows[:5] + ([f"... {len(rows) - 5} more"] if len(rows) > 5 else []) + notes


def _files(S: dict) -> list[dict]:
    return [dict(f, time=units.duration(f["time_us"]), read=units.size(f["bytes_read"]),
                 written=units.size(f["bytes_written"])) for f in S["files"][:TABLE_ROWS]]


def _processes(S: dict, labels: dict) -> list[dict]:
    """The processes table's rows; CPU time and the wait for a CPU empty where the trace's end
    has none (a killed process, an older trace)."""
    def maybe(us):
        return units.duration(us) if us is not None else ""

    out = []
    for p in S["processes"][:TABLE_ROWS]:
        out.append(dict(p, label=labels[(p["host"], p["pid"])], wall=units.duration(p.get("wall_us") or p["app_us"]),
                        io=units.duration(p["io_us"]), io_free=units.duration(p["io_not_overlapped_us"]),
                        compute=units.duration(p["compute_us"]), cpu=maybe(p.get("cpu_us")),
                        cpu_wait=maybe(p.get("cpu_wait_us")), read=units.size(p["bytes_read"]),
                        written=units.size(p["bytes_written"]), share=f"{100 * p['io_share_of_wall']:.1f}%"))
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
