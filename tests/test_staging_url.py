"""Staging on a URL (EVTIME_STAGING / --staging s3://...; evtime.io.staging): the Spark
tasks leave their part files, done files and side files (explain's counts and search
results, adjust's zone rows) on the object store, this process reads them from there; the
outputs are the bytes of the same run staged in a local directory, and nothing is left
under the staging prefix.  Staging that cannot be reached stops the run before any job, in
one line.  (Local master, moto's S3 server; the inputs are read and the parts written in
Spark tasks: EVTIME_DRIVER_IO_MAX=0.)"""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import SAMPLES

MERGE = SAMPLES / "merge"
READINGS = SAMPLES / "bound" / "readings.csv"
COMMANDS = {
    "adjust": ["adjust", "--unit", "msec", "--range", "500", str(READINGS)],
    "adjust to parquet": ["adjust", "--unit", "msec", "--range", "500", str(READINGS)],
    "adjust in place": ["adjust", "--unit", "nsec", "--range", "3", "{groups}"],
    "explain adjust": [
        "explain", "adjust", "--format", "csv", "--unit", "sec", "--range", "5", str(READINGS),
    ],
    "explain adjust in place": [
        "explain", "adjust", "--format", "csv", "--unit", "nsec", "--range", "3", "{groups}",
    ],
    "merge of 3 sources": [
        "merge", "--order-by", "seq", "--bound-marker", "kind=bound", "--join-leave",
        f"P1={MERGE / 'p1.csv'}", f"P2={MERGE / 'p2.csv'}", f"P3={MERGE / 'p3.csv'}",
    ],
    "bound with a key": [
        "bound", "--window", "1m", "--key", "device", "--agg", "count(*) AS n",
        "--agg", "round(avg(temp), 2) AS mean", str(READINGS),
    ],
}  # fmt: skip


def _row_groups(path) -> None:
    """A Parquet file whose row groups are ordered where they are read (adjust's and
    explain's in-place paths): 10 ns a row, some rows late by up to 12 ns, 4 rows a
    group."""
    late = [0, 0, 12, 0, 0, 5, 0, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0, 30, 0, 0, 0, 0]
    base = 1_700_000_000_000_000_000
    times = [base + i * 10 - d for i, d in enumerate(late)]
    table = pa.table({"time": pa.array(times, pa.timestamp("ns")), "n": range(len(times))})
    pq.write_table(table, path, row_group_size=4)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_staging_on_s3_gives_the_bytes_of_local_staging(
    run_cli, s3, bucket, monkeypatch, tmp_path, command
):
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")  # (parts written by the Spark tasks)
    groups = tmp_path / "groups.parquet"
    _row_groups(groups)
    args = [a.format(groups=groups) for a in COMMANDS[command]]
    taken = _spy_in_place(monkeypatch)
    ext = "parquet" if "parquet" in command else "csv"
    got = {}
    for where in ("local", "s3"):
        if where == "s3":
            monkeypatch.setenv("EVTIME_STAGING", f"s3://{bucket}/staging")
        else:
            monkeypatch.delenv("EVTIME_STAGING", raising=False)
        out, discards = tmp_path / f"{where}.{ext}", tmp_path / f"{where}-discards.csv"
        # (--discards: not in place, not for explain and bound)
        more = ["--discards", discards] if command in ("adjust", "adjust to parquet") else []
        r = run_cli(*args, "-o", out, *more)
        assert r.exit_code == 0, r.stderr
        got[where] = (out.read_bytes(), discards.read_bytes() if more else b"", r)
    assert got["s3"][0] == got["local"][0]
    assert got["s3"][1] == got["local"][1]
    assert got["s3"][0].count(b"\n") > 3 or ext == "parquet"
    # (the accounting line is the same but for its run time)
    assert got["s3"][2].stderr.rsplit(" (", 1)[0] == got["local"][2].stderr.rsplit(" (", 1)[0]
    s3.invalidate_cache()
    assert s3.find(f"{bucket}/staging") == []
    if command.endswith("in place"):  # (the fast paths ran, on both stagings)
        assert len(taken) == 2 and None not in taken, taken


def _spy_in_place(monkeypatch) -> list:
    """What adjust's and explain's in-place plans gave (None: not taken), run after run."""
    from evtime.engine.adjust import in_place as adjust_in_place
    from evtime.engine.adjust import in_place as explain_in_place

    taken = []
    for module, name in ((adjust_in_place, "ordered_in_place"), (explain_in_place, "explain_plan")):
        real = getattr(module, name)
        monkeypatch.setattr(
            module, name, lambda *a, _real=real, **k: taken.append(_real(*a, **k)) or taken[-1]
        )
    return taken


