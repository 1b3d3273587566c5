"""One-pass byte scanner for the tracer's own X event lines (compiled with numba).

Our writer (csrc/format/encoder.cc) emits `{"ph":"X","name":N,"cat":C,"pid":P,"tid":T,"ts":TS,
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
        if c == 92 or c == 10:
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
        f = 0
        k = 0
        while q < end and 48 <= buf[q] <= 57:
            if k < 3:  # digits past the ns are dropped (no division in the loop)
                f = f * 10 + (buf[q] - 48)
                k += 1
            q += 1
        if k == 1:
            f *= 100
        elif k == 2:
            f *= 10
        v += f
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
            if buf[p] == 10:
                return -1
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
            if c == 10:
                return -1
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
def _intern(buf, a, n, slots, pool):
    """Id of the string buf[a:a+n] in the block's string pool (added if new), or -1 when the
    hash table is over half full (the caller retries with a bigger one).

    pool columns: 0 start, 1 length, 2 hash; pool[0, 3] holds the number of strings."""
    h = 1469598103
    for j in range(n):
        h = (h * 31 + buf[a + j]) & 0xFFFFFFFFFFFF
    mask = slots.shape[0] - 1
    k = (h ^ (h >> 17)) & mask
    hs = h
    while True:
        sid = slots[k]
        if sid < 0:
            count = pool[0, 3]
            if 2 * (count + 1) > slots.shape[0] or count >= pool.shape[0]:
                return -1
            slots[k] = count
            pool[count, 0] = a
            pool[count, 1] = n
            pool[count, 2] = hs
            pool[0, 3] = count + 1
            return count
        if pool[sid, 2] == hs and pool[sid, 1] == n:
            b = pool[sid, 0]
            same = True
            for j in range(n):
                if buf[b + j] != buf[a + j]:
                    same = False
                    break
            if same:
                return sid
        k = (k + 1) & mask


@njit(cache=True, nogil=True)
def _intern_recent(buf, a, n, col, recent, slots, pool):
    """_intern, trying first the two strings last seen in this column (most lines repeat
    them: the same file, alternating call names), which costs a compare, not a hash."""
    for r in range(2):
        sid = recent[col, r]
        if sid >= 0 and pool[sid, 1] == n:
            b = pool[sid, 0]
            same = True
            for j in range(n):
                if buf[b + j] != buf[a + j]:
                    same = False
                    break
            if same:
                if r == 1:
                    recent[col, 1] = recent[col, 0]
                    recent[col, 0] = sid
                return sid
    sid = _intern(buf, a, n, slots, pool)
    if sid >= 0:
        recent[col, 1] = recent[col, 0]
        recent[col, 0] = sid
    return sid


@njit(cache=True, nogil=True)
def _line(buf, s, n_bytes, codes, ivals, present, args_pos, j, prefix, keybuf, keylen,
          slots, pool, lits, recent):
    """Parse one line starting at s as a fast X event into row j. Returns the index after
    the event's closing brace, -1 if the line does not fit, -2 if the string pool is full."""
    e = n_bytes
    q = _expect(buf, s, e, prefix)
    if q < 0:
        return -1
    for f in range(2):  # name, cat
        a = q
        q = _string_end(buf, q, e)
        if q < 0:
            return -1
        c = _intern_recent(buf, a, q - a, f, recent, slots, pool)
        if c < 0:
            return -2
        codes[f, j] = c
        if f == 0:
            q = _expect(buf, q, e, lits[0])  # ","cat":"
            if q < 0:
                return -1
    q = _expect(buf, q, e, lits[1])  # ","pid":
    if q < 0:
        return -1
    q = _int(buf, q, e, ivals[0], j)
    if q < 0:
        return -1
    q = _expect(buf, q, e, lits[2])  # ,"tid":
    if q < 0:
        return -1
    q = _int(buf, q, e, ivals[1], j)
    if q < 0:
        return -1
    q = _expect(buf, q, e, lits[3])  # ,"ts":
    if q < 0:
        return -1
    q = _usec(buf, q, e, ivals[2], j)
    if q < 0:
        return -1
    q = _expect(buf, q, e, lits[4])  # ,"dur":
    if q < 0:
        return -1
    q = _usec(buf, q, e, ivals[3], j)
    if q < 0:
        return -1
    q = _expect(buf, q, e, lits[5])  # ,"args":{
    if q < 0:
        return -1
    args_start = q - 1
    extra = False
    mask = 0
    if q < e and buf[q] == 125:
        q += 1
    else:
        while True:
            if q >= e or buf[q] != 34:
                return -1
            ka = q + 1
            kb = _string_end(buf, ka, e)
            if kb < 0 or kb + 1 >= e or buf[kb + 1] != 58:
                return -1
            q = kb + 2
            k = _key_id(buf, ka, kb, keybuf, keylen)
            if k < 0:
                extra = True
                q = _skip_value(buf, q, e)
                if q < 0:
                    return -1
            elif k < N_STR:  # fhash, fhash2: a string
                if q >= e or buf[q] != 34:
                    return -1
                a = q + 1
                q = _string_end(buf, a, e)
                if q < 0:
                    return -1
                c = _intern_recent(buf, a, q - a, 2 + k, recent, slots, pool)
                if c < 0:
                    return -2
                codes[2 + k, j] = c
                q += 1
                mask |= 1 << k
            else:
                q = _int(buf, q, e, ivals[2 + k], j)
                if q < 0:
                    return -1
                mask |= 1 << k
            if q < e and buf[q] == 44:
                q += 1
                continue
            if q < e and buf[q] == 125:
                q += 1
                break
            return -1
    if q >= e or buf[q] != 125:
        return -1
    present[j] = mask
    if extra:
        args_pos[0, j] = args_start  # the braces included: a JSON object
        args_pos[1, j] = q
    else:
        args_pos[0, j] = -1
    return q + 1


