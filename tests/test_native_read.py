"""Parquet inputs read by Spark's own reader (evtime/io/native.py) give what reading them with
pyarrow in Spark tasks gives (EVTIME_NATIVE_READ=0): the same outputs byte for byte, the
same summary, the same one-line errors; inputs it cannot read exactly go to pyarrow."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evtime import columns
from evtime.io import native, reader
from evtime.io.sources import InputFile, expand_inputs

BASE = 1_236_000_000_000_000_000  # 2009-03-02, ns


def _table(n: int, seed: int, unit: str = "ns", tz: str | None = None, nulls=()) -> pa.Table:
    """``n`` rows, times mostly ascending with some late ones, in ``unit``; every column
    type the native path carries."""
    rnd = random.Random(seed)
    per = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}[unit]
    t, times = BASE, []
    for i in range(n):
        t += rnd.randint(0, 3_000_000_000)
        late = rnd.choice([0, 0, 0, 700_000_000, 5_000_000_000])
        times.append(None if i in nulls else (t - late) // per)
    return pa.table(
        {
            "key": [f"k{rnd.randint(0, 3)}" for _ in range(n)],
            "time": pa.array(times, pa.timestamp(unit, tz)),
            "value": [rnd.random() for _ in range(n)],
            "n8": pa.array([rnd.randint(-100, 100) for _ in range(n)], pa.int8()),
            "kind": pa.array([rnd.choice(["a", "b"]) for _ in range(n)]).dictionary_encode(),
            "day": pa.array([rnd.randint(-200000, 20000) for _ in range(n)], pa.date32()),
            "price": pa.array([rnd.randint(0, 10**6) for _ in range(n)], pa.int32()).cast(
                pa.decimal128(14, 3)
            ),
            "ok": [rnd.random() < 0.5 for _ in range(n)],
            "sent": pa.array([BASE // 10**3 + i for i in range(n)], pa.timestamp("us", "UTC")),
            "stamp": pa.array([BASE // 10**6 + i for i in range(n)], pa.timestamp("ms")),
            "sec": pa.array([BASE // 10**9 + i for i in range(n)], pa.timestamp("s")),
        }
    )


def _write(path: Path, table: pa.Table, **kw) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kw)
    return str(path)


@pytest.fixture
def task_reads(monkeypatch) -> list[int]:
    """Counts the inputs read by pyarrow in Spark tasks (reader.read_tasks)."""
    calls: list[int] = []
    real = reader.read_tasks

    def counted(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(reader, "read_tasks", counted)
    return calls


def _both(run_cli, monkeypatch, tmp_path: Path, args: list[str], task_reads: list[int]):
    """``args`` (``{d}``: an output directory) run with Spark's reader and with pyarrow in
    tasks: (exit code, stderr without the duration, the outputs' bytes) of each."""
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    got = []
    for flag in ("1", "0"):
        monkeypatch.setenv("EVTIME_NATIVE_READ", flag)
        d = tmp_path / f"native-{flag}"
        d.mkdir(exist_ok=True)
        before = len(task_reads)
        r = run_cli(*(a.format(d=d) for a in args))
        assert len(task_reads) - before == (flag == "0"), f"EVTIME_NATIVE_READ={flag}"
        outs = {p.name: p.read_bytes() for p in sorted(d.iterdir())}
        got.append((r.exit_code, re.sub(r" \(\d+\.\d+s\)", "", r.stderr), outs))
    return got


ADJUST = ["adjust", "--unit", "msec", "--range", "999", "-q"]
OUTS = ["-o", "{d}/out.parquet", "--discards", "{d}/late.parquet"]


OTHER_UNITS = ["sent", "stamp", "sec"]  # (timestamps not in ns: Spark infers their type)


def _cases(d: Path) -> dict[str, list[str]]:
    return {
        "ns-naive": [_write(d / "ns.parquet", _table(300, 1))],
        "ns-only": [_write(d / "nso.parquet", _table(300, 11).drop_columns(OTHER_UNITS))],
        "us-utc": [_write(d / "us.parquet", _table(300, 2, "us", "UTC"))],
        "ms-naive": [_write(d / "ms.parquet", _table(300, 3, "ms"))],
        "s-paris": [_write(d / "s.parquet", _table(300, 4, "s", "Europe/Paris"))],
        "two-files-in-given-order": [
            _write(d / "two" / "b.parquet", _table(200, 5)),
            _write(d / "two" / "a.parquet", _table(200, 6)),
        ],
        "row-groups": [
            _write(d / "rg" / "x.parquet", _table(1000, 7), row_group_size=128),
            _write(d / "rg" / "y.parquet", _table(300, 8), row_group_size=100),
        ],
        "odd-path": [
            _write(d / "odd dir" / "a b%20ü+#.parquet", _table(200, 9)),
            _write(d / "odd dir" / "c,d;e=f.parquet", _table(200, 10)),
        ],
    }


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, list[str]]:
    return _cases(tmp_path_factory.mktemp("native"))


