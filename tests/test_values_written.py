"""The user's own values come out as they were written (issue 49): `bound --discards`
writes a CSV row's values as its text (not the types its --agg computes with) and renames
the row's own ``arrival`` / ``reason`` / ``bound``; a column of a CSV input stays text when
the same run (or another run of its --state stream) also reads Parquet or JSON Lines, whose
values in it are then written as their text."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import Phase, example, given
from hypothesis import strategies as st

from tests.examples import spark_settings

S = 1_000_000_000
# times (seconds after 10:00:00) in arrival order: with --window 2s (bound) or --range 1 sec
# (adjust), the third and the fifth rows are late
SECONDS = (1, 5, 2, 6, 3, 7)
LATE = [2, 4]  # (their indexes)


def iso(s: int) -> str:
    return f"2009-03-01T10:00:{s:02d}.000000000Z"


def table(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with open(path, "w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(header)
        out.writerows(rows)


# ------------------------------------------------------------------ bound --discards


@pytest.mark.parametrize("name", ["arrival", "reason", "bound"])
def test_bound_discards_rename_a_clashing_column(run_cli, workdir, name):
    """A column named like one --discards adds: written as ``row_<name>`` with its text
    (evtime's own ``arrival``, ``reason`` and ``bound`` are evtime's), not refused."""
    values = ["0012", "x,1", "True", "0013", "1.50", "-0"]
    write_csv(
        workdir / "in.csv",
        ["time", name, "v"],
        [[iso(s), values[i], f"0{i}"] for i, s in enumerate(SECONDS)],
    )
    r = run_cli(
        "bound", "--window", "2s", "--agg", "count(*)", "--discards", "d.csv", "-o", "o.csv",
        "in.csv",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    late = table((workdir / "d.csv").read_text())
    assert list(late[0]) == ["time", f"row_{name}", "v", "arrival", "reason", "bound"]
    assert [x[f"row_{name}"] for x in late] == [values[i] for i in LATE]
    assert [x["v"] for x in late] == [f"0{i}" for i in LATE]
    assert [x["arrival"] for x in late] == [str(i + 1) for i in LATE]
    assert [x["bound"] for x in late] == [iso(5), iso(6)]
    assert all(x["reason"].startswith("late: time ") for x in late)


def test_bound_discards_all_three_and_a_taken_name(run_cli, workdir):
    """``arrival``, ``reason``, ``bound`` and ``row_arrival`` too: the row's ``arrival`` is
    ``row_arrival_2``, said once on stderr; an --agg still computes with the typed value of
    a renamed column (``sum(bound)`` over 0001, 0002, ...)."""
    header = ["time", "arrival", "reason", "bound", "row_arrival"]
    rows = [[iso(s), f"{i:04d}", f"r{i}", f"{i:04d}", f"ra{i}"] for i, s in enumerate(SECONDS)]
    write_csv(workdir / "in.csv", header, rows)
    r = run_cli(
        "bound", "--window", "10s", "--agg", "sum(bound) AS b", "--discards", "d.csv",
        "-o", "o.csv", "in.csv",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    late = table((workdir / "d.csv").read_text())
    assert list(late[0]) == [
        "time", "row_arrival_2", "row_reason", "row_bound", "row_arrival",
        "arrival", "reason", "bound",
    ]  # fmt: skip
    assert [(x["row_arrival_2"], x["row_bound"], x["row_arrival"]) for x in late] == [
        (f"{i:04d}", f"{i:04d}", f"ra{i}") for i in LATE
    ]
    said = [line for line in r.stderr.splitlines() if "row_arrival_2" in line]
    assert len(said) == 1, r.stderr
    out = table((workdir / "o.csv").read_text())
    kept = [i for i in range(len(SECONDS)) if i not in LATE]
    assert [int(x["b"]) for x in out] == [sum(kept)]


# pyarrow guesses a type for each family, and its text then differs from what was written
FAMILIES = {
    "int": st.sampled_from(["0012", "+4", "007", "-0", "00", "1", "-0003"]),
    "bool": st.sampled_from(["True", "TRUE", "false", "FALSE", "true", "False"]),
    "float": st.sampled_from(["1.50", "1e3", "2.0", "-0.0", "1E-2", "0.10", ".5", "inf"]),
    "date": st.sampled_from(["2009-03-01", "1999-12-31", "2000-02-29"]),
    "text": st.sampled_from(['a,"b"', " lead", "x\ny", "0x1F", "null?", "é"]),
}


@spark_settings(6, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(
    families=st.lists(st.sampled_from(sorted(FAMILIES)), min_size=1, max_size=3),
    data=st.data(),
)
@example(families=["int", "bool", "float"], data=None)
def test_bound_discards_write_csv_values_as_written(run_cli, families, data):
    """Columns whose text pyarrow reads as a number, a boolean or a date: --agg computes
    with them typed (``sum`` of an int column), --discards writes them as they were."""
    if data is None:  # (the explicit example: the first value of each family)
        columns = [["0012", "0013", "007", "+4", "00", "-0003"], ["True"] * 3 + ["false"] * 3,
                   ["1.50", "2.0", "1e3", "0.10", "-0.0", ".5"]]  # fmt: skip
    else:
        columns = [
            data.draw(st.lists(FAMILIES[f], min_size=len(SECONDS), max_size=len(SECONDS)))
            for f in families
        ]
    names = [f"c{j}" for j in range(len(columns))]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows = [[iso(s), *(c[i] for c in columns)] for i, s in enumerate(SECONDS)]
        write_csv(tmp / "in.csv", ["time", *names], rows)
        d = tmp / "d.csv"
        r = run_cli(
            "bound", "--window", "2s", "--agg", "count(*)", "--discards", d, "-q",
            "-o", tmp / "o.csv", tmp / "in.csv",
        )  # fmt: skip
        assert r.exit_code == 0, r.stderr
        late = table(d.read_text())
        assert [[x[n] for n in names] for x in late] == [[c[i] for c in columns] for i in LATE]
        assert [x["time"] for x in late] == [iso(SECONDS[i]) for i in LATE]


@pytest.mark.parametrize("command", ["bound", "adjust"])
def test_discards_of_bad_rows_keep_the_text_and_own_arrival(run_cli, workdir, command):
    """A Parquet --discards has the CSV's text as text, also for a bad row (a time that
    does not read, --bad-rows discard): its own ``arrival`` is ``row_arrival``, evtime's
    ``arrival`` and ``bound`` are empty (a bad row takes no arrival number)."""
    rows = [[iso(s), f"00{i}", f"0{i}"] for i, s in enumerate(SECONDS)]
    rows[3][0] = "not a time"  # (the fourth row)
    write_csv(workdir / "in.csv", ["time", "n", "arrival"], rows)
    opts = (
        ["--window", "2s", "--agg", "sum(n) AS s", "--agg", "sum(arrival) AS a"]
        if command == "bound"
        else ["--unit", "sec", "--range", "1"]
    )
    r = run_cli(
        command, *opts, "--bad-rows", "discard", "--discards", "d.parquet", "-o", "o.csv",
        "in.csv",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    t = pq.read_table(workdir / "d.parquet")
    assert t.schema.field("n").type == pa.string()
    got = {x["n"]: x for x in t.to_pylist()}
    assert sorted(got) == sorted(f"00{i}" for i in [*LATE, 3])
    assert [got[f"00{i}"]["row_arrival"] for i in LATE] == [f"0{i}" for i in LATE]
    assert [got[f"00{i}"]["arrival"] for i in LATE] == [3, 4]  # (the bad row: no number)
    bad = got["003"]
    assert (bad["row_arrival"], bad["arrival"], bad["bound"]) == ("03", None, None)
    assert bad["reason"].startswith("bad input: ")
    if command == "bound":
        out = table((workdir / "o.csv").read_text())
        kept = [i for i in range(6) if i not in [*LATE, 3]]
        assert sum(int(x["s"]) for x in out) == sum(kept)
        assert sum(int(x["a"]) for x in out) == sum(kept)


# ------------------------------------------------------------------ CSV with Parquet / JSONL


def mixed(tmp: Path, fmt: str) -> list[str]:
    """a.csv with columns the type guess would rewrite, and a Parquet or JSON Lines file
    whose same columns are typed (a number, a boolean)."""
    write_csv(
        tmp / "a.csv",
        ["time", "v", "flag", "id"],
        [[iso(1), "0012", "True", "a"], [iso(4), "1.50", "FALSE", "b"], [iso(2), "0013", "01",
                                                                          "c"]],
    )  # fmt: skip
    other = tmp / f"b.{fmt}"
    values = [(iso(3), 14, True, "d"), (iso(5), 2.5, False, "e")]
    if fmt == "parquet":
        pq.write_table(
            pa.table(
                {
                    "time": [t for t, *_ in values],
                    "v": pa.array([float(v) for _, v, _, _ in values]),
                    "flag": [f for _, _, f, _ in values],
                    "id": [i for *_, i in values],
                }
            ),
            other,
        )
    else:
        other.write_text(
            "".join(
                json.dumps({"time": t, "v": v, "flag": f, "id": i}) + "\n" for t, v, f, i in values
            )
        )
    return [str(tmp / "a.csv"), str(other)]


def as_text(fmt: str) -> dict[str, tuple[str, str]]:
    """id -> (v, flag) as written: the CSV's text, the other file's values as their text."""
    v = ("14", "2.5")  # (a double 14.0 as evtime writes it in CSV, whatever the format)
    return {
        "a": ("0012", "True"),
        "b": ("1.50", "FALSE"),
        "c": ("0013", "01"),
        "d": (v[0], "true"),
        "e": (v[1], "false"),
    }


COMMANDS = {
    "adjust": ["adjust", "--unit", "sec", "--range", "5"],
    "merge": ["merge"],
    "explain adjust": ["explain", "adjust", "--unit", "sec", "--range", "5", "--format", "csv"],
    "explain merge": ["explain", "merge", "--format", "csv"],
    "explain bound": ["explain", "bound", "--window", "2s", "--format", "csv"],
}


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_csv_columns_stay_text_with_other_formats(run_cli, workdir, command, fmt):
    """Every row's ``v`` and ``flag`` as written (CSV) or as their value's text."""
    inputs = mixed(workdir, fmt)
    args = COMMANDS[command]
    if not command.startswith("explain"):
        args = [*args, "--output-format", "csv"]
    r = run_cli(*args, *inputs)
    assert r.exit_code == 0, r.stderr
    rows = table(r.stdout)
    want = as_text(fmt)
    assert {x["id"]: (x["v"], x["flag"]) for x in rows} == {
        i: want[i] for i in {x["id"] for x in rows}
    }
    assert len(rows) >= 4


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_csv_columns_stay_text_in_a_parquet_output(run_cli, workdir, fmt):
    """In a Parquet output the column is text: the CSV's as written, the others' values
    as their text."""
    inputs = mixed(workdir, fmt)
    r = run_cli("adjust", "--unit", "sec", "--range", "5", "-o", "o.parquet", *inputs)
    assert r.exit_code == 0, r.stderr
    t = pq.read_table(workdir / "o.parquet")
    assert t.schema.field("v").type == pa.string()
    want = as_text(fmt)
    assert {x["id"]: (x["v"], x["flag"]) for x in t.to_pylist()} == want


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_bound_mixed_discards_as_written(run_cli, workdir, fmt):
    """bound over CSV and another format: --agg computes with the typed values of every
    input, the discards are written as they were (a text column: the other file's values
    as their text)."""
    inputs = mixed(workdir, fmt)
    r = run_cli(
        "bound", "--window", "10s", "--agg", "sum(v) AS s", "--discards", "d.csv",
        "-o", "o.csv", *inputs,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    late = table((workdir / "d.csv").read_text())
    want = as_text(fmt)
    assert {x["id"]: (x["v"], x["flag"]) for x in late} == {"c": want["c"], "d": want["d"]}
    out = table((workdir / "o.csv").read_text())
    assert [float(x["s"]) for x in out] == [12 + 1.5 + 2.5]


def test_a_csv_column_typed_otherwise_elsewhere_is_text(run_cli, workdir):
    """A CSV column whose text reads as a number, text in a Parquet file: one text column
    (not an error asking for the same type)."""
    write_csv(workdir / "a.csv", ["time", "v"], [[iso(1), "0012"], [iso(3), "7"]])
    pq.write_table(pa.table({"time": [iso(2)], "v": ["x-1"]}), workdir / "b.parquet")
    r = run_cli("adjust", "--unit", "sec", "--range", "5", "a.csv", "b.parquet")
    assert r.exit_code == 0, r.stderr
    assert [x["v"] for x in table(r.stdout)] == ["0012", "x-1", "7"]


STATEFUL = {
    "adjust": ["adjust", "--unit", "sec", "--range", "1"],
    "bound": ["bound", "--window", "2s", "--agg", "count(*)", "--agg", "max(v) AS m"],
}


@pytest.mark.parametrize("order", ["csv-first", "parquet-first"])
@pytest.mark.parametrize("command", sorted(STATEFUL))
def test_state_over_mixed_formats_is_one_run(run_cli, tmp_path, command, order):
    """Two runs with --state (one over the CSV, one over the Parquet file, either first)
    write what one run over both writes: the CSV's text as written, the Parquet's values
    as their text (in CSV: what a Parquet-only run writes)."""
    inputs = mixed(tmp_path, "parquet")
    if order == "parquet-first":
        inputs.reverse()
    base = STATEFUL[command]
    one = tmp_path / "one.csv"
    r = run_cli(*base, "-q", "-o", one, "--discards", tmp_path / "one-d.csv", *inputs)
    assert r.exit_code == 0, r.stderr
    got, late = [], []
    for j, f in enumerate(inputs):
        o, d = tmp_path / f"o{j}.csv", tmp_path / f"d{j}.csv"
        flush = ["--flush"] if j == len(inputs) - 1 else []
        r = run_cli(*base, "-q", "--state", tmp_path / "st", *flush, "-o", o, "--discards", d,
                    f)  # fmt: skip
        assert r.exit_code == 0, r.stderr
        got += table(o.read_text())
        late += table(d.read_text())
    want = table(one.read_text())
    assert got == want
    want_late = table((tmp_path / "one-d.csv").read_text())
    by_id = lambda x: x["id"]  # noqa: E731  (discards: in one run's order, or each run's)
    assert sorted(late, key=by_id) == sorted(want_late, key=by_id)
    assert want_late  # (each order has late rows)
    shown = as_text("parquet")
    assert [(x["v"], x["flag"]) for x in want_late] == [shown[x["id"]] for x in want_late]
    if command == "adjust":
        assert [(x["v"], x["flag"]) for x in want] == [shown[x["id"]] for x in want]
