"""The jobs of the loss test (tests/test_loss.py) and benchmark (benchmarks/loss_rate.py): the
ways Python and shells start and end worker processes, each run under `iotrace run` and its
traces checked against what the job says it did.

Issue 22: "on a loaded machine a pool worker's trace is sometimes lost". A lost trace is only
seen by counting, so every job counts its own work: each process appends lines

    pid label opens reads bytes

to the results file ($LOSS_RESULTS; one write(2) of an O_APPEND file: lines never mix). The
data work is opening files of the data folder ($LOSS_DATA) and reading them to the end
(Python: os.read of 1024 bytes until it returns b""); `reads` is `-` where the job cannot
know how many read(2) calls a program made (cat, a shell's `read`), and then the bytes say
it. A parent also writes a line (0 0 0) for every process it started, so a worker that
never got a task, the resource tracker and `cat` are known too; the main process of a Python
job reads a data file itself (its own trace is checked like the others).

`run_once` runs one job and compares, for every pid: the job's lines with the trace (the
open/open64/openat/openat64 events on data files, the read events on them and the bytes
they returned), the set of pids in the trace with the set the job reported, and that every
trace is finished (its end marker, no live file left). It waits until every process of the
job has ended first: a trace is finished by its process, or by the first reader once the
process is gone (tracing.TraceSet.load).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from iotrace_format.reader import settle_live
from tracing import TEST_FORMAT, TraceSet

NFILES = 20        # data files s0.bin .. s19.bin
SIZE = 3000        # bytes each: 4 reads of 1024 bytes (the last returns 0) in Python
NTASKS = 40        # pool tasks: each opens and reads s{i % NFILES}.bin
CHILD_TIMEOUT = 1.0  # subprocess.run(timeout=) of the subprocess-timeout job
JOB_TIMEOUT = 120.0  # a job that takes longer is killed (its process group) and fails the run

OPENS = ("open", "open64", "openat", "openat64")
READS = ("read",)

# Every Python job starts with these helpers.
PRELUDE = '''
import os, sys

DATA, RESULTS = os.environ["LOSS_DATA"], os.environ["LOSS_RESULTS"]
NFILES, SIZE, NTASKS = int(os.environ["LOSS_FILES"]), int(os.environ["LOSS_SIZE"]), int(os.environ["LOSS_TASKS"])


def report(label, opens=0, reads=0, nbytes=0, pid=None):
    """Append `pid label opens reads bytes` to the results file in one write."""
    line = f"{os.getpid() if pid is None else pid} {label} {opens} {reads} {nbytes}\\n"
    fd = os.open(RESULTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_file(i, label="worker"):
    """Open data file i and read it to the end; report the open, the reads and the bytes."""
    fd = os.open(os.path.join(DATA, f"s{i % NFILES}.bin"), os.O_RDONLY)
    reads = nbytes = 0
    while True:
        n = len(os.read(fd, 1024))
        reads += 1
        nbytes += n
        if n == 0:
            break
    os.close(fd)
    report(label, 1, reads, nbytes)
    return nbytes


def report_helpers():
    """The processes multiprocessing started: its live children (pool, executor, DataLoader
    workers), the resource tracker and the forkserver when they run."""
    import multiprocessing as mp
    from multiprocessing import forkserver, resource_tracker

    for p in mp.active_children():
        report("child", pid=p.pid)
    for label, pid in (("resource-tracker", getattr(resource_tracker._resource_tracker, "_pid", None)),
                       ("forkserver", getattr(forkserver._forkserver, "_forkserver_pid", None))):
        if pid:
            report(label, pid=pid)
'''

POOL = '''
import multiprocessing as mp
import subprocess


def work(i):
    return read_file(i)


if __name__ == "__main__":
    read_file(NFILES - 1, "main")
    method, workers, tasks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with mp.get_context(method).Pool(workers) as p:  # __exit__: terminate(), SIGTERM to the workers
        total = sum(p.map(work, range(tasks)))
        report_helpers()
    assert total == tasks * SIZE, total
    cat = subprocess.Popen(["cat", os.path.join(DATA, "s1.bin")], stdout=subprocess.DEVNULL)
    report("cat", 1, "-", SIZE, pid=cat.pid)
    assert cat.wait() == 0
'''

EXECUTOR = '''
from concurrent.futures import ProcessPoolExecutor


def work(i):
    return read_file(i)


def init():
    report("init")


if __name__ == "__main__":
    read_file(NFILES - 1, "main")
    cancel = sys.argv[1] == "cancel"
    ex = ProcessPoolExecutor(2, initializer=init)
    futures = [ex.submit(work, i) for i in range(NTASKS)]
    if cancel:
        futures[0].result()
    report_helpers()
    ex.shutdown(wait=True, cancel_futures=cancel)
    done = [f.result() for f in futures if not f.cancelled()]
    assert sum(done) == len(done) * SIZE and (cancel or len(done) == NTASKS), len(done)
'''

DATALOADER = '''
import torch
from torch.utils.data import DataLoader, Dataset


class Files(Dataset):
    def __len__(self):
        return NFILES

    def __getitem__(self, i):
        return read_file(i)


def init(worker_id):
    report("init")


if __name__ == "__main__":
    read_file(NFILES - 1, "main")
    loader = DataLoader(Files(), batch_size=4, num_workers=2, persistent_workers=True, worker_init_fn=init)
    total = 0
    for epoch in range(2):
        for batch in loader:
            total += int(batch.sum())
    report_helpers()
    assert total == 2 * NFILES * SIZE, total
    # the workers are shut down at interpreter exit
'''

PROCESSES = '''
import multiprocessing as mp
import signal
import time


def child(q, k):
    for i in range(k * 10, k * 10 + 10):
        read_file(i)
    q.put(os.getpid())
    time.sleep(60)


if __name__ == "__main__":
    read_file(NFILES - 1, "main")
    q = mp.SimpleQueue()
    ps = [mp.Process(target=child, args=(q, k)) for k in range(2)]
    for p in ps:
        p.start()
    report_helpers()
    for _ in ps:
        q.get()  # it did its work and sleeps
    for p in ps:
        p.terminate() if sys.argv[1] == "terminate" else p.kill()
    for p in ps:
        p.join()
    sig = signal.SIGTERM if sys.argv[1] == "terminate" else signal.SIGKILL
    assert [p.exitcode for p in ps] == [-sig, -sig], [p.exitcode for p in ps]
'''

# A manager process starts 4 workers and terminate()s each at once (a pool torn down as it
# starts: an exception in its `with` block, an empty dataset), reads on, and is kill()ed later
# (a scheduler's time limit): every worker has its trace, and so has the manager, all of it.
AT_START = '''
import multiprocessing as mp
import signal
import time


def worker():
    time.sleep(60)


def manager(q):
    read_file(0, "manager")
    ps = [mp.Process(target=worker) for _ in range(4)]
    for p in ps:
        p.start()
        report("child", pid=p.pid)
        p.terminate()
    for p in ps:
        p.join()
    read_file(1, "manager")
    q.put([p.exitcode for p in ps])
    time.sleep(60)


if __name__ == "__main__":
    read_file(NFILES - 1, "main")
    q = mp.SimpleQueue()
    m = mp.Process(target=manager, args=(q,))
    m.start()
    report("child", pid=m.pid)
    codes = q.get()
    m.kill()
    m.join()
    assert codes == [-signal.SIGTERM] * 4 and m.exitcode == -signal.SIGKILL, (codes, m.exitcode)
'''

TIMEOUT = '''
import subprocess

CHILD = """
import os, sys, time
fd = os.open(os.path.join(os.environ["LOSS_DATA"], "s3.bin"), os.O_RDONLY)
reads = nbytes = 0
while True:
    n = len(os.read(fd, 1024))
    reads += 1
    nbytes += n
    if n == 0:
        break
