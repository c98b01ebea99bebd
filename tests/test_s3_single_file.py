"""Single-file CSV and JSON Lines outputs on S3 (evtime.io.s3concat): with the staging on
S3 too, the output is assembled on the object store by a multipart upload of
``UploadPartCopy``s of the staged parts (the small ones read here and uploaded together);
its bytes are those of the same run written locally.  A failure midway leaves no object
and no multipart upload in progress.  (Local master, moto's S3 server in this process;
the threshold of 5 MiB lowered, here and in moto, so the inputs stay small.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from evtime.io import s3concat

MIN = 70  # (the threshold of the tests, in bytes: the staged CSV parts here are 65-80)


# Rows of the inputs.  The staged parts are time buckets of the output (at most 1,024, each
# of the rows in its span): rows 1 ms apart fill about a part each, as many parts as rows
# (6,000 rows made ~720 parts of ~8 rows, but only took longer: moto serves every request in
# this process).
ROWS = 240


def _events(path, n: int = ROWS) -> None:
    """Rows 1 ms apart, every 7th late by 3 ms; a device name of varying length."""
    base = datetime(2023, 11, 14, 22, 13, tzinfo=UTC)
    lines = ["time,device,temp"]
    for i in range(n):
        t = base + timedelta(milliseconds=i - (3 if i % 7 == 0 else 0))
        stamp = t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        lines.append(f"{stamp},dev-{'x' * (i % 13)}{i % 5},{(i * 37) % 1000 / 10}")
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def copies(monkeypatch):
    """The sizes of the parts moto's server copied (UploadPartCopy) and was sent
    (UploadPart), as the server saw them; the threshold lowered here and in moto."""
    import moto.s3.models as models

    seen: dict = {"copied": [], "sent": [], "hooks": []}

    def threshold(n: int) -> None:
        monkeypatch.setattr(s3concat, "MIN_PART", n)
        monkeypatch.setattr(models, "S3_UPLOAD_PART_MIN_SIZE", n)

    threshold(MIN)
    seen["threshold"] = threshold
    copy, upload = models.S3Backend.upload_part_copy, models.S3Backend.upload_part

    def upload_part_copy(self, *args, **kwargs):
        for hook in list(seen["hooks"]):
            hook()
        part = copy(self, *args, **kwargs)
        seen["copied"].append(part.contentsize)
        return part

    def upload_part(self, *args, **kwargs):
        part = upload(self, *args, **kwargs)
        seen["sent"].append(part.contentsize)
        return part

    monkeypatch.setattr(models.S3Backend, "upload_part_copy", upload_part_copy)
    monkeypatch.setattr(models.S3Backend, "upload_part", upload_part)
    return seen


ARGS = ["adjust", "--unit", "msec", "--range", "2"]


@pytest.mark.parametrize("fmt,scheme", [("csv", "s3"), ("jsonl", "s3a")])
def test_single_file_on_s3_is_the_local_bytes(
    run_cli, s3, bucket, monkeypatch, tmp_path, copies, fmt, scheme
):
    """(Hadoop's spelling s3a:// too: the same server-side assembly.)"""
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")  # (parts written by the Spark tasks)
    src = tmp_path / "events.csv"
    _events(src)
    local = tmp_path / f"local.{fmt}"
    r = run_cli(*ARGS, str(src), "-o", local, "--discards", tmp_path / "d.csv")
    assert r.exit_code == 0, r.stderr
    monkeypatch.setenv("EVTIME_STAGING", f"{scheme}://{bucket}/staging")
    out = f"{scheme}://{bucket}/out/single.{fmt}"
    copies["threshold"](1 << 30)
    r = run_cli(*ARGS, str(src), "-o", out, "--discards", tmp_path / "d.csv", "--overwrite")
    assert r.exit_code == 0, r.stderr
    whole = local.read_bytes()
    assert s3.cat(out) == whole
    assert not copies["copied"]  # (the threshold above every part: one PUT)
    # (about the mean staged part)
    least = len(whole) // ROWS
    copies["threshold"](least)
    r = run_cli(*ARGS, str(src), "-o", out, "--discards", tmp_path / "d.csv", "--overwrite")
    assert r.exit_code == 0, r.stderr
    assert s3.cat(out) == whole
    # (assembled by moto's server: parts copied there, the others sent from here, each
    # but the last of at least the threshold, as S3 requires)
    assert copies["copied"] and all(n >= least for n in copies["copied"])
    assert sum(copies["copied"]) + sum(copies["sent"]) == len(whole)
    assert copies["sent"]  # (and the small ones read here, combined)


def test_failure_midway_leaves_no_object_and_no_upload(
    run_cli, s3, bucket, monkeypatch, tmp_path, copies
):
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    monkeypatch.setenv("EVTIME_STAGING", f"s3://{bucket}/staging")
    src = tmp_path / "events.csv"
    _events(src)

    def remove_a_part() -> None:  # (at the first copy: a staged part goes missing)
        copies["hooks"].remove(remove_a_part)  # (once: a listing per copy took a minute)
        parts = sorted(p for p in s3.find(f"{bucket}/staging") if "/part-output-" in p)
        s3.rm_file(parts[len(parts) // 2])  # (midway)

    copies["hooks"].append(remove_a_part)
    out = f"s3://{bucket}/out/single.csv"
    r = run_cli(*ARGS, str(src), "-o", out)
    assert r.exit_code != 0
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "single.csv" in r.stderr
    assert copies["copied"]  # (it failed midway: after a copy)
    s3.invalidate_cache()
    assert not s3.exists(out)
    assert not s3.call_s3("list_multipart_uploads", Bucket=bucket).get("Uploads")


def test_a_big_output_stays_within_the_part_limit(s3, bucket, monkeypatch, copies):
    """S3 allows 10,000 parts in an upload: with the limit lowered to 12 and 40 staged
    parts each above S3's least size, the small ones are combined (read here) and the big
    ones copied, in at most 12 parts."""
    monkeypatch.setattr(s3concat, "MAX_PARTS", 12)
    least = 600
    copies["threshold"](least)
    staged = [bytes([65 + i % 26]) * (10 * least if i % 8 == 0 else least + 50) for i in range(40)]
    parts = []
    for i, data in enumerate(staged):
        s3.pipe_file(f"{bucket}/staging/part-{i:05d}", data)
        parts.append(f"s3://{bucket}/staging/part-{i:05d}")
    out = f"s3://{bucket}/out/big.csv"
    s3concat.publish(out, parts, head=b"h\n")
    s3.invalidate_cache()
    assert s3.cat(out) == b"h\n" + b"".join(staged)
    assert copies["copied"] and copies["sent"]
    assert len(copies["copied"]) + len(copies["sent"]) <= 12, copies
    assert not s3.exists(f"{bucket}/staging/part-00000")  # (the staged parts removed)