@pytest.mark.parametrize(
    "case",
    [
        "ns-naive",
        "ns-only",
        "us-utc",
        "ms-naive",
        "s-paris",
        "two-files-in-given-order",
        "row-groups",
    ]
    + ["odd-path"],
)
def test_native_read_gives_what_pyarrow_gives(
    case, inputs, run_cli, monkeypatch, tmp_path, task_reads
):
    files = inputs[case]
    args = [*ADJUST, "--key", "key", *OUTS, *files]
    native_run, tasks_run = _both(run_cli, monkeypatch, tmp_path, args, task_reads)
    assert native_run[0] == 0, native_run[1]
    assert native_run == tasks_run
    out = pq.read_table(tmp_path / "native-1" / "out.parquet")
    late = pq.read_table(tmp_path / "native-1" / "late.parquet")
    assert out.num_rows > 0 and late.num_rows > 0
    assert out.num_rows + late.num_rows == sum(pq.read_metadata(f).num_rows for f in files)


def test_explain_shows_the_same_arrivals(inputs, run_cli, monkeypatch, tmp_path, task_reads):
    """Arrival numbers and source files as explain shows them (file order, then row)."""
    args = ["explain", "adjust", "--unit", "msec", "--range", "999", "--format", "csv"]
    args += ["-o", "{d}/x.csv", *inputs["odd-path"]]
    native_run, tasks_run = _both(run_cli, monkeypatch, tmp_path, args, task_reads)
    assert native_run[0] == 0, native_run[1]
    assert native_run == tasks_run


@pytest.fixture
def null_time(tmp_path) -> list[str]:
    return [
        _write(tmp_path / "in" / "first.parquet", _table(50, 11)),
        _write(tmp_path / "in" / "with null.parquet", _table(50, 12, nulls={6})),
    ]


def test_a_null_time_fails_the_same_way(null_time, run_cli, monkeypatch, tmp_path, task_reads):
    args = [*ADJUST, "-o", "{d}/out.parquet", *null_time]
    native_run, tasks_run = _both(run_cli, monkeypatch, tmp_path, args, task_reads)
    assert native_run == tasks_run
    code, err, outs = native_run
    assert code == 1 and outs == {}
    assert err.strip() == f"evtime: {null_time[1]}: row 7, column 'time': no time (empty)"


def test_a_null_time_is_discarded_the_same_way(
    null_time, run_cli, monkeypatch, tmp_path, task_reads
):
    args = [*ADJUST, "--bad-rows", "discard", *OUTS, *null_time]
    native_run, tasks_run = _both(run_cli, monkeypatch, tmp_path, args, task_reads)
    assert native_run[0] == 0, native_run[1]
    assert native_run == tasks_run
    late = pq.read_table(tmp_path / "native-1" / "late.parquet").to_pylist()
    reasons = [r["reason"] for r in late if r["reason"].startswith("bad input")]
    assert reasons == [f"bad input: no time (empty) (file {null_time[1]} row 7 column time)"]


def _files(tmp_path: Path, table: pa.Table, name: str = "x.parquet", **kw) -> list[InputFile]:
    return expand_inputs([_write(tmp_path / name, table, **kw)], None)


def _problem(files: list[InputFile], opts: reader.ReadOptions | None = None) -> str | None:
    opts = opts or reader.ReadOptions()
    return native.problem(files, reader.layout(files, opts), opts)


def test_the_schema_given_to_spark_is_the_one_it_infers(spark, tmp_path):
    """Files whose timestamps are all ns: Spark's reader is given the schema it would infer
    (no job reads a footer for it); with other timestamps it infers it."""
    f = _write(tmp_path / "ns.parquet", _table(20, 12).drop_columns(OTHER_UNITS))
    files = expand_inputs([f], None)
    lay = reader.layout(files, reader.ReadOptions())
    given = native._given_schema(lay)
    assert given is not None and given == spark.read.parquet(f).schema
    mixed = expand_inputs([_write(tmp_path / "mixed.parquet", _table(20, 13))], None)
    assert native._given_schema(reader.layout(mixed, reader.ReadOptions())) is None


