"""_kernels.figures against a plain Python reference, on random blocks: interval unions per
process and per @trace category (rows overlapping, nested, touching, out of start order) and
access patterns per stream (threads sharing a stream, calls completing out of start order).
The kernel follows rows in order and falls back to sorting when they are not; both paths
must give the reference's figures exactly."""

import numpy as np
import pytest
from iotrace_analyzer import _kernels

CATS = ["posix", "compute", "fetch", "process"]  # kinds: io, compute, other, process
CAT_KIND = np.array([1, 2, 0, 4], np.uint8)
NAMES = ["read", "write", "open", "step", "fsync", "fork", "read"]
# read, write, open, -, sync, a process call; 16: a call the tracer records. The last "read" is
# a program's own event named like a call but not one (its category is I/O: not the tracer's)
NAME_KIND = np.array([17, 18, 20, 0, 24, 16, 1], np.uint8)


def block(rng, rows, procs, files, in_order):
    """Random rows: I/O calls on a few files, compute and other spans, a few instants."""
    ts = np.cumsum(rng.integers(0, 40, rows)) if in_order else rng.integers(0, 40 * rows, rows)
    ts = ts.astype(np.int64)
    dur = rng.integers(0, 60, rows).astype(np.int64)
    cat = rng.choice(4, rows, p=[0.6, 0.15, 0.15, 0.1]).astype(np.int32)
    name = np.where(cat == 0, rng.choice([0, 1, 2, 4, 6], rows, p=[0.3, 0.25, 0.2, 0.15, 0.1]),
                    np.where(cat == 3, rng.choice([5, 3], rows), 3)).astype(np.int32)
    ph = np.where(rng.random(rows) < 0.05, 1, 0).astype(np.int32)  # X or i
    size = rng.choice([100, 4096, 1 << 20], rows).astype(np.int64)
    offset = rng.choice([0, 4096, 8192, 1 << 20], rows).astype(np.int64)
    ret = np.where(rng.random(rows) < 0.1, -1, size).astype(np.int64)
    fh = np.where(cat == 0, rng.integers(0, files, rows), -1).astype(np.int32)
    proc = np.sort(rng.integers(0, procs, rows)) if rng.random() < 0.5 else rng.integers(0, procs, rows)
    valid = {k: rng.random(rows) < p for k, p in (("size", 0.8), ("offset", 0.9), ("bytes", 0.0))}
    valid["errno"] = ret < 0
    return dict(ph=ph, ph_x=np.array([1, 0], np.uint8), cat=cat, cat_kind=CAT_KIND, name=name,
                name_kind=NAME_KIND, ts=ts, dur=dur, ret=ret, bytes=np.zeros(rows, np.int64),
                size=size, offset=offset, errno=np.where(ret < 0, 22, 0), valid=valid, fh=fh,
                fh_kind=(rng.random(files) < 0.3).astype(np.uint8),  # pipes
                fd=rng.integers(0, 5, rows).astype(np.int64), tid=rng.integers(1, 3, rows).astype(np.int64),
                proc=proc.astype(np.int64),
                n_procs=procs, shifts=np.zeros(procs, np.int64), tl_exp=10)


def figures(rng, b):
    """The kernel on block `b`, its columns passed as Arrow holds them: values, validity
    bitmap (bits from a random offset, garbage values under nulls) or none."""
    args = {k: v for k, v in b.items() if k != "valid"}
    for k in ("ts", "dur", "ret", "bytes", "size", "offset", "errno", "fd", "tid"):
        values = b[k].astype(np.int64)
        if k not in b["valid"]:
            args[k] = (values, np.zeros(0, np.uint8), 0)
            continue
        valid = b["valid"][k]
        off = int(rng.integers(0, 8))
        bits = np.concatenate([rng.random(off) < 0.5, valid])
        garbage = np.where(valid, values, rng.integers(-9, 9, len(values)))
        args[k] = (garbage, np.packbits(bits, bitorder="little"), off)
    return _kernels.figures(**args)


def union(intervals):
    runs = []
    for s, e in sorted(intervals):
        if runs and s <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], e)
        else:
            runs.append([s, e])
    return [tuple(r) for r in runs]


