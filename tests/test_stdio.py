"""stdio from a C program (tests/c/stdio_calls.c): one event per stdio call, with the stream's
file, size asked for, position before the call, ret (items for fread/fwrite, 1/0 for
pointers) and `bytes` moved; no POSIX events for what stdio does inside glibc."""
from __future__ import annotations

import os

from tracing import fnv1a_hex, parse_report, run_plain

ENOENT, EBADF = 2, 9
SEEK_SET, SEEK_END = 0, 2
S = "s.txt"  # 51 bytes: "line one\n" + 30 x "b" + "\nline three\n"

STDIO_CALLS = [
    ("fopen", S, dict(fd=3, ret=1)),
    ("fputs", S, dict(fd=3, size=9, offset=0, ret=1, bytes=9)),
    ("fwrite", S, dict(fd=3, size=30, offset=9, ret=3, bytes=30)),
    ("fputs", S, dict(fd=3, size=12, offset=39, ret=1, bytes=12)),
    ("ftell", S, dict(fd=3, ret=51)),
    ("fflush", S, dict(fd=3, ret=0)),
    ("fclose", S, dict(fd=3, ret=0)),
    ("fopen", S, dict(fd=3, ret=1)),
    ("fgets", S, dict(fd=3, size=100, offset=0, ret=1, bytes=9)),
    ("fread", S, dict(fd=3, size=30, offset=9, ret=30, bytes=30)),
    ("getline", S, dict(fd=3, offset=39, ret=1)),
    ("getline", S, dict(fd=3, offset=40, ret=11)),
    ("fseek", S, dict(fd=3, offset=4, ret=0, flags=SEEK_SET)),
    ("fread", S, dict(fd=3, size=8, offset=4, ret=2, bytes=8)),
    ("ftell", S, dict(fd=3, ret=12)),
    ("rewind", S, dict(fd=3, offset=0)),
    ("fgets", S, dict(fd=3, size=5, offset=0, ret=1, bytes=4)),
    ("fseek", S, dict(fd=3, offset=0, ret=0, flags=SEEK_END)),
    ("fgets", S, dict(fd=3, size=5, offset=51, ret=0, bytes=0)),      # EOF: no errno
    ("fread", S, dict(fd=3, size=10, offset=51, ret=0, bytes=0)),     # EOF: no errno
    ("fputs", S, dict(fd=3, size=1, offset=51, ret=-1, bytes=0, errno=EBADF)),
    ("fwrite", S, dict(fd=3, size=5, offset=51, ret=0, bytes=0, errno=EBADF)),
    ("fclose", S, dict(fd=3, ret=0)),
    ("fopen", "missing", dict(ret=0, errno=ENOENT)),
    ("fopen", S, dict(fd=3, ret=1)),
    ("fputs", S, dict(fd=3, size=5, ret=1, bytes=5)),                 # "a": position unknown
    ("fclose", S, dict(fd=3, ret=0)),
    ("open", S, dict(ret=3, flags=0)),
    ("fdopen", S, dict(fd=3, ret=1)),
    ("getdelim", S, dict(fd=3, offset=0, ret=5)),
    ("fclose", S, dict(fd=3, ret=0)),
]


def test_stdio_calls_exact(tmp_path, cprog, trace, data_dir):
    # -fno-builtin: gcc would turn fputs("x") into fputc
    exe = cprog("stdio_calls.c", name="stdio_calls", flags=("-fno-builtin",))
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = run_plain([exe, plain_dir])
    assert plain.returncode == 0
    ts = trace([exe, data_dir], include=[data_dir], flush_ms=60000)
    assert ts.stdout == plain.stdout  # same ret/errno traced and untraced
    events = ts.events(pid=ts.pid)
    got = [(e["name"], os.path.relpath(e["fname"], data_dir),
            {k: v for k, v in e["args"].items() if k != "fhash"}) for e in events]
    assert got == STDIO_CALLS
    for e in events:
        assert e["cat"] == ("posix" if e["name"] == "open" else "stdio")
        assert e["args"]["fhash"] == fnv1a_hex(e["fname"])
    # what the program saw is what the events say (pointers as 1/0)
    report = [r for r in parse_report(ts.stdout)]
    assert [(n, r, e) for n, r, e in report] == [
        (n, a["ret"], a.get("errno", 777)) for n, _, a in STDIO_CALLS if n != "rewind"]
    assert (data_dir / S).read_text() == "line one\n" + "b" * 30 + "\nline three\ntail\n"
    # stdio's own reads/writes/lseeks/closes happen inside glibc: no POSIX events for them
    assert ts.count(["read", "write", "lseek", "close", "fstat"]) == 0


def test_stdio_bytes_total(cprog, trace, data_dir):
    """Bytes moved by data calls (format: `bytes` if present, else ret > 0) add up to the file."""
    exe = cprog("stdio_calls.c", name="stdio_calls", flags=("-fno-builtin",))
    ts = trace([exe, data_dir], include=[data_dir])
    data = {"fread", "fwrite", "fgets", "fputs", "getline", "getdelim"}
    moved = {}
    for e in ts.events(name=data):
        a = e["args"]
        n = a["bytes"] if "bytes" in a else max(a["ret"], 0)
        moved[e["name"]] = moved.get(e["name"], 0) + n
    assert moved == {"fputs": 9 + 12 + 0 + 5, "fwrite": 30 + 0, "fgets": 9 + 4 + 0,
                     "fread": 30 + 8 + 0, "getline": 12, "getdelim": 5}