def test_staging_option_on_s3_to_standard_output(run_cli, s3, bucket, monkeypatch):
    """--staging, standard output (a table and CSV) staged on S3."""
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    monkeypatch.delenv("EVTIME_STAGING", raising=False)
    args = COMMANDS["adjust"]
    here = run_cli(*args)
    far = run_cli(*args, "--staging", f"s3://{bucket}/st")
    assert far.exit_code == 0, far.stderr
    assert far.stdout == here.stdout and far.stdout.count("\n") > 3
    s3.invalidate_cache()
    assert s3.find(f"{bucket}/st") == []


@pytest.mark.parametrize(
    ("staging", "status", "says"),
    [
        ("s3://evtime-no-such-bucket-{u}/x", 1, "cannot write there: "),
        ("nosuch://x/y", 2, "not a staging URL: "),
    ],
)
def test_unreachable_staging_stops_before_any_job(
    run_cli, s3, monkeypatch, tmp_path, staging, status, says
):
    import evtime.session

    jobs = []
    monkeypatch.setattr(evtime.session, "build_session", lambda *a: jobs.append(a))
    monkeypatch.setenv("EVTIME_STAGING", staging.format(u=uuid.uuid4().hex[:6]))
    r = run_cli(*COMMANDS["adjust"], "-o", tmp_path / "out.csv")
    assert r.exit_code == status, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("evtime: EVTIME_STAGING=") and says in lines[0], lines[0]
    assert not jobs and not (tmp_path / "out.csv").exists()


def test_a_later_run_removes_what_a_killed_run_left(run_cli, s3, bucket, monkeypatch, tmp_path):
    """Run directories under the staging URL older than STALE_RUN_HOURS go; younger ones
    (a run that may still live) stay."""
    from evtime.io import staging

    monkeypatch.setattr(staging, "_looked", set())
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    monkeypatch.setenv("EVTIME_STAGING", f"s3://{bucket}/left")
    hours = staging.STALE_RUN_HOURS
    stamp = lambda ago: time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() - ago))  # noqa: E731
    old = f"{bucket}/left/evtime-{stamp(hours * 3600 + 60)}-host-1-abcdef01"
    young = f"{bucket}/left/evtime-{stamp(hours * 3600 - 600)}-host-2-abcdef02"
    other = f"{bucket}/left/not-a-run"
    for d in (old, young, other):
        s3.pipe(f"{d}/part-out-000000", b"x")
    r = run_cli(*COMMANDS["adjust"], "-o", tmp_path / "out.csv")
    assert r.exit_code == 0, r.stderr
    s3.invalidate_cache()
    assert sorted(s3.find(f"{bucket}/left")) == sorted(
        [f"{young}/part-out-000000", f"{other}/part-out-000000"]
    )


def test_on_a_cluster_the_default_staging_is_beside_an_object_store_output(s3, bucket, tmp_path):
    """(what evtime.runner.outputs.check_staging asks before Spark starts; the runs themselves
    are in tests/test_real_cluster.py)"""
    from evtime.errors import UsageError
    from evtime.io import staging

    far = "--master spark://h:7077"
    try:
        got = staging.configure(None, far, [str(tmp_path / "o.csv"), f"s3://{bucket}/d/x.csv"])
        assert got == f"s3://{bucket}/d/_evtime_temporary"
        assert staging.configure(None, None, [f"s3://{bucket}/d/x.csv"]) is None  # (local)
        with pytest.raises(UsageError, match=r"^--master spark://h:7077: .* set --staging"):
            staging.configure(None, far, [str(tmp_path / "o.csv"), None])
    finally:
        staging.configure(None, None, [])


def test_small_files_read_together_come_back_in_the_order_asked(s3, bucket):
    """(staging.get_all: the per-part files a task reads, all requests at once on a URL)"""
    from evtime.io import staging

    base = f"s3://{bucket}/staging/counts"
    names = [f"kept-{i:06d}" for i in (7, 0, 12, 3)]  # (not in the order they sort)
    for i, name in enumerate(names):
        staging.put(staging.join(base, name), f"{i} {name}\n".encode())
    paths = [staging.join(base, n) for n in names]
    assert staging.get_all(paths) == [staging.get(p) for p in paths]
    assert staging.get_all(paths) == [f"{i} {n}\n".encode() for i, n in enumerate(names)]
    with pytest.raises(FileNotFoundError):
        staging.get_all([*paths, staging.join(base, "kept-000099")])
