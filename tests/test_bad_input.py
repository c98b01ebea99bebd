"""Bad input: one clear line on stderr, exit status != 0, and no output file left behind."""

from __future__ import annotations

import csv

import pytest

from tests.conftest import SAMPLES

ADJ = ["adjust", "--unit", "msec", "--range", "999"]


def _fails(r, *words: str, status: int = 1) -> None:
    assert r.exit_code == status, (r.exit_code, r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert r.stdout == ""


def test_missing_time_column(run_cli, workdir):
    (workdir / "x.csv").write_text("a,b\n1,2\n")
    _fails(run_cli(*ADJ, "x.csv", "-o", "out.csv"), "no time column", "a, b", "--time", status=2)
    assert not (workdir / "out.csv").exists()


def test_ambiguous_time_column(run_cli, workdir):
    (workdir / "x.csv").write_text("time,ts\n1,2\n")
    _fails(run_cli(*ADJ, "x.csv"), "several time columns", "time, ts", status=2)


def test_named_time_column_missing_suggests(run_cli):
    _fails(
        run_cli(*ADJ, "--time", "tme", SAMPLES / "tuples.parquet"),
        "no time column 'tme'",
        "did you mean 'time'",
        status=2,
    )


def test_unparseable_time_names_file_row_value(run_cli, workdir):
    (workdir / "x.csv").write_text(
        "id,time\n1,2009-03-01T12:00:00Z\n2,2009-03-01T12:00:01Z\n3,yesterday\n"
    )
    _fails(run_cli(*ADJ, "x.csv", "-o", "out.csv"), "x.csv", "line 4", "'time'", "'yesterday'")
    assert sorted(p.name for p in workdir.iterdir()) == ["x.csv"]


def test_null_time(run_cli, workdir):
    (workdir / "x.jsonl").write_text('{"time": "2009-03-01T12:00:00Z"}\n{"time": null}\n')
    _fails(run_cli(*ADJ, "x.jsonl"), "x.jsonl", "line 2", "'time'", "no time (empty)")


def test_unknown_unit(run_cli):
    r = run_cli("adjust", "--unit", "fortnight", "--range", "1", SAMPLES / "tuples.parquet")
    assert r.exit_code == 2 and "fortnight" in r.stderr


def test_negative_range(run_cli):
    r = run_cli("adjust", "--unit", "sec", "--range", "-1", SAMPLES / "tuples.parquet")
    assert r.exit_code == 2 and "--range" in r.stderr


def test_range_beyond_the_timeline(run_cli):
    r = run_cli("adjust", "--unit", "day", "--range", "200000", SAMPLES / "tuples.parquet")
    assert r.exit_code == 2 and "--range 200000 --unit day is longer" in r.stderr


def test_missing_input_file(run_cli, workdir):
    _fails(run_cli(*ADJ, "nope.parquet", "-o", "out.csv"), "nope.parquet", "no such file")
    assert not (workdir / "out.csv").exists()


def test_glob_matching_nothing(run_cli, workdir):
    _fails(run_cli(*ADJ, "none-*.csv"), "no file matches")


def test_existing_output_needs_overwrite(run_cli, workdir):
    (workdir / "out.csv").write_text("keep me\n")
    _fails(
        run_cli(*ADJ, SAMPLES / "tuples.parquet", "-o", "out.csv"), "out.csv exists", "--overwrite"
    )
    assert (workdir / "out.csv").read_text() == "keep me\n"
    r = run_cli(*ADJ, SAMPLES / "tuples.parquet", "-o", "out.csv", "--overwrite")
    assert r.exit_code == 0, r.stderr
    with open(workdir / "out.csv") as fh:
        assert [row["tuple"] for row in csv.DictReader(fh)] == list("BADCE")


def test_type_conflict_between_files(run_cli, workdir):
    (workdir / "a.jsonl").write_text('{"time": "2009-03-01T12:00:00Z", "v": 1}\n')
    (workdir / "b.jsonl").write_text('{"time": "2009-03-01T12:00:01Z", "v": "x"}\n')
    _fails(run_cli(*ADJ, "a.jsonl", "b.jsonl"), "'v'", "a.jsonl", "b.jsonl")


def test_numeric_time_needs_epoch_format(run_cli, workdir):
    (workdir / "x.jsonl").write_text('{"time": 1235909722}\n')
    _fails(run_cli(*ADJ, "x.jsonl"), "--time-format")


@pytest.mark.parametrize("fmt", ["yyyy/MM/dd QQ", "epoch_fortnights"])
def test_bad_time_format(run_cli, fmt):
    r = run_cli(*ADJ, "--time-format", fmt, SAMPLES / "tuples.csv")
    assert r.exit_code == 2 and "--time-format" in r.stderr


def test_an_exception_in_a_python_worker_is_one_line_that_names_it():
    """An internal error raised in a Python worker reaches the driver as Spark's
    PythonException, whose first line only says that there was one: the line evtime prints
    ends with the worker's own exception (-v prints the whole trace)."""
    from evtime.cli import one_line

    class PythonException(Exception):  # (PySpark's, as its text reads)
        pass

    trace = (
        "An exception was thrown from the Python worker:\n"
        "Traceback (most recent call last):\n"
        '  File "/x/evtime/io/writer.py", line 305, in write_partition\n'
        "    seen = _write_parts(batches, sinks, lay, staging, step, step_below)\n"
        "AttributeError: 'dict' object has no attribute 'isdisjoint'\n"
        " SQLSTATE: 38000\n"
    )
    assert one_line(PythonException(trace)) == (
        "PythonException: An exception was thrown from the Python worker: "
        "AttributeError: 'dict' object has no attribute 'isdisjoint'"
    )
    assert one_line(RuntimeError("boom\nmore")) == "RuntimeError: boom"
    assert one_line(RuntimeError()) == "RuntimeError"
