"""S3 for real: a moto S3 server over HTTP on 127.0.0.1 (see conftest)."""

from __future__ import annotations

import csv
import io

import pyarrow.parquet as pq
import pytest

from tests.conftest import SAMPLES

ADJ = ["adjust", "--unit", "msec", "--range", "999"]


def test_read_glob_write_output_and_discards_to_s3(run_cli, s3, bucket):
    r = run_cli(
        "adjust",
        "--unit",
        "usec",
        "--range",
        "999",
        f"s3://{bucket}/in/*-tuples.*",
        "-o",
        f"s3://{bucket}/out/sorted.parquet",
        "--discards",
        f"s3://{bucket}/out/late.csv",
    )
    assert r.exit_code == 0, r.stderr
    # ten rows: the parquet's A-E arrive first, then the jsonl's A-E; of those only E
    # (exactly at the reference time) is not late
    with s3.open(f"{bucket}/out/sorted.parquet", "rb") as fh:
        out = pq.read_table(fh)
    assert out.column("tuple").to_pylist() == ["A", "C", "E", "E"]
    with s3.open(f"{bucket}/out/late.csv", "rb") as fh:
        late = list(csv.DictReader(io.TextIOWrapper(fh)))
    assert [(x["tuple"], x["arrival"]) for x in late] == [
        ("B", "2"),
        ("B", "7"),
        ("A", "6"),
        ("D", "4"),
        ("D", "9"),
        ("C", "8"),
    ]
    assert all(x["reason"].startswith("late: evtime") for x in late)
    assert "read 10, released 4, discarded 6" in r.stderr
    assert "evtime-test-secret" not in r.stderr


def test_missing_bucket_is_one_line(run_cli, s3):
    r = run_cli(*ADJ, "s3://no-such-bucket-evtime/x.parquet")
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines() == [
        "evtime: s3://no-such-bucket-evtime/x.parquet: no such file"
    ]


def test_missing_key_is_one_line(run_cli, s3, bucket):
    r = run_cli(*ADJ, f"s3://{bucket}/in/nothing.parquet")
    assert r.exit_code == 1 and "no such file" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_existing_s3_output_needs_overwrite(run_cli, s3, bucket):
    s3.pipe(f"{bucket}/out.csv", b"keep\n")
    r = run_cli(*ADJ, SAMPLES / "tuples.parquet", "-o", f"s3://{bucket}/out.csv")
    assert r.exit_code == 1 and "exists" in r.stderr and "--overwrite" in r.stderr
    assert s3.cat(f"{bucket}/out.csv") == b"keep\n"


def test_refused_write_is_one_line(run_cli, s3):
    r = run_cli(*ADJ, SAMPLES / "tuples.parquet", "-o", "s3://no-such-bucket-evtime/o.csv")
    assert r.exit_code == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evtime: s3://no-such-bucket-evtime/o.csv")
    assert "evtime-test-secret" not in r.stderr


def test_state_runs_read_from_and_write_to_s3(run_cli, s3, bucket, tmp_path):
    """--state (a local directory) with inputs and outputs on S3, including an interrupted
    run whose S3 output is staged inside the state and uploaded by the next run."""
    import os

    from evtime.io.state import InjectedCrash

    # same columns and types in every run (a state refuses other input columns)
    s3.put(str(SAMPLES / "tuples.parquet"), f"{bucket}/in/c-tuples.parquet")
    src = f"s3://{bucket}/in/"
    a, b = f"{src}a-tuples.parquet", f"{src}c-tuples.parquet"
    r = run_cli(*ADJ, a, b, "-o", f"s3://{bucket}/all.csv")
    assert r.exit_code == 0, r.stderr
    state = ["--state", tmp_path / "st"]
    os.environ["EVTIME_CRASH_AT"] = "ready"
    try:
        with pytest.raises(InjectedCrash):
            run_cli(*ADJ, *state, a, "-o", f"s3://{bucket}/o0.csv")
    finally:
        del os.environ["EVTIME_CRASH_AT"]
    assert not s3.exists(f"{bucket}/o0.csv")
    r = run_cli(*ADJ, *state, "--flush", b, "-o", f"s3://{bucket}/o1.csv")
    assert r.exit_code == 0, r.stderr
    assert "completed the interrupted run" in r.stderr

    def rows(key: str) -> list[dict]:
        with s3.open(f"{bucket}/{key}", "rb") as fh:
            return list(csv.DictReader(io.TextIOWrapper(fh)))

    assert [*rows("o0.csv"), *rows("o1.csv")] == rows("all.csv")


@pytest.fixture
def auth_enforced(s3):
    """moto checks every request's credentials (its IAM knows no 'evtime-test' key): the
    server runs in this process, so its setting is switched here, then back."""
    from moto import settings

    before = settings.INITIAL_NO_AUTH_ACTION_COUNT
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    try:
        yield
    finally:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = before


def _one_line(r, *words: str) -> str:
    assert r.exit_code == 1, (r.exit_code, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert r.stdout == ""
    return lines[0]


def test_bad_credentials_reading_is_one_line(run_cli, s3, bucket, auth_enforced):
    r = run_cli(*ADJ, f"s3://{bucket}/in/a-tuples.parquet")
    _one_line(r, f"s3://{bucket}/in/a-tuples.parquet")
    assert "evtime-test-secret" not in r.stderr


def test_bad_credentials_writing_is_one_line(run_cli, s3, bucket, auth_enforced, workdir):
    r = run_cli(*ADJ, SAMPLES / "tuples.parquet", "-o", f"s3://{bucket}/out/x.csv")
    _one_line(r, f"s3://{bucket}/out/x.csv")
    assert "evtime-test-secret" not in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["s3://no-such-bucket-evtime/x.parquet"],
        [str(SAMPLES / "tuples.parquet"), "-o", "s3://no-such-bucket-evtime/o.csv"],
    ],
)
def test_secret_never_in_verbose_errors(run_cli, s3, args):
    r = run_cli(*ADJ, "-v", *args)
    assert r.exit_code == 1
    assert "evtime-test-secret" not in r.stderr


def test_secret_never_in_verbose_auth_errors(run_cli, s3, bucket, auth_enforced):
    r = run_cli(*ADJ, "-v", f"s3://{bucket}/in/a-tuples.parquet")
    assert r.exit_code == 1
    assert "evtime-test-secret" not in r.stderr
