"""`iotrace-analyze --compare BEFORE AFTER`: two runs side by side, the figures a person tuning
a loader or a checkpoint watches, and the findings fixed, new, better or worse.

Each side is a trace folder (analyzed here) or an earlier output: its folder with
summary.json, or the file itself.
"""

from __future__ import annotations

import json
import os

from .. import units

# A change is "better" or "worse" only past the noise of two runs of one job: a relative
# threshold (timings move 10-30% between runs on a shared machine; counts and bytes of the same
# work barely move) and, for times and shares, an absolute floor (0.001 s -> 0.0012 s is +20%
# and nothing).
SAME = {"s": 0.10, "share": 0.10, "MB/s": 0.10}  # relative, by unit
SAME_OTHER = 0.05
FLOOR = {"s": 0.01, "share": 0.02}  # seconds, share points


class UnreadableSide(ValueError):
    """A side with no event read: nothing to compare it on."""


def load_side(path: str, analyze_traces, label: str = "") -> dict:
    """The summary of one side: read from an earlier output, else made by `analyze_traces`.
    UnreadableSide when it holds no readable event (empty, damaged or not traces at all)."""
    if os.path.isfile(path) and path.endswith(".json"):
        with open(path) as f:
            S = json.load(f)
    elif os.path.isdir(path) and os.path.isfile(os.path.join(path, "summary.json")):
        with open(os.path.join(path, "summary.json")) as f:
            S = json.load(f)
    else:
        S = analyze_traces(path)
    if not isinstance(S, dict) or "job" not in S or "time" not in S:
        raise UnreadableSide(f"{label} {path}: not an iotrace-analyze summary")
    if not S["job"].get("events") and "darshan" not in S:  # (a Darshan log's counters are no events)
        d = S.get("damage", {})
        raise UnreadableSide(f"{label} {path}: no event could be read "
                             f"({S.get('input', {}).get('files', '?')} file(s), {d.get('bad_lines', 0)} bad "
                             f"line(s), {d.get('damaged_files', 0)} damaged file(s)); nothing to compare")
    return S


def damage_note(S: dict) -> str | None:
    """What reading a side met, when it met damage: its figures may be short."""
    d = S.get("damage") or {}
    if not d.get("damaged_files"):
        return None
    return (f"{d['damaged_files']} damaged file(s), {d.get('bad_lines', 0)} bad line(s), "
            f"{d.get('missing_child_count', 0)} child process(es) without a trace")


def _figures(S: dict, mpi: bool = False) -> list[tuple[str, float | None, str, int]]:
    """(label, value, unit, direction): direction -1 when lower is better, +1 when higher is,
    0 when neither (bytes moved: the work itself). `mpi`: with the MPI job's rows (either side
    an MPI job: the other shows them empty)."""
    t, j = S["time"], S["job"]
    data = S.get("file_classes", {}).get("data", {})
    calls = sum(c["count"] for c in S["calls"])
    io_s = t["io_us"] / 1e6
    moved = sum(p["bytes_read"] + p["bytes_written"] for p in S["processes"])
    md = S.get("metadata_calls", {}).get("data_files", {})
    loaders = S.get("training", {}).get("loaders", [])
    rows = [
        ("wall time (job)", j.get("wall_us", j["duration_us"]) / 1e6, "s", -1),
        ("wall time (sum of processes)", t.get("wall_us", t["app_us"]) / 1e6, "s", -1),
        ("I/O time", io_s, "s", -1),
        ("I/O share of wall", t.get("io_share_of_wall"), "share", -1),
        ("I/O not overlapped", t["io_not_overlapped_us"] / 1e6, "s", -1),
        ("I/O calls", calls, "", -1),
        ("data files: calls", data.get("count"), "", -1),
        ("data files: I/O time", data.get("time_us", 0) / 1e6, "s", -1),
        ("data files: metadata calls", md.get("count"), "", -1),
        ("data files: bytes read", data.get("bytes_read"), "B", 0),
        ("data files: bytes written", data.get("bytes_written"), "B", 0),
        ("bandwidth (bytes moved / I/O time)", moved / io_s / 1e6 if io_s else None, "MB/s", 1),
        ("processes", j["processes"], "", 0),
        ("events", j["events"], "", 0),
    ]
    if loaders:
        wait = sum(ld["fetch_wait_us"] for ld in loaders)
        total = sum(ld["epoch_time_us"] for ld in loaders)
        rows.append(("loop waiting for data", wait / total if total else None, "share", -1))
    if mpi:
        m = S.get("mpi") or {}
        ops = m.get("collective_ops") or {}
        run = sum(r["run_us"] for r in m.get("ranks", []))
        calls = m.get("calls")
        rows += [
            ("MPI-IO time (sum of ranks)", m["time_us"] / 1e6 if m else None, "s", -1),
            ("MPI-IO data calls", (m["collective"]["calls"] + m["independent"]["calls"]) if m else None, "", -1),
            ("MPI-IO collective share of data calls",
             m["collective"]["calls"] / max(m["collective"]["calls"] + m["independent"]["calls"], 1) if calls else None,
             "share", 1),
            ("ranks waiting for a slower rank", ops.get("slow_wait_us", 0) / run if run else None, "share", -1),
            ("slowest rank's data time / median", m.get("slowest_to_median"), "", -1),
        ]
    return rows


