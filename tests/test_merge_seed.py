"""Seeds 004 (SQLstream UNION ALL, producers entering and leaving) and 001 (Apama definitive
time) through `evtime explain merge`, row by row, from the CSV files in samples/merge; every
run is also compared with the reference model (tests/model/merge.py)."""

from __future__ import annotations

import csv
from datetime import datetime

import pytest

from tests.conftest import SAMPLES

try:
    from tests.model.adjust import iso
    from tests.model.merge import Arrival, merge
except ImportError:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from model.adjust import iso
    from model.merge import Arrival, merge

# also on local-cluster and through Spark Connect (tests/where.py)
pytestmark = pytest.mark.everywhere

MERGE = SAMPLES / "merge"
DAY = "2006-10-10T"


def ns(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()) * 10**9


def at(clock: str) -> str:
    """'10:04' or '10:03:30' -> the ISO text explain prints."""
    clock = clock if clock.count(":") == 2 else clock + ":00"
    return f"{DAY}{clock.zfill(8)}.000000000Z"


def model_rows(sources, time_col, order_col, wall_clock, **options):
    """The reference model on the same files: (name, path) per source."""
    arrivals = []
    for s, (_, path) in enumerate(sources):
        with open(MERGE / path) as f:
            arrivals.append(
                [
                    Arrival(
                        s,
                        ns(r[time_col]),
                        r.get("kind") == "bound",
                        ns(r[order_col]) if wall_clock else int(r[order_col]),
                    )
                    for r in csv.DictReader(f)
                ]
            )
    return merge(arrivals, **options)


def reasons(text: str) -> set[str]:
    return {w for w in ("own bound", "stream bound", "wait") if w in (text or "")}


def explain(run_cli, sources, *options):
    args = [f"{name}={MERGE / path}" for name, path in sources]
    r = run_cli("explain", "merge", "--format", "csv", *options, *args)
    assert r.exit_code == 0, r.stderr
    return r.csv(), r.stderr


def same_as_model(rows, model, names):
    assert len(rows) == len(model)
    for row, m in zip(rows, model, strict=True):
        assert row["arrival"] == str(m.arrival)
        assert row["source"] == names[m.source]
        assert row["evtime"] == iso(m.evtime)
        assert row["decision"] == m.decision, row
        assert row["bound"] == iso(m.bound), row
        assert row["released_by"] == ("" if m.released_by is None else str(m.released_by)), row
        assert row["output_pos"] == ("" if m.output_pos is None else str(m.output_pos)), row
        if m.decision == "discarded":
            assert reasons(row["reason"]) == reasons(m.reason), (row, m.reason)


UNION = ["--order-by", "seq", "--bound-marker", "kind=bound"]


def test_union_all_waits_for_the_trades_bound(run_cli):
    """ORCL 10:01, YHOO 10:02, MSFT 10:04, IBM 10:03, Orders.bound 10:06, Trades.bound 10:05:
    MSFT cannot flow through the union until Trades promises 10:05."""
    sources = [("Orders", "orders.csv"), ("Trades", "trades.csv")]
    rows, stderr = explain(run_cli, sources, *UNION)
    assert [r["ticker"] for r in rows] == ["ORCL", "YHOO", "MSFT", "IBM", "", ""]
    assert [r["decision"] for r in rows] == ["released"] * 4 + ["bound"] * 2
    assert [r["bound"] for r in rows] == [
        "",
        at("10:01"),
        at("10:02"),
        at("10:03"),
        at("10:03"),
        at("10:05"),
    ]
    assert [r["released_by"] for r in rows] == ["2", "3", "6", "4", "", ""]
    assert [r["output_pos"] for r in rows] == ["1", "2", "4", "3", "", ""]
    # blame: MSFT waited 3 arrivals for Trades, which was at 10:02 when MSFT arrived
    assert rows[2]["reason"].startswith("held 3 arrivals")
    assert "source Trades held the definitive time at " + at("10:02") in rows[2]["reason"]
    assert "Orders: read 3, released 2, discarded 0, bound rows 1" in stderr
    model = model_rows(sources, "rowtime", "seq", False)
    same_as_model(rows, model, ["Orders", "Trades"])


def test_union_all_earlier_goog_trade_goes_first(run_cli):
    """Without a Trades bound, GOOG 10:03:30 arrives and is output before MSFT 10:04."""
    sources = [("Orders", "orders.csv"), ("Trades", "trades_goog.csv")]
    rows, _ = explain(run_cli, sources, *UNION)
    by = {r["ticker"]: r for r in rows}
    assert by["GOOG"]["decision"] == "released" and by["GOOG"]["released_by"] == "6"
    # nothing ever promised 10:04 on Trades: released at the end (null), and said so
    assert by["MSFT"]["released_by"] == "" and by["MSFT"]["decision"] == "released"
    assert by["MSFT"]["reason"].startswith("held to the end of input: at its arrival ")
    order = sorted((int(r["output_pos"]), r["ticker"]) for r in rows if r["output_pos"])
    assert [t for _, t in order] == ["ORCL", "YHOO", "IBM", "GOOG", "MSFT"]
    same_as_model(rows, model_rows(sources, "rowtime", "seq", False), ["Orders", "Trades"])


