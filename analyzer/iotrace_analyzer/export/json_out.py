"""Chrome/Perfetto JSON output (`-o job.json.gz`, `-o job.json`).

The workers write the events of each input file as a piece (`_export.JsonWriter`: lines each
starting with ",\n", deflated when gzip'd); the main process writes the head (process names
and sort order) and the tail, and joins the pieces into one JSON object, in one gzip member
when gzip'd (gzjoin.py).
"""

from __future__ import annotations

import shutil

import orjson

from .gzjoin import GzipJoiner
from .labels import Proc


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
                shutil.copyfileobj(f, self.file, 1 << 20)

    def finish(self, data: bytes) -> None:
        self.gz.finish(data) if self.gz else self.file.write(data)
        self.file.close()
