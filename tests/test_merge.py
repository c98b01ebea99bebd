"""`evtime merge` / `evtime explain merge` against the reference model (tests/model/merge.py)
on random sources, and the merge command's own promises: the result does not depend on how
a source is split into files, sources with different columns are united by name, discards
and the per-source summary, emitted bounds, clear errors."""

from __future__ import annotations

import csv
import io
import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.conftest import SAMPLES
from tests.examples import spark_settings
from tests.where import here_and_in_spark

try:
    from tests.model.adjust import iso
    from tests.model.merge import Arrival, merge, merge_output
except ImportError:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from model.adjust import iso
    from model.merge import Arrival, merge, merge_output

BASE = 10**12  # ns; times are small offsets from here
UNIT_NS = {"nsec": 1, "usec": 1_000}


def write_source(path: Path, rows: list[tuple[str, int, bool, int]], extra: str = "") -> None:
    """rows: (id, time ns, is bound, arrival ns)."""
    with open(path, "w") as f:
        f.write("id,time,recv,kind" + (",qty" if extra else "") + "\n")
        for i, t, b, a in rows:
            f.write(
                f"{i},{t},{a},{'bound' if b else 'row'}" + (f",{extra}" if extra else "") + "\n"
            )


@st.composite
def cases(draw):
    # a third of the cases without a clock or join/leave (sources one after the other)
    mode = draw(st.sampled_from(["plain", "timed", "join"]))
    timed = mode == "timed" or (mode == "join" and draw(st.booleans()))
    options = {
        "timed": timed,
        "wait": draw(st.one_of(st.none(), st.integers(0, 4000))) if timed else None,
        "join_leave": mode == "join",
        "strict": draw(st.booleans()),
        "tick": draw(st.sampled_from([1, 500])),
        "adjust": draw(
            st.one_of(st.none(), st.tuples(st.sampled_from(["usec"]), st.integers(0, 2)))
        ),
    }
    sources = []
    for s in range(draw(st.integers(1, 4))):
        t, rows = BASE + draw(st.integers(0, 3000)), []
        for j in range(draw(st.integers(1, 7))):
            t += draw(st.integers(-2500, 3000))
            bound = draw(st.integers(0, 4)) == 0
            rows.append((f"s{s}r{j}", t, bound, t + draw(st.integers(0, 5000))))
        sources.append(rows)
    return sources, options


def cli_args(o: dict) -> list[str]:
    args = ["--time-format", "epoch_ns", "--bound-marker", "kind=bound"]
    if o["timed"]:
        args += ["--arrival", "recv"]
    if o["wait"] is not None:
        args += ["--wait", f"{o['wait']}ns"]
    if o["join_leave"]:
        args.append("--join-leave")
    if o["strict"]:
        args += ["--strict-bounds", "--tick", f"{o['tick']}ns"]
    if o["adjust"]:
        args += ["--unit", o["adjust"][0], "--range", str(o["adjust"][1])]
    return args


def model_options(o: dict) -> dict:
    out = {"strict_bounds": o["strict"], "tick": o["tick"], "join_leave": o["join_leave"]}
    if o["wait"] is not None:
        out["wait"] = o["wait"]
    if o["adjust"]:
        out["unit_ns"], out["range_n"] = UNIT_NS[o["adjust"][0]], o["adjust"][1]
    return out


def reasons(text: str | None) -> set[str]:
    return {w for w in ("own bound", "stream bound", "wait") if w in (text or "")}


