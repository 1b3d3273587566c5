"""Reading a Darshan log (.darshan): its header, job record, file names, each module's records
as arrays, and the DXT segments, through the log library that pydarshan's wheel ships
(libdarshan-util: no C of ours for this format).

The library trusts its input: a log cut off or damaged makes it read past its buffers (a
truncated log crashed the process in a test). So the log is checked here first, in Python, and
the library is given only what passed: the header (its version, magic number, the place and
length of every region), the job record's region, and each region's compressed streams, which
must inflate to their end within the region (zlib and bzip2 carry checksums: a region that
inflates whole is the bytes the job wrote). A damaged module's region is left unread and named
(`Log.damage`); a damaged header or job record is a DarshanError that says what.

pydarshan's own package is not imported (it imports pandas and matplotlib: 1.7 s); its cffi
declarations (darshan/backend/api_def_c.py) are read from its files and its library loaded.
"""

from __future__ import annotations

import bz2
import glob
import importlib.util
import os
import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from iotrace_format.reader import TraceInputError, find_traces

SUFFIX = ".darshan"
MAGIC = 6567223  # DARSHAN_MAGIC_NR
COMP = {0: "zlib", 1: "bzip2", 2: "none"}  # enum darshan_comp_type
# The module regions of a 3.x header: DARSHAN_MAX_MODS slots of (offset, length) and a version
# each: 16 up to format 3.21, 64 from 3.41 (LAYOUTS)
HEADER_SLOTS = (16, 64)
# the record structs of the modules read as counters (api_def_c.py's), by module name
STRUCTS = {"POSIX": "struct darshan_posix_file", "MPI-IO": "struct darshan_mpiio_file",
           "STDIO": "struct darshan_stdio_file", "H5F": "struct darshan_hdf5_file",
           "H5D": "struct darshan_hdf5_dataset", "PNETCDF_FILE": "struct darshan_pnetcdf_file",
           "PNETCDF_VAR": "struct darshan_pnetcdf_var"}
DXT = ("DXT_POSIX", "DXT_MPIIO")
# the counter name arrays of the library, by module (posix_counter_names...)
_NAMES = {"POSIX": "posix", "MPI-IO": "mpiio", "STDIO": "stdio", "H5F": "h5f", "H5D": "h5d",
          "PNETCDF_FILE": "pnetcdf_file", "PNETCDF_VAR": "pnetcdf_var"}


class DarshanError(TraceInputError):
    """A Darshan log that cannot be read; the message names the file and what is wrong."""


@dataclass
class Records:
    """One module's records: record id and rank per row (-1: a file every rank used, reduced by
    Darshan to one record), the integer and float counters as columns by name."""

    ids: np.ndarray  # uint64
    ranks: np.ndarray  # int64
    counters: dict  # name -> int64 column
    fcounters: dict  # name -> float64 column (seconds)
    file_ids: np.ndarray | None = None  # H5D / PNETCDF_VAR: the file record each belongs to

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class Segments:
    """A DXT module's segments (one per read or write call the job made), as columns: the
    record (file id, rank) they belong to, write or read, offset, length, start and end in
    seconds from the job's start. `hosts`: rank -> host name (DXT records it)."""

    ids: np.ndarray
    ranks: np.ndarray
    write: np.ndarray  # bool
    offset: np.ndarray
    length: np.ndarray
    start: np.ndarray  # float64 s
    end: np.ndarray
    hosts: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class Log:
    path: str
    version: str  # the log format's, e.g. "3.21"
    job: dict  # uid, start_ns, end_ns, nprocs, jobid, metadata (lib_ver, h: MPI-IO hints...)
    exe: str
    mounts: list  # (mount point, file system type)
    modules: dict  # name -> dict(bytes, version, partial)
    names: dict  # record id -> path
    records: dict = field(default_factory=dict)  # module name -> Records
    dxt: dict = field(default_factory=dict)  # DXT module name -> Segments
    damage: list = field(default_factory=list)  # (kind, detail): what could not be read
    partial: bool = False  # the runtime ran out of memory for records: some are missing


# --------------------------------------------------------------------------- the library

_LIB = None


