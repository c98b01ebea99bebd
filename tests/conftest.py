"""One SparkSession for the whole test session (local[2], few shuffle partitions, UTC).

In-process CLI runs (``run_cli``) reuse it through getOrCreate, so most tests pay no JVM
start-up; tests marked ``cli`` run the installed script in a subprocess, as users do.
"""

from __future__ import annotations

import csv
import io
import json
import os
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from evtime.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# S3 tests talk to a moto server on loopback. Spark's Python workers inherit the environment
# of the JVM, which starts once per test session: so the endpoint and (fake) credentials are
# fixed here, before any session exists.
S3_PORT = _free_port()
os.environ.update(
    AWS_ENDPOINT_URL=f"http://127.0.0.1:{S3_PORT}",
    AWS_ACCESS_KEY_ID="evtime-test",
    AWS_SECRET_ACCESS_KEY="evtime-test-secret",
    AWS_DEFAULT_REGION="us-east-1",
)
for _var in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
    os.environ.pop(_var, None)
SAMPLES = ROOT / "samples"
SEED_PATTERN = "yyyy/MM/dd HH:mm:ss:SSSSSSSSS"


@pytest.fixture(scope="session")
def spark():
    from evtime.session import SessionOptions, build_session

    return build_session(
        SessionOptions(master="local[2]", conf={"spark.sql.shuffle.partitions": "4"})
    )


class Result:
    def __init__(self, exit_code: int, stdout: str, stderr: str, exception):
        self.exit_code, self.stdout, self.stderr, self.exception = (
            exit_code,
            stdout,
            stderr,
            exception,
        )

    def csv(self) -> list[dict]:
        return list(csv.DictReader(io.StringIO(self.stdout)))

    def jsonl(self) -> list[dict]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


@pytest.fixture
def run_cli(spark):
    """Run ``evtime ARGS`` in this process (shared Spark session); returns a Result."""

    def run(*args: str, input: str | bytes | None = None) -> Result:
        runner = CliRunner()
        code, exc = 0, None
        with runner.isolation(input=input) as (out, err, _):
            try:
                main([str(a) for a in args])
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 1
            except Exception as e:  # pragma: no cover - surfaced to the test
                code, exc = 1, e
            stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
        return Result(code, stdout, stderr, exc)

    return run


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def cli_env():
    env = dict(os.environ)
    env.setdefault("EVTIME_CONF", "spark.sql.shuffle.partitions=2")
    return env


@pytest.fixture(scope="session")
def s3():
    """A real S3 API (moto's server) on 127.0.0.1; yields an s3fs filesystem."""
    import s3fs
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=S3_PORT, verbose=False)
    server.start()
    try:
        yield s3fs.S3FileSystem()
    finally:
        server.stop()
