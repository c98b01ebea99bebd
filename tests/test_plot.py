"""explain --plot draws the stream; big inputs are sampled and the picture says so."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import SAMPLES


def test_plot_png_of_the_seed(run_cli, workdir):
    r = run_cli(
        "explain",
        "adjust",
        "--unit",
        "usec",
        "--range",
        "999",
        SAMPLES / "tuples.parquet",
        "--format",
        "csv",
        "--plot",
        "seed.png",
    )
    assert r.exit_code == 0, r.stderr
    png = (workdir / "seed.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert len(r.csv()) == 5  # the table is still written


def test_plot_of_a_big_input_is_sampled_and_says_so(run_cli, workdir):
    n = 45_000
    pq.write_table(
        pa.table({"time": pa.array([(i * 7919) % n * 1000 for i in range(n)], pa.timestamp("ns"))}),
        "big.parquet",
    )
    r = run_cli(
        "explain",
        "adjust",
        "--unit",
        "usec",
        "--range",
        "5",
        "big.parquet",
        "-o",
        "why.csv",
        "--plot",
        "big.svg",
    )
    assert r.exit_code == 0, r.stderr
    svg = (workdir / "big.svg").read_text()
    assert "sampled: 1 in 3 of 45000 arrivals" in svg
    assert "discarded" in svg and "reference time" in svg


def test_plot_needs_a_picture_extension(run_cli):
    r = run_cli(
        "explain",
        "adjust",
        "--unit",
        "usec",
        "--range",
        "999",
        SAMPLES / "tuples.parquet",
        "--plot",
        "x.txt",
    )
    assert r.exit_code == 2 and "--plot" in r.stderr