def runs_of(r, group):
    a, b = r["bounds"][group], r["bounds"][group + 1]
    return list(zip(r["starts"][a:b].tolist(), r["ends"][a:b].tolist()))


@pytest.mark.parametrize("seed", range(40))
def test_figures_match_reference(seed):
    rng = np.random.default_rng(seed)
    b = block(rng, int(rng.integers(1, 400)), int(rng.integers(1, 4)), int(rng.integers(1, 4)),
              in_order=seed % 2 == 0)
    f = figures(rng, b)
    x = b["ph"] == 0
    kind = CAT_KIND[b["cat"]]
    call = NAME_KIND[b["name"]] & 16 > 0
    own = (kind & 5 > 0) & call  # the tracer's own events: I/O and process calls
    io, comp = x & (kind & 1 > 0) & call, x & (kind & 2 > 0)
    end = b["ts"] + np.where(x, np.maximum(b["dur"], 0), 0)
    for p in range(b["n_procs"]):
        mine = b["proc"] == p
        # calls on pipes wait for another process: their own union, not I/O
        ipc = io & (b["fh"] >= 0) & (b["fh_kind"][np.maximum(b["fh"], 0)] > 0)
        store = io & ~ipc
        for k, rows in (("io", store), ("comp", comp), ("both", store | comp), ("all", x), ("ipc", ipc)):
            want = union(zip(b["ts"][mine & rows].tolist(), end[mine & rows].tolist()))
            assert runs_of(f["unions"][k], p) == want, (k, p)
    # @trace categories: X events not the tracer's own, per (process, cat)
    other = x & ~own
    cats = f["cats"]
    for j, (p, c) in enumerate(zip(cats["proc"], cats["cat"])):
        rows = other & (b["proc"] == p) & (b["cat"] == c)
        assert cats["count"][j] == rows.sum()
        assert runs_of(cats["runs"], j) == union(zip(b["ts"][rows].tolist(), end[rows].tolist()))
    assert sum(cats["count"]) == other.sum()
    # access per direction: each stream's calls by start time (stable), compared in turn
    moved = np.where(b["valid"]["bytes"], b["bytes"], np.maximum(b["ret"], 0))
    streams = list(zip(f["stream_fh"].tolist(), f["stream_proc"].tolist()))
    per_file_access: dict = {}  # (fh, proc) -> read seq, read random, write seq, write random
    for direction, flag in (("read", 1), ("write", 2)):
        rows = np.flatnonzero(io & (NAME_KIND[b["name"]] & flag > 0) & b["valid"]["offset"])
        by_stream: dict = {}
        for i in sorted(rows, key=lambda i: b["ts"][i]):
            by_stream.setdefault((int(b["fh"][i]), int(b["proc"][i])), []).append(i)
        want = dict(consecutive=0, sequential=0, random=0)
        heads = {}
        for key, rs in by_stream.items():
            heads[key] = (int(b["offset"][rs[0]]), int(b["offset"][rs[-1]] + moved[rs[-1]]))
            for prev, i in zip(rs, rs[1:]):
                pe = b["offset"][prev] + moved[prev]
                want["consecutive"] += int(b["offset"][i] == pe)
                kind = "sequential" if b["offset"][i] >= pe else "random"
                want[kind] += 1
                if key[0] >= 0:  # per file too
                    per_file_access.setdefault(key, [0, 0, 0, 0])[
                        (direction == "write") * 2 + (kind == "random")] += 1
        got = f[direction]
        assert {k: int(got[k]) for k in want} == want, direction
        assert {streams[s]: (int(o), int(t)) for s, o, t in
                zip(got["head_stream"], got["head_off"], got["tail_end"])} == heads, direction
    assert f["x_events"] == x.sum()
    # the files written through fd 1 or 2 (stdout or stderr redirected: logs)
    wrote = io & (NAME_KIND[b["name"]] & 2 > 0) & (b["fh"] >= 0) & np.isin(b["fd"], [1, 2])
    assert sorted(f["stdio_fh"].tolist()) == sorted(set(b["fh"][wrote].tolist()))
    # per call name: count, bytes moved, errors (rows with errno); (name, size) counts
    data = io & (NAME_KIND[b["name"]] & 3 > 0)
    for nc in range(len(NAMES)):
        rows = io & (b["name"] == nc)
        got = (int(f["calls"]["count"][nc]), int(f["calls"]["bytes"][nc]), int(f["calls"]["errors"][nc]))
        assert got == (rows.sum(), moved[rows & data].sum(), (rows & b["valid"]["errno"]).sum()), nc
    sized = io & b["valid"]["size"]
    want_sizes: dict = {}
    for nc, sz in zip(b["name"][sized].tolist(), b["size"][sized].tolist()):
        want_sizes[(nc, sz)] = want_sizes.get((nc, sz), 0) + 1
    s = f["sizes"]
    assert dict(zip(zip(s["name"].tolist(), s["size"].tolist()), s["count"].tolist())) == want_sizes
    # per (file, process): calls, time, bytes read and written, metadata calls and time, reads,
    # writes and their time, opens, the furthest byte read, sequential and random calls
    fl = f["files"]
    keys = ("count", "dur", "read", "written", "meta_count", "meta_dur", "reads", "writes", "read_dur",
            "write_dur", "opens", "read_extent", "read_seq", "read_rand", "write_seq", "write_rand")
    got_files = {(int(a), int(p)): tuple(int(fl[k][j]) for k in keys)
                 for j, (a, p) in enumerate(zip(fl["fhash"], fl["proc"]))}
    want_files: dict = {}
    d = np.where(x, np.maximum(b["dur"], 0), 0)
    for i in np.flatnonzero(io & (b["fh"] >= 0)):
        k = NAME_KIND[b["name"][i]]
        key = (int(b["fh"][i]), int(b["proc"][i]))
        w = want_files.setdefault(key, [0] * 12 + per_file_access.get(key, [0, 0, 0, 0]))
        w[0] += 1
        w[1] += int(d[i])
        w[2] += int(moved[i]) if k & 1 else 0
        w[3] += int(moved[i]) if k & 2 else 0
        w[4] += int(k & 11 == 0)  # neither data nor sync
        w[5] += int(d[i]) if k & 11 == 0 else 0
        w[6] += int(k & 1 > 0)
        w[7] += int(k & 2 > 0)
        w[8] += int(d[i]) if k & 1 else 0
        w[9] += int(d[i]) if k & 2 else 0
        w[10] += int(k & 4 > 0)
        if k & 1 and b["valid"]["offset"][i]:
            w[11] = max(w[11], int(b["offset"][i] + moved[i]))
    assert got_files == {k: tuple(v) for k, v in want_files.items()}
    # per file, the calls per (direction, size bin): the size asked for, else the bytes moved
    edges = [0, 100, 1 << 10, 10 << 10, 100 << 10, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30]
    want_bins: dict = {}
    for i in np.flatnonzero(io & (b["fh"] >= 0) & (NAME_KIND[b["name"]] & 3 > 0)):
        sz = b["size"][i] if b["valid"]["size"][i] else moved[i]
        bin_ = max(int(np.searchsorted(edges, sz, side="right")) - 1, 0)
        key = (int(b["fh"][i]), int(b["proc"][i]), (NAME_KIND[b["name"][i]] & 2 > 0) * 10 + bin_)
        want_bins[key] = want_bins.get(key, 0) + 1
    fs = f["file_sizes"]
    got_bins = {(int(fl["fhash"][s_]), int(fl["proc"][s_]), int(bn)): int(c)
                for s_, bn, c in zip(fs["slot"], fs["bin"], fs["count"])}
    assert got_bins == want_bins


