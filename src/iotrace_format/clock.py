"""A process's times on the job clock (docs/trace-format.md, "Clock").

A trace's `ts` is its host's CLOCK_MONOTONIC. The job clock is wall-clock ns: a process's
`ts` (ns) plus its shift, `wall_ns - mono_ns` of its `iotrace_process` record, plus the
offset to rank 0 that its `iotrace_clock` records measured (an MPI rank: at MPI_Init and at
MPI_Finalize). Between two measurements the offset is interpolated linearly (the hosts'
clocks drift apart slowly); before the first and after the last it is theirs. Without a
measurement the shift is the wall-clock one alone, as good as the hosts' NTP.
"""

from __future__ import annotations

from dataclasses import dataclass

CLOCK_EVENT = "iotrace_clock"  # the metadata event of a measurement


def _int(v) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass(frozen=True, slots=True)
class JobClock:
    """The shift (ns) that puts a process's times on the job clock, as a line through its
    measurements: `points` holds (CLOCK_MONOTONIC ns, shift ns), ordered by time, one at
    least (a single point: the same shift at every time)."""

    points: tuple[tuple[int, int], ...] = ((0, 0),)
    measured: bool = False  # an offset was measured (else the shift is the wall-clock one)

    @classmethod
    def of(cls, info: dict | None, clocks=()) -> JobClock:
        """The clock of a process from its `iotrace_process` args (`info`, with the
        `iotrace_process_info` updates or not: they never change the clock pair) and the args
        of its `iotrace_clock` events (`clocks`, any order)."""
        info = info if isinstance(info, dict) else {}
        wall, mono = _int(info.get("wall_ns")), _int(info.get("mono_ns"))
        base = wall - mono if wall is not None and mono is not None else 0
        points: dict[int, int] = {}
        for c in clocks:
            if not isinstance(c, dict):
                continue
            at, offset = _int(c.get("mono_ns")), _int(c.get("offset_ns"))
            if at is not None and offset is not None:
                points[at] = base + offset  # the same moment twice (a fork child's copy): one
        if not points:
            return cls(((0, base),))
        return cls(tuple(sorted(points.items())), True)

    @property
    def constant(self) -> bool:
        """The same shift at every time."""
        return all(s == self.points[0][1] for _t, s in self.points)

    def at(self, t: int) -> int:
        """The shift at CLOCK_MONOTONIC time `t` (ns): rounded down, so that t + at(t) never
        decreases as t grows (events keep their order and nesting)."""
        p = self.points
        if t <= p[0][0] or len(p) == 1:
            return p[0][1]
        if t >= p[-1][0]:
            return p[-1][1]
        k = next(i for i in range(1, len(p)) if t < p[i][0])
        (t0, s0), (t1, s1) = p[k - 1], p[k]
        return s0 + (s1 - s0) * (t - t0) // (t1 - t0)

    def job_ns(self, t: int) -> int:
        """`t` (the process's CLOCK_MONOTONIC ns) on the job clock."""
        return t + self.at(t)
