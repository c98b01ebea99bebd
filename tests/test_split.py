"""Big text files read in byte spans by several tasks (evtime/io/split.py): the spans hold
every line once, their rows are the file's rows, their first line numbers are right, and a
CSV file is split only where no span starts inside a quoted value."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from evtime.io import formats, split
from evtime.io.sources import InputFile

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _file(tmp_path: Path, data: bytes, fmt: str) -> InputFile:
    path = tmp_path / f"in.{fmt}"
    path.write_bytes(data)
    formats.file_schema.cache_clear()
    return InputFile(0, str(path), path.name, fmt)


def _ranges(size: int, step: int) -> list[tuple[int, int]]:
    return [(s, min(s + step, size)) for s in range(0, size, step)]


def _spans(f: InputFile, size: int, step: int):
    got = [(s, e, split.span_facts(f, s, e)) for s, e in _ranges(size, step)]
    return split.spans_of(got, f.fmt == "csv")


def _line_starts(data: bytes) -> list[int]:
    return [0, *(i + 1 for i, b in enumerate(data) if b == 10 and i + 1 < len(data))]


@SETTINGS
@given(
    lines=st.lists(st.sampled_from(["", "a", "bb,c", "x" * 30, "\r", "é"]), max_size=30),
    last_newline=st.booleans(),
    step=st.integers(1, 40),
)
def test_spans_hold_every_line_once(tmp_path, lines, last_newline, step):
    data = "\n".join(lines).encode() + (b"\n" if last_newline and lines else b"")
    f = _file(tmp_path, data, "jsonl")
    spans = _spans(f, len(data), step)
    assert spans is not None  # JSON Lines: always split
    parts = []
    for s in spans:
        with formats.open_input(f, s) as fh:
            part = fh.read()
        parts.append(part)
        # the span's first line is line first_line of the file, and starts in the span
        starts = [p for p in _line_starts(data) if s.start <= p < s.end]
        if part:
            assert data[starts[0] :].startswith(part)
            assert data[: starts[0]].count(b"\n") + 1 == s.first_line
        else:
            assert not starts
    assert b"".join(parts) == data


_VALUES = st.one_of(
    st.sampled_from(["1", "", "plain", "two words", "é"]),
    st.sampled_from(['"quoted"', '"a,b"', '"line\nbreak"', '"say ""hi"""', '""', '"\n"']),
)
_BARE = st.sampled_from(['5" screen', 'a"b', '"open"tail'])  # quotes RFC 4180 does not place


def _csv_text(rows: list[list[str]], eol: str = "\n") -> bytes:
    return (f"t,k,v{eol}" + "".join(",".join(r) + eol for r in rows)).encode()


def _whole(f: InputFile) -> list[dict]:
    return pcsv.read_csv(f.url, convert_options=_TEXT).to_pylist()


_TEXT = pcsv.ConvertOptions(column_types={n: pa.string() for n in "tkv"})


def _read_spans(f: InputFile, spans) -> list[dict]:
    schema = pa.schema([(n, pa.string()) for n in "tkv"])
    out = []
    for s in spans:
        for b in formats.read_batches(f, schema, span=s):
            out += b.to_pylist()
    return out


@SETTINGS
@given(
    rows=st.lists(st.lists(st.one_of(_VALUES, _BARE), min_size=3, max_size=3), max_size=25),
    step=st.integers(1, 60),
    eol=st.sampled_from(["\n", "\r\n"]),
)
def test_csv_split_only_where_no_span_starts_inside_quotes(tmp_path, rows, step, eol):
    data = _csv_text(rows, eol)
    f = _file(tmp_path, data, "csv")
    try:
        whole = _whole(f)
    except pa.ArrowInvalid:
        assume(False)  # (pyarrow cannot read it whole either: nothing to compare with)
    spans = _spans(f, len(data), step)
    if spans is None:
        # refused only for a reason: a quoted newline, or a quote RFC 4180 does not place
        text = [v for r in rows for v in r]
        assert any("\n" in v and v.startswith('"') for v in text) or any(
            v in ('5" screen', 'a"b', '"open"tail') for v in text
        )
        assume(False)  # (checked the reason: nothing to compare)
    assert _read_spans(f, spans) == whole
    for s in spans:  # line numbers as csv counts them
        with formats.open_input(f, s) as fh:
            first = fh.read(1)
        if first:
            begin = next(p for p in _line_starts(data) if p >= s.start)
            assert data[:begin].count(b"\n") + 1 == s.first_line


def test_csv_without_quoted_newlines_is_split(tmp_path):
    rows = [[f'"2024-01-01T00:00:0{i % 10}Z"', '"k,1"', '"say ""x"""'] for i in range(50)]
    data = _csv_text(rows)
    f = _file(tmp_path, data, "csv")
    spans = _spans(f, len(data), 64)
    assert spans is not None and len(spans) > 5
    assert _read_spans(f, spans) == _whole(f)


