"""Reading one file's rows in order with pyarrow, whatever its format and location.

Used on the driver (schemas: first block only) and inside Spark tasks (all rows).
"""

from __future__ import annotations

import csv
import functools
import io
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from evtime.errors import InputError
from evtime.io.sources import InputFile

BLOCK = 1 << 22  # 4 MiB: CSV/JSON block, also what types are guessed from
MAX_BLOCK = 1 << 30  # a longer line than this is refused
CSV_NULLS = pcsv.ConvertOptions().null_values  # what pyarrow's CSV reader takes for null


@dataclass(frozen=True)
class Span:
    """Part of a big uncompressed text file, read by a task of its own: the lines that
    start in bytes ``[start, end)``; ``first_line`` is the number (1-based) of its first."""

    start: int
    end: int
    first_line: int


def open_input(f: InputFile, span: Span | None = None):
    """The input file ``f`` opened for reading bytes (decompressed as its name says), or
    only the lines that start within ``span``."""
    import fsspec

    fh = fsspec.open(f.url, "rb", compression="infer").open()
    if span is None:
        return fh
    return io.BufferedReader(_LinesIn(fh, span.start, span.end), BLOCK)


class _LinesIn(io.RawIOBase):
    """The bytes of the lines that start in ``[start, end)`` of a binary file: from the
    first line start at or after ``start`` to the end of the line holding byte ``end - 1``
    (a line belongs to the span where its first byte is, as in Hadoop's line reader)."""

    def __init__(self, fh, start: int, end: int):
        self.fh, self.end, self.done = fh, end, False
        self.pos = start
        if start > 0:  # skip the rest of the line that started before
            fh.seek(start - 1)
            self.pos = start - 1
            while True:
                block = fh.read(1 << 16)
                if not block:
                    self.done = True
                    break
                nl = block.find(b"\n")
                if nl >= 0:
                    self.pos += nl + 1
                    fh.seek(self.pos)
                    break
                self.pos += len(block)
        self.done = self.done or self.pos >= end

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.done:
            return 0
        data = self.fh.read(len(b))
        if not data:
            self.done = True
            return 0
        if self.pos + len(data) >= self.end:  # the last line ends at the first newline at
            nl = data.find(b"\n", max(0, self.end - 1 - self.pos))  # or after end - 1
            if nl >= 0:
                data, self.done = data[: nl + 1], True
        self.pos += len(data)
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.fh.close()
        super().close()


def _csv_convert(schema: pa.Schema | None, as_bytes: bool = False) -> pcsv.ConvertOptions:
    # Times stay text (evtime parses them itself, to the nanosecond); empty cells are null
    # except in text columns, so CSV text comes back unchanged.  ``as_bytes``: every column
    # as raw bytes, converted by the caller one row at a time where a value is bad.
    kw: dict = {"timestamp_parsers": [], "strings_can_be_null": False}
    if schema is not None:
        kw["column_types"] = {f.name: pa.binary() if as_bytes else f.type for f in schema}
    return pcsv.ConvertOptions(**kw)


def _csv_parse(on_malformed: Callable[[], str] | None) -> pcsv.ParseOptions:
    """``on_malformed()`` is called for a line with too many or too few fields and says
    'skip' or 'error'."""
    if on_malformed is None:
        return pcsv.ParseOptions()
    return pcsv.ParseOptions(invalid_row_handler=lambda row: on_malformed())


def _too_long(err: BaseException) -> bool:
    return "straddl" in str(err)  # a row longer than the block


def _json_parse(schema: pa.Schema | None) -> pjson.ParseOptions:
    if schema is None:
        return pjson.ParseOptions()
    return pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")


_EMPTY = ("Empty CSV file", "Empty JSON", "Parquet file size is 0 bytes")


def empty(f: InputFile) -> bool:
    """Whether ``f`` is an empty input (0 bytes, or only blank lines): a source with no rows
    and no columns (:func:`file_schema` gives no columns)."""
    return not file_schema(f).names


@functools.lru_cache(maxsize=4096)
def file_schema(f: InputFile) -> pa.Schema:
    """The columns and types of one file (CSV/JSON types guessed from the first block; a
    column with no value there is of type null).  An empty file (0 bytes; CSV and JSON
    Lines: nothing but blank lines) has no columns."""
    try:
        if f.fmt == "parquet":
            with open_input(f) as fh:
                return pq.ParquetFile(fh).schema_arrow
        block = BLOCK
        while True:
            try:
                return _guess_schema(f, block)
            except pa.ArrowInvalid as err:
                if not _too_long(err) or block >= MAX_BLOCK:
                    raise
                block *= 4
    except FileNotFoundError:
        raise InputError(f"{f.shown}: no such file") from None
    except (pa.ArrowInvalid, OSError) as err:
        if any(e in str(err) for e in _EMPTY):
            return pa.schema([])
        raise InputError(f"{f.shown}: cannot read as {f.fmt}: {_first_line(err)}") from None


