"""Big uncompressed CSV and JSON Lines files read by several tasks, in byte spans.

A text file larger than ``spark.sql.files.maxPartitionBytes`` (128 MiB unless set) is cut
into spans of that size, as Spark cuts text files; a span holds the lines that start in it
(:class:`~evtime.io.formats.Span`).  Smaller files are read whole: below that size, the
job that splitting needs costs more than the second task saves.  So are all files when
Spark has fewer than ``EVTIME_SPLIT_MIN_CORES`` cores (default 4): one task reading a file
already keeps about one and a half cores busy (Arrow parses with threads while the JVM
stores the rows), and on 2 cores splitting was measured to cost more than it saved.

Before the rows are read, one Spark job reads every span once, in parallel
(:func:`span_facts`), for what a span's task cannot see alone:

* how many lines start in each span, so each span knows the number of its first line
  (error messages and ``--bad-rows discard`` reasons name the line);
* for CSV, whether a span would start inside a quoted value (a value may hold a newline).
  A CSV file is split only when every span starts outside quotes, counting quotes from the
  file's start, and every quote stands where RFC 4180 puts one (opening a value after a
  comma, a line start or a quote; closing it before one of those or a line end): a quote
  inside an unquoted value makes quote counting meaningless, and such a file is read
  whole, by one task, as before.

Row numbers inside a span start at 0; :func:`evtime.io.reader.read_tasks` adds the rows of
the file's spans before it once they are read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evtime.errors import UsageError
from evtime.io.compressed import CODECS
from evtime.io.formats import BLOCK, Span, open_input
from evtime.io.sources import InputFile

_SEP = b',\n\r"'  # what a well-placed quote may follow (opening) or precede (closing)


@dataclass(frozen=True)
class Facts:
    """What one read of a span says (see :func:`span_facts`)."""

    lines: int  # lines that start in the span
    quotes: int  # quote characters in the span
    before: int | None  # quotes in the span before its first line start (None: no line)
    misplaced: tuple[bool, bool]  # a quote not where RFC 4180 puts one, if the quotes
    # before the span are (even, odd) in number


def _bytes(value: str) -> int:
    """A Spark size setting (``134217728``, ``128m``, ``128MB``) in bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgtp]?)b?\s*", value.lower())
    if not m:
        raise ValueError(f"not a size: {value!r}")
    return int(m.group(1)) << (10 * " kmgtp".index(m.group(2) or " "))


MIN_CORES = 4  # EVTIME_SPLIT_MIN_CORES


