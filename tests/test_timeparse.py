"""Tests for evtime.io.timeparse: every time -> int64 ns since the epoch, UTC, exactly."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evtime.io.timeparse import check_format, format_ns, to_ns, truncated_text
from evtime.units import UNITS

SEED_FMT = "yyyy/MM/dd HH:mm:ss:SSSSSSSSS"
T0 = 1235909722345678901  # 2009-03-01T12:15:22.345678901Z
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def ns(values, fmt=None, tz=None):
    return to_ns(
        values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values), fmt, tz
    ).to_pylist()


def test_seed_pattern_exact():
    got = ns(
        [
            "2009/03/01 12:15:22:345678901",
            "2009/03/01 12:15:23:000000000",
            "2009/03/01 12:15:21:999999999",
            "2009/03/01 12:15:22:3",
        ],
        SEED_FMT,
    )
    assert got == [T0, 1235909723000000000, 1235909721999999999, 1235909722300000000]


def test_chunked_and_large_string():
    arr = pa.chunked_array([["2009/03/01 12:15:22:345678901"], [None, "2009/03/01 12:15:22:0"]])
    assert ns(arr, SEED_FMT) == [T0, None, 1235909722000000000]
    assert ns(pa.array(["2009-03-01T12:15:22.345678901Z"], pa.large_string())) == [T0]


@pytest.mark.parametrize("digits", range(10))
def test_iso_fraction_digits(digits):
    frac = "345678901"[:digits]
    text = "2009-03-01T12:15:22" + (f".{frac}" if digits else "")
    want = 1235909722 * 10**9 + (int(frac.ljust(9, "0")) if digits else 0)
    assert ns([text, text + "Z", text.replace("T", " "), text + "+00:00"]) == [want] * 4


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2009-03-01T12:15:22.345678901Z", T0),
        ("2009-03-01 12:15:22", 1235909722 * 10**9),
        ("2009-03-01T12:15:22.3+01:00", 1235909722300000000 - 3600 * 10**9),
        ("2009-03-01T12:15:22-0530", 1235909722 * 10**9 + 19800 * 10**9),
        ("2009-03-01T12:15:22+05", 1235909722 * 10**9 - 5 * 3600 * 10**9),
        ("2009-03-01", 1235865600 * 10**9),
        ("2009-03-01T12:15", 1235909700 * 10**9),
        ("  2009-03-01T12:15:22.345678901Z ", T0),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.999999999Z", -1),
        ("1900-01-01T00:00:00Z", -2208988800 * 10**9),
        ("2000-02-29", 951782400 * 10**9),
        ("2262-04-11T23:47:16.854775807Z", I64_MAX),
        ("1677-09-21T00:12:43.145224192Z", I64_MIN),
    ],
)
def test_iso_values(text, want):
    assert ns([text]) == [want]
    assert ns([text], "iso") == [want]


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "garbage",
        "2009-13-01",
        "2009-02-29",
        "1900-02-29",
        "2009-03-01T24:00:00",
        "2009-03-01T12:60:00",
        "2009-03-01T12:15:61",
        "2009-03-01T12:15:22.1234567890",
        "2262-04-11T23:47:16.854775808Z",
        "1677-09-21T00:12:43.145224191Z",
        "9999-01-01",
        "2009-03-01T12:15:22+25:00",
        "1236000000",
    ],
)
def test_iso_garbage_is_null(bad):
    assert ns([bad, None, "2009-03-01T12:15:22.345678901Z"]) == [None, None, T0]


def test_offset_wins_over_tz_and_naive_uses_tz():
    got = ns(
        [
            "2009-03-01T12:15:22.345678901Z",
            "2009-03-01T07:15:22.345678901",
            "2009-07-01T12:00:00",
            "2009-03-01",
        ],
        tz="America/New_York",
    )
    assert got == [T0, T0, 1246464000 * 10**9, 1235883600 * 10**9]


def test_tz_dst_edges():
    # 2009-03-08 02:30 does not exist in New York -> null; 2009-11-01 01:30 is ambiguous -> earliest
    got = ns(
        ["2009-03-08 02:30", "2009-11-01 01:30", "2009-11-01 01:30:00-05:00"], tz="America/New_York"
    )
    assert got == [None, 1257053400 * 10**9, 1257057000 * 10**9]


@pytest.mark.parametrize(
    ("fmt", "text", "want"),
    [
        ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2009-03-01T13:15:22.345+01:00", 1235909722345000000),
        ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2009-03-01T12:15:22.345Z", 1235909722345000000),
        ("dd.MM.yyyy HH:mm:ss Z", "01.03.2009 07:15:22 -0500", 1235909722 * 10**9),
        ("yyyyMMddHHmmss", "20090301121522", 1235909722 * 10**9),
        ("d/M/yyyy H:m:s", "1/3/2009 2:5:7", 1235873107 * 10**9),
        ("yyyy-MM-dd 'at' HH:mm", "2009-03-01 at 12:15", 1235909700 * 10**9),
        ("yyyy/MM/dd HH:mm:ss.SSSSSS", "1969/12/31 23:59:59.999999", -1000),
        ("yyyy-MM-dd", "2009-03-01", 1235865600 * 10**9),
    ],
)
def test_patterns(fmt, text, want):
    check_format(fmt)
    assert ns([text, "nope", None], fmt) == [want, None, None]


def test_pattern_with_tz_and_integer_input():
    assert ns(["2009/03/01 07:15:22:345678901"], SEED_FMT, "America/New_York") == [T0]
    assert ns(pa.array([20090301, None]), "yyyyMMdd") == [1235865600 * 10**9, None]


@pytest.mark.parametrize(
    "fmt",
    [
        None,
        "iso",
        "epoch_s",
        "epoch_ns",
        SEED_FMT,
        "yyyy-MM-dd'T'HH",
        "HH:mm:ss",
        "yyyy-MM-dd'T'HH:mm:ss.SSSX",
        "'o''clock' HH",
    ],
)
def test_check_format_ok(fmt):
    check_format(fmt)


@pytest.mark.parametrize(
    ("fmt", "needle"),
    [
        ("yyyy-MM-dd hh:mm", "'h'"),
        ("yyyy-MM-ddTHH", "'T'"),
        ("EEE yyyy", "'E'"),
        ("yy-MM-dd", "year"),
        ("yyyy-MM-dd HH:mm:ss.SSSSSSSSSS", "9"),
        ("", "empty"),
        ("yyyy 'x", "quote"),
        ("---", "no date/time"),
        ("yyyy yyyy", "twice"),
        ("MMM", "'MMM'"),
    ],
)
def test_check_format_errors(fmt, needle):
    with pytest.raises(ValueError, match=".*") as err:
        check_format(fmt)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError):
        to_ns(pa.array(["x"]), fmt)


def test_epoch_strings():
    got = ns(
        [
            "1236000000.345678901",
            "1236000000",
            "-1.5",
            "-0.000000001",
            "+12.",
            "0",
            "1236000000.3456789016",
            "-1.0000000005",
            "9223372036.854775807",
            "-9223372036.854775808",
            "9223372036.854775808",
            "1e9",
            "abc",
            "",
            None,
            "0000000000000000000001.5",
        ],
        "epoch_s",
    )
    assert got == [
        1236000000345678901,
        1236000000 * 10**9,
        -1500000000,
        -1,
        12 * 10**9,
        0,
        1236000000345678902,
        -1000000001,
        I64_MAX,
        I64_MIN,
        None,
        None,
        None,
        None,
        None,
        1500000000,
    ]
    assert ns(["1236000000345.678901", "-1.5"], "epoch_ms") == [1236000000345678901, -1500000]
    assert ns(["1236000000345678.901", "-1.5"], "epoch_us") == [1236000000345678901, -1500]
    assert ns(
        ["1236000000345678901", "-9223372036854775808", "9223372036854775808", "-1.5"], "epoch_ns"
    ) == [1236000000345678901, I64_MIN, None, -2]


def test_epoch_ints_and_floats():
    assert ns(pa.array([1236000000, -1, None], pa.int32()), "epoch_s") == [
        1236000000 * 10**9,
        -(10**9),
        None,
    ]
    assert ns([1236000000345, -1], "epoch_ms") == [1236000000345000000, -(10**6)]
    assert ns([1236000000345678], "epoch_us") == [1236000000345678000]
    assert ns([T0, I64_MIN, I64_MAX], "epoch_ns") == [T0, I64_MIN, I64_MAX]
    assert ns([9223372037, -9223372037, 9223372036], "epoch_s") == [None, None, 9223372036 * 10**9]
    assert ns(pa.array([2**64 - 1, 5], pa.uint64()), "epoch_ns") == [None, 5]
    assert ns([1.5, -0.25, float("nan"), float("inf"), 1e30, None], "epoch_s") == [
        1500000000,
        -250000000,
        None,
        None,
        None,
        None,
    ]
    assert ns([1236000000.5], "epoch_s") == [1236000000500000000]
    assert ns([0.0000000014], "epoch_s") == [1]
    dec = pa.array(["1236000000.345678901"]).cast(pa.decimal128(20, 9))
    assert ns(dec, "epoch_s") == [1236000000345678901]


def test_numeric_without_epoch_format_raises():
    for arr in (pa.array([1, 2]), pa.array([1.5])):
        with pytest.raises(ValueError, match="epoch_s"):
            to_ns(arr)
        with pytest.raises(ValueError, match="epoch_s"):
            to_ns(arr, "iso")


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_timestamps_all_units(unit):
    scale = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]
    raw = [T0 // scale, -1, 0, None]
    want = [T0 // scale * scale, -scale, 0, None]
    assert ns(pa.array(raw, pa.timestamp(unit))) == want
    assert ns(pa.array(raw, pa.timestamp(unit, "UTC"))) == want
    assert ns(pa.array(raw, pa.timestamp(unit, "Asia/Kolkata"))) == want  # instants: tz irrelevant
    assert ns(pa.array(raw, pa.timestamp(unit, "UTC")), tz="America/New_York") == want
    assert ns(pa.array(raw, pa.timestamp(unit)), SEED_FMT) == want  # fmt ignored


def test_timestamp_overflow_is_null():
    arr = pa.array([9223372037, -9223372037, 9223372036], pa.timestamp("s"))
    assert ns(arr) == [None, None, 9223372036 * 10**9]


def test_naive_timestamp_with_tz():
    naive = pa.array(
        [dt.datetime(2009, 3, 1, 7, 15, 22), dt.datetime(2009, 3, 8, 2, 30)], pa.timestamp("s")
    )
    assert ns(naive, tz="America/New_York") == [1235909722 * 10**9, None]
    nsarr = pa.array([T0 - 5 * 3600 * 10**9], pa.timestamp("ns"))
    assert ns(nsarr, tz="America/New_York") == [T0]


def test_dates():
    d32 = pa.array([dt.date(2009, 3, 1), dt.date(1969, 12, 31), None], pa.date32())
    assert ns(d32) == [1235865600 * 10**9, -86400 * 10**9, None]
    assert ns(d32.cast(pa.date64())) == [1235865600 * 10**9, -86400 * 10**9, None]
    assert ns(d32, tz="America/New_York")[0] == (1235865600 + 5 * 3600) * 10**9
    assert ns(pa.array([dt.date(3000, 1, 1)], pa.date32())) == [None]


def test_null_and_dictionary_inputs():
    assert ns(pa.nulls(3)) == [None] * 3
    assert ns(pa.array(["2009-03-01T12:15:22.345678901Z", None]).dictionary_encode()) == [T0, None]
    assert to_ns(pa.array([], pa.string())).type == pa.int64()


def test_bad_tz_and_type():
    with pytest.raises(ValueError, match="Mars/Olympus"):
        to_ns(pa.array(["2009-03-01"]), tz="Mars/Olympus")
    with pytest.raises(ValueError):
        to_ns(pa.array([True]))


def test_format_ns():
    vals = [T0, 0, -1, I64_MIN, I64_MAX, None, -2208988800 * 10**9, 951782400 * 10**9]
    got = format_ns(pa.array(vals, pa.int64())).to_pylist()
    assert got == [
        "2009-03-01T12:15:22.345678901Z",
        "1970-01-01T00:00:00.000000000Z",
        "1969-12-31T23:59:59.999999999Z",
        "1677-09-21T00:12:43.145224192Z",
        "2262-04-11T23:47:16.854775807Z",
        None,
        "1900-01-01T00:00:00.000000000Z",
        "2000-02-29T00:00:00.000000000Z",
    ]
    assert format_ns(pa.array([T0], pa.timestamp("ns", "UTC"))).to_pylist() == [got[0]]
    assert format_ns(pa.array([1235909722], pa.timestamp("s"))).to_pylist() == [
        "2009-03-01T12:15:22.000000000Z"
    ]


def test_format_ns_round_trip_random():
    rng = np.random.default_rng(7)
    vals = np.concatenate(
        [
            rng.integers(I64_MIN, I64_MAX, 20000, dtype=np.int64, endpoint=True),
            np.array([I64_MIN, I64_MAX, -1, 0, 1, T0, -T0], np.int64),
        ]
    )
    arr = pa.array(vals)
    text = format_ns(arr)
    assert to_ns(text).equals(arr)
    # agree with numpy's own formatter (numpy's NaT is int64 min: skip it)
    ok = vals != I64_MIN
    want = np.datetime_as_string(vals[ok].view("datetime64[ns]"), unit="ns", timezone="UTC")
    assert np.asarray(text.to_pylist(), dtype=object)[ok].tolist() == want.tolist()


def test_one_million_rows_parse_exactly():
    """A million rows in one array (Arrow's vectorised paths over many chunks of work):
    ISO text back to the same instants, and the seed's pattern with fractions of every
    length (``:7`` is .7 s, ``:12`` .12 s: the digits are the fraction's first ones)."""
    base = np.arange(1_000_000, dtype=np.int64) * 1_234_567_891 + T0
    text = format_ns(pa.array(base))
    assert to_ns(text).equals(pa.array(base))
    i = np.arange(1_000_000)
    digits = np.char.str_len(i.astype(str))
    seed = pa.array(np.char.add("2009/03/01 12:15:22:", i.astype(str)))
    want = 1235909722 * 10**9 + i * 10 ** (9 - digits)
    assert to_ns(seed, SEED_FMT).equals(pa.array(want, pa.int64()))


def test_sliced_inputs_and_non_ascii_literals():
    arr = pa.array(["x", "2009-03-01T12:15:22.345678901Z", None, " 2009-03-01 "]).slice(1)
    assert ns(arr) == [T0, None, 1235865600 * 10**9]
    assert ns(pa.array([7, 1236000000], pa.int64()).slice(1), "epoch_s") == [1236000000 * 10**9]
    assert format_ns(pa.array([1, None, T0]).slice(1)).to_pylist() == [
        None,
        "2009-03-01T12:15:22.345678901Z",
    ]
    assert ns(["2009年03月01日 12:15"], "yyyy年MM月dd日 HH:mm") == [1235909700 * 10**9]
    assert ns(["２００９-03-01"]) == [None]  # only ASCII digits


@settings(max_examples=300, deadline=None)  # (pure Python: cheap)
@given(st.lists(st.none() | st.integers(I64_MIN, I64_MAX), max_size=50), st.integers(0, 3))
def test_format_ns_is_the_calendar(values, skip):
    """Every int64 ns formats as Python's calendar says, to the nanosecond; nulls stay null,
    also in a slice of an array (as Spark's Arrow batches are cut)."""
    epoch = dt.datetime(1970, 1, 1)
    want = [
        None
        if v is None
        else (epoch + dt.timedelta(seconds=v // 10**9)).strftime("%Y-%m-%dT%H:%M:%S")
        + f".{v % 10**9:09d}Z"
        for v in values
    ]
    got = format_ns(pa.array([0] * skip + values, pa.int64()).slice(skip))
    assert got.to_pylist() == want
    got.validate(full=True)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.integers(I64_MIN + 1, I64_MAX), st.integers(1, 40_000)), min_size=1),
    st.integers(0, 3),
)
def test_format_ns_of_long_arrays(runs, skip):
    """Arrays of up to hundreds of thousands of times (made a part at a time), with runs of
    equal times and days far apart: numpy's text of each, also in a slice."""
    values = np.repeat([v for v, _ in runs], [k for _, k in runs])
    got = format_ns(pa.array(np.r_[np.zeros(skip, np.int64), values]).slice(skip))
    want = np.datetime_as_string(values.view("datetime64[ns]"), unit="ns", timezone="UTC")
    assert got.to_pylist() == want.tolist()
    got.validate(full=True)


NEAR_ISO = st.builds(
    lambda y, mo, d, sep, h, mi, s, frac, tail: (
        f"{y:04d}-{mo:02d}-{d:02d}"
        + (f"{sep}{h:02d}" if h is not None else "")
        + (f":{mi:02d}" if h is not None and mi is not None else "")
        + (f":{s:02d}" if h is not None and mi is not None and s is not None else "")
        + (frac if h is not None and mi is not None and s is not None else "")
        + tail
    ),
    st.integers(1600, 2300),
    st.integers(0, 13),
    st.integers(0, 32),
    st.sampled_from(["T", " ", "t"]),
    st.none() | st.integers(0, 25),
    st.none() | st.integers(0, 61),
    st.none() | st.integers(0, 61),
    st.sampled_from(["", "."]) | st.from_regex(r"\A[.,][0-9]{1,10}\Z"),
    st.sampled_from(["", "", "", "Z", "+01:00", " "]),
)


@given(
    st.lists(st.none() | NEAR_ISO, min_size=1, max_size=20),
    st.sampled_from([None, "Europe/Paris"]),
)
def test_iso_read_by_arrow_as_by_the_scanner(texts, tz):
    """Arrow's cast (the fast path for ISO strings all with or all without an offset) reads
    what the scanner reads, and a batch Arrow cannot read all of goes to the scanner."""
    from evtime.io.timeparse import _ISO, _from_fields

    arr = pa.array(texts, pa.string())
    assert to_ns(arr, tz=tz).equals(_from_fields(arr, _ISO, tz))


@settings(max_examples=200, deadline=None)  # (pure Python: cheap)
@given(
    times=st.lists(
        st.one_of(st.none(), st.integers(-(2**62), 2**62), st.integers(-(10**13), 10**13)),
        max_size=40,
    ),
    unit=st.sampled_from(list(UNITS.values())),
)
def test_truncated_text_is_the_text_of_the_truncated_times(times, unit):
    """explain's evtime text made from its time text: the text of the floored times."""
    floored = [None if t is None else t - t % unit for t in times]
    got = truncated_text(format_ns(pa.array(times, pa.int64())), unit)
    assert got is not None
    assert got.equals(format_ns(pa.array(floored, pa.int64())))
    assert truncated_text(format_ns(pa.array(times, pa.int64())), 7) is None  # (not a unit)
