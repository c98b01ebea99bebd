"""Reading as written (issues 47 and 49): empty inputs in a batch, JSON Lines lines counted
from 1, JSON Lines type conflicts under --bad-rows discard, exact JSON epoch numbers, JSON
strings that stay strings."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ADJ = ["adjust", "--unit", "sec", "--range", "5"]
ROWS = "time,v\n2009-03-01T10:00:00Z,1\n2009-03-01T10:00:01Z,2\n"


def _one_line(r, *words: str) -> str:
    assert r.exit_code != 0, (r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def _summary(r) -> str:
    return [line for line in r.stderr.splitlines() if line.startswith("evtime adjust:")][-1]


@pytest.mark.parametrize(
    "name,content",
    [
        ("zero.csv", b""),
        ("zero.jsonl", b""),
        ("blank.jsonl", b"\n\n"),
        ("zero.parquet", b""),
    ],
)
def test_an_empty_file_is_a_source_without_rows(run_cli, workdir, name, content):
    (workdir / "a.csv").write_text(ROWS)
    (workdir / name).write_bytes(content)
    r = run_cli(*ADJ, "a.csv", name, "a.csv")
    assert r.exit_code == 0, r.stderr
    rows = r.csv()
    assert [x["v"] for x in rows] == ["1", "1", "2", "2"]  # both copies of a.csv, by time
    summary = _summary(r)
    assert "read 4," in summary, summary
    assert f"1 empty input ({name})" in summary, summary


def test_only_empty_inputs_is_one_clear_error(run_cli, workdir):
    (workdir / "zero.csv").write_bytes(b"")
    (workdir / "zero.jsonl").write_bytes(b"")
    _one_line(run_cli(*ADJ, "zero.csv", "zero.jsonl"), "every input is empty", "zero.csv")


def test_a_header_only_csv_with_empty_files_still_needs_nothing_else(run_cli, workdir):
    (workdir / "h.csv").write_text("time,v\n")
    (workdir / "zero.csv").write_bytes(b"")
    r = run_cli(*ADJ, "h.csv", "zero.csv")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == ["time,v,evtime"]


def test_an_empty_parquet_file_next_to_parquet_inputs(run_cli, workdir):
    t = pa.table({"time": pa.array([1, 2], pa.timestamp("ns", "UTC")), "v": [1, 2]})
    pq.write_table(t, workdir / "a.parquet")
    (workdir / "zero.parquet").write_bytes(b"")
    r = run_cli(*ADJ, "zero.parquet", "a.parquet")
    assert r.exit_code == 0, r.stderr
    assert [x["v"] for x in r.csv()] == ["1", "2"]


def test_json_lines_type_conflict_names_the_line_counted_from_1(run_cli, workdir):
    (workdir / "c.jsonl").write_text(
        '{"time":"2009-03-01T10:00:00Z","v":1}\n'
        "\n"
        '{"time":"2009-03-01T10:00:01Z","v":2}\n'
        '{"time":"2009-03-01T10:00:02Z","v":"x"}\n'
    )
    line = _one_line(run_cli(*ADJ, "c.jsonl"), "c.jsonl", "line 4", "'v'")
    assert "row 2" not in line and "row 3" not in line


def test_json_lines_type_conflict_is_discarded_with_a_reason(run_cli, workdir):
    (workdir / "c.jsonl").write_text(
        '{"time":"2009-03-01T10:00:00Z","v":1}\n'
        '{"time":"2009-03-01T10:00:01Z","v":"x"}\n'
        '{"time":"2009-03-01T10:00:02Z","v":3}\n'
    )
    r = run_cli(*ADJ, "--bad-rows", "discard", "--discards", "d.csv", "c.jsonl")
    assert r.exit_code == 0, r.stderr
    assert [x["v"] for x in r.csv()] == ["1", "3"]
    with open(workdir / "d.csv", newline="") as fh:
        (bad,) = list(csv.DictReader(fh))
    assert "c.jsonl line 2" in bad["reason"] and "'v'" in bad["reason"], bad


@pytest.mark.parametrize(
    "number,fmt",
    [
        ("1235909722.345678901", "epoch_s"),
        ("-1235909722.345678901", "epoch_s"),
        ("1235909722345.678901", "epoch_ms"),
        ("1235909722345678.901", "epoch_us"),
        ("12.5e8", "epoch_s"),
    ],
)
def test_json_epoch_numbers_are_read_from_their_text(run_cli, workdir, number, fmt):
    (workdir / "e.jsonl").write_text(f'{{"time":{number}, "v":1}}\n')
    r = run_cli("adjust", "--unit", "nsec", "--range", "0", "--time-format", fmt, "e.jsonl")
    assert r.exit_code == 0, r.stderr
    (row,) = r.csv()
    scale = {"epoch_s": 10**9, "epoch_ms": 10**6, "epoch_us": 10**3}[fmt]
    want = int((Decimal(number) * scale).to_integral_value())
    got = pa.array([row["evtime"]]).cast(pa.timestamp("ns", "UTC")).cast(pa.int64())[0].as_py()
    assert got == want, (row, want)


def test_json_strings_that_look_like_times_stay_strings(run_cli, workdir):
    (workdir / "s.jsonl").write_text(
        '{"time":"2009-03-01T10:00:00.123456789Z","when":"2009-03-01 10:00:00"}\n'
    )
    r = run_cli(*ADJ, "s.jsonl", "--output-format", "jsonl")
    assert r.exit_code == 0, r.stderr
    (row,) = r.jsonl()
    assert row["when"] == "2009-03-01 10:00:00", row
    assert row["time"] == "2009-03-01T10:00:00.123456789Z", row
    assert row["evtime"] == "2009-03-01T10:00:00.000000000Z", row


def test_summary_names_no_empty_input_when_there_is_none(run_cli, workdir):
    (workdir / "a.csv").write_text(ROWS)
    r = run_cli(*ADJ, "a.csv")
    assert r.exit_code == 0 and "empty" not in _summary(r), r.stderr
    assert list(csv.reader(io.StringIO(r.stdout)))[0] == ["time", "v", "evtime"]


# ---------------------------------------------------------------- CSV text as written

WRITTEN = {
    "lead": ["0012", "7"],
    "flag": ["01", "0"],
    "yes": ["True", "false"],
    "price": ["1.50", "2.25"],
    "when": ["2009-03-01 10:00:00", "2009-03-02 11:00:00"],
    "gone": ["NA", "3"],
}


def _written_csv(path) -> None:
    names = ["time", *WRITTEN]
    times = ["2009-03-01T10:00:00Z", "2009-03-01T10:00:01Z"]
    lines = [",".join(names)]
    lines += [",".join([t, *(WRITTEN[n][i] for n in WRITTEN)]) for i, t in enumerate(times)]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_csv_columns_pass_through_as_written(run_cli, workdir, fmt):
    _written_csv(workdir / "w.csv")
    r = run_cli(*ADJ, "w.csv", "--output-format", fmt)
    assert r.exit_code == 0, r.stderr
    rows = r.csv() if fmt == "csv" else r.jsonl()
    for name, values in WRITTEN.items():
        assert [row[name] for row in rows] == values, (name, rows)


def test_merge_bound_marker_compares_the_text_as_written(run_cli, workdir):
    (workdir / "a.csv").write_text(
        "time,flag,v\n"
        "2009-03-01T10:00:00Z,0,a1\n"
        "2009-03-01T10:00:05Z,01,bound\n"
        "2009-03-01T10:00:06Z,0,a2\n"
    )
    (workdir / "b.csv").write_text("time,flag,v\n2009-03-01T10:00:01Z,0,b1\n")
    r = run_cli("merge", "--bound-marker", "flag=01", "a.csv", "b.csv")
    assert r.exit_code == 0, r.stderr
    assert "bound" not in [x["v"] for x in r.csv()], r.stdout
    assert "bound rows 1" in r.stderr, r.stderr
    assert [x["flag"] for x in r.csv()] == ["0", "0", "0"]


def test_bound_marker_compares_the_text_and_aggregates_stay_numbers(run_cli, workdir):
    (workdir / "m.csv").write_text(
        "time,flag,temp\n"
        "2009-03-01T10:00:00Z,0,1.50\n"
        "2009-03-01T10:00:30Z,0,2.5\n"
        "2009-03-01T10:01:10Z,01,0\n"
        "2009-03-01T10:01:20Z,0,4\n"
    )
    r = run_cli(
        "bound", "--window", "1m", "--bounds", "markers", "--bound-marker", "flag=01",
        "--agg", "avg(temp) AS t", "--agg", "count(*) AS n", "--agg", "max(temp) AS hi",
        "m.csv", "--output-format", "jsonl",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    got = [(w["t"], w["n"], w["hi"], w["closed_by"]) for w in r.jsonl()]
    # the marker row (arrival 3) closes the first window; the second is flushed at the end
    assert got == [(2.0, 2, 2.5, 3), (4.0, 1, 4.0, None)], got


def test_an_agg_over_a_text_value_names_file_line_and_column(run_cli, workdir):
    (workdir / "s.csv").write_text(
        "time,v,w\n2009-03-01T10:00:00Z,1,5\n\n2009-03-01T10:00:01Z,x,6\n2009-03-01T10:00:02Z,3,7\n"
    )
    r = run_cli("bound", "--window", "1m", "--agg", "sum(w)", "--agg", "sum(v) AS s", "s.csv")
    line = _one_line(r, "s.csv: line 4", "column 'v'", "'x'")
    assert "CAST_INVALID_INPUT" not in line
