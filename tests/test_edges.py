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


def merge_sources(tmp_path, times: list[int], marks: set[int] = frozenset(), clock=None):
    """Two CSV sources (epoch ns) from ``times``, alternating; ``marks``: indexes that are
    bound rows; ``clock``: arrival ns of each row (column recv).  Returns the paths and
    the model's sources."""
    from tests.model.merge import Arrival

    paths, model = [tmp_path / "a.csv", tmp_path / "b.csv"], [[], []]
    lines = [["id,time,recv,kind"], ["id,time,recv,kind"]]
    for i, t in enumerate(times):
        s, now = i % 2, (clock[i] if clock else i)
        lines[s].append(f"r{i},{t},{now},{'bound' if i in marks else 'row'}")
        model[s].append(Arrival(s, t, i in marks, clock[i] if clock else None))
    for p, text in zip(paths, lines, strict=True):
        p.write_text("\n".join(text) + "\n")
    return paths, model


def definitive(d: int | None) -> str:
    """explain merge's bound: empty when infinite, or at or past an edge (a bound there
    holds nothing back that an infinite one would: saturated to the engine's infinities)."""
    return "" if d is None or d <= MIN or d >= MAX else iso(d)


def check_merge(run_cli, paths, want, args, rows: list[int]) -> None:
    """``rows``: the input row (its id) of each arrival of the model."""
    r = run_cli("explain", "merge", *args, "--format", "csv", *paths)
    assert r.exit_code == 0, r.stderr
    got = r.csv()
    assert [(g["decision"], g["output_pos"], g["bound"], g["evtime"]) for g in got] == [
        (w.decision, str(w.output_pos or ""), definitive(w.bound), shown(w.evtime)) for w in want
    ]
    r = run_cli("merge", *args, "--output-format", "csv", *paths)
    assert r.exit_code == 0, r.stderr
    released = sorted((w for w in want if w.output_pos), key=lambda w: w.output_pos)
    assert [g["id"] for g in r.csv()] == [f"r{rows[w.arrival - 1]}" for w in released]


MARKS = {5}  # one bound row


@pytest.mark.parametrize(
    "unit,edge",
    [(u, e) for u in ("nsec", "usec", "day") for e in ("low", "high")] + [("day", "1900")],
)
def test_merge_unit_range_at_the_edges(run_cli, tmp_path, unit, edge):
    """merge --unit/--range (each source adjusted first, its bound ref - range*unit) with a
    bound row, --strict-bounds (t + tick past the last instant), explain merge too."""
    from tests.model.merge import merge as model_merge

    u = UNITS[unit]
    times = edge_times(edge, u)
    paths, model = merge_sources(tmp_path, times, MARKS)
    for range_ in (1, 106_000 if edge == "1900" else widest(u)):
        want = model_merge(model, unit_ns=u, range_n=range_, strict_bounds=True, tick=u)
        args = ["--time-format", "epoch_ns", "--bound-marker", "kind=bound"]
        args += ["--unit", unit, "--range", str(range_), "--strict-bounds", "--tick", f"{u}ns"]
        # (no clock: the sources one after the other, rows 0, 2, 4... then 1, 3, 5...)
        check_merge(run_cli, paths, want, args, [*range(0, 10, 2), *range(1, 10, 2)])


@pytest.mark.parametrize(
    "edge,wait", [("1900", 100_000 * DAY), ("low", DAY), ("1900", (1 << 63) - 1)]
)
def test_merge_wait_at_the_edges(run_cli, tmp_path, edge, wait):
    """merge --arrival --wait: ``now - wait`` before the first instant holds nothing back
    and discards nothing (issue 49: --wait 100000d over times in 1900)."""
    from tests.model.merge import merge as model_merge

    times = edge_times(edge, 1_000)
    clock = [t + 10 * i for i, t in enumerate(sorted(times))]  # (arrival: ascending, near)
    paths, model = merge_sources(tmp_path, times, clock=clock)
    want = model_merge(model, wait=wait)
    args = ["--time-format", "epoch_ns", "--arrival", "recv", "--wait", f"{wait}ns"]
    # (with a clock: every row in arrival order, which is the order of the rows here)
    order = [i for _, i in sorted((c, i) for i, c in enumerate(clock))]
    check_merge(run_cli, paths, want, args, order)
