"""`evtime server` and --reuse-server (issues 47, 48, 49): status exits as `systemctl
is-active` does, `stop` stops the process, a sick server is restarted, runs release their
Spark Connect session, and explain's --bad-rows discard works through Spark Connect.

The slow tests share one server (the `connect` worker of tests/where.py) and run in file
order: the last one stops it."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

ADJ = ["--unit", "sec", "--range", "5"]
# one row whose time cannot be read, and columns for every explain column to be filled
BAD = "k,time\nA,2009-03-01T12:15:22Z\nB,not-a-time\nC,2009-03-01T12:15:21Z\n"


def test_status_exits_3_when_no_server_is_recorded(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_CONNECT_DISCOVERY", str(tmp_path / "connect-local.json"))
    r = run_cli("server", "status")
    assert r.exit_code == 3, r.stderr
    assert "not running" in r.stdout


def test_status_exits_3_for_a_stale_record(run_cli, tmp_path, monkeypatch):
    """(a record whose process is gone: a server that died)"""
    from pyspark.version import __version__

    record = tmp_path / "connect-local.json"
    gone = _a_finished_pid()
    record.write_text(
        json.dumps(
            {
                "host": "localhost",
                "port": 1,
                "token": "t",
                "pid": gone,
                "spark_version": __version__,
            }
        )
    )
    monkeypatch.setenv("SPARK_LOCAL_CONNECT_DISCOVERY", str(record))
    r = run_cli("server", "status")
    assert r.exit_code == 3, r.stderr
    assert "not running (stale record)" in r.stdout and f"pid {gone}" in r.stdout


def test_start_refuses_a_setting_without_a_value_before_any_server(run_cli, tmp_path, monkeypatch):
    """`start` reads its settings as a --reuse-server run does: a --conf without a value,
    or an EVTIME_MASTER that is a cluster's, is one line and status 2, and no server."""
    record = tmp_path / "connect-local.json"
    monkeypatch.setenv("SPARK_LOCAL_CONNECT_DISCOVERY", str(record))
    r = run_cli("server", "start", "--conf", "spark.driver.memory")
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        "evtime: --conf takes KEY=VALUE, got 'spark.driver.memory'"
    ]
    monkeypatch.setenv("EVTIME_MASTER", "spark://cluster.example:7077")
    r = run_cli("server", "start")
    assert r.exit_code == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "spark://cluster.example:7077" in lines[0], lines
    assert "runs a local server" in lines[0]
    assert not record.exists()


def _alive(pid: int) -> bool:
    """(a zombie, ended but not reaped, is not)"""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _a_finished_pid() -> int:
    import subprocess

    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.mark.parametrize("master", ["spark://somewhere:7077", "yarn"])
def test_reuse_server_with_a_cluster_master_is_a_usage_error(run_cli, workdir, master):
    (workdir / "in.csv").write_text(BAD)
    r = run_cli("--reuse-server", "--master", master, "adjust", *ADJ, "in.csv")
    assert r.exit_code == 2, (r.stderr, r.exception)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--reuse-server" in lines[0] and master in lines[0]


def _connect(workers):
    from tests.where import Worker

    if "connect" not in workers:
        workers["connect"] = Worker("connect")
    return workers["connect"]