def test_csv_with_a_quoted_newline_across_a_span_start_is_read_whole(tmp_path):
    rows = [["1", '"' + "long\n" * 40 + '"', "x"], ["2", "b", "y"]]
    f = _file(tmp_path, _csv_text(rows), "csv")
    assert _spans(f, f and len(_csv_text(rows)), 32) is None


def test_json_lines_spans_give_the_file_rows(tmp_path):
    lines = [f'{{"t": {i}, "k": "a\\nb", "v": {i * 0.5}}}' for i in range(40)]
    data = ("\n".join(lines[:20]) + "\n\n  \n" + "\n".join(lines[20:]) + "\n").encode()
    f = _file(tmp_path, data, "jsonl")
    spans = _spans(f, len(data), 50)
    assert spans is not None and len(spans) > 10
    schema = pjson.read_json(io.BytesIO(data)).schema
    got = [r for s in spans for b in formats.read_batches(f, schema, span=s) for r in b.to_pylist()]
    assert got == pjson.read_json(io.BytesIO(data)).to_pylist()


def test_lines_in_a_span_are_numbered_from_its_first_line(tmp_path):
    rows = [["1", "a", "x"]] * 10 + [["2", "b"]] + [["3", "c", "z"]] * 5  # line 12: 2 fields
    data = _csv_text(rows)
    f = _file(tmp_path, data, "csv")
    spans = _spans(f, len(data), 20)
    found = []
    for s in spans:
        lines = formats.Lines(f, s).scan()
        found += [line for line, _, _ in lines.malformed]
        for row in range(3):  # a span's rows are on the lines csv says
            line = lines.line(row)
            if line is not None:
                text = data.decode().split("\n")[line - 1]
                assert next(csv.reader([text]))[0] in "123"
    assert found == [12]


@pytest.mark.parametrize(
    ("setting", "size"), [("134217728", 1 << 27), ("2k", 2048), ("1MB", 1 << 20)]
)
def test_split_size_reads_spark_sizes(setting, size):
    assert split._bytes(setting) == size


# ---- through the CLI: spans of a few hundred bytes, outputs as when read whole ----------

SPAN_BYTES = "300"
MSEC_999 = ["--unit", "msec", "--range", "999"]


@pytest.fixture
def spans_of_run(spark, monkeypatch):
    """Text inputs read in tasks (not in the driver), split into spans of SPAN_BYTES bytes
    (the Spark setting users set) while ``split`` is on; the spans each run planned."""
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    monkeypatch.setenv("EVTIME_SPLIT_MIN_CORES", "1")  # (the tests' Spark has 2)
    planned: list[dict] = []
    real = split.plan

    def plan(spark_, files):
        got = real(spark_, files)
        planned.append(got)
        return got

    monkeypatch.setattr(split, "plan", plan)

    def set_split(on: bool) -> None:
        if on:
            spark.conf.set("spark.sql.files.maxPartitionBytes", SPAN_BYTES)
        else:
            spark.conf.unset("spark.sql.files.maxPartitionBytes")

    yield planned, set_split
    spark.conf.unset("spark.sql.files.maxPartitionBytes")


def _events(n: int, seed: int, bad: dict[int, str] | None = None) -> list[tuple[str, str, str]]:
    """(time, key, value) rows, out of order by up to ~2 s; ``bad``: row -> its time text."""
    import random

    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        ms = 10_000 + i * 40 - rnd.choice([0, 0, 0, 300, 1500])
        t = f"2009-03-01T12:{ms // 60000:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}Z"
        rows.append(((bad or {}).get(i, t), f"k{rnd.randint(0, 3)}", f"{rnd.random():.3f}"))
    return rows


def _write_csv(path: Path, rows, extra: dict[int, str] | None = None) -> Path:
    lines = ["time,key,value"] + [f'"{t}","{k}",{v}' for t, k, v in rows]
    for at, line in sorted((extra or {}).items()):
        lines.insert(at, line)
    path.write_text("\n".join(lines) + "\n")
    return path


def _write_jsonl(path: Path, rows, extra: dict[int, str] | None = None) -> Path:
    lines = [f'{{"time": "{t}", "key": "{k}", "value": {v}}}' for t, k, v in rows]
    for at, line in sorted((extra or {}).items()):
        lines.insert(at, line)
    path.write_text("\n".join(lines) + "\n")
    return path