@pytest.mark.parametrize("where", ["local", "distributed"], indirect=True)
@spark_settings(10)
@given(cases())
@example(  # sources one after the other with join/leave: one chunk per file, carried vector
    (
        [
            [("s0r0", BASE + 10, False, 0), ("s0r1", BASE + 30, True, 0)],
            [("s1r0", BASE + 20, False, 0), ("s1r1", BASE + 5, False, 0)],
            [("s2r0", BASE + 40, True, 0), ("s2r1", BASE + 25, False, 0)],
        ],
        {"timed": False, "wait": None, "join_leave": True, "strict": False, "tick": 1}
        | {"adjust": None},
    )
)
def test_explain_merge_is_the_model(run_cli, case):
    """`explain merge` row by row against the reference model on random sources: bound
    rows, arrival clock, wait, join/leave, strict bounds, adjusted sources.  Read here,
    the rows are classified here (``classify_here``); read by Spark's tasks, by the prefix
    scan in Spark."""
    sources, o = case
    arrivals = [
        [Arrival(s, t, b, a if o["timed"] else None) for _, t, b, a in rows]
        for s, rows in enumerate(sources)
    ]
    model = merge(arrivals, **model_options(o))
    order = sorted(
        ((a if o["timed"] else 0, s, j), rows[j][0])
        for s, rows in enumerate(sources)
        for j, (_, _, _, a) in enumerate(rows)
    )
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for s, rows in enumerate(sources):
            write_source(Path(tmp) / f"s{s}.csv", rows)
            paths.append(f"S{s}={tmp}/s{s}.csv")
        r = run_cli("explain", "merge", "--format", "csv", *cli_args(o), *paths)
    assert r.exit_code == 0, r.stderr
    rows = r.csv()
    assert [row["id"] for row in rows] == [i for _, i in order]
    shown = ("arrival", "source", "evtime", "decision", "bound", "released_by", "output_pos")
    for row, m in zip(rows, model, strict=True):
        want = (
            str(m.arrival),
            f"S{m.source}",
            iso(m.evtime),
            m.decision,
            iso(m.bound),
            "" if m.released_by is None else str(m.released_by),
            "" if m.output_pos is None else str(m.output_pos),
        )
        assert tuple(row[c] for c in shown) == want, (row, m, o)
        if m.decision == "discarded":
            assert reasons(row["reason"]) == reasons(m.reason), (row, m.reason)


@st.composite
def plain_sources(draw):
    """Sources of data rows only (no bound marker), one after the other."""
    sources = []
    for s in range(draw(st.integers(1, 4))):
        t, rows = BASE + draw(st.integers(0, 3000)), []
        for j in range(draw(st.integers(1, 9))):
            t += draw(st.integers(-2500, 3000))
            rows.append((f"s{s}r{j}", t, False, 0))
        sources.append(rows)
    adjust = draw(st.one_of(st.none(), st.tuples(st.just("usec"), st.integers(0, 2))))
    return sources, adjust


@spark_settings(10)
@given(plain_sources())
@example(  # a row behind its own source's bound; the other source's rows in between
    (
        [
            [("s0r0", BASE + 300, False, 0), ("s0r1", BASE + 100, False, 0)],
            [("s1r0", BASE + 200, False, 0)],
        ],
        None,
    )
)
def test_merge_without_discards_output_is_the_model(run_cli, monkeypatch, case):
    """Without --discards (and without bound rows), read and written in Spark tasks as big
    inputs are, merge finds its keep flag in its output sort (adjust's rule with the source
    as key): the model's output, in order, and its counts."""
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    sources, adjust = case
    opts = {"unit_ns": UNIT_NS[adjust[0]], "range_n": adjust[1]} if adjust else {}
    arrivals = [[Arrival(s, t, b) for _, t, b, _ in rows] for s, rows in enumerate(sources)]
    expected = [sources[s][j][0] for s, j, _ in merge_output(arrivals, **opts)]
    args = ["--unit", adjust[0], "--range", str(adjust[1])] if adjust else []
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for s, rows in enumerate(sources):
            write_source(Path(tmp) / f"s{s}.csv", rows)
            paths.append(f"S{s}={tmp}/s{s}.csv")
        r = run_cli("merge", "--time-format", "epoch_ns", *args, *paths)
    assert r.exit_code == 0, r.stderr
    assert [row["id"] for row in r.csv()] == expected
    n = sum(len(rows) for rows in sources)
    assert f"read {n}, released {len(expected)}, discarded {n - len(expected)}" in r.stderr


