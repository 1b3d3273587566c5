"""Loss rate of traces on a loaded machine (issue 22): how often a process of a job ends without
its whole trace.

Runs each job of tests/loss_scenarios.py (mp.Pool fork and spawn, ProcessPoolExecutor with and
without cancel_futures, a torch DataLoader's persistent workers, mp.Process terminated and
killed, `cmd &` in sh, a killed background sleeper, subprocess.run's timeout) N times under
`iotrace run` while K processes spin, and prints per scenario: the runs, the processes the jobs
started (expected), those with a trace, those whose trace matched what they did (the opens,
reads and bytes of the data files each process counted itself, and a finished trace), the loss
rate (expected processes without a matching trace, over expected), the runs that lost anything,
and the mean and largest wall time of a run (the job alone, not the check). The first problems
of each scenario follow the table. Usage:
    python benchmarks/loss_rate.py [--runs 100] [--load 2] [--scenarios pool-fork,sh-kill]
                                   [--python PATH] [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import loss_scenarios as ls  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100, help="runs of each scenario")
    ap.add_argument("--load", type=int, default=2, help="spinning processes while the jobs run")
    ap.add_argument("--scenarios", default=",".join(s.name for s in ls.SCENARIOS),
                    help="comma-separated names (default: all)")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter whose iotrace installation runs the jobs (to compare builds)")
    ap.add_argument("--keep", help="keep the folders of runs that lost something here, and every problem in "
                    "DIR/problems.txt (default: only the first few are printed)")
    args = ap.parse_args()
    chosen = [ls.BY_NAME[n] for n in args.scenarios.split(",") if n]
    tmp = tempfile.TemporaryDirectory(prefix="loss-rate-")
    base = Path(args.keep) if args.keep else Path(tmp.name)
    data = ls.make_data(Path(tmp.name) / "data")
    print(f"{args.runs} runs per scenario, {args.load} spinning processes, {os.cpu_count()} CPUs, "
          f"jobs run by {args.python}")
    w = max(len(s.name) for s in chosen)
    head = (f"{'scenario':<{w}} {'runs':>5} {'expected':>8} {'traced':>7} {'matched':>7} {'loss %':>7} "
            f"{'runs lost':>9} {'s/run':>6} {'max s':>6}")
    print(head)
    problems: dict[str, list[str]] = {}
    totals = [0, 0, 0, 0, 0]
    t0 = time.perf_counter()
    with ls.busy_load(args.load):
        for s in chosen:
            why = ls.missing_module(s, args.python)
            if why:
                print(f"{s.name:<{w}} skipped: {why}")
                continue
            results = []
            for run in range(args.runs):
                folder = base / s.name / f"run{run}"
                r = ls.run_once(s, data, folder, run, args.python)
                results.append(r)
                if not r.problems or not args.keep:
                    ls.cleanup(folder)
            expected = sum(len(r.expected) for r in results)
            traced = sum(len(r.traced) for r in results)
            matched = sum(len(r.matched) for r in results)
            lost_runs = sum(1 for r in results if r.problems)
            secs = [r.seconds for r in results]
            loss = 100 * (expected - matched) / expected if expected else 0.0
            print(f"{s.name:<{w}} {len(results):>5} {expected:>8} {traced:>7} {matched:>7} {loss:>7.2f} "
                  f"{lost_runs:>9} {statistics.mean(secs):>6.2f} {max(secs):>6.2f}", flush=True)
            problems[s.name] = [p for r in results for p in r.problems]
            for i, v in enumerate((len(results), expected, traced, matched, lost_runs)):
                totals[i] += v
    runs, expected, traced, matched, lost_runs = totals
    loss = 100 * (expected - matched) / expected if expected else 0.0
    print(f"{'all':<{w}} {runs:>5} {expected:>8} {traced:>7} {matched:>7} {loss:>7.2f} {lost_runs:>9}   "
          f"({time.perf_counter() - t0:.0f} s in all)")
    if args.keep:
        (base / "problems.txt").write_text("".join(line + "\n" for lines in problems.values() for line in lines))
    for name, lines in problems.items():
        if lines:
            print(f"\n{name}: {len(lines)} problems; the first:")
            for line in lines[:5]:
                print("  " + line)
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
