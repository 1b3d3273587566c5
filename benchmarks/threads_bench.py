"""Many threads doing small I/O, traced and untraced: wall time, events recorded, peak memory.

The shapes of thread pools users run (parallel shard or object downloads, a Python thread pool
reading samples, OpenMP on 128-core nodes): N threads, each opening one small file of its own,
reading it in R small reads (pread of 64 bytes; --reads, default 64) and closing it, then
waiting for the others (a barrier: all N threads are alive at once, as in a pool). Before issue
22 a thread's buffer was 1 MiB and the cap on memory in flight 64 MiB, so from the 65th thread
on every new buffer waited for the writer (N = 1000: 0.31 s untraced, 68 s traced). Printed per
thread count, for a Python workload (threading) and a C one (pthreads): the medians of
alternating untraced/traced runs, their ratio, the events the trace holds against the calls
made (must be equal), and the peak RSS of each process (ru_maxrss). A first line gives the
fixed cost of tracing a process (0 threads: the tracer's start and its files, and for Python
the automatic hooks), which is what the ratio of a very short run mostly measures.

    python benchmarks/threads_bench.py [--threads 16,128,1024] [--reads 64] [--pairs 5]
                                       [--preload LIB]   # another build of libiotrace.so
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import iotrace

PRELOAD = iotrace.preload_path()

PY = r"""
import os, sys, threading
d, n, r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
all_in = threading.Barrier(max(n, 1))
def work(i):
    fd = os.open(f"{d}/f{i}", os.O_RDONLY)
    for k in range(r):
        os.pread(fd, 64, (k * 64) % 1024)
    os.close(fd)
    all_in.wait()  # every thread alive at once, as in a pool
ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
for t in ts: t.start()
for t in ts: t.join()
"""

C = r"""
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static const char* g_dir;
static long g_reads;
static pthread_barrier_t g_all_in;
static void* work(void* arg) {
  char path[4096], buf[64];
  snprintf(path, sizeof path, "%s/f%ld", g_dir, (long)arg);
  int fd = open(path, O_RDONLY);
  for (long k = 0; k < g_reads; k++) pread(fd, buf, sizeof buf, (k * 64) % 1024);
  close(fd);
  pthread_barrier_wait(&g_all_in);  /* every thread alive at once, as in a pool */
  return NULL;
}
int main(int argc, char** argv) {
  g_dir = argv[1];
  long n = atol(argv[2]);
  g_reads = atol(argv[3]);
  pthread_barrier_init(&g_all_in, NULL, n > 0 ? (unsigned)n : 1);
  pthread_t* t = calloc(n, sizeof *t);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 64 << 10);
  for (long i = 0; i < n; i++) pthread_create(&t[i], &a, work, (void*)i);
  for (long i = 0; i < n; i++) pthread_join(t[i], NULL);
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


def timed(cmd: list[str], env: dict, rss_exe: str) -> tuple[float, int]:
    """(wall seconds, peak RSS KiB) of one run; the peak from a second run under `rss_exe`."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{cmd} failed: {p.returncode}")
    again = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    if "IOTRACE_DIR" in again:
        again["IOTRACE_DIR"] += "-rss"  # its traces apart: the counts are the timed run's
    out = subprocess.run([rss_exe, env.get("LD_PRELOAD", ""), *cmd], env=again, check=True,
                         capture_output=True, text=True).stdout
    return wall, int(out)


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="16,128,1024", help="thread counts (default 16,128,1024)")
    ap.add_argument("--pairs", type=int, default=5, help="untraced/traced pairs per count (median)")
    ap.add_argument("--workloads", default="python,c", help="python, c or both")
    ap.add_argument("--reads", type=int, default=64, help="preads of 64 bytes per thread (default 64)")
    ap.add_argument("--preload", default=PRELOAD, help="the libiotrace.so to trace with (default: installed)")
    args = ap.parse_args()
    counts = [int(x) for x in args.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        for i in range(max(counts)):
            with open(os.path.join(data, f"f{i}"), "wb") as f:
                f.write(os.urandom(1024))
        src = os.path.join(tmp, "threads.c")
        with open(src, "w") as f:
            f.write(C)
        exe = os.path.join(tmp, "threads")
        subprocess.run(["cc", "-O2", "-pthread", "-o", exe, src], check=True)
        rss_src, rss_exe = os.path.join(tmp, "rss.c"), os.path.join(tmp, "rss")
        with open(rss_src, "w") as f:
            f.write(RSS)
        subprocess.run(["cc", "-O2", "-o", rss_exe, rss_src], check=True)
        plain_env = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
        print(f"{args.reads} preads per thread; tracer {args.preload}")
        print(f"{'workload':8} {'threads':>7} {'untraced s':>10} {'traced s':>9} {'ratio':>6} {'events':>8} "
              f"{'calls':>8} {'rss untraced':>12} {'rss traced':>10}")
        worst = 0.0
        for workload in args.workloads.split(","):
            for n in [0] + counts:
                cmd = [sys.executable, "-c", PY, data, str(n), str(args.reads)] if workload == "python" \
                    else [exe, data, str(n), str(args.reads)]
                plain, traced, rss_p, rss_t, got = [], [], [], [], []
                for i in range(args.pairs):
                    w, r = timed(cmd, plain_env, rss_exe)
                    plain.append(w)
                    rss_p.append(r)
                    out = os.path.join(tmp, f"t-{workload}-{n}-{i}")
                    w, r = timed(cmd, dict(plain_env, LD_PRELOAD=args.preload, IOTRACE_DIR=out,
                                           IOTRACE_INCLUDE=data), rss_exe)
                    traced.append(w)
                    rss_t.append(r)
                    got.append(events_on(out, data))
                calls = n * (2 + args.reads)  # open, the preads, close
                ratio = statistics.median(traced) / statistics.median(plain)
                if n:
                    worst = max(worst, ratio)
                print(f"{workload:8} {n:7d} {statistics.median(plain):10.3f} {statistics.median(traced):9.3f} "
                      f"{ratio:6.2f} {min(got):8d} {calls:8d} {statistics.median(rss_p) / 1024:9.1f} MiB "
                      f"{statistics.median(rss_t) / 1024:7.1f} MiB"
                      + ("" if min(got) == max(got) == calls else "   EVENTS MISSING"))
        print(f"worst ratio traced/untraced: {worst:.2f}   target <= 1.2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