def _cores(spark) -> int:
    """The cores Spark runs tasks on (Spark Connect: spark.default.parallelism if set,
    else this machine's)."""
    import os

    try:
        return max(1, spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect: no SparkContext in this process
        return int(spark.conf.get("spark.default.parallelism", None) or os.cpu_count() or 1)


def _min_cores() -> int:
    import os

    try:
        return int(os.environ.get("EVTIME_SPLIT_MIN_CORES", MIN_CORES))
    except ValueError:
        raise UsageError("EVTIME_SPLIT_MIN_CORES takes a number of cores") from None


def splittable(f: InputFile) -> bool:
    return f.fmt in ("csv", "jsonl") and not f.url.lower().endswith(CODECS)


def _sizes(files: list[InputFile]) -> dict[int, int]:
    """File index -> size in bytes (one request per file system: S3 sizes concurrently)."""
    import fsspec

    by_fs: dict[int, tuple] = {}
    for f in files:
        fs, path = fsspec.core.url_to_fs(f.url)
        by_fs.setdefault(id(fs), (fs, []))[1].append((f.index, path))
    out: dict[int, int] = {}
    for fs, items in by_fs.values():
        out.update(zip([i for i, _ in items], fs.sizes([p for _, p in items]), strict=True))
    return out


def split_size(spark) -> int:
    """Spark's ``spark.sql.files.maxPartitionBytes`` (128 MiB unless set)."""
    return max(1, _bytes(spark.conf.get("spark.sql.files.maxPartitionBytes", "128m")))


def span_facts(f: InputFile, start: int, end: int) -> Facts:
    """Read bytes ``start - 1 .. end`` of ``f`` once: the :class:`Facts` of ``[start, end)``
    (quotes are looked at in CSV only)."""
    import numpy as np

    quoted = f.fmt == "csv"
    lines = int(start == 0)
    quotes, before = 0, None if start > 0 else 0
    misplaced = [False, False]
    fits = np.zeros(256, bool)  # the bytes a quote may follow (opening) or precede (closing)
    fits[np.frombuffer(_SEP, np.uint8)] = True
    pos = max(start - 1, 0)
    with open_input(f) as fh:
        fh.seek(pos)
        left = end + 1 - pos  # [pos, end]: byte `end` is what follows the span's last quote
        cur = fh.read(min(BLOCK, left))
        left -= len(cur)
        prev = b"\n"  # the byte before `cur` (the file's start is as a line's)
        while cur:
            nxt = fh.read(min(BLOCK, left)) if left > 0 else b""
            left -= len(nxt)
            # line starts: newlines at [start - 1, end - 1)
            lo, hi = max(start - 1 - pos, 0), max(min(end - 1 - pos, len(cur)), 0)
            nl = cur.find(b"\n", lo, hi) if before is None else -1
            lines += cur.count(b"\n", lo, hi)
            if quoted:
                # cur with the bytes around it (the file's end is as a line's)
                a = np.frombuffer(prev + cur + (nxt[:1] or b"\n"), np.uint8)
                i0, i1 = max(start - pos, 0) + 1, max(min(end - pos, len(cur)), 0) + 1
                q = np.flatnonzero(a[i0:i1] == 34) + i0
                if before is None and nl >= 0:  # quotes before the first line start
                    before = quotes + int(np.searchsorted(q, nl + 2))
                opens_ok, closes_ok = fits[a[q - 1]], fits[a[q + 1]]
                for odd in (0, 1):  # with `odd` quotes before the span (mod 2), the
                    first = (quotes + odd) % 2  # first quote here that opens a value
                    bad = ~opens_ok[first::2]
                    misplaced[odd] |= bool(bad.any() or (~closes_ok[1 - first :: 2]).any())
                quotes += len(q)
            elif before is None and nl >= 0:
                before = 0
            prev, pos, cur = cur[-1:], pos + len(cur), nxt
    if before is None and lines:
        before = quotes
    return Facts(lines, quotes, before, (misplaced[0], misplaced[1]))


def spans_of(facts: list[tuple[int, int, Facts]], csv: bool) -> list[Span] | None:
    """A file's spans from the facts of its byte ranges ``(start, end, facts)`` in order;
    None when it must be read whole (CSV with a span starting inside quotes)."""
    spans, line, quotes = [], 1, 0
    for start, end, fx in facts:
        if csv:
            odd = quotes % 2
            if fx.misplaced[odd]:
                return None
            if start > 0 and fx.lines and (quotes + (fx.before or 0)) % 2:
                return None
        spans.append(Span(start, end, line))
        line, quotes = line + fx.lines, quotes + fx.quotes
    return spans


def plan(spark, files: list[InputFile]) -> dict[int, list[Span]]:
    """The spans of each file read by several tasks (file index -> spans); files not in it
    are read whole."""
    text = [f for f in files if splittable(f)]
    if not text or _cores(spark) < _min_cores():
        return {}
    sizes = _sizes(text)
    size = split_size(spark)
    cut = {  # file -> its byte ranges, for the files larger than one span
        f: [(f, start, min(start + size, sizes[f.index])) for start in range(0, n, size)]
        for f in text
        if (n := sizes[f.index]) > size
    }
    if not cut:
        return {}
    facts = iter(_facts(spark, [r for ranges in cut.values() for r in ranges]))
    out: dict[int, list[Span]] = {}
    for f, ranges in cut.items():
        spans = spans_of([(s, e, next(facts)) for _, s, e in ranges], f.fmt == "csv")
        if spans is not None:
            out[f.index] = spans
    return out


def _facts(spark, ranges: list[tuple[InputFile, int, int]]) -> list[Facts]:
    """:func:`span_facts` of every range, in one Spark job (one row per range)."""
    import pyarrow as pa

    names = ["i", "lines", "quotes", "before", "even_misplaced", "odd_misplaced"]
    schema = ", ".join([*(f"{n} long" for n in names[:4]), *(f"{n} boolean" for n in names[4:])])

    def task(batches):
        for b in batches:
            rows = [(i, span_facts(*ranges[i])) for i in b.column(0).to_pylist()]
            cols = [
                [i for i, _ in rows],
                [x.lines for _, x in rows],
                [x.quotes for _, x in rows],
                [x.before for _, x in rows],
                [x.misplaced[0] for _, x in rows],
                [x.misplaced[1] for _, x in rows],
            ]
            yield pa.RecordBatch.from_arrays([pa.array(c) for c in cols], names=names)

    n = len(ranges)
    ids = spark.range(0, n, 1, numPartitions=max(1, min(n, 256)))
    got = {r[0]: r for r in ids.mapInArrow(task, schema).collect()}  # one row per range
    return [Facts(got[i][1], got[i][2], got[i][3], (got[i][4], got[i][5])) for i in range(n)]
