"""Single-file CSV and JSON Lines outputs on S3 assembled server-side from the staged parts.

When the output (``-o s3://bucket/x.csv`` or ``.jsonl``, not compressed) and the staging
are both on S3, the parts are already objects: the output is made by one S3 multipart
upload whose parts are, in order, ``UploadPartCopy`` of the staged part objects (S3 copies
the bytes; none pass through this process), completed only at the end.  A multipart
upload is invisible until it is completed, so the output appears whole or not at all; on
any error the upload is aborted (no object, no upload left in progress).

S3 requires every part of an upload but the last to hold at least :data:`MIN_PART` bytes
(5 MiB).  The choice made here: a staged part of at least :data:`MIN_PART` bytes is copied
server-side; smaller neighbours (and the CSV header, written once, before the first part)
are read through this process into a buffer uploaded as one part once it reaches
:data:`MIN_PART` bytes (or at the end, as the last part).  Where the buffer is not empty
before a big part, only the head of that part needed to fill the buffer to
:data:`MIN_PART` is read, and the rest copied with a byte range (when that rest still
holds :data:`MIN_PART` bytes; else the part is read whole).  So this process reads less
than :data:`MIN_PART` bytes per big part plus the small parts, and holds less than three
times :data:`MIN_PART` in memory.  An output without any big part is one PUT.

Compressed outputs (``.csv.gz``, ...) and Parquet still stream through this process
(:mod:`evtime.io.writer`); a directory output (``-o DIR/``) writes no byte through it.
"""

from __future__ import annotations

import contextlib

from evtime.errors import OutputError

MIN_PART = 5 << 20  # S3's least size of a multipart upload's part (all but the last)
MAX_COPY = 5 << 30  # S3's greatest size of one UploadPartCopy


def applies(path: str | None, fmt: str, staging: str, compressed: bool) -> bool:
    """Whether an output at ``path`` of format ``fmt``, staged under ``staging``, is
    assembled here: CSV or JSON Lines, not compressed, output and staging on S3."""
    return (
        fmt in ("csv", "jsonl")
        and not compressed
        and bool(path)
        and path.startswith("s3://")
        and staging.startswith("s3://")
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


def _sizes(fs, keys: list[str]) -> list[int]:
    """The sizes of the objects ``keys``: one listing per folder, not a request per part."""
    found: dict[str, int] = {}
    for folder in dict.fromkeys(k.rsplit("/", 1)[0] for k in keys):
        fs.invalidate_cache(folder)
        found.update({e["name"].rstrip("/"): e["size"] for e in fs.ls(folder, detail=True)})
    return [found[k] if k in found else fs.size(k) for k in keys]


def _assemble(fs, key: str, parts: list[str], sizes: list[int], head: bytes) -> None:
    bucket, name, _ = fs.split_path(key)
    if not any(s >= MIN_PART for s in sizes):  # (nothing worth copying: one PUT)
        data = head + b"".join(fs.cat_file(p) for p in parts)
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
        for p, size in zip(parts, sizes, strict=True):
            if size >= MIN_PART and not held:
                copy(p, 0, size)
                continue
            need = MIN_PART - len(held)
            if size >= MIN_PART and size - need >= MIN_PART:
                held += fs.cat_file(p, start=0, end=need)
                put(bytes(held))
                held.clear()
                copy(p, need, size)
                continue
            held += fs.cat_file(p)
            if len(held) >= MIN_PART:
                put(bytes(held))
                held.clear()
        if held:
            put(bytes(held))
        fs.call_s3("complete_multipart_upload", MultipartUpload={"Parts": done}, **common)
    except BaseException:
        with contextlib.suppress(Exception):  # (the first error is the one to report)
            fs.call_s3("abort_multipart_upload", **common)
        raise
