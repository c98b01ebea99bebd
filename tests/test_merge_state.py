"""``evtime merge --state DIR`` / ``--flush``: a merged stream continued over several runs
gives exactly what one run over all the sources' files gives; state and outputs are
committed together (crash points); refused states and option combinations."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import Phase, given
from hypothesis import strategies as st

from tests import statekit
from tests.conftest import SAMPLES
from tests.examples import spark_settings

MERGE = ["merge", "--time-format", "epoch_ns", "--bound-marker", "kind=bound"]
HEADER = "time,kind,n,wall\n"
SOURCES = ("a", "b", "c")


_rows = statekit.rows


def _write(path: Path, rows: list[tuple]) -> Path:
    with open(path, "w") as fh:
        fh.write(HEADER)
        for t, kind, n, wall in rows:
            fh.write(f"{t},{kind},{n},{wall}\n")
    return path


def _files(tmp: Path, arrivals: list[tuple], cuts: list[int]):
    """``arrivals`` (source, time, kind) in arrival order, cut into runs: per run, one file
    per source that has rows in it; and one file per source with all its rows.  Row ``n``
    (unique) and ``wall`` (the arrival time, strictly later in a later run) identify the
    arrival."""
    marks = sorted({c % len(arrivals) for c in cuts} - {0})
    runs = [
        arrivals[a:b] for a, b in zip([0, *marks], [*marks, len(arrivals)], strict=True) if a < b
    ]
    # every source is named in the first run (a source first named later attaches then)
    first = {s for s, _, _ in runs[0]}
    runs = [r for r in ([x for x in run if x[0] in first] for run in runs) if r]
    per_run, whole = [], {s: [] for s in SOURCES}
    n = 0
    for j, rows in enumerate(runs):
        files = {}
        for i, (s, t, kind) in enumerate(rows):
            files.setdefault(s, []).append((t, kind, n, 1000 + 13 * j + i // 2))
            n += 1
        per_run.append(
            [f"{s}={_write(tmp / f'{s}{j}.csv', files[s])}" for s in SOURCES if s in files]
        )
        for s in files:
            whole[s].extend(files[s])
    single = [f"{s}={_write(tmp / f'{s}.csv', whole[s])}" for s in SOURCES if whole[s]]
    return single, per_run


def _single(run_cli, tmp: Path, sources: list[str], opts: list[str]):
    # (once for the same rows and options: the crash points share theirs)
    return statekit.one_run_shared(run_cli, tmp, [*MERGE, *opts], sources)


def _incremental(run_cli, tmp: Path, runs: list[list[str]], opts: list[str], flush_alone=False):
    outs, dis = [], []
    runs = [*runs, []] if flush_alone else runs
    for j, sources in enumerate(runs):
        last = j == len(runs) - 1
        o, d = tmp / f"out{j}.csv", tmp / f"dis{j}.csv"
        r = run_cli(
            *MERGE, *opts, "--state", tmp / "st", *(["--flush"] if last else []),
            "-o", o, "--discards", d, *sources,
        )  # fmt: skip
        assert r.exit_code == 0, r.stderr
        counts = re.search(
            r"read (\d+), carried (\d+), released (\d+), discarded (\d+), held (\d+)"
            r"(?:, bound rows (\d+))?",
            r.stderr,
        )
        assert counts, r.stderr
        read, carried, out, disc, held, bnd = (int(x or 0) for x in counts.groups())
        assert read + carried == out + disc + held + bnd
        assert len(_rows(o)) == out and len(_rows(d)) == disc
        if last:
            assert held == 0
        outs.append(_rows(o))
        dis.extend(_rows(d))
    return [r for out in outs for r in out], dis


_STREAM_BOUND = re.compile(r"; and below the stream bound \S+ \(largest time released\)")


def _same_discards(got: list[dict], want: list[dict], default_mode: bool) -> None:
    if not default_mode:  # same arrival numbers, reasons and bounds
        assert sorted(got, key=lambda r: int(r["arrival"])) == sorted(
            want, key=lambda r: int(r["arrival"])
        )
        return

    # default mode: arrivals are numbered in the order the runs read them, and a reason
    # names the own bound only (see man evtime-merge, INCREMENTAL RUNS)
    def plain(rows):
        return sorted(
            ({**r, "arrival": None, "reason": _STREAM_BOUND.sub("", r["reason"])} for r in rows),
            key=lambda r: int(r["n"]),
        )

    assert plain(got) == plain(want)


arrivals = st.lists(
    st.tuples(
        st.sampled_from(SOURCES[:2]) | st.sampled_from(SOURCES),
        st.integers(0, 40),
        st.sampled_from(["row", "row", "row", "bound"]),
    ),
    min_size=2,
    max_size=24,
)


# (no shrink phase: a shrink takes too long here)
@spark_settings(6, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(
    rows=arrivals,
    cuts=st.lists(st.integers(1, 30), min_size=1, max_size=2),
    mode=st.sampled_from(["default", "order-by", "arrival"]),
    wait=st.integers(0, 3),
    adjust=st.one_of(st.none(), st.integers(0, 6)),
)
def test_runs_with_state_equal_one_run(run_cli, tmp_path_factory, rows, cuts, mode, wait, adjust):
    tmp = tmp_path_factory.mktemp("mstate")
    rows = [(s, 1000 + t, kind) for s, t, kind in rows]
    single, runs = _files(tmp, rows, cuts)
    opts = {
        "default": [],
        "order-by": ["--order-by", "n"],
        "arrival": ["--arrival", "wall", "--wait", f"{wait}ns"],
    }[mode]
    if adjust is not None:
        opts += ["--unit", "nsec", "--range", str(adjust)]
    want, want_dis = _single(run_cli, tmp, single, opts)
    got, got_dis = _incremental(run_cli, tmp, runs, opts)
    assert got == want  # the same rows in the same order
    _same_discards(got_dis, want_dis, mode == "default")


def _seed_runs(tmp: Path) -> list[list[str]]:
    """Seed 004's Orders and Trades (samples/merge), each cut after its second row."""
    runs: list[list[str]] = [[], []]
    for name in ("orders", "trades"):
        lines = (SAMPLES / "merge" / f"{name}.csv").read_text().splitlines()
        for j, part in enumerate((lines[1:3], lines[3:])):
            path = tmp / f"{name}{j}.csv"
            path.write_text("\n".join([lines[0], *part]) + "\n")
            runs[j].append(f"{name}={path}")
    return runs


