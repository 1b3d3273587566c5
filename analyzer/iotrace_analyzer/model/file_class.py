"""What each file of a job is: the job's data, the software it loads, the system's files, or a
pipe or socket. A Python job's start-up stats and opens thousands of files of its interpreter
and packages (13,265 lstat and 7,914 stat before DLIO read its 32 files); counted with the
data they bury it, and every rule about metadata or small reads would fire on every Python job.

The classes, in the order they are tried (docs/insights.md):
  pipe-socket  pipe:[N], socket:[N], anon_inode:… (what /proc/self/fd names them)
  system       /proc, /sys, /dev (but /dev/shm), /etc, /run, system library folders, and the
               MPI runtime's session folders (ompi.*, prte.*, PMIx's stores)
  software     the traced interpreters' prefixes (from their executables), site-packages and
               dist-packages, __pycache__, files of code (.py, .pyc, .so, .pth, …), and the
               folders a Python process's imports stat (import_dirs: its working and script
               folders, the folders above its prefix), those folders only, not their files
  log          a file written through fd 1 or 2 (stdout or stderr redirected to it), and
               *.log, *.out, *.err files
  data         everything else: datasets, outputs, checkpoints, scratch
  unknown      a hash the trace never named
"""

from __future__ import annotations

import os
import re

import numpy as np

CLASSES = ("data", "software", "system", "pipe-socket", "log", "unknown")

IPC_PREFIXES = ("pipe:", "socket:", "anon_inode:")  # as /proc/self/fd names them
_PIPE = re.compile(r"^(pipe|socket|anon_inode):")
_SYSTEM_DIRS = ("/proc/", "/sys/", "/etc/", "/run/", "/var/run/", "/usr/lib/", "/usr/lib64/",
                "/usr/lib32/", "/lib/", "/lib64/", "/lib32/", "/usr/share/", "/usr/libexec/",
                "/usr/local/lib/", "/var/lib/", "/var/cache/")
# the MPI runtime's session folders (Open MPI 4's ompi.HOST.UID, 5's prte.HOST.UID, PMIx's
# shared-memory stores): every rank opens them at MPI_Init, none of it the job's data
_SYSTEM_PARTS = ("/ompi.", "/prte.", "/pmix_dstor", "/pmix.")
_SOFTWARE_PARTS = ("/site-packages/", "/dist-packages/", "/__pycache__/", "/.dist-info/",
                   "/.egg-info/")
_SOFTWARE_EXT = re.compile(r"\.(py|pyc|pyo|pyi|pyd|pth|so|so\.[0-9.]+)$")
# the folders themselves (stat'ed on every import) and the standard library's zip
_SOFTWARE_END = re.compile(r"/(site-packages|dist-packages|__pycache__|python[0-9]+\.zip|pyvenv\.cfg)$")
# the tails (from the first '.') of the names with a '.' that _SOFTWARE_END matches
_SOFTWARE_END_TAILS = (".zip", ".cfg")
_LOG = re.compile(r"\.(log|out|err)$")
_INTERPRETER = re.compile(r"^(python|pypy|ipython|jupyter)[0-9.]*[a-z]*$")


def software_prefixes(executables) -> tuple[str, ...]:
    """The installation prefixes of the traced interpreters (/opt/conda for
    /opt/conda/bin/python3.11): their standard library and packages are software."""
    out = set()
    for exe in executables:
        if not exe or not isinstance(exe, str):
            continue
        head, name = os.path.split(exe)
        if _INTERPRETER.match(name) and os.path.basename(head) == "bin":
            prefix = os.path.dirname(head)
            if prefix not in ("", "/", "/usr", "/usr/local"):  # too broad: their lib/ only
                out.add(prefix.rstrip("/") + "/")
            else:
                out.add(prefix.rstrip("/") + "/lib/python")
    return tuple(sorted(out))


def import_dirs(processes) -> frozenset:
    """Folders a Python process's imports stat by themselves (not what is in them): its working
    folder and its script's folder (sys.path[0]), and the folders above its prefix (the path
    resolution of sys.prefix lstats each). `processes`: records with exe, cmdline, cwd."""
    out = set()
    for p in processes:
        exe = p.get("exe")
        if not isinstance(exe, str) or not _INTERPRETER.match(os.path.basename(exe)):
            continue
        for prefix in software_prefixes([exe]):
            d = os.path.dirname(prefix.rstrip("/"))
            while d not in ("", "/"):
                out.add(d)
                d = os.path.dirname(d)
        cwd = p.get("cwd")
        if isinstance(cwd, str) and cwd.startswith("/"):
            out.add(cwd.rstrip("/") or "/")
            args = p.get("cmdline") or []
            script = next((a for a in args[1:] if isinstance(a, str) and not a.startswith("-")), None)
            if script and not any(a in ("-c", "-m") for a in args[1:args.index(script)]):
                out.add(os.path.dirname(os.path.normpath(os.path.join(cwd, script))))
    return frozenset(out)


def is_ipc(path: str | None) -> bool:
    """A pipe, socket or anonymous inode: another process's end, not a file."""
    return bool(path) and path.startswith(IPC_PREFIXES)


