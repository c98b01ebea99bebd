"""SPEC read adversarially (issue 47, "Keep looking"): ties, zero and huge ranges, --wait 0,
one source and fifty, all-null aggregates, hopping windows at exact boundaries; each through
the CLI against the reference models in tests/model/."""

from __future__ import annotations

import pytest

from tests.model.adjust import adjust as model_adjust
from tests.model.adjust import iso
from tests.model.bound import Event
from tests.model.bound import bound as model_bound
from tests.model.merge import Arrival, merge_output
from tests.model.merge import merge as model_merge

S = 1_000_000_000
DAY = 86_400 * S
T0 = 1_672_531_200 * S  # 2023-01-01T00:00:00Z


def _released(rows) -> list[tuple[str, int]]:
    """(evtime text, arrival) of released rows in output order, from the adjust model."""
    kept = sorted((r for r in rows if r.decision == "released"), key=lambda r: r.output_pos)
    return [(iso(r.evtime), r.arrival) for r in kept]


# ---------------------------------------------------------------- adjust


def test_adjust_ties_with_range_zero_keep_arrival_order(run_cli, workdir):
    """Equal adjusted times (sub-unit parts differ) at range 0: ties by arrival; a row one
    unit behind the reference is discarded, one in the same unit is not."""
    ns = [T0 + 900, T0 + 100, T0 + S + 5, T0 + 999_999_999, T0 + S, T0 + S + 1]
    (workdir / "in.csv").write_text("time,i\n" + "".join(f"{t},{i}\n" for i, t in enumerate(ns, 1)))
    r = run_cli("adjust", "--unit", "sec", "--range", "0", "--time-format", "epoch_ns", "in.csv")
    assert r.exit_code == 0, r.stderr
    want = _released(model_adjust([((), t) for t in ns], S, 0))
    assert [(x["evtime"], int(x["i"])) for x in r.csv()] == want
    assert len(want) < len(ns)  # the discard is exercised


def test_adjust_huge_range(run_cli, workdir):
    """The widest range int64 nanoseconds hold discards nothing (no overflow, no wrapped
    bound); a wider one is one clear usage line, never a raw error."""
    ns = [T0 + 5 * DAY, T0, T0 - 400 * DAY, T0 + 9 * DAY, T0 + DAY]
    (workdir / "in.csv").write_text("time\n" + "".join(f"{t}\n" for t in ns))
    widest = (2**63 - 1) // DAY
    args = ["adjust", "--unit", "day", "--time-format", "epoch_ns", "in.csv", "--range"]
    r = run_cli(*args, str(widest))
    assert r.exit_code == 0 and r.exception is None, r.stderr
    want = [e for e, _ in _released(model_adjust([((), t) for t in ns], DAY, widest))]
    assert [x["evtime"] for x in r.csv()] == want
    assert len(want) == len(ns)
    for wider in (widest + 1, 2**62):
        r = run_cli(*args, str(wider))
        assert r.exit_code == 2 and r.exception is None
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
        assert str(wider) in r.stderr


# ---------------------------------------------------------------- merge


def _write_sources(workdir, sources):
    names = []
    for s, rows in enumerate(sources):
        name = f"s{s:02d}.csv"
        (workdir / name).write_text(
            "time,recv,j\n" + "".join(f"{iso(t)},{iso(a)},{j}\n" for j, (t, a) in enumerate(rows))
        )
        names.append(name)
    return names


def test_merge_wait_zero(run_cli, workdir):
    """--wait 0s: a row is discarded when its time is below its arrival time (exactly equal
    is fine); the definitive time is the arrival time itself."""
    a = [(T0 + 2 * S, T0 + 2 * S), (T0 + 1 * S, T0 + 3 * S), (T0 + 5 * S, T0 + 5 * S)]
    b = [(T0 + 4 * S, T0 + 4 * S), (T0 + 4 * S, T0 + 4 * S), (T0 + 6 * S, T0 + 7 * S)]
    names = _write_sources(workdir, [a, b])
    r = run_cli("explain", "merge", "--arrival", "recv", "--wait", "0s", "--format", "csv",
                *names)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    src = [[Arrival(i, t, arrival_time=x) for t, x in rows] for i, rows in enumerate((a, b))]
    want = model_merge(src, wait=0)
    got = [(x["decision"], x["bound"], x["released_by"], x["output_pos"]) for x in r.csv()]
    assert got == [
        (w.decision, iso(w.bound), str(w.released_by or ""), str(w.output_pos or "")) for w in want
    ]
    assert {w.decision for w in want} == {"released", "discarded"}


