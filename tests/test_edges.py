"""Times at the edges of the int64 ns timeline (1677-09-21T00:12:43.145224192Z ...
2262-04-11T23:47:16.854775807Z) and ranges / waits / windows that reach past them
(issues 47 and 49): every command computes, nothing is discarded for it, and the results
are the reference models' (tests/model, Python ints: no overflow) with every time they
compute past an edge shown as that edge (saturated, see evtime/engine/saturate.py)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evtime.units import UNITS
from tests.model.adjust import adjust as model_adjust
from tests.model.adjust import iso

MIN, MAX = -(1 << 63), (1 << 63) - 1
DAY = UNITS["day"]
Y1900 = -2_208_988_800_000_000_000  # 1900-01-01T00:00:00Z


def clamp(x: int) -> int:
    """How a time the model computes past an edge is shown: as that edge."""
    return max(MIN, min(MAX, x))


def shown(x: int | None) -> str:
    return "" if x is None else iso(clamp(x))


def edge_times(edge: str, unit: int) -> list[int]:
    """Times near an edge of the timeline, out of order, some late for small ranges."""
    steps = [0, 1, unit, 3 * unit + 1, unit // 2, 2 * unit, 0, 5 * unit, unit + 7, 4 * unit]
    if edge == "low":
        return [MIN + s for s in steps]
    if edge == "high":
        return [MAX - 5 * unit - 7 + s for s in steps]
    return [Y1900 + s for s in steps]  # 1900: the range reaches past the first instant


def write(path, times: list[int]) -> None:
    pq.write_table(
        pa.table({"time": pa.array(times, pa.timestamp("ns")), "n": list(range(len(times)))}),
        path,
        row_group_size=4,
    )


def widest(unit: int) -> int:
    """The greatest --range the unit allows (range*unit under 2**63)."""
    return MAX // unit


CASES = [(u, e) for u in UNITS for e in ("low", "high")]


@pytest.mark.parametrize("unit,edge", CASES)
def test_explain_adjust_at_the_edges(run_cli, tmp_path, unit, edge):
    times = edge_times(edge, UNITS[unit])
    path = tmp_path / "in.parquet"
    write(path, times)
    for range_ in (1, widest(UNITS[unit])):
        r = run_cli("explain", "adjust", "--unit", unit, "--range", range_, "--format", "csv", path)
        assert r.exit_code == 0, r.stderr
        want = model_adjust([((), t) for t in times], UNITS[unit], range_)
        got = r.csv()
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g["evtime"] == shown(w.evtime)
            assert (g["decision"], g["ref"], g["bound"]) == (
                w.decision,
                shown(w.ref),
                shown(w.bound),
            )
            assert g["released_by"] == ("" if w.released_by is None else str(w.released_by))
            assert g["output_pos"] == ("" if w.output_pos is None else str(w.output_pos))


@pytest.mark.parametrize("where", ["local", "distributed"], indirect=True)
@pytest.mark.parametrize(
    "unit,edge,range_",
    [("day", "low", 1), ("day", "high", 1), ("day", "1900", 106_000), ("nsec", "low", MAX)],
)
def test_adjust_at_the_edges(run_cli, tmp_path, unit, edge, range_):
    """adjust and explain adjust, read here and in Spark tasks: the rows the model keeps,
    in its order; the 1900 case is issue 49's (a range under 292 years reaching before
    the first instant): nothing discarded."""
    times = edge_times(edge, UNITS[unit])
    path = tmp_path / "in.parquet"
    write(path, times)
    want = model_adjust([((), t) for t in times], UNITS[unit], range_)
    r = run_cli("adjust", "--unit", unit, "--range", range_, "--output-format", "csv", path)
    assert r.exit_code == 0, r.stderr
    released = sorted((w for w in want if w.output_pos), key=lambda w: w.output_pos)
    got = r.csv()
    assert [int(g["n"]) for g in got] == [w.arrival - 1 for w in released]
    assert [g["evtime"] for g in got] == [shown(w.evtime) for w in released]
    r = run_cli("explain", "adjust", "--unit", unit, "--range", range_, "--format", "csv", path)
    assert r.exit_code == 0, r.stderr
    assert [(g["decision"], g["bound"]) for g in r.csv()] == [
        (w.decision, shown(w.bound)) for w in want
    ]
