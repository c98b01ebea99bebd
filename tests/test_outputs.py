"""Outputs: complete or not at all (also under SIGKILL), --max-discards for cron alerting."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import SAMPLES


def test_max_discards_exits_3_after_writing(run_cli, workdir):
    r = run_cli(
        "adjust",
        "--unit",
        "usec",
        "--range",
        "999",
        SAMPLES / "tuples.parquet",
        "-o",
        "out.csv",
        "--max-discards",
        "1",
    )
    assert r.exit_code == 3
    assert "read 5, released 3, discarded 2" in r.stderr
    assert "2 rows discarded, more than --max-discards 1" in r.stderr
    assert len((workdir / "out.csv").read_text().splitlines()) == 4  # header + A, C, E
    ok = run_cli(
        "adjust",
        "--unit",
        "usec",
        "--range",
        "999",
        SAMPLES / "tuples.parquet",
        "-o",
        "out2.csv",
        "--max-discards",
        "2",
    )
    assert ok.exit_code == 0, ok.stderr


# evtime, held where the output is assembled but not yet published (writer.commit): it says
# so in the file named by argv[1] and waits there to be killed
HELD_AT_COMMIT = """
import os, sys, time
from evtime.io import writer

HELD = sys.argv.pop(1)

def held(sink, tmp):
    with open(HELD + ".tmp", "w") as fh:
        fh.write(tmp)
    os.replace(HELD + ".tmp", HELD)
    time.sleep(3600)

writer.commit = held
sys.argv[0] = "evtime"
from evtime.cli import entry
entry()
"""


@pytest.mark.cli
def test_sigkill_mid_write_leaves_the_destination_as_it_was(tmp_path, cli_env):
    n = 1000
    pq.write_table(
        pa.table({"time": pa.array(range(n), pa.timestamp("ns")), "pad": pa.array(["x" * 40] * n)}),
        tmp_path / "big.parquet",
    )
    dest = tmp_path / "out.csv"
    dest.write_text("old content\n")
    # the killed run cannot remove its part files: they stay under tmp_path, not in /tmp
    staging = tmp_path / "staging"
    staging.mkdir()
    held = tmp_path / "held"
    args = ["adjust", "--unit", "nsec", "--range", "0", "big.parquet", "-o", "out.csv"]
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD_AT_COMMIT, str(held), *args, "--overwrite", "-q"],
        cwd=tmp_path,
        env={**cli_env, "EVTIME_STAGING": str(staging)},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # (not a race: the run waits at that point until it is killed)
        deadline = time.monotonic() + 300
        while not held.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert held.exists(), f"evtime did not reach the publishing step (status {proc.poll()})"
        assert os.path.getsize(held.read_text()) > n  # (the new output, all assembled)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert dest.read_text() == "old content\n"
    # what the killed run left: its staging directory and its half-written output; the
    # next run's staging (on this machine, once they are a minute old) removes both
    from evtime.io.staging import OWNER, remove_leftovers

    left = [p for p in staging.iterdir() if p.name.startswith("evtime-")]
    temps = [p for p in tmp_path.iterdir() if p.name.startswith(".out.csv.evtime-")]
    assert len(left) == 1 and (left[0] / OWNER).exists() and len(temps) == 1
    assert remove_leftovers(str(staging)) == []  # (too recent: a run may be starting there)
    _aged(left[0])
    assert remove_leftovers(str(staging)) == [str(left[0])]
    assert not left[0].exists() and not temps[0].exists()
    assert dest.read_text() == "old content\n"


def _aged(path) -> None:
    from evtime.io.staging import STALE

    old = time.time() - STALE - 1
    os.utime(path, (old, old))


def test_leftovers_are_only_dead_runs_of_this_host(tmp_path, monkeypatch):
    """Only a dead run's staging of this host goes: a live run's (its owner file locked),
    another host's (a shared EVTIME_STAGING), one without an owner file, and anything not
    named evtime-* stay."""
    from evtime.io.staging import OWNER, remove_leftovers, shared_dir

    monkeypatch.setenv("EVTIME_STAGING", str(tmp_path))
    with shared_dir() as live:
        _aged(live)
        other = tmp_path / "evtime-otherhost"
        other.mkdir()
        (other / OWNER).write_text("host some-other-machine\n")
        plain = tmp_path / "evtime-no-owner"
        plain.mkdir()
        mine = tmp_path / "not-evtime"
        mine.mkdir()
        (mine / OWNER).write_text((Path(live) / OWNER).read_text())
        for p in (other, plain, mine):
            _aged(p)
        assert remove_leftovers(str(tmp_path)) == []
        assert os.path.isdir(live)
        assert other.exists() and plain.exists() and mine.exists()
    assert not os.path.exists(live)  # (removed at the end of its run)


def test_a_killed_runs_copy_of_standard_input_is_a_leftover_too(tmp_path, monkeypatch):
    """Standard input is copied into a staging directory of its own (removed at exit), so a
    run killed while it reads a pipe leaves nothing a later run does not remove."""
    from evtime.io import sources
    from evtime.io.staging import OWNER, remove_leftovers, removed

    monkeypatch.setenv("EVTIME_STAGING", str(tmp_path))
    monkeypatch.setattr(sources.sys, "stdin", io.TextIOWrapper(io.BytesIO(b"time\n1\n")))
    monkeypatch.setattr(sources.atexit, "register", lambda *a: None)  # (as if killed)
    path = Path(sources._spool_stdin())
    assert path.read_bytes() == b"time\n1\n" and (path.parent / OWNER).exists()
    assert path.parent.parent == tmp_path
    _aged(path.parent)
    assert remove_leftovers(str(tmp_path)) == []  # (this process lives: its lock is held)
    removed(str(path.parent))
    assert not path.parent.exists()


@pytest.mark.parametrize(
    "command",
    [
        ["merge", "a.csv", "b.csv"],
        ["bound", "--window", "10s", "--agg", "count(*)", "b.csv"],
    ],
    ids=["merge", "bound"],
)
def test_max_discards_and_accounting_in_merge_and_bound(run_cli, workdir, command):
    """merge and bound enforce --max-discards too (exit 3, outputs written) and their
    summary's read is counted on the input."""
    (workdir / "a.csv").write_text(
        "id,time\na1,2024-01-01T00:00:01Z\na2,2024-01-01T00:00:02Z\na3,2024-01-01T00:00:03Z\n"
    )
    # b's second row is below b's own bound (5 s): discarded by merge and by bound
    (workdir / "b.csv").write_text("id,time\nb1,2024-01-01T00:00:05Z\nb2,2024-01-01T00:00:01Z\n")
    r = run_cli(*command, "-o", "out.csv", "--max-discards", "0")
    assert r.exit_code == 3, r.stderr
    assert "discarded 1" in r.stderr
    assert "1 rows discarded, more than --max-discards 0" in r.stderr
    assert (workdir / "out.csv").exists()
    ok = run_cli(*command, "-o", "out2.csv", "--max-discards", "1")
    assert ok.exit_code == 0, ok.stderr
    read = 5 if command[0] == "merge" else 2
    assert f"read {read}," in ok.stderr