def test_the_kinds_bits_and_bins_come_from_the_kernel():
    """summary.py builds cat_kind, name_kind and fh_kind from the kernel's own bits, and its size
    labels from the kernel's edges; this file's hand-written kinds agree with them."""
    from iotrace_analyzer.analyses import summary

    k = _kernels
    assert list(CAT_KIND) == [k.CAT_IO, k.CAT_COMPUTE, 0, k.CAT_PROCESS]
    call = k.CALL_KNOWN
    assert list(NAME_KIND) == [call | k.CALL_READ, call | k.CALL_WRITE, call | k.CALL_OPEN, 0,
                               call | k.CALL_SYNC, call, k.CALL_READ]
    assert k.FILE_IPC == 1
    assert summary.SIZE_EDGES == list(k.SIZE_EDGES)
    assert summary.SIZE_LABELS == ["0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M",
                                   "10M-100M", "100M-1G", "1G+"]
    assert len(summary.SIZE_LABELS) == len(k.SIZE_EDGES)


@pytest.mark.parametrize("order", ["named", "reversed", "shuffled"])
def test_names_lookups_in_any_order(order):
    """_kernels.Names' lookups of many hashes (paths, codes, missing) give what a dict gives,
    whether the hashes come in the order their names came (a block's usual order, where the
    entry after the last one found is tried first), reversed or shuffled; with hashes that
    have no name, repeated ones, a name given again (it replaces the first) and nulls."""
    import pyarrow as pa
    from iotrace_analyzer import keys

    rng = np.random.default_rng(7)
    values = rng.integers(0, 2**63, 3000, dtype=np.uint64)
    paths = [f"/data/{order}/{i:05d}.jpg" for i in range(3000)]
    names, want = _kernels.Names(), {}
    data = "".join(paths).encode()
    off = np.cumsum([0] + [len(p) for p in paths]).astype(np.int64)
    names.put_numbers(values, off, np.frombuffer(data, np.uint8), [])
    want.update(zip(values.tolist(), paths))
    names.set(f"{int(values[10]):016x}", "/data/renamed")  # a later name of a hash replaces the first
    want[int(values[10])] = "/data/renamed"
    unnamed = rng.integers(0, 2**63, 300, dtype=np.uint64)
    asked = np.concatenate([values[:1000], unnamed[:100], values[1000:], values[5:50], unnamed[100:]])
    if order == "reversed":
        asked = asked[::-1].copy()
    elif order == "shuffled":
        asked = rng.permutation(asked)
    off_p, data_p, found = names.paths(asked)
    got = keys.strings(off_p, data_p, found).to_pylist()
    assert got == [want.get(int(v)) for v in asked.tolist()]
    hexes = [f"{int(v):016x}" for v in asked.tolist()] + [None, "not-hex"]
    arr = pa.array(hexes, pa.string())
    code, off_c, data_c = names.codes(*keys.buffers(arr))
    by_code = keys.strings(off_c, data_c).to_pylist()
    assert [by_code[c] if c >= 0 else None for c in code.tolist()] == \
        [want.get(int(h, 16)) if h and h != "not-hex" else None for h in hexes]
    assert sorted(names.missing(*keys.buffers(arr))) == sorted(
        {f"{int(v):016x}" for v in unnamed.tolist()} | {"not-hex"})


