"""One-pass byte scanner for the tracer's own X event lines (compiled with numba).

Our writer (csrc/encoder.cc) emits `{"ph":"X","name":N,"cat":C,"pid":P,"tid":T,"ts":TS,
"dur":D,"args":{...}}` with I/O args in the fixed order of IO_KEYS. The scanner walks each
line once, checks that layout and records where each field is and what each number is.
Any line that does not fit (metadata, instants, escapes, DFTracer, damage) is flagged for
the general parser: the scanner never guesses.
"""

from __future__ import annotations

import numpy as np
from numba import njit

IO_KEYS = ("fhash", "fhash2", "fd", "fd2", "size", "offset", "ret", "bytes", "errno", "flags", "mode")
N_STR = 2  # fhash, fhash2 are strings; the others integers

# line status
FAST, GENERAL, SKIP = 0, 1, 2

_PREFIX = np.frombuffer(b'{"ph":"X","name":"', dtype=np.uint8).copy()
_KEYS = [np.frombuffer(k.encode(), dtype=np.uint8).copy() for k in IO_KEYS]
_KEYBUF = np.zeros((len(IO_KEYS), 8), np.uint8)
_KEYLEN = np.zeros(len(IO_KEYS), np.int64)
for _i, _k in enumerate(_KEYS):
    _KEYBUF[_i, : len(_k)] = _k
    _KEYLEN[_i] = len(_k)


@njit(cache=True, nogil=True)
def _expect(buf, p, end, lit):
    """p + len(lit) if buf[p:] starts with lit, else -1."""
    n = lit.shape[0]
    if p + n > end:
        return -1
    for k in range(n):
        if buf[p + k] != lit[k]:
            return -1
    return p + n


@njit(cache=True, nogil=True)
def _string_end(buf, p, end):
    """Index of the closing quote of a string whose content starts at p; -1 on escape/end."""
    while p < end:
        c = buf[p]
        if c == 34:
            return p
        if c == 92:
            return -1
        p += 1
    return -1


@njit(cache=True, nogil=True)
def _int(buf, p, end, out, i):
    """Parse an integer at p into out[i]; return the index after it or -1."""
    neg = False
    if p < end and buf[p] == 45:
        neg = True
        p += 1
    v = 0
    q = p
    while q < end and 48 <= buf[q] <= 57 and q - p < 19:
        v = v * 10 + (buf[q] - 48)
        q += 1
    if q == p:
        return -1
    out[i] = -v if neg else v
    return q


@njit(cache=True, nogil=True)
def _usec(buf, p, end, out, i):
    """Parse a decimal number of µs (any number of decimals) into ns in out[i]."""
    neg = False
    if p < end and buf[p] == 45:
        neg = True
        p += 1
    v = 0
    q = p
    while q < end and 48 <= buf[q] <= 57 and q - p < 15:
        v = v * 10 + (buf[q] - 48)
        q += 1
    if q == p:
        return -1
    v *= 1000
    if q < end and buf[q] == 46:
        q += 1
        scale = 100
        while q < end and 48 <= buf[q] <= 57:
            v += (buf[q] - 48) * scale
            scale //= 10
            q += 1
    if q < end and (buf[q] == 101 or buf[q] == 69):  # exponent: leave it to the general path
        return -1
    out[i] = -v if neg else v
    return q


@njit(cache=True, nogil=True)
def _skip_value(buf, p, end):
    """Index after the JSON value starting at p (string, number, literal, object, array)."""
    if p >= end:
        return -1
    c = buf[p]
    if c == 34:
        p += 1
        while p < end:
            if buf[p] == 92:
                p += 2
                continue
            if buf[p] == 34:
                return p + 1
            p += 1
        return -1
    if c == 123 or c == 91:
        depth = 0
        while p < end:
            c = buf[p]
            if c == 34:
                p = _skip_value(buf, p, end)
                if p < 0:
                    return -1
                continue
            if c == 123 or c == 91:
                depth += 1
            elif c == 125 or c == 93:
                depth -= 1
                if depth == 0:
                    return p + 1
            p += 1
        return -1
    while p < end and buf[p] != 44 and buf[p] != 125 and buf[p] != 93:
        p += 1
    return p


@njit(cache=True, nogil=True)
def _key_id(buf, a, b, keybuf, keylen):
    n = b - a
    for k in range(keylen.shape[0]):
        if keylen[k] != n:
            continue
        same = True
        for j in range(n):
            if buf[a + j] != keybuf[k, j]:
                same = False
                break
        if same:
            return k
    return -1