SEED = ["merge", "--order-by", "seq", "--bound-marker", "kind=bound"]


def test_seed_004_over_two_runs(run_cli, tmp_path):
    whole = [f"{n}={SAMPLES / 'merge' / n}.csv" for n in ("orders", "trades")]
    r = run_cli(*SEED, "-o", tmp_path / "all.csv", *whole)
    assert r.exit_code == 0, r.stderr
    runs = _seed_runs(tmp_path)
    state = ["--state", tmp_path / "st"]
    r = run_cli(*SEED, *state, "-o", tmp_path / "o0.csv", *runs[0])
    assert r.exit_code == 0, r.stderr
    # ORCL 10:01, YHOO 10:02, IBM 10:03 are released; MSFT 10:04 waits for Trades
    assert [x["ticker"] for x in _rows(tmp_path / "o0.csv")] == ["ORCL", "YHOO", "IBM"]
    assert "read 4, carried 0, released 3, discarded 0, held 1" in r.stderr
    r = run_cli(*SEED, *state, "-o", tmp_path / "o1.csv", *runs[1])
    assert r.exit_code == 0, r.stderr
    # Trades' bound 10:05 releases MSFT; nothing is left
    assert [x["ticker"] for x in _rows(tmp_path / "o1.csv")] == ["MSFT"]
    assert "read 2, carried 1, released 1, discarded 0, held 0, bound rows 2" in r.stderr
    r = run_cli(*SEED, *state, "--flush", "-o", tmp_path / "o2.csv")
    assert r.exit_code == 0, r.stderr
    assert "read 0, carried 0, released 0, discarded 0, held 0" in r.stderr
    got = [*_rows(tmp_path / "o0.csv"), *_rows(tmp_path / "o1.csv"), *_rows(tmp_path / "o2.csv")]
    assert got == _rows(tmp_path / "all.csv")


ARR = [
    ("a", 1005, "row"), ("b", 1002, "row"), ("a", 1001, "row"), ("b", 1007, "row"),
    ("a", 1009, "row"), ("a", 1012, "row"), ("b", 1003, "row"), ("b", 1011, "row"),
    ("a", 1010, "row"), ("b", 1020, "bound"),
]  # fmt: skip
ARRIVAL = ["--arrival", "wall", "--wait", "3ns"]


@pytest.mark.parametrize("point", statekit.CRASH_POINTS)
def test_crash_between_steps_loses_and_duplicates_nothing(run_cli, tmp_path, monkeypatch, point):
    single, runs = _files(tmp_path, ARR, [6])
    want, want_dis = _single(run_cli, tmp_path, single, ARRIVAL)
    first = [*MERGE, *ARRIVAL, "--state", tmp_path / "st"]
    out, dis = statekit.crash_then_resume(
        run_cli, monkeypatch, tmp_path, point, first, runs[0], runs[1]
    )
    assert out == want

    def by_arrival(rows: list[dict]) -> list[dict]:
        return sorted(rows, key=lambda r: int(r["arrival"]))

    assert by_arrival(dis) == by_arrival(want_dis)


