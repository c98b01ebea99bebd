"""Text outputs compressed by the extension of their name (``.gz``, ``.bz2``, ``.xz``,
``.zst``), as compressed inputs are read; and outputs that are streams (``-``, a character
device such as /dev/stdout, a FIFO) rather than files to publish."""

from __future__ import annotations

import bz2
import lzma
import os
import stat
import zlib

import pyarrow as pa

CODECS = (".gz", ".bz2", ".xz", ".zst")


def codec_of(path: str | None) -> str | None:
    """The compression extension ``path`` ends with, or None."""
    if not path:
        return None
    name = path.lower()
    return next((ext for ext in CODECS if name.endswith(ext)), None)


def is_stream(path: str | None) -> bool:
    """Whether writing to ``path`` is writing to a stream (standard output, a character
    device, a FIFO): written as it comes, with nothing to publish or replace."""
    if path in (None, "-"):
        return True
    if "://" in path:
        return False
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


class _Unclosed:
    """``raw`` for pyarrow's compressed stream, which closes what it wraps: flushed, not
    closed (its owner closes it)."""

    def __init__(self, raw):
        self.raw, self.closed = raw, False

    def write(self, data) -> int:
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        self.raw.flush()
        self.closed = True


class Compressed:
    """A binary file that compresses what is written to it into ``raw``.  It has no
    ``fileno``: nothing can copy past the compression into ``raw``.  :meth:`finish` writes
    the end of the compressed stream (``raw`` stays open)."""

    def __init__(self, raw, codec: str):
        self.raw, self.stream, self.z = raw, None, None
        if codec == ".zst":
            sink = pa.PythonFile(_Unclosed(raw), mode="w")
            self.stream = pa.CompressedOutputStream(sink, "zstd")
        else:
            self.z = {
                ".gz": lambda: zlib.compressobj(6, zlib.DEFLATED, 31),  # (gzip framing)
                ".bz2": bz2.BZ2Compressor,
                ".xz": lzma.LZMACompressor,
            }[codec]()

    def write(self, data) -> int:
        if self.stream is not None:
            self.stream.write(data)
        else:
            self.raw.write(self.z.compress(data))
        return len(data)

    def flush(self) -> None:
        if self.stream is None:
            self.raw.flush()

    def finish(self) -> None:
        if self.stream is not None:
            self.stream.close()
        else:
            self.raw.write(self.z.flush())
        self.raw.flush()
