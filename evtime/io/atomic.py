"""Side files written whole: to a temporary name beside the target, renamed over it when
complete, so that a reader sees the old file or the new one, never half of one.  Standard
library only (the engine's tasks use it too)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import IO


@contextlib.contextmanager
def replacing(path: str, tmp: str | None = None) -> Iterator[str]:
    """The name to write ``path``'s new content under (``tmp``, default ``<path>.<uuid>``,
    in the same directory); renamed over ``path`` when the block ends, removed if it
    raises."""
    tmp = tmp or f"{path}.{uuid.uuid4().hex}"
    try:
        yield tmp
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.replace(tmp, path)


@contextlib.contextmanager
def written(
    path: str, mode: str = "wb", fsync: bool = False, tmp: str | None = None
) -> Iterator[IO]:
    """A file open (``mode``) on :func:`replacing`'s temporary name: closed (flushed to the
    disk first with ``fsync``), then renamed over ``path``, when the block ends."""
    with replacing(path, tmp) as name, open(name, mode) as fh:
        yield fh
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())