def classify(path: str | None, prefixes: tuple[str, ...] = (), dirs: frozenset = frozenset(),
             stdio: bool = False) -> str:
    """The class of one file name (see the module's docstring); `dirs`: import_dirs();
    `stdio`: the file was written through fd 1 or 2."""
    if not path or path.startswith("<unknown"):
        return "unknown"
    if path in dirs:
        return "software"
    if _PIPE.match(path):
        return "pipe-socket"
    if path.startswith("/dev/") and not path.startswith("/dev/shm/"):
        return "system"
    if stdio or _LOG.search(path):
        return "log"
    if any(path.startswith(p) or path == p.rstrip("/") for p in prefixes) \
            or any(s in path for s in _SOFTWARE_PARTS) or _SOFTWARE_EXT.search(path) \
            or _SOFTWARE_END.search(path):
        return "software"
    if path.startswith(_SYSTEM_DIRS) or any(p in path[:path.rfind("/") + 1] for p in _SYSTEM_PARTS):
        return "system"
    return "data"


def classify_many(paths, prefixes: tuple[str, ...] = (), dirs: frozenset = frozenset(),
                  stdio=None, unknown=None) -> np.ndarray:
    """classify() of many paths at once, as indices into CLASSES: each test is made once per
    distinct folder or name tail, not per path. `paths`: a pyarrow string array (no nulls);
    `stdio`, `unknown`: per path, written through fd 1 or 2, and a hash without a name.

    A path is its folder (before the last '/') and its name. Every test of classify() but
    three is about a prefix or a part that ends with '/', or starts at the path's start without
    one: it is the folder's. The name's tests are suffixes that start with '.' (of the tail from
    the name's first '.') or the whole name (_SOFTWARE_END, a tail without '.'). The paths
    that this cut cannot decide go through classify() one by one: no '/', a final newline
    (where `$` also matches), a name with a tail of _SOFTWARE_END_TAILS, a folder where a
    prefix without a final '/' ends (its name decides)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .. import _kernels

    paths = paths.combine_chunks() if isinstance(paths, pa.ChunkedArray) else paths
    n = len(paths)
    code = {c: np.int8(i) for i, c in enumerate(CLASSES)}
    out = np.zeros(n, np.int8)
    if not n:
        return out
    if paths.null_count:
        raise ValueError("classify_many: null paths")
    big = pa.types.is_large_string(paths.type)
    offsets = np.frombuffer(paths.buffers()[1], np.int64 if big else np.int32)[paths.offset:paths.offset + n + 1]
    dir_code, dir_vals, tail_code, tail_vals, flags = _kernels.path_parts(
        offsets.astype(np.int64), np.frombuffer(paths.buffers()[2], np.uint8))
    # per folder d, the tests of the path that are tests of d + "/"; the last row: no folder
    open_prefixes = [p for p in prefixes if not p.endswith("/")]
    UNKNOWN, PIPE, DEV, SOFTWARE, SYSTEM, SLOW = range(6)
    by_dir = np.zeros((len(dir_vals) + 1, 6), bool)
    for i, d in enumerate(dir_vals):
        head = d + "/"
        by_dir[i] = (d.startswith("<unknown"), _PIPE.match(d) is not None,
                     head.startswith("/dev/") and not head.startswith("/dev/shm/"),
                     any(head.startswith(p) for p in prefixes) or any(s in head for s in _SOFTWARE_PARTS),
                     head.startswith(_SYSTEM_DIRS) or any(p in head for p in _SYSTEM_PARTS),
                     any(head == p[:p.rindex("/") + 1] for p in open_prefixes))  # the name decides
    # per name tail t: *.log, code, the folders of _SOFTWARE_END, and the tails it leaves undecided
    LOG, CODE, UNDECIDED = range(3)
    by_tail = np.zeros((len(tail_vals), 3), bool)
    for i, t in enumerate(tail_vals):
        by_tail[i] = (_LOG.search(t) is not None,
                      _SOFTWARE_EXT.search(t) is not None
                      or ("." not in t and _SOFTWARE_END.search("/" + t) is not None),
                      t in _SOFTWARE_END_TAILS)
    d, t = by_dir[dir_code], by_tail[tail_code]  # code -1: the last row of by_dir
    # the whole path: a folder the imports stat (`dirs`), or a prefix's own folder
    whole = sorted(dirs)
    exact = pc.fill_null(pc.index_in(paths, value_set=pa.array(
        whole + sorted({p.rstrip("/") for p in prefixes}), pa.string())), -1).to_numpy()
    log = t[:, LOG] if stdio is None else t[:, LOG] | np.asarray(stdio, bool)
    # the first test that holds decides: the classes are set from the last test to the first
    out[d[:, SYSTEM]] = code["system"]
    out[d[:, SOFTWARE] | t[:, CODE] | (exact >= len(whole))] = code["software"]
    out[log] = code["log"]
    out[d[:, DEV]] = code["system"]
    out[d[:, PIPE]] = code["pipe-socket"]
    out[(exact >= 0) & (exact < len(whole))] = code["software"]
    out[d[:, UNKNOWN]] = code["unknown"]
    slow = (flags != 0) | d[:, SLOW] | t[:, UNDECIDED]
    if unknown is not None:
        unknown = np.asarray(unknown, bool)
        out[unknown] = code["unknown"]
        slow &= ~unknown
    for i in np.flatnonzero(slow):
        out[i] = code[classify(paths[int(i)].as_py(), prefixes, dirs,
                               stdio=bool(stdio[i]) if stdio is not None else False)]
    return out
