"""`evtime bound` / `explain bound` on the seeds' worked examples, through the CLI.

Seed 004 (SQLstream, strict bounds): an inclusive 11:00-12:00 window cannot be produced
until a bound *past* 12:00 says the last 12:00 trade has been seen; a 12:00 trade is in
both the 11-12 and the 12-13 window.  Seed 003 (StreamInsight CTIs): the three
AdvanceTimeGenerationSettings (1, -1 tick) Adjust, (1, 0) Adjust, (1, d) Drop.
"""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLES

try:
    from tests.model.bound import Event, bound
except ImportError:  # pragma: no cover
    from model.bound import Event, bound

# also on local-cluster and through Spark Connect (tests/where.py)
pytestmark = pytest.mark.everywhere

TRADES = SAMPLES / "bound" / "trades.csv"
CTI = SAMPLES / "bound" / "cti.csv"
DAY = "2006-09-11T"


def _h(hhmm: str) -> str:
    return f"{DAY}{hhmm}:00.000000000Z"


def _windows(rows, *aggs):
    return [
        (r["window_start"], r["window_end"], *[r[a] for a in aggs], r["rows"], r["closed_by"])
        for r in rows
    ]


def test_sqlstream_non_strict_bound_at_noon_does_not_close_11_12(run_cli):
    r = run_cli(
        "bound",
        "--window", "1h",
        "--window-end", "inclusive",
        "--bound-marker", "kind=bound",
        "--agg", "sum(shares) AS shares",
        "--agg", "array_join(collect_list(ticker), ' ') AS tickers",
        TRADES,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    rows = r.csv()
    for row in rows:
        row["tickers"] = " ".join(sorted(row["tickers"].split()))
    # the bound row at 12:00 (arrival 4) is non-strict: another 12:00 trade (GOOG, arrival
    # 5) may still come, so 11-12 waits for the bound at 12:30 (arrival 7)
    assert _windows(rows, "shares", "tickers") == [
        (_h("11:00"), _h("12:00"), "1000", "GOOG IBM MSFT ORCL", "4", "7"),
        # the noon trades are also in 12-13; a non-strict 13:00 bound cannot close it
        (_h("12:00"), _h("13:00"), "1200", "GOOG IBM YHOO", "3", ""),  # ("": at the end)
        (_h("13:00"), _h("14:00"), "600", "ORCL", "1", ""),
    ]
    assert "read 9, released 6, discarded 0" in r.stderr and "bound rows 3" in r.stderr


def test_sqlstream_strict_bound_at_noon_closes_11_12(run_cli):
    r = run_cli(
        "bound",
        "--window", "1h",
        "--window-end", "inclusive",
        "--bound-marker", "kind=bound",
        "--strict-bounds",
        "--tick", "1ms",
        "--agg", "sum(shares) AS shares",
        "--output-format", "jsonl",
        TRADES,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    # strict at 12:00 == non-strict 12:00:00.001 (SQLstream's 1 ms): 11-12 is final at
    # arrival 4; the second noon trade (GOOG) then breaks the promise and is dropped
    assert [(o["window_start"], o["shares"], o["rows"], o["closed_by"]) for o in r.jsonl()] == [
        (_h("11:00"), 600, 3, 4),
        (_h("12:00"), 800, 2, 8),  # strict 13:00 bound: past 13:00 by a tick
        (_h("13:00"), 600, 1, None),  # flushed at the end of the input
    ]
    assert "discarded 1" in r.stderr


HOUR = 3600 * 1_000_000_000


def _trades() -> list:
    """trades.csv as the model's events (its bound rows: kind=bound)."""
    import csv
    from datetime import datetime

    def ns(text: str) -> int:  # (whole seconds, UTC)
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()) * 10**9

    with open(TRADES, newline="") as f:
        rows = list(csv.DictReader(f))
    return [Event((), ns(r["time"]), is_bound=r["kind"] == "bound") for r in rows]


def test_explain_bound_sqlstream(run_cli):
    r = run_cli(
        "explain", "bound",
        "--window", "1h",
        "--window-end", "inclusive",
        "--bound-marker", "kind=bound",
        "--format", "csv",
        TRADES,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    header = r.stdout.splitlines()[0].replace('"', "").split(",")
    assert header == [
        "arrival", "source", "time", "evtime", "decision", "bound", "released_by",
        "output_pos", "windows", "reason", "kind", "ticker", "shares",
    ]  # fmt: skip
    rows = r.csv()
    # the model's run of the same file: every row's decision, bound after it, windows, and
    # (a row is held until its last window is final) its last window's place in the output
    wins, ex = bound(_trades(), size=HOUR, inclusive_end=True, bounds="markers")
    place = {(w.start, w.end): (i, w.closed_by) for i, w in enumerate(wins, start=1)}
    want = []
    for e in ex:
        last = place.get(e.windows[-1]) if e.windows else None
        want.append(
            (
                e.decision,
                "" if e.bound is None else _iso(e.bound),
                " ".join(f"[{_iso(s)},{_iso(t)}]" for s, t in e.windows),
                "" if last is None or last[1] is None else str(last[1]),
                "" if last is None else str(last[0]),
            )
        )
    got = [(x["decision"], x["bound"], x["windows"], x["released_by"], x["output_pos"])
           for x in rows]  # fmt: skip
    assert got == want
    # no discard: a reason only for the rows whose last window is flushed at the end
    assert [x["reason"] for x in rows] == [e.reason or "" for e in ex]
    assert {x["reason"] for x in rows} == {"", "held to the end of input"}


@pytest.mark.parametrize("rows_here", ["default", "0"])
def test_closed_by_is_an_integer_and_null_at_the_end(run_cli, tmp_path, monkeypatch, rows_here):
    """``closed_by`` is int64 in Parquet, null for a window flushed at the end of the input,
    whether the windows are made in this process or (EVTIME_DRIVER_ROWS_MAX=0, on inputs
    read in Spark tasks) in Spark; explain bound's ``released_by`` likewise, as the model's,
    and the reason of a row whose last window is flushed says so."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if rows_here == "0":
        monkeypatch.setenv("EVTIME_DRIVER_ROWS_MAX", "0")
    opts = ["--window", "1h", "--window-end", "inclusive", "--bound-marker", "kind=bound",
            "--strict-bounds", "--tick", "1ms"]  # fmt: skip
    r = run_cli("bound", *opts, "--agg", "sum(shares) AS s", TRADES, "-o", tmp_path / "w.parquet")
    assert r.exit_code == 0, r.stderr
    t = pq.read_table(tmp_path / "w.parquet")
    wins, ex = bound(
        _trades(), size=HOUR, inclusive_end=True, bounds="markers", strict_bounds=True, tick=10**6
    )
    assert t.schema.field("closed_by").type == pa.int64()
    assert t.column("closed_by").to_pylist() == [w.closed_by for w in wins]
    assert None in t.column("closed_by").to_pylist()
    r = run_cli("explain", "bound", *opts, TRADES, "-o", tmp_path / "why.parquet")
    assert r.exit_code == 0, r.stderr
    t = pq.read_table(tmp_path / "why.parquet")
    assert t.schema.field("released_by").type == pa.int64()
    closed = {(w.start, w.end): w.closed_by for w in wins}
    assert t.column("released_by").to_pylist() == [
        closed[e.windows[-1]] if e.windows else None for e in ex
    ]
    held = [(x or "").endswith("held to the end of input") for x in t.column("reason").to_pylist()]
    assert held == [(e.reason or "").endswith("held to the end of input") for e in ex]
    assert any(held)


# ---------------------------------------------------------------- StreamInsight (seed 003)

SEC = 1_000_000_000
CTI_TIMES = [("a", 1), ("b", 2), ("dup", 2), ("c", 5), ("late", 3), ("d", 9), ("e", 14)]
BASE = 1304244000 * SEC  # 2011-05-01T10:00:00Z


def _iso(ns: int) -> str:
    from tests.model.adjust import iso

    return iso(ns)


@pytest.mark.parametrize(
    "delay,late,window,expect",
    [
        # (1, -1 tick), Adjust: the CTI is one tick past each event, so each event's window
        # closes at its own arrival; a duplicate start time is late and moved up a tick
        ("-1ns", "adjust", "1ns", {"a": "1", "b": "2", "c": "4", "d": "6", "e": "7"}),
        # (1, 0), Adjust: the CTI is at the event: duplicates are kept, and an event counts
        # only once a later start time arrives
        ("0ns", "adjust", "1ns", {"a": "2", "b": "4", "dup": "4", "c": "6", "e": ""}),
        # (1, d), Drop: the CTI trails the largest start by d; rows behind it are dropped
        ("1s", "drop", "5s", {"a": "6", "c": "7", "e": ""}),  # ("": at the end)
    ],
)
def test_streaminsight_cti_settings(run_cli, delay, late, window, expect):
    r = run_cli(
        "bound",
        "--window", window,
        "--bounds", "cti",
        "--cti-every", "1",
        f"--cti-delay={delay}",
        "--late", late,
        "--agg", "array_join(collect_list(id), ' ') AS ids",
        CTI,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    size = {"1ns": 1, "5s": 5 * SEC}[window]
    wins, ex = bound(
        [Event((), BASE + s * SEC, value=name) for name, s in CTI_TIMES],
        size=size,
        bounds="cti",
        cti_every=1,
        cti_delay={"-1ns": -1, "0ns": 0, "1s": SEC}[delay],
        late=late,
    )
    rows = r.csv()
    assert [(x["window_start"], sorted(x["ids"].split()), x["closed_by"]) for x in rows] == [
        (_iso(w.start), sorted(w.values), str(w.closed_by or "")) for w in wins
    ]
    closed = {i: x["closed_by"] for x in rows for i in x["ids"].split()}
    for name, by in expect.items():
        assert closed[name] == by, name
    decisions = [e.decision for e in ex]
    if delay == "-1ns":
        assert decisions[2] == "adjusted" and "adjusted 2" in r.stderr  # dup and late
    elif delay == "0ns":
        assert decisions[2] == "released" and decisions[4] == "adjusted"
    else:
        assert decisions == ["released"] * 4 + ["discarded", "released", "released"]
        assert "discarded 1" in r.stderr and "late" not in closed
