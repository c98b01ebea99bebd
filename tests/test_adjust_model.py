"""The Spark engine equals the plain-Python reference model (tests/model/adjust.py) on random
out-of-order streams, with and without keys, through `evtime explain adjust` and
`evtime adjust`."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from evtime.units import UNITS
from tests.examples import spark_settings
from tests.model.adjust import HELD_TO_END, iso
from tests.model.adjust import adjust as model_adjust

BASE = 1_235_909_722_000_000_000

streams = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-3_000, 3_000)), min_size=1, max_size=60
)


def _write(path, rows, scale: int) -> None:
    pq.write_table(
        pa.table(
            {
                "k": [k for k, _ in rows],
                "time": pa.array([BASE + d * scale for _, d in rows], pa.timestamp("ns")),
                "n": list(range(len(rows))),
            }
        ),
        path,
        row_group_size=7,  # several row groups: several reading tasks and scan chunks
    )


SETTINGS = spark_settings(8)


@pytest.mark.parametrize("where", ["local", "distributed"], indirect=True)
@SETTINGS
@given(
    rows=streams,
    unit=st.sampled_from(["nsec", "usec", "msec"]),
    range_=st.integers(0, 1500),
    keyed=st.booleans(),
    cut=st.integers(0, 60),
)
# a null key is a key of its own; ties in time across keys; a late row of the null key
@example(
    rows=[(None, 5), ("a", 9), (None, 0), ("a", 5), (None, -3000)],
    unit="usec",
    range_=2,
    keyed=True,
    cut=0,
)
@example(
    rows=[("a", 9), ("a", 0), ("a", 5), ("a", -3000)], unit="nsec", range_=0, keyed=False, cut=3
)
def test_explain_adjust_equals_model(run_cli, tmp_path, rows, unit, range_, keyed, cut):
    """Read in the driver (small inputs: the prefix scan) and in Spark tasks (the search
    in the output's parts, the reference time taken in the writer; without keys, the
    arrival numbers and carries from the times read here).  ``cut``: the rows from there
    on are a second input file (none when it is 0 or past the end)."""
    paths = [tmp_path / "in.parquet"]
    if 0 < cut < len(rows):
        paths.append(tmp_path / "in2.parquet")
        _write(paths[1], rows[cut:], 777)
    # ~0.8 us apart: usec/msec truncation merges and splits times
    _write(paths[0], rows[:cut] if len(paths) > 1 else rows, 777)
    args = ["explain", "adjust", "--unit", unit, "--range", range_, "--format", "csv", *paths]
    r = run_cli(*args, *(["--key", "k"] if keyed else []))
    assert r.exit_code == 0, r.stderr
    got = r.csv()
    want = model_adjust(
        [((k,) if keyed else (), BASE + d * 777) for k, d in rows], UNITS[unit], range_
    )
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        second = len(paths) > 1 and w.arrival > cut
        assert int(g["arrival"]) == w.arrival
        assert int(g["n"]) == w.arrival - 1 - (cut if second else 0)  # (its file's row)
        assert g["evtime"] == iso(w.evtime)
        assert g["decision"] == w.decision
        assert g["ref"] == iso(w.ref) and g["bound"] == iso(w.bound)
        assert g["released_by"] == ("" if w.released_by is None else str(w.released_by))
        assert g["output_pos"] == ("" if w.output_pos is None else str(w.output_pos))
        late = f"late: evtime {iso(w.evtime)} is below the bound {iso(w.bound)}"
        words = f"{late} (reference time - {range_} {unit})"
        words = words if w.decision == "discarded" else (w.reason or "")  # (or: held to the end)
        assert g["reason"] == words and g["source"] == str(paths[second])


@SETTINGS
@given(rows=streams, range_=st.integers(0, 3))
def test_adjust_output_equals_model(run_cli, tmp_path, rows, range_):
    path = tmp_path / "in.parquet"
    _write(path, rows, 1_000_000)  # whole milliseconds
    r = run_cli(
        "adjust",
        "--unit",
        "msec",
        "--range",
        range_,
        "--key",
        "k",
        path,
        "--discards",
        tmp_path / "late.csv",
        "--overwrite",
    )
    assert r.exit_code == 0, r.stderr
    want = model_adjust([((k,), BASE + d * 1_000_000) for k, d in rows], UNITS["msec"], range_)
    released = sorted((w for w in want if w.output_pos), key=lambda w: w.output_pos)
    assert [int(g["n"]) for g in r.csv()] == [w.arrival - 1 for w in released]
    late = (tmp_path / "late.csv").read_text().splitlines()
    assert len(late) - 1 == sum(w.decision == "discarded" for w in want)
    n_disc = len(want) - len(released)
    assert f"read {len(rows)}, released {len(released)}, discarded {n_disc}" in r.stderr


@SETTINGS
@given(
    rows=streams,
    unit=st.sampled_from(["nsec", "usec", "msec"]),
    range_=st.integers(0, 3000),
    keyed=st.booleans(),
)
def test_adjust_in_order_equals_model(run_cli, monkeypatch, tmp_path, rows, unit, range_, keyed):
    """Without --discards, adjust finds the keep flag in its output sort (the suffix-minimum
    search over value-ordered parts, with their halo and carry): same rows, same order.
    (Read and written in Spark tasks, as big inputs are: a small input read in the driver
    takes the prefix scan instead.)"""
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    path = tmp_path / "in.parquet"
    _write(path, rows, 777)
    r = run_cli("adjust", "--unit", unit, "--range", range_, path, *(["--key", "k"] * keyed))
    assert r.exit_code == 0, r.stderr
    want = model_adjust(
        [((k,) if keyed else (), BASE + d * 777) for k, d in rows], UNITS[unit], range_
    )
    released = sorted((w for w in want if w.output_pos), key=lambda w: w.output_pos)
    got = r.csv()
    assert [int(g["n"]) for g in got] == [w.arrival - 1 for w in released]
    assert [g["evtime"] for g in got] == [iso(w.evtime) for w in released]
    n_disc = len(want) - len(released)
    assert f"read {len(rows)}, released {len(released)}, discarded {n_disc}" in r.stderr


@SETTINGS
@given(
    data=st.lists(
        st.tuples(st.integers(0, 9), st.sampled_from([0, 0, 0, 0, 1, 5, 12, 30])),
        min_size=2,
        max_size=80,
    ),
    group=st.integers(2, 12),
    cut=st.integers(0, 80),
    unit=st.sampled_from(["nsec", "usec"]),
    range_=st.integers(0, 14),
    fmt=st.sampled_from(["-", "parquet", "csv", "jsonl"]),
)
# late by one more than the range: discarded
@example(
    data=[(0, 0)] * 6 + [(0, 12)] + [(0, 0)] * 6, group=4, cut=0, unit="nsec", range_=1, fmt="-"
)
# a group's second row below the reference time the groups before it left
@example(
    data=[(0, 0)] * 4 + [(0, 30)] * 2 + [(0, 0)] * 6, group=4, cut=0, unit="nsec", range_=5, fmt="-"
)
# a zone in time order, not arrival order: the next group's first row below the last
@example(
    data=[(0, 0)] * 4 + [(0, 12)] + [(0, 0)] * 7, group=4, cut=0, unit="nsec", range_=3, fmt="-"
)
# released by the next group's row whose reference time before it is evtime + range
@example(data=[(0, 0)] * 12, group=4, cut=0, unit="nsec", range_=10, fmt="-")
def test_adjust_in_place_equals_model(
    run_cli, monkeypatch, tmp_path, data, group, cut, unit, range_, fmt
):
    """Rows ordered where they are read (each row group by its task, the rows near a
    group's edge merged here; evtime.engine.adjust_in_place) equal the model, to standard
    output and to files of every format; so does explain adjust without its search job
    (evtime.engine.explain_in_place).  The streams: 10 units a row, up to 9 units of
    noise below the unit, some rows late by up to 30 units (late enough to fall into the
    group before, or to be discarded); row groups of ``group`` rows, a second file from
    ``cut``.  Taken when every row group after the first moves the reference time by more
    than the range (checked here from the times, and that the path was taken)."""
    import json

    from evtime.engine.adjust import in_place as adjust_in_place

    u = UNITS[unit]
    times = [BASE + ((i * 10 - late) * u + noise * u // 10) for i, (noise, late) in enumerate(data)]
    files = [times[:cut], times[cut:]] if 0 < cut < len(times) else [times]
    tops, before = [], BASE - 10**9
    for f in files:
        for at in range(0, len(f), group):
            before = max(before, *(t - t % u for t in f[at : at + group]))
            tops.append(before)
    pairs = zip(tops[:-2], tops[1:-1], strict=True)
    assume(len(tops) > 1 and all(b - a > range_ * u for a, b in pairs))
    taken = []
    ordered = adjust_in_place.ordered_in_place
    monkeypatch.setattr(
        adjust_in_place,
        "ordered_in_place",
        lambda *a, **k: taken.append(ordered(*a, **k)) or taken[-1],
    )
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    paths, n = [], 0
    for i, f in enumerate(files):
        paths.append(tmp_path / f"in{i}.parquet")
        table = pa.table({"time": pa.array(f, pa.timestamp("ns")), "n": range(n, n + len(f))})
        pq.write_table(table, paths[-1], row_group_size=group)
        n += len(f)
    out = "-" if fmt == "-" else tmp_path / f"out.{fmt}"
    r = run_cli("adjust", "--unit", unit, "--range", range_, *paths, "-o", out, "--overwrite")
    assert r.exit_code == 0, r.stderr
    assert len(taken) == 1 and taken[0] is not None
    want = model_adjust([((), t) for t in times], u, range_)
    released = sorted((w for w in want if w.output_pos), key=lambda w: w.output_pos)
    if fmt == "-":
        got = [int(g["n"]) for g in r.csv()]
    elif fmt == "csv":
        got = [int(line.split(",")[1]) for line in out.read_text().splitlines()[1:]]
    elif fmt == "jsonl":
        got = [json.loads(line)["n"] for line in out.read_text().splitlines()]
    else:
        got = pq.read_table(out).column("n").to_pylist()
    assert got == [w.arrival - 1 for w in released]
    n_disc = len(want) - len(released)
    assert f"read {len(times)}, released {len(released)}, discarded {n_disc}" in r.stderr
    # explain adjust: each row group explained where it is read, with no search job, when
    # the last group moves the reference time by more than the range too
    from evtime.engine.adjust import in_place as explain_in_place

    plans = []
    plan = explain_in_place.explain_plan
    monkeypatch.setattr(
        explain_in_place, "explain_plan", lambda *a: plans.append(plan(*a)) or plans[-1]
    )
    r = run_cli("explain", "adjust", "--unit", unit, "--range", range_, *paths, "--format", "csv")
    assert r.exit_code == 0, r.stderr
    assert len(plans) == 1 and (plans[0] is not None) == (tops[-1] - tops[-2] > range_ * u)
    got = r.csv()
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (int(g["arrival"]), g["decision"], g["ref"]) == (w.arrival, w.decision, iso(w.ref))
        assert g["released_by"] == ("" if w.released_by is None else str(w.released_by))
        assert g["output_pos"] == ("" if w.output_pos is None else str(w.output_pos))
        assert (g["reason"] != "") == (w.reason is not None)
        assert (g["reason"] == HELD_TO_END) == (w.reason == HELD_TO_END)
