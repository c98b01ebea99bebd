"""Small local inputs are read and written in evtime's own process (no Python workers, no
checkpoint job); the results are byte for byte those of reading and writing in Spark tasks."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from evtime.errors import UsageError
from evtime.io import inputs
from evtime.io.sources import expand_inputs
from evtime.runner import driver, publish
from evtime.runner.context import RunContext
from evtime.session import SessionOptions
from tests.conftest import SAMPLES
from tests.where import here_and_in_spark

SAMPLE = str(SAMPLES / "tuples.parquet")


@pytest.fixture
def task_reads(monkeypatch) -> list[int]:
    """Counts the reads done by Spark tasks (inputs.read)."""
    calls: list[int] = []
    real = inputs.read

    def counted(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(inputs, "read", counted)
    return calls


def test_a_small_local_input_is_read_in_the_driver(run_cli, task_reads):
    r = run_cli("adjust", "-q", "--unit", "msec", "--range", "999", SAMPLE)
    assert r.exit_code == 0, r.stderr
    assert [row["tuple"] for row in r.csv()] == ["B", "A", "D", "C", "E"]
    assert task_reads == []


def test_a_zero_limit_reads_in_spark_tasks(run_cli, task_reads, monkeypatch):
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    r = run_cli("adjust", "-q", "--unit", "msec", "--range", "999", SAMPLE)
    assert r.exit_code == 0, r.stderr
    assert [row["tuple"] for row in r.csv()] == ["B", "A", "D", "C", "E"]
    assert task_reads == [1]


@pytest.mark.parametrize(
    ("limit", "conf", "partitions"),
    [(None, [], "1"), ("0", [], "8"), (None, ["--conf", "spark.sql.shuffle.partitions=3"], "3")],
)
def test_a_run_read_in_the_driver_shuffles_into_one_partition(
    run_cli, spark, monkeypatch, limit, conf, partitions
):
    """A few MiB at most: one shuffle partition (fewer tasks); a bigger input keeps evtime's
    default, and --conf wins."""
    if limit is not None:
        monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", limit)
    seen = []  # (the setting while the run writes: the test runner restores it after)
    write = publish.write_and_publish

    def writing(*args, **kw):
        seen.append(spark.conf.get("spark.sql.shuffle.partitions"))
        return write(*args, **kw)

    monkeypatch.setattr(publish, "write_and_publish", writing)
    r = run_cli("adjust", "-q", *conf, "--unit", "msec", "--range", "999", SAMPLE)
    assert r.exit_code == 0, r.stderr
    assert [row["tuple"] for row in r.csv()] == ["B", "A", "D", "C", "E"]
    assert seen == [partitions]


@pytest.mark.parametrize(("limit", "jobs"), [(None, (1, 1)), ("0", (2, 99))])
def test_a_run_read_in_the_driver_runs_its_plan_as_one_job(
    run_cli, spark, monkeypatch, limit, jobs
):
    """A few MiB at most: no adaptive execution, whose every shuffle is a Spark job of its
    own (a merge's one plan: one job); bigger inputs keep it."""
    if limit is not None:
        monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", limit)
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    args = ["merge", "-q", "--bound-marker", "tuple=E", "--unit", "msec", "--range", "9"]
    r = run_cli(*args, f"a={SAMPLE}", f"b={SAMPLE}")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.count("\n") > 3
    ran = len(set(tracker.getJobIdsForGroup()) - before)
    assert jobs[0] <= ran <= jobs[1], ran


def test_explain_adjust_read_in_the_driver_is_one_job(run_cli, spark):
    """explain adjust of small files read here: every row numbered and explained here in
    Arrow (no aggregate, no join, no search job): the one Spark job that hands the rows
    over; arrivals run on across the files; the model's decisions."""
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    args = ["explain", "adjust", "-q", "--unit", "msec", "--range", "999", "--format", "csv"]
    r = run_cli(*args, SAMPLE, SAMPLE)
    assert r.exit_code == 0, r.stderr
    assert len(set(tracker.getJobIdsForGroup()) - before) == 1
    rows = r.csv()
    assert [int(x["arrival"]) for x in rows] == list(range(1, 11))
    assert [x["tuple"] for x in rows] == ["A", "B", "C", "D", "E"] * 2
    from tests.model.adjust import adjust as model

    times = pq.read_table(SAMPLE).column("time").cast("int64").to_pylist() * 2
    want = model([((), t) for t in times], 1_000_000, 999)
    got = [(x["decision"], x["output_pos"], x["released_by"]) for x in rows]
    assert got == [(w.decision, str(w.output_pos or ""), str(w.released_by or "")) for w in want]


def test_which_runs_read_in_the_driver(tmp_path, monkeypatch):
    files = expand_inputs([SAMPLE], None)
    size = Path(SAMPLE).stat().st_size
    assert driver.driver_io(files, SessionOptions())
    assert driver.driver_io(files, SessionOptions(master="local[2]"))
    assert driver.driver_io(files, SessionOptions(reuse_server=True))  # the server is local
    assert not driver.driver_io(files, SessionOptions(master="local-cluster[2,1,1024]"))
    assert not driver.driver_io(files, SessionOptions(master="spark://h:7077"))
    assert not driver.driver_io(files, SessionOptions(remote="sc://localhost:15002"))
    assert not driver.driver_io([], SessionOptions())
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", str(size))
    assert driver.driver_io(files, SessionOptions())
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", str(size - 1))
    assert not driver.driver_io(files, SessionOptions())
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "lots")
    with pytest.raises(UsageError, match="EVTIME_DRIVER_IO_MAX"):
        driver.driver_io(files, SessionOptions())