def _both(run_cli, workdir: Path, set_split, planned, args: list[str], outputs: list[str]):
    """``args`` run with inputs split and read whole: (exit code, summary without the
    duration, stdout, the outputs' bytes) of each; the split run did split."""
    import re

    got = []
    for on in (True, False):
        set_split(on)
        for o in outputs:
            (workdir / o).unlink(missing_ok=True)
        r = run_cli(*args)
        files = {o: (workdir / o).read_bytes() for o in outputs if (workdir / o).exists()}
        got.append((r.exit_code, re.sub(r"\(\d+\.\d+s\)", "", r.stderr), r.stdout, files))
        if on:
            assert planned and all(len(s) > 3 for s in planned[-1].values()), planned
            assert planned[-1], "nothing was split"
        else:
            assert not planned[-1]
    return got


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_explain_and_adjust_of_a_split_file_as_of_the_whole(run_cli, workdir, spans_of_run, fmt):
    planned, set_split = spans_of_run
    write = _write_csv if fmt == "csv" else _write_jsonl
    write(workdir / f"in.{fmt}", _events(120, 1))
    for args, outputs in [
        (
            ["adjust", *MSEC_999, f"in.{fmt}", "-o", "out.csv", "--discards", "late.csv"],
            ["out.csv", "late.csv"],
        ),
        (
            ["explain", "adjust", *MSEC_999, f"in.{fmt}", "-o", "ex.csv"],
            ["ex.csv"],
        ),
    ]:
        split_run, whole_run = _both(run_cli, workdir, set_split, planned, args, outputs)
        assert split_run[0] == 0, split_run
        assert split_run == whole_run
        assert "read 120" in split_run[1]


def test_merge_and_bound_of_split_files_as_of_whole_ones(run_cli, workdir, spans_of_run):
    planned, set_split = spans_of_run
    _write_csv(workdir / "a.csv", _events(90, 2))
    _write_jsonl(workdir / "b.jsonl", _events(90, 3))
    merge = [*MSEC_999, "a.csv", "b.jsonl", "-o", "out.csv"]
    bound = ["bound", "--window", "1s", "--agg", "count(*)", "--agg", "avg(value)"]
    for args in [
        ["merge", *merge],
        [*bound, "a.csv", "-o", "out.csv"],
        ["explain", "merge", *merge],
    ]:
        split_run, whole_run = _both(run_cli, workdir, set_split, planned, args, ["out.csv"])
        assert split_run[0] == 0, split_run
        if args[0] == "bound":  # (a sum of doubles depends on how the rows were split)
            split_out, whole_out = (_approx(r[3].pop("out.csv")) for r in (split_run, whole_run))
            assert split_out == whole_out and len(split_out) > 3
        assert split_run == whole_run


def _approx(csv_bytes: bytes) -> list[list]:
    """CSV rows with every number that is not an integer as ``pytest.approx``."""
    import csv
    import io

    def cell(x: str):
        try:
            return x if x.lstrip("-").isdigit() else pytest.approx(float(x), rel=1e-12)
        except ValueError:
            return x

    return [[cell(x) for x in row] for row in csv.reader(io.StringIO(csv_bytes.decode()))]


def test_a_bad_time_in_a_later_span_names_its_line(run_cli, workdir, spans_of_run):
    planned, set_split = spans_of_run
    _write_csv(workdir / "in.csv", _events(100, 4, bad={80: "not a time"}))
    set_split(True)
    r = run_cli("adjust", *MSEC_999, "in.csv", "-o", "out.csv")
    assert r.exit_code == 1, r.stderr
    assert "in.csv: line 82, column 'time'" in r.stderr  # (row 80: line 82, after the header)
    assert len(planned[-1][0]) > 3


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_bad_rows_discarded_from_spans_as_from_the_whole(run_cli, workdir, spans_of_run, fmt):
    planned, set_split = spans_of_run
    rows = _events(100, 5, bad={30: "", 77: "yesterday"})
    if fmt == "csv":
        _write_csv(workdir / "in.csv", rows, extra={50: '"x","k1",1,9', 90: "nope"})
    else:
        _write_jsonl(workdir / "in.jsonl", rows, extra={50: "[1, 2]", 90: "{nope"})
    args = [
        "adjust",
        *MSEC_999,
        "--bad-rows",
        "discard",
        f"in.{fmt}",
        "-o",
        "out.csv",
        "--discards",
        "late.csv",
    ]
    split_run, whole_run = _both(
        run_cli, workdir, set_split, planned, args, ["out.csv", "late.csv"]
    )
    assert split_run[0] == 0, split_run
    assert split_run == whole_run
    late = split_run[3]["late.csv"].decode()
    # rows 30 and 77 (after the line put in before row 49), the lines put in at 50 and 90
    for line in {"csv": (32, 51, 80, 91), "jsonl": (31, 51, 79, 91)}[fmt]:
        assert f"in.{fmt} line {line}" in late, late


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["local-cluster", "connect"])
def test_spans_on_a_cluster_and_through_spark_connect(workers, workdir, kind):
    """Spans read by executors of their own (local-cluster) and through Spark Connect give
    what the whole file gives; -v says how the input was read (Parquet: by Spark's reader,
    also through Spark Connect)."""
    import re

    from tests.where import Worker

    if kind not in workers:
        workers[kind] = Worker(kind)
    w = workers[kind]
    _write_csv(workdir / "in.csv", _events(120, 6))
    env = {"EVTIME_DRIVER_IO_MAX": "0", "EVTIME_SPLIT_MIN_CORES": "1"}
    got = []
    # (the whole run last: the worker's session keeps the setting of its last run)
    for size in (SPAN_BYTES, "134217728"):
        conf = ["--conf", f"spark.sql.files.maxPartitionBytes={size}"]
        args = ["explain", "adjust", "-v", *conf, *MSEC_999, "in.csv"]
        code, out, err, exc = w.run([*args, "-o", "ex.csv", "--overwrite"], None, env)
        assert code == 0, (err, exc)
        got.append((out, (workdir / "ex.csv").read_bytes()))
        spans = re.search(r"in\.csv in (\d+) spans", err)
        assert (spans is not None and int(spans.group(1)) > 10) == (size == SPAN_BYTES), err
    assert got[0] == got[1]
    sample = str(Path(__file__).parent.parent / "samples" / "tuples.parquet")
    code, out, err, exc = w.run(["adjust", "-v", *MSEC_999, sample], None, env)
    assert code == 0, (err, exc)
    assert "evtime: input read by Spark's Parquet reader" in err, err


