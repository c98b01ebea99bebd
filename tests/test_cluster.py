"""What a real cluster needs of evtime's I/O: URLs passed to the tasks as written (s3a://),
and part files staged where the driver can see them (EVTIME_STAGING), or a clear error."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from evtime.io import writer
from tests.conftest import SAMPLES

ADJ = ["adjust", "--unit", "usec", "--range", "999"]


def test_s3a_urls_read_and_write_like_s3(run_cli, s3, bucket):
    out = {}
    for scheme in ("s3", "s3a"):
        r = run_cli(
            *ADJ,
            f"{scheme}://{bucket}/in/*-tuples.*",
            "-o",
            f"{scheme}://{bucket}/out/{scheme}.parquet",
        )
        assert r.exit_code == 0, r.stderr
        assert "read 10, released 4, discarded 6" in r.stderr
        with s3.open(f"{bucket}/out/{scheme}.parquet", "rb") as fh:
            out[scheme] = pq.read_table(fh)
    assert out["s3a"].equals(out["s3"])


def test_s3a_names_in_errors_are_as_written(run_cli, s3, bucket):
    r = run_cli(*ADJ, "--time", "nosuch", f"s3a://{bucket}/in/a-tuples.parquet")
    assert r.exit_code == 2
    r = run_cli(*ADJ, f"s3a://{bucket}/in/nothing-*.csv")
    assert r.exit_code == 1 and f"s3a://{bucket}/in/nothing-*.csv" in r.stderr


def test_staging_under_evtime_staging(run_cli, workdir, monkeypatch):
    stage = workdir / "stage"
    stage.mkdir()
    monkeypatch.setenv("EVTIME_STAGING", str(stage))
    r = run_cli(*ADJ, SAMPLES / "tuples.parquet", "-o", "out.csv")
    assert r.exit_code == 0, r.stderr
    assert (workdir / "out.csv").read_text().count("\n") == 1 + 3
    assert list(stage.iterdir()) == []  # the run's staging directory is gone


def test_missing_evtime_staging_is_a_usage_error(run_cli, workdir, monkeypatch):
    monkeypatch.setenv("EVTIME_STAGING", str(workdir / "nosuch"))
    r = run_cli(*ADJ, SAMPLES / "tuples.parquet", "-o", "out.csv")
    assert r.exit_code == 2
    assert "EVTIME_STAGING" in r.stderr and not (workdir / "out.csv").exists()


def test_parts_the_driver_cannot_see_fail_loudly(run_cli, workdir, monkeypatch):
    """On a cluster without shared staging the tasks' part files land on the executors'
    disks: the driver must notice, not publish an empty output."""
    real = writer._parts
    monkeypatch.setattr(writer, "_parts", lambda staging, name: real(staging, name)[:0])
    r = run_cli(*ADJ, SAMPLES / "tuples.parquet", "-o", "out.parquet")
    assert r.exit_code == 1
    assert "cannot see" in r.stderr and "EVTIME_STAGING" in r.stderr
    assert not (workdir / "out.parquet").exists()


@pytest.mark.slow
def test_server_start_and_status_report_the_running_server(workers):
    """`evtime server start` (for systemd) finds or starts the --reuse-server server and
    says where it listens; `status` agrees; neither prints the token."""
    import json

    from tests.where import Worker

    if "connect" not in workers:
        workers["connect"] = Worker("connect")
    w = workers["connect"]
    code, out, err, exc = w.run(["server", "start"], None)
    assert code == 0, (err, exc)
    with open(w.env["SPARK_LOCAL_CONNECT_DISCOVERY"]) as fh:
        record = json.load(fh)
    assert f"running: sc://localhost:{record['port']} pid {record['pid']}" in out
    code, status, err, exc = w.run(["server", "status"], None)
    assert code == 0 and f"running: sc://localhost:{record['port']}" in status
    assert record["token"] not in out + err + status


def test_fast_start_only_for_small_local_inputs(monkeypatch):
    from evtime.io.sources import InputFile, expand_inputs
    from evtime.runner.driver import small_input
    from evtime.session import SessionOptions

    local = expand_inputs([str(SAMPLES / "tuples.parquet")], None)
    assert small_input(local)
    assert not small_input(
        [InputFile(0, "s3://bucket/x.parquet", "s3://bucket/x.parquet", "parquet")]
    )
    monkeypatch.delenv("EVTIME_FAST_START", raising=False)
    assert SessionOptions(small=True).fast_start and not SessionOptions(small=False).fast_start
    monkeypatch.setenv("EVTIME_FAST_START", "0")
    assert not SessionOptions(small=True).fast_start