def test_what_goes_to_pyarrow(tmp_path, monkeypatch):
    good = _table(20, 13)
    assert _problem(_files(tmp_path, good)) is None
    unsigned = good.append_column("u", pa.array(range(20), pa.uint32()))
    assert "uint32" in _problem(_files(tmp_path, unsigned, "u.parquet"))
    nested = good.append_column("l", pa.array([[1]] * 20))
    assert "list" in _problem(_files(tmp_path, nested, "l.parquet"))
    int96 = _files(tmp_path, good, "i96.parquet", use_deprecated_int96_timestamps=True)
    assert "INT96" in _problem(int96)
    naive_us = _files(tmp_path, _table(20, 14, "us"), "us.parquet")
    assert _problem(naive_us) is None
    assert "--tz" in _problem(naive_us, reader.ReadOptions(tz="Europe/Paris"))
    aware = _files(tmp_path, _table(20, 14, "us", "UTC"), "aware.parquet")
    assert _problem(aware, reader.ReadOptions(tz="Europe/Paris")) is None
    epoch = good.set_column(1, "time", pa.array(range(20), pa.int64()))
    opts = reader.ReadOptions(time_format="epoch_ns")
    assert "int64" in _problem(_files(tmp_path, epoch, "e.parquet"), opts)
    far = good.set_column(1, "time", pa.array([3 * 10**17 + i for i in range(20)], "timestamp[us]"))
    assert "int64 ns" in _problem(_files(tmp_path, far, "far.parquet"))
    csv = tmp_path / "x.csv"
    csv.write_text("time,v\n2009-03-01T00:00:00Z,1\n")
    assert "Parquet" in _problem(expand_inputs([str(csv)], None))
    mixed = expand_inputs([str(tmp_path / "x.parquet"), str(tmp_path / "us.parquet")], None)
    assert "different" in _problem(mixed)
    s3 = InputFile(0, "s3://bucket/x.parquet", "s3://bucket/x.parquet", "parquet")
    assert native.spark_path(s3) is None
    monkeypatch.setenv("EVTIME_NATIVE_READ", "0")
    assert _problem(_files(tmp_path, good)) == "EVTIME_NATIVE_READ=0"


def test_paths_given_to_spark():
    def path(url: str) -> str | None:
        return native.spark_path(InputFile(0, url, url, "parquet"))

    assert path("/data/a b.parquet") == "file:/data/a b.parquet"
    assert path("s3a://bucket/in/x.parquet") == "s3a://bucket/in/x.parquet"
    assert path("hdfs://nn:8020/x.parquet") == "hdfs://nn:8020/x.parquet"
    assert path("s3://bucket/x.parquet") is None  # s3fs only
    assert path("/data/x[1].parquet") is None  # a glob to Hadoop
    assert path("/data/a:b.parquet") is None  # not a Hadoop path


def test_spark_spellings_map_to_file_indexes():
    files = [
        InputFile(0, "/d/b b%20ü+#.parquet", "b", "parquet"),
        InputFile(1, "/d/a.parquet", "a", "parquet"),
    ]
    spelled = ["file:///d/a.parquet", "file:///d/b%20b%2520ü+%23.parquet"]
    got = native._spellings(spelled, files)
    assert got == {
        "file:///d/a.parquet": 1,
        "file:/d/a.parquet": 1,
        "file:///d/b%20b%2520ü+%23.parquet": 0,
        "file:/d/b%20b%2520ü+%23.parquet": 0,
    }
    assert native._spellings(spelled[:1], files) is None  # Spark lists one file less
    assert native._spellings([*spelled, "file:///d/c.parquet"], files) is None


@pytest.mark.parametrize("unit", ["ns", "us", "ms"])
def test_footers_count_and_range_the_times(tmp_path, unit):
    """What the footers say (rows with and without a time, least and greatest time in ns)
    is what the data holds: several files, row groups of 7 rows, one group all null."""
    tables = [_table(30, 21, unit, nulls={0, 1, 2, 3, 4, 5, 6, 12}), _table(25, 22, unit)]
    paths = [_write(tmp_path / f"f{i}.parquet", t, row_group_size=7) for i, t in enumerate(tables)]
    files = expand_inputs(paths, None)
    opts = reader.ReadOptions()
    footers: list = []
    assert native.problem(files, reader.layout(files, opts), opts, footers) is None
    got = native._footing(files, footers, reader.layout(files, opts))
    ns = [v for t in tables for v in t.column("time").cast(pa.int64()).to_pylist()]
    per = {"ns": 1, "us": 10**3, "ms": 10**6}[unit]
    times = [v * per for v in ns if v is not None]
    assert (got.good, got.bad) == (len(times), len(ns) - len(times)) == (47, 8)
    assert (got.least, got.greatest) == (min(times), max(times))
    # every row group's first arrival and greatest time (None: all null), in arrival order
    groups = []
    for i, t in enumerate(tables):
        column = t.column("time").cast(pa.int64()).to_pylist()
        for g in range(0, len(column), 7):
            seen = [v * per for v in column[g : g + 7] if v is not None]
            groups.append(((i << columns.SEQ_FILE_SHIFT) + g, max(seen) if seen else None))
    assert got.groups == tuple(groups) and groups[0][1] is None


