"""What each file of a job is: the job's data, the software it loads, the system's files, or a
pipe or socket. A Python job's start-up stats and opens thousands of files of its interpreter
and packages (13,265 lstat and 7,914 stat before DLIO read its 32 files); counted with the
data they bury it, and every rule about metadata or small reads would fire on every Python job.

The classes, in the order they are tried (docs/insights.md):
  pipe-socket  pipe:[N], socket:[N], anon_inode:… (what /proc/self/fd names them)
  system       /proc, /sys, /dev (but /dev/shm), /etc, /run, and system library folders
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

CLASSES = ("data", "software", "system", "pipe-socket", "log", "unknown")

_PIPE = re.compile(r"^(pipe|socket|anon_inode):")
_SYSTEM_DIRS = ("/proc/", "/sys/", "/etc/", "/run/", "/var/run/", "/usr/lib/", "/usr/lib64/",
                "/usr/lib32/", "/lib/", "/lib64/", "/lib32/", "/usr/share/", "/usr/libexec/",
                "/usr/local/lib/", "/var/lib/", "/var/cache/")
_SOFTWARE_PARTS = ("/site-packages/", "/dist-packages/", "/__pycache__/", "/.dist-info/",
                   "/.egg-info/")
_SOFTWARE_EXT = re.compile(r"\.(py|pyc|pyo|pyi|pyd|pth|so|so\.[0-9.]+)$")
# the folders themselves (stat'ed on every import) and the standard library's zip
_SOFTWARE_END = re.compile(r"/(site-packages|dist-packages|__pycache__|python[0-9]+\.zip|pyvenv\.cfg)$")
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
    return bool(path) and _PIPE.match(path) is not None


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
    if path.startswith(_SYSTEM_DIRS):
        return "system"
    return "data"