def _guess_schema(f: InputFile, block: int) -> pa.Schema:
    with open_input(f) as fh:
        if f.fmt == "csv":
            # malformed lines are left out here; reading the rows reports them
            reader = pcsv.open_csv(
                fh,
                read_options=pcsv.ReadOptions(block_size=block),
                parse_options=_csv_parse(lambda: "skip"),
                convert_options=_csv_convert(None),
            )
            # CSV is text: a column guessed as bytes has a value that is not UTF-8
            return pa.schema(
                [
                    pa.field(c.name, pa.string() if pa.types.is_binary(c.type) else c.type)
                    for c in reader.schema
                ]
            )
        try:
            return _json_types(
                pjson.open_json(fh, read_options=pjson.ReadOptions(block_size=block)).schema
            )
        except pa.ArrowInvalid as err:
            # malformed lines are left out here; reading the rows reports them
            bad = _json_parse_error(err) and Lines(f).scan().malformed
            if not bad:
                raise
    with _json_without(f, None, {line for line, _, _ in bad}) as fh:
        return _json_types(
            pjson.open_json(fh, read_options=pjson.ReadOptions(block_size=block)).schema
        )


def _json_types(schema: pa.Schema) -> pa.Schema:
    """JSON's own types: a string pyarrow took for a timestamp stays a string (JSON has no
    timestamps; the time column is parsed from its text by evtime)."""
    return pa.schema(
        [pa.field(f.name, pa.string()) if pa.types.is_timestamp(f.type) else f for f in schema]
    )


def parquet_metadata(f: InputFile) -> pq.FileMetaData:
    """A Parquet file's footer: row groups, physical types, statistics (read each time: a
    file may change between runs of one process)."""
    with open_input(f) as fh:
        return pq.ParquetFile(fh).metadata


def parquet_row_groups(f: InputFile) -> list[int]:
    """Rows per row group of a Parquet file (the units a big file is split into)."""
    md = parquet_metadata(f)
    return [md.row_group(i).num_rows for i in range(md.num_row_groups)]


def read_batches(
    f: InputFile,
    schema: pa.Schema,
    row_groups: list[int] | None = None,
    on_malformed: Callable[[], str] | None = None,
    json_malformed: Callable[[], set[int]] | None = None,
    span: Span | None = None,
) -> Iterator[pa.RecordBatch]:
    """The file's rows in file order, as batches with (a subset of) ``schema``'s columns.

    CSV/JSON blocks grow when a line is longer than one.  A CSV value that does not convert
    (or is not UTF-8) makes the rest of the file come as raw bytes (``binary`` columns):
    the caller converts them and finds the bad values.  ``on_malformed`` (CSV) decides
    about lines with the wrong number of fields; ``json_malformed`` (JSON Lines), called
    when pyarrow cannot parse the file, gives the lines to leave out (or raises).  With
    ``span``, the rows of its lines only (a CSV span after the first has no header)."""
    if (f.fmt != "parquet" or row_groups is None) and empty(f):
        return  # no rows (a Parquet file's row groups come from its footer: it has one)
    if f.fmt == "parquet":
        with open_input(f) as fh:
            pf = pq.ParquetFile(fh)
            names = [n for n in schema.names if n in pf.schema_arrow.names]
            yield from pf.iter_batches(batch_size=65536, row_groups=row_groups, columns=names)
        return
    done, block, as_bytes, left_out = 0, BLOCK, False, None
    while True:
        skip = done
        try:
            opened = open_input(f, span) if left_out is None else _json_without(f, span, left_out)
            with opened as fh:
                if span is not None and left_out is None and not fh.peek(1):
                    return  # no line starts in the span
                header = span is None or span.start == 0
                for b in _text_batches(f, fh, schema, block, as_bytes, on_malformed, header):
                    if skip >= b.num_rows:
                        skip -= b.num_rows
                        continue
                    if skip:
                        b, skip = b.slice(skip), 0
                    done += b.num_rows
                    yield b
            return
        except pa.ArrowInvalid as err:
            # start again (skipping the rows already given) with a bigger block or as bytes
            if _too_long(err) and block < MAX_BLOCK:
                block *= 4
            elif (
                f.fmt == "csv"
                and not as_bytes
                and ("conversion error" in str(err) or "UTF8" in str(err))
            ):
                as_bytes = True
            elif json_malformed and left_out is None and _json_parse_error(err):
                left_out = json_malformed()  # the rows before the bad line are the same
                if not left_out:
                    raise
            else:
                raise