def test_a_split_file_on_s3_as_a_local_one(run_cli, workdir, spans_of_run, s3, bucket):
    planned, set_split = spans_of_run
    _write_jsonl(workdir / "in.jsonl", _events(120, 7))
    s3.put(str(workdir / "in.jsonl"), f"{bucket}/big/in.jsonl")
    set_split(True)
    got = []
    for src in (f"s3://{bucket}/big/in.jsonl", "in.jsonl"):
        r = run_cli("explain", "adjust", "-v", *MSEC_999, src)
        assert r.exit_code == 0, r.stderr
        assert "in.jsonl in " in r.stderr and len(planned[-1][0]) > 10
        got.append(r.stdout)
    assert got[0] == got[1].replace("in.jsonl", f"s3://{bucket}/big/in.jsonl")


def test_files_are_read_whole_on_fewer_cores_than_asked(
    run_cli, workdir, spans_of_run, monkeypatch
):
    planned, set_split = spans_of_run
    _write_csv(workdir / "in.csv", _events(120, 8))
    set_split(True)
    monkeypatch.setenv("EVTIME_SPLIT_MIN_CORES", "3")  # the tests' Spark has 2 cores
    r = run_cli("adjust", "-v", *MSEC_999, "in.csv")
    assert r.exit_code == 0, r.stderr
    assert planned[-1] == {} and "evtime: input read by pyarrow in 1 Spark task\n" in r.stderr
    monkeypatch.setenv("EVTIME_SPLIT_MIN_CORES", "many")
    r = run_cli("adjust", *MSEC_999, "in.csv")
    assert r.exit_code == 2 and "EVTIME_SPLIT_MIN_CORES takes a number" in r.stderr


def test_rows_of_a_span_are_told_by_their_lines(tmp_path):
    from evtime.io.reader import ReadOptions, _Problems

    data = _csv_text([[str(i), "k", "v"] for i in range(30)])
    f = _file(tmp_path, data, "csv")
    spans = _spans(f, len(data), 40)
    s = spans[3]
    probs = _Problems(f, ReadOptions(), s)
    assert probs.rows(0, 2) == f"line {s.first_line} to line {s.first_line + 1}"
    assert _Problems(f, ReadOptions()).rows(0, 2) == "rows 1-2"  # (a whole file: data rows)


def test_parquet_row_groups_and_spans_in_one_input(run_cli, workdir, spans_of_run):
    """A Parquet file of several row groups (its rows numbered as read) next to a split
    CSV file (its spans numbered after the read): arrivals as when nothing is split."""
    import pyarrow.parquet as pq

    planned, set_split = spans_of_run
    rows = _events(60, 9)
    table = pa.table({n: [r[i] for r in rows] for i, n in enumerate(["time", "key", "value"])})
    pq.write_table(
        table.set_column(2, "value", table.column(2).cast(pa.float64())),
        workdir / "a.parquet",
        row_group_size=7,
    )
    _write_csv(workdir / "b.csv", _events(90, 10))
    args = ["explain", "adjust", *MSEC_999, "a.parquet", "b.csv", "-o", "out.csv"]
    split_run, whole_run = _both(run_cli, workdir, set_split, planned, args, ["out.csv"])
    assert split_run[0] == 0, split_run
    assert split_run == whole_run