def _library():
    """(ffi, lib) of libdarshan-util as pydarshan's wheel ships it, its declarations read
    from pydarshan's files (not imported: see the module's docstring)."""
    global _LIB
    if _LIB is not None:
        return _LIB
    import cffi

    spec = importlib.util.find_spec("darshan")
    if spec is None or not spec.submodule_search_locations:
        raise DarshanError("reading Darshan logs needs pydarshan: pip install 'iotrace[darshan]' (or darshan)")
    pkg = spec.submodule_search_locations[0]
    defs = importlib.util.spec_from_file_location("_iotrace_darshan_defs",
                                                  os.path.join(pkg, "backend", "api_def_c.py"))
    mod = importlib.util.module_from_spec(defs)
    defs.loader.exec_module(mod)
    ffi = cffi.FFI()
    ffi.cdef(mod.load_darshan_header())
    found = sorted(glob.glob(os.path.join(os.path.dirname(pkg), "darshan.libs", "libdarshan-util*.so*")))
    lib = None
    for path in found + ["libdarshan-util.so"]:
        try:
            lib = ffi.dlopen(path)
            break
        except OSError:
            continue
    if lib is None:
        raise DarshanError("pydarshan's libdarshan-util was not found (its wheel ships it: pip install darshan)")
    _LIB = (ffi, lib)
    return _LIB


def library_version() -> str:
    ffi, lib = _library()
    return ffi.string(lib.darshan_log_get_lib_version()).decode()


# --------------------------------------------------------------------------- finding logs


def is_log(path: str) -> bool:
    return str(path).endswith(SUFFIX)


def _found(paths: list[str]) -> list[str]:
    """The Darshan logs (*.darshan) named, or found under the folders and globs given."""
    found = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                found += [os.path.join(root, f) for f in sorted(files) if is_log(f)]
        elif os.path.isfile(p):
            if is_log(p):
                found.append(p)
        else:
            for m in sorted(glob.glob(p, recursive=True)):
                found += _found([m]) if os.path.isdir(m) else [m] if is_log(m) else []
    return found


def logs_in(paths: list[str]) -> list[str]:
    """The Darshan logs named, or found under the folders and globs given ([]: none), each
    checked (its header and job record: a log that cannot be read at all is an error here,
    before any task runs). Traces beside them are an error (TraceInputError): a Darshan log
    and iotrace's traces are records of different jobs, and are not merged."""
    logs = _found(paths)
    if not logs:
        return []
    rest = [p for p in paths if not (os.path.isfile(p) and is_log(p))]
    traces: list = []
    if rest:
        try:
            traces = [t for t in find_traces(rest) if not is_log(t)]
        except TraceInputError:
            traces = []
    if traces:
        raise TraceInputError(
            f"a mix of Darshan logs ({len(logs)}, e.g. {logs[0]}) and iotrace traces ({len(traces)}, e.g. "
            f"{traces[0]}): analyze them apart (a Darshan log is a job of its own; --compare sets two side by side)")
    out = list(dict.fromkeys(os.path.realpath(x) for x in logs))
    for p in out:
        check(p)  # DarshanError (a TraceInputError) says what is wrong
    return out


# --------------------------------------------------------------------------- checks


def _inflate(comp: str, data: bytes) -> str | None:
    """None when `data` is whole compressed streams of `comp` end to end (a region may hold
    several), else what is wrong. The inflated bytes are dropped as they come."""
    if comp == "none":
        return None
    pos = 0
    while pos < len(data):
        try:
            if comp == "zlib":
                d = zlib.decompressobj()
                rest = data[pos:]
                while rest and not d.eof:
                    d.decompress(rest, 1 << 24)
                    rest = d.unconsumed_tail
            else:
                d = bz2.BZ2Decompressor()
                d.decompress(data[pos:])
        except (zlib.error, OSError, EOFError, ValueError) as e:
            return f"does not inflate ({e})"
        if not d.eof:
            return "is cut off (its compressed data ends early)"
        used = len(data) - pos - len(d.unused_data)
        if used <= 0:
            return "does not inflate"
        pos += used
    return None


# Where a header's maps are: (offset of the name map, DARSHAN_MAX_MODS). Up to format 3.21 the
# partial flag is 32 bits and there are 16 modules; from 3.41 (darshan 3.4) 64 bits and 64.
LAYOUTS = ((24, 16), (32, 64), (24, 64), (32, 16))


