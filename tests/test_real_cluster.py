"""evtime on a real Spark standalone cluster whose worker has a private /tmp (see
tests/standalone.py), inputs and outputs on S3 (moto's server on loopback): each command
gives the same bytes as in local mode, staged on S3 beside the output (no shared POSIX
directory: the default staging, evtime.io.staging), with nothing left there; a local output
without a staging URL stops before Spark starts.  (``--state`` directories stay local paths:
the pair's state directory is outside /tmp, standing for a shared mount.)

Time: an application on this cluster pays a driver JVM, an executor JVM and the executor's
Python workers before its first task (~15 s on an idle machine, 40 s on a busy one).  One
run, ``adjust``, is the installed script in a process of its own, as users run it; the other
commands and the ``--state`` pair run the same in-process CLI call (tests/where.py) in one
driver process kept for the module (``driver``): one application, whose executor and Python
workers every run reuses.  The cluster's worker offers cores for two applications at once
(that one and a subprocess run's)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, Result
from tests.standalone import Standalone, unshare_refusal
from tests.where import Worker

pytestmark = pytest.mark.cli

MERGE = SAMPLES / "merge"
COMMANDS = {
    "adjust": ["adjust", "--unit", "msec", "--range", "500", "{in}/readings.csv"],
    "explain adjust": [
        "explain", "adjust", "--format", "csv", "--unit", "sec", "--range", "5",
        "{in}/readings.csv",
    ],
    "merge of 3 sources": [
        "merge", "--order-by", "seq", "--bound-marker", "kind=bound", "--join-leave",
        "P1={in}/p1.csv", "P2={in}/p2.csv", "P3={in}/p3.csv",
    ],
    "bound with a key": [
        "bound", "--window", "1m", "--key", "device", "--agg", "count(*) AS n",
        "--agg", "round(avg(temp), 2) AS mean", "{in}/readings.csv",
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def cluster():
    why = unshare_refusal()
    if why:
        pytest.skip(f"no private /tmp for the worker: {why}")
    # outside /tmp (the worker's /tmp is its own): what stands for a shared mount
    outside = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path.home()
    work = Path(tempfile.mkdtemp(prefix="evtime-cluster-test-", dir=outside))
    (work / "staging").mkdir()
    c = Standalone(work, cores=4, memory="4g", app_cores=2)
    try:
        yield c
    finally:
        c.stop()
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def inputs(s3):
    name = f"evtime-cl-{uuid.uuid4().hex[:8]}"
    s3.mkdir(name)
    for f in [
        SAMPLES / "bound" / "readings.csv",
        MERGE / "p1.csv",
        MERGE / "p2.csv",
        MERGE / "p3.csv",
        SAMPLES / "cron" / "mon.csv",
        SAMPLES / "cron" / "tue.csv",
    ]:
        s3.put(str(f), f"{name}/in/{f.name}")  # fmt: skip
    return name


@pytest.fixture(scope="module")
def driver(cluster, cli_env):
    """A process whose SparkSession is an application on the cluster (built by the first
    CLI call in it, from EVTIME_MASTER), running CLI calls as ``evtime`` would."""
    staging = os.environ.pop("EVTIME_STAGING", None)  # (the default staging: beside the output)
    try:
        w = Worker(
            "real-cluster",
            env={
                "EVTIME_MASTER": cluster.url,
                "PYSPARK_PYTHON": sys.executable,  # (the executors' Python: ours)
                "EVTIME_CONF": cli_env["EVTIME_CONF"],
            },
        )
    finally:
        if staging is not None:
            os.environ["EVTIME_STAGING"] = staging
    try:
        yield lambda *args: Result(*w.run([*args, "--master", cluster.url], None))
    finally:
        w.stop()


def _on_cluster(cluster, cli_env, args, cwd, staging=False, python=sys.executable):
    env = dict(cli_env, PYSPARK_PYTHON=python)  # (the executors' Python: ours)
    if staging:
        env["EVTIME_STAGING"] = str(cluster.work / "staging")
    else:
        env.pop("EVTIME_STAGING", None)
    return subprocess.run(
        [sys.executable, "-m", "evtime", *args, "--master", cluster.url],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_on_the_cluster_gives_the_local_bytes(
    request, cluster, inputs, s3, run_cli, cli_env, tmp_path, command
):
    args = [a.format(**{"in": f"s3://{inputs}/in"}) for a in COMMANDS[command]]
    out = f"s3://{inputs}/out/{command.replace(' ', '-')}"
    if command == "adjust":  # (the installed script, as users run it)
        far = _on_cluster(cluster, cli_env, [*args, "-o", f"{out}-cluster.csv"], tmp_path)
        assert far.returncode == 0, far.stderr
    else:
        far = request.getfixturevalue("driver")(*args, "-o", f"{out}-cluster.csv")
        assert far.exit_code == 0, far.stderr
    here = run_cli(*args, "-o", f"{out}-local.csv")
    assert here.exit_code == 0, here.stderr
    cluster_bytes = s3.cat_file(f"{out}-cluster.csv".removeprefix("s3://"))
    assert cluster_bytes == s3.cat_file(f"{out}-local.csv".removeprefix("s3://"))
    assert cluster_bytes.count(b"\n") > 3
    s3.invalidate_cache()  # (staged beside the output, removed at the end)
    assert s3.find(f"{inputs}/out/_evtime_temporary") == []
    # (the accounting line is the same too, but for its run time)
    assert far.stderr.rsplit(" (", 1)[0] == here.stderr.rsplit(" (", 1)[0]


def test_an_adjust_state_pair_on_the_cluster_gives_the_local_bytes(
    cluster, driver, inputs, s3, run_cli, tmp_path, workdir
):
    base = ["adjust", "--unit", "sec", "--range", "5"]
    got = {}
    for where in ("cluster", "local"):
        # (the executors read the held rows from the state directory: on a cluster it
        # must be on a shared mount; the parts are staged on S3 beside the output)
        state = (cluster.work if where == "cluster" else tmp_path) / f"st-{where}"
        for day in ("mon", "tue"):
            args = [*base, "--state", str(state), "-o", f"s3://{inputs}/out/{where}-{day}.csv",
                    f"s3://{inputs}/in/{day}.csv"]  # fmt: skip
            r = driver(*args) if where == "cluster" else run_cli(*args)
            assert r.exit_code == 0, r.stderr
            got[where, day] = s3.cat_file(f"{inputs}/out/{where}-{day}.csv")
    assert got["cluster", "mon"] == got["local", "mon"]
    assert got["cluster", "tue"] == got["local", "tue"]
    assert got["cluster", "tue"].count(b"\n") == 4


def test_a_local_output_without_staging_stops_before_spark(cluster, inputs, cli_env, tmp_path):
    r = _on_cluster(
        cluster, cli_env,
        [*COMMANDS["adjust"][:-1], f"s3://{inputs}/in/readings.csv", "-o", tmp_path / "o.csv"],
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.startswith(f"evtime: --master {cluster.url}: Spark's tasks run on other ")
    assert "set --staging (or EVTIME_STAGING) to a URL" in r.stderr
    assert r.stderr.count("\n") == 1
    assert not (tmp_path / "o.csv").exists()


def test_executors_without_evtime_give_one_line(cluster, inputs, cli_env, tmp_path):
    """(an executor Python without evtime and pyarrow: a bare virtualenv, as a cluster's
    image without them is; it printed Spark's PythonException with a worker traceback)"""
    bare = cluster.work / "bare-venv"
    if not bare.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    r = _on_cluster(
        cluster, cli_env,
        [*COMMANDS["adjust"][:-1], f"s3://{inputs}/in/readings.csv",
         "-o", f"s3://{inputs}/out/bare.csv"],
        tmp_path, python=str(bare / "bin" / "python"),
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("evtime: Spark's Python workers cannot import "), lines[0]
    assert "spark.archives" in lines[0]
