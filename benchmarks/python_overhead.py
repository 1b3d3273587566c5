"""Cost of Python tracing: ns per @trace call (enabled and disabled), `import iotrace` time,
the example training pipeline traced vs untraced, and bytes per event on disk of both (in the
default compact form and in the JSON form, IOTRACE_FORMAT=json).

Each figure is a median over repeated runs in fresh subprocesses; traced and untraced runs
alternate so that drift on a shared machine hits both. Usage:
    python benchmarks/python_overhead.py [--calls 1000000] [--repeats 7] [--pipeline-pairs 5]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CALLS = r"""
import functools, sys, time, iotrace
n = int(sys.argv[1])
def plain(x): return x
@iotrace.trace
def traced(x): return x
@iotrace.trace(args=["x"])
def traced_args(x): return x
wrapped = functools.partial(plain)  # CPython's own C wrapper: the floor of any wrapper's cost
def loop(f):
    t = time.perf_counter_ns()
    for i in range(n): f(i)
    return time.perf_counter_ns() - t
loop(plain); loop(traced); loop(wrapped)  # warm up
base = min(loop(plain) for _ in range(3))
print((min(loop(traced) for _ in range(3)) - base) / n,
      (min(loop(traced_args) for _ in range(3)) - base) / n,
      (min(loop(wrapped) for _ in range(3)) - base) / n)
"""


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env


def per_call(calls: int, env: dict) -> tuple[float, float, float]:
    """ns per call over a plain call: @trace, @trace(args=[...]), functools.partial."""
    out = subprocess.run([sys.executable, "-c", CALLS, str(calls)], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1]), float(out[2])


def bytes_per_event(folder: str) -> float:
    """Bytes on disk per event line of every trace file under `folder`, either form."""
    from iotrace_format import reader

    files = reader.find_traces([folder])
    lines = sum(sum(b.count(b"\n") for b in reader.iter_blocks(f)) - 1 for f in files)  # minus "["
    return sum(os.path.getsize(f) for f in files) / lines


def import_ms(repeats: int) -> float:
    """Cumulative time of `import iotrace` as CPython's -X importtime reports it (median)."""
    def run() -> float:
        err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import iotrace"],
                             env=clean_env(), check=True, capture_output=True, text=True).stderr
        line = next(l for l in err.splitlines() if l.rstrip().endswith("| iotrace"))
        return int(line.split("|")[1]) / 1000
    return statistics.median(run() for _ in range(repeats))


def timed(cmd: list[str], **env: str) -> tuple[float, float]:
    """(wall s, CPU s of the whole process tree: user + sys of every child reaped)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=clean_env(**env), check=True, capture_output=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def pipeline_args(tmp: str) -> list[str]:
    script = os.path.join(ROOT, "examples", "train_pipeline.py")
    return [script, "--data", os.path.join(tmp, "data"), "--samples", "2048", "--epochs", "3"]


def preload() -> str:
    import iotrace

    return os.environ.get("IOTRACE_BENCH_PRELOAD") or iotrace.preload_path()


def pipeline(pairs: int, tmp: str) -> tuple[list, list]:
    args = pipeline_args(tmp)
    subprocess.run([sys.executable, *args], env=clean_env(), check=True, capture_output=True)  # dataset
    # Traced as `iotrace run` sets it up (LD_PRELOAD + IOTRACE_DIR), without the launcher's own
    # Python start-up, which launcher_ms() reports apart: a fixed cost, not the tracer's.
    plain, traced = [], []
    for i in range(pairs):
        plain.append(timed([sys.executable, *args]))
        traced.append(timed([sys.executable, *args], LD_PRELOAD=preload(),
                            IOTRACE_DIR=os.path.join(tmp, f"t{i}"), IOTRACE_ENABLE="1"))
    return plain, traced


def launcher_ms(repeats: int) -> float:
    """What `iotrace run -- CMD` adds before CMD starts: a Python start-up and an exec."""
    run = [sys.executable, "-m", "iotrace", "run", "-o", tempfile.mkdtemp(), "--", "/bin/true"]
    return statistics.median(timed(run)[0] - timed(["/bin/true"])[0] for _ in range(repeats)) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--pipeline-pairs", type=int, default=5, help="0 skips the pipeline figure")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        on = [per_call(args.calls, clean_env(IOTRACE_ENABLE="1", IOTRACE_DIR=tmp)) for _ in range(args.repeats)]
        off = [per_call(args.calls, clean_env()) for _ in range(args.repeats)]
        print(f"@trace enabled:   {statistics.median(a for a, _, _ in on):6.1f} ns per call "
              f"(with one recorded argument: {statistics.median(b for _, b, _ in on):.1f})   target <= 300")
        # a disabled @trace is a C wrapper that calls the function: it costs what any C wrapper
        # costs on the machine (the VM's varies from day to day), shown beside it
        print(f"@trace disabled:  {statistics.median(a for a, _, _ in off):6.1f} ns per call   target <= 30 "
              f"(functools.partial here: {statistics.median(c for _, _, c in off):.1f})")
        print(f"import iotrace:   {import_ms(args.repeats):6.1f} ms   target < 20")
        size = {}
        for form in ("compact", "json"):
            folder = os.path.join(tmp, f"size-{form}")
            per_call(args.calls // 10, clean_env(IOTRACE_ENABLE="1", IOTRACE_DIR=folder, IOTRACE_FORMAT=form))
            size[form] = bytes_per_event(folder)
        print(f"@trace events on disk: {size['compact']:.2f} bytes each (JSON form {size['json']:.2f})   "
              "target <= 6")
        if args.pipeline_pairs:
            plain, traced = pipeline(args.pipeline_pairs, tmp)
            m = statistics.median
            for i, what in ((0, "wall"), (1, "CPU ")):
                p, t = m(x[i] for x in plain), m(x[i] for x in traced)
                pair = sorted(100 * (b[i] - a[i]) / a[i] for a, b in zip(plain, traced))
                print(f"example pipeline {what}: {p:.2f} s untraced, {t:.2f} s traced (LD_PRELOAD): "
                      f"{100 * (t - p) / p:+.1f} % (medians of {len(plain)} pairs; pairs from "
                      f"{pair[0]:+.1f} to {pair[-1]:+.1f} %)   target <= 3 %")
            json_dir = os.path.join(tmp, "t-json")
            timed([sys.executable, *pipeline_args(tmp)], LD_PRELOAD=preload(), IOTRACE_DIR=json_dir,
                  IOTRACE_ENABLE="1", IOTRACE_FORMAT="json")
            print(f"example pipeline on disk: {bytes_per_event(os.path.join(tmp, 't0')):.2f} bytes per "
                  f"event (JSON form {bytes_per_event(json_dir):.2f})   target <= 6")
            print(f"`iotrace run` launcher: {launcher_ms(args.repeats):.0f} ms once per job (a Python start-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
