"""Trace files: iotrace's (compact or JSON lines; zstd, gzip or plain) and DFTracer's, read by
the format layer (iotrace_format.reader) as column batches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from iotrace_format.reader import form_by_name, iter_batches

# trace bytes per event, by the form a file's name says (reader.form_by_name)
BYTES_PER_EVENT = {"compact": 1.2, "zstd": 12.0, "gzip": 14.0, "plain": 170.0}


def estimate(path: str, size: int) -> int:
    """The events a trace file of this size holds, about: by its form as its name says (the
    planner does not open a million files)."""
    return int(size / BYTES_PER_EVENT[form_by_name(path)])


@dataclass(frozen=True, slots=True)
class TraceFile:
    path: str
    size: int

    def estimated_events(self) -> int:
        return estimate(self.path, self.size)

    def batches(self, damage: list, ahead=None) -> Iterator:
        # file names apart (Batch.names): a million FH lines without a line object each;
        # `ahead`: the task's helper (engine.Helper) decodes the next blocks meanwhile
        return iter_batches(self.path, damage, names_apart=True, ahead=ahead)