def test_parts_are_appended_whole_to_files_and_pipes(tmp_path):
    """Text parts are copied in the kernel into files, through a buffer into pipes."""
    from evtime.io.writer import _copy

    part = tmp_path / "part"
    body = os.urandom(3 << 20) + b"end"
    part.write_bytes(body)
    with open(tmp_path / "out", "wb") as out:
        out.write(b"header\n")
        out.flush()
        with open(part, "rb", buffering=0) as src:
            _copy(src, out)
    assert (tmp_path / "out").read_bytes() == b"header\n" + body
    r, w = os.pipe()
    with open(w, "wb") as out, open(part, "rb", buffering=0) as src:
        got = io.BytesIO()

        def drain() -> None:
            with open(r, "rb") as fh:
                got.write(fh.read())

        t = threading.Thread(target=drain)
        t.start()
        _copy(src, out)
    t.join()
    assert got.getvalue() == body
    sink = io.BytesIO()  # no file number
    with open(part, "rb", buffering=0) as src:
        _copy(src, sink)
    assert sink.getvalue() == body


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
@pytest.mark.parametrize(("held_max", "encoded"), [(64 << 20, False), (100, False), (100, True)])
def test_a_part_step_gets_each_whole_part(tmp_path, monkeypatch, fmt, held_max, encoded):
    """adjust without keys finds its keep flag as each part is written: the writer hands
    every whole part below ``step_below`` to the step (held in memory, or staged when big:
    ``held_max`` bytes), across batches, writes what it yields with the route it gives
    (strings, or ``encoded`` as numbers into route names), and leaves the parts after it
    (the bad rows) as they come."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from evtime.columns import PART, ROUTE
    from evtime.io import writer
    from evtime.io.reader import Layout
    from evtime.io.writer import Sink, _write_parts, stage
    from evtime.steps import routes

    monkeypatch.setattr(writer, "HELD_MAX", held_max)
    n = 50  # rows 0..49 in output order: parts of 10, and bad rows in part 1024
    part = [i // 10 for i in range(n)] + [1024, 1024]
    rows = list(range(n)) + [100, 98]  # (bad rows: one per route, not in order)
    # every part's rows in descending order, the bad rows in their own order
    order = sorted(range(n + 2), key=lambda i: (part[i], -rows[i] if part[i] < 1024 else i))
    table = pa.table(
        {
            PART: pa.array([part[i] for i in order], pa.int64()),
            "v": pa.array([rows[i] for i in order], pa.int64()),
            ROUTE: pa.array([None if part[i] < 1024 else ["discard", "out"][i % 2] for i in order]),
        }
    )
    wholes = []

    def step(whole: pa.Table):  # the part turned round, routed by v % 7
        wholes.append(whole.column("v").to_pylist())
        v = whole.column("v").to_pylist()[::-1]
        route = ["out" if x % 7 else "discard" for x in v]
        if encoded:
            route = routes([r == "discard" for r in route], ["out", "discard"])
        yield pa.RecordBatch.from_pydict(
            {PART: whole.column(PART).to_pylist(), "v": v, ROUTE: route}
        )

    lay = Layout(pa.schema([("v", pa.int64())]), "v")
    sinks = [Sink("o", ("out",), None, fmt, ["v"]), Sink("d", ("discard",), None, fmt, ["v"])]
    staging = tmp_path / "staging"
    staging.mkdir()
    batches = table.to_batches(max_chunksize=4)  # runs of a part across several batches
    seen = _write_parts(iter(batches), sinks, lay, str(staging), step, 1024)
    assert wholes == [list(range(p * 10 + 9, p * 10 - 1, -1)) for p in range(5)]
    discarded = [r for r in range(n) if not r % 7]
    assert (seen["out"], seen["discard"]) == (n - len(discarded) + 1, len(discarded) + 1)
    assert sorted(os.listdir(staging)) == sorted(
        f"part-{s}-{p:06d}" for s in "od" for p in [0, 1, 2, 3, 4, 1024]
    )  # (no held part left behind)
    schema = StructType([StructField("v", LongType()), StructField(ROUTE, StringType())])
    for sink, want in [
        (sinks[0], [r for r in range(n) if r % 7] + [98]),
        (sinks[1], [r for r in range(n) if not r % 7] + [100]),
    ]:
        out = tmp_path / f"{sink.name}.{fmt}"
        stage(sink, str(staging), lay, schema, str(out))
        if fmt == "parquet":
            got = pq.read_table(out).column("v").to_pylist()
        elif fmt == "csv":
            got = [int(x) for x in out.read_text().split()[1:]]
        else:
            got = [int(x.split(":")[1].strip(" }")) for x in out.read_text().splitlines()]
        assert got == want
        # each part is removed once assembled (its pages freed at once, not at the end)
        assert not [f for f in os.listdir(staging) if f.startswith(f"part-{sink.name}-")]
    assert os.listdir(staging) == []


def test_parts_as_read_are_marked_done_one_by_one_and_assembled_in_order(tmp_path):
    """Rows explained where they were read (evtime.steps.EachPart): a task holds its
    parts in any order (row groups of files Spark packed together), each marked done as
    soon as its files are written; the output is assembled in the order of the parts, and
    a part no task had (no rows) does not hold it up once the job is over."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from evtime.columns import PART, ROUTE
    from evtime.io.reader import Layout
    from evtime.io.writer import Early, Sink, _write_parts, done_path
    from evtime.steps import EachPart

    lay = Layout(pa.schema([("v", pa.int64())]), "v")
    sink = Sink("o", ("out",), str(tmp_path / "out.csv"), "csv", ["v"])
    staging = tmp_path / "staging"
    staging.mkdir()
    done: list[tuple[int, list[str]]] = []

    def mark(part: int) -> None:
        done.append((part, sorted(os.listdir(staging))))
        open(done_path(str(staging), part), "wb").close()

    def task(parts: list[int]) -> None:
        table = pa.table(
            {
                PART: pa.array([p for p in parts for _ in range(3)], pa.int64()),
                "v": pa.array([p * 10 + i for p in parts for i in range(3)], pa.int64()),
                ROUTE: pa.array(["out"] * 3 * len(parts)),
            }
        )
        _write_parts(iter(table.to_batches(max_chunksize=2)), [sink], lay, str(staging), done=mark)

    schema = StructType([StructField("v", LongType()), StructField(ROUTE, StringType())])
    early = Early([sink], str(staging), lay, schema, EachPart(5))
    task([3, 1])
    task([4, 2])  # (part 0: no rows)
    assert [p for p, _ in done] == [3, 1, 4, 2]
    assert all(f"part-o-{p:06d}" in files for p, files in done)  # (done once written)
    assert early.finish() == {"o": 4}
    got = [int(x) for x in Path(early.tmp["o"]).read_text().split()[1:]]
    assert got == [p * 10 + i for p in (1, 2, 3, 4) for i in range(3)]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_rows_written_here_are_one_file_per_sink_in_part_order(tmp_path, fmt):
    """Rows written in this process (evtime.io.writer.Job.here): every part of a sink goes
    on in one staged file (hundreds of parts, with gaps in their numbers, given in no
    order), assembled in the order of the parts, each part's rows as they came."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from evtime.columns import PART, ROUTE
    from evtime.io.reader import Layout
    from evtime.io.writer import Job, Sink, stage

    parts = [(p * 7) % 400 * 3 for p in range(400)]  # (every part once, out of order)
    table = pa.table(
        {
            PART: pa.array([p for p in parts for _ in range(2)], pa.int64()),
            "v": pa.array([p * 10 + i for p in parts for i in range(2)], pa.int64()),
            ROUTE: pa.array(["out", "late"] * len(parts)),
        }
    )
    lay = Layout(pa.schema([("v", pa.int64())]), "v")
    sinks = [Sink(n, (n,), None, fmt, ["v"]) for n in ("out", "late")]
    staging = tmp_path / "staging"
    staging.mkdir()
    seen = Job(sinks, lay, str(staging)).here(table)
    assert seen["out"] == seen["late"] == len(parts)
    assert sorted(os.listdir(staging)) == ["part-late-000000", "part-out-000000"]
    schema = StructType([StructField("v", LongType()), StructField(ROUTE, StringType())])
    for sink, i in zip(sinks, range(2), strict=True):
        out = tmp_path / f"{sink.name}.{fmt}"
        stage(sink, str(staging), lay, schema, str(out))
        got = (
            pq.read_table(out).column("v").to_pylist()
            if fmt == "parquet"
            else [int(x) for x in out.read_text().split()[1:]]
        )
        assert got == [p * 10 + i for p in sorted(parts)]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_derived_columns_are_made_where_the_rows_are_written(tmp_path, fmt):
    """A sink's derived columns (evtime.io.writer.Derived) do not travel with the rows: a
    copy of another column under its own name, or the label an integer column numbers
    (null for null), typed in the output as if Spark had carried them."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    from evtime.columns import PART, ROUTE
    from evtime.io.reader import Layout
    from evtime.io.writer import Derived, Sink, _write_parts, stage

    table = pa.table(
        {
            PART: pa.array([0, 0, 1], pa.int64()),
            "v": pa.array([5, 6, 7], pa.int64()),
            "src": pa.array([1, None, 0], pa.int32()),
            ROUTE: pa.array(["out"] * 3),
        }
    )
    lay = Layout(pa.schema([("v", pa.int64())]), "v")
    derived = {"name": Derived("src", ("a.csv", "b.csv")), "copy": Derived("v")}
    sink = Sink("o", ("out",), None, fmt, ["v", "name", "copy"], derived=derived)
    assert sink.reads() == {"v", "src"}
    staging = tmp_path / "staging"
    staging.mkdir()
    _write_parts(iter(table.to_batches()), [sink], lay, str(staging))
    schema = StructType(
        [
            StructField(PART, LongType()),
            StructField("v", LongType()),
            StructField("src", IntegerType()),
            StructField(ROUTE, StringType()),
        ]
    )
    out = tmp_path / f"o.{fmt}"
    stage(sink, str(staging), lay, schema, str(out))
    if fmt == "parquet":
        got = pq.read_table(out)
        assert got.schema == pa.schema(
            [("v", pa.int64()), ("name", pa.string()), ("copy", pa.int64())]
        )
        assert got.to_pydict() == {
            "v": [5, 6, 7],
            "name": ["b.csv", None, "a.csv"],
            "copy": [5, 6, 7],
        }
    else:
        assert out.read_text().splitlines() == [
            "v,name,copy",
            "5,b.csv,5",
            "6,,6",
            "7,a.csv,7",
        ]


