"""Benchmark of iotrace-analyze on Darshan logs, beside Drishti on the same logs (issue 26).

The logs are written by Darshan's own log library (libdarshan-util, as pydarshan's wheel ships
it: darshan_log_create, darshan_log_put_job/_exe/_mounts/_namehash/_mod, the functions
darshan-convert and darshan-merge write with), from records made here: no Darshan runtime is
needed (Debian has none, PyPI neither: darshan-runtime is built from source against the
MPI of the machine). Shapes:

  dxt       a job of 64 ranks, 5 files each, 1M DXT_POSIX segments (each rank's sequential
            64 KiB writes then reads of its files), with the POSIX counters that agree
  counters  1000 ranks, 10 files each (10k POSIX records) and a file every rank writes (one
            record reduced over the ranks), STDIO on stdout; no DXT

Each is timed as `python -m iotrace_analyzer LOG --summary OUT -q` in a fresh process (wall
time, start to summary written: the imports, reading the log, the figures and the rules), and
as `drishti LOG` (drishti-io; its wall time to its report, when it is installed). No warm-up.

usage: python benchmarks/darshan_bench.py [--shapes dxt,counters] [--runs 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from iotrace_analyzer.inputs import darshan_log

# what the writing needs beyond pydarshan's declarations (darshan-logutils.h, 3.4/3.5)
WRITE_DEFS = """
typedef struct UT_hash_handle {
   void *tbl; void *prev; void *next; void *hh_prev; void *hh_next; void *key;
   unsigned keylen; unsigned hashv;
} UT_hash_handle;
struct iotrace_name_ref { void *name_record; UT_hash_handle hlink; };
void *darshan_log_create(const char *name, int comp_type, int partial_flag);
int darshan_log_put_job(void *fd, struct darshan_job *job);
int darshan_log_put_exe(void *fd, char *buf);
int darshan_log_put_mounts(void *fd, struct darshan_mnt_info *mnt_data_array, int count);
int darshan_log_put_namehash(void *fd, struct iotrace_name_ref *hash);
int darshan_log_put_mod(void *fd, int mod_id, void *mod_buf, int mod_buf_sz, int ver);
"""
MOD = {"POSIX": (1, 4), "STDIO": (9, 2), "DXT_POSIX": (10, 1)}  # module id, record version (darshan 3.4/3.5)
T0 = 1_700_000_000  # the job's start, s


_WRITER = None


def _lib():
    """(ffi, the library with the put functions, the library as the reader declares it); once."""
    global _WRITER
    if _WRITER is not None:
        return _WRITER
    import cffi

    from iotrace_analyzer.inputs import darshan_log as dl

    base_ffi, base_lib = dl._library()
    ffi = cffi.FFI()
    ffi.include(base_ffi)
    ffi.cdef(WRITE_DEFS)
    _WRITER = (ffi, ffi.dlopen(_so_path()), base_lib)
    return _WRITER


def _so_path() -> str:
    import glob
    import importlib.util

    pkg = importlib.util.find_spec("darshan").submodule_search_locations[0]
    return sorted(glob.glob(os.path.join(os.path.dirname(pkg), "darshan.libs", "libdarshan-util*.so*")))[0]


def _rid(path: str) -> int:
    """A record id for a path (Darshan hashes the path; any distinct 64-bit number reads the same)."""
    h = 0xCBF29CE484222325
    for b in path.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


class Writer:
    """A Darshan log written through libdarshan-util's put functions."""

    def __init__(self, path: str, nprocs: int, run_s: float, exe: str):
        self.ffi, self.lib, self.base = _lib()
        self.fd = self.lib.darshan_log_create(path.encode(), 0, 0)  # zlib, not partial
        if self.fd == self.ffi.NULL:
            raise RuntimeError(f"darshan_log_create failed for {path}")
        job = self.ffi.new("struct darshan_job *")
        job.uid, job.start_time_sec, job.end_time_sec, job.nprocs, job.jobid = 1000, T0, T0 + int(run_s), nprocs, 4242
        meta = b"lib_ver=3.4.7\nh=romio_no_indep_rw=true;cb_nodes=4\n"
        self.ffi.memmove(job.metadata, meta, len(meta))
        assert self.lib.darshan_log_put_job(self.fd, job) == 0
        assert self.lib.darshan_log_put_exe(self.fd, self.ffi.new("char[]", exe.encode())) == 0
        mnt = self.ffi.new("struct darshan_mnt_info[1]")
        self.ffi.memmove(mnt[0].mnt_type, b"lustre", 6)
        self.ffi.memmove(mnt[0].mnt_path, b"/scratch", 8)
        assert self.lib.darshan_log_put_mounts(self.fd, mnt, 1) == 0

    def names(self, paths: list[str]) -> None:
        """The name records, as a uthash list the library walks by its `next` pointers."""
        ffi = self.ffi
        recs = [ffi.new("char[]", int(_rid(p)).to_bytes(8, "little") + p.encode() + b"\0") for p in paths]
        refs = ffi.new("struct iotrace_name_ref[]", len(paths))
        for i, r in enumerate(recs):
            refs[i].name_record = r
            refs[i].hlink.next = ffi.addressof(refs[i + 1]) if i + 1 < len(paths) else ffi.NULL
        self._keep = (recs, refs)
        assert self.lib.darshan_log_put_namehash(self.fd, refs) == 0

    def module(self, name: str, data: bytes) -> None:
        mod_id, ver = MOD[name]
        buf = self.ffi.from_buffer(data)
        assert self.lib.darshan_log_put_mod(self.fd, mod_id, buf, len(data), ver) == 0

    def close(self) -> None:
        self.base.darshan_log_close(self.fd)