def _both(run_cli, monkeypatch, tmp_path: Path, args: list[str], outs: list[str]):
    """Run ``args`` (with ``{d}`` for an output directory) reading in the driver and in
    tasks; returns the exit codes, stderrs and the output files' bytes of both."""
    dirs = iter([tmp_path / "limit-None", tmp_path / "limit-0"])  # (here; in tasks)

    def run():
        d = next(dirs)
        d.mkdir(exist_ok=True)
        r = run_cli(*(a.format(d=d) for a in args))
        files = {o: (d / o).read_bytes() if (d / o).exists() else None for o in outs}
        return r.exit_code, r.stderr.split("(")[0], files

    return here_and_in_spark(monkeypatch, run)


def test_bad_rows_discarded_the_same_either_way(run_cli, monkeypatch, tmp_path):
    src = tmp_path / "in.csv"
    src.write_text(
        "k,time,v\n"
        "a,2009-03-01T12:00:00.5Z,1\n"
        "a,not a time,2\n"
        "a,2009-03-01T12:00:00.1Z,3,extra\n"
        "b,2009-03-01T12:00:00.2Z,4\n"
        "a,2009-03-01T11:00:00Z,5\n"
    )
    args = ["adjust", "--unit", "msec", "--range", "300", "--bad-rows", "discard"]
    args += ["-o", "{d}/out.parquet", "--discards", "{d}/late.csv", str(src)]
    inside, tasks = _both(run_cli, monkeypatch, tmp_path, args, ["out.parquet", "late.csv"])
    assert inside[0] == 0, inside[1]
    assert inside[1] == tasks[1]  # the summary (without the duration)
    assert inside[2]["late.csv"] == tasks[2]["late.csv"]
    a = pq.read_table(tmp_path / "limit-None" / "out.parquet")
    b = pq.read_table(tmp_path / "limit-0" / "out.parquet")
    assert a.equals(b) and a.num_rows == 2
    assert inside[2]["late.csv"].decode().count("bad input") == 2


def test_bad_input_fails_the_same_either_way(run_cli, monkeypatch, tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("k,time\na,2009-03-01T12:00:00Z\nb,yesterday\n")
    args = ["adjust", "--unit", "sec", "--range", "1", "-o", "{d}/out.csv", str(src)]
    inside, tasks = _both(run_cli, monkeypatch, tmp_path, args, ["out.csv"])
    assert inside == tasks
    code, err, files = inside
    assert code == 1 and files == {"out.csv": None}
    assert err.startswith("evtime: ") and "in.csv" in err and "line 3" in err
    assert "\u27e6" not in err  # the marks of errors raised in tasks are not shown


def test_merge_and_bound_the_same_either_way(run_cli, monkeypatch, tmp_path):
    sources = [str(SAMPLES / "merge" / f) for f in ("orders.csv", "trades.csv")]
    args = ["merge", "-o", "{d}/m.csv", *sources]
    inside, tasks = _both(run_cli, monkeypatch, tmp_path, args, ["m.csv"])
    assert inside[0] == 0, inside[1]
    assert inside == tasks
    readings = SAMPLES / "bound" / "readings.csv"
    args = ["bound", "--window", "1m", "--agg", "count(*)", "-o", "{d}/b.csv", str(readings)]
    inside, tasks = _both(run_cli, monkeypatch, tmp_path, args, ["b.csv"])
    assert inside[0] == 0, inside[1]
    assert inside == tasks
    # the windows of a run read in tasks are few: written from the driver, unless the
    # limit is 0 (a Python worker writes them)
    monkeypatch.setenv("EVTIME_DRIVER_ROWS_MAX", "0")
    (tmp_path / "rows0").mkdir()
    _, in_workers = _both(run_cli, monkeypatch, tmp_path / "rows0", args, ["b.csv"])
    assert in_workers == tasks
    assert tasks[2]["b.csv"].count(b"\n") > 2


def test_few_rows(monkeypatch):
    tasks = RunContext(in_driver=False)  # (as a run that reads in tasks)
    most = driver.DRIVER_ROWS_MAX
    assert driver.few_rows(tasks, most) and not driver.few_rows(tasks, most + 1)
    monkeypatch.setenv("EVTIME_DRIVER_ROWS_MAX", "0")
    assert not driver.few_rows(tasks, 1)
    monkeypatch.setenv("EVTIME_DRIVER_ROWS_MAX", "many")
    with pytest.raises(UsageError, match="EVTIME_DRIVER_ROWS_MAX"):
        driver.few_rows(tasks, 1)


def test_malformed_jsonl_discarded_the_same_either_way(run_cli, monkeypatch, tmp_path):
    from tests.test_bad_rows import JSONL

    src = tmp_path / "x.jsonl"
    src.write_text(JSONL)
    args = ["adjust", "--unit", "msec", "--range", "999", "--bad-rows", "discard"]
    args += ["-o", "{d}/out.csv", "--discards", "{d}/d.csv", str(src)]
    inside, tasks = _both(run_cli, monkeypatch, tmp_path, args, ["out.csv", "d.csv"])
    assert inside[0] == 0, inside[1]
    assert inside == tasks
    assert inside[2]["d.csv"].decode().count("malformed JSON line") == 2
