"""Plan shape (issue 5): every DataFrame evtime materialises for adjust, merge, bound and
explain (what the writer runs, and every intermediate localCheckpoint) has no exchange into
a single partition, no window without a partitioning, no driver-side collect or limit, and
broadcasts only aggregated (small) tables.

The plans are captured while the real CLI runs, on inputs of several files (several
arrival chunks and partitions), so Spark cannot elide the exchanges a bigger input needs.
"""

from __future__ import annotations

import contextlib
import io
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

import evtime.engine.scan as scan
import evtime.io.writer as writer

BASE = 1_700_000_000_000_000_000


def _files(dirname, name, n_files, rows, seed):
    """``n_files`` Parquet files of ``rows`` rows: ns times mostly ascending with jitter,
    10 keys, a value, and a bound row every 50 rows."""
    import random

    rnd = random.Random(seed)
    dirname.mkdir(exist_ok=True)
    t = BASE
    for f in range(n_files):
        times, keys, values, kinds, recv = [], [], [], [], []
        for i in range(rows):
            t += rnd.randint(0, 2_000_000)
            times.append(t - rnd.choice([0, 0, 0, 5_000_000, 900_000_000]))
            keys.append(f"k{rnd.randint(0, 9)}")
            values.append(float(i))
            kinds.append("bound" if i % 50 == 49 else "row")
            recv.append(t + 1_000_000)
        table = pa.table(
            {
                "time": pa.array(times, pa.timestamp("ns")),
                "key": keys,
                "value": values,
                "kind": kinds,
                "recv": pa.array(recv, pa.timestamp("ns")),
            }
        )
        pq.write_table(table, dirname / f"{name}-{f}.parquet")
    return str(dirname / f"{name}-*.parquet")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("plans")
    return {
        "one": _files(d / "one", "ev", 4, 300, 1),
        "s1": _files(d / "s1", "a", 2, 200, 2),
        "s2": _files(d / "s2", "b", 2, 200, 3),
        "s3": _files(d / "s3", "c", 2, 200, 4),
    }


def _plan(df: DataFrame) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain(mode="formatted")
    return buf.getvalue()


@pytest.fixture
def plans(monkeypatch, spark):
    """Collects the physical plan of every DataFrame written or checkpointed (reading and
    writing in Spark tasks, as for inputs too big to read in the driver).  Spark's own
    broadcast of any join side under 10 MB is off meanwhile: the test inputs are tiny, so
    every join would qualify, and the check is about the plans evtime asks for (its
    broadcast hints stay), not about what Spark chooses for small tables."""
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    seen: list[str] = []
    write, checkpoint = writer.write, ClassicDataFrame.localCheckpoint
    collect_few = scan.collect_few

    def capture_write(df, *a, **kw):
        if isinstance(df, writer.TaskRows):  # (rows read by the writing tasks)
            seen.append(_plan(df.ids))
        elif not isinstance(df, writer.LocalRows):  # (rows made here: no Spark plan)
            seen.append(_plan(df))
        return write(df, *a, **kw)

    def capture_checkpoint(self, *a, **kw):
        seen.append(_plan(self))
        return checkpoint(self, *a, **kw)

    def capture_few(df):
        seen.append(_plan(df))
        return collect_few(df)

    monkeypatch.setattr(writer, "write", capture_write)
    monkeypatch.setattr(scan, "collect_few", capture_few)
    # (the classic DataFrame has its own localCheckpoint: patching the base class alone
    # captured no checkpoint)
    monkeypatch.setattr(ClassicDataFrame, "localCheckpoint", capture_checkpoint)
    yield seen
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)


def _tree(plan: str) -> list[tuple[int, str, int]]:
    """(depth, node name, id) for the plan's outline (the part before the node details)."""
    outline = plan.split("\n\n\n", 1)[0].splitlines()[1:]
    nodes = []
    for line in outline:
        # (a plan that is not adaptive marks whole-stage-codegen nodes with "* ")
        m = re.match(r"^(?P<pre>[ :+\-|]*)(\* )?(?P<name>[A-Za-z][\w ]*?) \((?P<id>\d+)\)", line)
        if m:
            nodes.append((len(m.group("pre")), m.group("name"), int(m.group("id"))))
    return nodes