def test_footers_of_files_without_times(tmp_path):
    table = _table(5, 23, nulls=set(range(5)))
    files = _files(tmp_path, table)
    opts = reader.ReadOptions()
    footers: list = []
    assert native.problem(files, reader.layout(files, opts), opts, footers) is None
    got = native._footing(files, footers, reader.layout(files, opts))
    assert (got.good, got.bad, got.least, got.greatest) == (0, 5, None, None)


def test_row_groups_split_over_tasks_carry_their_footer_maxima(
    run_cli, monkeypatch, tmp_path, task_reads
):
    """Without --key, the running maximum of the time starts every row group from the
    footers' maximum before it: a file cut into many splits (many tasks, each reading a
    few row groups), in two files, gives what pyarrow in tasks gives (a first pass there)."""
    files = [
        _write(tmp_path / "a.parquet", _table(300, 21), row_group_size=13),
        _write(tmp_path / "b.parquet", _table(200, 22), row_group_size=9),
    ]
    groups = native._footing(
        [InputFile(i, p, p, "parquet") for i, p in enumerate(files)],
        [pq.read_metadata(p) for p in files],
        reader.Layout(pq.read_schema(files[0]), "time"),
    ).groups
    assert len(groups) == 24 + 23 and groups[0][0] == 0 and groups[24][0] == 1 << 40
    small = ["--conf", "spark.sql.files.maxPartitionBytes=2048"]
    for args in (
        ["explain", "bound", "--window", "5s", "--unit", "msec", "--range", "999", "-q"],
        [*ADJUST, "--discards", "{d}/late.parquet"],
    ):
        (code, err, outs), (code0, err0, outs0) = _both(
            run_cli,
            monkeypatch,
            tmp_path,
            [*args, *small, *files, "-o", "{d}/out.csv", "--overwrite"],
            task_reads,
        )
        assert code == code0 == 0, (err, err0)
        assert outs == outs0 and err == err0


def test_local_times_are_the_times_in_arrival_order_with_their_seq(tmp_path):
    """native.local_times: local Parquet files read here, row group pairs or batches, in
    file order; ``_evt_seq`` as Spark's reader numbers rows; ms times in ns; a null time
    as the least int64 (it reaches nothing).  URLs and other formats: None."""
    import numpy as np

    from evtime.columns import SEQ_FILE_SHIFT

    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    ta = pa.table({"t": pa.array([5, None, 3, 9, 1], pa.timestamp("ms"))})
    tb = pa.table({"t": pa.array([2, 8, 7], pa.timestamp("ms"))})
    pq.write_table(ta, a, row_group_size=2)  # 3 row groups: a pair, then one
    pq.write_table(tb, b)
    files = [InputFile(0, str(a), "a", "parquet"), InputFile(1, str(b), "b", "parquet")]
    lay = reader.layout(files, reader.ReadOptions("t"))
    times = native.local_times(files, lay)
    got = list(times())
    seq = np.concatenate([s for s, _ in got]).tolist()
    ns = np.concatenate([t for _, t in got]).tolist()
    least = np.iinfo(np.int64).min
    assert seq == [
        0,
        1,
        2,
        3,
        4,
        1 << SEQ_FILE_SHIFT,
        (1 << SEQ_FILE_SHIFT) + 1,
        (1 << SEQ_FILE_SHIFT) + 2,
    ]
    assert ns == [5 * 10**6, least, 3 * 10**6, 9 * 10**6, 10**6, 2 * 10**6, 8 * 10**6, 7 * 10**6]
    # big row groups come in batches (memory stays bounded), with the same values
    many = list(native._time_columns(pq.ParquetFile(a), "t", most=1))
    assert [len(c) for c in many] == [2, 2, 1]
    assert native.local_times([InputFile(0, "s3://bucket/a.parquet", "a", "parquet")], lay) is None
    assert native.local_times([InputFile(0, str(a), "a", "csv")], lay) is None