def check_header(path: str, head: bytes, size: int) -> tuple[str, str, list]:
    """(format version, compression, the layouts the header may have: [(job region's offset,
    (name region offset, length), [(slot, offset, length)] of the module regions)]) of a
    log's header; DarshanError for what is not a Darshan 3 log."""
    small = 40 + 20 * HEADER_SLOTS[0]
    if size < small or len(head) < small:
        what = "cut off in its header" if head[8:16] == struct.pack("<q", MAGIC) else "not a Darshan log"
        raise DarshanError(f"{path}: {what} (only {size} bytes: a Darshan header takes at least {small})")
    version = head[:8].split(b"\0")[0].decode("ascii", "replace")
    magic = struct.unpack_from("<q", head, 8)[0]
    if magic != MAGIC:
        if struct.unpack_from(">q", head, 8)[0] == MAGIC:
            raise DarshanError(f"{path}: a Darshan log written on a big-endian machine: not supported")
        if version[:1] in "123" and "." in version:
            raise DarshanError(f"{path}: Darshan log format {version!r} is not supported (its header is not "
                               "a 3.x header; darshan-convert of darshan-util 3.x converts older logs)")
        raise DarshanError(f"{path}: not a Darshan log (no Darshan magic number in its header)")
    if not version.startswith("3."):
        raise DarshanError(f"{path}: Darshan log format {version!r} is not supported (format 3.x is read)")
    comp = COMP.get(head[16])
    if comp is None:
        raise DarshanError(f"{path}: damaged header (compression type {head[16]} unknown)")
    out = []
    for at, slots in LAYOUTS:
        end = at + 16 + 16 * slots + 4 * slots
        if len(head) < end:
            continue
        names = struct.unpack_from("<QQ", head, at)
        if names[0] < end:
            continue
        regions = [(i, *struct.unpack_from("<QQ", head, at + 16 + 16 * i)) for i in range(slots)]
        regions = [r for r in regions if r[2]]
        if all(end <= off < 1 << 62 and ln < 1 << 62 for _i, off, ln in regions):
            out.append((end, names, regions))
    if not out:
        raise DarshanError(f"{path}: damaged header (its regions do not fit a Darshan {version} header)")
    return version, comp, out


