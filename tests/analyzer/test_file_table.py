"""model/files.py's FileTable: the files' sums in the summary's order, each column gathered at
its first read and kept, a row's values those of the columns at that row."""

import numpy as np
import pyarrow as pa
from iotrace_analyzer.model.files import Columns, FileTable


def _table():
    rng = np.random.default_rng(7)
    n = 1000
    shared = rng.integers(0, 1 << 20, n).astype(np.int32)  # one array under two keys, as _FROM_SUMS does
    src = {"dur_sum": rng.integers(0, 1 << 40, n), "count": shared, "dur_count": shared,
           "reads": rng.integers(0, 100, n).astype(np.int16)}
    fns = {"time_us": lambda g: g("dur_sum") / 1000.0, "per_read": lambda g: g("count") - g("reads")}
    order = rng.permutation(n)
    names = pa.array([f"/data/f{i}" for i in range(n)])
    return src, order, FileTable(Columns(src, fns), names, names, np.zeros(n, np.int8), order)


def test_columns_are_the_sums_in_order_as_int64():
    src, order, t = _table()
    for k in ("dur_sum", "count", "dur_count", "reads"):
        col = t[k]
        assert col.dtype == np.int64
        assert np.array_equal(col, src[k][order].astype(np.int64))
    assert np.array_equal(t["time_us"], src["dur_sum"][order] / 1000.0)
    assert np.array_equal(t["per_read"], src["count"][order].astype(np.int64) - src["reads"][order])
    assert t.file[:3].to_pylist() == [f"/data/f{i}" for i in order[:3]]


def test_each_array_is_gathered_once_and_kept():
    _src, _order, t = _table()
    t["count"], t["dur_count"], t["count"], t["time_us"]
    kept = t._base._ordered
    assert len(kept) == 2  # count and dur_count share one array: one gather; dur_sum for time_us
    before = {k: id(v) for k, v in kept.items()}
    t["dur_sum"], t["dur_count"]
    assert {k: id(v) for k, v in kept.items()} == before  # read again: nothing gathered again


def test_a_row_is_the_columns_at_that_row():
    src, order, t = _table()
    for i in (0, 17, 999):
        j = int(order[i])
        assert t._base.at("count", i) == int(src["count"][j]) == t["count"][i]
        assert t._base.at("time_us", i) == src["dur_sum"][j] / 1000.0 == t["time_us"][i]
        assert t._base.at("per_read", i) == int(src["count"][j]) - int(src["reads"][j])