@pytest.mark.parametrize("where", ["local", "distributed"], indirect=True)
@spark_settings(10)
@given(plain_sources())
@example(  # the last source: a row behind its own bound, one also behind the stream bound
    (
        [
            [("s0r0", BASE + 300, False, 0), ("s0r1", BASE + 100, False, 0)],
            [
                ("s1r0", BASE + 200, False, 0),
                ("s1r1", BASE + 400, False, 0),
                ("s1r2", BASE + 350, False, 0),
                ("s1r3", BASE + 250, False, 0),
            ],
        ],
        None,
    )
)
def test_merge_discards_are_the_model(run_cli, tmp_path, case):
    """--discards: the discarded rows with the model's arrival numbers and reasons, word for
    word, and the highest bound they name.  Read and written in Spark tasks, without a
    range the words come with the keep flag found in the output's parts (a prefix scan of a
    few columns); with one, from the prefix scan of whole rows.  Read here, every step is
    done here (``classify_here`` with what is shown)."""
    sources, adjust = case
    opts = {"unit_ns": UNIT_NS[adjust[0]], "range_n": adjust[1]} if adjust else {}
    arrivals = [[Arrival(s, t, b) for _, t, b, _ in rows] for s, rows in enumerate(sources)]
    model = merge(arrivals, **opts)
    ids = [sources[s][j][0] for s, rows in enumerate(sources) for j in range(len(rows))]
    args = ["--unit", adjust[0], "--range", str(adjust[1])] if adjust else []
    late = tmp_path / "late.csv"
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for s, rows in enumerate(sources):
            write_source(Path(tmp) / f"s{s}.csv", rows)
            paths.append(f"S{s}={tmp}/s{s}.csv")
        r = run_cli(
            "merge", "--time-format", "epoch_ns", *args, *paths, "--discards", late, "--overwrite"
        )
    assert r.exit_code == 0, r.stderr
    with open(late) as f:
        got = {row["id"]: row for row in csv.DictReader(f)}
    want = {ids[m.arrival - 1]: m for m in model if m.decision == "discarded"}
    assert set(got) == set(want)
    for i, m in want.items():
        row = got[i]
        assert (int(row["arrival"]), row["reason"]) == (m.arrival, m.reason), (row, m)
        named = re.findall(r"bound (\S+?Z)", m.reason)
        assert row["bound"] == max(named) and row["evtime"] == iso(m.evtime)
    assert [row["id"] for row in r.csv()] == [
        sources[s][j][0] for s, j, _ in merge_output(arrivals, **opts)
    ]


@spark_settings(8)
@given(cases())
def test_merge_discards_read_here_are_those_of_spark(run_cli, monkeypatch, tmp_path, case):
    """merge --discards on random sources with bound rows, an arrival clock, a wait,
    join/leave, strict bounds, adjusted sources: read here (every step in this process)
    and read in Spark's tasks (the prefix scan), the same output and the same discards,
    byte for byte (their arrivals, reasons and bounds: the words are SPEC's)."""
    sources, o = case
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for s, rows in enumerate(sources):
            write_source(Path(tmp) / f"s{s}.csv", rows)
            paths.append(f"S{s}={tmp}/s{s}.csv")
        late = tmp_path / "late.csv"

        def run():
            r = run_cli("merge", *cli_args(o), *paths, "--discards", late, "--overwrite")
            assert r.exit_code == 0, r.stderr
            return r.stdout, late.read_text()

        here, in_spark = here_and_in_spark(monkeypatch, run)
    assert here == in_spark, o


# ---------------------------------------------------------------- merge without a clock

A = [  # (id, t, is bound, arrival): ascending with a late row, a bound, a row behind it
    ("a0", BASE + 100, False, 0),
    ("a1", BASE + 300, False, 0),
    ("a2", BASE + 200, False, 0),  # behind its own bound 300: discarded
    ("a3", BASE + 500, True, 0),  # bound 500
    ("a4", BASE + 450, False, 0),  # behind the bound: discarded
    ("a5", BASE + 500, False, 0),
    ("a6", BASE + 900, False, 0),
]
B = [("b0", BASE + 50, False, 0), ("b1", BASE + 500, False, 0), ("b2", BASE + 400, False, 0)]


def test_merge_does_not_depend_on_file_split_and_unites_columns(run_cli, workdir):
    write_source(workdir / "a.csv", A)
    (workdir / "parts").mkdir()
    write_source(workdir / "parts" / "a-1.csv", A[:3])
    write_source(workdir / "parts" / "a-2.csv", A[3:])
    write_source(workdir / "b.csv", B, extra="7")  # B has one more column
    common = ["merge", "--time-format", "epoch_ns", "--bound-marker", "kind=bound"]
    whole = run_cli(*common, "A=a.csv", "B=b.csv", "--discards", "late.csv")
    split = run_cli(*common, "A=parts/a-*.csv", "B=b.csv")
    assert whole.exit_code == 0, whole.stderr
    assert split.exit_code == 0, split.stderr
    assert whole.stdout == split.stdout
    rows = whole.csv()
    arrivals = [
        [Arrival(0, t, b) for _, t, b, _ in A],
        [Arrival(1, t, b) for _, t, b, _ in B],
    ]
    expected = [(A, B)[s][j][0] for s, j, _ in merge_output(arrivals)]
    assert [r["id"] for r in rows] == expected == ["b0", "a0", "a1", "a5", "b1", "a6"]
    assert list(rows[0]) == ["id", "time", "recv", "kind", "qty", "source", "evtime"]
    assert {r["source"]: r["qty"] for r in rows} == {"A": "", "B": "7"}
    assert rows[0]["evtime"] == iso(BASE + 50)
    assert rows[0]["time"] == str(BASE + 50)  # the time column as it was written
    assert "read 10, released 6, discarded 3, bound rows 1; A: read 7, released 4, " in (
        whole.stderr
    )
    assert "B: read 3, released 2, discarded 1 (" in whole.stderr
    with open(workdir / "late.csv") as f:
        late = list(csv.DictReader(f))
    late.sort(key=lambda r: int(r["arrival"]))  # the discards come in time order
    assert [(r["id"], r["source"], r["arrival"]) for r in late] == [
        ("a2", "A", "3"),
        ("a4", "A", "5"),
        ("b2", "B", "10"),
    ]
    assert "own bound" in late[0]["reason"] and late[0]["bound"] == iso(BASE + 300)
    assert late[1]["bound"] == iso(BASE + 500)