def test_names_apart_that_disagree_are_refused(tmp_path):
    """The buffers of names kept apart (hashes, offsets, paths) that do not agree are a
    ValueError for the analyzer's names and the export's writers alike (fh_line.h's one
    reader of them); buffers that agree are taken, a pipe's name told as a pipe's."""
    from iotrace_analyzer import _export

    h = np.array([1, 2], np.uint64)
    data = np.frombuffer(b"/a/bpipe:[7]", np.uint8)
    names = _kernels.Names()
    with pytest.raises(ValueError, match="offsets do not match"):
        names.put_numbers(h, np.array([0, 2], np.int64), data, [])
    with pytest.raises(ValueError, match="past the paths"):
        names.put_numbers(h, np.array([0, 4, 40], np.int64), data, [])
    ipc, n = names.put_numbers(h, np.array([0, 4, 12], np.int64), data, ["pipe:"])
    assert (ipc, n) == (["0000000000000002"], 2)
    assert names.get("0000000000000001") == "/a/b" and names.get("0000000000000002") == "pipe:[7]"
    bad = (h.tobytes(), np.array([0, 4, 40], np.int64).tobytes(), data.tobytes())
    with open(tmp_path / "part", "wb") as f:
        writers = [_export.ProtoWriter(f.fileno(), seq=1, vpid=1, pid=1, sort_index=0, file_index=0),
                   _export.JsonWriter(f.fileno(), 1, 1, 0)]
        for writer in writers:
            with pytest.raises(ValueError, match="past the paths"):
                writer.add_names_apart(*bad)
            writer.add_names_apart(h.tobytes(), np.array([0, 4, 12], np.int64).tobytes(), data.tobytes())


