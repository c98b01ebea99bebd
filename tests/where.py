"""Where a test's CLI runs: in this process on the shared local[2] session ("local"), or in a
long-lived worker process whose SparkSession is a ``local-cluster[2,1,1024]`` (separate
executor JVMs and Python workers) or a session on the reused local Spark Connect server.

A SparkSession is process-global (and a Spark Connect session in a process switches PySpark
to Connect mode), so the other two run in their own process: one per kind for the whole test
session, started on first use, stopped at session end.  The worker runs the very same
in-process CLI call as ``run_cli`` (``invoke`` below); the kind of Spark is chosen the way
users choose it, by the environment (EVTIME_MASTER / EVTIME_REUSE_SERVER), so every option
goes through the real CLI path.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import tempfile
import time
import traceback
from typing import Any

LOCAL_CLUSTER = "local-cluster[2,1,1024]"
WHERE = ("local", "local-cluster", "connect")


def here_and_in_spark(monkeypatch, run) -> list:
    """``run()`` twice, in this process: its inputs read here as small local inputs are,
    then read and written in Spark's tasks (``EVTIME_DRIVER_IO_MAX=0``, as big ones are);
    the two results, for a test that holds the two paths to the same bytes."""
    got = []
    for most in (None, "0"):
        if most is None:
            monkeypatch.delenv("EVTIME_DRIVER_IO_MAX", raising=False)
        else:
            monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", most)
        got.append(run())
    return got


def invoke(args: list[str], input: str | bytes | None) -> tuple[int, str, str, Any]:
    """``evtime ARGS`` in this process: exit status, stdout, stderr, unexpected exception."""
    from click.testing import CliRunner

    from evtime.cli import main

    code, exc = 0, None
    with _same_conf(), CliRunner().isolation(input=input) as (out, err, _):
        try:
            main([str(a) for a in args])
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        except Exception as e:  # pragma: no cover - surfaced to the test
            code, exc = 1, e
        return code, out.getvalue().decode(), err.getvalue().decode(), exc


@contextlib.contextmanager
def _same_conf():
    """The settings of this process's session as they were before a run (a run changes them
    as it would a user's own: ``--conf``, more shuffle partitions for a large input, ...),
    so that no later test sees what an earlier run left."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    mark = _mark(spark)
    before = _settings(spark, mark)
    try:
        yield
    finally:
        now = _mark(spark)  # (None on Connect: then always fetched)
        unchanged = mark is not None and now == mark
        after = None if before is None or unchanged else _settings(spark, now)
        if after is not None:
            changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
            for key in changed:
                try:
                    if key in before:
                        spark.conf.set(key, before[key])
                    else:
                        spark.conf.unset(key)
                except AnalysisException:  # (CANNOT_MODIFY_CONFIG: the JVM's own, kept)
                    pass


_SEEN: dict[int, dict[str, str]] = {}  # settings already fetched, by their mark


def _mark(spark) -> int | None:
    """The hash of this process's session settings (one JVM call, where fetching them all
    takes two per setting: ~60 a run, 0.02-0.08 s); None for other sessions."""
    if spark is None or type(spark).__module__.startswith("pyspark.sql.connect"):
        return None
    try:
        return spark.conf._jconf.getAllAsJava().hashCode()
    except Exception:
        return None


def _settings(spark, mark: int | None = None) -> dict[str, str] | None:
    """The session's settings, or None when there is no session or it cannot answer within
    EVTIME_SERVER_HEALTH_TIMEOUT (a Spark Connect session whose server a test has just
    stopped, or SIGSTOPped: a request to that one would wait forever); ``mark``: their
    :func:`_mark`, for settings fetched once already."""
    if spark is None:
        return None
    if not type(spark).__module__.startswith("pyspark.sql.connect"):
        if mark in _SEEN:  # (read only: never changed in place)
            return _SEEN[mark]
        try:  # (this process's own JVM)
            got = dict(spark.conf.getAll)
        except Exception:
            return None
        if mark is not None:
            _SEEN[mark] = got
        return got
    import threading

    from evtime.session import health_timeout

    box: list[dict[str, str]] = []

    def ask() -> None:
        with contextlib.suppress(Exception):  # (SparkConnectGrpcException: UNAVAILABLE)
            box.append(dict(spark.conf.getAll))

    thread = threading.Thread(target=ask, name="tests-settings", daemon=True)
    thread.start()
    thread.join(health_timeout())
    return box[0] if box else None


def _serve(conn, env: dict[str, str]) -> None:
    os.environ.update(env)
    try:
        while True:
            msg = conn.recv()
            if msg is None:
                break
            args, input_, cwd, extra = msg
            os.chdir(cwd)
            saved = {k: os.environ.get(k) for k in extra}
            os.environ.update(extra)
            try:
                code, out, err, exc = invoke(args, input_)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            conn.send(
                (code, out, err, None if exc is None else "".join(traceback.format_exception(exc)))
            )
    finally:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is not None:  # (a Connect session whose server is gone: not for long)
            import threading

            done = threading.Thread(target=spark.stop, name="tests-stop", daemon=True)
            done.start()
            done.join(10)
            if done.is_alive():
                # the server is gone: PySpark's exit hook (SparkConnectClient._on_exit) would
                # retry its own requests to it for minutes, and stop() waited for it 120 s
                conn.close()
                os._exit(0)
        conn.close()


class Worker:
    """A process that runs CLI calls on one kind of Spark, kept for the test session."""

    def __init__(self, where: str, env: dict[str, str] | None = None):
        """``env``: more environment for the worker (for another kind of Spark than those of
        WHERE, the EVTIME_MASTER that names it)."""
        self.where = where
        self.state = tempfile.mkdtemp(prefix="evtime-test-connect-")
        paths = [_root(), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
        env = {"PYTHONPATH": os.pathsep.join(dict.fromkeys(p for p in paths if p)), **(env or {})}
        if where == "local-cluster":
            env["EVTIME_MASTER"] = LOCAL_CLUSTER
        elif where == "connect":
            # the server evtime starts for --reuse-server, recorded here, not in the user's
            # own state directory; stopped at the end (stop())
            env["EVTIME_REUSE_SERVER"] = "1"
            env["SPARK_LOCAL_CONNECT_DISCOVERY"] = os.path.join(self.state, "connect-local.json")
        self.env = env
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, env), daemon=True)
        self.proc.start()
        child.close()

    def run(
        self, args: list[str], input: str | bytes | None, env: dict[str, str] | None = None
    ) -> tuple[int, str, str, Any]:
        """``evtime ARGS`` in the worker (``env``: set for this call only)."""
        self.conn.send(([str(a) for a in args], input, os.getcwd(), env or {}))
        return self.conn.recv()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.proc.join(timeout=120)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        if self.where == "connect":
            stop_server(self.env["SPARK_LOCAL_CONNECT_DISCOVERY"])
        shutil.rmtree(self.state, ignore_errors=True)


def stop_server(discovery_path: str) -> None:
    """Stop the reused local server recorded at ``discovery_path`` (if it runs)."""
    from pyspark.sql.connect.local_server import Discovery, LocalConnectServer

    if not os.path.exists(discovery_path):
        return
    with Discovery(discovery_path) as discovery:
        server = LocalConnectServer(discovery)
        pid = server.pid
        server.stop()
    deadline = time.monotonic() + 60
    while pid is not None and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def _root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
