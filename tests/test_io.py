"""Input and output: arrival order over many files, ns round trip, formats, stdin/stdout."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import SAMPLES, SEED_PATTERN

BASE = 1_600_000_000_000_000_000


def test_arrival_order_over_many_files_of_different_sizes(run_cli, workdir):
    # 14 CSV files, sizes 1..400 rows, given as a glob (sorted by name); Spark would
    # schedule the big ones first: arrival numbers must still follow file then row order.
    sizes = [3, 400, 1, 57, 250, 9, 120, 2, 333, 18, 75, 5, 200, 40]
    n = 0
    for i, size in enumerate(sizes):
        lines = ["id,time"]
        for _ in range(size):
            lines.append(f"{n},{BASE + ((n * 7919) % 1000) * 1000}")
            n += 1
        (workdir / f"part-{i:02d}.csv").write_text("\n".join(lines) + "\n")
    r = run_cli(
        "explain",
        "adjust",
        "--unit",
        "nsec",
        "--range",
        "0",
        "--time-format",
        "epoch_ns",
        "--format",
        "csv",
        "part-*.csv",
    )
    assert r.exit_code == 0, r.stderr
    rows = r.csv()
    assert [int(x["id"]) for x in rows] == list(range(n))
    assert [int(x["arrival"]) for x in rows] == list(range(1, n + 1))
    assert rows[0]["source"] == "part-00.csv" and rows[-1]["source"] == "part-13.csv"


def test_parquet_ns_round_trip(run_cli, workdir):
    times = [BASE + 1, BASE + 999_999_999, BASE - 5, BASE + 123_456_789]
    pq.write_table(
        pa.table({"time": pa.array(times, pa.timestamp("ns")), "v": [1, 2, 3, 4]}), "in.parquet"
    )
    r = run_cli(
        "adjust", "--unit", "nsec", "--range", "2000000000", "in.parquet", "-o", "out.parquet"
    )
    assert r.exit_code == 0, r.stderr
    out = pq.read_table("out.parquet")
    assert out.schema.field("time").type == pa.timestamp("ns")
    assert out.schema.field("evtime").type == pa.timestamp("ns", "UTC")
    assert out.column("time").cast(pa.int64()).to_pylist() == sorted(times)
    assert out.column("evtime").cast(pa.int64()).to_pylist() == sorted(times)
    assert out.column("v").to_pylist() == [3, 1, 4, 2]
    # times in output order are delta-encoded; the other columns keep the dictionary
    chunks = pq.ParquetFile("out.parquet").metadata.row_group(0)
    encodings = {chunks.column(i).path_in_schema: chunks.column(i).encodings for i in range(3)}
    assert "DELTA_BINARY_PACKED" in encodings["time"]
    assert "DELTA_BINARY_PACKED" in encodings["evtime"]
    assert "RLE_DICTIONARY" in encodings["v"]


def test_parquet_encodings_only_for_flat_schemas_with_times():
    from evtime.io.writer import parquet_encodings

    flat = pa.schema([("t", pa.timestamp("ns")), ("k", pa.string())])
    assert parquet_encodings(flat) == {
        "use_dictionary": ["k"],
        "column_encoding": {"t": "DELTA_BINARY_PACKED"},
    }
    # (a nested column's leaves have other names than its field: pyarrow's defaults)
    assert parquet_encodings(pa.schema([*flat, ("s", pa.struct([("x", pa.int64())]))])) == {}
    assert parquet_encodings(pa.schema([("k", pa.string())])) == {}


def test_csv_columns_come_out_unchanged(run_cli, workdir):
    r = run_cli(
        "adjust",
        "--unit",
        "sec",
        "--range",
        "1",
        "--time-format",
        SEED_PATTERN,
        SAMPLES / "tuples.csv",
    )
    assert r.exit_code == 0, r.stderr
    first = r.csv()[0]
    assert first == {
        "tuple": "A",
        "time": "2009/03/01 12:15:22:345678901",
        "evtime": "2009-03-01T12:15:22.000000000Z",
    }


def test_jsonl_output_and_as(run_cli, workdir):
    r = run_cli(
        "adjust",
        "--unit",
        "msec",
        "--range",
        "999",
        "--as",
        "t_adj",
        SAMPLES / "tuples.parquet",
        "-o",
        "out.jsonl",
    )
    assert r.exit_code == 0, r.stderr
    with open("out.jsonl") as fh:
        rows = [json.loads(line) for line in fh]
    assert [x["tuple"] for x in rows] == list("BADCE")
    assert rows[0]["t_adj"] == "2009-03-01T12:15:22.123000000Z"


def test_stdin_to_stdout(run_cli):
    data = (SAMPLES / "tuples.csv").read_text()
    r = run_cli(
        "adjust", "--unit", "msec", "--range", "999", "--time-format", SEED_PATTERN, "-", input=data
    )
    assert r.exit_code == 0, r.stderr
    assert [x["tuple"] for x in r.csv()] == list("BADCE")


def test_order_by_column(run_cli, workdir):
    # the file lists E..A (reversed); column seq gives the seed's order A=1 .. E=5
    lines = (SAMPLES / "tuples.csv").read_text().splitlines()[1:]
    body = [f"{i + 1},{line}" for i, line in enumerate(lines)][::-1]
    (workdir / "rev.csv").write_text("seq,tuple,time\n" + "\n".join(body) + "\n")
    common = ["adjust", "--unit", "usec", "--range", "999", "--time-format", SEED_PATTERN]
    by_seq = run_cli(*common, "--order-by", "seq", "rev.csv")
    assert by_seq.exit_code == 0, by_seq.stderr
    assert [x["tuple"] for x in by_seq.csv()] == ["A", "C", "E"]  # seed's usec/999 table
    by_file = run_cli(*common, "rev.csv")
    assert [x["tuple"] for x in by_file.csv()] == ["E"]  # E first: every other is too late