def check(path: str) -> tuple[str, list, list]:
    """The log's version, its module regions that are whole ([(slot, offset, length)]), and
    the damage of the others ([(kind, detail)]); DarshanError when the header or the job
    record is damaged (nothing can be read) or the file is not a Darshan 3 log."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(LAYOUTS[1][0] + 16 + 20 * max(HEADER_SLOTS))
    except OSError as e:
        raise DarshanError(f"{path}: {e.strerror or e}") from None
    version, comp, layouts = check_header(path, head, size)
    with open(path, "rb") as f:
        def region(off: int, ln: int) -> bytes | None:
            if off + ln > size:
                return None
            f.seek(off)
            return f.read(ln)

        # the header's layout: the one whose job record (from the header's end to the names) inflates
        why, chosen = "is cut off (the file ends first)", None
        for layout in layouts:
            job_off, (name_off, _len), _regions = layout
            job = region(job_off, name_off - job_off)
            why = "is cut off (the file ends first)" if job is None else _inflate(comp, job)
            if not why:
                chosen = layout
                break
        if chosen is None:
            raise DarshanError(f"{path}: damaged Darshan log: its job record {why}")
        _job_off, (name_off, name_len), regions = chosen
        damage, whole = [], []
        data = region(name_off, name_len)
        why = "is cut off (the file ends first)" if data is None else _inflate(comp, data)
        if why:
            damage.append(("darshan-names", f"the file names' region {why}: files are shown by their record ids"))
            whole.append(("names", None, None))
        for slot, off, ln in regions:
            data = region(off, ln)
            why = f"is cut off at byte {size} (it ends at {off + ln})" if data is None else _inflate(comp, data)
            if why:
                damage.append(("darshan-module", (slot, off, ln, why)))
            else:
                whole.append((slot, off, ln))
    return version, whole, damage


# --------------------------------------------------------------------------- reading


def read(path: str, dxt: bool = True) -> Log:
    """The log as arrays (Log). DarshanError when it cannot be read at all; a damaged module
    or name region is left out and said in Log.damage."""
    version, whole, damage = check(path)
    ffi, lib = _library()
    h = lib.darshan_log_open(path.encode())
    if h == ffi.NULL:
        raise DarshanError(f"{path}: the Darshan library cannot open it (format {version})")
    try:
        job_c = ffi.new("struct darshan_job *")
        if lib.darshan_log_get_job(h, job_c) < 0:
            raise DarshanError(f"{path}: the Darshan library cannot read its job record")
        j = job_c[0]
        meta = {}
        for kv in ffi.string(j.metadata).decode("utf-8", "replace").splitlines():
            k, _, v = kv.partition("=")
            if k:
                meta[k] = v
        job = dict(uid=int(j.uid), start_ns=int(j.start_time_sec) * 10**9 + int(j.start_time_nsec),
                   end_ns=int(j.end_time_sec) * 10**9 + int(j.end_time_nsec), nprocs=int(j.nprocs),
                   jobid=int(j.jobid), metadata=meta)
        if job["end_ns"] < job["start_ns"]:
            job["end_ns"] = job["start_ns"]
        exe = ffi.new("char[]", 4096)
        lib.darshan_log_get_exe(h, exe)
        exe_s = ffi.string(exe).decode("utf-8", "replace")
        mnts, cnt = ffi.new("struct darshan_mnt_info **"), ffi.new("int *")
        lib.darshan_log_get_mounts(h, mnts, cnt)
        mounts = [(ffi.string(mnts[0][i].mnt_path).decode("utf-8", "replace"),
                   ffi.string(mnts[0][i].mnt_type).decode("utf-8", "replace")) for i in range(cnt[0])]
        if cnt[0]:
            lib.darshan_free(mnts[0])
        mods_c, cnt = ffi.new("struct darshan_mod_info **"), ffi.new("int *")
        lib.darshan_log_get_modules(h, mods_c, cnt)
        mods = {}
        for i in range(cnt[0]):
            m = mods_c[0][i]
            mods[ffi.string(m.name).decode()] = dict(bytes=int(m.len), version=int(m.ver), index=int(m.idx),
                                                     partial=bool(m.partial_flag))
        if cnt[0]:
            lib.darshan_free(mods_c[0])
        # the library renumbers the modules of older formats: a region is told by its length
        lengths = {ln for s, _o, ln in whole if s != "names"}
        bad_lengths = {d[1][2]: d[1][3] for d in damage if d[0] == "darshan-module"}
        out_damage = [d for d in damage if d[0] != "darshan-module"]
        for name, m in list(mods.items()):
            if m["bytes"] in bad_lengths and m["bytes"] not in lengths:
                out_damage.append(("darshan-module", f"{name} records: their region {bad_lengths[m['bytes']]}; "
                                   "left out"))
                m["damaged"] = True
        log = Log(path, version, job, exe_s, mounts, mods, {}, damage=out_damage,
                  partial=any(m["partial"] for m in mods.values()))
        if not any(k == "darshan-names" for k, _d in damage):
            log.names = _names(ffi, lib, h)
        for name, m in mods.items():
            if m.get("damaged"):
                continue
            if name in STRUCTS:
                log.records[name] = _records(ffi, lib, h, name, m["index"], log)
            elif name in DXT and dxt:
                log.dxt[name] = _segments(ffi, lib, h, name, m["index"], log)
            else:
                continue
            got = log.records.get(name, log.dxt.get(name))
            if not len(got) and log.damage and log.damage[-1][1].startswith(f"{name} "):
                # nothing read: a module version this library does not know (a newer Darshan's)
                log.damage[-1] = ("darshan-module", f"{name} records of module version {m['version']}: the "
                                  f"Darshan library ({library_version()}) cannot read them (written by a newer "
                                  "Darshan? a newer pydarshan may read them); left out")
        return log
    finally:
        lib.darshan_log_close(h)


def _names(ffi, lib, h) -> dict:
    recs, cnt = ffi.new("struct darshan_name_record **"), ffi.new("int *")
    lib.darshan_log_get_name_records(h, recs, cnt)
    out = {}
    for i in range(cnt[0]):
        r = recs[0][i]
        out[int(r.id)] = ffi.string(r.name).decode("utf-8", "surrogateescape")
        lib.darshan_free(r.name)
    if cnt[0]:
        lib.darshan_free(recs[0])
    return out


def counter_names(module: str) -> tuple[list, list]:
    """The integer and float counter names of a module, as the library has them."""
    ffi, lib = _library()
    probe = ffi.new(f"{STRUCTS[module]} *")  # (the arrays' lengths are the struct's)
    ni, nf = len(probe.counters), len(probe.fcounters)
    base = _NAMES[module]
    ints = getattr(lib, f"{base}_counter_names")
    flts = getattr(lib, f"{base}_f_counter_names")
    return ([ffi.string(ints[i]).decode() for i in range(ni)], [ffi.string(flts[i]).decode() for i in range(nf)])


def _records(ffi, lib, h, name: str, index: int, log: Log) -> Records:
    """A module's records, copied as they come into one buffer and read as columns."""
    st = STRUCTS[name]
    size = ffi.sizeof(st)
    chunks: list = []
    buf = ffi.new("void **")  # (NULL: the library allocates it, then reads into it each time)
    while True:
        r = lib.darshan_log_get_record(h, index, buf)
        if r < 1:
            if r < 0:
                log.damage.append(("darshan-module", f"{name} records: the library stopped reading them "
                                   f"after {len(chunks)}; the rest are left out"))
            break
        chunks.append(ffi.buffer(buf[0], size)[:])  # (the library fills the same buffer again)
    if buf[0] != ffi.NULL:
        lib.darshan_free(buf[0])
    probe = ffi.new(f"{st} *")
    ni, nf = len(probe.counters), len(probe.fcounters)
    off_c = ffi.offsetof(st, "counters")
    off_f = ffi.offsetof(st, "fcounters")
    raw = np.frombuffer(b"".join(chunks), np.uint8).reshape(len(chunks), size) if chunks \
        else np.zeros((0, size), np.uint8)

    def cols(off: int, n: int, dt) -> np.ndarray:
        return np.ascontiguousarray(raw[:, off:off + 8 * n]).view(dt).reshape(len(chunks), n)

    base = cols(0, 2, np.int64)
    ints, flts = counter_names(name)
    ci, cf = cols(off_c, ni, np.int64), cols(off_f, nf, np.float64)
    out = Records(base[:, 0].astype(np.uint64), base[:, 1].copy(),
                  {k: ci[:, i].copy() for i, k in enumerate(ints)}, {k: cf[:, i].copy() for i, k in enumerate(flts)})
    if name in ("H5D", "PNETCDF_VAR"):
        out.file_ids = cols(ffi.offsetof(st, "file_rec_id"), 1, np.uint64)[:, 0].copy()
    return out