def test_released_by_is_an_integer_in_parquet(run_cli, tmp_path):
    """explain merge's ``released_by``: int64 in Parquet, null for MSFT, released only at
    the end of the input (nothing ever promised 10:04 on Trades), as in the model."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sources = [("Orders", "orders.csv"), ("Trades", "trades_goog.csv")]
    args = [f"{name}={MERGE / path}" for name, path in sources]
    r = run_cli("explain", "merge", *UNION, *args, "-o", tmp_path / "why.parquet")
    assert r.exit_code == 0, r.stderr
    t = pq.read_table(tmp_path / "why.parquet")
    assert t.schema.field("released_by").type == pa.int64()
    model = model_rows(sources, "rowtime", "seq", False)
    assert t.column("released_by").to_pylist() == [m.released_by for m in model]
    assert None in [m.released_by for m in model if m.decision == "released"]


def test_producers_entering_and_leaving(run_cli):
    """P1 asserts 10:00 and inserts 10:00; P2 joins at 10:05, its 9:59 row is late; P1
    leaves and P2's 10:05 row flows; all leave; P3 comes later and cannot insert 10:04."""
    sources = [("P1", "p1.csv"), ("P2", "p2.csv"), ("P3", "p3.csv")]
    rows, stderr = explain(run_cli, sources, *UNION, "--join-leave")
    assert [r["decision"] for r in rows] == [
        "bound",
        "released",
        "bound",
        "released",
        "discarded",
        "bound",
        "bound",
        "discarded",
        "released",
    ]
    ten = at("10:00")
    assert [r["bound"] for r in rows] == [ten] * 5 + [at("10:05"), "", "", ""]
    assert rows[1]["released_by"] == "2"
    assert rows[3]["released_by"] == "6"  # the departure of P1 let the stream advance
    assert reasons(rows[4]["reason"]) == {"own bound", "stream bound"}
    assert reasons(rows[7]["reason"]) == {"stream bound"}  # the stream remembers 10:05
    assert "the stream bound " + at("10:05") in rows[7]["reason"]
    assert rows[8]["released_by"] == "9"
    assert [r["output_pos"] for r in rows] == ["", "1", "", "2", "", "", "", "", "3"]
    assert "P3: read 2, released 1, discarded 1" in stderr
    model = model_rows(sources, "rowtime", "seq", False, join_leave=True)
    same_as_model(rows, model, ["P1", "P2", "P3"])


APAMA = ["--arrival", "wall", "--time", "sourceTime"]


def test_apama_single_input_wait_2_hours(run_cli):
    rows, _ = explain(run_cli, [("E", "apama_single.csv")], *APAMA, "--wait", "2h")
    assert [r["bound"] for r in rows] == [
        at(t) for t in ("08:00", "08:05", "08:30", "08:32", "08:50", "10:30")
    ]
    assert [r["decision"] for r in rows] == ["discarded"] * 2 + ["released"] * 4  # too old
    assert all(reasons(r["reason"]) == {"wait"} for r in rows[:2])
    assert [r["released_by"] for r in rows] == ["", "", "3", "4", "5", "6"]
    model = model_rows(
        [("E", "apama_single.csv")], "sourceTime", "wall", True, wait=2 * 3600 * 10**9
    )
    same_as_model(rows, model, ["E"])


APAMA_WALLS = ["09:20", "09:21", "09:22", "09:23", "09:24", "09:25", "09:26", "09:27"]
APAMA_D = ["08:25", "08:25", "08:25", "08:40", "08:50", "08:50", "08:57", "08:57"]


def test_apama_inputs_e_and_x_wait_1_hour(run_cli):
    sources = [("E", "apama_e.csv"), ("X", "apama_x.csv")]
    rows, _ = explain(run_cli, sources, *APAMA, "--wait", "1h")
    after_wall = {}  # the seed shows the definitive time after the last arrival at a wall time
    for r in rows:
        after_wall[r["wall"]] = r["bound"]
    # (the row's own arrival column, as the file has it)
    assert list(after_wall) == [f"{DAY}{w}:00Z" for w in APAMA_WALLS]
    assert list(after_wall.values()) == [at(t) for t in APAMA_D]
    assert all(r["decision"] == "released" for r in rows)
    by = {(r["source"], r["time"]): r for r in rows}
    # 09:23: X 08:50 makes E 08:30, 08:32, 08:40 definitive (arrival 5)
    assert [by[("E", at(t))]["released_by"] for t in ("08:30", "08:32", "08:40")] == ["5"] * 3
    # 09:00 and 09:10 wait for the timer at 10:10: in a file, the end-of-input flush
    assert by[("E", at("09:00"))]["released_by"] == ""  # (null: at the end)
    assert by[("E", at("09:10"))]["released_by"] == ""
    model = model_rows(sources, "sourceTime", "wall", True, wait=3600 * 10**9)
    same_as_model(rows, model, ["E", "X"])
