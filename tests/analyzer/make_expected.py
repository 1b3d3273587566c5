"""The analyzer's outputs pinned, so that a change to how it computes them (issue 24: per-file
work moved out of Python loops) can be checked to leave them as they were.

For each workload (every golden trace set under tests/golden/, and synthetic jobs written here
deterministically, as the tracer writes traces: conftest.py) and each rule set (the default
thresholds, and `sensitive`: every minimum at zero, shares at 1%, ratios at 1.01, so that
every rule's evidence is computed), the analysis is run in this process as `iotrace-analyze
TRACES -o OUT` runs it (pipeline.analyze, 2 workers) and written as
tests/analyzer/expected/<workload>.<rules>.json:

  summary      summary.json, findings included, but for the analyzer's own timings
               (input.findings_seconds, seconds, report_seconds)
  text         the text report (report.text_report)
  page         what the report page draws beyond the summary (proc_timeline, offsets,
               phase_events, counters): a sha256 of each part's canonical JSON
  parquet      per Parquet file of OUT (events/part-*.parquet, processes, threads, files):
               its schema (name, type, nullable), its row count and a sha256 of its rows
               sorted (row order within a file is not pinned)

Paths that vary with where the repository or the temporary folder is are written as <GOLDEN>
and <TMP>. tests/analyzer/test_equivalence.py recomputes every record and compares.

    python3 tests/analyzer/make_expected.py           # (re)write the expected records
    python3 tests/analyzer/make_expected.py --check   # compare only, print the differences
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(ROOT, "tests", "golden")
EXPECTED = os.path.join(HERE, "expected")
sys.path.insert(0, HERE)

from conftest import end, fh, io, process, span, usec, write_trace  # noqa: E402

MS = 1_000_000  # ns
US = 1_000
KiB, MiB = 1024, 1 << 20
T0 = 1_000 * MS  # processes start here on their clock
SHIFT = 1_700_000_000_000_000_000  # wall_ns - mono_ns
TIMINGS = ("findings_seconds", "seconds", "report_seconds")  # the analyzer's own
PAGE_KEYS = ("proc_timeline", "offsets", "phase_events", "counters")


# --------------------------------------------------------------------------- synthetic jobs


def counter(name, pid, ts_ns, **values):
    a = json.dumps(values, separators=(",", ":"))
    return f'{{"ph":"C","name":"{name}","pid":{pid},"tid":{pid},"ts":{usec(ts_ns)},"args":{a}}}'


class Proc:
    """One process's trace, events in time order; an FH line before a path's first use."""

    def __init__(self, pid, host="node1", role="main", exe="/opt/conda/bin/python3.11", mono_ns=T0,
                 cwd="/work/proj", cmdline=None, **extra):
        self.pid, self.host = pid, host
        args = dict(exe=exe, role=role, mono_ns=mono_ns, wall_ns=mono_ns + SHIFT, cwd=cwd,
                    cmdline=cmdline or [exe, "train.py"], **extra)
        self.lines = [process(pid, host=host, **args)]
        self.paths: set = set()
        self.t = mono_ns + MS
        self.end_args: dict = {}  # iotrace_end's after its reason (cpu_ns...)

    def io(self, name, path=None, dur_ns=10 * US, gap=1 * US, named=True, **args):
        if path is not None and named and path not in self.paths:
            self.paths.add(path)
            self.lines.append(fh(path, self.pid))
        self.lines.append(io(name, self.pid, self.t, dur_ns, path=path, **args))
        self.t += dur_ns + gap
        return self

    def span(self, name, cat, dur_ns, args=None, advance=True):
        self.lines.append(span(name, cat, self.pid, self.t, dur_ns, args=args))
        if advance:
            self.t += dur_ns + US
        return self

    def counter(self, name, **values):
        self.lines.append(counter(name, self.pid, self.t, **values))
        return self

    def read_file(self, path, size, chunk, rng, stat=True, fd=3, dur=(5, 40)):
        if stat:
            self.io("stat", path, dur_ns=rng.randint(2, 9) * US, ret=0)
        self.io("openat", path, dur_ns=rng.randint(5, 30) * US, ret=fd, flags=0)
        self.io("fstat", path, dur_ns=rng.randint(1, 4) * US, fd=fd, ret=0)
        for off in range(0, size, chunk):
            n = min(chunk, size - off)
            self.io("read", path, dur_ns=rng.randint(*dur) * US, fd=fd, size=chunk, offset=off, ret=n)
        self.io("read", path, dur_ns=2 * US, fd=fd, size=chunk, offset=size, ret=0)
        self.io("close", path, dur_ns=3 * US, fd=fd, ret=0)
        return self

    def done(self, end_ns=None, closed=True):
        lines = list(self.lines)
        if closed:
            lines.append(end(self.pid, len(lines), mono_ns=end_ns or self.t + MS, **self.end_args))
        return lines


def write(folder, procs, codec="zstd", name="python3.11"):
    for p in procs:
        closed = not getattr(p, "crashed", False)
        suffix = ".pfw.zst" if codec == "zstd" else ".pfw.gz"
        write_trace(os.path.join(folder, f"{name}-{p.host}-{p.pid}{suffix}"), p.done(closed=closed),
                    codec=codec, closed=closed, lines_per_frame=700)


def pipeline(folder):
    """A training job: a main process that imports, creates a dataset (small writes, fsync),
    trains two epochs fed by two loader workers reading a file per sample, checkpoints and
    logs; a pool worker spawned later answers through a pipe. Every file class, the use and
    creation of data files, random and re-read files, counters, phases and the hooks' events."""
    rng = random.Random(24)
    main = Proc(100, cmdline=["/opt/conda/bin/python3.11", "train.py", "--epochs", "2"], ranks={"RANK": "0"})
    for i in range(60):  # imports
        mod = f"/opt/conda/lib/python3.11/site-packages/pkg{i % 12}/mod{i}.py"
        main.io("stat", "/work/proj", dur_ns=3 * US, ret=0)
        main.read_file(mod, 3000 + 97 * i, 4096, rng, dur=(5, 12))
        main.io("stat", f"/opt/conda/lib/python3.11/site-packages/pkg{i % 12}/__pycache__/mod{i}.cpython-311.pyc",
                dur_ns=4 * US, ret=-1, errno=2)
    for p in ("/opt/conda/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so",
              "/usr/lib/x86_64-linux-gnu/libz.so.1", "/etc/ld.so.cache", "/proc/self/maps", "/dev/null",
              "/usr/share/zoneinfo/UTC", "/home/u/.venv/pyvenv.cfg", "/opt/conda/lib/python311.zip"):
        main.read_file(p, 2048, 1024, rng, dur=(3, 8))
    main.io("openat", "/work/proj/run.out", ret=4, flags=577).io("openat", "/work/proj/stdout.txt", ret=1, flags=577)
    main.io("openat", "/dev/shm/torch_1_2", ret=6, flags=66)
    for k in range(20):  # the dataset, written in small pieces, synced after each file
        path = f"/data/gen/part-{k:02d}.bin"
        main.io("openat", path, dur_ns=40 * US, ret=5, flags=577)
        for j in range(64):
            main.io("write", path, dur_ns=rng.randint(8, 25) * US, fd=5, size=4096, offset=4096 * j, ret=4096)
        main.io("fsync", path, dur_ns=900 * US, fd=5, ret=0)
        main.io("close", path, dur_ns=5 * US, fd=5, ret=0)
    main.io("write", "/work/proj/stdout.txt", fd=1, size=80, ret=80)
    main.counter("process", cpu_percent=95.0, rss_bytes=300 * MiB, open_files=12)
    workers = [Proc(101 + w, role="dataloader", parent_pid=100, worker_id=w, ppid=100) for w in range(2)]
    for w in workers:
        w.t = main.t + 2 * MS
    samples = [f"/data/imagenet/train/n{k // 50:04d}/img_{k:05d}.JPEG" for k in range(300)]
    for epoch in range(2):
        e0 = main.t
        main.span("epoch", "dataloader", 0, args={"loader": 0, "epoch": epoch, "batches": 15}, advance=False)
        epoch_line = len(main.lines) - 1
        for b in range(15):
            main.span("fetch", "dataloader", rng.randint(300, 1500) * US, args={"epoch": epoch, "batch": b})
            main.span("step", "compute", rng.randint(800, 1200) * US)
            main.io("read", "pipe:[7781]", dur_ns=rng.randint(50, 400) * US, fd=9, size=65536, ret=65536)
            main.io("write", "/work/proj/run.out", fd=4, size=120, ret=120)
            if b % 5 == 0:
                main.counter("loss", value=round(2.0 / (1 + b + 15 * epoch), 4))
        main.lines[epoch_line] = span("epoch", "dataloader", main.pid, e0, main.t - e0,
                                      args={"loader": 0, "epoch": epoch, "batches": 15})
        for w in workers:
            for k in range(w.pid - 101, 300, 2):
                s0 = w.t
                w.read_file(samples[k], 1000 + 37 * k, 512, rng, dur=(4, 30))
                if k % 7 == 0:  # re-read within the open (a zip's directory)
                    w.io("pread64", samples[k], dur_ns=9 * US, fd=3, size=256, offset=rng.randrange(0, 900), ret=256)
                w.span("sample", "dataloader", w.t - s0 + US, args={"index": k})
                w.t += US
            for g in range(0, 20, 3):  # the generated data
                w.read_file(f"/data/gen/part-{g:02d}.bin", 64 * 4096, 65536, rng, stat=False, fd=5)
            w.io("write", "pipe:[7782]", dur_ns=30 * US, fd=8, size=65536, ret=65536)
            w.io("write", "socket:[9001]", dur_ns=30 * US, fd=10, size=4096, ret=4096)
        main.t = max(main.t, *(w.t for w in workers)) + MS
    for _ in range(120):  # random reads in a big file
        main.io("pread64", "/data/big.bin", dur_ns=rng.randint(20, 90) * US, fd=7, size=65536,
                offset=rng.randrange(0, 64) * 65536, ret=65536)
    main.io("read", "/data/unnamed.bin", named=False, fd=11, size=100, ret=100)  # no FH line
    main.span("torch.save", "checkpoint", 30 * MS, args={"file": "/work/proj/ckpt/model.pt", "bytes": 8 << 20},
              advance=False)
    main.io("openat", "/work/proj/ckpt/model.pt", ret=12, flags=577)
    for j in range(128):
        main.io("write", "/work/proj/ckpt/model.pt", dur_ns=200 * US, fd=12, size=65536, offset=65536 * j, ret=65536)
    main.io("close", "/work/proj/ckpt/model.pt", ret=0)
    main.t += 10 * MS
    main.span("numpy.load", "data", 40 * US, args={"file": "/data/x.npy", "bytes": 4096})
    main.counter("process", cpu_percent=99.0, rss_bytes=420 * MiB, open_files=14)
    pool = Proc(140, role="spawn", parent_pid=100, mono_ns=main.t, cmdline=["/opt/conda/bin/python3.11", "-c", "x"])
    pool.io("read", "pipe:[7783]", dur_ns=2 * MS, fd=3, size=4096, ret=4096)
    pool.read_file("/data/imagenet/train/n0000/img_00001.JPEG", 1037, 4096, rng)
    pool.io("write", "pipe:[7784]", dur_ns=50 * US, fd=4, size=4096, ret=4096)
    write(folder, [main, *workers, pool])