def _records(module: str, ids, ranks, values: dict, fvalues: dict) -> bytes:
    """A module's records as the library lays them out: (id, rank), the counters, the float ones."""
    ints, flts = darshan_log.counter_names(module)
    n = len(ids)
    c = np.zeros((n, len(ints)), np.int64)
    f = np.zeros((n, len(flts)), np.float64)
    for k, v in values.items():
        c[:, ints.index(k)] = v
    for k, v in fvalues.items():
        f[:, flts.index(k)] = v
    head = np.zeros((n, 2), np.int64)
    head[:, 0] = np.asarray(ids, np.uint64).view(np.int64)
    head[:, 1] = ranks
    return np.concatenate([head.view(np.uint8).reshape(n, -1), c.view(np.uint8).reshape(n, -1),
                           f.view(np.uint8).reshape(n, -1)], axis=1).tobytes()


def _posix(ids, ranks, reads, writes, size, run_s, opens=1, nprocs=1) -> bytes:
    rb, wb = reads * size, writes * size
    bin_ = int(np.searchsorted([0, 100, 1024, 10240, 102400, 1048576, 4194304, 10485760, 104857600, 1 << 30],
                               size, side="right") - 1)
    labels = ["0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS"]
    v = dict(POSIX_OPENS=opens, POSIX_READS=reads, POSIX_WRITES=writes, POSIX_BYTES_READ=rb, POSIX_BYTES_WRITTEN=wb,
             POSIX_MAX_BYTE_READ=np.maximum(rb - 1, 0), POSIX_MAX_BYTE_WRITTEN=np.maximum(wb - 1, 0),
             POSIX_SEQ_READS=np.maximum(reads - 1, 0), POSIX_SEQ_WRITES=np.maximum(writes - 1, 0),
             POSIX_CONSEC_READS=np.maximum(reads - 1, 0), POSIX_CONSEC_WRITES=np.maximum(writes - 1, 0),
             POSIX_FILE_ALIGNMENT=1 << 20, POSIX_MEM_ALIGNMENT=8, POSIX_ACCESS1_ACCESS=size,
             POSIX_ACCESS1_COUNT=reads + writes, POSIX_FASTEST_RANK=0, POSIX_SLOWEST_RANK=nprocs - 1,
             **{f"POSIX_SIZE_READ_{labels[bin_]}": reads, f"POSIX_SIZE_WRITE_{labels[bin_]}": writes})
    per = 64e-6  # s per call
    fv = dict(POSIX_F_READ_TIME=reads * per, POSIX_F_WRITE_TIME=writes * per, POSIX_F_META_TIME=opens * 1e-4,
              POSIX_F_OPEN_START_TIMESTAMP=0.5, POSIX_F_WRITE_START_TIMESTAMP=1.0,
              POSIX_F_WRITE_END_TIMESTAMP=run_s / 2, POSIX_F_READ_START_TIMESTAMP=run_s / 2,
              POSIX_F_READ_END_TIMESTAMP=run_s - 1, POSIX_F_CLOSE_END_TIMESTAMP=run_s - 0.5)
    return _records("POSIX", ids, ranks, v, fv)