def test_refused_states_and_options(run_cli, tmp_path, monkeypatch):
    single, runs = _files(tmp_path, ARR, [4, 7])
    state = ["--state", tmp_path / "st"]
    o = tmp_path / "o.csv"
    r = run_cli(*MERGE, *ARRIVAL, *state, "-o", tmp_path / "o0.csv", *runs[0])
    assert r.exit_code == 0, r.stderr
    r = run_cli(*MERGE, "--arrival", "wall", "--wait", "4ns", *state, "-o", o, *runs[1])
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines() == [
        f"evtime: --state {tmp_path / 'st'} was written with --wait 3ns; this run has "
        "--wait 4ns: use the same options or another state directory"
    ]
    r = run_cli(*MERGE, "--order-by", "n", *state, "-o", o, *runs[1])
    assert r.exit_code == 1 and "--arrival wall; this run has --arrival none" in r.stderr
    r = run_cli(
        "adjust", "--unit", "nsec", "--range", "1", "--time-format", "epoch_ns", *state,
        "-o", o, runs[1][0].split("=", 1)[1],
    )  # fmt: skip
    assert r.exit_code == 1 and "belongs to 'evtime merge', not 'evtime adjust'" in r.stderr
    monkeypatch.setattr("evtime.io.state.__version__", "9.9.9")
    r = run_cli(*MERGE, *ARRIVAL, *state, "-o", o, *runs[1])
    assert r.exit_code == 1 and "this is evtime 9.9.9" in r.stderr
    monkeypatch.undo()
    # the stream's sources come in the stream's order
    r = run_cli(*MERGE, *ARRIVAL, *state, "-o", o, *reversed(runs[1]))
    assert r.exit_code == 2 and "the stream's sources are a, b, in this order" in r.stderr
    assert not o.exists()
    r = run_cli(*MERGE, *ARRIVAL, *state, "-o", o, *runs[1])
    assert r.exit_code == 0, r.stderr
    meta = json.loads(next((tmp_path / "st").glob("gen-*/state.json")).read_text())
    assert meta["sources"] == ["a", "b"] and meta["arrivals"] == 7 and not meta["ended"]


def test_usage_errors(run_cli, tmp_path):
    single, runs = _files(tmp_path, ARR, [])
    state = ["--state", tmp_path / "st"]
    o = ["-o", tmp_path / "o.csv"]
    cases = [
        ([*ARRIVAL, "--join-leave", *state, *o, *runs[0]], "--join-leave cannot be combined"),
        ([*state, *o, runs[0][0].split("=", 1)[1]], "--state needs every source named"),
        (["--emit-bounds", *state, *o, *runs[0]], "--emit-bounds cannot be combined"),
        (["--flush", *o, *runs[0]], "--flush needs --state DIR"),
        ([*state, *runs[0]], "--state needs -o PATH"),
        ([*state, *o], "missing SOURCE"),
        ([*o], "missing SOURCE"),
    ]
    for args, message in cases:
        r = run_cli(*MERGE, *args)
        assert r.exit_code == 2, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr
    assert not (tmp_path / "st").exists() and not (tmp_path / "o.csv").exists()


def test_flush_without_input_ends_the_stream(run_cli, tmp_path):
    single, runs = _files(tmp_path, ARR, [5])
    want, want_dis = _single(run_cli, tmp_path, single, ["--order-by", "n"])
    got, got_dis = _incremental(run_cli, tmp_path, runs, ["--order-by", "n"], flush_alone=True)
    assert got == want
    _same_discards(got_dis, want_dis, False)
    r = run_cli(*MERGE, "--order-by", "n", "--state", tmp_path / "st", "--flush", "-o", "x.csv")
    assert r.exit_code == 0 and "nothing to do" in r.stderr


@pytest.mark.parametrize("opts", [ARRIVAL, []], ids=["arrival", "default"])
def test_split_at_every_row_equals_one_run(run_cli, tmp_path, opts):
    """A run boundary after every arrival (the first run has one row of each source, as
    a stream's first run names its sources) gives what one run gives."""
    arr = ARR[:7]
    single, runs = _files(tmp_path, arr, list(range(2, len(arr))))
    assert len(runs) == len(arr) - 1
    want, want_dis = _single(run_cli, tmp_path, single, opts)
    got, got_dis = _incremental(run_cli, tmp_path, runs, opts)
    assert got == want
    _same_discards(got_dis, want_dis, not opts)
