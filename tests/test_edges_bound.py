"""``bound``, ``explain bound`` and ``sweep`` at the edges of the int64 ns timeline
(1677-09-21T00:12:43.145224192Z ... 2262-04-11T23:47:16.854775807Z), issues 47 and 49:
windows that start before the first instant or end past the last one, ``--offset`` far
from the times, ``--slide``, ``--cti-delay``, ``--unit/--range`` reaching past an edge.
Expectations from the reference model (tests/model/bound.py, Python ints: no overflow),
every time it computes past an edge shown as that edge (saturated)."""

from __future__ import annotations

import pytest

from evtime.units import UNITS
from tests.model.adjust import iso
from tests.model.bound import Event
from tests.model.bound import bound as model_bound
from tests.test_edges import MAX, MIN, edge_times, shown, write


def settings(unit: int, edge: str) -> list[tuple[list[str], dict]]:
    """(command-line options, model keywords) of the settings tried near an edge: windows
    that straddle it (an --offset far from the times), hopping windows (high edge: several
    end past the last instant), inclusive ends, CTI bounds, --unit/--range."""
    size = 3 * unit + 2
    far = MAX - 12345 if edge == "low" else MIN + 12345  # (an --offset far from the times)
    out = [
        (["--window", f"{size}ns", "--offset", f"{far}ns"], dict(size=size, offset=far)),
        (
            ["--window", f"{size}ns", "--window-end", "inclusive", "--offset", f"{unit}ns"]
            + ["--bounds", "cti", "--cti-every", "2", "--cti-delay", f"{unit}ns"],
            dict(size=size, inclusive_end=True, offset=unit)
            | dict(bounds="cti", cti_every=2, cti_delay=unit),
        ),
        (
            ["--window", f"{size}ns", "--unit", "nsec", "--range", str(MAX // 2)],
            dict(size=size, unit_ns=1, range_n=MAX // 2),
        ),
    ]
    if edge != "low":  # (hopping windows that start before the first instant: see below)
        out.append(
            (
                ["--window", f"{size}ns", "--slide", f"{unit + 1}ns", "--late", "adjust"],
                dict(size=size, slide=unit + 1, late="adjust"),
            )
        )
    if edge == "high":  # (a window starts at the last instant: its end is past it)
        out.append(
            (
                ["--window", f"{size}ns", "--offset", f"{MAX % size}ns"],
                dict(size=size, offset=MAX % size),
            )
        )
    if edge == "1900":
        out.append(
            (
                ["--window", "1d", "--unit", "day", "--range", "106000"],
                dict(size=UNITS["day"], unit_ns=UNITS["day"], range_n=106_000),
            )
        )
    return out


def window_text(ws, inclusive: bool) -> str:
    close = "]" if inclusive else ")"
    return " ".join(f"[{shown(s)},{shown(e)}{close}" for s, e in ws)


CASES = [(u, e) for u in UNITS for e in ("low", "high")] + [("day", "1900")]


# (small inputs: the windows are searched in evtime's process; "spark": as for inputs too
# big for it, read by Spark's tasks, the windows and their search in Spark: ~5x the time,
# so one unit)
BOUND_CASES = [(u, e, "here") for u, e in CASES] + [("nsec", "high", "spark")]


@pytest.mark.parametrize("unit,edge,search", BOUND_CASES)
def test_bound_at_the_edges(run_cli, tmp_path, monkeypatch, unit, edge, search):
    """bound and explain bound: the windows (start, end, rows, closing arrival, in release
    order) and every row's decision, bound and windows are the model's."""
    if search == "spark":
        monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
        monkeypatch.setenv("EVTIME_DRIVER_ROWS_MAX", "0")
    times = edge_times(edge, UNITS[unit]) + ([MAX] if edge == "high" else [])
    path = tmp_path / "in.parquet"
    write(path, times)
    for opts, kw in settings(UNITS[unit], edge):
        windows, rows = model_bound([Event((), t) for t in times], **kw)
        r = run_cli("bound", *opts, "--agg", "count(*) AS n", "--output-format", "csv", path)
        assert r.exit_code == 0, (opts, r.stderr)
        got = [(g["window_start"], g["window_end"], g["rows"], g["closed_by"]) for g in r.csv()]
        assert got == [
            (shown(w.start), shown(w.end), str(w.rows), str(w.closed_by or "")) for w in windows
        ], opts
        r = run_cli("explain", "bound", *opts, "--format", "csv", path)
        assert r.exit_code == 0, (opts, r.stderr)
        got = [(g["decision"], g["bound"], g["evtime"], g["windows"]) for g in r.csv()]
        inclusive = kw.get("inclusive_end", False)
        assert got == [
            (w.decision, shown(w.bound), shown(w.evtime) if w.decision != "bound" else "",
             window_text(w.windows, inclusive))
            for w in rows
        ], opts  # fmt: skip


@pytest.mark.parametrize("unit", list(UNITS))
def test_hopping_windows_before_the_first_instant(run_cli, tmp_path, unit):
    """Hopping windows of a row on 1677-09-21 that start before the first instant: two
    such windows would both be written as starting at the first instant, so bound refuses
    with one line naming the row's time (no Spark error); a time clear of them is fine."""
    u = UNITS[unit]
    size, slide = 3 * u + 2, u + 1
    path = tmp_path / "in.parquet"
    write(path, [MIN + 1, MIN + 4 * size])
    for cmd in (["bound", "--agg", "count(*)"], ["explain", "bound"]):
        r = run_cli(*cmd, "--window", f"{size}ns", "--slide", f"{slide}ns", path)
        assert r.exit_code == 1, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Exception" not in r.stderr, r.stderr
        assert iso(MIN + 1) in lines[0] and "first instant" in lines[0], lines[0]
    write(path, [MIN + 4 * size, MIN + 5 * size])
    times = [MIN + 4 * size, MIN + 5 * size]
    windows, _ = model_bound([Event((), t) for t in times], size=size, slide=slide)
    r = run_cli("bound", "--window", f"{size}ns", "--slide", f"{slide}ns", "--agg", "count(*)",
                "--output-format", "csv", path)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert [(g["window_start"], g["rows"]) for g in r.csv()] == [
        (shown(w.start), str(w.rows)) for w in windows
    ]


def sweep_model(times: list[int], specs: list[dict]) -> list[tuple[int, int, int]]:
    """(released, discarded, held_at_end) per setting, from the model's explanation: a
    row is held to the end when its last window is flushed at the end."""
    out = []
    for kw in specs:
        windows, rows = model_bound([Event((), t) for t in times], **kw)
        flushed = {(w.start, w.end) for w in windows if w.closed_by is None}
        released = [r for r in rows if r.decision in ("released", "adjusted")]
        held = sum(1 for r in released if r.windows and r.windows[-1] in flushed)
        out.append((len(released), sum(r.decision == "discarded" for r in rows), held))
    return out


@pytest.mark.parametrize("unit,edge", CASES)
def test_sweep_bound_at_the_edges(run_cli, tmp_path, unit, edge):
    """sweep bound over windows and over CTI delays (one far past the edge)."""
    u = UNITS[unit]
    times = edge_times(edge, u)
    path = tmp_path / "in.parquet"
    write(path, times)
    sizes = [3 * u + 2, MAX // 2]
    r = run_cli("sweep", "bound", "--window", ",".join(f"{s}ns" for s in sizes),
                "--offset", f"{u + 1}ns", "--format", "csv", path)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    want = sweep_model(times, [dict(size=s, offset=u + 1) for s in sizes])
    got = [(int(g["released"]), int(g["discarded"]), int(g["held_at_end"])) for g in r.csv()]
    assert got == want
    delays = [u, MAX // 2, MAX]
    r = run_cli("sweep", "bound", "--window", f"{3 * u + 2}ns", "--bounds", "cti",
                "--cti-every", "1", "--cti-delay", ",".join(f"{d}ns" for d in delays),
                "--format", "csv", path)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    want = sweep_model(
        times, [dict(size=3 * u + 2, bounds="cti", cti_every=1, cti_delay=d) for d in delays]
    )
    got = [(int(g["released"]), int(g["discarded"]), int(g["held_at_end"])) for g in r.csv()]
    assert got == want


@pytest.mark.parametrize("unit,edge", CASES)
def test_sweep_adjust_at_the_edges(run_cli, tmp_path, unit, edge):
    from tests.model.adjust import adjust as model_adjust

    u = UNITS[unit]
    times = edge_times(edge, u)
    path = tmp_path / "in.parquet"
    write(path, times)
    ranges = [1, 106_000 if edge == "1900" else MAX // u]
    r = run_cli("sweep", "adjust", "--unit", unit, "--range", ",".join(map(str, ranges)),
                "--format", "csv", path)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    got = [(int(g["released"]), int(g["discarded"])) for g in r.csv()]
    want = []
    for n in ranges:
        rows = model_adjust([((), t) for t in times], u, n)
        want.append((sum(w.decision == "released" for w in rows),
                     sum(w.decision == "discarded" for w in rows)))  # fmt: skip
    assert got == want


@pytest.mark.parametrize("edge", ["low", "high", "1900"])
def test_sweep_merge_at_the_edges(run_cli, tmp_path, edge):
    """sweep merge --wait (huge waits: issue 49's 100000d over times in 1900) with
    --unit/--range (a range reaching past the edge; usec: times truncated before the first
    instant are the first instant, as the model's truncation has it too): the model's
    released and discarded per wait."""
    from tests.model.merge import merge as model_merge
    from tests.test_edges import merge_sources

    times = edge_times(edge, 1_000)
    back = 100 if edge == "high" else 0  # (the arrival clock inside the timeline too)
    clock = [t + 10 * i - back for i, t in enumerate(sorted(times))]
    paths, model = merge_sources(tmp_path, times, clock=clock)
    day = UNITS["day"]
    waits = [0, 100_000 * day, MAX]
    for extra, kw in (
        ([], {}),
        (["--unit", "nsec", "--range", str(MAX // 2)], dict(unit_ns=1, range_n=MAX // 2)),
        (["--unit", "usec", "--range", str(MAX // 2000)], dict(unit_ns=1000, range_n=MAX // 2000)),
    ):
        wait = ",".join(f"{w}ns" for w in waits)
        r = run_cli("sweep", "merge", "--time-format", "epoch_ns", "--arrival", "recv",
                    *extra, "--wait", wait, "--format", "csv", *paths)  # fmt: skip
        assert r.exit_code == 0, r.stderr
        got = [(int(g["released"]), int(g["discarded"])) for g in r.csv()]
        want = []
        for w in waits:
            rows = model_merge(model, wait=w, **kw)
            want.append((sum(x.output_pos is not None for x in rows),
                         sum(x.decision == "discarded" for x in rows)))  # fmt: skip
        assert got == want, extra


SUM = """
class Sum:
    result_type = "long"

    def __init__(self):
        self.total = 0

    def add(self, v):
        self.total += v

    def remove(self, v):
        self.total -= v

    def result(self):
        return self.total
"""


@pytest.mark.parametrize("edge", ["low", "high"])
def test_user_aggregates_at_the_edges(run_cli, tmp_path, edge):
    """--udaf over windows that start before the first instant (an --offset far from the
    times) or end past the last one (hopping): each window's sum is the model's (the
    evaluation gave an OverflowError from the Python worker at the low edge)."""
    u = UNITS["sec"]
    times = edge_times(edge, u)
    path = tmp_path / "in.parquet"
    write(path, times)
    (tmp_path / "agg.py").write_text(SUM)
    size = 3 * u + 2
    kw = dict(size=size, offset=MAX - 12345) if edge == "low" else dict(size=size, slide=u + 1)
    opts = ["--window", f"{size}ns"] + (
        ["--offset", f"{kw['offset']}ns"] if "offset" in kw else ["--slide", f"{kw['slide']}ns"]
    )
    events = [Event((), t, value=n) for n, t in enumerate(times)]
    windows, _ = model_bound(events, **kw)
    r = run_cli("bound", *opts, "--udaf", f"mysum={tmp_path / 'agg.py'}:Sum",
                "--agg", "mysum(n) AS s", "--output-format", "csv", path)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    got = [(g["window_start"], g["window_end"], g["s"]) for g in r.csv()]
    assert got == [(shown(w.start), shown(w.end), str(int(sum(w.values)))) for w in windows]


def test_durations_past_the_timeline(run_cli, tmp_path):
    """A window or hop longer than the int64 ns timeline is refused in one usage line; a
    wait or CTI delay past it is the longest one (they stopped with a Py4JError from
    Spark's lit)."""
    path = tmp_path / "in.parquet"
    write(path, edge_times("1900", UNITS["sec"]))
    for args in (
        ["bound", "--window", "300000d", "--agg", "count(*)"],
        ["bound", "--window", "1m", "--slide", "300000d", "--agg", "count(*)"],
        ["sweep", "bound", "--window", "1m,300000d"],
    ):
        r = run_cli(*args, path)
        assert r.exit_code == 2, (args, r.stderr)
        assert "'300000d': longer than the int64 ns timeline" in r.stderr, r.stderr
    cti = ["sweep", "bound", "--window", "1m", "--bounds", "cti", "--cti-every", "1"]
    past = run_cli(*cti, "--cti-delay", "300000d,-300000d", "--format", "csv", path)
    longest = run_cli(*cti, "--cti-delay", f"{MAX}ns,{MIN}ns", "--format", "csv", path)
    assert past.exit_code == 0 and longest.exit_code == 0, (past.stderr, longest.stderr)
    assert [list(r.values())[1:] for r in past.csv()] == [
        list(r.values())[1:] for r in longest.csv()
    ]
    (tmp_path / "w.csv").write_text(
        "k,time,arr\nA,2009-03-01T10:00:00Z,2009-03-01T10:00:01Z\n"
        "B,2009-03-01T09:00:00Z,2009-03-01T10:00:02Z\n"
    )
    sm = ["sweep", "merge", "--arrival", "arr", "--format", "csv", tmp_path / "w.csv"]
    past, longest = run_cli(*sm, "--wait", "300000d"), run_cli(*sm, "--wait", f"{MAX}ns")
    assert past.exit_code == 0 and longest.exit_code == 0, (past.stderr, longest.stderr)
    assert [list(r.values())[1:] for r in past.csv()] == [
        list(r.values())[1:] for r in longest.csv()
    ]