class _Passing:
    """A part step that passes each part on as it is, for parts laid out in ``ranges``."""

    columns = ()

    def __init__(self, ranges, fail_at=None):
        self.ranges, self.fail_at = ranges, fail_at

    def __call__(self, part):
        from evtime.columns import PART

        if self.fail_at is not None and part.column(PART)[0].as_py() == self.fail_at:
            raise ValueError("a task fails")
        yield from part.to_batches()


def _ranged_rows(spark, n_rows: int, ranges):
    from pyspark.sql import functions as F

    from evtime.columns import PART, ROUTE
    from evtime.engine.scan import in_ranges

    df = spark.range(n_rows).select(
        "id", (F.col("id") * (ranges.top + 1) / n_rows).cast("long").alias(PART)
    )
    df = df.withColumn(ROUTE, F.when(F.col("id") % 5 == 0, "discard").otherwise("out"))
    return in_ranges(df, ranges).sortWithinPartitions(PART, "id")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_outputs_in_ranges_are_assembled_while_the_job_runs(spark, tmp_path, monkeypatch, fmt):
    """Parts laid out in runs, one per Spark partition, in order (a step with ``ranges``):
    each sink is assembled by a thread of the driver as the tasks finish (writer.Early),
    and comes out whole and in order, every part file counted."""
    from evtime.engine.scan import Ranges
    from evtime.io import writer
    from evtime.io.reader import Layout
    from evtime.io.writer import Sink
    from evtime.runner import publish
    from evtime.runner.context import RunContext

    made = []
    early = writer.Early
    monkeypatch.setattr(writer, "Early", lambda *a: made.append(early(*a)) or made[-1])
    ranges = Ranges(4, 99)
    df = _ranged_rows(spark, 1000, ranges)
    out, late = tmp_path / f"out.{fmt}", tmp_path / f"late.{fmt}"
    sinks = [
        Sink("output", ("out",), str(out), fmt, ["id"]),
        Sink("discards", ("discard",), str(late), fmt, ["id"]),
    ]
    lay = Layout(pa.schema([("id", pa.int64())]), "id")
    counts = publish.publish_jobs(RunContext(), [(df, sinks, lay)], [False], _Passing(ranges))
    assert len(made) == 1
    assert (counts["out"], counts["discard"]) == (800, 200)
    for path, want in [(out, [i for i in range(1000) if i % 5]), (late, list(range(0, 1000, 5)))]:
        if fmt == "parquet":
            got = pq.read_table(path).column("id").to_pylist()
        else:
            got = [int(x) for x in path.read_text().split()[1:]]
        assert got == want
    assert sorted(os.listdir(tmp_path)) == sorted([out.name, late.name])


