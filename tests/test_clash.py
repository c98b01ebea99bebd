"""A row's own columns named like evtime's output columns (issues 47, 48, 49): every output
keeps them as they were read (renamed only on a clash: ``row_<name>``, or ``row_<name>_2``
when that is taken too), and evtime's own columns keep their own values."""

from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path

from hypothesis import Phase, example, given
from hypothesis import strategies as st

from tests.examples import spark_settings

# every name evtime writes a column of, in some output
OUTPUT_NAMES = (
    "arrival",
    "source",
    "time",
    "evtime",
    "decision",
    "bound",
    "ref",
    "released_by",
    "output_pos",
    "windows",
    "reason",
    "rows",
    "closed_by",
    "window_start",
    "window_end",
)
EXPLAIN = {
    "arrival",
    "source",
    "time",
    "evtime",
    "decision",
    "bound",
    "released_by",
    "output_pos",
    "windows",
    "reason",
}
DISCARDS = {"arrival", "reason", "bound"}

# times (seconds after 10:00:00) in arrival order: the third is late with --range 1 sec
SECONDS = (1, 5, 2, 6)


def iso(s: int) -> str:
    return f"2009-03-01T10:00:{s:02d}.000000000Z"


def table(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def write(path: Path, names: list[str], rows: list[int]) -> None:
    """``id``, ``t`` (the time, as typed) and ``names``, each value text that no type
    guess rewrites (``<name>-<id>.``)."""
    with open(path, "w") as f:
        f.write(",".join(["id", "t", *names]) + "\n")
        for i in rows:
            vals = [f"{n}-{i}." for n in names]
            f.write(",".join([str(i), f"2009-03-01 10:00:{SECONDS[i]:02d}", *vals]) + "\n")


def check_own(rows: list[dict], names: list[str], taken: set[str], ids: list[int]) -> None:
    """Each of the row's own columns, under its name (``row_<name>`` when ``taken``), holds
    the text it was read with."""
    assert [int(r["id"]) for r in rows] == ids
    for n in names:
        shown = f"row_{n}" if n in taken else n
        assert [r[shown] for r in rows] == [f"{n}-{i}." for i in ids], (n, shown)


@spark_settings(6, phases=[Phase.explicit, Phase.reuse, Phase.generate])  # (no slow shrink)
@given(
    names=st.lists(st.sampled_from(OUTPUT_NAMES), min_size=1, max_size=4, unique=True),
    command=st.sampled_from(["explain adjust", "explain merge", "explain bound", "adjust"]),
)
@example(names=["time", "output_pos", "ref"], command="explain merge")
def test_own_columns_named_like_outputs(run_cli, names, command):
    """A random few of the output names as the input's own columns: explain's own columns
    are its (the arrival number, the time as ISO text), the row's keep their text."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ids = list(range(len(SECONDS)))
        if command == "explain merge":
            write(tmp / "a.csv", names, [0, 1])
            write(tmp / "b.csv", names, [2, 3])
            inputs = [str(tmp / "a.csv"), str(tmp / "b.csv")]
        else:
            write(tmp / "in.csv", names, ids)
            inputs = [str(tmp / "in.csv")]
        opts = ["--time", "t", "-q"]
        if command == "explain bound":
            opts += ["--window", "2s"]
        elif command != "explain merge":
            opts += ["--unit", "sec", "--range", "1"]
        if command == "adjust":
            if "evtime" in names:  # (--as evtime: refused, see below)
                opts += ["--as", "adjusted"]
            d = tmp / "d.csv"
            r = run_cli(*command.split(), *opts, "--discards", str(d), *inputs)
            assert r.exit_code == 0, r.stderr
            out = table(r.stdout)
            check_own(out, names, set(), [0, 1, 3])
            late = table(d.read_text())
            check_own(late, names, DISCARDS, [2])
            assert late[0]["arrival"] == "3"  # evtime's arrival number, not the row's
            return
        r = run_cli(*command.split(), *opts, "--format", "csv", *inputs)
        assert r.exit_code == 0, r.stderr
        rows = table(r.stdout)
        taken = EXPLAIN | ({"ref"} if command == "explain adjust" else set())
        check_own(rows, names, taken, ids)
        assert [r["arrival"] for r in rows] == [str(i + 1) for i in ids]
        assert [r["time"] for r in rows] == [iso(SECONDS[i]) for i in ids]


def sources(tmp: Path, extra: str = "") -> list[str]:
    """issue 47's two sources ``sym,time,arrival,kind``, bound rows ``kind=bound``: the
    arrival clock in a column named ``arrival``."""
    rows = {
        "o.csv": [("A", 1, 1, "x"), ("A", 5, 6, "bound"), ("A", 3, 7, "x")],
        "t.csv": [("B", 2, 2, "x"), ("B", 6, 8, "bound")],
    }
    for name, rs in rows.items():
        with open(tmp / name, "w") as f:
            f.write("sym,time,arrival,kind\n")
            for sym, t, a, kind in rs:
                f.write(f"{sym},2009-03-01 10:00:0{t},2009-03-01 10:00:0{a},{kind}\n")
    return [str(tmp / n) for n in rows]


def test_explain_merge_arrival_named_arrival(run_cli, tmp_path):
    """issue 47: `explain merge --arrival arrival`: ``arrival`` is the arrival number,
    ``row_arrival`` the row's arrival text as it was; `merge` keeps that text too."""
    srcs = sources(tmp_path)
    opts = ["--arrival", "arrival", "--bound-marker", "kind=bound", "-q"]
    r = run_cli("explain", "merge", *opts, *srcs, "--format", "csv")
    assert r.exit_code == 0, r.stderr
    rows = table(r.stdout)
    assert [x["arrival"] for x in rows] == ["1", "2", "3", "4", "5"]
    assert [x["row_arrival"] for x in rows] == [f"2009-03-01 10:00:0{a}" for a in (1, 2, 6, 7, 8)]
    r = run_cli("merge", *opts, *srcs)
    assert r.exit_code == 0, r.stderr
    assert [x["arrival"] for x in table(r.stdout)] == ["2009-03-01 10:00:01", "2009-03-01 10:00:02"]


def test_merge_discards_with_an_arrival_column(run_cli, tmp_path):
    """issue 49: `merge --arrival arrival --discards` runs: the row's own ``arrival`` is
    ``row_arrival`` (its text), evtime's arrival number ``arrival``."""
    srcs = sources(tmp_path)
    d = tmp_path / "d.csv"
    r = run_cli(
        "merge", "--arrival", "arrival", "--bound-marker", "kind=bound", "-q",
        "--discards", str(d), *srcs,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    late = table(d.read_text())
    assert [(x["sym"], x["row_arrival"], x["arrival"]) for x in late] == [
        ("A", "2009-03-01 10:00:07", "4")
    ]
    assert len(table(r.stdout)) == 2


def test_renamed_name_taken(run_cli, tmp_path):
    """issue 47: columns ``arrival`` and ``row_arrival``: the row's ``arrival`` is written
    as ``row_arrival_2``, said once on stderr."""
    p = tmp_path / "clash.csv"
    p.write_text(
        "time,arrival,row_arrival,ref\n"
        "2009-03-01 10:00:01,a1,ra1,f1\n2009-03-01 10:00:02,a2,ra2,f2\n"
    )
    r = run_cli("explain", "adjust", "--unit", "msec", "--range", "100", "--format", "csv", p)
    assert r.exit_code == 0, r.stderr
    rows = table(r.stdout)
    assert [(x["arrival"], x["row_arrival_2"], x["row_arrival"], x["row_ref"]) for x in rows] == [
        ("1", "a1", "ra1", "f1"),
        ("2", "a2", "ra2", "f2"),
    ]
    said = [line for line in r.stderr.splitlines() if "row_arrival_2" in line]
    assert len(said) == 1, r.stderr


def one_line_usage_error(r, *words: str) -> None:
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_added_column_names_refused(run_cli, tmp_path):
    """issue 49: an empty --as / --source-as, or one the input (or --discards) has: one
    line, exit 2."""
    srcs = sources(tmp_path)
    one_line_usage_error(run_cli("merge", "--as", "", *srcs), "--as")
    one_line_usage_error(run_cli("merge", "--source-as", "", *srcs), "--source-as")
    one_line_usage_error(run_cli("adjust", "--unit", "sec", "--range", "1", "--as", "", srcs[0]))
    one_line_usage_error(run_cli("merge", "--as", "sym", *srcs), "'sym'", "--as")
    one_line_usage_error(run_cli("merge", "--source-as", "kind", *srcs), "'kind'", "--source-as")
    one_line_usage_error(
        run_cli("adjust", "--unit", "sec", "--range", "1", "--as", "sym", srcs[0]), "'sym'"
    )
    d = str(tmp_path / "d.csv")
    one_line_usage_error(
        run_cli("merge", "--as", "reason", "--discards", d, *srcs), "'reason'", "--discards"
    )