def _details(plan: str, node_id: int) -> str:
    m = re.search(rf"^\({node_id}\) .*?(?=^\(\d+\) |\Z)", plan, re.S | re.M)
    return m.group(0) if m else ""


def check_plan(plan: str) -> list[str]:
    """What is wrong with one physical plan (empty when its shape is right)."""
    problems = []
    nodes = _tree(plan)
    assert nodes, plan
    for i, (depth, name, node_id) in enumerate(nodes):
        details = _details(plan, node_id)
        if name == "Exchange" and "SinglePartition" in details:
            problems.append(f"Exchange into a single partition ({node_id})")
        if name in ("CollectLimit", "GlobalLimit", "TakeOrderedAndProject", "CollectTail"):
            problems.append(f"{name} ({node_id})")
        if name == "BroadcastExchange":
            below = []
            for d, n, _ in nodes[i + 1 :]:
                if d <= depth:
                    break
                below.append(n)
            if not any("Aggregate" in n for n in below):
                problems.append(f"broadcast of a table that is not an aggregate ({node_id})")
    return problems


COMMANDS = {
    "adjust": ["adjust", "--unit", "msec", "--range", "999", "{one}"],
    "adjust-key": ["adjust", "--unit", "msec", "--range", "999", "--key", "key", "{one}"],
    # (every row group moves the reference time by more than 3 ms: ordered in place)
    "adjust-in-place": ["adjust", "--unit", "msec", "--range", "3", "{one}"],
    "explain-adjust": ["explain", "adjust", "--unit", "msec", "--range", "999", "{one}"],
    "merge": ["merge", "--bound-marker", "kind=bound", "{s1}", "{s2}", "{s3}"],
    "merge-discards": ["merge", "--discards", "{late}", "{s1}", "{s2}", "{s3}"],
    "merge-wait": [
        "merge",
        "--arrival",
        "recv",
        "--wait",
        "1s",
        "--unit",
        "msec",
        "--range",
        "5",
        "{s1}",
        "{s2}",
    ],
    "explain-merge": ["explain", "merge", "--bound-marker", "kind=bound", "{s1}", "{s2}", "{s3}"],
    "bound": ["bound", "--window", "1s", "--agg", "count(*)", "--agg", "avg(value)", "{one}"],
    "bound-key": [
        "bound",
        "--window",
        "1s",
        "--slide",
        "500ms",
        "--unit",
        "msec",
        "--range",
        "999",
        "--key",
        "key",
        "--agg",
        "max(value)",
        "{one}",
    ],
    "explain-bound": ["explain", "bound", "--window", "1s", "--agg", "count(*)", "{one}"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_plans_have_no_single_partition_and_no_collect(name, inputs, plans, run_cli, tmp_path):
    args = [a.format(**inputs, late=tmp_path / "late.csv") for a in COMMANDS[name]]
    out = tmp_path / "out.csv" if name.startswith("explain") else tmp_path / "out.parquet"
    fmt = ["--format", "csv"] if name.startswith("explain") else []
    res = run_cli(*args, *fmt, "-o", out, "-q")
    assert res.exit_code == 0, res.stderr
    assert out.exists()
    assert plans, "no plan was captured"
    # (the plans checked include the one that reads the input: the operator's own work;
    # adjust in place reads it in the writing tasks, over the row groups' numbers)
    reads = "Range" if name == "adjust-in-place" else "Scan parquet"
    assert any(reads in p for p in plans), "no captured plan reads the input"
    problems = {i: check_plan(p) for i, p in enumerate(plans)}
    bad = {i: p for i, p in problems.items() if p}
    assert not bad, "\n\n".join(f"{bad[i]}\n{plans[i]}" for i in bad)


def test_the_plan_check_sees_a_single_partition_window(spark):
    """The check itself: the naive running max (a window ordered over the whole input)
    is caught, and so is a broadcast of row-level data."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.range(0, 1000, 1, 4)
    naive = df.withColumn("m", F.max("id").over(Window.orderBy("id")))
    assert any("single partition" in p for p in check_plan(_plan(naive)))
    joined = df.join(F.broadcast(spark.range(0, 10)), "id")
    assert any("broadcast" in p for p in check_plan(_plan(joined)))
    fine = df.groupBy((F.col("id") % 3).alias("k")).count()
    assert check_plan(_plan(fine)) == []


@pytest.mark.parametrize("keyed", [False, True])
def test_explain_adjust_needs_no_aggregate_of_local_parquet_without_keys(
    keyed, inputs, plans, run_cli, tmp_path
):
    """Without keys, on local Parquet, explain adjust numbers the arrivals and finds the
    search's carry and the reference times its parts start from in the times read here:
    the search's job reads the time column, the writer's tasks the whole rows, with
    pyarrow, explained where they are read (no exchange, no sort, no scan by Spark's
    reader: a job over the row groups' numbers), and nothing is aggregated.  With a
    key those come from aggregates over the input in Spark, each a scan of its own, and
    the whole rows go to the parts of arrivals (one job)."""
    key = ["--key", "key"] if keyed else []
    out = tmp_path / "out.csv"
    args = ["explain", "adjust", "--unit", "msec", "--range", "999", *key, inputs["one"]]
    res = run_cli(*args, "--format", "csv", "-o", out, "-q")
    assert res.exit_code == 0, res.stderr
    assert len(plans) == (1 if keyed else 2), plans
    nodes = [n.strip() for plan in plans for _, n, _ in _tree(plan)]
    scans, aggregates = nodes.count("Scan parquet"), sum("Aggregate" in n for n in nodes)
    assert (scans > 2 and aggregates) if keyed else (scans, aggregates) == (1, 0), nodes
    if not keyed:  # (the search's plan first, then the writer's)
        written = {n.strip() for _, n, _ in _tree(plans[1])}
        assert "Range" in written and not {"Scan parquet", "Exchange", "Sort"} & written
        # the same bytes as the rows shuffled into parts of arrivals (as with bad rows set
        # aside, even when there are none)
        again = tmp_path / "again.csv"
        res = run_cli(*args, "--format", "csv", "-o", again, "-q", "--bad-rows", "discard")
        assert res.exit_code == 0, res.stderr
        assert len(plans) == 3 and "Exchange" in plans[2]
        assert again.read_bytes() == out.read_bytes()


def test_explain_adjust_slices_big_row_groups(inputs, plans, run_cli, tmp_path, monkeypatch):
    """Row groups of more than IN_PLACE_ROWS rows (Spark writes 128 MB ones) are explained
    where they are read too, each in slices of at most that many rows: the search's job,
    then the writer's over the row groups' numbers; the same bytes as the rows shuffled
    into parts of arrivals.  Not a file of one row group, whose slices one task would read."""
    from evtime.engine.adjust import core as adjust

    monkeypatch.setattr(adjust, "IN_PLACE_ROWS", 128)  # (the files: one group of 300 rows)
    out, again = tmp_path / "out.csv", tmp_path / "again.csv"
    args = ["explain", "adjust", "--unit", "msec", "--range", "999", inputs["one"]]
    res = run_cli(*args, "--format", "csv", "-o", out, "-q")
    assert res.exit_code == 0, res.stderr
    assert len(plans) == 2, plans
    written = {n.strip() for _, n, _ in _tree(plans[1])}
    assert "Range" in written and not {"Scan parquet", "Exchange", "Sort"} & written, written
    res = run_cli(*args, "--format", "csv", "-o", again, "-q", "--bad-rows", "discard")
    assert res.exit_code == 0, res.stderr
    assert len(plans) == 3 and "Exchange" in plans[2]
    assert again.read_bytes() == out.read_bytes()
    # one row group: one task would read all its slices, so the rows go to parts of
    # arrivals (as many tasks as shuffle partitions)
    one = inputs["one"].replace("*", "0")
    res = run_cli(*args[:-1], one, "--format", "csv", "-o", again, "-q", "--overwrite")
    assert res.exit_code == 0, res.stderr
    assert len(plans) == 4 and "Exchange" in plans[3]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_adjust_orders_rows_where_they_are_read(fmt, inputs, plans, run_cli, tmp_path, monkeypatch):
    """Without keys, on local Parquet whose row groups each move the reference time by
    more than the range, adjust's one job has no exchange and no sort, and not even a
    scan by Spark's reader: each task reads its row groups with pyarrow (its job runs over
    their numbers), orders and writes them, and the rows within the range of a group's
    edge are merged here.  The same bytes as the rows shuffled into parts of the output;
    a range the row groups do not outgrow (999 ms) takes the shuffle."""
    from evtime.engine.adjust import in_place as adjust_in_place

    fits = adjust_in_place.fits
    out, again = tmp_path / f"out.{fmt}", tmp_path / f"again.{fmt}"
    args = ["adjust", "--unit", "msec", "--range", "3", inputs["one"], "-q"]
    res = run_cli(*args, "-o", out)
    assert res.exit_code == 0, res.stderr
    assert len(plans) == 1, plans
    nodes = {n.strip() for _, n, _ in _tree(plans[0])}
    assert "Range" in nodes and not {"Scan parquet", "Exchange", "Sort"} & nodes, nodes
    monkeypatch.setattr(adjust_in_place, "fits", lambda *a: False)
    res = run_cli(*args, "-o", again)
    assert res.exit_code == 0, res.stderr
    assert len(plans) == 2 and "Exchange" in plans[1]
    assert again.read_bytes() == out.read_bytes()
    monkeypatch.setattr(adjust_in_place, "fits", fits)
    res = run_cli(*args[:4], "999", *args[5:], "-o", again, "--overwrite")
    assert res.exit_code == 0, res.stderr
    assert "Exchange" in plans[-1]


def test_explain_adjust_needs_no_search_job_when_row_groups_outgrow_the_range(
    inputs, plans, run_cli, tmp_path, monkeypatch
):
    """When every row group moves the reference time by more than the range, explain
    adjust runs one job, over the row groups' numbers: each row group is read (pyarrow) and
    explained by one task, from
    one pass over the times here (the rows near its edges, the next group's first rows).
    The same bytes as with the search's job first."""
    from evtime.engine.adjust import in_place as explain_in_place

    out, again = tmp_path / "out.csv", tmp_path / "again.csv"
    args = ["explain", "adjust", "--unit", "msec", "--range", "3", inputs["one"], "-q"]
    res = run_cli(*args, "--format", "csv", "-o", out)
    assert res.exit_code == 0, res.stderr
    assert len(plans) == 1, plans
    nodes = {n.strip() for _, n, _ in _tree(plans[0])}
    assert "Range" in nodes and not {"Scan parquet", "Exchange", "Sort"} & nodes, nodes
    monkeypatch.setattr(explain_in_place, "explain_plan", lambda *a: None)
    res = run_cli(*args, "--format", "csv", "-o", again)
    assert res.exit_code == 0, res.stderr
    assert len(plans) == 3  # (the search's job, then the writer's)
    assert again.read_bytes() == out.read_bytes()


@pytest.mark.parametrize(
    "extra, name, jobs, shuffled",
    [
        (["--range", "3"], "from the plan", 1, False),
        (["--range", "999"], "in files", 2, False),
        (["--range", "999", "--key", "key"], "in parts of arrivals", 1, True),
        (["--range", "3", "--bad-rows", "discard"], "in parts of arrivals", 1, True),
    ],
)
def test_explain_adjust_runs_the_way_it_chose(
    extra, name, jobs, shuffled, inputs, plans, run_cli, tmp_path, monkeypatch
):
    """The way evtime.engine.adjust.choose.choose_in_parts picks is the one that runs:
    from the plan, one job, a scan alone; in files, the search's job first; in parts of
    arrivals (keys, or bad rows set aside), the rows shuffled into those parts."""
    from evtime.engine.adjust import choose

    chosen, real = [], choose.choose_in_parts
    monkeypatch.setattr(
        choose, "choose_in_parts", lambda *a, **k: chosen.append(real(*a, **k)) or chosen[-1]
    )
    args = ["explain", "adjust", "--unit", "msec", *extra, inputs["one"], "-q"]
    res = run_cli(*args, "--format", "csv", "-o", tmp_path / "out.csv")
    assert res.exit_code == 0, res.stderr
    assert [w.name for w in chosen] == [name]
    assert len(plans) == jobs, plans
    assert ("Exchange" in plans[-1]) == shuffled


@pytest.mark.parametrize("keyed", [False, True])
def test_adjust_discards_numbered_from_the_footers(keyed, inputs, plans, run_cli, tmp_path):
    """``adjust --discards`` on Parquet read by Spark numbers the discarded arrivals from
    the rows per file in the footers: no join brings counts of rows per chunk (nor, without
    keys, any aggregate: with keys, the reference times are aggregates); the numbers are
    those of the reference model over the files in order."""
    import glob

    from tests.model.adjust import adjust as model

    key = ["--key", "key"] if keyed else []
    out, late = tmp_path / "out.parquet", tmp_path / "late.parquet"
    args = ["adjust", "--unit", "msec", "--range", "3", *key, inputs["one"], "-o", out]
    res = run_cli(*args, "--discards", late, "-q")
    assert res.exit_code == 0, res.stderr
    for plan in plans:
        nodes = [n.strip() for _, n, _ in _tree(plan)]
        assert not [n for n in nodes if "Join" in n or ("Aggregate" in n and not keyed)], nodes
    table = pa.concat_tables(pq.read_table(f) for f in sorted(glob.glob(inputs["one"])))
    times = table.column("time").cast(pa.int64()).to_pylist()
    keys = table.column("key").to_pylist() if keyed else [None] * len(times)
    arrivals = [((k,) if keyed else (), t) for k, t in zip(keys, times, strict=True)]
    rows = model(arrivals, 1_000_000, 3)
    want = [(r.arrival, r.time) for r in rows if r.decision == "discarded"]
    got = pq.read_table(late)
    got_times = got.column("time").cast(pa.int64()).to_pylist()
    pairs = zip(got.column("arrival").to_pylist(), got_times, strict=True)
    assert want and sorted(pairs) == want


@pytest.mark.parametrize("arrival", [[], ["--arrival", "recv"]])
def test_merge_discards_numbered_alike_read_here_and_by_spark(
    arrival, inputs, monkeypatch, run_cli, tmp_path, spark
):
    """``merge --discards`` gives its discards the same arrival numbers whether the sources
    are read here or by Spark (numbered there from the footers' rows per file; with
    ``--arrival`` the rows are numbered again in arrival order, over the partitions of a
    sort, which adaptive execution must not merge into one for the test to see them)."""
    coalesce = "spark.sql.adaptive.coalescePartitions.enabled"
    before = spark.conf.get(coalesce)
    spark.conf.set(coalesce, "false")
    try:
        got = _merged_discards(arrival, inputs, monkeypatch, run_cli, tmp_path)
    finally:
        spark.conf.set(coalesce, before)
    assert got["spark"].num_rows and got["spark"].equals(got["here"])


def _merged_discards(arrival, inputs, monkeypatch, run_cli, tmp_path) -> dict:
    got = {}
    for mode, limit in (("spark", "0"), ("here", str(1 << 30))):
        monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", limit)
        out, late = tmp_path / f"{mode}.parquet", tmp_path / f"{mode}-late.parquet"
        srcs = [inputs["s1"], inputs["s2"], inputs["s3"]]
        res = run_cli("merge", *arrival, *srcs, "-o", out, "--discards", late, "-q")
        assert res.exit_code == 0, res.stderr
        got[mode] = pq.read_table(late).sort_by("arrival")
    return got


@pytest.mark.parametrize(
    "extra, name, shuffled",
    [([], "in place", False), (["--discards", "late.csv"], "prefix scan", True)],
)
def test_adjust_runs_the_path_it_chose(
    extra, name, shuffled, inputs, plans, run_cli, tmp_path, monkeypatch
):
    """The path evtime.engine.adjust.choose picks is the one that runs: in place, a scan
    alone whose zones are merged here; with --discards, the prefix scan's shuffle."""
    from evtime.engine.adjust import choose, in_place

    chosen, real = [], choose.choose
    monkeypatch.setattr(choose, "choose", lambda *a: chosen.append(real(*a)) or chosen[-1])
    zones, made = [], in_place.Zones.made
    monkeypatch.setattr(in_place.Zones, "made", lambda *a: zones.append(a[1]) or made(*a))
    monkeypatch.chdir(tmp_path)
    args = ["adjust", "--unit", "msec", "--range", "3", inputs["one"], "-q", *extra]
    res = run_cli(*args, "-o", tmp_path / "out.csv")
    assert res.exit_code == 0, res.stderr
    assert [p.name for p in chosen] == [name]
    assert bool(zones) == (name == "in place")  # (the zones merged here: in place alone)
    nodes = {n.strip() for p in plans for _, n, _ in _tree(p)}
    assert ("Exchange" in nodes) == shuffled, nodes
