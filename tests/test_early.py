"""Work a run does while Spark starts (``evtime.runner.inputs.start``'s ``meanwhile``): from
the footers and the times of local Parquet inputs, the search's carry (adjust, merge) and
explain adjust's pass over the times.  The run takes it only when it fits what it then
reads; the output is the same as when it finds all of that after Spark has started."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from evtime.engine.adjust import EarlyExplain
from evtime.engine.adjust import in_place as adjust_in_place
from evtime.engine.adjust.in_place import EarlyAdjust
from evtime.engine.scan import Carry
from evtime.runner import inputs as reading

BASE = 1_700_000_000_000_000_000


def _events(path, n: int, seed: int) -> str:
    """``n`` rows ~1 us apart, every 13th one 40-90 us late, in row groups of 500."""
    times = [
        BASE + i * 1000 + (seed * 37 + i * 101) % 700 - (50_000 + i % 5 * 10_000) * (i % 13 == 0)
        for i in range(n)
    ]
    table = pa.table({"time": pa.array(times, pa.timestamp("ns")), "v": list(range(n))})
    pq.write_table(table, path, row_group_size=500)
    return str(path)


@pytest.fixture
def found(monkeypatch):
    """What each inputs.start found while Spark started (``Read.found_early``), in order."""
    seen: list = []
    start = reading.start

    def recording(inp, *args, **kw):
        got = start(inp, *args, **kw)
        seen.append(got.found_early)
        return got

    monkeypatch.setattr(reading, "start", recording)
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")  # (read in Spark tasks, as big inputs)
    return seen


CASES = {
    # (row groups of 500 rows, 500 us each: ordered in place when the range is shorter)
    "adjust": (["adjust", "--unit", "usec", "--range", "20"], EarlyAdjust, "parquet"),
    # (the same, told the row groups do not fit: the shuffle, with the search's carry)
    "adjust-shuffled": (["adjust", "--unit", "usec", "--range", "20"], EarlyAdjust, "parquet"),
    "explain": (
        ["explain", "adjust", "--unit", "usec", "--range", "20", "--format", "csv"],
        EarlyExplain,
        "csv",
    ),
    "merge": (["merge", "--unit", "usec", "--range", "30"], tuple, "parquet"),
}


@pytest.mark.parametrize("case", CASES)
def test_what_is_found_while_spark_starts_changes_nothing(
    case, found, run_cli, tmp_path, monkeypatch
):
    args, kind, ext = CASES[case]
    if case == "adjust-shuffled":
        monkeypatch.setattr(adjust_in_place, "fits", lambda *a: False)
    inputs = [_events(tmp_path / f"in{i}.parquet", 3000, i) for i in range(2)]
    if case != "merge":
        inputs = inputs[:1]
    early = run_cli(*args, *inputs, "-o", tmp_path / f"early.{ext}")
    assert early.exit_code == 0, early.stderr
    # the same run finding it all after Spark has started
    monkeypatch.setattr(reading, "in_background", lambda *a: lambda: None)
    late = run_cli(*args, *inputs, "-o", tmp_path / f"late.{ext}")
    assert late.exit_code == 0, late.stderr
    assert isinstance(found[0], kind) and found[1] is None
    if case == "merge":  # (the carry per source looked up by its number, Carry.of)
        assert found[0][1]._by_number is not None
    if case.startswith("adjust"):  # (the row groups, or, when they do not fit, the carry)
        shuffled = case == "adjust-shuffled"
        assert (found[0].here is None, isinstance(found[0].carry, Carry)) == (shuffled, shuffled)
    assert (tmp_path / f"early.{ext}").read_bytes() == (tmp_path / f"late.{ext}").read_bytes()
    said = [re.sub(r"\(\d+\.\ds\)", "", r.stderr) for r in (early, late)]
    assert said[0] == said[1] and int(re.search(r"discarded (\d+)", said[0])[1]) > 0


def test_nothing_is_looked_for_when_the_run_cannot_use_it(found, run_cli, tmp_path):
    """--discards (adjust's prefix scan), --key, and inputs that are not Parquet."""
    path = _events(tmp_path / "in.parquet", 600, 0)
    csv = tmp_path / "in.csv"
    pcsv.write_csv(pq.read_table(path), csv)
    for args in (
        ["adjust", "--unit", "usec", "--range", "9", "--discards", tmp_path / "d.csv", path],
        ["adjust", "--unit", "usec", "--range", "9", "--key", "v", path],
        ["adjust", "--unit", "usec", "--range", "9", csv],
    ):
        r = run_cli(*args, "-o", tmp_path / "out.csv", "--overwrite")
        assert r.exit_code == 0, r.stderr
    assert found == [None, None, None]


def test_a_carry_for_other_limits_is_not_taken(spark):
    """classify_in_order finds the carry itself when the one found early does not fit."""
    import numpy as np

    from evtime.engine.adjust import AdjustSpec, classify_in_order
    from evtime.engine.scan import AsRead, apply_in_parts

    vals = [5, 1, 9, 2, 30, 3, 31, 4]
    df = spark.createDataFrame([(v, i) for i, v in enumerate(vals)], "_evt_t long, _evt_seq long")

    def times():
        yield np.arange(len(vals)), np.array(vals, np.int64)

    spec = AdjustSpec("nsec", 3)
    wrong = Carry((), (0, 1, 3), {(): np.full(1023, 0, np.int64)})  # (everything passed)
    rows, step = classify_in_order(df, spec, (1, 31), AsRead(times=times), wrong)
    assert step.carry is not wrong
    kept = {r["_evt_seq"]: r["_evt_keep"] for r in apply_in_parts(rows, step).collect()}
    # a row is discarded when an earlier arrival has evtime > its evtime + 3
    want = {i: all(vals[j] <= v + 3 for j in range(i)) for i, v in enumerate(vals)}
    assert kept == want


def test_adjust_makes_no_pass_over_the_times_the_footers_rule_out():
    """early_adjust decides from the footers' greatest time per row group when they show
    the groups do not fit: one pass over the times (the carry's), not two."""
    import numpy as np

    from evtime.engine.adjust import AdjustSpec
    from evtime.engine.adjust.in_place import early_adjust
    from evtime.io.reader import Footing

    passes = []

    def known(us: list[int]) -> Footing:
        vals = np.array(us, np.int64) * 1000

        def times():
            passes.append(1)
            yield np.arange(len(vals)), vals

        tops = tuple((i, int(vals[i : i + 4].max())) for i in range(0, len(vals), 4))
        return Footing(len(vals), 0, int(vals.min()), int(vals.max()), "", tops, times, (12,))

    spec = AdjustSpec("usec", 5)  # (groups of 4 rows; the second moves 4 us: no fit)
    got = early_adjust(spec, known([10, 20, 30, 40, 41, 42, 43, 44, 90, 95, 99, 100]))
    assert got.here is None and isinstance(got.carry, Carry) and len(passes) == 1
    passes.clear()  # (the second moves 20 us: the pass is made and finds them fitting)
    got = early_adjust(spec, known([10, 20, 30, 40, 41, 50, 43, 60, 90, 95, 99, 100]))
    assert got.here is not None and got.carry is None and len(passes) == 1