os.close(fd)
line = f"{os.getpid()} child 1 {reads} {nbytes}\\\\n".encode()
fd = os.open(os.environ["LOSS_RESULTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, line)
os.close(fd)
print(os.getpid(), "done", flush=True)
time.sleep(60)
"""

if __name__ == "__main__":
    read_file(NFILES - 1, "main")
    try:
        subprocess.run([sys.executable, "-c", CHILD], capture_output=True, timeout=float(sys.argv[1]))
    except subprocess.TimeoutExpired as e:  # run() killed the child (SIGKILL) and waited for it
        out = (e.stdout or b"").split()
    else:
        sys.exit("the child ended before its timeout")
    if out[1:2] != [b"done"]:
        sys.exit(f"the child did not finish its work within the {sys.argv[1]} s timeout: {out}")
    report("child", pid=int(out[0]))
'''

SH_BACKGROUND = '''
for i in 1 2 3; do
  cat "$LOSS_DATA/s$i.bin" > /dev/null &
  echo "$! cat 1 - $LOSS_SIZE" >> "$LOSS_RESULTS"
done
wait
echo "$$ main 0 0 0" >> "$LOSS_RESULTS"
'''

# The sleeper reads a data file with the shell's own `read` (in the subshell itself), says so
# through the fifo, then blocks opening the fifo again (no writer comes): `kill $!` ends it.
SH_KILL = '''
( while IFS= read -r line; do :; done < "$LOSS_DATA/s1.bin"; echo ready > "$LOSS_FIFO"; read x < "$LOSS_FIFO" ) &
echo "$! sleeper 1 - $LOSS_SIZE" >> "$LOSS_RESULTS"
read x < "$LOSS_FIFO"
kill $!
wait $!
[ $? = 143 ] || exit 3
echo "$$ main 0 0 0" >> "$LOSS_RESULTS"
'''


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One job: a Python script (PRELUDE + code, run with args) or a shell script."""

    name: str
    what: str          # one line for the benchmark's table and the test's messages
    code: str
    shell: bool = False
    args: tuple[str, ...] = ()
    needs: str | None = None  # a module the job imports (the scenario is skipped without it)


SCENARIOS = [
    Scenario("pool-fork", "mp.Pool(2) fork, map, __exit__ terminates, then cat", POOL,
             args=("fork", "2", str(NTASKS))),
    Scenario("pool-spawn", "mp.Pool(2) spawn, map, __exit__ terminates, then cat", POOL,
             args=("spawn", "2", str(NTASKS))),
    Scenario("executor", "ProcessPoolExecutor(2), shutdown()", EXECUTOR, args=("wait",)),
    Scenario("executor-cancel", "ProcessPoolExecutor(2), shutdown(cancel_futures=True)", EXECUTOR,
             args=("cancel",)),
    Scenario("dataloader", "torch DataLoader, 2 persistent workers, 2 epochs, exit", DATALOADER, needs="torch"),
    Scenario("process-terminate", "2 mp.Process, terminate() (SIGTERM) while they sleep", PROCESSES,
             args=("terminate",)),
    Scenario("process-kill", "2 mp.Process, kill() (SIGKILL) while they sleep", PROCESSES, args=("kill",)),
    Scenario("process-terminate-at-start", "mp.Process terminate()s 4 mp.Process at once, then is kill()ed",
             AT_START),
    Scenario("sh-background", "sh: 3 `cat ... &`, wait", SH_BACKGROUND, shell=True),
    Scenario("sh-kill", "sh: a background reader that sleeps, `kill $!`", SH_KILL, shell=True),
    Scenario("subprocess-timeout", "subprocess.run(timeout=) kills a child that read and sleeps", TIMEOUT,
             args=(str(CHILD_TIMEOUT),)),
]
BY_NAME = {s.name: s for s in SCENARIOS}


def missing_module(s: Scenario, python: str = sys.executable) -> str | None:
    """Why the scenario cannot run with `python` (its module does not import), else None."""
    if s.needs is None:
        return None
    r = subprocess.run([python, "-c", f"import {s.needs}"], capture_output=True, text=True)
    return None if r.returncode == 0 else f"{s.needs} does not import: {r.stderr.strip().splitlines()[-1:]}"


def make_data(folder: str | os.PathLike) -> Path:
    """The data folder: NFILES files of SIZE bytes."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(NFILES):
        (folder / f"s{i}.bin").write_bytes(os.urandom(SIZE))
    return folder


def clean_env(**extra: str) -> dict:
    """os.environ without the tracer's variables (`iotrace run` sets its own), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOTRACE_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env


@contextlib.contextmanager
def busy_load(k: int) -> Iterator[list[subprocess.Popen]]:
    """k processes spinning (`while :; do :; done`) for the duration: a loaded machine."""
    procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"], env=clean_env()) for _ in range(k)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def iotrace_cmd(python: str) -> list[str]:
    """The `iotrace` command of the installation of interpreter `python`."""
    exe = os.path.join(os.path.dirname(python), "iotrace")
    return [exe] if os.access(exe, os.X_OK) else [python, "-m", "iotrace"]


@dataclasses.dataclass
class Expect:
    """What one process did, summed over the job's lines for its pid."""

    labels: list[str]
    opens: int = 0
    reads: int | None = 0    # None: not known (a program that is not ours)
    nbytes: int = 0

    def describe(self) -> str:
        reads = "? reads" if self.reads is None else f"{self.reads} reads"
        return f"{self.opens} opens, {reads}, {self.nbytes} bytes"


@dataclasses.dataclass
class RunResult:
    """One run of one scenario: what the job reported, what the trace has, what differs."""

    scenario: str
    run: int
    seconds: float
    expected: dict[int, Expect]
    traced: set[int]                 # pids of the job with a trace (a file with its header)
    matched: set[int]                # pids whose trace has exactly their work, finished
    problems: list[str]              # one line each, naming the run and the pid


def parse_results(path: Path) -> dict[int, Expect]:
    """The job's lines, summed per pid."""
    out: dict[int, Expect] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        pid, label, opens, reads, nbytes = line.split()
        e = out.setdefault(int(pid), Expect([]))
        if label not in e.labels:
            e.labels.append(label)
        e.opens += int(opens)
        e.reads = None if reads == "-" or e.reads is None else e.reads + int(reads)
        e.nbytes += int(nbytes)
    return out


def _pid_of_name(name: str) -> int:
    """The pid in a trace or live file's name (`<name>-<host>-<pid>.<suffix>`), -1 if none."""
    tail = name.rsplit("-", 1)[-1].split(".", 1)[0]
    return int(tail) if tail.isdigit() else -1


def _pids_of_files(folder: Path) -> set[int]:
    """Pids named by the trace and live files of a folder."""
    return {_pid_of_name(n) for n in os.listdir(folder)} - {-1} if folder.is_dir() else set()


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's zombie may never be reaped here)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_gone(pids: set[int], timeout: float = 20.0) -> set[int]:
    """Wait until none of `pids` runs; the ones still running after `timeout`."""
    end = time.monotonic() + timeout
    left = {p for p in pids if _running(p)}
    while left and time.monotonic() < end:
        time.sleep(0.02)
        left = {p for p in left if _running(p)}
    return left


def run_once(s: Scenario, data: Path, folder: Path, run: int, python: str = sys.executable) -> RunResult:
    """Run the scenario's job once under `iotrace run -o folder/trace` and check its traces.

    `python` runs the Python jobs, and its installation's `iotrace` runs every job (another
    build of the tracer); the traces are read with this interpreter's installation."""
    folder.mkdir(parents=True, exist_ok=True)
    out, results = folder / "trace", folder / "results"
    env = clean_env(LOSS_DATA=str(data), LOSS_RESULTS=str(results), LOSS_FILES=str(NFILES),
                    LOSS_SIZE=str(SIZE), LOSS_TASKS=str(NTASKS), LOSS_FIFO=str(folder / "fifo"))
    if TEST_FORMAT:
        env["IOTRACE_FORMAT"] = TEST_FORMAT
    if s.shell:
        os.mkfifo(folder / "fifo")
        job = ["sh", "-c", s.code]
    else:
        script = folder / f"{s.name}.py"
        script.write_text(PRELUDE + s.code)
        job = [python, str(script), *s.args]
    where = f"{s.name} run {run}"
    problems = []
    t = time.perf_counter()
    p = subprocess.Popen([*iotrace_cmd(python), "run", "-o", str(out), "--", *job], env=env, cwd=folder,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        so, se = p.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        so, se = p.communicate()
        problems.append(f"{where}: the job did not end within {JOB_TIMEOUT:.0f} s (killed); stderr: {se[-1500:]}")
    seconds = time.perf_counter() - t
    if p.returncode != 0 and not problems:
        problems.append(f"{where}: the job exited with status {p.returncode}; stderr: {se[-1500:]}")
    expected = parse_results(results)
    left = wait_gone(set(expected) | _pids_of_files(out))
    for pid in sorted(left):
        problems.append(f"{where}: pid {pid} still runs 20 s after the job ended (killed now)")
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    # What the readers say of the live files they cannot finish (TraceSet.load finishes the rest).
    notes = settle_live([str(out)])[1] if out.is_dir() else []
    ts = TraceSet.load(out)
    data_dir = str(data)
    traced = set(ts.pids)
    matched = set()
    files = sorted(os.listdir(out)) if out.is_dir() else []
    damaged: dict[int, list[str]] = {}  # pid (from the file's name) -> what is wrong with its files
    for f in ts.files:
        if f.pid is None:
            damaged.setdefault(_pid_of_name(f.name), []).append(
                f"{f.name} has no process header ({len(f.records)} records: "
                f"{[r.get('name') for r in f.records][:3]}, {len(f.bad_lines)} bad lines)")
    for n in notes:
        damaged.setdefault(_pid_of_name(os.path.basename(n.path)), []).append(
            f"{os.path.basename(n.path)}: {n.kind}: {n.detail.replace(str(out) + '/', '')}")
    for n in files:
        if n.endswith(".live"):
            damaged.setdefault(_pid_of_name(n), []).append(f"{n} is left after every process ended")
    for pid in sorted(traced - set(expected)):
        cmd = ts.process(pid).get("cmdline")
        problems.append(f"{where}: pid {pid} has a trace but the job did not start it: {cmd}")
    for pid in sorted(set(damaged) - set(expected)):
        problems.append(f"{where}: pid {pid} (not started by the job): {'; '.join(damaged[pid])}")
    for pid, e in sorted(expected.items()):
        who = f"{where}: pid {pid} ({'/'.join(e.labels)})"
        if pid not in traced:
            why = "; ".join(damaged.get(pid, [])) or "no trace file"
            problems.append(f"{who}: no trace (expected {e.describe()}): {why}; trace folder: {files}")
            continue
        opens = ts.count(OPENS, pid=pid, under=data_dir)
        reads = ts.events(pid=pid, name=READS, under=data_dir)
        nbytes = sum(max(r["args"].get("ret", 0), 0) for r in reads)
        found = Expect(e.labels, opens, None if e.reads is None else len(reads), nbytes)
        ok = (found.opens, found.reads, found.nbytes) == (e.opens, e.reads, e.nbytes)
        if not ok:
            problems.append(f"{who}: expected {e.describe()} of the data files, found {found.describe()} "
                            f"in its trace")
        unfinished = [f"{f.name} (closed={f.closed}, end={f.end}, {len(f.bad_lines)} bad lines)"
                      for f in ts.files_of(pid) if not f.closed or f.end is None or f.bad_lines]
        unfinished += damaged.get(pid, [])
        if unfinished:
            problems.append(f"{who}: trace not finished: {unfinished}")
        if ok and not unfinished:
            matched.add(pid)
    if not expected and not problems:
        problems.append(f"{where}: the job reported no process; stdout: {so[-500:]} stderr: {se[-1500:]}")
    return RunResult(s.name, run, seconds, expected, traced & set(expected), matched, problems)


def cleanup(folder: Path) -> None:
    """Remove a run's folder (the benchmark keeps only failing runs)."""
    shutil.rmtree(folder, ignore_errors=True)