def _fmt(v, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "B":
        return units.size(v)
    if unit == "share":
        return f"{100 * v:.1f}%"
    if isinstance(v, float):
        return f"{v:.3f} {unit}".strip()
    return f"{v} {unit}".strip()


def _verdict(a, b, direction: int, unit: str = "") -> str:
    if a is None or b is None:
        return ""
    if a == b or abs(b - a) < FLOOR.get(unit, 0) or (a and abs(b - a) / abs(a) < SAME.get(unit, SAME_OTHER)):
        return "same"
    if direction == 0:
        return "more" if b > a else "less"
    return "better" if (b - a) * direction > 0 else "worse"


def compare(A: dict, B: dict) -> dict:
    """The comparison as data: figures and findings."""
    figs = []
    mpi = bool(A.get("mpi") or B.get("mpi"))
    for (label, a, unit, d), (_l, b, _u, _d) in zip(_figures(A, mpi), _figures(B, mpi)):
        change = None if a in (None, 0) or b is None else round((b - a) / a, 6)
        figs.append(dict(figure=label, before=a, after=b, unit=unit, change=change,
                         verdict=_verdict(a, b, d, unit)))
    fa = {f["id"]: f for f in A.get("findings", [])}
    fb = {f["id"]: f for f in B.get("findings", [])}
    finds = []
    for rid in list(fa) + [r for r in fb if r not in fa]:
        a, b = fa.get(rid), fb.get(rid)
        if a and not b:
            status = "fixed"
        elif b and not a:
            status = "new"
        else:
            status = _verdict(a["value"], b["value"], -1, "share")  # a finding's figure: lower is better
        finds.append(dict(id=rid, status=status, before=a and dict(severity=a["severity"], value=a["value"]),
                          after=b and dict(severity=b["severity"], value=b["value"]),
                          title=(b or a)["title"]))
    return dict(figures=figs, findings=finds, damage=dict(before=damage_note(A), after=damage_note(B)))


def text(C: dict, before: str, after: str) -> str:
    rows = [[f["figure"], _fmt(f["before"], f["unit"]), _fmt(f["after"], f["unit"]),
             "-" if f["change"] is None else f"{100 * f['change']:+.1f}%", f["verdict"]] for f in C["figures"]]
    out = [f"Compare: before {before}", f"         after  {after}"]
    for side, note in (C.get("damage") or {}).items():
        if note:
            out.append(f"  {side} was read with damage: {note} (its figures may be short)")
    out += [units.table("", ["figure", "before", "after", "change", ""], rows, left=(0, 4)), "Findings"]
    if not C["findings"]:
        out.append("  none before, none after")
    for f in C["findings"]:
        a = f"{f['before']['severity']} {f['before']['value']:.3g}" if f["before"] else "-"
        b = f"{f['after']['severity']} {f['after']['value']:.3g}" if f["after"] else "-"
        out.append(f"  {f['status'].upper():7s} {f['id']}: {a} -> {b}  ({f['title']})")
    return "\n".join(out) + "\n"