def _text_batches(
    f, fh, schema, block, as_bytes, on_malformed, header=True
) -> Iterator[pa.RecordBatch]:
    if f.fmt == "csv":
        own = file_schema(f)
        want = pa.schema(
            [schema.field(n) if n in schema.names else own.field(n) for n in own.names]
        )
        names = [] if header else own.names  # (a span after the first: the file's header)
        yield from pcsv.open_csv(
            fh,
            read_options=pcsv.ReadOptions(block_size=block, column_names=names),
            parse_options=_csv_parse(on_malformed),
            convert_options=_csv_convert(want, as_bytes),
        )
    else:
        yield from pjson.open_json(
            fh,
            read_options=pjson.ReadOptions(block_size=block),
            parse_options=_json_parse(schema),
        )


def _until_error(reader) -> Iterator[list[str]]:
    """The records of a csv.reader up to one it cannot read (a NUL byte, ...)."""
    try:
        yield from reader
    except csv.Error:
        return


class Lines:
    """Where a file's rows are: data row (0-based) -> line (1-based, as an editor counts;
    a CSV header is line 1), and the malformed lines (CSV: the wrong number of fields;
    JSON Lines: not a JSON object).  One scan of the file, done only for a file with a bad
    row."""

    def __init__(self, f: InputFile, span: Span | None = None):
        self.f, self.span = f, span
        self._starts: list[int] | None = None  # rows where (line - row) changes
        self._offsets: list[int] = []
        self.malformed: list[tuple[int, int, str]] = []  # (line, row before it, what)

    def _scan(self) -> None:
        starts, offsets = [], []

        def row_at(row: int, line: int) -> None:
            if not offsets or offsets[-1] != line - row:
                starts.append(row)
                offsets.append(line - row)

        span = self.span
        first = span.first_line if span else 1  # the number of the first line read
        with open_input(self.f, span) as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="")
            row = 0
            if self.f.fmt == "csv":
                csv.field_size_limit(sys.maxsize)
                reader = csv.reader(text)
                # (a span after the first has no header: the file's columns)
                ncols = None if span is None or span.start == 0 else len(file_schema(self.f))
                end = first - 1
                for rec in _until_error(reader):
                    start, end = end + 1, reader.line_num + first - 1
                    if not rec or (len(rec) == 1 and not rec[0].strip() and ncols != 1):
                        continue  # an empty line
                    if ncols is None:
                        ncols = len(rec)  # the header
                        continue
                    if len(rec) != ncols:
                        quote = " (an unbalanced quote?)" if end > start else ""
                        what = f"expected {ncols} fields, got {len(rec)}{quote}"
                        self.malformed.append((start, row, what))
                        continue
                    row_at(row, start)
                    row += 1
            else:
                kinds: dict[str, tuple[str, int]] = {}  # column -> (JSON type, line)
                for i, line in enumerate(text, first):
                    if not line.strip():
                        continue
                    what = _not_json_object(line, kinds, i)
                    if what:
                        self.malformed.append((i, row, what))
                        continue
                    row_at(row, i)
                    row += 1
        self._starts, self._offsets = starts, offsets

    def scan(self) -> Lines:
        if self._starts is None:
            self._scan()
        return self

    def line(self, row: int) -> int | None:
        """The line of data row ``row``, or None if the scan did not see it."""
        self.scan()
        i = bisect_right(self._starts, row) - 1
        return row + self._offsets[i] if i >= 0 else None


def _kind(value: object) -> str | None:
    """The JSON type of a parsed value (None: null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _not_json_object(
    line: str, kinds: dict[str, tuple[str, int]] | None = None, at: int = 0
) -> str | None:
    """Why a JSON Lines line is not one row (None: it is).  With ``kinds`` (column -> the
    JSON type of its first value and that value's line, filled in as lines are read), a
    value of another JSON type than the column's first (a number, then a string) is why:
    Arrow cannot read such a column."""
    import json

    try:
        value = json.loads(line.rstrip("\r\n"))
    except ValueError as err:
        return f"not JSON: {getattr(err, 'msg', err)} (column {getattr(err, 'colno', '?')})"
    if not isinstance(value, dict):
        return "not a JSON object"
    if kinds is None:
        return None
    new = {}
    for name, v in value.items():
        kind = _kind(v)
        if kind is None:
            continue
        first = kinds.get(name)
        if first is not None and first[0] != kind:
            return (
                f"column {name!r} is a {kind} here but a {first[0]} in line {first[1]}"
                " (one type per column)"
            )
        if first is None:
            new[name] = (kind, at)
    kinds.update(new)
    return None


def _json_parse_error(err: BaseException) -> bool:
    return "JSON parse error" in str(err)


def _json_without(f: InputFile, span: Span | None, lines: set[int]):
    """The file (or span) without the (1-based) ``lines``, as a file to read (spilled to
    disk when large), split into lines as :class:`Lines` splits them."""
    import tempfile

    out = tempfile.SpooledTemporaryFile(max_size=64 << 20)  # noqa: SIM115 (the caller closes)
    with open_input(f, span) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="")
        for i, line in enumerate(text, span.first_line if span else 1):
            if i not in lines:
                out.write(line.encode("utf-8", "surrogateescape"))
    out.seek(0)
    return out


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
