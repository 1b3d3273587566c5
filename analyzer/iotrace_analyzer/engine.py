"""Where tasks run: the one execution engine of the analysis (pipeline.analyze) and the export
(export/merge.py). A task is a top-level function and its argument (picklable), run

- in this process, on its thread or one of its own (one worker, or a single task: no
  process beside it);
- on forked processes (they start with this process's imports: no start-up cost), started
  at the first call with two tasks or more;
- on a Dask cluster: a LocalCluster of worker processes, or an existing one (`--scheduler`),
  with the same tasks unchanged.

Two ways to get results: `map` in the order of the tasks (the export joins its parts in order),
`unordered` as they finish with at most `window` in flight (the analysis folds each partial in
as it comes, so its memory does not grow with the number of tasks).
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait

# a local Dask cluster's workers: one malloc arena, and no trimming of memory a task gave back
# that the next one would fault in again
MALLOC_ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
              "MALLOC_MMAP_THRESHOLD_": str(1 << 30)}


_tuned_pid = 0


def tune_process() -> None:
    """One Arrow thread: parallelism is ours (a task per worker), nested pools only contend.
    Then keep freed memory in the process and in one heap: on VMs that lazily back memory,
    returning pages to the kernel and faulting them in again costs more than parsing. One
    arena, because the heaps of thread arenas cannot grow past 64 MiB and send big blocks
    to mmap. Arrow allocates from that heap too (its system pool), not from mimalloc's heaps
    beside it: the memory a block's Parquet used is the next block's decoding's (the 1M-files
    trace: 0.97 -> 0.85 GB of RSS, 1.2-1.4 -> 1.0 s of system time). Once per process,
    before its threads start: resizing Arrow's pool and mallopt while other threads compute
    crashed the analyzer (1 run in 5 of the tests)."""
    global _tuned_pid
    if _tuned_pid == os.getpid():
        return
    _tuned_pid = os.getpid()
    import pyarrow as pa  # here: the export runs on this engine without pyarrow (25 MiB)

    pa.set_cpu_count(1)
    pa.set_memory_pool(pa.system_memory_pool())
    one_arena()
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def one_arena() -> None:
    """glibc's malloc in one arena for every thread of this process (before they start: the
    limit is read at a thread's first malloc). A thread's own arena keeps what the thread freed
    apart from the others: the export's reading thread, writer and deflate thread had 15-22 MiB
    more at their peak on the 1M-files trace, in the same time within the noise (farm-bench:
    wall ratios 0.99 and 1.03 in two runs)."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(-8, 1)  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass


def _here(fn: Callable, items: Iterable, on_thread: bool) -> Iterator:
    """fn(item) for each item, in this process: on the calling thread, or on a thread of its
    own. (Measured: the analysis of a million files' trace ran 0.6 s, 12%, slower on the main
    thread than on another one, whose malloc arena tune_process made the same. The export keeps
    glibc's arenas, where another thread would get one of its own: it stays on its thread.)"""
    if not on_thread:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(max_workers=1) as one:
        for item in items:
            yield one.submit(fn, item).result()


def _windowed(submit: Callable, first_done: Callable, items: Iterable, window: int) -> Iterator:
    """The results of submit(item) for each item as they finish, at most `window` in flight,
    started in the items' order; `first_done(futures)` waits for one and gives those done."""
    pending = list(reversed(list(items)))
    in_flight: set = set()
    while pending or in_flight:
        while pending and len(in_flight) < window:
            in_flight.add(submit(pending.pop()))
        done = first_done(in_flight)
        in_flight -= done
        for f in done:
            yield f.result()


class Job:
    """A call given to a Helper. Its result() runs it on the asking thread when the helper has
    not started it (stealable), else waits for it."""

    __slots__ = ("fn", "args", "stealable", "state", "value", "error", "cond")
    PENDING, RUNNING, DONE = 0, 1, 2

    def __init__(self, fn: Callable, args: tuple, stealable: bool):
        self.fn, self.args, self.stealable = fn, args, stealable
        self.state = Job.PENDING
        self.value = self.error = None
        self.cond = threading.Condition(threading.Lock())

    def claim(self) -> bool:
        """Whether this thread is the one to run it (nobody has)."""
        with self.cond:
            if self.state != Job.PENDING:
                return False
            self.state = Job.RUNNING
            return True

    def run(self) -> None:
        try:
            self.value = self.fn(*self.args)
        except BaseException as e:  # noqa: BLE001 (raised by result)
            self.error = e
        self._done()

    def cancel(self) -> None:
        """Not to be run (a reader stopped early), unless it has started."""
        if self.claim():
            self._done()

    def _done(self) -> None:
        with self.cond:
            self.state, self.fn, self.args = Job.DONE, None, None
            self.cond.notify_all()

    def result(self):
        """fn's value (given once: the helper's queue may hold the job a while yet, not a
        decoded block with it), or its exception."""
        if self.stealable and self.claim():
            self.run()
        else:
            with self.cond:
                while self.state != Job.DONE:
                    self.cond.wait()
        if self.error is not None:
            raise self.error
        value, self.value = self.value, None
        return value