@pytest.mark.parametrize("n", [1, 50])
def test_merge_one_source_and_fifty(run_cli, workdir, n):
    sources = [[(T0 + ((s * 7 + j * 13) % 40) * S, T0) for j in range(3)] for s in range(n)]
    names = _write_sources(workdir, sources)
    r = run_cli("merge", "--format", "csv", *names)
    assert r.exit_code == 0, r.stderr
    want = merge_output([[Arrival(s, t) for t, _ in rows] for s, rows in enumerate(sources)])
    got = [(x["source"], int(x["j"]), x["evtime"]) for x in r.csv()]
    assert got == [(names[s], j, iso(ev)) for s, j, ev in want]


# ---------------------------------------------------------------- bound


def test_bound_all_null_aggregates(run_cli, workdir):
    """A window whose values are all null: count(v) 0, sum/avg/max null (empty in CSV), the
    window still counted with its rows."""
    rows = [(T0 + 1 * S, ""), (T0 + 3 * S, ""), (T0 + 12 * S, "4"), (T0 + 15 * S, "")]
    (workdir / "in.csv").write_text("time,v\n" + "".join(f"{iso(t)},{v}\n" for t, v in rows))
    r = run_cli("bound", "--window", "10s", "--agg", "count(v) AS n", "--agg", "sum(v) AS s",
                "--agg", "avg(v) AS a", "--agg", "max(v) AS m", "in.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    wins, _ = model_bound(
        [Event((), t, value=float(v) if v else None) for t, v in rows], size=10 * S
    )
    want = []
    for w in wins:
        vals = [v for v in w.values if v is not None]
        want.append({
            "window_start": iso(w.start), "rows": str(w.rows), "n": str(len(vals)),
            "s": "" if not vals else str(int(sum(vals))),
            "a": None if not vals else sum(vals) / len(vals),
            "m": "" if not vals else str(int(max(vals))),
        })  # fmt: skip
    got = [{k: x[k] for k in ("window_start", "rows", "n", "s", "a", "m")} for x in r.csv()]
    for g in got:
        g["a"] = float(g["a"]) if g["a"] else None
    assert got == want
    assert want[0]["s"] == ""  # an all-null window is exercised


@pytest.mark.parametrize("end", ["exclusive", "inclusive"])
def test_hopping_windows_at_exact_boundaries(run_cli, workdir, end):
    """Rows exactly on window starts and ends of 10s windows sliding by 5s (offset 2s): which
    windows each enters and when each window closes, as the model says."""
    secs = [2, 7, 12, 12, 17, 11, 22, 27, 32]  # every one on a boundary; 11 late
    ns = [T0 + s * S for s in secs]
    (workdir / "in.csv").write_text("time\n" + "".join(f"{iso(t)}\n" for t in ns))
    r = run_cli("explain", "bound", "--window", "10s", "--slide", "5s", "--offset", "2s",
                "--window-end", end, "--format", "csv", "in.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    _, rows = model_bound([Event((), t) for t in ns], size=10 * S, slide=5 * S, offset=2 * S,
                          inclusive_end=end == "inclusive")  # fmt: skip
    close = "]" if end == "inclusive" else ")"
    want = [
        (b.decision, " ".join(f"[{iso(s)},{iso(e)}{close}" for s, e in b.windows))
        for b in rows
    ]  # fmt: skip
    got = [(x["decision"], x["windows"]) for x in r.csv()]
    assert got == want
    r = run_cli("bound", "--window", "10s", "--slide", "5s", "--offset", "2s",
                "--window-end", end, "--agg", "count(*) AS n", "in.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    wins, _ = model_bound([Event((), t) for t in ns], size=10 * S, slide=5 * S, offset=2 * S,
                          inclusive_end=end == "inclusive")  # fmt: skip
    assert [(x["window_start"], x["n"], x["closed_by"]) for x in r.csv()] == [
        (iso(w.start), str(w.rows), str(w.closed_by or "")) for w in wins
    ]