def hosts(folder):
    """Two hosts with the same pids, forks (one child without a trace), an exec'd image
    (two files of one pid), a process killed before its end record, gzip and zstd files."""
    rng = random.Random(7)
    procs = []
    for h, host in enumerate(("nodeA", "nodeB")):
        mono = T0 + h * 3 * MS
        rank = Proc(500, host=host, exe="/usr/bin/solver", mono_ns=mono, cwd="/scratch",
                    cmdline=["/usr/bin/solver", "-i", "in.dat"], ranks={"OMPI_COMM_WORLD_RANK": str(h)})
        rank.read_file("/scratch/in.dat", 256 * KiB, 8192, rng)
        for k in range(3):
            rank.io("fork", None, dur_ns=80 * US, cat="process", ret=510 + k)
        for s in range(40):
            rank.io("pwrite64", f"/scratch/out-{h}.dat", dur_ns=rng.randint(10, 60) * US, fd=4,
                    size=32768, offset=32768 * ((s * 7) % 40), ret=32768)
        rank.io("fdatasync", f"/scratch/out-{h}.dat", dur_ns=2 * MS, fd=4, ret=0)
        rank.io("fflush", None, cat="stdio", dur_ns=2 * US, ret=0)
        rank.io("fwrite", f"/scratch/log-{h}.txt", cat="stdio", dur_ns=4 * US, size=64, ret=64)
        procs.append(rank)
        for k in range(2):  # the third fork left no trace
            child = Proc(510 + k, host=host, exe="/usr/bin/solver", role="fork", parent_pid=500, ppid=500,
                         mono_ns=rank.t - 3 * MS + k * 100 * US, cwd="/scratch")
            child.t = rank.t
            for _ in range(30):
                child.io("pread64", "/scratch/in.dat", dur_ns=rng.randint(5, 20) * US, fd=3, size=4096,
                         offset=4096 * rng.randrange(64), ret=4096)
            child.io("openat", f"/scratch/tmp-{h}-{k}", ret=5, flags=577).io("unlink", f"/scratch/tmp-{h}-{k}", ret=0)
            if k == 1:
                child.crashed = True
            procs.append(child)
    # an exec'd image: the same pid writes a second file after execve
    img = Proc(500, host="nodeA", exe="/usr/bin/post", mono_ns=procs[0].t + MS, cwd="/scratch",
               cmdline=["/usr/bin/post"])
    img.read_file("/scratch/out-0.dat", 40 * 32768, 1 << 20, rng)
    img.io("rename", "/scratch/out-0.dat", path2="/scratch/final.dat", ret=0)
    img.name = "post"
    write(folder, [p for p in procs if p.host == "nodeA"], name="solver")
    write(folder, [p for p in procs if p.host == "nodeB"], codec="gzip", name="solver")
    write(folder, [img], name="post")


