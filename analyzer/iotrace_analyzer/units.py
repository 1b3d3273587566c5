"""Units and text tables shared by every output: ns to µs for the summary, sizes and times as
people read them, and the terminal's tables."""

from __future__ import annotations


def us(ns) -> float:
    """Nanoseconds as microseconds, to the ns (the summary's unit of time)."""
    return round(int(ns) / 1000.0, 3)


def mbps(nbytes, ns) -> float:
    """Bytes over nanoseconds as MB/s (10**6 bytes a second), three decimals (ns not 0)."""
    return round(nbytes / (ns / 1e9) / 1e6, 3)


def size(n) -> str:
    """Bytes as B, KiB, MiB... ("-" for none)."""
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def duration(us) -> str:
    """Microseconds as us, ms or s, three decimals."""
    us = float(us)
    if us >= 1e6:
        return f"{us / 1e6:.3f} s"
    if us >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.3f} us"


def table(title: str, header: list[str], rows: list[list], left: tuple[int, ...] = (0,)) -> str:
    """A titled text table: the header and the `left` columns left-aligned, the others
    right-aligned."""
    cells = [header] + [[("-" if c is None else str(c)) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    out = [title, line]
    for k, r in enumerate(cells):
        out.append("  ".join(c.rjust(w) if k and i not in left else c.ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths))))
        if k == 0:
            out.append(line)
    return "\n".join(out) + "\n"
