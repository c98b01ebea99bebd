"""The local driver JVM's heap and the Spark options of a command (evtime.session,
evtime.runner): no JVM is started here."""

from __future__ import annotations

import pytest

from evtime.session import (
    HEAP_MAX,
    HEAP_MIN,
    SessionOptions,
    _cgroup_limits,
    local_heap,
    local_heap_setting,
)
from tests.conftest import SAMPLES

GIB = 1 << 30
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


@pytest.mark.parametrize(
    ("physical", "heap"),
    [(2 * GIB, HEAP_MIN), (4 * GIB, GIB), (24 * GIB, 6 * GIB), (64 * GIB, HEAP_MAX)],
)
def test_local_heap_is_a_quarter_of_the_machine_within_limits(physical, heap):
    assert local_heap(physical) == heap


def test_big_local_jobs_get_the_heap_small_ones_and_clusters_keep_sparks(monkeypatch):
    monkeypatch.delenv("SPARK_DRIVER_MEMORY", raising=False)

    def on(master: str, small: bool = False) -> SessionOptions:
        return SessionOptions(master=master, small=small)

    assert local_heap_setting(on("local[*]")) == f"{local_heap() >> 20}m"
    assert local_heap_setting(on("local[2]")) == f"{local_heap() >> 20}m"
    assert local_heap_setting(on("local[*]", small=True)) is None
    assert local_heap_setting(on("spark://host:7077")) is None
    assert local_heap_setting(on("yarn")) is None
    assert local_heap_setting(on("local-cluster[2,1,1024]")) is None  # executors: own JVMs
    monkeypatch.setenv("SPARK_DRIVER_MEMORY", "2g")
    assert local_heap_setting(on("local[*]")) is None


def test_a_containers_memory_limit_is_read_when_it_has_one(tmp_path):
    v2, v1, unlimited = tmp_path / "v2", tmp_path / "v1", tmp_path / "max"
    v2.write_text(f"{2 * GIB}\n")
    v1.write_text(f"{3 * GIB}\n")
    unlimited.write_text("max\n")
    paths = (str(v2), str(v1), str(unlimited), str(tmp_path / "missing"))
    assert _cgroup_limits(paths) == [2 * GIB, 3 * GIB]


@pytest.mark.parametrize("command", [["adjust"], ["explain", "adjust"]])
def test_spark_options_before_the_command_apply_to_it(monkeypatch, tmp_path, command):
    """``evtime --reuse-server --master M --conf A COMMAND --conf B``: the command runs with
    the server, M and both settings (its own last, so they win)."""
    from evtime.cli import main
    from evtime.errors import UsageError
    from evtime.runner import inputs

    monkeypatch.delenv("EVTIME_REUSE_SERVER", raising=False)
    seen = []

    def start(inp, ses, *args, **kwargs):
        seen.append(ses)
        raise UsageError("stopped before Spark")

    monkeypatch.setattr(inputs, "start", start)
    top = ["--reuse-server", "--master", "local[1]", "--conf", "a=1"]
    own = ["--conf", "b=2", "--unit", "msec", "--range", "1", str(tmp_path / "in.csv")]
    with pytest.raises(SystemExit) as done:
        main([*top, *command, *own])
    assert done.value.code == 2
    (ses,) = seen
    assert ses.reuse_server and ses.master == "local[1]" and ses.remote is None
    assert ses.conf == ("a=1", "b=2")
    seen.clear()
    with pytest.raises(SystemExit):
        main([*command, *own])  # none before the command: the command's own alone
    assert not seen[0].reuse_server and seen[0].master is None and seen[0].conf == ("b=2",)


ADJUST = ["adjust", "--unit", "msec", "--range", "1"]
EXPLAIN = ["explain", "adjust", "--unit", "msec", "--range", "1"]
BOUND = ["bound", "--window", "1s", "--agg", "count(*)"]