def test_python_does_not_use_stdio(trace, data_dir):
    """CPython's io goes straight to POSIX: a text read is open64/read/close, no stdio event."""
    f = data_dir / "t.txt"
    f.write_text("a\nb\nc\n")
    import sys
    ts = trace([sys.executable, "-I", "-c", f"print(len(open({str(f)!r}).readlines()))"],
               include=[data_dir])
    assert ts.stdout == "3\n"
    assert ts.count(cat="stdio") == 0
    assert ts.count("read", fname=f) == 2
    assert ts.count("open64", fname=f) == 1 and ts.count("close", fname=f) == 1


F = "f.txt"  # 34 bytes: "n=42 abc\n" "00007|" "xy\n" "12 3.5 word\n" "zzzz"
CHAR_CALLS = [  # (name, file, args) of the events on f.txt
    ("fopen", F, dict(fd=3, ret=1)),
    ("fprintf", F, dict(fd=3, offset=0, ret=9, bytes=9)),
    ("vfprintf", F, dict(fd=3, offset=9, ret=6, bytes=6)),
    ("fputc", F, dict(fd=3, offset=15, ret=ord("x"), bytes=1)),
    ("putc", F, dict(fd=3, offset=16, ret=ord("y"), bytes=1)),
    ("fputc_unlocked", F, dict(fd=3, offset=17, ret=ord("\n"), bytes=1)),
    ("fputs_unlocked", F, dict(fd=3, size=12, offset=18, ret=1, bytes=12)),
    ("fwrite_unlocked", F, dict(fd=3, size=4, offset=30, ret=2, bytes=4)),
    ("fclose", F, dict(fd=3, ret=0)),
    ("fopen", F, dict(fd=3, ret=1)),
    ("fgetc", F, dict(fd=3, offset=0, ret=ord("n"), bytes=1)),
    ("getc", F, dict(fd=3, offset=1, ret=ord("="), bytes=1)),
    ("ungetc", F, dict(fd=3, offset=1, ret=ord("="))),
    ("getc_unlocked", F, dict(fd=3, offset=1, ret=ord("="), bytes=1)),
    ("__isoc99_fscanf", F, dict(fd=3, offset=2, ret=1, bytes=2)),  # glibc's C99 scanf names
    ("__isoc99_vfscanf", F, dict(fd=3, offset=4, ret=1, bytes=4)),
    ("fgets_unlocked", F, dict(fd=3, size=64, offset=8, ret=1, bytes=1)),
    ("fread_unlocked", F, dict(fd=3, size=6, offset=9, ret=6, bytes=6)),
    ("fgetc_unlocked", F, dict(fd=3, offset=15, ret=ord("x"), bytes=1)),
    ("__isoc99_fscanf", F, dict(fd=3, offset=16, ret=3, bytes=13)),
    ("fgetc", F, dict(fd=3, offset=29, ret=ord("\n"), bytes=1)),
    ("fread", F, dict(fd=3, size=64, offset=30, ret=4, bytes=4)),
    ("fgetc", F, dict(fd=3, offset=34, ret=-1, bytes=0)),
    ("fclose", F, dict(fd=3, ret=0)),
]


def test_formatted_and_character_stdio_exact(cprog, trace, data_dir):
    """fprintf, fputc, putc, fgetc, getc, ungetc, fscanf and their kin: one event each, with
    the bytes moved and the stream position before them; the file's bytes add up."""
    exe = cprog("stdio_chars.c", name="stdio_chars", flags=("-fno-builtin",))
    (data_dir / "plain").mkdir()
    plain = run_plain([exe, data_dir / "plain"], input="77\n")
    ts = trace([exe, data_dir], input="77\n", flush_ms=60000)
    assert plain.returncode == 0 and ts.stdout == plain.stdout
    assert (data_dir / F).read_bytes() == b"n=42 abc\n00007|xy\n12 3.5 word\nzzzz"
    got = [(e["name"], os.path.relpath(e["fname"], data_dir),
            {k: v for k, v in e["args"].items() if k != "fhash"})
           for e in ts.events(fname=data_dir / F)]
    assert got == CHAR_CALLS
    written = sum(a["bytes"] for n, _, a in CHAR_CALLS[:9] if "bytes" in a)
    read = sum(a["bytes"] for n, _, a in CHAR_CALLS[9:] if "bytes" in a)
    assert written == 34 and read == 34 + 1  # "=" is read again after ungetc
    # stdout and stdin: the same calls on the process's own streams
    out = [(e["name"], e["args"].get("fd"), e["args"].get("bytes"), e["args"].get("ret"))
           for e in ts.events(name=["printf", "puts", "putchar", "dprintf", "__isoc99_scanf",
                                    "getchar"])]
    assert out == [("printf", 1, 6, 6), ("puts", 1, 5, 5), ("putchar", 1, 1, ord("!")),
                   ("dprintf", 1, 5, 5), ("__isoc99_scanf", 0, 2, 1), ("getchar", 0, 1, ord("\n")),
                   ("getchar", 0, 0, -1)]
    assert all(e["cat"] == "stdio" for e in ts.events(name=[n for n, _, _ in CHAR_CALLS]))
