"""Bad input rows (issue 7): --bad-rows fail names file, line and column; --bad-rows discard
turns them into discards with reason 'bad input: ...' that count in the summary and never
move the bound."""

from __future__ import annotations

import csv
import re

import pytest

from tests.test_bad_input import _fails
from tests.where import here_and_in_spark

ADJ = ["adjust", "--unit", "msec", "--range", "999"]
HEAD = "id,time\n"
T = "2009-03-01T12:00:0{}Z"


def _rows(path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _write(workdir, name: str, text: str | bytes):
    p = workdir / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


# A bad line in every way a CSV line can be bad; its line number (header = line 1) and
# the words the one-line error must contain.
CASES = {
    "too_many_fields": (
        HEAD + f"1,{T.format(0)}\n2,{T.format(1)},9\n3,{T.format(2)}\n",
        3,
        ["expected 2 fields, got 3"],
    ),
    "too_few_fields": (
        HEAD + f"1,{T.format(0)}\n\n2\n3,{T.format(2)}\n",  # an empty line counts as a line
        4,
        ["expected 2 fields, got 1"],
    ),
    "unbalanced_quote": (
        HEAD + f'1,{T.format(0)}\n"2,{T.format(1)}\n3,{T.format(2)}\n',
        3,
        ["unbalanced quote"],
    ),
    "unparsable_time": (
        HEAD + f"1,{T.format(0)}\n2,yesterday\n3,{T.format(2)}\n",
        3,
        ["column 'time'", "cannot be read as a time: 'yesterday'"],
    ),
    "null_time": (HEAD + f"1,{T.format(0)}\n2,\n3,{T.format(2)}\n", 3, ["'time'", "empty"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_line_fails_naming_file_line_column(run_cli, workdir, case):
    text, line, words = CASES[case]
    _write(workdir, "x.csv", text)
    r = run_cli(*ADJ, "x.csv", "-o", "out.csv", "--discards", "late.csv")
    _fails(r, "x.csv", f"line {line}", *words)
    assert sorted(p.name for p in workdir.iterdir()) == ["x.csv"]  # nothing written


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_line_discarded_with_reason(run_cli, workdir, case):
    text, line, words = CASES[case]
    _write(workdir, "x.csv", text)
    r = run_cli(*ADJ, "--bad-rows", "discard", "x.csv", "-o", "out.csv", "--discards", "late.csv")
    assert r.exit_code == 0, r.stderr
    # an unbalanced quote runs to the end of the file: the rest is one bad line
    kept = ["1"] if case == "unbalanced_quote" else ["1", "3"]
    assert f"read {len(kept) + 1}, released {len(kept)}, discarded 1" in r.stderr
    assert [x["id"] for x in _rows(workdir / "out.csv")] == kept
    (late,) = _rows(workdir / "late.csv")
    assert late["reason"].startswith("bad input: ")
    assert f"(file x.csv line {line}" in late["reason"]
    assert late["arrival"] == "" and late["bound"] == ""


def test_bad_rows_counted_when_the_keep_flag_is_found_as_parts_are_written(
    run_cli, workdir, monkeypatch
):
    """Without --discards, read and written in Spark tasks (as big inputs are), adjust finds
    its keep flag as each part is written: the bad rows, written after the parts, are
    discards all the same."""
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    rows = [(1, 0), (2, 5), ("3", "yesterday"), (4, 2), (5, 4)]  # 4 is late: 2 < 5 - 1 s
    _write(workdir, "x.csv", HEAD + "".join(f"{i},{T.format(t)}\n" for i, t in rows))
    r = run_cli(
        "adjust", "--unit", "sec", "--range", "1", "--bad-rows", "discard", "x.csv", "-o", "o.csv"
    )
    assert r.exit_code == 0, r.stderr
    assert "read 5, released 3, discarded 2" in r.stderr
    assert [x["id"] for x in _rows(workdir / "o.csv")] == ["1", "5", "2"]


def test_non_utf8_byte(run_cli, workdir):
    _write(
        workdir,
        "x.csv",
        (HEAD + f"1,{T.format(0)}\n").encode() + b"\xff\xfe,2009-03-01T12:00:01Z\n",
    )
    _fails(run_cli(*ADJ, "x.csv"), "x.csv", "line 3", "column 'id'", "not UTF-8", "0xff")
    r = run_cli(*ADJ, "--bad-rows", "discard", "x.csv", "--discards", "late.csv")
    assert r.exit_code == 0, r.stderr
    assert [x["id"] for x in r.csv()] == ["1"]
    (late,) = _rows(workdir / "late.csv")
    assert late["id"] == "" and "not UTF-8" in late["reason"]
    assert "(file x.csv line 3 column id)" in late["reason"]


def test_value_that_does_not_convert(run_cli, workdir):
    # types are guessed from the first 4 MiB: a later value may not fit the guess
    n = 200_000
    lines = [f"{i},{'p' * 20},{T.format(0)}" for i in range(n)]
    lines.append(f"oops,{'p' * 20},{T.format(1)}")
    _write(workdir, "x.csv", "v,pad,time\n" + "\n".join(lines) + "\n")
    # (bound's --agg computes with CSV columns: read in their guessed types; adjust and
    # merge pass CSV text through as written, nothing to convert: tests/test_reading.py)
    bnd = ["bound", "--window", "1h", "--agg", "sum(v)"]
    _fails(run_cli(*bnd, "x.csv"), "x.csv", f"line {n + 2}", "column 'v'", "'oops' is not int64")
    r = run_cli(*bnd, "--bad-rows", "discard", "x.csv", "-o", "out.parquet", "--discards", "d.csv")
    assert r.exit_code == 0, r.stderr
    assert f"read {n + 1}," in r.stderr and "discarded 1" in r.stderr, r.stderr
    (late,) = _rows(workdir / "d.csv")
    # (--discards writes the row as it was written: the bad value too, issue 49)
    assert late["v"] == "oops" and late["pad"] == "p" * 20
    assert f"(file x.csv line {n + 2} column v)" in late["reason"]


def test_ten_megabyte_line_is_read(run_cli, workdir):
    big = "x" * (10 << 20)
    _write(
        workdir,
        "x.csv",
        f"id,pad,time\n1,a,{T.format(0)}\n2,{big},{T.format(1)}\n3,b,{T.format(2)}\n",
    )
    r = run_cli(*ADJ, "x.csv", "-o", "out.csv")
    assert r.exit_code == 0, r.stderr
    limit = csv.field_size_limit(1 << 30)
    try:
        out = _rows(workdir / "out.csv")
    finally:
        csv.field_size_limit(limit)
    assert [x["id"] for x in out] == ["1", "2", "3"] and out[1]["pad"] == big


def test_jsonl_null_time_line(run_cli, workdir):
    _write(workdir, "x.jsonl", f'{{"time": "{T.format(0)}"}}\n\n{{"time": null}}\n')
    _fails(run_cli(*ADJ, "x.jsonl"), "x.jsonl", "line 3", "'time'", "empty")


JSONL = (
    f'{{"id": 1, "time": "{T.format(0)}"}}\n'
    f'{{"id": 2, "time": "{T.format(1)}"\n'  # no closing brace
    "\n"
    "[3]\n"  # JSON, but not an object
    f'{{"id": 4, "time": "{T.format(2)}"}}\n'
)


def test_malformed_jsonl_line_fails_naming_the_line(run_cli, workdir):
    _write(workdir, "x.jsonl", JSONL)
    r = run_cli(*ADJ, "x.jsonl", "-o", "out.csv")
    _fails(r, "x.jsonl", "line 2", "malformed JSON line", "not JSON")
    assert sorted(p.name for p in workdir.iterdir()) == ["x.jsonl"]  # nothing written


def test_malformed_jsonl_lines_discarded_with_reason(run_cli, workdir):
    _write(workdir, "x.jsonl", JSONL)
    r = run_cli(*ADJ, "--bad-rows", "discard", "x.jsonl", "-o", "out.csv", "--discards", "d.csv")
    assert r.exit_code == 0, r.stderr
    assert "read 4, released 2, discarded 2" in r.stderr
    assert [x["id"] for x in _rows(workdir / "out.csv")] == ["1", "4"]
    reasons = [x["reason"] for x in _rows(workdir / "d.csv")]
    # (what the JSON parser says after "not JSON: " is its own text: not compared)
    assert len(reasons) == 2 and re.fullmatch(
        r"bad input: malformed JSON line: not JSON: \S.* \(file x\.jsonl line 2\)", reasons[0]
    ), reasons
    assert reasons[1] == "bad input: malformed JSON line: not a JSON object (file x.jsonl line 4)"


def test_only_an_empty_file_fails_even_with_discard(run_cli, workdir):
    # (an empty file among others is a source without rows: tests/test_reading.py)
    _write(workdir, "x.csv", "")
    r = run_cli(*ADJ, "--bad-rows", "discard", "x.csv")
    _fails(r, "x.csv", "every input is empty", status=1)


def test_header_only_file_is_zero_rows(run_cli, workdir):
    _write(workdir, "x.csv", HEAD)
    r = run_cli(*ADJ, "x.csv")
    assert r.exit_code == 0, r.stderr
    assert "read 0, released 0, discarded 0" in r.stderr


def test_missing_column_and_type_conflict_fail_even_with_discard(run_cli, workdir):
    _write(workdir, "a.jsonl", f'{{"v": 1, "time": "{T.format(0)}"}}\n')
    _write(workdir, "b.jsonl", f'{{"v": "x", "time": "{T.format(1)}"}}\n')
    _write(workdir, "c.csv", "v\n1\n")
    _fails(
        run_cli(*ADJ, "--bad-rows", "discard", "a.jsonl", "b.jsonl"), "'v'", "a.jsonl", "b.jsonl"
    )
    _fails(run_cli(*ADJ, "--bad-rows", "discard", "a.jsonl", "c.csv"), "c.csv", "'time'")
    assert sorted(p.name for p in workdir.iterdir()) == ["a.jsonl", "b.jsonl", "c.csv"]


def test_csv_columns_never_conflict(run_cli, workdir):
    """CSV is text (issue 49): a column whose text reads as a number in one CSV file and
    not in another is one text column, each value as written (no longer refused)."""
    _write(workdir, "a.csv", f"v,time\n01,{T.format(0)}\n")
    _write(workdir, "b.csv", f"v,time\nx,{T.format(1)}\n")
    r = run_cli(*ADJ, "a.csv", "b.csv")
    assert r.exit_code == 0, r.stderr
    assert [x["v"] for x in r.csv()] == ["01", "x"]


def test_bad_rows_do_not_move_the_reference(run_cli, workdir):
    # the malformed line carries a far-future time: were it read, 1 and 3 would be late
    _write(
        workdir,
        "x.csv",
        HEAD + f"1,{T.format(0)}\n2,2030-01-01T00:00:00Z,extra\n3,{T.format(1)}\n",
    )
    r = run_cli(*ADJ, "--bad-rows", "discard", "x.csv")
    assert r.exit_code == 0, r.stderr
    assert [x["id"] for x in r.csv()] == ["1", "3"]
    assert "read 3, released 2, discarded 1" in r.stderr


@pytest.mark.parametrize("where", ["local", "distributed"], indirect=True)
def test_explain_adjust_shows_bad_rows_as_discarded(run_cli, workdir):
    _write(workdir, "x.csv", HEAD + f"1,{T.format(0)}\n2,never\n3,{T.format(1)}\n")
    r = run_cli("explain", *ADJ, "--bad-rows", "discard", "--format", "csv", "x.csv")
    assert r.exit_code == 0, r.stderr
    rows = r.csv()
    assert [(x["id"], x["decision"]) for x in rows] == [
        ("1", "released"),
        ("3", "released"),
        ("2", "discarded"),
    ]
    assert rows[2]["source"] == "x.csv" and rows[2]["reason"].startswith("bad input: ")
    assert [x["arrival"] for x in rows] == ["1", "2", ""]
    assert "read 3, released 2, discarded 1" in r.stderr


def test_merge_bad_rows(run_cli, workdir):
    _write(workdir, "a.csv", HEAD + f"1,{T.format(0)}\n2,never\n3,{T.format(2)}\n")
    _write(workdir, "b.csv", HEAD + f"4,{T.format(1)}\n5,{T.format(3)}\n")
    _fails(run_cli("merge", "a.csv", "b.csv"), "a.csv", "line 3", "'time'")
    r = run_cli("merge", "--bad-rows", "discard", "A=a.csv", "B=b.csv", "--discards", "d.csv")
    assert r.exit_code == 0, r.stderr
    assert [x["id"] for x in r.csv()] == ["1", "4", "3", "5"]
    assert "read 5, released 4, discarded 1" in r.stderr
    assert "A: read 3, released 2, discarded 1" in r.stderr
    (late,) = _rows(workdir / "d.csv")
    assert late["source"] == "A" and "bad input" in late["reason"]
    x = run_cli(
        "explain", "merge", "--bad-rows", "discard", "--format", "csv", "A=a.csv", "B=b.csv"
    )
    assert x.exit_code == 0, x.stderr
    assert [(row["id"], row["decision"]) for row in x.csv()][-1] == ("2", "discarded")


def test_bound_bad_rows(run_cli, workdir):
    _write(
        workdir,
        "x.csv",
        "v,time\n1,2009-03-01T12:00:00Z\n2,2009-03-01T12:00:30Z\nx,y,z\n3,2009-03-01T12:01:10Z\n",
    )
    args = ["bound", "--window", "1m", "--agg", "sum(v) AS s", "x.csv"]
    _fails(run_cli(*args), "x.csv", "line 4", "expected 2 fields, got 3")
    r = run_cli(*args, "--bad-rows", "discard", "--discards", "d.csv")
    assert r.exit_code == 0, r.stderr
    assert "read 4, released 3, discarded 1" in r.stderr
    assert [x["s"] for x in r.csv()] == ["3", "3"]
    (late,) = _rows(workdir / "d.csv")
    assert "malformed CSV line" in late["reason"] and "line 4" in late["reason"]
    x = run_cli("explain", *args, "--bad-rows", "discard", "--format", "csv")
    assert x.exit_code == 0, x.stderr
    assert [row["decision"] for row in x.csv()][-1] == "discarded"


# late rows, bad ones and a row that moves the bound, in two files: what every command of
# the cross-check below reads
_A = HEAD + "".join(
    f"{i},{t}\n"
    for i, t in enumerate(
        [T.format(5), "never", T.format(3), T.format(8), "", T.format(1), T.format(9)]
    )
)
_B = HEAD + f"10,{T.format(7)}\nx,y,z\n11,{T.format(2)}\n12,{T.format(9)}\n"
_BOUND = ["--window", "2s", "--agg", "count(*) AS n"]


@pytest.mark.parametrize(
    "args",
    [
        [*ADJ, "--discards", "d.csv"],
        ["explain", *ADJ, "--format", "csv"],
        ["merge", "--discards", "d.csv"],
        ["explain", "merge", "--format", "csv"],
        ["bound", *_BOUND, "--discards", "d.csv"],
        ["explain", "bound", *_BOUND, "--format", "csv"],
    ],
    ids=["adjust", "explain adjust", "merge", "explain merge", "bound", "explain bound"],
)
def test_bad_rows_set_aside_here_as_in_spark(run_cli, workdir, monkeypatch, args):
    """Read here, the bad rows are set aside and the others numbered again in this process;
    read in Spark's tasks, by Spark: the same output, discards and summary, byte for byte."""
    _write(workdir, "a.csv", _A)
    _write(workdir, "b.csv", _B)

    def run():
        r = run_cli(*args, "--bad-rows", "discard", "--overwrite", "a.csv", "b.csv")
        assert r.exit_code == 0, r.stderr
        late = (workdir / "d.csv").read_text() if "--discards" in args else ""
        return r.stdout, late, re.sub(r" \([0-9.]+s\)", "", r.stderr)

    here, in_spark = here_and_in_spark(monkeypatch, run)
    assert "bad input" in (here[1] if "--discards" in args else here[0])
    assert here == in_spark


def test_header_only_file_next_to_typed_file(run_cli, workdir):
    # a header-only file's columns have no type: the other files' types win
    _write(workdir, "a.csv", "v,time\n")
    _write(workdir, "b.csv", f"v,time\n1,{T.format(0)}\n")
    r = run_cli("merge", "A=a.csv", "B=b.csv")
    assert r.exit_code == 0, r.stderr
    assert [x["v"] for x in r.csv()] == ["1"]
