"""Many threads doing small I/O, traced and untraced: wall time, events recorded, peak memory.

The shapes of thread pools users run (parallel shard or object downloads, a Python thread pool
reading samples, OpenMP on 128-core nodes): N threads, each opening one small file of its own,
reading it in R preads of S bytes and closing it, then waiting for the others (a barrier: all N
threads are alive at once, as in a pool). Two shapes by default (--shapes):
  file   each thread reads its 16 KiB file whole, 4 KiB at a time (R=4, S=4096): the issue's
         "each opens and reads one small file";
  calls  64 preads of 64 bytes (R=64, S=64): the smallest calls there are, where the cost of
         recording an event (about 0.1 µs) weighs most against a read from the page cache
         (about 0.2 µs).
Before issue 22 a thread's buffer was 1 MiB and the cap on memory in flight 64 MiB, so from the
65th thread on every new buffer waited for the writer (N = 1000: 0.31 s untraced, 68 s
traced). Printed per shape and thread count, for a Python workload (threading) and a C one
(pthreads), from alternating untraced/traced runs: the whole process's wall time (medians and
the median of the pairs' ratios), the threads' part of it as the program itself times it (from
its first thread's start to its last join: what the threads cost, without the process's start
and end) and that ratio, the events the trace holds against the calls made (must be equal), and
peak RSS (ru_maxrss). The 0-thread line is the fixed cost of tracing a process (the tracer's
start and its files, and for Python the automatic hooks), which is what the whole-process ratio
of a run of a few milliseconds mostly measures.

    python benchmarks/threads_bench.py [--threads 16,128,1024] [--shapes file,calls] [--pairs 9]
                                       [--preload LIB]   # another build of libiotrace.so
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import iotrace

PRELOAD = iotrace.preload_path()

PY = r"""
import os, sys, threading, time
d, n, r, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
all_in = threading.Barrier(max(n, 1))
def work(i):
    fd = os.open(f"{d}/f{i}", os.O_RDONLY)
    for k in range(r):
        os.pread(fd, size, k * size % 16384)
    os.close(fd)
    all_in.wait()  # every thread alive at once, as in a pool
t0 = time.perf_counter()
ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print(time.perf_counter() - t0)
"""

C = r"""
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static const char* g_dir;
static long g_reads, g_size;
static pthread_barrier_t g_all_in;
static void* work(void* arg) {
  char path[4096], buf[16384];
  snprintf(path, sizeof path, "%s/f%ld", g_dir, (long)arg);
  int fd = open(path, O_RDONLY);
  for (long k = 0; k < g_reads; k++) pread(fd, buf, g_size, k * g_size % 16384);
  close(fd);
  pthread_barrier_wait(&g_all_in);  /* every thread alive at once, as in a pool */
  return NULL;
}
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char** argv) {
  g_dir = argv[1];
  long n = atol(argv[2]);
  g_reads = atol(argv[3]);
  g_size = atol(argv[4]);
  pthread_barrier_init(&g_all_in, NULL, n > 0 ? (unsigned)n : 1);
  pthread_t* t = calloc(n, sizeof *t);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 64 << 10);
  double t0 = now();
  for (long i = 0; i < n; i++) pthread_create(&t[i], &a, work, (void*)i);
  for (long i = 0; i < n; i++) pthread_join(t[i], NULL);
  printf("%.9f\n", now() - t0);
  return 0;
}
"""

# Peak RSS of a program, from a small C parent that forks it: a child forked or vfork'd from
# this Python process counts this process's pages in its peak (the kernel keeps the peak of the
# memory it had before its exec), a child of this small program counts only this one's few.
RSS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char** argv) {  /* rss PRELOAD PROG ARGS...: prints the child's peak KiB */
  pid_t pid = fork();
  if (pid == 0) {
    if (*argv[1]) setenv("LD_PRELOAD", argv[1], 1);
    execvp(argv[2], argv + 2);
    _exit(127);
  }
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) return 1;
  printf("%ld\n", ru.ru_maxrss);
  return 0;
}
"""


