"""Cost of the zero-annotation hooks (iotrace.auto) on a training job's data loading.

Figures, each a minimum over repeats in fresh subprocesses under the tracer (LD_PRELOAD),
hooks on (IOTRACE_AUTO=1) against hooks off (IOTRACE_AUTO=0), runs alternating:
- per batch and per sample: a DataLoader without workers over a dataset of trivial items
  (the worst case: nothing else to hide the hooks), batch_size 1 and 64; the two equations
  (batch + sample, batch + 64 samples) give each cost;
- `import torch`: its time inside the process, and the interpreter's whole start-up with the
  start-up hook (.pth) importing iotrace;
- untraced interpreters: the .pth line's cost when tracing is off (every Python start of the
  environment pays it).
Targets (issue 15): <= 2 us per batch and per sample, <= 5 ms added to `import torch`.

    python benchmarks/auto_hooks_bench.py [--batches 20000] [--repeats 5] [--imports 15]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

LOOP = r"""
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __init__(self, n): self.n = n
    def __len__(self): return self.n
    def __getitem__(self, i): return i

def identity(items): return items
batch, n = int(sys.argv[1]), int(sys.argv[2])
loader = DataLoader(Items(n * batch), batch_size=batch, collate_fn=identity)
for _ in loader: pass                     # warm up
best = float("inf")
for _ in range(3):
    t = time.perf_counter_ns()
    for _ in loader: pass
    best = min(best, time.perf_counter_ns() - t)
print(best / n)
"""

IMPORT = r"""
import time
t = time.perf_counter_ns()
import torch
print((time.perf_counter_ns() - t) / 1e6)
"""

# The hooks' own share of `import torch`, timed inside one process: the post-import finder
# (asked for every module torch imports) and the hooks it runs. Differences of whole imports
# between processes move by tens of ms on a shared VM; this one does not.
IMPORT_INSIDE = r"""
import time
from iotrace import post_import as pi
acc = [0, 0, 0]
run0, find0 = pi._run, pi._Finder.find_spec
def run(name, module, hooks):
    t = time.perf_counter_ns(); run0(name, module, hooks); acc[0] += time.perf_counter_ns() - t
def find(self, name, path=None, target=None):
    t = time.perf_counter_ns(); r = find0(self, name, path, target)
    acc[1] += time.perf_counter_ns() - t; acc[2] += 1
    return r
pi._run, pi._Finder.find_spec = run, find
import torch
print(acc[0] / 1e6, acc[1] / 1e6, acc[2])
"""


def env_for(auto: str | None, trace_dir: str) -> dict:
    import iotrace

    env = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
    if auto is not None:
        env.update(LD_PRELOAD=iotrace.preload_path(), IOTRACE_DIR=trace_dir, IOTRACE_AUTO=auto)
    return env


def run(code: str, args: list[str], env: dict) -> float:
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.split()[-1])


def wall(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return (time.perf_counter() - t) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--imports", type=int, default=15)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="iotrace-auto-bench-")
    on, off = env_for("1", tmp), env_for("0", tmp)

    per = {}
    for batch in (1, 64):
        n = a.batches if batch == 1 else max(1, a.batches // 16)
        t_on, t_off = [], []
        for _ in range(a.repeats):
            t_on.append(run(LOOP, [str(batch), str(n)], on))
            t_off.append(run(LOOP, [str(batch), str(n)], off))
        per[batch] = (min(t_on), min(t_off))
    one = per[1][0] - per[1][1]      # batch + 1 sample
    many = per[64][0] - per[64][1]   # batch + 64 samples
    sample = (many - one) / 63
    batch_cost = one - sample
    print(f"DataLoader loop, ns per batch (hooks on / off): batch_size 1: {per[1][0]:.0f} / "
          f"{per[1][1]:.0f}; batch_size 64: {per[64][0]:.0f} / {per[64][1]:.0f}")
    print(f"hooks: {batch_cost / 1e3:.2f} us per batch (fetch event), "
          f"{sample / 1e3:.2f} us per sample (sample event)   [target <= 2 us each]")

    imp_on, imp_off, start_on, start_off = [], [], [], []
    for _ in range(a.imports):
        imp_on.append(run(IMPORT, [], on))
        imp_off.append(run(IMPORT, [], off))
        start_on.append(wall([sys.executable, "-c", "pass"], on))
        start_off.append(wall([sys.executable, "-c", "pass"], off))
    m = statistics.median
    print(f"import torch, ms (median of {a.imports}): hooks on {m(imp_on):.1f}, off "
          f"{m(imp_off):.1f}, added {m(imp_on) - m(imp_off):+.1f}   [target <= 5 ms]")
    inside = subprocess.run([sys.executable, "-c", IMPORT_INSIDE], env=on, check=True,
                            capture_output=True, text=True).stdout.split()
    hooks_ms, finder_ms, asked = float(inside[0]), float(inside[1]), int(inside[2])
    print(f"  of which the hooks' own time, inside the process: finder {finder_ms:.2f} ms over "
          f"{asked} imports (the real spec search of the hooked modules included), hooks "
          f"{hooks_ms:.2f} ms: {finder_ms + hooks_ms:.2f} ms   [target <= 5 ms]")
    print(f"traced interpreter start-up (python -c pass), ms: hooks on {m(start_on):.1f}, off "
          f"{m(start_off):.1f} (the .pth imports iotrace: {m(start_on) - m(start_off):+.1f})")

    import site

    pth = [os.path.join(d, "iotrace-auto.pth") for d in site.getsitepackages()]
    pth = next((p for p in pth if os.path.exists(p)), None)
    if pth:
        line = open(pth).read().strip()
        saved = {k: os.environ.pop(k) for k in ("LD_PRELOAD", "IOTRACE_ENABLE") if k in os.environ}
        n = 200000
        cost = timeit.timeit(line, number=n) / n * 1e9
        os.environ.update(saved)
        print(f"untraced interpreters: the .pth line costs {cost:.0f} ns per start-up")
    else:
        print("untraced interpreters: iotrace-auto.pth is not installed")


if __name__ == "__main__":
    main()
