"""Single-file CSV and JSON Lines outputs on S3 assembled server-side from the staged parts.

When the output (``-o s3://bucket/x.csv`` or ``.jsonl``, not compressed) and the staging
are both on S3, the parts are already objects: the output is made by one S3 multipart
upload whose parts are, in order, ``UploadPartCopy`` of the staged part objects (S3 copies
the bytes; none pass through this process), completed only at the end.  A multipart
upload is invisible until it is completed, so the output appears whole or not at all; on
any error the upload is aborted (no object, no upload left in progress).

S3 requires every part of an upload but the last to hold at least :data:`MIN_PART` bytes
(5 MiB), and allows at most :data:`MAX_PARTS` parts.  The least size of a part here is
:func:`least_part`: 5 MiB up to about 50 GB of output, then the output's size over 9,999.
A staged part of at least that size is copied server-side; smaller neighbours (and the
CSV header, written once, before the first part) are read through this process (their
requests in flight together: :func:`~evtime.io.staging.read_all`) into a buffer uploaded
as one part once it reaches that size (or at the end, as the last part).
Where the buffer is not empty before a big part, only the head of that part needed to fill
the buffer is read, and the rest copied with a byte range (when that rest still holds the
least size; else the part is read whole).  So this process reads less than one least size
per big part plus the small parts, and holds less than three least sizes in memory.  An
output without any big part is one PUT.

Compressed outputs (``.csv.gz``, ...) and Parquet still stream through this process
(:mod:`evtime.io.writer`); a directory output (``-o DIR/``) writes no byte through it.
"""

from __future__ import annotations

import contextlib

from evtime.errors import OutputError

MIN_PART = 5 << 20  # S3's least size of a multipart upload's part (all but the last)
MAX_COPY = 5 << 30  # S3's greatest size of one UploadPartCopy
MAX_PARTS = 10_000  # S3's greatest number of parts in one multipart upload
SCHEMES = ("s3", "s3a")  # (s3fs answers both; Hadoop's clusters spell S3 s3a://)


def applies(path: str | None, fmt: str, staging: str, compressed: bool) -> bool:
    """Whether an output at ``path`` of format ``fmt``, staged under ``staging``, is
    assembled here: CSV or JSON Lines, not compressed, output and staging on S3."""
    return (
        fmt in ("csv", "jsonl")
        and not compressed
        and bool(path)
        and path.split("://", 1)[0] in SCHEMES
        and staging.split("://", 1)[0] in SCHEMES
    )


def publish(path: str, parts: list[str], head: bytes = b"") -> None:
    """Publish at the S3 URL ``path`` the bytes ``head`` followed by the staged part
    objects ``parts`` (S3 URLs, in order), which are removed once it is published."""
    from evtime.io.staging import fs_of

    fs, key = fs_of(path)
    keys = [fs_of(p)[1] for p in parts]
    try:
        _assemble(fs, key, keys, _sizes(fs, keys), head)
    except OSError as err:
        raise OutputError(f"{path}: cannot write: {err}") from None
    fs.invalidate_cache(key)
    if keys:
        fs.rm(keys)  # (batched deletes, not a request per part)


def least_part(total: int) -> int:
    """The least size of a part (all but the last) of an upload of ``total`` bytes: S3's
    :data:`MIN_PART`, or more where the output is so big that parts of that size would
    outnumber :data:`MAX_PARTS` (from about 50 GB)."""
    return max(MIN_PART, -(-total // (MAX_PARTS - 1)))


def _sizes(fs, keys: list[str]) -> list[int]:
    """The sizes of the objects ``keys``: one listing per folder, not a request per part."""
    found: dict[str, int] = {}
    for folder in dict.fromkeys(k.rsplit("/", 1)[0] for k in keys):
        fs.invalidate_cache(folder)
        found.update({e["name"].rstrip("/"): e["size"] for e in fs.ls(folder, detail=True)})
    return [found[k] if k in found else fs.size(k) for k in keys]


def _assemble(fs, key: str, parts: list[str], sizes: list[int], head: bytes) -> None:
    from evtime.io.staging import read_all

    bucket, name, _ = fs.split_path(key)
    least = least_part(sum(sizes) + len(head))
    if not any(s >= least for s in sizes):  # (nothing worth copying: one PUT)
        data = head + b"".join(read_all(fs, parts))
        fs.pipe_file(key, data)
        return
    upload = fs.call_s3("create_multipart_upload", Bucket=bucket, Key=name)["UploadId"]
    done: list[dict] = []
    common = {"Bucket": bucket, "Key": name, "UploadId": upload}

    def put(data: bytes) -> None:
        n = len(done) + 1
        r = fs.call_s3("upload_part", Body=data, PartNumber=n, **common)
        done.append({"PartNumber": n, "ETag": r["ETag"]})

    def copy(source: str, start: int, end: int) -> None:  # (bytes start..end-1)
        pieces = -(-(end - start) // MAX_COPY)
        step = -(-(end - start) // pieces)
        for lo in range(start, end, step):
            n = len(done) + 1
            r = fs.call_s3(
                "upload_part_copy",
                CopySource=source,
                CopySourceRange=f"bytes={lo}-{min(lo + step, end) - 1}",
                PartNumber=n,
                **common,
            )
            done.append({"PartNumber": n, "ETag": r["CopyPartResult"]["ETag"]})

    try:
        held = bytearray(head)
        i = 0
        while i < len(parts):
            p, size = parts[i], sizes[i]
            if size >= least and not held:
                copy(p, 0, size)
                i += 1
                continue
            need = least - len(held)
            if size >= least and size - need >= least:
                held += fs.cat_file(p, start=0, end=need)
                put(bytes(held))
                held.clear()
                copy(p, need, size)
                i += 1
                continue
            # this part and the small ones after it, until the buffer is full: read at once
            j, more = i + 1, len(held) + size
            while j < len(parts) and sizes[j] < least and more < least:
                more += sizes[j]
                j += 1
            for data in read_all(fs, parts[i:j]):
                held += data
            i = j
            if len(held) >= least:
                put(bytes(held))
                held.clear()
        if held:
            put(bytes(held))
        fs.call_s3("complete_multipart_upload", MultipartUpload={"Parts": done}, **common)
    except BaseException:
        with contextlib.suppress(Exception):  # (the first error is the one to report)
            fs.call_s3("abort_multipart_upload", **common)
        raise
