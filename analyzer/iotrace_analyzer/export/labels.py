"""The job's process tree: who is whose child, how each process is labelled and
sorted, and which flows (fork/spawn arrows) join them.

Built from the `iotrace_process` event that opens every per-process trace, so
it is known before a single event is exported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from iotrace_format import rank_of
from iotrace_format.clock import JobClock

# Linux pids stay below 2**22 (pid_max); with several hosts, the host's index
# goes above that so that equal pids on two hosts stay two processes.
PID_BITS = 22
_PID_IN_NAME = re.compile(r"-(\d+)(?:-\d+)?\.(?:pfw|iotc)(?:\.\w+)?$")


@dataclass
class TraceFile:
    """One per-process trace file, as seen from its first line."""

    path: str
    index: int  # position among the inputs; numbers sequences and tracks
    info: dict  # args of `iotrace_process` ({} when the line is missing)
    pid: int
    host: str
    # Its times' shift onto the export's time line (merge.py, on_job_clock): None, its own
    # monotonic clock as written (a job on one host)
    clock: JobClock | None = None


@dataclass
class Proc:
    """One process of the job (the files of one pid on one host: exec keeps the pid)."""

    host: str
    pid: int
    files: list[TraceFile]
    vpid: int = 0  # the pid shown in Perfetto
    label: str = ""
    sort_index: int = 0
    parent: Proc | None = None
    children: list[Proc] = field(default_factory=list)
    flow_id: int = 0  # the arrow from the parent to this process (0: none)

    @property
    def info(self) -> dict:
        return self.files[0].info

    @property
    def role(self) -> str:
        return self.info.get("role") or "main"

    @property
    def forked(self) -> bool:
        """Started by a fork (its arrow comes from the fork event), whatever role it learnt
        later (a multiprocessing or DataLoader worker says so after its trace began)."""
        return (self.info.get("started_as") or self.role) == "fork"

    @property
    def rank(self) -> int | None:
        """Its rank, from any of its images: a rank started by a traced launcher (mpirun's fork
        child, then the program it exec'd) has its rank only in its later image."""
        return next((r for r in (rank_of(f.info) for f in self.files) if r is not None), None)

    @property
    def start_ns(self) -> int | None:
        """Process start on the export's time line (ns): the monotonic clock at its first line,
        shifted as its events are."""
        mono = self.info.get("mono_ns")
        if not isinstance(mono, (int, float)) or isinstance(mono, bool):
            return None
        clock = self.files[0].clock
        return int(mono) if clock is None else clock.job_ns(int(mono))

    @property
    def exe(self) -> str:
        exe = self.info.get("exe") or ""
        return exe.rsplit("/", 1)[-1] or f"pid {self.pid}"


def trace_file(path: str, index: int, first_event: dict | None) -> TraceFile:
    """Describe a file from its first event (normally `iotrace_process`)."""
    first = first_event or {}
    info = first.get("args", {}) if first.get("name") == "iotrace_process" else {}
    pid = info.get("pid", first.get("pid"))
    if pid is None:
        match = _PID_IN_NAME.search(path)
        pid = int(match.group(1)) if match else 0
    return TraceFile(path, index, info, int(pid), str(info.get("hostname", "")))


def build_processes(files: list[TraceFile]) -> list[Proc]:
    """Group files into processes, link parents, then label, number and sort them."""
    procs: dict[tuple[str, int], Proc] = {}
    for f in sorted(files, key=lambda f: (f.info.get("mono_ns", 0), f.index)):
        key = (f.host, f.pid)
        if key in procs:
            procs[key].files.append(f)  # an exec'd image of the same process
        else:
            procs[key] = Proc(f.host, f.pid, [f])

    hosts = sorted({p.host for p in procs.values()})
    for p in procs.values():
        p.vpid = p.pid if len(hosts) == 1 else (hosts.index(p.host) + 1) << PID_BITS | p.pid
        parent = procs.get((p.host, p.info.get("parent_pid")))
        if parent is not None and parent is not p:
            p.parent = parent
            parent.children.append(p)

    ordered = sorted(procs.values(), key=_sort_key)
    for number, p in enumerate(ordered, 1):
        p.sort_index = number
        if p.parent is not None:
            p.flow_id = number
    numbers = _child_numbers(ordered)
    for p in ordered:  # parents sort before their children: their labels come first
        p.label = _label(p, numbers.get(id(p), 0))
    return ordered


def _sort_key(p: Proc) -> tuple:
    """Rank, then the parent chain, then the pid: a child sorts right under its parent."""
    chain = []
    node: Proc | None = p
    while node is not None:
        chain.append(node)
        node = node.parent
    root = chain[-1]
    rank = next((n.rank for n in chain if n.rank is not None), 1 << 31)  # its own, else its parents'
    return (rank, root.host) + tuple(n.pid for n in reversed(chain))


def _label(p: Proc, number: int) -> str:
    """`rank N` for a rank (a process with a rank its parent does not have: under a traced
    mpirun too), `<parent> · <role> <number>` for a rank's workers and other children."""
    if p.rank is not None and (p.parent is None or p.parent.rank != p.rank):
        return f"rank {p.rank}"
    if p.parent is None:
        return p.exe if p.role in ("main", "exec") else f"{p.exe} ({p.role})"
    return f"{p.parent.label} · {p.role} {number}"


def _child_numbers(procs: list[Proc]) -> dict[int, int]:
    """id(child) -> its number among its parent's children of the same role: the `worker_id`
    the Python layer recorded if any, else the position in pid order. Siblings are sorted
    once per parent and role (a parent can fork thousands)."""
    numbers: dict[int, int] = {}
    for parent in procs:
        by_role: dict[str, list[Proc]] = {}
        for c in parent.children:
            by_role.setdefault(c.role, []).append(c)
        for siblings in by_role.values():
            for n, c in enumerate(sorted(siblings, key=lambda c: c.pid)):
                worker_id = c.info.get("worker_id")
                numbers[id(c)] = worker_id if isinstance(worker_id, int) else n
    return numbers