@njit(cache=True, nogil=True)
def _scan(buf, n_bytes, codes, ivals, present, args_pos, gen, counts, prefix, keybuf, keylen,
          slots, pool, lits):
    """Parse every line of buf. Fast lines fill row j of codes/ivals/present/args_pos
    (column-major); the others are recorded as [start, end) in gen for the general parser.
    counts <- (fast rows, general rows). Returns 0, or -1 if the string pool filled up.

    codes rows (ids in the string pool): 0 name, 1 cat, 2 fhash, 3 fhash2. ivals rows:
    0 pid, 1 tid, 2 ts_ns, 3 dur_ns, then 2 + k for IO_KEYS[k] (k >= N_STR). present: bit k
    for IO key k. args_pos: [start, end) of the args object when it holds untyped keys."""
    j = 0
    g = 0
    p = 0
    recent = np.full((4, 2), -1, np.int64)
    while p < n_bytes:
        s = p
        while s < n_bytes and (buf[s] == 32 or buf[s] == 9):
            s += 1
        if s < n_bytes and buf[s] == 91 and s + 1 < n_bytes and buf[s + 1] == 123:
            s += 1  # "[{" : the first event on the "[" line
        q = _line(buf, s, n_bytes, codes, ivals, present, args_pos, j, prefix, keybuf, keylen,
                  slots, pool, lits, recent)
        if q == -2:
            return -1
        if q > 0:
            # the event must end its line: `,` or `]`, optional spaces, newline
            if q < n_bytes and (buf[q] == 44 or buf[q] == 93):
                q += 1
            while q < n_bytes and (buf[q] == 32 or buf[q] == 13 or buf[q] == 9):
                q += 1
            if q >= n_bytes or buf[q] == 10:
                j += 1
                p = q + 1
                continue
        # not a fast line: find its bounds, strip it, hand it to the general parser
        e = s
        while e < n_bytes and buf[e] != 10:
            e += 1
        p = e + 1
        while e > s and (buf[e - 1] == 13 or buf[e - 1] == 32 or buf[e - 1] == 9):
            e -= 1
        if e > s and (buf[e - 1] == 44 or buf[e - 1] == 93):
            e -= 1
        while e > s and (buf[e - 1] == 32 or buf[e - 1] == 9):
            e -= 1
        if e - s == 1 and buf[s] == 91:
            continue  # the "[" line
        if e > s:
            gen[0, g] = s
            gen[1, g] = e
            g += 1
    counts[0] = j
    counts[1] = g
    return 0


_LITS = [np.frombuffer(x.encode(), np.uint8).copy() for x in
         ('","cat":"', '","pid":', ',"tid":', ',"ts":', ',"dur":', ',"args":{')]


def scan(buf: np.ndarray):
    """Scan a uint8 buffer of whole lines. Returns a dict: the fast rows' arrays (trimmed),
    the general lines' bounds, and the pool of distinct strings (start, length in buf) the
    codes refer to."""
    cap = int(np.count_nonzero(buf == 10)) + 1
    codes = np.empty((4, cap), np.int32)
    ivals = np.empty((2 + len(IO_KEYS), cap), np.int64)
    present = np.empty(cap, np.int32)
    args_pos = np.empty((2, cap), np.int64)
    gen = np.empty((2, cap), np.int64)
    counts = np.zeros(2, np.int64)
    lits = tuple(_LITS)
    size = 1 << 12
    while True:
        slots = np.full(size, -1, np.int64)
        pool = np.zeros((size // 2 + 1, 4), np.int64)
        if _scan(buf, len(buf), codes, ivals, present, args_pos, gen, counts, _PREFIX,
                 _KEYBUF, _KEYLEN, slots, pool, lits) == 0:
            break
        size *= 8
    j, g = int(counts[0]), int(counts[1])
    n_pool = int(pool[0, 3])
    return dict(n=j, codes=codes[:, :j], ivals=ivals[:, :j], present=present[:j],
                args_pos=args_pos[:, :j], gen=gen[:, :g],
                pool_start=pool[:n_pool, 0], pool_len=pool[:n_pool, 1])
