"""units.py: the one place the outputs turn ns into µs and MB/s and draw their tables."""

from iotrace_analyzer import units


def test_us_and_mbps():
    assert units.us(1_234_567) == 1234.567
    assert units.us(999) == 0.999
    assert units.mbps(10**6, 10**9) == 1.0
    assert units.mbps(3 * 10**6, 2 * 10**9) == 1.5


def test_table_aligns_the_left_columns_and_the_others_right():
    t = units.table("T", ["a", "bb", "c"], [["x", 1, "yes"], ["long", 22, None]], left=(0, 2))
    assert t.splitlines() == [
        "T",
        "----  --  ---",
        "a     bb  c  ",
        "----  --  ---",
        "x      1  yes",
        "long  22  -  ",
    ]
    # by default only the first column is left-aligned
    assert units.table("T", ["a", "c"], [["x", "yes"], ["long", None]]).splitlines()[-2:] == [
        "x     yes",
        "long    -",
    ]
