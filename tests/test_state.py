"""``--state DIR`` / ``--flush``: a stream continued over several runs gives exactly what one
run over all the inputs gives; state and outputs are committed together (crash points);
a state of other options or another version is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import statekit
from tests.examples import spark_settings

ADJUST = ["adjust", "--unit", "nsec", "--time-format", "epoch_ns"]


def _write(path: Path, rows: list[tuple[str, int]], first: int) -> None:
    with open(path, "w") as fh:
        fh.write("k,time,n\n")
        for i, (k, t) in enumerate(rows):
            fh.write(f"{k},{t},{first + i}\n")


def _split(tmp: Path, rows: list[tuple[str, int]], cuts: list[int]) -> list[Path]:
    return statekit.split(tmp, rows, cuts, _write)


_rows = statekit.rows


def _single(run_cli, tmp: Path, files: list[Path], opts: list[str]) -> tuple[list, list]:
    return statekit.one_run(run_cli, tmp, [*ADJUST, *opts], files)


def _incremental(run_cli, tmp: Path, files: list[Path], opts: list[str]) -> tuple[list, list]:
    outs, dis = [], []
    runs = statekit.run_each(run_cli, tmp, [*ADJUST, *opts], files)
    for j, (err, out, discards) in enumerate(runs):
        assert "carried" in err and "held" in err
        if j == len(runs) - 1:
            assert "held 0" in err
        outs.append(out)
        dis.extend(discards)
    return outs, dis


def _by_arrival(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: int(r["arrival"]))


streams = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 60)), min_size=1, max_size=30
)


@spark_settings(4)
@given(
    rows=streams,
    cuts=st.lists(st.integers(0, 30), min_size=1, max_size=2),
    range_=st.integers(0, 12),
    keyed=st.booleans(),
)
def test_runs_with_state_equal_one_run(run_cli, tmp_path_factory, rows, cuts, range_, keyed):
    tmp = tmp_path_factory.mktemp("state")
    rows = [(k, 1000 + t) for k, t in rows]
    files = _split(tmp, rows, cuts)
    opts = ["--range", str(range_), *(["--key", "k"] if keyed else [])]
    want, want_dis = _single(run_cli, tmp, files, opts)
    outs, got_dis = _incremental(run_cli, tmp, files, opts)
    got = [r for out in outs for r in out]
    # same discards, with the same arrival numbers, reasons and bounds
    assert _by_arrival(got_dis) == _by_arrival(want_dis)
    if not keyed:
        assert got == want  # same rows in the same order
        return
    # with keys each key is its own stream: every run's output is in (evtime, arrival)
    # order, each key's rows come in the same order, and all together are the same rows
    for out in outs:
        assert out == sorted(out, key=lambda r: (r["evtime"], int(r["n"])))
    for k in "ab":
        assert [r for r in got if r["k"] == k] == [r for r in want if r["k"] == k]
    assert sorted(got, key=lambda r: int(r["n"])) == sorted(want, key=lambda r: int(r["n"]))


ROWS = [("a", 1000 + t) for t in (5, 1, 9, 3, 20, 12, 2, 25, 24, 40, 30, 31)]


@pytest.mark.parametrize("point", statekit.CRASH_POINTS)
def test_crash_between_steps_loses_and_duplicates_nothing(run_cli, tmp_path, monkeypatch, point):
    files = _split(tmp_path, ROWS, [6])
    opts = ["--range", "4"]
    want, want_dis = _single(run_cli, tmp_path, files, opts)
    first = [*ADJUST, *opts, "--state", tmp_path / "st"]
    out, dis = statekit.crash_then_resume(
        run_cli, monkeypatch, tmp_path, point, first, [files[0]], [files[1]]
    )
    assert out == want
    assert _by_arrival(dis) == _by_arrival(want_dis)


def test_state_of_other_options_or_version_is_refused(run_cli, tmp_path, monkeypatch):
    files = _split(tmp_path, ROWS, [4, 8])
    state = ["--state", tmp_path / "st"]
    r = run_cli(*ADJUST, "--range", "4", *state, "-o", tmp_path / "o0.csv", files[0])
    assert r.exit_code == 0, r.stderr
    r = run_cli(*ADJUST, "--range", "5", *state, "-o", tmp_path / "o1.csv", files[1])
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines() == [
        f"evtime: --state {tmp_path / 'st'} was written with --range 4; this run has "
        "--range 5: use the same options or another state directory"
    ]
    assert not (tmp_path / "o1.csv").exists()
    r = run_cli(*ADJUST, "--range", "4", "--key", "k", *state, "-o", tmp_path / "o1.csv", files[1])
    assert r.exit_code == 1 and "--key none; this run has --key k" in r.stderr
    monkeypatch.setattr("evtime.io.state.__version__", "9.9.9")
    r = run_cli(*ADJUST, "--range", "4", *state, "-o", tmp_path / "o1.csv", files[1])
    assert r.exit_code == 1 and "written by evtime 0.1.0; this is evtime 9.9.9" in r.stderr
    monkeypatch.undo()
    # reading an input again is refused; the stream goes on with the next one
    r = run_cli(*ADJUST, "--range", "4", *state, "-o", tmp_path / "o1.csv", *files[:2])
    assert r.exit_code == 1 and "already read by the last run" in r.stderr
    r = run_cli(*ADJUST, "--range", "4", *state, "-o", tmp_path / "o1.csv", files[1])
    assert r.exit_code == 0, r.stderr
    meta = json.loads(next((tmp_path / "st").glob("gen-*/state.json")).read_text())
    assert meta["arrivals"] == 8 and not meta["ended"]


def test_state_usage_errors(run_cli, tmp_path):
    f = _split(tmp_path, ROWS, [])[0]
    r = run_cli(*ADJUST, "--range", "4", "--flush", "-o", tmp_path / "o.csv", f)
    assert r.exit_code == 2 and "--flush needs --state DIR" in r.stderr
    r = run_cli(*ADJUST, "--range", "4", "--state", tmp_path / "st", f)
    assert r.exit_code == 2 and "--state needs -o PATH" in r.stderr
    assert not (tmp_path / "st").exists()


@pytest.mark.cli
def test_killed_after_publishing_one_output_is_rolled_forward(run_cli, tmp_path, cli_env):
    """A process killed (no clean-up at all) after publishing the output but before the
    discards and the state: the next run completes it, and the stream goes on exactly."""
    files = _split(tmp_path, ROWS, [6])
    opts = ["--range", "4"]
    want, want_dis = _single(run_cli, tmp_path, files, opts)
    first = [*ADJUST, *opts, "--state", tmp_path / "st"]
    out, dis = statekit.killed_then_resumed(run_cli, tmp_path, cli_env, first, files)
    assert out == want
    assert _by_arrival(dis) == _by_arrival(want_dis)


def test_flush_without_input_ends_the_stream(run_cli, tmp_path):
    files = _split(tmp_path, ROWS, [5])
    opts = ["--range", "6", "--key", "k"]
    want, _ = _single(run_cli, tmp_path, files, opts)
    state = ["--state", tmp_path / "st"]
    outs = []
    for j, f in enumerate(files):
        o = tmp_path / f"o{j}.csv"
        r = run_cli(*ADJUST, *opts, *state, "-o", o, f)
        assert r.exit_code == 0, r.stderr
        outs.append(o)
    held = int(r.stderr.split("held ")[1].split()[0])
    assert held > 0
    r = run_cli(*ADJUST, *opts, *state, "--flush", "-o", tmp_path / "end.csv")
    assert r.exit_code == 0, r.stderr
    assert f"read 0, carried {held}, released {held}, discarded 0, held 0" in r.stderr
    got = [*_rows(outs[0]), *_rows(outs[1]), *_rows(tmp_path / "end.csv")]
    assert sorted(got, key=lambda r: int(r["n"])) == sorted(want, key=lambda r: int(r["n"]))
    # the stream has ended: a flush again has nothing to flush
    r = run_cli(*ADJUST, *opts, *state, "--flush", "-o", tmp_path / "again.csv")
    assert r.exit_code == 0 and "nothing to do" in r.stderr


def test_split_at_every_row_equals_one_run(run_cli, tmp_path):
    """One run per row (a run boundary after every arrival, late rows and discards
    included) gives what one run gives (the random splits above cut once or twice)."""
    rows = [("a", 1000 + t) for t in (5, 1, 9, 3, 9, 14)]  # adjusted, discarded, a tie
    files = _split(tmp_path, rows, list(range(1, len(rows))))
    assert len(files) == len(rows)
    opts = ["--range", "4"]
    want, want_dis = _single(run_cli, tmp_path, files, opts)
    assert want_dis  # (the stream has late rows)
    outs, got_dis = _incremental(run_cli, tmp_path, files, opts)
    assert [r for out in outs for r in out] == want
    assert _by_arrival(got_dis) == _by_arrival(want_dis)
