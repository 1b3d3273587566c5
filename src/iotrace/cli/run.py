"""`iotrace run`: run a program with the tracer preloaded (exec: same pid, status and signals)."""
from __future__ import annotations

import argparse
import os
import shutil
import sys


def preload_path() -> str:
    """The LD_PRELOAD library installed beside the package."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "libiotrace.so")


def _elf_interpreter(path: str) -> bytes | None:
    """PT_INTERP of an ELF executable (b"" when it has none: statically linked), None when the
    file is not ELF."""
    import struct

    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or len(head) < 52:
            return None
        is64, little = head[4] == 2, head[5] == 1
        e = "<" if little else ">"
        if is64:
            phoff, = struct.unpack_from(e + "Q", head, 32)
            phentsize, phnum = struct.unpack_from(e + "HH", head, 54)
        else:
            phoff, = struct.unpack_from(e + "I", head, 28)
            phentsize, phnum = struct.unpack_from(e + "HH", head, 42)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    for i in range(phnum):
        entry = table[i * phentsize:(i + 1) * phentsize]
        if len(entry) < 4 or struct.unpack_from(e + "I", entry, 0)[0] != 3:  # PT_INTERP
            continue
        off, size = (struct.unpack_from(e + "Q", entry, 8)[0], struct.unpack_from(e + "Q", entry, 32)[0]) \
            if is64 else (struct.unpack_from(e + "I", entry, 4)[0], struct.unpack_from(e + "I", entry, 16)[0])
        with open(path, "rb") as f:
            f.seek(off)
            return f.read(size).rstrip(b"\0") or b"?"
    return b""


def untraceable(exe: str, path_var: str | None, depth: int = 0) -> str | None:
    """Why LD_PRELOAD cannot trace `exe`, or None when it can (as far as the file tells):
    a statically linked executable has no dynamic loader to preload with; a setuid, setgid or
    file-capability program runs in the loader's secure mode, which drops LD_PRELOAD. A script
    is judged by its interpreter."""
    import stat as st

    try:
        info = os.stat(exe)
        interp = _elf_interpreter(exe)
        if interp is None:
            with open(exe, "rb") as f:
                first = f.readline(512)
    except OSError:
        return None  # exec will say what is wrong
    if info.st_mode & st.S_ISUID and info.st_uid != os.getuid():
        return f"{exe} is setuid: the dynamic loader ignores LD_PRELOAD for it"
    if info.st_mode & st.S_ISGID and info.st_gid != os.getgid() and info.st_gid not in os.getgroups():
        return f"{exe} is setgid: the dynamic loader ignores LD_PRELOAD for it"
    if os.getuid() != 0:
        try:
            os.getxattr(exe, "security.capability")
            return f"{exe} has file capabilities: the dynamic loader ignores LD_PRELOAD for it"
        except OSError:
            pass
    if interp == b"":
        return f"{exe} is statically linked: LD_PRELOAD cannot reach its calls"
    if interp is None and first.startswith(b"#!") and depth < 2:
        words = first[2:].split()
        if not words:
            return None
        prog = os.fsdecode(words[0])
        if os.path.basename(prog) == "env" and len(words) > 1 and not words[1].startswith(b"-"):
            prog = shutil.which(os.fsdecode(words[1]), path=path_var) or prog
        why = untraceable(prog, path_var, depth + 1)
        return f"{exe} runs under {prog}, and {why}" if why else None
    return None


def _restore_signals() -> None:
    """The dispositions the program would have had without us. The interpreter ignores
    SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec: `yes | head -1`
    would then end with "Broken pipe" and status 1 instead of dying of SIGPIPE. They go back
    to the default, as CPython's subprocess does for its children; SIGINT gets the default when
    Python installed its handler (an inherited SIG_IGN, as `nohup` and `cmd &` give, stays)."""
    import signal

    for name in ("SIGPIPE", "SIGXFSZ", "SIGXFZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)


def _check_format(args: argparse.Namespace) -> str | None:
    """Why the form and compression asked for (options first, then the IOTRACE_* variables the
    program inherits) cannot go together, or None. The tracer would write the compact form in
    zstd whatever the compression said (docs/configuration.md)."""
    fmt, fmt_from = (args.format, "--format") if args.format else \
        (os.environ.get("IOTRACE_FORMAT"), "IOTRACE_FORMAT=")
    comp, comp_from = (args.compression, "--compression") if args.compression else \
        (os.environ.get("IOTRACE_COMPRESSION"), "IOTRACE_COMPRESSION=")
    if fmt == "compact" and comp in ("gzip", "gz", "none"):
        said = [w + ("" if w.endswith("=") else " ") + v for w, v in ((fmt_from, fmt), (comp_from, comp))]
        return (f"{said[0]} with {said[1]}: the compact form is always zstd; use --format json "
                f"for {comp}, or leave the compression out")
    return None


def _check_trace_folder(folder: str) -> str | None:
    """Why the tracer could not write trace files into `folder`, or None. Made here if missing
    (as the tracer would, 0755 under the umask), then a probe file is made and removed: the
    access bits alone do not know about read-only mounts."""
    import tempfile

    try:
        os.makedirs(folder, mode=0o755, exist_ok=True)
    except FileExistsError:
        return "it exists and is not a folder"
    except OSError as e:
        return f"it cannot be made ({e.strerror})"
    if not os.path.isdir(folder):
        return "it is not a folder"
    try:
        fd, probe = tempfile.mkstemp(prefix=".iotrace-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return f"no file can be made in it ({e.strerror})"
    return None


def run(args: argparse.Namespace) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        args.parser.error("no command given: put it after the options, iotrace run [options] -- CMD ARGS...")
    why = _check_format(args)
    if why:
        args.parser.error(why)
    # Before the program starts: a folder the tracer cannot write to would leave it untraced.
    why = _check_trace_folder(args.output)
    if why:
        print(f"iotrace run: error: cannot write traces to {args.output}: {why}; "
              "give a writable folder with -o DIR", file=sys.stderr)
        return 1
    env = os.environ.copy()
    lib = preload_path()
    # Ours first, so its wrappers are the ones every library resolves.
    env["LD_PRELOAD"] = ":".join([lib] + [p for p in env.get("LD_PRELOAD", "").split(":") if p and p != lib])
    env["IOTRACE_DIR"] = os.path.abspath(args.output)
    env["IOTRACE_ENABLE"] = "1"
    if args.no_auto:
        env["IOTRACE_AUTO"] = "0"
    if args.include:
        env["IOTRACE_INCLUDE"] = ":".join(os.path.abspath(p) for p in args.include)
    if args.exclude:
        env["IOTRACE_EXCLUDE"] = ":".join(os.path.abspath(p) for p in args.exclude)
    if args.compression:
        env["IOTRACE_COMPRESSION"] = args.compression
    if args.resolution:
        env["IOTRACE_RESOLUTION"] = args.resolution
    if args.format:
        env["IOTRACE_FORMAT"] = args.format
    if args.flush_interval_ms:
        env["IOTRACE_FLUSH_INTERVAL_MS"] = str(args.flush_interval_ms)
    if args.sample_ms:
        env["IOTRACE_SAMPLE_MS"] = str(args.sample_ms)
    if args.verbose:
        print(f"iotrace: tracing {cmd[0]} into {env['IOTRACE_DIR']}", file=sys.stderr)
    exe = shutil.which(cmd[0], path=env.get("PATH")) or cmd[0]
    why = untraceable(exe, env.get("PATH"))
    if why:
        print(f"iotrace run: {why}; it runs untraced (docs/limits.md)", file=sys.stderr)
    _restore_signals()
    try:
        # exec: the program gets our pid, its exit status and signals reach the caller as they are
        os.execve(exe, cmd, env)
    except OSError as e:
        print(f"iotrace run: cannot run {cmd[0]}: {e.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached


def add_parser(sub) -> argparse.ArgumentParser:
    r = sub.add_parser("run", help="run a command under the tracer",
                       usage="iotrace run [-o DIR] [--include PATH]... [--exclude PATH]... "
                             "[--compression zstd|gzip|none] [--resolution ns|10ns|100ns|us] [--format json|compact] "
                             "[--flush-interval-ms MS] [--sample-ms MS] [--no-auto] [-v] -- CMD [ARGS...]")
    r.add_argument("-o", "--output", default="iotrace-traces", help="trace folder (default: ./iotrace-traces)")
    r.add_argument("--include", action="append", default=[], metavar="PATH",
                   help="trace only paths under PATH (repeatable; default: everything)")
    r.add_argument("--exclude", action="append", default=[], metavar="PATH",
                   help="do not trace paths under PATH (repeatable)")
    r.add_argument("--compression", choices=["zstd", "gzip", "none"], help="trace compression (default zstd)")
    r.add_argument("--resolution", choices=["ns", "10ns", "100ns", "us"],
                   help="time resolution of ts and dur (default ns); coarser is smaller on disk")
    r.add_argument("--format", choices=["json", "compact"],
                   help="compact (default with zstd): columns, 3-10x smaller, read by "
                        "iotrace-analyze/export and turned into JSON by `iotrace cat`; json (default "
                        "with gzip/none): JSON lines that decompress into what Perfetto opens")
    r.add_argument("--flush-interval-ms", type=int, metavar="MS",
                   help="while a writer thread runs (a process recording much), it writes at least this "
                        "often (default 1000); nothing waits on it: records are in the live file at once")
    r.add_argument("--sample-ms", type=int, metavar="MS", help="sample process counters (CPU, RSS, I/O) this often")
    r.add_argument("--no-auto", action="store_true",
                   help="no automatic Python events (DataLoader batches, samples, checkpoints, "
                        "numpy/h5py/PIL/pyarrow/pandas file calls): IOTRACE_AUTO=0, docs/auto.md")
    r.add_argument("-v", "--verbose", action="store_true", help="say where the traces go")
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="the command")
    r.set_defaults(func=run, parser=r)
    pp = sub.add_parser("preload-path", help="print the path of the LD_PRELOAD library")
    pp.set_defaults(func=lambda args: print(preload_path()) or 0)
    return r