def write_dxt(path: str, segments: int = 1_000_000, ranks: int = 64, files: int = 5, run_s: float = 600.0) -> int:
    """1M DXT_POSIX segments: each rank writes its files sequentially in 64 KiB calls, then reads them."""
    size = 64 << 10
    per = segments // (ranks * files)
    w_n, r_n = per // 2, per - per // 2
    paths = [f"/scratch/job/rank{r:04d}/part{f}.dat" for r in range(ranks) for f in range(files)]
    ids = np.array([_rid(p) for p in paths], np.uint64)
    rk = np.repeat(np.arange(ranks), files)
    W = Writer(path, ranks, run_s, "/apps/sim/bin/solver --steps 100")
    W.names(paths)
    W.module("POSIX", _posix(ids, rk, np.full(len(ids), r_n), np.full(len(ids), w_n), size, run_s))
    ffi = W.ffi
    head = ffi.sizeof("struct dxt_file_record")
    parts = []
    for i, (rid, r) in enumerate(zip(ids.tolist(), rk.tolist())):
        h = bytearray(head)
        h[0:8] = int(rid).to_bytes(8, "little")
        h[8:16] = int(r).to_bytes(8, "little", signed=True)
        host = f"nid{r // 16:05d}".encode()
        o_host = ffi.offsetof("struct dxt_file_record", "hostname")
        h[o_host:o_host + len(host)] = host
        o_w = ffi.offsetof("struct dxt_file_record", "write_count")
        h[o_w:o_w + 16] = int(w_n).to_bytes(8, "little") + int(r_n).to_bytes(8, "little")
        seg = np.zeros(w_n + r_n, [("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])
        seg["offset"][:w_n] = np.arange(w_n) * size
        seg["offset"][w_n:] = np.arange(r_n) * size
        seg["length"] = size
        t = 1.0 + (i % files) * 1e-3 + np.arange(w_n + r_n) * ((run_s - 2) / (w_n + r_n))
        seg["start"], seg["end"] = t, t + 50e-6
        parts.append(bytes(h) + seg.tobytes())
    W.module("DXT_POSIX", b"".join(parts))
    W.close()
    return int(ranks * files * (w_n + r_n))


def write_counters(path: str, ranks: int = 1000, files: int = 10, run_s: float = 900.0) -> int:
    """10k POSIX records of 1000 ranks, and a file all of them write (one reduced record)."""
    paths = [f"/scratch/job/rank{r:04d}/out{f}.h5" for r in range(ranks) for f in range(files)]
    shared = "/scratch/job/checkpoint.h5"
    ids = np.array([_rid(p) for p in paths] + [_rid(shared)], np.uint64)
    rk = np.r_[np.repeat(np.arange(ranks), files), -1]
    reads = np.r_[np.full(len(paths), 100), 0]
    writes = np.r_[np.full(len(paths), 200), 16 * ranks]
    W = Writer(path, ranks, run_s, "/apps/sim/bin/solver --steps 100")
    W.names(paths + [shared, "<STDOUT>"])
    W.module("POSIX", _posix(ids, rk, reads, writes, 4096, run_s, opens=np.r_[np.ones(len(paths)), ranks],
                             nprocs=ranks))
    W.module("STDIO", _records("STDIO", np.array([_rid("<STDOUT>")], np.uint64), np.array([-1]),
                               dict(STDIO_OPENS=ranks, STDIO_WRITES=10 * ranks, STDIO_BYTES_WRITTEN=800 * ranks),
                               dict(STDIO_F_WRITE_TIME=0.01 * ranks)))
    W.close()
    return len(ids)


def timed(cmd: list[str], cwd: str) -> tuple[float, int, str]:
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=3600)
    return time.perf_counter() - t, p.returncode, (p.stderr.strip().splitlines() or [""])[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="dxt,counters")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", help="write the logs here and keep them")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="darshan-bench-")
    os.makedirs(work, exist_ok=True)
    drishti = shutil.which("drishti")
    print(f"{'shape':9} {'records':>8} {'segments':>9} {'log':>9}  {'iotrace-analyze':>22}  {'drishti':>22}")
    try:
        for shape in a.shapes.split(","):
            log = os.path.join(work, f"{shape}.darshan")
            t = time.perf_counter()
            n = write_dxt(log) if shape == "dxt" else write_counters(log)
            made = time.perf_counter() - t
            recs = darshan_log.read(log, dxt=False)
            records = sum(len(r) for r in recs.records.values())
            segs = n if shape == "dxt" else 0
            ours, theirs = [], []
            for _ in range(a.runs):
                s, rc, err = timed([sys.executable, "-m", "iotrace_analyzer", log, "--summary",
                                    os.path.join(work, f"{shape}.json"), "-q"], work)
                if rc:
                    raise SystemExit(f"iotrace-analyze failed on {log}: {err}")
                ours.append(s)
                if drishti:
                    s, rc, err = timed([drishti, log], work)
                    theirs.append(s if rc == 0 else f"died: {err[:40]}")
            mb = os.path.getsize(log) / 1e6
            fmt = "  ".join(f"{x:.2f}" for x in ours) + " s"
            dr = ("  ".join(f"{x:.2f}" if isinstance(x, float) else x for x in theirs) + " s") if theirs else "n/a"
            print(f"{shape:9} {records:8d} {segs:9d} {mb:7.1f}MB  {fmt:>22}  {dr:>22}   (log written in {made:.1f} s)")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
