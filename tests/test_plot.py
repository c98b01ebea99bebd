"""explain --plot draws the stream; big inputs are sampled and the picture says so."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import SAMPLES


def _marks(svg: str, group: str) -> list[tuple[float, float]]:
    """The (x, y) of every mark in the SVG group ``group`` (a scatter's gid)."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(svg)
    found = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("id") == group]
    return [
        (float(u.get("x")), float(u.get("y")))
        for g in found
        for u in g.iter("{http://www.w3.org/2000/svg}use")
    ]


def test_plot_svg_of_the_seed_draws_each_row_where_it_belongs(run_cli, workdir):
    """One mark per row, grouped by decision as the reference model decides, at x = its
    arrival and y = its evtime (both axes linear): a picture of other rows, or of the rows
    in another order or at other times, fails."""
    from tests.model.adjust import adjust as model_adjust

    path = SAMPLES / "tuples.parquet"
    times = pq.read_table(path).column("time").cast(pa.int64()).to_pylist()
    want = model_adjust([((), t) for t in times], 1_000, 100)
    assert {w.decision for w in want} == {"released", "discarded"}  # (both kinds drawn)
    r = run_cli("explain", "adjust", "--unit", "usec", "--range", "100", path,
                "--format", "csv", "--plot", "seed.svg")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert len(r.csv()) == len(times)  # the table is still written
    svg = (workdir / "seed.svg").read_text()
    drawn = []  # (arrival, evtime, x, y) of every mark
    for decision in ("released", "discarded"):
        rows = [w for w in want if w.decision == decision]
        marks = sorted(_marks(svg, f"rows-{decision}"))  # (by x: arrival order)
        assert len(marks) == len(rows), decision
        drawn += [(w.arrival, w.evtime, x, y) for w, (x, y) in zip(rows, marks, strict=True)]
    # both axes linear: x from the arrival number, y (downwards) from the evtime
    (a0, t0, x0, y0), (a1, t1, x1, y1) = min(drawn), max(drawn)
    per_arrival, per_ns = (x1 - x0) / (a1 - a0), (y1 - y0) / (t1 - t0)
    assert per_arrival > 0 and per_ns < 0
    for a, t, x, y in drawn:
        assert x == pytest.approx(x0 + (a - a0) * per_arrival, abs=0.01), a
        assert y == pytest.approx(y0 + (t - t0) * per_ns, abs=0.01), a


@pytest.mark.parametrize("where", ["local", "distributed"], indirect=True)
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


MERGE = SAMPLES / "merge"
BOUND = SAMPLES / "bound"


def _svg(path) -> str:
    import xml.etree.ElementTree as ET

    text = path.read_text()
    assert ET.fromstring(text).tag.endswith("svg")  # well-formed SVG
    return text


def test_explain_merge_plot_draws_the_definitive_time_and_each_source(run_cli, workdir):
    r = run_cli(
        "explain",
        "merge",
        "--order-by",
        "seq",
        "--bound-marker",
        "kind=bound",
        MERGE / "orders.csv",
        MERGE / "trades.csv",
        "--format",
        "csv",
        "--plot",
        "merge.svg",
    )
    assert r.exit_code == 0, r.stderr
    assert len(r.csv()) == 6  # the table is still written, without the picture's column
    assert "source_bound" not in r.stdout and "_evt" not in r.stdout
    svg = _svg(workdir / "merge.svg")
    for text in (
        "definitive time after arrival",
        "bound of orders.csv",
        "bound of trades.csv",
        "released",
        "bound row",
        "evtime explain merge --order-by seq --bound-marker kind=bound orders.csv trades.csv",
    ):
        assert text in svg, text
    assert "sampled" not in svg


def test_explain_bound_plot_draws_windows_and_their_closing_points(run_cli, workdir):
    r = run_cli(
        "explain",
        "bound",
        "--window",
        "1h",
        "--window-end",
        "inclusive",
        "--bound-marker",
        "kind=bound",
        "--strict-bounds",
        BOUND / "trades.csv",
        "-o",
        "why.csv",
        "--plot",
        "bound.png",
    )
    assert r.exit_code == 0, r.stderr
    png = (workdir / "bound.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert (workdir / "why.csv").exists()


def test_explain_bound_plot_of_a_big_input_is_sampled_and_says_so(run_cli, workdir, monkeypatch):
    from evtime.io import plot

    # "big" relative to the caps: 48 readings for 10 points, 10 windows for 3
    monkeypatch.setattr(plot, "MAX_POINTS", 10)
    monkeypatch.setattr(plot, "MAX_WINDOWS", 3)
    r = run_cli(
        "explain",
        "bound",
        "--window",
        "1m",
        "--key",
        "device",
        BOUND / "readings.csv",
        "-o",
        "why.csv",
        "--plot",
        "big.svg",
    )
    assert r.exit_code == 0, r.stderr
    svg = _svg(workdir / "big.svg")
    assert "sampled: 1 in 5 of 48 arrivals, and every discard" in svg
    assert "1 in 4 of 10 windows" in svg  # 22:13 to 22:17 for each of two devices
    assert "device=dev-a" in svg and "device=dev-b" in svg  # one bound line per key


def test_explain_merge_plot_of_a_big_input_is_sampled(run_cli, workdir, monkeypatch):
    from evtime.io import plot

    monkeypatch.setattr(plot, "MAX_POINTS", 4)
    r = run_cli(
        "explain",
        "merge",
        "--arrival",
        "wall",
        "--wait",
        "1h",
        "--time",
        "sourceTime",
        f"E={MERGE / 'apama_e.csv'}",
        f"X={MERGE / 'apama_x.csv'}",
        "-o",
        "why.csv",
        "--plot",
        "m.svg",
    )
    assert r.exit_code == 0, r.stderr
    svg = _svg(workdir / "m.svg")
    assert "sampled: 1 in 3 of 9 arrivals" in svg and "bound of E" in svg


def test_sample_keeps_every_discard_and_is_capped(spark, monkeypatch):
    from pyspark.sql import functions as F

    from evtime.io import plot

    monkeypatch.setattr(plot, "MAX_POINTS", 50)
    frame = (
        spark.range(1, 1001)
        .withColumnRenamed("id", "arrival")
        .withColumns(
            {
                "time": F.col("arrival") * 10,
                "evtime": F.col("arrival") * 10,
                "bound": F.col("arrival") * 10,
                "decision": F.when(F.col("arrival") % 97 == 0, "discarded").otherwise("released"),
            }
        )
    )
    rows, k = plot.sample(frame, 1000)
    assert k == 20
    assert len(rows) <= 2 * plot.MAX_POINTS
    assert {r["arrival"] for r in rows if r["decision"] == "discarded"} == set(range(97, 1001, 97))
    assert {r["arrival"] for r in rows if r["decision"] == "released"} == {
        a for a in range(20, 1001, 20) if a % 97
    }


def test_plot_path_is_checked_before_spark_starts(run_cli):
    for cmd in (["merge", "--order-by", "seq"], ["bound", "--window", "1h"]):
        r = run_cli("explain", *cmd, MERGE / "orders.csv", "--plot", "x.gif")
        assert (
            r.exit_code == 2 and "--plot x.gif: the picture must be .svg, .png or .pdf" in r.stderr
        )
