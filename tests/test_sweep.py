"""evtime sweep: every setting's row equals what the operator does with that one setting,
checked against the plain-Python reference models (tests/model/) on random streams, and
the seed's known results as acceptance."""

from __future__ import annotations

import csv
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import SAMPLES
from tests.examples import spark_settings
from tests.model.adjust import adjust as model_adjust

BASE = 1_235_909_722_000_000_000
MS = 1_000_000

SETTINGS = spark_settings(8)


def _seconds(ns: int | None) -> int | str:
    """A hold as :func:`_csv` reads it back: ns; '' when there is none."""
    return "" if ns is None else ns


HOLDS = ("max_hold_s", "mean_hold_s")  # seconds, numbers (the unit in the name)


def sweep_rows(r) -> list[dict]:
    """The sweep's CSV rows (of a run's Result, or of CSV text), its holds read as numbers
    of seconds and given in ns (a float's shortest text reads back to the float: exact to
    the ns at these sizes)."""
    rows = list(csv.DictReader(io.StringIO(r))) if isinstance(r, str) else r.csv()
    for row in rows:
        for c in HOLDS:
            row[c] = "" if row[c] == "" else round(float(row[c]) * 1e9)
    return rows


def expected_adjust(arrivals, unit_ns: int, range_n: int) -> dict[str, str]:
    """One sweep row, as CSV text, from the reference model of `evtime adjust`."""
    rows = model_adjust(arrivals, unit_ns, range_n)
    kept = [r for r in rows if r.decision == "released"]
    by_arrival = [r for r in kept if r.released_by is not None]  # (None: at the end)
    # the reference time at release: the releasing arrival's (same key) ref after it
    holds = [rows[r.released_by - 1].ref - r.evtime for r in by_arrival]
    return {
        "range": str(range_n),
        "released": str(len(kept)),
        "discarded": str(len(rows) - len(kept)),
        "held_at_end": str(len(kept) - len(by_arrival)),
        "max_hold_rows": str(max((r.released_by - r.arrival for r in by_arrival), default="")),
        "max_hold_s": _seconds(max(holds, default=None)),
        "mean_hold_s": _seconds(sum(holds) // len(holds) if holds else None),
    }


streams = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(-3_000, 3_000)), min_size=1, max_size=50
)


@SETTINGS
@given(
    rows=streams,
    ranges=st.lists(st.integers(0, 3_000), min_size=1, max_size=4),
    keyed=st.booleans(),
)
def test_sweep_adjust_equals_model(run_cli, tmp_path, rows, ranges, keyed):
    path = tmp_path / "in.parquet"
    times = [BASE + d * 777_000 for _, d in rows]  # 0.777 ms apart: msec truncation matters
    pq.write_table(
        pa.table({"k": [k for k, _ in rows], "time": pa.array(times, pa.timestamp("ns"))}),
        path,
        row_group_size=7,  # several reading tasks and scan chunks
    )
    r = run_cli(
        "sweep",
        "adjust",
        "--unit",
        "msec",
        "--range",
        ",".join(map(str, ranges)),
        "--format",
        "csv",
        path,
        *(["--key", "k"] if keyed else []),
    )
    assert r.exit_code == 0, r.stderr
    arrivals = [((k,) if keyed else (), t) for (k, _), t in zip(rows, times, strict=True)]
    assert sweep_rows(r) == [expected_adjust(arrivals, MS, n) for n in ranges]
    assert f"read {len(rows)}, {len(ranges)} settings" in r.stderr


# seed 000 (README table): (unit, range) -> (released, discarded)
SEED = {
    ("sec", 1): (5, 0),
    ("sec", 0): (4, 1),
    ("msec", 999): (5, 0),
    ("usec", 999): (3, 2),
}


@pytest.mark.parametrize("unit", ["sec", "msec", "usec"])
def test_sweep_adjust_seed(run_cli, unit):
    ranges = sorted({n for u, n in SEED if u == unit} | {0, 999})
    r = run_cli(
        "sweep",
        "adjust",
        "--unit",
        unit,
        "--range",
        ",".join(map(str, ranges)),
        "--format",
        "jsonl",
        SAMPLES / "tuples.parquet",
    )
    assert r.exit_code == 0, r.stderr
    got = r.jsonl()
    assert [g["range"] for g in got] == ranges
    for g in got:
        if (unit, g["range"]) in SEED:
            assert (g["released"], g["discarded"]) == SEED[unit, g["range"]]
        assert g["released"] + g["discarded"] == 5
    if unit == "usec":
        # the seed's usec table: A released by C (arrival 3), C by E (5), E at the end
        assert got[1] == {
            "range": 999,
            "released": 3,
            "discarded": 2,
            "held_at_end": 1,
            "max_hold_rows": 2,
            "max_hold_s": 1.0,  # C (23.123456) released when E moved ref to 24.123456
            "mean_hold_s": 0.888889,  # (0.777778 s for A + 1 s for C) / 2
        }


