"""``evtime bound --state DIR`` / ``--flush``: a stream of windows continued over several runs
gives exactly the windows of one run over all the inputs (same rows, aggregates, closing
arrivals, release order, discards); state and outputs are committed together (crash
points); a state of other options is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import statekit
from tests.examples import spark_settings

BOUND = ["bound", "--time-format", "epoch_ns"]
# exact aggregates: the values (row numbers) of every window, their count, sum and extremes
AGGS = [
    "--agg", "count(*) AS n",
    "--agg", "sum(v) AS total",
    "--agg", "min(v) AS lo",
    "--agg", "array_join(sort_array(collect_list(v)), ' ') AS vs",
]  # fmt: skip


def _write(path: Path, rows: list[tuple], first: int) -> None:
    with open(path, "w") as fh:
        fh.write("k,time,v,kind\n")
        for i, (k, t, marker) in enumerate(rows):
            fh.write(f"{k},{t},{first + i},{'bound' if marker else 'row'}\n")


def _split(tmp: Path, rows: list[tuple], cuts: list[int]) -> list[Path]:
    return statekit.split(tmp, rows, cuts, _write)


_rows = statekit.rows


def _single(run_cli, tmp: Path, files: list[Path], opts: list[str]) -> tuple[list, list]:
    # (once for the same rows and options: the crash points share theirs)
    return statekit.one_run_shared(run_cli, tmp, [*BOUND, *opts], files)


def _counts(stderr: str) -> dict[str, int]:
    line = next(x for x in stderr.splitlines() if x.startswith("evtime bound: read"))
    words = line.split(": ", 1)[1].split(" (")[0].split(", ")
    return {w.rsplit(" ", 1)[0]: int(w.rsplit(" ", 1)[1]) for w in words}


def _incremental(run_cli, tmp: Path, files: list[Path], opts: list[str]) -> tuple[list, list]:
    outs, dis = [], []
    held = 0
    for err, out, discards in statekit.run_each(run_cli, tmp, [*BOUND, *opts], files):
        c = _counts(err)
        assert c["carried"] == held  # what the last run held, this one carries
        assert c["read"] + c["carried"] == (
            c["released"] + c["discarded"] + c["held"] + c.get("bound rows", 0)
        )
        held = c["held"]
        outs.extend(out)
        dis.extend(discards)
    assert held == 0  # the last run flushed
    return outs, dis


@st.composite
def scenarios(draw, mode: str):
    keyed = draw(st.booleans())
    keys = ["a", "b"] if keyed else ["a"]
    n = draw(st.integers(1, 24))
    rows = []
    for _ in range(n):
        marker = mode == "markers" and draw(st.integers(0, 3)) == 0
        rows.append((draw(st.sampled_from(keys)), 1000 + draw(st.integers(0, 60)), marker))
    size = draw(st.integers(1, 12))
    opts = [f"--window={size}ns", *AGGS]
    if draw(st.booleans()):
        opts.append(f"--slide={draw(st.integers(1, 14))}ns")
    opts += [f"--offset={draw(st.integers(-6, 6))}ns", f"--tick={draw(st.integers(1, 3))}ns"]
    if draw(st.booleans()):
        opts += ["--window-end", "inclusive"]
    opts += ["--late", draw(st.sampled_from(["drop", "adjust"]))]
    if mode == "markers":
        opts += ["--bounds", "markers", "--bound-marker", "kind=bound"]
        if draw(st.booleans()):
            opts.append("--strict-bounds")
    elif mode == "cti":
        opts += ["--bounds", "cti", f"--cti-every={draw(st.integers(1, 3))}"]
        opts.append(f"--cti-delay={draw(st.integers(-3, 6))}ns")
    elif draw(st.booleans()):
        opts += ["--unit", "nsec", "--range", str(draw(st.integers(0, 5)))]
    if keyed:
        opts += ["--key", "k"]
    cuts = draw(st.lists(st.integers(0, 24), min_size=1, max_size=2))
    return rows, cuts, opts


def _check_same(run_cli, tmp: Path, rows, cuts, opts) -> None:
    files = _split(tmp, rows, cuts)
    want, want_dis = _single(run_cli, tmp, files, opts)
    got, got_dis = _incremental(run_cli, tmp, files, opts)
    assert got == want  # same windows, aggregates, closing arrivals, in the same order
    assert got_dis == want_dis  # same discards, arrival numbers, reasons and bounds


SETTINGS = spark_settings(3)


@SETTINGS
@given(case=scenarios("rows"))
def test_rows_bounds_with_state_equal_one_run(run_cli, tmp_path_factory, case):
    _check_same(run_cli, tmp_path_factory.mktemp("bst"), *case)


@SETTINGS
@given(case=scenarios("markers"))
def test_marker_bounds_with_state_equal_one_run(run_cli, tmp_path_factory, case):
    _check_same(run_cli, tmp_path_factory.mktemp("bst"), *case)


@SETTINGS
@given(case=scenarios("cti"))
def test_cti_bounds_with_state_equal_one_run(run_cli, tmp_path_factory, case):
    _check_same(run_cli, tmp_path_factory.mktemp("bst"), *case)


# a concrete stream: tumbling 10 ns windows per key, hopping 10/5 ns, in two runs
ROWS = [
    ("a", 1003, False), ("b", 1001, False), ("a", 1012, False), ("a", 1008, False),
    ("b", 1015, False), ("a", 1021, False), ("b", 1009, False), ("a", 1024, False),
    ("b", 1026, False), ("a", 1031, False), ("b", 1033, False), ("a", 1029, False),
]  # fmt: skip


@pytest.mark.parametrize(
    "window",
    [["--window", "10ns"], ["--window", "10ns", "--slide", "5ns"]],
    ids=["tumbling", "hopping"],
)
def test_two_runs_continue_the_windows(run_cli, tmp_path, window):
    opts = [*window, *AGGS, "--key", "k"]
    files = _split(tmp_path, ROWS, [6])
    want, want_dis = _single(run_cli, tmp_path, files, opts)
    # late: a@1008 after a@1012, b@1009 after b@1015, a@1029 after a@1031
    assert [r["v"] for r in want_dis] == ["3", "6", "11"]
    got, got_dis = _incremental(run_cli, tmp_path, files, opts)
    assert got == want and got_dis == want_dis
    first = _rows(tmp_path / "out0.csv")
    # the first run released only what its own arrivals closed, the rest waited
    assert first and all(r["closed_by"] != "" and int(r["closed_by"]) <= 6 for r in first)
    assert want[-1]["closed_by"] == ""  # (flushed at the end of the input: null)


def test_state_holds_each_row_once(run_cli, tmp_path, spark):
    """With hopping windows a row is in several windows; the state has it once."""
    opts = ["--window", "10ns", "--slide", "2ns", *AGGS]
    (f,) = _split(tmp_path, [("a", 1003, False), ("a", 1005, False), ("a", 1008, False)], [])
    r = run_cli(*BOUND, *opts, "--state", tmp_path / "st", "-o", tmp_path / "o.csv", f)
    assert r.exit_code == 0, r.stderr
    held = next((tmp_path / "st").glob("gen-*/held.parquet"))
    assert sorted(r.v for r in spark.read.parquet(str(held)).collect()) == [0, 1, 2]
    meta = json.loads(next((tmp_path / "st").glob("gen-*/state.json")).read_text())
    assert meta["command"] == "bound" and meta["arrivals"] == 3 and meta["held"] == 3


@pytest.mark.parametrize("point", statekit.CRASH_POINTS)
def test_crash_between_steps_loses_and_duplicates_nothing(run_cli, tmp_path, monkeypatch, point):
    opts = ["--window", "10ns", "--slide", "5ns", *AGGS, "--key", "k"]
    files = _split(tmp_path, ROWS, [6])
    want, want_dis = _single(run_cli, tmp_path, files, opts)
    first = [*BOUND, *opts, "--state", tmp_path / "st"]
    out, dis = statekit.crash_then_resume(
        run_cli, monkeypatch, tmp_path, point, first, [files[0]], [files[1]]
    )
    assert out == want
    assert dis == want_dis


@pytest.mark.cli
def test_killed_after_publishing_one_output_is_rolled_forward(run_cli, tmp_path, cli_env):
    """A process killed (no clean-up at all) after publishing the windows but before the
    discards and the state: the next run completes it, and the windows go on exactly."""
    opts = ["--window", "10ns", "--slide", "5ns", *AGGS, "--key", "k"]
    files = _split(tmp_path, ROWS, [6])
    want, want_dis = _single(run_cli, tmp_path, files, opts)
    first = [*BOUND, *opts, "--state", tmp_path / "st"]
    out, dis = statekit.killed_then_resumed(run_cli, tmp_path, cli_env, first, files)
    assert out == want
    assert dis == want_dis


def test_state_of_other_options_is_refused(run_cli, tmp_path):
    files = _split(tmp_path, ROWS, [4, 8])
    base = ["--window", "10ns", "--agg", "count(*)", "--key", "k"]
    state = ["--state", tmp_path / "st"]
    r = run_cli(*BOUND, *base, *state, "-o", tmp_path / "o0.csv", files[0])
    assert r.exit_code == 0, r.stderr
    w10, w20, keyed = ["--window", "10ns"], ["--window", "20ns"], ["--key", "k"]
    for other, said in [
        ([*w20, "--agg", "count(*)", *keyed], "--window 10ns; this run has --window 20ns"),
        ([*w10, "--agg", "count(*)"], "--key k; this run has --key none"),
        ([*base, "--slide", "5ns"], "--slide none; this run has --slide 5ns"),
        ([*base, "--late", "adjust"], "--late drop; this run has --late adjust"),
        ([*w10, "--agg", "sum(v)", *keyed], "--agg count(*); this run has --agg sum(v)"),
        (
            [*base, "--bounds", "cti", "--cti-every", "2"],
            "--bounds rows; this run has --bounds cti",
        ),
    ]:
        r = run_cli(*BOUND, *other, *state, "-o", tmp_path / "o1.csv", files[1])
        assert r.exit_code == 1, r.stderr
        assert said in r.stderr and "use the same options" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "o1.csv").exists()
    r = run_cli(*ADJUST_OTHER, *state, "-o", tmp_path / "o1.csv", files[1])
    assert r.exit_code == 1 and "belongs to 'evtime bound', not 'evtime adjust'" in r.stderr
    r = run_cli(*BOUND, *base, *state, "-o", tmp_path / "o1.csv", files[1])
    assert r.exit_code == 0, r.stderr


ADJUST_OTHER = ["adjust", "--time-format", "epoch_ns", "--unit", "nsec", "--range", "0"]


def test_state_usage_errors(run_cli, tmp_path):
    (f,) = _split(tmp_path, ROWS, [])
    opts = [*BOUND, "--window", "10ns", "--agg", "count(*)"]
    r = run_cli(*opts, "--flush", "-o", tmp_path / "o.csv", f)
    assert r.exit_code == 2 and "--flush needs --state DIR" in r.stderr
    r = run_cli(*opts, "--state", tmp_path / "st", f)
    assert r.exit_code == 2 and "--state needs -o PATH" in r.stderr
    r = run_cli(*opts, "-o", tmp_path / "o.csv")
    assert r.exit_code == 2 and "missing INPUT" in r.stderr
    assert not (tmp_path / "st").exists() and not (tmp_path / "o.csv").exists()


def test_flush_without_input_ends_the_stream(run_cli, tmp_path):
    opts = ["--window", "10ns", "--slide", "5ns", *AGGS, "--key", "k"]
    files = _split(tmp_path, ROWS, [5])
    want, _ = _single(run_cli, tmp_path, files, opts)
    state = ["--state", tmp_path / "st"]
    got = []
    for j, f in enumerate(files):
        r = run_cli(*BOUND, *opts, *state, "-o", tmp_path / f"o{j}.csv", f)
        assert r.exit_code == 0, r.stderr
        got += _rows(tmp_path / f"o{j}.csv")
    held = _counts(r.stderr)["held"]
    assert held > 0
    r = run_cli(*BOUND, *opts, *state, "--flush", "-o", tmp_path / "end.csv")
    assert r.exit_code == 0, r.stderr
    assert f"read 0, carried {held}, released {held}, discarded 0, held 0" in r.stderr
    end = _rows(tmp_path / "end.csv")
    assert end and all(r["closed_by"] == "" for r in end)  # (flushed: null)
    assert got + end == want
    r = run_cli(*BOUND, *opts, *state, "--flush", "-o", tmp_path / "again.csv")
    assert r.exit_code == 0 and "nothing to do" in r.stderr


def test_user_aggregates_adjusted_and_bad_rows_across_runs(run_cli, tmp_path):
    """Held rows, not partial aggregates: a Python user aggregate (incremental, with remove)
    over hopping windows is the same in two runs as in one; late rows moved up by
    --late adjust and bad rows (--bad-rows discard) are accounted for."""
    udafs = Path(__file__).resolve().parent.parent / "samples" / "bound" / "udafs.py"
    opts = [
        "--window", "10ns", "--slide", "4ns", "--key", "k", "--late", "adjust",
        "--udaf", f"med={udafs}:SlidingMedian", "--agg", "med(v) AS median", *AGGS,
        "--bad-rows", "discard",
    ]  # fmt: skip
    files = _split(tmp_path, ROWS, [7])
    with open(files[0], "a") as fh:
        fh.write("a,not-a-time,99,row\n")
    want, want_dis = _single(run_cli, tmp_path, files, opts)
    assert any(r["reason"].startswith("bad input") for r in want_dis)
    got, got_dis = _incremental(run_cli, tmp_path, files, opts)
    assert got == want and got_dis == want_dis


def test_split_at_every_row_equals_one_run(run_cli, tmp_path):
    """One run per row (a run boundary after every arrival) gives the windows of one run
    (the random splits above cut once or twice)."""
    rows = [
        ("a", 1003, False), ("b", 1001, False), ("a", 1012, False), ("a", 1008, False),
        ("b", 1015, False), ("b", 1009, False), ("a", 1021, False),
    ]  # fmt: skip
    opts = ["--window", "10ns", "--slide", "5ns", *AGGS, "--key", "k"]
    _check_same(run_cli, tmp_path, rows, list(range(1, len(rows))), opts)