@njit(cache=True, nogil=True)
def _scan(buf, n_bytes, status, lstart, lend, spos, slen, ivals, present, args_pos, prefix,
          keybuf, keylen):
    """Fill the per-line arrays; returns the number of lines.

    spos/slen columns: 0 name, 1 cat, 2 fhash, 3 fhash2. ivals columns: 0 pid, 1 tid,
    2 ts_ns, 3 dur_ns, then 2 + k for IO_KEYS[k] (k >= N_STR). present: bit k for IO key k.
    args_pos: [start, end) of the args object's content when it holds keys we do not type.
    """
    n = 0
    p = 0
    lit_cat = np.array([34, 44, 34, 99, 97, 116, 34, 58, 34], np.uint8)  # ","cat":"
    lit_pid = np.array([34, 44, 34, 112, 105, 100, 34, 58], np.uint8)  # ","pid":
    lit_tid = np.array([44, 34, 116, 105, 100, 34, 58], np.uint8)  # ,"tid":
    lit_ts = np.array([44, 34, 116, 115, 34, 58], np.uint8)  # ,"ts":
    lit_dur = np.array([44, 34, 100, 117, 114, 34, 58], np.uint8)  # ,"dur":
    lit_args = np.array([44, 34, 97, 114, 103, 115, 34, 58, 123], np.uint8)  # ,"args":{
    while p < n_bytes:
        # line bounds, without whitespace, the trailing ',' or ']' and a leading '['
        e = p
        while e < n_bytes and buf[e] != 10:
            e += 1
        nxt = e + 1
        s = p
        while s < e and (buf[s] == 32 or buf[s] == 9):
            s += 1
        if s < e and buf[s] == 91:
            s += 1
        while e > s and (buf[e - 1] == 13 or buf[e - 1] == 32 or buf[e - 1] == 9):
            e -= 1
        if e > s and (buf[e - 1] == 44 or buf[e - 1] == 93):
            e -= 1
        while e > s and (buf[e - 1] == 32 or buf[e - 1] == 9):
            e -= 1
        p = nxt
        i = n
        n += 1
        lstart[i] = s
        lend[i] = e
        present[i] = 0
        args_pos[i, 0] = -1
        if e <= s:
            status[i] = SKIP
            continue
        status[i] = GENERAL
        q = _expect(buf, s, e, prefix)
        if q < 0:
            continue
        a = q
        q = _string_end(buf, q, e)
        if q < 0:
            continue
        spos[i, 0] = a
        slen[i, 0] = q - a
        q = _expect(buf, q, e, lit_cat)
        if q < 0:
            continue
        a = q
        q = _string_end(buf, q, e)
        if q < 0:
            continue
        spos[i, 1] = a
        slen[i, 1] = q - a
        q = _expect(buf, q, e, lit_pid)
        if q < 0:
            continue
        q = _int(buf, q, e, ivals[:, 0], i)
        if q < 0:
            continue
        q = _expect(buf, q, e, lit_tid)
        if q < 0:
            continue
        q = _int(buf, q, e, ivals[:, 1], i)
        if q < 0:
            continue
        q = _expect(buf, q, e, lit_ts)
        if q < 0:
            continue
        q = _usec(buf, q, e, ivals[:, 2], i)
        if q < 0:
            continue
        q = _expect(buf, q, e, lit_dur)
        if q < 0:
            continue
        q = _usec(buf, q, e, ivals[:, 3], i)
        if q < 0:
            continue
        q = _expect(buf, q, e, lit_args)
        if q < 0:
            continue
        args_start = q
        extra = False
        ok = True
        mask = 0
        if q < e and buf[q] == 125:
            q += 1
        else:
            while True:
                if q >= e or buf[q] != 34:
                    ok = False
                    break
                ka = q + 1
                kb = _string_end(buf, ka, e)
                if kb < 0 or kb + 1 >= e or buf[kb + 1] != 58:
                    ok = False
                    break
                q = kb + 2
                k = _key_id(buf, ka, kb, keybuf, keylen)
                if k < 0:
                    extra = True
                    q = _skip_value(buf, q, e)
                    if q < 0:
                        ok = False
                        break
                elif k < 2:  # fhash, fhash2: a string
                    if q >= e or buf[q] != 34:
                        ok = False
                        break
                    a = q + 1
                    q = _string_end(buf, a, e)
                    if q < 0:
                        ok = False
                        break
                    spos[i, 2 + k] = a
                    slen[i, 2 + k] = q - a
                    q += 1
                    mask |= 1 << k
                else:
                    q = _int(buf, q, e, ivals[:, 2 + k], i)
                    if q < 0:
                        ok = False
                        break
                    mask |= 1 << k
                if q < e and buf[q] == 44:
                    q += 1
                    continue
                if q < e and buf[q] == 125:
                    q += 1
                    break
                ok = False
                break
        if not ok or q + 1 != e or buf[q] != 125:
            continue
        present[i] = mask
        if extra:
            args_pos[i, 0] = args_start - 1  # the braces included: a JSON object
            args_pos[i, 1] = q
        status[i] = FAST
    return n


def scan(buf: np.ndarray):
    """Scan a uint8 buffer of whole lines. Returns a dict of per-line arrays."""
    n_lines = int(np.count_nonzero(buf == 10)) + 1
    status = np.empty(n_lines, np.uint8)
    lstart = np.empty(n_lines, np.int64)
    lend = np.empty(n_lines, np.int64)
    spos = np.empty((n_lines, 4), np.int64)
    slen = np.empty((n_lines, 4), np.int64)
    ivals = np.empty((n_lines, 2 + len(IO_KEYS)), np.int64)
    present = np.empty(n_lines, np.int32)
    args_pos = np.empty((n_lines, 2), np.int64)
    n = _scan(buf, len(buf), status, lstart, lend, spos, slen, ivals, present, args_pos,
              _PREFIX, _KEYBUF, _KEYLEN)
    return dict(status=status[:n], lstart=lstart[:n], lend=lend[:n], spos=spos[:n],
                slen=slen[:n], ivals=ivals[:n], present=present[:n], args_pos=args_pos[:n])
