"""``--state`` across inputs whose column types differ from run to run (issue 49): an hour
with no events (a CSV header only), a column that is int64 in one run and double or
without any value in the next.  One run over all the inputs unifies their types (a column
without a value takes the other's type, int64 with double is double): the runs with
``--state`` do the same, so they still give what one run gives; a real conflict is one
line naming the file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ADJUST = ["adjust", "--unit", "nsec", "--time-format", "epoch_ns", "--range", "4", "--key", "k"]
MERGE = ["merge", "--time-format", "epoch_ns", "--unit", "nsec", "--range", "4"]
BOUND = [
    "bound", "--time-format", "epoch_ns", "--window", "10ns", "--key", "k",
    "--agg", "count(*) AS c", "--agg", "sum(n) AS s", "--agg", "max(k) AS mk",
]  # fmt: skip
COMMANDS = {"adjust": ADJUST, "merge": MERGE, "bound": BOUND}

# each run's rows (k, time); n (the row's place in the stream) is added
RUN1 = [(1, 10), (2, 12), (1, 20), (2, 19), (1, 23)]
LATER = [(18, 25, 31), (31, 40, 44)]  # the times of the rows of runs 2, 3


def _runs(*ks: list) -> list[list[tuple]]:
    """Runs 2, 3, ... with the keys ``ks`` (None: no value; [] : a run without rows)."""
    out = []
    for j, k in enumerate(ks):
        out.append([(v, t) for v, t in zip(k, LATER[j], strict=False)])
    return out


def _write(path: Path, fmt: str, rows: list[tuple], first: int, types=(None, None)) -> Path:
    """``rows`` (k, time) with ``n`` from ``first`` on; Parquet: k and time of ``types``
    (None: int64)."""
    n = list(range(first, first + len(rows)))
    ks, ts = [k for k, _ in rows], [t for _, t in rows]
    if fmt == "csv":
        with open(path, "w") as fh:
            fh.write("k,time,n\n")
            for k, t, i in zip(ks, ts, n, strict=True):
                fh.write(f"{'' if k is None else k},{t},{i}\n")
    elif fmt == "jsonl":
        with open(path, "w") as fh:
            for k, t, i in zip(ks, ts, n, strict=True):
                fh.write(json.dumps({"k": k, "time": t, "n": i}) + "\n")
    else:
        ktype, ttype = (t or pa.int64() for t in types)
        table = pa.table(
            {
                "k": pa.array(ks, ktype),
                "time": pa.array(ts, pa.int64()).cast(ttype),
                "n": pa.array(n, pa.int64()),
            }
        )
        pq.write_table(table, path)
    return path


# format, the rows of the runs after the first, and (Parquet) the types of k and time in
# the first run and in the later ones (None: int64)
NS, US = pa.timestamp("ns"), pa.timestamp("us")
CASES = {
    "csv-header-only-middle": ("csv", [[], [(1, 31), (2, 40), (2, 44)]], ()),
    "csv-header-only-last": ("csv", [[]], ()),
    "csv-empty-values-then-int": ("csv", [[(None, 25), (None, 30)], [(1, 41), (2, 44)]], ()),
    "jsonl-int-then-double": ("jsonl", _runs([1.5, 2.0, 1.0]), ()),
    "jsonl-int-then-null": ("jsonl", _runs([None, None, None]), ()),
    "jsonl-int-null-int": ("jsonl", _runs([None, None, None], [2, 1, 2]), ()),
    "parquet-int-then-double": (
        "parquet",
        _runs([1.5, 2.0, 1.0]),
        ((None, None), (pa.float64(), None)),
    ),
    "parquet-int-then-null": (
        "parquet",
        _runs([None, None, None]),
        ((None, None), (pa.null(), None)),
    ),
    # the time column ns, then us: one run carries it as text (each file's times parsed
    # on their own), so the held rows' times become text too
    "parquet-time-ns-then-us": ("parquet", _runs([1, 2, 1]), ((None, NS), (None, US))),
}


def _files(tmp: Path, case: str) -> list[Path]:
    fmt, later, types = CASES[case]
    runs = [RUN1, *later]
    files, first = [], 0
    for j, rows in enumerate(runs):
        t = types[min(j, 1)] if types else (None, None)
        files.append(_write(tmp / f"in{j}.{fmt}", fmt, rows, first, t))
        first += len(rows)
    return files


def _as_one_run(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """An earlier run's output in the types of one run's (int64 as double, a time as the
    text one run writes): its rows were written before a later run widened a type."""
    from evtime.io.timeparse import format_ns

    cols = []
    for fld in schema:
        col = table.column(fld.name)
        if pa.types.is_timestamp(col.type) and pa.types.is_string(fld.type):
            col = format_ns(col)
        cols.append(col.cast(fld.type))
    return pa.table(cols, schema=schema)


def _sources(command: str, paths: list) -> list[str]:
    return [f"s={p}" for p in paths] if command == "merge" else [str(p) for p in paths]


def _read(path: Path) -> pa.Table:
    return pq.read_table(path)


def _rows(table: pa.Table) -> list[dict]:
    return table.to_pylist()


def _same_rows(command: str, got: list[dict], want: list[dict]) -> None:
    if command == "adjust":  # with --key the keys' rows may interleave otherwise
        got = sorted(got, key=lambda r: r["n"])
        want = sorted(want, key=lambda r: r["n"])
    assert got == want


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(CASES))
def test_runs_with_state_unify_types_as_one_run(run_cli, tmp_path, command, case):
    args = COMMANDS[command]
    files = _files(tmp_path, case)
    one = tmp_path / "all.parquet"
    glob = str(tmp_path / f"in*{files[0].suffix}")
    r = run_cli(*args, "-o", one, *_sources(command, [glob]))
    assert r.exit_code == 0, r.stderr
    want = _read(one)
    got: list[dict] = []
    for j, f in enumerate(files):
        o = tmp_path / f"out{j}.parquet"
        last = j == len(files) - 1
        flush = ["--flush"] if last else []
        r = run_cli(*args, "--state", tmp_path / "st", *flush, "-o", o, *_sources(command, [f]))
        assert r.exit_code == 0, r.stderr
        if j == 1:  # rows of the first run are carried into the one whose types differ
            assert int(re.search(r"carried (\d+)", r.stderr).group(1)) > 0, r.stderr
        out = _read(o)
        if last:  # the last run's output has the types of one run over all the inputs
            assert out.schema.equals(want.schema, check_metadata=False), (out.schema, want.schema)
        got += _rows(_as_one_run(out, want.schema))
    _same_rows(command, got, _rows(want))


@pytest.mark.parametrize("command", ["adjust", "merge"])
def test_state_across_types_read_distributed(run_cli, tmp_path, monkeypatch, command):
    """The same through Spark tasks (inputs above the size read in this process)."""
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    test_runs_with_state_unify_types_as_one_run(run_cli, tmp_path, command, "jsonl-int-null-int")


def test_a_real_type_conflict_is_one_line(run_cli, tmp_path):
    """A column that is a number in the earlier runs and text in this one: refused as one
    run over the same inputs refuses it, naming the file; nothing is committed, and the
    stream goes on with a file of the right type."""
    a = _write(tmp_path / "a.jsonl", "jsonl", RUN1, 0)
    b = _write(tmp_path / "b.jsonl", "jsonl", [("x", 25)], 5)
    c = _write(tmp_path / "c.jsonl", "jsonl", [(2.5, 26)], 5)
    st = tmp_path / "st"
    r = run_cli(*ADJUST, "--state", st, "-o", tmp_path / "o0.parquet", a)
    assert r.exit_code == 0, r.stderr
    r = run_cli(*ADJUST, "-o", tmp_path / "one.parquet", a, b)
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines() == [
        f"evtime: column 'k' is int64 in {a} but string in {b}: give all inputs the same type"
    ]
    gens = sorted(p.name for p in st.iterdir())
    r = run_cli(*ADJUST, "--state", st, "-o", tmp_path / "o1.parquet", b)
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines() == [
        f"evtime: column 'k' is int64 in the earlier runs of --state {st} but string in {b}: "
        "give all inputs the same type"
    ]
    assert sorted(p.name for p in st.iterdir()) == gens
    assert not (tmp_path / "o1.parquet").exists()
    r = run_cli(*ADJUST, "--state", st, "--flush", "-o", tmp_path / "o1.parquet", c)
    assert r.exit_code == 0, r.stderr
    assert "read 1, carried 3" in r.stderr


def test_a_new_column_is_refused_a_missing_one_is_empty(run_cli, tmp_path):
    """Earlier runs' outputs cannot gain a column: a run with one the stream has not seen
    is refused, naming the columns; a run without one of the stream's columns has it
    empty, as one run over all the inputs has."""
    a = _write(tmp_path / "a.csv", "csv", RUN1, 0)
    b = tmp_path / "b.csv"
    b.write_text("k,time,n,extra\n1,30,5,x\n")
    st = tmp_path / "st"
    r = run_cli(*ADJUST, "--state", st, "-o", tmp_path / "o0.csv", a)
    assert r.exit_code == 0, r.stderr
    r = run_cli(*ADJUST, "--state", st, "-o", tmp_path / "o1.csv", b)
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines() == [
        f"evtime: --state {st} was written with input columns k,time,n; this run has input "
        "columns k,time,n,extra: use the same options or another state directory"
    ]
    c = tmp_path / "c.csv"
    c.write_text("time,k\n30,2\n")
    r = run_cli(*ADJUST, "--state", st, "--flush", "-o", tmp_path / "o1.csv", c)
    assert r.exit_code == 0, r.stderr
    r = run_cli(*ADJUST, "-o", tmp_path / "one.csv", a, c)
    assert r.exit_code == 0, r.stderr
    runs = (tmp_path / "o0.csv").read_text() + (tmp_path / "o1.csv").read_text()
    one = (tmp_path / "one.csv").read_text().splitlines()
    got = [x for x in runs.splitlines() if x != one[0]]
    assert sorted(got) == sorted(one[1:]) and "2,30,,1970-01-01T00:00:00.000000030Z" in one
