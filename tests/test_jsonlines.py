"""JSON Lines a column at a time (evtime.io.jsonlines) against json.dumps row by row."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from evtime.io.jsonlines import encode

ROWS = 12
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)  # (UTF-8 only)
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 100.0, 1e16, 1e21, 1e22, 1e-5, 1e-7, 5e-324, 0.1, 123456789012345678.0]
)
COLUMNS = {
    "int": (st.integers(-(2**63), 2**63 - 1), pa.int64()),
    "small": (st.integers(-128, 127), pa.int8()),
    "float": (floats, pa.float64()),
    "bool": (st.booleans(), pa.bool_()),
    "text": (texts, pa.string()),
    "large": (texts, pa.large_string()),
    "date": (st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)), pa.date32()),
}


def as_python(lines: bytes) -> list[dict]:
    """Parsed lines, NaN made comparable, floats kept apart from ints."""

    def plain(v):
        if isinstance(v, float):
            return ("float", "nan" if math.isnan(v) else v)
        return v

    return [{k: plain(v) for k, v in json.loads(x).items()} for x in lines.splitlines()]


def by_json_dumps(table: pa.Table) -> bytes:
    rows = table.to_pylist()
    return "".join(json.dumps(r, default=str, ensure_ascii=False) + "\n" for r in rows).encode()


@st.composite
def tables(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(COLUMNS)), min_size=1, max_size=5))
    cols = {}
    for i, kind in enumerate(kinds):
        values, typ = COLUMNS[kind]
        cells = draw(st.lists(st.none() | values, min_size=ROWS, max_size=ROWS))
        arr = pa.array(cells, typ)
        if kind in ("text", "large") and draw(st.booleans()):
            arr = arr.dictionary_encode()
        cols[f'{kind} "{i}"\n'] = arr  # (names are escaped too)
    if draw(st.booleans()):
        cols["none"] = pa.nulls(ROWS)
    start = draw(st.integers(0, ROWS))
    return pa.table(cols).slice(start, draw(st.integers(0, ROWS - start)))


@settings(max_examples=300, deadline=None)
@given(tables())
def test_the_same_objects_as_json_dumps(table):
    fast = bytes(encode(table))
    assert fast.endswith(b"\n") or not fast
    assert len(fast.splitlines()) == table.num_rows
    assert as_python(fast) == as_python(by_json_dumps(table))
    if not any(pa.types.is_floating(t) for t in table.schema.types):
        assert fast == by_json_dumps(table)  # byte for byte: only numbers are Arrow's text


def test_numbers_are_arrows_text_kept_floats():
    table = pa.table({"v": pa.array([100.0, -0.0, 1e-9, 0.1, float("nan"), float("inf"), None])})
    assert bytes(encode(table)).decode().splitlines() == [
        '{"v": 100.0}',
        '{"v": -0.0}',
        '{"v": 1e-9}',
        '{"v": 0.1}',
        '{"v": NaN}',
        '{"v": Infinity}',
        '{"v": null}',
    ]


def test_other_types_go_row_by_row():
    table = pa.table(
        {
            "d": pa.array([decimal.Decimal("1.50"), None], pa.decimal128(5, 2)),
            "l": pa.array([[1, 2], None]),
            "s": ["a\u2028é", '"'],
        }
    )
    assert bytes(encode(table)) == by_json_dumps(table)
    assert (
        bytes(encode(table)).decode().split("\n")[0]
        == '{"d": "1.50", "l": [1, 2], "s": "a\u2028é"}'
    )
