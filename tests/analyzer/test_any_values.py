"""Whatever a program names its events and puts in their args, the analyzer reads the job:
categories and names that are iotrace's own (posix, process, dataloader, data, checkpoint,
fetch, epoch...), empty ones, numbers as strings, unicode, very long values, args of every JSON
type, beside POSIX events. A property test: hypothesis draws the events."""
from __future__ import annotations

import json

from conftest import end, fh, io, process, span, write_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from iotrace_analyzer.pipeline import Options, analyze
from iotrace_analyzer.analyses.summary import KNOWN_CALLS

US = 1000
OURS = ["posix", "stdio", "process", "dataloader", "data", "checkpoint", "fetch", "compute",
        "python", "epoch", "sample", "torch.save", "numpy.load", "iotrace_process", "FH"]
text = st.one_of(st.sampled_from(OURS + ["", "0", "-1", "1e309", "null", "é", "数据"]),
                 st.text(max_size=40),
                 st.integers(5_000, 100_000).map(lambda n: "é" * n))  # huge, cheap to draw
arg_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
              st.floats(allow_nan=False, allow_infinity=False), text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=6)
args = st.dictionaries(st.one_of(st.sampled_from(["bytes", "file", "loader", "epoch", "batches",
                                                  "exception", "index", "count", "complete"]),
                                 text), arg_value, max_size=5)
event = st.tuples(text, text, st.integers(0, 10_000), st.integers(0, 5_000), args)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(events=st.lists(event, min_size=1, max_size=12))
def test_any_category_name_and_args_analyze(tmp_path_factory, events):
    d = tmp_path_factory.mktemp("t")
    p = 100
    lines = [process(p), fh("/data/a.bin", p),
             io("read", p, 500 * US, 5 * US, path="/data/a.bin", fd=3, size=100, offset=0, ret=100)]
    for name, cat, t, dur, a in events:
        lines.append(span(name, cat, p, (1000 + t) * US, dur * US, args=a))
    write_trace(d / "a.pfw.zst", lines + [end(p, len(lines))])
    S = analyze([str(d)], Options(out_dir=str(d / "out"), engine="local")).summary
    json.dumps(S)
    # the program's events are its categories (unless they take a call's name in the tracer's
    # categories); the POSIX read is counted once whatever they say
    assert {c["name"]: c["count"] for c in S["calls"]}["read"] == 1
    tracers = sum(1 for n, c, *_ in events if c.lower() in ("posix", "stdio", "process") and n in KNOWN_CALLS)
    assert sum(c["count"] for c in S["categories"]) == len(events) - tracers