@pytest.mark.parametrize(
    "command,opt",
    [
        (ADJUST, "-o"),
        (ADJUST, "--discards"),
        (EXPLAIN, "-o"),  # (explain has no --discards)
        (["merge"], "-o"),
        (["merge"], "--discards"),
        (BOUND, "-o"),
        (BOUND, "--discards"),
    ],
    ids=lambda x: x if isinstance(x, str) else " ".join(x[:2]),
)
def test_existing_output_is_refused_before_spark_starts(
    monkeypatch, tmp_path, capsys, command, opt
):
    """An output that exists (without --overwrite), or whose directory does not, is one line
    and exit 1 before any Spark session is built; with --overwrite the run goes on to
    build one."""
    import evtime.session
    from evtime.cli import main

    built = []

    def build_session(*args, **kwargs):
        built.append(args)
        raise SystemExit(9)

    monkeypatch.setattr(evtime.session, "build_session", build_session)
    there = tmp_path / "there.csv"
    there.write_text("keep me\n")
    given = [*command, str(SAMPLES / "tuples.parquet"), opt, str(there)]
    for args, words in [
        (given, [str(there), "exists", "--overwrite"]),
        (
            [*command, str(SAMPLES / "tuples.parquet"), opt, str(tmp_path / "no" / "x.csv")],
            ["directory", str(tmp_path / "no"), "does not exist"],
        ),
    ]:
        with pytest.raises(SystemExit) as done:
            main(args)
        err = capsys.readouterr().err
        assert done.value.code == 1 and all(w in err for w in words), err
        assert len(err.strip().splitlines()) == 1 and not built
    assert there.read_text() == "keep me\n"
    with pytest.raises(SystemExit) as done:
        main([*given, "--overwrite"])
    assert done.value.code == 9 and len(built) == 1


def test_big_inputs_get_more_shuffle_partitions_never_fewer(spark):
    """More than ROWS_PER_TASK rows per shuffle partition: enough partitions that each
    holds at most that many; a smaller input keeps the session's number."""
    from evtime.runner.context import ROWS_PER_TASK, shuffle_for

    before = spark.conf.get(SHUFFLE_PARTITIONS)
    try:
        spark.conf.set(SHUFFLE_PARTITIONS, "8")
        shuffle_for(spark, 8 * ROWS_PER_TASK)
        assert spark.conf.get(SHUFFLE_PARTITIONS) == "8"
        shuffle_for(spark, 25 * ROWS_PER_TASK - 1)
        assert spark.conf.get(SHUFFLE_PARTITIONS) == "25"
        shuffle_for(spark, 10)
        assert spark.conf.get(SHUFFLE_PARTITIONS) == "25"
    finally:
        spark.conf.set(SHUFFLE_PARTITIONS, before)


def test_modules_imported_while_the_session_starts_skip_a_failure():
    """build_session imports what every run needs next in a background thread while it
    waits for the JVM; a module that fails to import there is left for the real import."""
    import importlib.util
    import sys

    from evtime.session import WHILE_STARTING, _import_meanwhile

    sys.modules.pop("colorsys", None)
    _import_meanwhile(("evtime_no_such_module", "colorsys")).join(timeout=60)
    assert "colorsys" in sys.modules and "evtime_no_such_module" not in sys.modules
    # (a misspelt name would be skipped there without a word: each is a module that exists)
    missing = [m for m in WHILE_STARTING if importlib.util.find_spec(m) is None]
    assert not missing and WHILE_STARTING, missing


def test_an_in_process_run_leaves_the_shared_session_as_it_was(run_cli, spark):
    """What a run sets on the session (here by --conf, as a user would) is undone when the
    in-process runner returns (tests/where.py): no later test sees it."""
    before = dict(spark.conf.getAll)
    r = run_cli(
        "adjust", "--unit", "msec", "--range", "999", SAMPLES / "tuples.parquet",
        "--conf", f"{SHUFFLE_PARTITIONS}=7", "--conf", "spark.sql.evtime.test.unset=1",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    after = dict(spark.conf.getAll)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    # (only what the JVM was started with may differ, as the builder records it: a run
    # cannot change that for the running JVM either)
    assert not [k for k in changed if k.startswith("spark.sql.")], changed
    assert after[SHUFFLE_PARTITIONS] == before[SHUFFLE_PARTITIONS]