def test_sweep_adjust_single_runs_agree(run_cli):
    """The sweep's counts are those of separate `evtime adjust` runs (seed sample)."""
    r = run_cli(
        "sweep",
        "adjust",
        "--unit",
        "sec",
        "--range",
        "0,1",
        "--format",
        "csv",
        SAMPLES / "tuples.parquet",
    )
    assert r.exit_code == 0, r.stderr
    for row in r.csv():
        one = run_cli(
            "adjust", "--unit", "sec", "--range", row["range"], SAMPLES / "tuples.parquet"
        )
        assert one.exit_code == 0, one.stderr
        assert f"released {row['released']}, discarded {row['discarded']}" in one.stderr, one.stderr


@pytest.mark.parametrize(
    "ranges, words",
    [("0,x", "integers separated by commas"), ("-1", ">= 0"), (",", "at least one")],
)
def test_sweep_bad_settings_are_usage_errors(run_cli, ranges, words):
    r = run_cli("sweep", "adjust", "--unit", "sec", "--range", ranges, SAMPLES / "tuples.parquet")
    assert r.exit_code == 2
    assert words in r.stderr


def test_sweep_table_on_request(run_cli):
    r = run_cli(
        "sweep",
        "adjust",
        "--unit",
        "usec",
        "--range",
        "999",
        "--format",
        "table",
        SAMPLES / "tuples.parquet",
    )
    assert r.exit_code == 0, r.stderr
    head, rule, row = r.stdout.splitlines()
    assert head.split() == [
        "range",
        "released",
        "discarded",
        "held_at_end",
        "max_hold_rows",
        "max_hold_s",
        "mean_hold_s",
    ]
    assert set(rule.replace(" ", "")) == {"-"}
    assert row.split() == ["999", "3", "2", "1", "2", "1", "0.888889"]


# ---------------------------------------------------------------- merge --wait

try:
    from tests.model.merge import Arrival, processing_order
    from tests.model.merge import merge as model_merge
except ImportError:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from model.merge import Arrival, processing_order
    from model.merge import merge as model_merge