def many_files(folder, files=2500, procs=1):
    """One file per sample, each read once: stat, open, fstat, read, read at the end, close,
    over `procs` processes (a parent forks them), in a few folders and with a few extensions."""
    rng = random.Random(files * 10 + procs)
    exts = (".JPEG", ".png", ".npy", ".bin", ".log", ".txt")
    workers = []
    if procs == 1:
        workers = [Proc(300, cmdline=["/opt/conda/bin/python3.11", "read.py"])]
    else:
        parent = Proc(300, cmdline=["/opt/conda/bin/python3.11", "read.py"])
        for w in range(procs):
            parent.io("fork", None, dur_ns=100 * US, cat="process", ret=301 + w)
        workers = [parent] + [Proc(301 + w, role="fork", parent_pid=300, ppid=300, worker_id=w) for w in range(procs)]
    readers = workers[1:] or workers
    for r in readers:
        r.t = workers[0].t + MS
    for k in range(files):
        r = readers[k % len(readers)]
        path = f"/data/set/d{k % 17:02d}/s{k:06d}{exts[k % len(exts)]}"
        r.read_file(path, 1024, 1 << 20, rng, dur=(3, 9))
    write(folder, workers)


def streams(folder):
    """One process of 250,000 events (three blocks of the reader's JSON scan): 64 files read
    over and over across the blocks (sequential runs and jumps, more calls than a block keeps
    offset samples of), 20,000 files read once among them, a second thread reading a file out
    of start order, hashes that are not hex, data calls without a hash, and a written file."""
    rng = random.Random(250)
    p = Proc(700, cmdline=["/opt/conda/bin/python3.11", "loader.py"])
    lines = p.lines
    hot = [f"/data/hot/shard-{k:02d}.bin" for k in range(64)]
    pos = dict.fromkeys(hot, 0)
    odd = [f"dft-{k}" for k in range(5)]  # hashes another tool wrote, not 16 hex digits
    for k, h in enumerate(odd):
        lines.append(f'{{"ph":"M","name":"FH","pid":700,"tid":700,"args":{{"name":"/data/odd/{k}.rec","value":"{h}"}}}}')
    cold = 0
    t = p.t
    for step in range(36000):
        f = hot[step % 64]
        if f not in p.paths:
            p.paths.add(f)
            lines.append(fh(f, 700))
        if rng.random() < 0.1:
            pos[f] = rng.randrange(0, 64) * 4096  # a jump
        lines.append(io("pread64", 700, t, rng.randint(3, 40) * US, path=f, fd=3 + step % 64, size=4096,
                        offset=pos[f], ret=4096))
        pos[f] += 4096
        t += 50 * US
        if step % 2 == 0 and cold < 20000:  # a file read once
            c = f"/data/cold/c{cold // 1000:02d}/s{cold:06d}.jpg"
            lines.append(fh(c, 700))
            for name, extra in (("stat", dict(ret=0)), ("openat", dict(ret=90, flags=0)),
                                ("read", dict(fd=90, size=8192, offset=0, ret=3000)),
                                ("read", dict(fd=90, size=8192, offset=3000, ret=0)), ("close", dict(fd=90, ret=0))):
                lines.append(io(name, 700, t, rng.randint(2, 30) * US, path=c, **extra))
                t += 20 * US
            cold += 1
        if step % 50 == 0:  # a hash that is not hex, a call without a hash
            h = odd[step // 50 % 5]
            lines.append(f'{{"ph":"X","name":"read","cat":"posix","pid":700,"tid":700,"ts":{usec(t)},"dur":7.000,'
                         f'"args":{{"fhash":"{h}","fd":70,"size":512,"offset":{512 * (step // 250)},"ret":512}}}}')
            t += 10 * US
            lines.append(io("read", 700, t, 5 * US, fd=71, size=100, offset=(step // 50) * 100 % 700, ret=100))
            t += 10 * US
        if step % 500 == 0:  # another thread, its calls written after later ones of the first
            for j in range(3):
                lines.append(io("pread64", 700, t - (3 - j) * 40 * US, 4 * US, tid=701, path=hot[0], fd=3,
                                size=1024, offset=rng.randrange(0, 8) * 1024, ret=1024))
        if step % 9 == 0:
            out = "/data/out/result.bin"
            if out not in p.paths:
                p.paths.add(out)
                lines.append(fh(out, 700))
            off = (step // 9) * 512 if step % 90 else max(0, (step // 9) * 512 - 4096)
            lines.append(io("pwrite64", 700, t, 6 * US, path=out, fd=80, size=512, offset=off, ret=512))
            t += 10 * US
    p.t = t
    write(folder, [p])


def many_procs(folder):
    """150 short processes (a task of many small files), each reading three files of a shared
    set and one of its own, some naming a file by a hash that is not hex, one using a hash
    another process names (its own FH line lost)."""
    rng = random.Random(150)
    procs = []
    for k in range(150):
        p = Proc(2000 + k, role="fork" if k else "main", parent_pid=2000 if k else None, ppid=2000,
                 mono_ns=T0 + k * MS)
        for f in rng.sample(range(40), 3):
            p.read_file(f"/data/shared/f{f:03d}.bin", 2048, 1024, rng, dur=(3, 20))
        if k % 10 == 3:  # a hash another tool would write
            p.lines.append(f'{{"ph":"M","name":"FH","pid":{p.pid},"tid":{p.pid},'
                           f'"args":{{"name":"/data/odd/{k % 4}.rec","value":"odd-{k % 4}"}}}}')
            p.lines.append(f'{{"ph":"X","name":"read","cat":"posix","pid":{p.pid},"tid":{p.pid},'
                           f'"ts":{usec(p.t)},"dur":3.000,"args":{{"fhash":"odd-{k % 4}","fd":9,"size":64,'
                           f'"offset":0,"ret":64}}}}')
            p.t += 10 * US
        own = f"/data/own/p{k}.bin"
        p.read_file(own, 512, 512, rng, stat=False)
        if k == 77:  # named by process 0 only
            p.io("read", "/data/shared/f000.bin", named=False, fd=3, size=10, offset=0, ret=10)
        procs.append(p)
    procs[0].lines.append(fh("/data/shared/f000.bin", procs[0].pid))
    write(folder, procs)


def mpi_job(folder):
    """Four MPI ranks on a shared file, as the interposer records them (category mpiio, each
    data call's POSIX call nested in it, written first: the tracer writes an event when it
    ends): 4 KiB independent writes interleaved across the ranks, 512 B off the stripe for
    rank 3's 1 MiB blocks, and rank 1 writing 4x as many blocks as the others before a
    collective MPI_File_sync the others wait in; MPI_Init, MPI_Barrier, MPI_Finalize (mpi)."""
    rng = random.Random(11)
    shared = "/lustre/job/shared.dat"
    procs = []
    for r in range(4):
        p = Proc(700 + r, host="node1" if r < 2 else "node2", exe="/opt/app/solver", mono_ns=T0,
                 cmdline=["/opt/app/solver", "in.nml"], cwd="/lustre/job",
                 ranks={"OMPI_COMM_WORLD_RANK": str(r), "SLURM_JOB_ID": "4242"}, mpi_rank=r, mpi_size=4)

        def call(name, path=None, dur_ns=10 * US, inner=None, cat="mpiio", p=p, **args):
            """An MPI call, `inner` (name, args) the POSIX call nested in it."""
            if path is not None and path not in p.paths:
                p.paths.add(path)
                p.lines.append(fh(path, p.pid))
            if inner:
                p.lines.append(io(inner[0], p.pid, p.t + 2 * US, dur_ns - 4 * US, path=path, **inner[1]))
            p.lines.append(io(name, p.pid, p.t, dur_ns, cat=cat, path=path, **args))
            p.t += dur_ns + 2 * US

        call("MPI_Init", cat="mpi", dur_ns=40 * MS, ret=0)
        p.t = T0 + 50 * MS  # every rank leaves MPI_Init together
        call("MPI_File_open", shared, dur_ns=(300 + 10 * r) * US, flags=5, ret=0)
        blocks = 400 if r == 1 else 100
        for i in range(blocks):
            off = (i * 4 + r) * 4096
            call("MPI_File_write_at", shared, dur_ns=rng.randint(20, 40) * US, size=4096, bytes=4096, offset=off,
                 ret=0, inner=("pwrite64", dict(fd=5, size=4096, offset=off, ret=4096)))
        if r == 3:
            for i in range(16):
                off = (64 + i) * (1 << 20) + 512
                call("MPI_File_write_at", shared, dur_ns=rng.randint(600, 900) * US, size=1 << 20,
                     bytes=1 << 20, offset=off, ret=0,
                     inner=("pwrite64", dict(fd=5, size=1 << 20, offset=off, ret=1 << 20)))
        procs.append(p)
    # the collective sync: everyone leaves when the last (rank 1) has arrived
    last = max(p.t for p in procs)
    for p in procs:
        p.lines.append(io("fsync", p.pid, last + 2 * US, 3 * MS, path=shared, fd=5, ret=0))
        p.lines.append(io("MPI_File_sync", p.pid, p.t, last + 4 * MS - p.t, cat="mpiio", path=shared, ret=0))
        p.t = last + 4 * MS + 2 * US
    for p in procs:
        p.lines.append(io("close", p.pid, p.t + 2 * US, 20 * US, path=shared, fd=5, ret=0))
        p.lines.append(io("MPI_File_close", p.pid, p.t, 50 * US, cat="mpiio", path=shared, ret=0))
        p.lines.append(io("MPI_Barrier", p.pid, p.t + 60 * US, 30 * US, cat="mpi", ret=0))
        p.lines.append(io("MPI_Finalize", p.pid, p.t + 100 * US, 5 * MS, cat="mpi", ret=0))
        p.t += 6 * MS
    write(folder, procs, name="solver")


def mpi_starved(folder):
    """Four MPI ranks doing the same 20 steps (5 ms of compute, a 64 KiB independent write, a
    barrier), rank 2 taking 15 ms for its compute: the same CPU time outside MPI calls as the
    others (their end records: 100 ms; the others' 150 ms more polling inside MPI calls), its
    host short of CPUs for 90% of the run (host_cpu_wait_us): cpu-starved, not collective-wait."""
    shared = "/scratch/job/steps.dat"
    procs = []
    for r in range(4):
        p = Proc(800 + r, exe="/opt/app/stepper", mono_ns=T0, cmdline=["/opt/app/stepper"], cwd="/scratch/job",
                 ranks={"PMI_RANK": str(r)}, mpi_rank=r, mpi_size=4)
        p.lines.append(io("MPI_Init", p.pid, p.t, 40 * MS, cat="mpi", ret=0))
        p.t = T0 + 50 * MS
        p.lines.append(fh(shared, p.pid))
        p.lines.append(io("MPI_File_open", p.pid, p.t, 300 * US, cat="mpiio", path=shared, flags=5, ret=0))
        p.t += 302 * US
        procs.append(p)
    for k in range(20):
        for r, p in enumerate(procs):
            p.t += (15 if r == 2 else 5) * MS  # compute
            off = (r * 20 + k) * 65536
            p.lines.append(io("pwrite64", p.pid, p.t + 2 * US, 96 * US, path=shared, fd=5, size=65536, offset=off,
                              ret=65536))
            p.lines.append(io("MPI_File_write_at", p.pid, p.t, 100 * US, cat="mpiio", path=shared, size=65536,
                              bytes=65536, offset=off, ret=0))
            p.t += 102 * US
        last = max(p.t for p in procs)  # the barrier: everyone leaves when the last has arrived
        for p in procs:
            p.lines.append(io("MPI_Barrier", p.pid, p.t, last + 50 * US - p.t, cat="mpi", ret=0))
            p.t = last + 52 * US
    for r, p in enumerate(procs):
        p.lines.append(io("MPI_File_close", p.pid, p.t, 50 * US, cat="mpiio", path=shared, ret=0))
        p.lines.append(io("MPI_Finalize", p.pid, p.t + 100 * US, 5 * MS, cat="mpi", ret=0))
        run = p.t - (T0 + 50 * MS)
        p.t += 6 * MS
        p.end_args = dict(cpu_ns=(110 if r == 2 else 250) * MS, mpi_cpu_ns=(10 if r == 2 else 150) * MS,
                          host_cpu_wait_us=int(0.9 * run / 1000))
    write(folder, procs, name="stepper")


SYNTHETIC = {
    "mpi-job": mpi_job,
    "mpi-starved": mpi_starved,
    "pipeline": pipeline,
    "hosts": hosts,
    "many-files": many_files,
    "many-files-8p": lambda d: many_files(d, files=3000, procs=8),
    "streams": streams,
    "many-procs": many_procs,
}


# real Darshan logs the darshan wheel ships (issue 26): MACSio's HDF5 on MPI-IO (16 ranks,
# counters), IOR's HDF5 with DXT (4 ranks, its segments the events)
DARSHAN_LOGS = {"darshan-macsio": "examples/example_logs/shane_macsio_id29959_5-22-32552-7035573431850780836_"
                                  "1590156158.darshan",
                "darshan-ior-hdf5": "examples/example_logs/ior_hdf5_example.darshan"}


def darshan_dir() -> str | None:
    import importlib.util

    spec = importlib.util.find_spec("darshan")
    return spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None


def workloads() -> dict:
    """name -> (paths to analyze, writer or None)."""
    out = {}
    for s in sorted(os.listdir(GOLDEN)):
        # (not live<N>/: a reader finishes a dead process's live file in place, and those are
        # pinned as they were left; tests/test_golden.py finishes copies of them)
        if os.path.isdir(os.path.join(GOLDEN, s)) and not s.startswith("live"):
            out[f"golden-{s}"] = ([os.path.join(GOLDEN, s)], None)
    for name, make in SYNTHETIC.items():
        out[name] = (None, make)
    d = darshan_dir()
    if d is not None:
        for name, rel in DARSHAN_LOGS.items():
            out[name] = ([os.path.join(d, rel)], None)
    return out


def rule_sets() -> dict:
    from iotrace_analyzer.analyses import insights

    floors = ("min_share", "min_calls", "min_bytes", "min_time_s", "min_wall_s", "min_file_bytes")

    def low(k):
        if k in floors:  # min_calls 1, not 0: random-reads divides by the calls it weighs
            return int(k == "min_calls")
        return 0.01 if k.endswith("share") else 1.01 if k == "ratio" else None

    sensitive = {rid: {k: low(k) for k in keys if low(k) is not None}
                 for rid, keys in insights.THRESHOLDS.items()}
    sensitive["metadata-heavy"]["per_sample_files"] = 10
    return {"default": insights.thresholds(), "sensitive": insights.thresholds(sensitive)}


# --------------------------------------------------------------------------- records


def _normal(x, subs):
    """JSON-ready, with the varying paths replaced (numpy arrays and scalars as lists and numbers)."""
    import numpy as np

    if isinstance(x, dict):
        return {str(_normal(k, subs)): _normal(v, subs) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_normal(v, subs) for v in x]
    if isinstance(x, np.ndarray):
        return _normal(x.tolist(), subs)
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, str):
        for a, b in subs:
            x = x.replace(a, b)
        return x
    if isinstance(x, bytes):
        return _normal(x.decode("utf-8", "replace"), subs)
    return x


def _canon(x) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _rows_sha(t, subs) -> str:
    """A hash of a table's rows whatever their order: its columns (strings with the paths
    replaced, dictionaries decoded) sorted by all of them, then written column by column.
    A table with list columns is hashed row by row (it is small: processes.parquet)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = {}
    for name in t.column_names:
        c = t.column(name)
        if pa.types.is_dictionary(c.type):
            c = c.cast(c.type.value_type)
        if pa.types.is_string(c.type) or pa.types.is_large_string(c.type):
            for a, b in subs:
                c = pc.replace_substring(c, a, b)
        cols[name] = c
    t = pa.table(cols)
    if any(pa.types.is_nested(f.type) for f in t.schema):
        return _sha("\n".join(sorted(_canon(_normal(r, subs)) for r in t.to_pylist())))
    if t.num_rows:
        t = t.take(pc.sort_indices(t, sort_keys=[(n, "ascending") for n in t.column_names]))
    return _sha("\n".join(f"{n}:{_canon(t.column(n).to_pylist())}" for n in t.column_names))


def _parquet(out: str, subs) -> dict:
    import pyarrow.parquet as pq

    rec = {}
    for dirpath, _dirs, names in sorted(os.walk(out)):
        for name in sorted(names):
            if not name.endswith(".parquet"):
                continue
            path = os.path.join(dirpath, name)
            t = pq.read_table(path)
            rec[os.path.relpath(path, out)] = dict(
                schema=[[f.name, str(f.type), f.nullable] for f in t.schema], rows=t.num_rows,
                sha256=_rows_sha(t, subs))
    return rec


def record(paths: list[str], rules: dict, tmp: str, workers: int = 2) -> dict:
    """The outputs of one analysis, as written to expected/ (with 2 workers)."""
    from iotrace_analyzer.outputs import report
    from iotrace_analyzer.pipeline import Options, analyze

    out = os.path.join(tmp, "out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    job = analyze(paths, Options(out_dir=out, workers=workers, progress=False, rules=rules))
    S = job.summary
    subs = [(os.path.realpath(GOLDEN), "<GOLDEN>"), (GOLDEN, "<GOLDEN>"),
            (os.path.realpath(tmp), "<TMP>"), (tmp, "<TMP>")]
    if darshan_dir():
        subs += [(os.path.realpath(darshan_dir()), "<DARSHAN>"), (darshan_dir(), "<DARSHAN>")]
    for k in TIMINGS:
        S["input"].pop(k, None)
    text = report.text_report(S, 10)
    return dict(summary=_normal(S, subs), text=_normal(text, subs).splitlines(),
                page={k: _sha(_canon(_normal(getattr(job.drawn, k), subs))) for k in PAGE_KEYS},
                parquet=_parquet(out, subs))


def compute(only: set | None = None, workers: int = 2):
    """(file name, record) of every workload and rule set."""
    sets = rule_sets()
    for name, (paths, make) in workloads().items():
        if only and name not in only:
            continue
        tmp = tempfile.mkdtemp(prefix="iotrace-expected-")
        try:
            if make is not None:
                traces = os.path.join(tmp, "traces")
                os.makedirs(traces)
                make(traces)
                paths = [traces]
            for rs, rules in sets.items():
                yield f"{name}.{rs}.json", record(paths, rules, tmp, workers)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def diff(a, b, where="", out=None, most=20) -> list:
    """The paths where two records differ (at most `most`)."""
    out = [] if out is None else out
    if len(out) >= most:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b) and set(a) == set(b):  # summary.json keeps the order of its keys
            out.append(f"{where}: keys in another order: expected {list(a)}, got {list(b)}")
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}/{k}: {'missing' if k not in b else 'new'}")
            else:
                diff(a[k], b[k], f"{where}/{k}", out, most)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{where}[{i}]", out, most)
    elif a != b or type(a) is not type(b):
        out.append(f"{where}: expected {str(a)[:200]!r}, got {str(b)[:200]!r}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the expected records, write nothing")
    ap.add_argument("only", nargs="*", help="workloads (default: all)")
    args = ap.parse_args()
    os.makedirs(EXPECTED, exist_ok=True)
    bad = 0
    for fname, rec in compute(set(args.only) or None):
        path = os.path.join(EXPECTED, fname)
        if args.check:
            with open(path) as f:
                want = json.load(f)
            got = json.loads(json.dumps(rec))
            d = diff(want, got)
            print(f"{fname}: {'same' if not d else 'DIFFERENT'}")
            for line in d:
                print(f"  {line}")
            bad += bool(d)
        else:
            with open(path, "w") as f:
                json.dump(rec, f, indent=1, ensure_ascii=False)
                f.write("\n")
            print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
