"""A new kind of input goes in one place (iotrace_analyzer.inputs): here events made in Python,
a process's record and three reads of one file, analyzed as a trace file of the same lines
is. The figures are the trace file's, to the byte and the microsecond."""

import orjson
from iotrace_analyzer.inputs import Events
from iotrace_analyzer.pipeline import Options, analyze

PID = 4242
MONO = 5_000_000_000
FH = "00000000000000aa"


def events() -> list[dict]:
    """What a process that read /data/a three times, 4 KiB each, would have written."""
    ev = [dict(ph="M", name="iotrace_process", cat="process", pid=PID, tid=PID,
               args=dict(version=1, hostname="toy", pid=PID, ppid=1, exe="/bin/toy", cmdline=["toy"],
                         wall_ns=1_700_000_000_000_000_000, mono_ns=MONO, role="main")),
          dict(ph="M", name="FH", pid=PID, tid=PID, args=dict(name="/data/a", value=FH)),
          dict(ph="X", name="open64", cat="posix", pid=PID, tid=PID, ts=5_000_100.0, dur=10.0,
               args=dict(fhash=FH, ret=3, flags=0))]
    for k in range(3):
        ev.append(dict(ph="X", name="pread64", cat="posix", pid=PID, tid=PID, ts=5_000_200.0 + 100 * k,
                       dur=20.0, args=dict(fhash=FH, fd=3, size=4096, offset=4096 * k, ret=4096)))
    ev.append(dict(ph="X", name="close", cat="posix", pid=PID, tid=PID, ts=5_000_600.0, dur=5.0,
                   args=dict(fhash=FH, fd=3, ret=0)))
    ev.append(dict(ph="M", name="iotrace_end", cat="process", pid=PID, tid=PID,
                   args=dict(events=len(ev) - 1, reason="exit")))
    return ev


def _figures(S: dict) -> dict:
    S = dict(S)
    for k in ("input", "damage"):
        S.pop(k)
    return S


def test_events_from_a_python_list_give_a_summary(tmp_path):
    job = analyze([Events("toy-toy-4242", events())], Options(engine="local", workers=1))
    S = job.summary
    assert S["input"]["files"] == 1 and S["damage"]["damaged_files"] == 0
    assert (S["job"]["processes"], S["job"]["files"], S["job"]["events"]) == (1, 1, 5)
    calls = {c["name"]: (c["count"], c["bytes"], c["time_us"]) for c in S["calls"]}
    assert calls == {"open64": (1, 0, 10.0), "pread64": (3, 3 * 4096, 60.0), "close": (1, 0, 5.0)}
    (f,) = S["files"]
    assert (f["file"], f["bytes_read"], f["reads"], f["read_sequential"]) == ("/data/a", 3 * 4096, 3, 2)
    assert [t.path for t in job.traces] == ["toy-toy-4242"] and S["processes"][0]["host"] == "toy"

    # the same lines as a trace file: the same figures
    path = tmp_path / "t" / "toy-toy-4242.pfw"
    path.parent.mkdir()
    path.write_bytes(b"[\n" + b",\n".join(orjson.dumps(e) for e in events()) + b"]\n")
    F = analyze([str(path.parent)], Options(engine="local", workers=1)).summary
    assert _figures(F) == _figures(S)
