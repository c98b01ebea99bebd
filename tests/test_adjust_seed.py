"""Seed 000's four tables through `evtime adjust` and `evtime explain adjust`, from CSV (the
seed's notation), Parquet (timestamp[ns]) and JSON Lines."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLES, SEED_PATTERN
from tests.seeds import DAY, TABLES

# also on local-cluster and through Spark Connect (tests/where.py)
pytestmark = pytest.mark.everywhere

INPUTS = {
    "csv": [str(SAMPLES / "tuples.csv"), "--time-format", SEED_PATTERN],
    "parquet": [str(SAMPLES / "tuples.parquet")],
    "jsonl": [str(SAMPLES / "tuples.jsonl")],
}


@pytest.mark.parametrize("fmt", sorted(INPUTS))
@pytest.mark.parametrize("unit,range_", sorted(TABLES))
def test_adjust_reproduces_seed_table(run_cli, fmt, unit, range_):
    r = run_cli("adjust", "--unit", unit, "--range", range_, *INPUTS[fmt])
    assert r.exit_code == 0, r.stderr
    table = TABLES[(unit, range_)]
    expected = sorted((pos, name) for name, (pos, _) in table.items() if pos is not None)
    rows = r.csv()
    assert [row["tuple"] for row in rows] == [name for _, name in expected]
    for row in rows:
        assert row["evtime"] == DAY + table[row["tuple"]][1] + "Z"
    discarded = len(table) - len(expected)
    assert f"read 5, released {len(expected)}, discarded {discarded}" in r.stderr


@pytest.mark.parametrize("fmt", sorted(INPUTS))
@pytest.mark.parametrize("unit,range_", sorted(TABLES))
def test_explain_adjust_reproduces_seed_table(run_cli, fmt, unit, range_):
    r = run_cli(
        "explain", "adjust", "--unit", unit, "--range", range_, "--format", "csv", *INPUTS[fmt]
    )
    assert r.exit_code == 0, r.stderr
    rows = r.csv()
    assert [row["tuple"] for row in rows] == list("ABCDE")
    assert [row["arrival"] for row in rows] == ["1", "2", "3", "4", "5"]
    for row in rows:
        pos, adjusted = TABLES[(unit, range_)][row["tuple"]]
        if pos is None:
            assert row["decision"] == "discarded"
            assert row["output_pos"] == "" and row["released_by"] == ""
            assert row["reason"].startswith("late: evtime ")
        else:
            assert row["decision"] == "released"
            assert row["output_pos"] == str(pos)
            assert row["evtime"] == DAY + adjusted + "Z"
            # released by no arrival (an empty released_by): at the end, and the reason says so
            end = row["released_by"] == ""
            assert row["reason"] == ("held to the end of input" if end else "")


def test_explain_columns_in_spec_order(run_cli):
    r = run_cli(
        "explain",
        "adjust",
        "--unit",
        "msec",
        "--range",
        "999",
        "--format",
        "csv",
        SAMPLES / "tuples.parquet",
    )
    header = r.stdout.splitlines()[0].replace('"', "").split(",")
    assert header == [
        "arrival",
        "source",
        "time",
        "evtime",
        "decision",
        "bound",
        "ref",
        "released_by",
        "output_pos",
        "windows",
        "reason",
        "tuple",
    ]
    rows = r.csv()
    # msec/999: B(2) is released by C(3), whose ref 23.123 - 0.999 passes 22.123
    by = {row["tuple"]: row for row in rows}
    assert by["B"]["released_by"] == "3"
    assert by["A"]["released_by"] == "5"  # 22.345 + 0.999 > 23.123: E passes it
    assert by["D"]["released_by"] == "5"
    assert by["E"]["released_by"] == ""  # released at the end of the input: null
    assert by["E"]["reason"] == "held to the end of input"
    assert by["C"]["bound"] == "2009-03-01T12:15:22.124000000Z"
    assert by["C"]["ref"] == "2009-03-01T12:15:23.123000000Z"
    assert by["A"]["time"] == "2009-03-01T12:15:22.345678901Z"


def test_released_by_is_an_integer_and_null_at_the_end(run_cli, tmp_path):
    """``released_by`` is int64 in Parquet and a number in JSON Lines; a row released only
    at the end of the input has null there, and its reason says so (seed 000, usec/999:
    A is released by C, arrival 3, C by E, arrival 5, E only at the end)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    args = ["explain", "adjust", "--unit", "usec", "--range", "999", *INPUTS["parquet"]]
    r = run_cli(*args, "-o", tmp_path / "why.parquet")
    assert r.exit_code == 0, r.stderr
    t = pq.read_table(tmp_path / "why.parquet")
    assert t.schema.field("released_by").type == pa.int64()
    got = {x["tuple"]: (x["decision"], x["released_by"], x["reason"]) for x in t.to_pylist()}
    r = run_cli(*args, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert {x["tuple"]: (x["decision"], x["released_by"], x["reason"]) for x in r.jsonl()} == got
    assert {k: v[:2] for k, v in got.items()} == {
        "A": ("released", 3),
        "B": ("discarded", None),
        "C": ("released", 5),
        "D": ("discarded", None),
        "E": ("released", None),
    }
    assert got["E"][2] == "held to the end of input" and got["A"][2] is None