class Helper:
    """A task's second thread, when a core would otherwise idle beside it (the long pole): it
    writes the task's Parquet and decodes the blocks ahead of the one the task summarizes, in
    the order they were given. The task takes back a block's decoding that the helper has not
    started when it needs the block (its Parquet may be behind): each thread stays busy
    whichever of the two is the heavier, with no third thread to share two cores."""

    def __init__(self):
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, daemon=True, name="iotrace-helper")
        self.thread.start()

    def submit(self, fn: Callable, *args, stealable: bool = True) -> Job:
        job = Job(fn, args, stealable)
        self.q.put(job)
        return job

    def _run(self) -> None:
        while (job := self.q.get()) is not None:
            if job.claim():
                job.run()

    def close(self) -> None:
        self.q.put(None)
        self.thread.join()


class Engine:
    """Runs tasks in this process; the others change where."""

    def __init__(self, workers: int = 1, on_thread: bool = False):
        self.workers = max(1, workers)
        self.on_thread = on_thread  # tasks run here go on a thread of their own

    def map(self, fn: Callable, items: Iterable, chunksize: int = 1) -> Iterator:
        """fn(item) for each item, in their order."""
        return _here(fn, items, self.on_thread)

    def unordered(self, fn: Callable, items: list, window: int | None = None) -> Iterator:
        """fn(item) for each item, as they finish, at most `window` (2 per worker) at once;
        items are started in their order."""
        return _here(fn, items, self.on_thread)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return None


class Forked(Engine):
    """Forked worker processes, started at the first call that has two tasks or more."""

    def __init__(self, workers: int, on_thread: bool = False):
        super().__init__(workers, on_thread)
        self.pool: ProcessPoolExecutor | None = None

    def _ready(self, items: list) -> bool:
        if self.pool is None and len(items) > 1:
            self.pool = ProcessPoolExecutor(max_workers=min(self.workers, len(items)),
                                            mp_context=mp.get_context("fork"))
        return self.pool is not None

    def map(self, fn, items, chunksize=1):
        items = list(items)
        return self.pool.map(fn, items, chunksize=chunksize) if self._ready(items) else _here(fn, items, self.on_thread)

    def unordered(self, fn, items, window=None):
        items = list(items)
        if not self._ready(items):
            return _here(fn, items, self.on_thread)
        return _windowed(lambda x: self.pool.submit(fn, x),
                         lambda fs: wait(fs, return_when=FIRST_COMPLETED).done, items,
                         window or 2 * self.workers)

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None


class Dask(Engine):
    """A Dask cluster: a LocalCluster of `workers` processes, or the one at `scheduler`."""

    def __init__(self, workers: int, scheduler: str | None = None, setup: Callable | None = None,
                 memory_limit: str | None = None):
        from dask.distributed import Client, LocalCluster

        self.cluster = None
        if scheduler:
            self.client = Client(scheduler)
        else:
            os.environ.update(MALLOC_ENV)
            self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        dashboard_address=None, silence_logs=40,
                                        memory_limit=memory_limit or "auto")
            self.client = Client(self.cluster)
        super().__init__(len(self.client.scheduler_info().get("workers", {})) or workers)
        if setup is not None:
            try:  # before the first task: the workers' own threads may run several at once
                self.client.run(setup)
            except Exception:  # noqa: BLE001 (a worker without the package: tasks set up themselves)
                pass

    def map(self, fn, items, chunksize=1):
        futures = [self.client.submit(fn, x, pure=False) for x in items]
        return (f.result() for f in futures)

    def unordered(self, fn, items, window=None):
        from dask.distributed import wait as dask_wait

        return _windowed(lambda x: self.client.submit(fn, x, pure=False),
                         lambda fs: set(dask_wait(list(fs), return_when="FIRST_COMPLETED").done),
                         items, window or 2 * self.workers)

    def close(self):
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def engine(kind: str, workers: int, scheduler: str | None = None, setup: Callable | None = None,
           on_thread: bool = False, memory_limit: str | None = None) -> Engine:
    """The engine of a kind: "processes" (this process alone for one worker) or "dask"
    (`scheduler`: an existing cluster's address; `setup` runs once on each of its workers;
    `on_thread`: tasks run in this process go on a thread of their own; `memory_limit`: of each
    worker of a local Dask cluster)."""
    if kind == "dask" or scheduler:
        return Dask(workers, scheduler, setup, memory_limit)
    return Forked(workers, on_thread) if workers > 1 else Engine(1, on_thread)


def group(items: list, weights: list, target: float, alone: float | None = None,
          most: int | None = None) -> list[list]:
    """Consecutive items grouped into tasks: a task is closed once it weighs `target` or holds
    `most` items; an item of `alone` weight or more is a task of its own."""
    tasks: list[list] = []
    cur: list = []
    w = 0
    for item, n in zip(items, weights):
        if alone is not None and n >= alone:
            tasks.append([item])
            continue
        cur.append(item)
        w += n
        if w >= target or (most is not None and len(cur) >= most):
            tasks.append(cur)
            cur, w = [], 0
    if cur:
        tasks.append(cur)
    return tasks