@pytest.mark.parametrize("names", ["short", "long"])
@pytest.mark.parametrize("ties", ["few", "many", "all"])
def test_files_ordered_by_time_then_name_as_arrow_sorts(ties, names):
    """order_by_key_then_name (the summary's file order: time, greatest first, then name) is
    Arrow's stable sort_indices on (time descending, name ascending): names compared as bytes
    (non-ASCII after ASCII, a prefix first, a NUL byte after the end), equal names by row; times
    that tie often or always; names that share a long prefix and differ only past the 16
    bytes after it, or not at all."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from iotrace_analyzer import keys

    rng = np.random.default_rng(11)
    n = 5000
    spread = {"few": 10**9, "many": 40, "all": 1}[ties]
    t = rng.integers(0, spread, n) / 1000.0
    t[:3] = [0.0, -0.0, 5.5]
    stems = ["/d/a", "/d/a/b", "/d/\u00e4", "/d/z", "/D/a", "/d/a\n", "/d/\u00e91", "/d/\u00e9", "/d/a\x00"]
    if names == "long":  # one prefix of 33 bytes, then 16 bytes alike, then the difference
        stems = ["/scratch/datasets/imagenet/train/" + "0123456789abcdef" + x for x in stems + [""]]
    picked = [stems[i] + ("" if r else f"{i % 7}") for i, r in
              zip(rng.integers(0, len(stems), n), rng.integers(0, 2, n))]
    arr = pa.array(picked, pa.string())
    want = pc.sort_indices(pa.table({"t": t, "f": arr}),
                           sort_keys=[("t", "descending"), ("f", "ascending")]).to_numpy()
    off, data, _valid = keys.buffers(arr)
    got = _kernels.order_by_key_then_name(t, off, data)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()
    with pytest.raises(ValueError, match="offsets"):
        _kernels.order_by_key_then_name(t[:-1], off, data)


def _path_parts_reference(paths):
    """path_parts in Python: per path its folder's and its name tail's code (each numbered in
    the order first met; -1: no '/'), and the flags 1 (no '/') and 2 (a final newline)."""
    dirs, tails, dc, tc, flags = {}, {}, [], [], []
    for p in paths:
        cut = p.rfind("/")
        name = p[cut + 1:]
        dc.append(dirs.setdefault(p[:cut], len(dirs)) if cut >= 0 else -1)
        dot = name.find(".")
        tc.append(tails.setdefault(name[dot:] if dot >= 0 else name, len(tails)))
        flags.append((cut < 0) | (p.endswith("\n") << 1))
    return dc, list(dirs), tc, list(tails), flags


def test_path_parts_numbers_folders_and_tails_in_order():
    """A few thousand paths in hundreds of folders (the index grows past its first table),
    with the odd ones: no '/', a root file, an empty path, dots in folders, a final newline."""
    rng = np.random.default_rng(3)
    paths = [f"/data/d{rng.integers(700):03d}/x.y/f{i}{rng.choice(['.bin', '.tar.gz', '', '.'])}"
             for i in range(5000)]
    paths += ["noslash.txt", "/root.log", "", "/", "a/b.c.d", "/data/d001/x.y/f\n", "//double"]
    rng.shuffle(paths)
    enc = [p.encode() for p in paths]
    off = np.cumsum([0] + [len(b) for b in enc]).astype(np.int64)
    dir_code, dirs, tail_code, tails, flags = _kernels.path_parts(off, np.frombuffer(b"".join(enc) or b"\0", np.uint8))
    ref = _path_parts_reference(paths)
    assert len(ref[1]) > 700
    assert (dir_code.tolist(), dirs, tail_code.tolist(), tails, flags.tolist()) == ref
