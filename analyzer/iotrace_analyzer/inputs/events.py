"""Events made in Python: Chrome trace event dicts as a trace's lines hold them (a process's
`iotrace_process` record, FH file names, complete events; docs/trace-format.md). A test, a
notebook or another tool's adapter hands a process's events in without writing a file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson

from iotrace_format.reader import batches_of_text


@dataclass
class Events:
    path: str  # the name the events go by (a trace file's, say)
    events: list = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.events)

    def estimated_events(self) -> int:
        return len(self.events)

    def batches(self, damage: list) -> Iterator:
        return batches_of_text(b"".join(orjson.dumps(e) + b"\n" for e in self.events))