def _command_line(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return fh.read().decode().split("\0")


def _record(w) -> dict:
    with open(w.env["SPARK_LOCAL_CONNECT_DISCOVERY"]) as fh:
        return json.load(fh)


def _sessions(w) -> int:
    """Spark Connect sessions the server holds (its SessionHolder objects after a full GC)."""
    import subprocess

    out = subprocess.run(
        ["jcmd", str(_record(w)["pid"]), "GC.class_histogram"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    for line in out.splitlines():
        parts = line.split()
        if parts[-1:] == ["org.apache.spark.sql.connect.service.SessionHolder"]:
            return int(parts[1])
    return 0


@pytest.mark.slow
def test_explain_discards_bad_rows_through_spark_connect(workers, run_cli, workdir):
    """(it failed with an AssertionError from PySpark's Connect plan; local mode is right:
    the same table through both)"""
    w = _connect(workers)
    (workdir / "in.csv").write_text(BAD)
    args = ["explain", "adjust", *ADJ, "--bad-rows", "discard", "in.csv", "--format", "csv"]
    code, out, err, exc = w.run(args, None)
    assert code == 0, (err, exc)
    local = run_cli(*args)
    assert local.exit_code == 0, local.stderr
    assert out == local.stdout
    assert "not-a-time" in out and "discarded" in out


@pytest.mark.slow
@pytest.mark.cli
def test_runs_release_their_session_on_the_server(workers, workdir, cli_env):
    """A run's Spark Connect session is released when it ends: the server holds no more
    sessions after three runs than before (it kept each for an hour, with its plans; the
    server ran out of heap, issue 49)."""
    import subprocess

    w = _connect(workers)
    code, _, err, exc = w.run(["server", "start"], None)
    assert code == 0, (err, exc)
    (workdir / "in.csv").write_text(BAD)
    env = {**cli_env, **w.env}
    before = _sessions(w)
    for _ in range(3):
        p = subprocess.run(
            ["evtime", "adjust", "-q", *ADJ, "--bad-rows", "discard", "in.csv"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert p.returncode == 0, p.stderr
    assert _sessions(w) <= before


@pytest.mark.slow
def test_a_server_that_does_not_answer_is_reported_and_restarted(workers, run_cli, workdir):
    """A server that accepts connections but never answers (here: stopped with SIGSTOP; out
    of heap in the wild): `status` says so and exits 1, `start` replaces it, and so does a
    --reuse-server run, which then runs (each hung before, waiting for the sick server).
    The servers they start have the settings they were given (`start --conf`; the run's
    EVTIME_CONF, whose Java options add to evtime's own)."""
    w = _connect(workers)
    code, _, err, exc = w.run(["server", "start"], None)
    assert code == 0, (err, exc)
    sick = [_record(w)["pid"]]
    fast = {"EVTIME_SERVER_HEALTH_TIMEOUT": "5"}
    os.kill(sick[0], signal.SIGSTOP)
    try:
        code, out, err, exc = w.run(["server", "status"], None, env=fast)
        assert code == 1, (out, err, exc)
        assert "not answering" in out
        # (with a setting of its own: the server it starts has it)
        start = ["server", "start", "--conf", "spark.driver.memory=1500m"]
        code, out, err, exc = w.run(start, None, env=fast)
        assert code == 0, (err, exc)
        assert "restarting" in err
        fresh = _record(w)["pid"]
        assert fresh != sick[0] and not _alive(sick[0])
        assert f"pid {fresh}" in out
        assert "-Xmx1500m" in _command_line(fresh)
        code, out, err, exc = w.run(["server", "status"], None)
        assert code == 0 and f"pid {fresh}" in out, (out, err, exc)

        # a --reuse-server run that finds the server sick restarts it, then runs; the
        # server it starts has evtime's driver options and the user's --conf ones too
        (workdir / "in.csv").write_text(BAD)
        args = ["adjust", *ADJ, "--bad-rows", "discard", "in.csv"]
        sick.append(fresh)
        os.kill(fresh, signal.SIGSTOP)
        mine = "spark.driver.extraJavaOptions=-Devtime.test.option=given"
        code, out, err, exc = w.run(args, None, env={**fast, "EVTIME_CONF": mine})
        assert code == 0, (err, exc)
        assert "restarting" in err
        started = _record(w)["pid"]
        assert started not in sick and not _alive(fresh)
        jvm = _command_line(started)
        assert "-Devtime.test.option=given" in jvm, jvm
        assert any(a.startswith("-Dlog4j2.configurationFile=") for a in jvm), jvm
        local = run_cli(*args)
        assert local.exit_code == 0, local.stderr
        assert out == local.stdout
    finally:
        for pid in sick:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)


@pytest.mark.slow
def test_stop_ends_the_server_process_and_status_then_exits_3(workers):
    """(the last test of the module: the next user of the worker starts a server again)"""
    w = _connect(workers)
    code, out, err, exc = w.run(["server", "start"], None)
    assert code == 0, (err, exc)
    pid = _record(w)["pid"]
    code, status, _, _ = w.run(["server", "status"], None)
    assert code == 0 and f"pid {pid}" in status
    # (after the stop, the worker's own Connect session cannot answer: its settings are
    # given up on after 5 s, not the default 60)
    fast = {"EVTIME_SERVER_HEALTH_TIMEOUT": "5"}
    code, out, err, exc = w.run(["server", "stop"], None, env=fast)
    assert code == 0 and "stopped the local server" in out, (out, err, exc)
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid)
    try:
        code, out, _, _ = w.run(["server", "status"], None, env=fast)
        assert code == 3 and "not running" in out
    finally:  # (its session was on the server stopped: a later test gets a fresh worker)
        workers.pop("connect").stop()