def test_a_failed_job_leaves_no_output_assembled_early(spark, tmp_path):
    from evtime.engine.scan import Ranges
    from evtime.io.reader import Layout
    from evtime.io.writer import Sink
    from evtime.runner import publish
    from evtime.runner.context import RunContext

    ranges = Ranges(4, 99)
    df = _ranged_rows(spark, 1000, ranges)
    out = tmp_path / "out.csv"
    sinks = [Sink("output", ("out",), str(out), "csv", ["id"])]
    lay = Layout(pa.schema([("id", pa.int64())]), "id")
    with pytest.raises(Exception, match="a task fails"):
        publish.publish_jobs(
            RunContext(), [(df, sinks, lay)], [False], _Passing(ranges, fail_at=80)
        )
    assert os.listdir(tmp_path) == []


def test_in_routes_of_numbered_and_named_routes():
    """A sink's rows: on a dictionary's indices (as the part steps number the routes) as
    pyarrow's is_in finds them on the names."""
    import numpy as np
    import pyarrow.compute as pc

    from evtime.io.writer import in_routes
    from evtime.steps import routes

    names = ["out", "discard", "discard:2"]
    numbered = routes(np.array([0, 1, 2, 2, 0, 1]), names)
    named = pa.array(["out", "discard", "discard:2", "discard:2", "out", None])
    for sink in [("out",), ("discard", "discard:2"), ("late",)]:
        expected = pc.is_in(numbered.cast(pa.string()), pa.array(sink, pa.string()))
        assert in_routes(numbered, sink).to_pylist() == expected.to_pylist()
        expected = pc.is_in(named, pa.array(sink, pa.string())).to_pylist()
        assert in_routes(named, sink).to_pylist() == expected