def test_merge_with_join_leave_discards_and_emitted_bounds(run_cli, workdir):
    """The producers example through `evtime merge`: output with the stream's bounds
    (every later row is at or after a bound row), discards, per-source summary."""
    m = SAMPLES / "merge"
    r = run_cli(
        "merge",
        "--order-by",
        "seq",
        "--bound-marker",
        "kind=bound",
        "--join-leave",
        "--emit-bounds",
        "--discards",
        "late.jsonl",
        f"P1={m / 'p1.csv'}",
        f"P2={m / 'p2.csv'}",
        f"P3={m / 'p3.csv'}",
    )
    assert r.exit_code == 0, r.stderr
    rows = r.csv()
    assert [(x["kind"], x["source"], x["rowtime"]) for x in rows] == [
        ("bound", "", "2006-10-10T10:00:00.000000000Z"),  # P1 asserts 10:00 (arrival 1)
        ("row", "P1", "2006-10-10T10:00:00Z"),
        ("row", "P2", "2006-10-10T10:05:00Z"),
        ("bound", "", "2006-10-10T10:05:00.000000000Z"),  # P1 leaves (arrival 6)
        ("row", "P3", "2006-10-10T10:07:00Z"),
    ]
    for i, x in enumerate(rows):
        if x["kind"] == "bound":
            assert x["evtime"] == x["rowtime"] and x["seq"] == x["note"] == ""
            assert all(y["evtime"] >= x["evtime"] for y in rows[i:])
    late = (workdir / "late.jsonl").read_text().splitlines()
    assert [json.loads(x)["note"] for x in late] == [
        "late: rejected",
        "P3 after all left: below the remembered stream bound",
    ]
    assert '"bound": "2006-10-10T10:05:00.000000000Z"' in late[0]  # P2's own bound
    assert "P2: read 4, released 1, discarded 1, bound rows 2" in r.stderr
    assert "bounds emitted 2" in r.stderr


def test_merge_errors_name_the_problem(run_cli, workdir):
    (workdir / "a.csv").write_text("time,x\n2020-01-01T00:00:00Z,1\n")
    (workdir / "b.csv").write_text("time,x\n2020-01-01T00:00:00Z,abc\n")
    # (CSV columns are text as written: two CSV files never conflict; JSON Lines types do)
    (workdir / "a.jsonl").write_text('{"time":"2020-01-01T00:00:00Z","x":1}\n')
    (workdir / "b.jsonl").write_text('{"time":"2020-01-01T00:00:00Z","x":"abc"}\n')
    r = run_cli("merge", "a.jsonl", "b.jsonl")
    assert r.exit_code == 1
    assert "'x'" in r.stderr and "a.jsonl" in r.stderr and "b.jsonl" in r.stderr
    r = run_cli("merge", "--wait", "1h", "a.csv")
    assert r.exit_code == 2 and "--wait needs --arrival" in r.stderr
    r = run_cli("merge", "--emit-bounds", "a.csv")
    assert r.exit_code == 2 and "--bound-marker" in r.stderr
    r = run_cli("merge", "--unit", "sec", "a.csv")
    assert r.exit_code == 2 and "--range" in r.stderr
    r = run_cli("merge", "x=a.csv", "x=b.csv")
    assert r.exit_code == 2 and "two sources are named 'x'" in r.stderr
    r = run_cli("explain", "merge", "--bound-marker", "kind=bound", "a.csv")
    assert r.exit_code == 2 and "no column 'kind'" in r.stderr
    assert io.StringIO(r.stdout).read() == ""