def _segments(ffi, lib, h, name: str, index: int, log: Log) -> Segments:
    """A DXT module's segments: each record is a header (file id, rank, host, counts) and its
    write segments then its read segments (offset, length, start, end: 32 bytes each)."""
    head = ffi.sizeof("struct dxt_file_record")
    seg = ffi.sizeof("segment_info")
    o_host = ffi.offsetof("struct dxt_file_record", "hostname")
    o_w = ffi.offsetof("struct dxt_file_record", "write_count")
    parts, hdrs, hosts = [], [], {}
    buf = ffi.new("void **")
    while True:
        r = lib.darshan_log_get_record(h, index, buf)
        if r < 1:
            if r < 0:
                log.damage.append(("darshan-module", f"{name} segments: the library stopped reading them after "
                                   f"{len(hdrs)} records; the rest are left out"))
            break
        hd = ffi.buffer(buf[0], head)[:]
        rid, rank = struct.unpack_from("<Qq", hd, 0)
        nw, nr = struct.unpack_from("<qq", hd, o_w)
        if rank not in hosts:
            hosts[rank] = hd[o_host:o_host + 64].split(b"\0")[0].decode("utf-8", "replace")
        n = max(nw, 0) + max(nr, 0)
        parts.append(ffi.buffer(buf[0] + head, n * seg)[:] if n else b"")
        hdrs.append((rid, rank, nw, nr))
        lib.darshan_free(buf[0])
        buf[0] = ffi.NULL  # (a buffer given is filled: a record's size varies)
    if not hdrs:
        z = np.zeros(0, np.int64)
        return Segments(z.astype(np.uint64), z, z.astype(bool), z, z, z.astype(float), z.astype(float), hosts)
    a = np.frombuffer(b"".join(parts), np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"),
                                                  ("end", "<f8")]))
    counts = np.array([w + r for _i, _r, w, r in hdrs], np.int64)
    ids = np.repeat(np.array([x[0] for x in hdrs], np.uint64), counts)
    ranks = np.repeat(np.array([x[1] for x in hdrs], np.int64), counts)
    write = np.concatenate([np.r_[np.ones(w, bool), np.zeros(r, bool)] for _i, _r, w, r in hdrs])
    return Segments(ids, ranks, write, a["offset"].copy(), a["length"].copy(), a["start"].copy(),
                    a["end"].copy(), hosts)


def file_hash(record_id: int) -> str:
    """A Darshan record id as iotrace's file hash: 16 hex digits (both are 64-bit hashes of the path)."""
    return f"{int(record_id):016x}"


def job_end(log: Log) -> int:
    """The job's end, ns: its record's, or later when a record's last call ended later (older
    runtimes keep whole seconds: a job of less than a second ran 0 s)."""
    last = 0.0
    for R in log.records.values():
        for k, v in R.fcounters.items():
            if k.endswith("_END_TIMESTAMP") and len(v):
                last = max(last, float(np.nan_to_num(v).max()))
    for s in log.dxt.values():
        if len(s):
            last = max(last, float(s.end.max()))
    return max(log.job["end_ns"], log.job["start_ns"] + int(last * 1e9))
