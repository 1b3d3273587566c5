"""Chrome/Perfetto JSON output (`-o job.json.gz`, `-o job.json`).

Each worker writes the events of one input file as a piece (`JsonPart`); the
main process writes the head (process names and sort order) and the tail, and
joins the pieces into one JSON object, in one gzip member when gzip'd.
"""

from __future__ import annotations

import orjson

from .gzjoin import DeflatePiece, GzipJoiner
from .labels import Proc


class JsonPart:
    """Events of one input file, as JSON lines each starting with ',' (the head
    ends with an event, so the pieces need no separator of their own)."""

    def __init__(self, path: str, gzip: bool, pid_shift: int):
        self.file = open(path, "wb")
        self.out = DeflatePiece(self.file) if gzip else self.file
        self.pid_shift = pid_shift  # vpid - pid: nonzero only with several hosts
        self.lines: list[bytes] = []

    def event(self, ev: dict) -> None:
        if self.pid_shift:
            ev["pid"] += self.pid_shift
            ev["tid"] += self.pid_shift
        if "_in" in ev or "_out" in ev:
            self._flows(ev, ev.pop("_in", 0), ev.pop("_out", ()))
        self.lines.append(orjson.dumps(ev))
        if len(self.lines) >= 4096:
            self._flush()

    def _flows(self, ev: dict, flow_in: int, flows_out: list[int]) -> None:
        """Flow events (v1) at the slice's start on its thread: Perfetto binds
        each to the slice open there ("bp":"e" for the arrow's end as well)."""
        where = {"pid": ev["pid"], "tid": ev["tid"], "ts": ev["ts"], "cat": "flow",
                 "name": "flow"}
        if flow_in:
            self.lines.append(orjson.dumps({"ph": "f", "bp": "e", "id": flow_in, **where}))
        for flow in flows_out:
            self.lines.append(orjson.dumps({"ph": "s", "id": flow, **where}))

    def thread(self, pid: int, tid: int, name: str) -> None:
        self.lines.append(orjson.dumps(
            {"ph": "M", "name": "thread_name", "pid": pid + self.pid_shift,
             "tid": tid + self.pid_shift, "args": {"name": name}}))

    def _flush(self) -> None:
        if self.lines:
            self.out.write(b",\n" + b",\n".join(self.lines))
            self.lines.clear()

    def close(self) -> tuple[int, int]:
        """Finish the piece: (crc, size) of its text for the gzip trailer."""
        self._flush()
        crc = size = 0
        if isinstance(self.out, DeflatePiece):
            self.out.close()
            crc, size = self.out.crc, self.out.size
        self.file.close()
        return crc, size


def head(procs: list[Proc]) -> bytes:
    """Start of the trace: one name and sort index per process (at least one)."""
    lines = []
    for p in procs:
        for name, args in (("process_name", {"name": p.label}),
                           ("process_sort_index", {"sort_index": p.sort_index})):
            lines.append(orjson.dumps({"ph": "M", "name": name, "pid": p.vpid,
                                       "tid": p.vpid, "args": args}))
    return b'{"displayTimeUnit":"ns","traceEvents":[\n' + b",\n".join(lines)


def tail(notes: list[dict], summary: dict) -> bytes:
    """End of the trace: the notes (global instants) and the export summary."""
    lines = b"".join(b",\n" + orjson.dumps(n) for n in notes)
    return lines + b"\n],\n" + orjson.dumps({"metadata": {"iotrace_export": summary}})[1:]


class JsonJob:
    """Assembles head, pieces and tail into the output file."""

    def __init__(self, path: str, gzip: bool):
        self.file = open(path, "wb")
        self.gz = GzipJoiner(self.file) if gzip else None

    def write_head(self, data: bytes) -> None:
        self.gz.add_text(data) if self.gz else self.file.write(data)

    def add_part(self, path: str, crc: int, size: int) -> None:
        if self.gz:
            self.gz.add_file(path, crc, size)
        else:
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    self.file.write(chunk)

    def finish(self, data: bytes) -> None:
        self.gz.finish(data) if self.gz else self.file.write(data)
        self.file.close()