def expected_merge(arrivals, wait_text: str, wait: int, **options) -> dict[str, str]:
    """One sweep row, as CSV text, from the reference model of `evtime merge --wait`."""
    rows = model_merge(arrivals, wait=wait, **options)
    clock = [arrivals[s][j].arrival_time for s, j in processing_order(arrivals)]
    kept = [r for r in rows if r.decision == "released"]
    by_arrival = [r for r in kept if r.released_by is not None]  # (None: at the end)
    holds = [clock[r.released_by - 1] - clock[r.arrival - 1] for r in by_arrival]
    return {
        "wait": wait_text,
        "released": str(len(kept)),
        "discarded": str(sum(r.decision == "discarded" for r in rows)),
        "held_at_end": str(len(kept) - len(by_arrival)),
        "max_hold_rows": str(max((r.released_by - r.arrival for r in by_arrival), default="")),
        "max_hold_s": _seconds(max(holds, default=None)),
        "mean_hold_s": _seconds(sum(holds) // len(holds) if holds else None),
    }


@st.composite
def merge_cases(draw):
    sources = []
    for s in range(draw(st.integers(1, 3))):
        t, rows = 10**12 + draw(st.integers(0, 3000)), []
        for j in range(draw(st.integers(1, 6))):
            t += draw(st.integers(-2500, 3000))
            bound = draw(st.integers(0, 4)) == 0
            rows.append((f"s{s}r{j}", t, bound, t + draw(st.integers(0, 5000))))
        sources.append(rows)
    options = {"join_leave": draw(st.booleans()), "strict_bounds": draw(st.booleans())}
    waits = draw(st.lists(st.integers(0, 5000), min_size=1, max_size=3))
    return sources, options, waits


@SETTINGS
@given(merge_cases())
def test_sweep_merge_equals_model(run_cli, tmp_path, case):
    sources, options, waits = case
    paths = []
    for s, rows in enumerate(sources):
        with open(tmp_path / f"s{s}.csv", "w") as f:
            f.write("id,time,recv,kind\n")
            f.writelines(f"{i},{t},{a},{'bound' if b else 'row'}\n" for i, t, b, a in rows)
        paths.append(f"S{s}={tmp_path}/s{s}.csv")
    flags = ["--join-leave"] if options["join_leave"] else []
    flags += ["--strict-bounds", "--tick", "1ns"] if options["strict_bounds"] else []
    r = run_cli(
        "sweep",
        "merge",
        "--time-format",
        "epoch_ns",
        "--bound-marker",
        "kind=bound",
        "--arrival",
        "recv",
        "--wait",
        ",".join(f"{w}ns" for w in waits),
        "--format",
        "csv",
        *flags,
        *paths,
    )
    assert r.exit_code == 0, r.stderr
    arrivals = [[Arrival(s, t, b, a) for _, t, b, a in rows] for s, rows in enumerate(sources)]
    assert sweep_rows(r) == [expected_merge(arrivals, f"{w}ns", w, **options) for w in waits]


APAMA = ["E=" + str(SAMPLES / "merge/apama_e.csv"), "X=" + str(SAMPLES / "merge/apama_x.csv")]


def test_sweep_merge_seed(run_cli):
    """Seed 001's inputs E and X (wait 1 h in the seed): the sweep agrees with the model
    and with a single `evtime merge` run."""
    args = ["--arrival", "wall", "--time", "sourceTime", *APAMA]
    r = run_cli("sweep", "merge", "--wait", "0s,30m,1h", "--format", "csv", *args)
    assert r.exit_code == 0, r.stderr
    import csv

    arrivals = []
    for s, path in enumerate(APAMA):
        with open(path.split("=", 1)[1]) as f:
            arrivals.append(
                [
                    Arrival(s, _ns(row["sourceTime"]), False, _ns(row["wall"]))
                    for row in csv.DictReader(f)
                ]
            )
    hour = 3_600_000_000_000
    want = [
        expected_merge(arrivals, t, w) for t, w in (("0s", 0), ("30m", hour // 2), ("1h", hour))
    ]
    assert sweep_rows(r) == want
    assert want[2]["discarded"] == "0" and want[0]["released"] == "0"  # the seed keeps all
    one = run_cli("merge", "--wait", "30m", *args)
    assert one.exit_code == 0, one.stderr
    row = want[1]
    assert f"released {row['released']}, discarded {row['discarded']};" in one.stderr


def _ns(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()) * 10**9


# ---------------------------------------------------------------- bound --cti-delay / --window

try:
    from tests.model.bound import Event
    from tests.model.bound import bound as model_bound
except ImportError:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from model.bound import Event
    from model.bound import bound as model_bound


def expected_bound(events, setting: str, text: str, **cfg) -> dict[str, str]:
    """One sweep row, as CSV text, from the reference model of `evtime bound`: a row is
    held until its last window closes (a row in no window is not held)."""
    wins, rows = model_bound(events, **cfg)
    closed = {(w.key, w.start): w.closed_by for w in wins}
    kept = [r for r in rows if r.decision in ("released", "adjusted")]
    held = []  # (hold in arrivals, hold in time) of rows released by an arrival
    for r in kept:
        if not r.windows:
            held.append((0, 0))
            continue
        by = closed[r.key, max(s for s, _ in r.windows)]
        if by is not None:  # (None: flushed at the end)
            held.append((by - r.arrival, rows[by - 1].bound - r.evtime))
    holds = [t for _, t in held]
    return {
        setting: text,
        "released": str(len(kept)),
        "discarded": str(sum(r.decision == "discarded" for r in rows)),
        "held_at_end": str(len(kept) - len(held)),
        "max_hold_rows": str(max((n for n, _ in held), default="")),
        "max_hold_s": _seconds(max(holds, default=None)),
        "mean_hold_s": _seconds(sum(holds) // len(holds) if holds else None),
    }


@SETTINGS
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 5000)), min_size=1, max_size=40
    ),
    every=st.integers(1, 3),
    delays=st.lists(st.integers(-5, 3000), min_size=1, max_size=3),
    keyed=st.booleans(),
)
def test_sweep_bound_cti_delay_equals_model(run_cli, tmp_path, rows, every, delays, keyed):
    path = tmp_path / "in.csv"
    path.write_text("k,time\n" + "".join(f"{k},{10**12 + t}\n" for k, t in rows))
    listed = ",".join(f"{d}ns" for d in delays)
    r = run_cli(
        "sweep", "bound", "--time-format", "epoch_ns", "--window", "1000ns",
        "--bounds", "cti", "--cti-every", every, f"--cti-delay={listed}",
        "--format", "csv", path, *(["--key", "k"] if keyed else []),
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    events = [Event((k,) if keyed else (), 10**12 + t) for k, t in rows]
    want = [
        expected_bound(
            events, "cti_delay", f"{d}ns", size=1000, bounds="cti", cti_every=every, cti_delay=d
        )
        for d in delays
    ]
    assert sweep_rows(r) == want


@SETTINGS
@given(
    rows=st.lists(st.integers(0, 5000), min_size=1, max_size=40),
    sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=3),
    late=st.sampled_from(["drop", "adjust"]),
)
def test_sweep_bound_window_equals_model(run_cli, tmp_path, rows, sizes, late):
    path = tmp_path / "in.csv"
    path.write_text("time\n" + "".join(f"{10**12 + t}\n" for t in rows))
    r = run_cli(
        "sweep", "bound", "--time-format", "epoch_ns", "--late", late,
        "--window", ",".join(f"{s}ns" for s in sizes), "--format", "csv", path,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    events = [Event((), 10**12 + t) for t in rows]
    want = [expected_bound(events, "window", f"{s}ns", size=s, late=late) for s in sizes]
    assert sweep_rows(r) == want


def test_sweep_bound_seed_cti(run_cli):
    """samples/bound/cti.csv (a CTI after every row), each delay as the model has it: a late
    row is dropped at delay 0 and kept from 2 s on; -1ns also drops the duplicate time; 5 s
    holds everything to the end."""
    import csv
    import datetime as dt

    path = SAMPLES / "bound/cti.csv"
    delays = {"-1ns": -1, "0s": 0, "2s": 2 * 10**9, "5s": 5 * 10**9}
    r = run_cli(
        "sweep", "bound", "--window", "10s", "--bounds", "cti", "--cti-every", "1",
        f"--cti-delay={','.join(delays)}", "--format", "csv", path,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    with open(path, newline="") as fh:
        times = [dt.datetime.fromisoformat(row["time"]) for row in csv.DictReader(fh)]
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    events = [Event((), (t - epoch) // dt.timedelta(microseconds=1) * 1000) for t in times]
    want = [
        expected_bound(
            events, "cti_delay", text, size=10 * 10**9, bounds="cti", cti_every=1, cti_delay=d
        )
        for text, d in delays.items()
    ]
    assert sweep_rows(r) == want
    # (the story above, in the model's numbers)
    assert [(w["released"], w["discarded"]) for w in want] == [
        ("5", "2"), ("6", "1"), ("7", "0"), ("7", "0")
    ]  # fmt: skip


def test_sweep_bound_one_list_at_a_time(run_cli):
    r = run_cli(
        "sweep", "bound", "--window", "1s,2s", "--bounds", "cti", "--cti-every", "1",
        "--cti-delay", "0s,1s", SAMPLES / "bound/cti.csv",
    )  # fmt: skip
    assert r.exit_code == 2 and "one setting at a time" in r.stderr


def test_sweep_counts_bad_rows_as_discarded_by_every_setting(run_cli, workdir):
    """--bad-rows discard: a bad line is discarded whatever the setting, as in adjust."""
    src = workdir / "in.csv"
    src.write_text(
        "id,time\n"
        "a,2009-03-01T12:00:01Z\n"
        "b,not a time\n"
        "c,2009-03-01T12:00:00Z\n"
        "d,2009-03-01T12:00:03Z\n"
    )
    r = run_cli(
        "sweep", "adjust", "--unit", "sec", "--range", "0,5", "--bad-rows", "discard",
        "--format", "csv", src,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    got = {row["range"]: (row["released"], row["discarded"]) for row in r.csv()}
    assert got == {"0": ("2", "2"), "5": ("3", "1")}
    assert "read 4," in r.stderr
    for rng in ("0", "5"):
        one = run_cli(
            "adjust", "--unit", "sec", "--range", rng, "--bad-rows", "discard", src, "-o", "-"
        )
        released, discarded = got[rng]
        assert f"released {released}, discarded {discarded}" in one.stderr, one.stderr