def timed(cmd: list[str], env: dict, rss_exe: str) -> tuple[float, float, int]:
    """(wall seconds, the threads' seconds as the program prints them, peak RSS KiB) of one
    run; the peak from a second run under `rss_exe`."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{cmd} failed: {p.returncode}")
    again = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    if "IOTRACE_DIR" in again:
        again["IOTRACE_DIR"] += "-rss"  # its traces apart: the counts are the timed run's
    out = subprocess.run([rss_exe, env.get("LD_PRELOAD", ""), *cmd], env=again, check=True,
                         capture_output=True, text=True).stdout
    return wall, float(p.stdout), int(out.split()[-1])


def events_on(out: str, data: str) -> int:
    """open/read/close events on the data files in the traces of `out`."""
    from iotrace_format import reader

    reader.settle_live([out])
    n = 0
    for path in reader.find_traces([out]):
        for block in reader.iter_blocks(path):
            for line in block.split(b"\n"):
                if b'"ph":"X"' in line and b'"cat":"posix"' in line and (
                        b'"name":"pread' in line or b'"name":"open' in line or b'"name":"close"' in line):
                    n += 1
    return n


SHAPES = {"file": (4, 4096), "calls": (64, 64)}  # preads per thread, bytes each


def pair_ratio(traced: list[float], plain: list[float]) -> float:
    """The median of the pairs' ratios: each traced run against the untraced run beside it."""
    return statistics.median(t / p for t, p in zip(traced, plain))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="16,128,1024", help="thread counts (default 16,128,1024)")
    ap.add_argument("--pairs", type=int, default=9, help="untraced/traced pairs per count (median)")
    ap.add_argument("--workloads", default="python,c", help="python, c or both")
    ap.add_argument("--shapes", default="file,calls", help="file (4 x 4 KiB), calls (64 x 64 B), or both")
    ap.add_argument("--preload", default=PRELOAD, help="the libiotrace.so to trace with (default: installed)")
    ap.add_argument("--trace-dir", help="where the traces go (default: the temporary folder). A "
                    "traced process creates two files (its trace and its live file): where a "
                    "file system's create is slow (this VM's ext4: about 0.3 ms), a folder on "
                    "tmpfs (/dev/shm) shows the tracer's own cost apart from it")
    args = ap.parse_args()
    counts = [int(x) for x in args.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        for i in range(max(counts)):
            with open(os.path.join(data, f"f{i}"), "wb") as f:
                f.write(os.urandom(16384))
        src = os.path.join(tmp, "threads.c")
        with open(src, "w") as f:
            f.write(C)
        exe = os.path.join(tmp, "threads")
        subprocess.run(["cc", "-O2", "-pthread", "-o", exe, src], check=True)
        rss_src, rss_exe = os.path.join(tmp, "rss.c"), os.path.join(tmp, "rss")
        with open(rss_src, "w") as f:
            f.write(RSS)
        subprocess.run(["cc", "-O2", "-o", rss_exe, rss_src], check=True)
        trace_root = args.trace_dir or tmp
        if args.trace_dir:
            os.makedirs(trace_root, exist_ok=True)
        plain_env = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
        print(f"tracer {args.preload}; traces in {trace_root}; {args.pairs} pairs; ratios are medians "
              "of the pairs' ratios")
        print(f"{'shape':5} {'workload':8} {'threads':>7} {'process s':>9} {'traced':>7} {'ratio':>5} "
              f"{'threads s':>9} {'traced':>7} {'ratio':>5} {'events':>7} {'calls':>7} "
              f"{'rss untraced':>12} {'rss traced':>10}")
        worst = {}
        for shape in args.shapes.split(","):
            reads, size = SHAPES[shape]
            for workload in args.workloads.split(","):
                for n in [0] + counts:
                    if n == 0 and shape != args.shapes.split(",")[0]:
                        continue  # the fixed cost is the same for every shape
                    cmd = [sys.executable, "-c", PY] if workload == "python" else [exe]
                    cmd += [data, str(n), str(reads), str(size)]
                    plain, traced, got = [], [], []
                    for i in range(args.pairs):
                        plain.append(timed(cmd, plain_env, rss_exe))
                        out = os.path.join(trace_root, f"t-{shape}-{workload}-{n}-{i}")
                        traced.append(timed(cmd, dict(plain_env, LD_PRELOAD=args.preload, IOTRACE_DIR=out,
                                                      IOTRACE_INCLUDE=data), rss_exe))
                        got.append(events_on(out, data))
                        for done in (out, out + "-rss"):  # (tmpfs is memory)
                            shutil.rmtree(done, ignore_errors=True)
                    calls = n * (2 + reads)  # open, the preads, close
                    whole = pair_ratio([t[0] for t in traced], [p[0] for p in plain])
                    part = pair_ratio([t[1] for t in traced], [p[1] for p in plain]) if n else float("nan")
                    if n:
                        w = worst.setdefault((shape, workload), [0.0, 0.0])
                        w[0], w[1] = max(w[0], whole), max(w[1], part)
                    med = lambda rows, k: statistics.median(r[k] for r in rows)  # noqa: E731
                    print(f"{shape:5} {workload:8} {n:7d} {med(plain, 0):9.4f} {med(traced, 0):7.4f} "
                          f"{whole:5.2f} {med(plain, 1):9.4f} {med(traced, 1):7.4f} {part:5.2f} "
                          f"{min(got):7d} {calls:7d} {med(plain, 2) / 1024:9.1f} MiB "
                          f"{med(traced, 2) / 1024:7.1f} MiB"
                          + ("" if min(got) == max(got) == calls else "   EVENTS MISSING"))
        for (shape, workload), (whole, part) in worst.items():
            print(f"worst ratio, {shape} {workload}: whole process {whole:.2f}, threads {part:.2f}   "
                  "target <= 1.2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
