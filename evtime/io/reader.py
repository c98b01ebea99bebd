"""Input files -> a Spark DataFrame that knows each row's arrival and its time in ns.

Files are read by pyarrow inside Spark tasks (``mapInArrow`` over one row per chunk), so
row order inside a file is known exactly and times never pass through Spark's microsecond
TimestampType.  Every row gets:

* ``_evt_t``     its time, int64 ns since the epoch (UTC);
* ``_evt_file``  the file's index in arrival order; ``_evt_row`` the row's index in the file;
* ``_evt_seq``   an int64 increasing in arrival order (file << 40 | row);
* ``_evt_chunk`` ``_evt_seq >> 20``: consecutive runs of arrivals, the units of the scans.

Bad input (a time that does not parse or is empty, a value that does not convert, text
that is not UTF-8, a CSV line with the wrong number of fields) is an error naming file,
line (as an editor counts them: a CSV header is line 1; Parquet: row) and column
(``--bad-rows fail``), or, with ``--bad-rows discard``, a row whose ``_evt_bad`` says why
(``bad input: ... (file F line L column C)``), with ``_evt_t`` and the bad value null.

Columns Spark cannot hold exactly (timestamps of any unit) travel as int64 in their own
unit; :class:`Layout` remembers the Arrow types so writers restore them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evtime.columns import BAD, CHUNK, CHUNK_SHIFT, FILE, ROW, SEQ, SEQ_FILE_SHIFT, SPAN, TEXT, T
from evtime.errors import InputError, UsageError, in_task
from evtime.io import formats
from evtime.io.sources import InputFile
from evtime.io.timeparse import EPOCH_FORMATS, format_ns, to_ns

TIME_NAMES = ("time", "timestamp", "ts", "rowtime", "event_time")


@dataclass(frozen=True)
class Layout:
    """The input's columns as Arrow types (what users gave) and as Spark carries them."""

    schema: pa.Schema  # original types, the union over all files
    time_col: str
    # the union before its defaults (a column with no value anywhere stays null, a CSV time
    # column keeps its guessed type), and whether a text file / a CSV file was read: what
    # a later run of a --state stream unifies with (:func:`continued`)
    raw: pa.Schema | None = None
    text: bool = False
    csv: bool = False
    # CSV columns read as text: the types their text reads as (pyarrow's guess from the
    # first block), for what computes with them (bound's --agg); None: as ``schema``
    guessed: pa.Schema | None = field(default=None, compare=False)
    as_text: frozenset[str] = field(default=frozenset(), compare=False)  # (those columns)
    # the columns of the CSV inputs (of every run of a --state stream): text, as written
    csv_names: frozenset[str] = field(default=frozenset(), compare=False)
    # columns read in a type that also carry their text (as written in a CSV input, else
    # their value's text: :func:`value_text`) as ``TEXT + name`` (bound --discards)
    texts: tuple[str, ...] = field(default=(), compare=False)
    opts: ReadOptions | None = field(default=None, compare=False)  # (how it was made)

    def spark_type(self, t: pa.DataType) -> pa.DataType:
        if pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_duration(t):
            return pa.int64()
        if pa.types.is_large_string(t) or pa.types.is_null(t):
            return pa.string()
        if pa.types.is_large_binary(t):
            return pa.binary()
        if pa.types.is_dictionary(t):
            return self.spark_type(t.value_type)
        return t

    @property
    def carried(self) -> pa.Schema:
        return pa.schema([pa.field(f.name, self.spark_type(f.type)) for f in self.schema])

    @property
    def text_fields(self) -> list[pa.Field]:
        """The hidden columns that carry the text of :attr:`texts`."""
        return [pa.field(TEXT + n, pa.string()) for n in self.texts]

    def restore(self, name: str, arr: pa.Array) -> pa.Array:
        """A carried column back to the type it had in the input."""
        if name not in self.schema.names:
            return arr
        t = self.schema.field(name).type
        return arr if arr.type == t else arr.cast(t)


@dataclass(frozen=True)
class ReadOptions:
    time: str | None = None
    time_format: str | None = None
    tz: str | None = None
    bad_rows: str = "fail"  # or "discard"
    # CSV columns read in the type their text reads as (pyarrow's guess): ``typed`` (--key,
    # --order-by), the others read as the text they are; with ``all_typed`` (bound: its
    # --agg computes with them), all but those in ``text`` (its --bound-marker column)
    typed: tuple[str, ...] = ()
    all_typed: bool = False
    text: tuple[str, ...] = ()
    text_times: tuple[str, ...] = ()  # other columns read as time (merge --arrival)
    # the CSV columns read in a type other than text also carry their text (Layout.texts)
    keep_text: bool = False


def suggest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    return f" - did you mean {close[0]!r}?" if close else ""


def wider(have: pa.DataType, t: pa.DataType, text: bool) -> pa.DataType | None:
    """The type of a column that is ``have`` in one input and ``t`` in another (None: they
    conflict).  A column without a value (null) takes the other's type, int with float is
    float; ``text`` (the time column, each file's times parsed on their own, and a column
    of a CSV input, whose values are text): otherwise text."""
    if have == t or pa.types.is_null(t):
        return have
    if pa.types.is_null(have) or pa.types.is_integer(have) and pa.types.is_floating(t):
        return t
    if pa.types.is_floating(have) and pa.types.is_integer(t):
        return have
    return pa.string() if text else None


def _union(
    schemas: list[tuple[pa.Schema, str]], time_col: str | None, texts: frozenset[str] = frozenset()
) -> pa.Schema:
    """One schema over all ``(schema, where)`` (union by name, :func:`wider`; ``texts``: the
    columns of CSV inputs)."""
    fields: dict[str, tuple[pa.DataType, str]] = {}
    for schema, shown in schemas:
        for fld in schema:
            if fld.name not in fields:
                fields[fld.name] = (fld.type, shown)
                continue
            have, where = fields[fld.name]
            t = wider(have, fld.type, fld.name == time_col or fld.name in texts)
            if t is None:
                raise InputError(
                    f"column {fld.name!r} is {have} in {where} but {fld.type} in {shown}: "
                    "give all inputs the same type"
                )
            if t != have:
                fields[fld.name] = (t, shown)
    return pa.schema([pa.field(n, t) for n, (t, _) in fields.items()])


def _defaults(raw: pa.Schema, time_col: str, text: bool, csv: bool) -> pa.Schema:
    """The layout's schema from the union ``raw``: a CSV/JSON column without a value (in the
    first block, or a file with a header only) is text, unless another file says otherwise;
    CSV times are parsed from their text (a float64 guess would lose nanoseconds)."""
    schema = pa.schema(
        [
            pa.field(f.name, pa.string() if text and pa.types.is_null(f.type) else f.type)
            for f in raw
        ]
    )
    if csv:
        i = schema.get_field_index(time_col)
        schema = schema.set(i, pa.field(time_col, pa.string()))
    return schema


def layout(files: list[InputFile], opts: ReadOptions) -> Layout:
    names = list(dict.fromkeys(n for f in files for n in formats.file_schema(f).names))
    if not names:  # (empty files are sources without rows; one input must say the columns)
        shown = ", ".join(f.shown for f in files[:3]) + (", ..." if len(files) > 3 else "")
        raise InputError(f"no columns: every input is empty (no header or schema): {shown}")
    if opts.time:
        if opts.time not in names:
            raise UsageError(
                f"no time column {opts.time!r}; columns: {', '.join(names)}"
                f"{suggest(opts.time, names)}"
            )
        time_col = opts.time
    else:
        found = [n for n in names if n.lower() in TIME_NAMES]
        if len(found) != 1:
            what = "several time columns (" + ", ".join(found) + ")" if found else "no time column"
            raise UsageError(
                f"{what} in {files[0].shown}: name one with --time COL; columns: {', '.join(names)}"
            )
        time_col = found[0]
    csv_names = frozenset(n for f in files if f.fmt == "csv" for n in formats.file_schema(f).names)
    raw = _union([(formats.file_schema(f), f.shown) for f in files], time_col, csv_names)
    text = any(f.fmt != "parquet" for f in files)
    csv = any(f.fmt == "csv" for f in files)
    schema = _defaults(raw, time_col, text, csv)
    return _as_written(schema, time_col, raw, text, csv, csv_names, opts)


def _as_written(
    schema: pa.Schema,
    time_col: str,
    raw: pa.Schema,
    text: bool,
    csv: bool,
    csv_names: frozenset[str],
    opts: ReadOptions,
) -> Layout:
    """The layout of ``schema`` (the union's types): CSV is text, so a column of a CSV input
    passes through as it was written (01 stays 01, True stays True, 1.50 stays 1.50), and
    is text in every input (a Parquet or JSON Lines value in it becomes its text,
    :func:`value_text`), except the keys and --order-by, and with ``all_typed`` (bound,
    whose --agg computes with them) all but ``text``: read as their text reads (pyarrow's
    guess), and, with ``keep_text``, carrying their text too (:attr:`Layout.texts`)."""
    if csv:  # (columns read as time, as the time column: parsed from their text)
        for name in opts.text_times:
            i = schema.get_field_index(name)
            if i >= 0:
                schema = schema.set(i, pa.field(name, pa.string()))
    if not csv_names:
        return Layout(schema, time_col, raw, text, csv, opts=opts)
    guessed = schema
    typed = {*schema.names} - {*opts.text} if opts.all_typed else {*opts.typed}
    as_text = csv_names - typed
    schema = pa.schema([pa.field(f.name, pa.string()) if f.name in as_text else f for f in schema])
    texts: tuple[str, ...] = ()
    if opts.keep_text:
        texts = tuple(
            f.name
            for f in schema
            if f.name in csv_names
            and f.name not in opts.typed
            and f.name != time_col
            and not _is_text(f.type)
            and _from_text(f.type)
        )
    return Layout(schema, time_col, raw, text, csv, guessed, as_text, csv_names, texts, opts)


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _from_text(t: pa.DataType) -> bool:
    """Whether Arrow converts text to type ``t`` (as a CSV value that does not convert is
    found, :func:`_convert`)."""
    try:
        pa.array([], pa.string()).cast(t)
        return True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False


def value_text(arr: pa.Array) -> pa.Array:
    """The values of a typed column as text: as evtime writes them in a CSV output (times
    ISO-8601 with 9 fractional digits, lists and structs as JSON, others as Arrow casts
    them: 12, 1.5, true)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_timestamp(arr.type):
        return format_ns(arr)
    if pa.types.is_nested(arr.type):
        from evtime.io.jsonlines import json_text

        return json_text(arr)
    return arr if pa.types.is_string(arr.type) else arr.cast(pa.string())


def continued(earlier: Layout, now: Layout, files: list[InputFile], where: str) -> Layout:
    """The layout of a run of a stream (``--state``) whose earlier runs had ``earlier`` and
    whose own inputs ``files`` have ``now``: the layout one run over all those inputs has,
    the earlier runs' union taking the place of their files (:func:`wider`: a column
    without a value in the earlier runs or in this one takes the other's type, int64 with
    double is double, a column of a CSV input in any run is text; a conflict names the
    file, the earlier runs as ``where``).  Columns in the earlier runs' order, then this
    run's new ones."""
    assert earlier.raw is not None
    csv_names = earlier.csv_names | now.csv_names
    schemas = [(earlier.raw, where), *((formats.file_schema(f), f.shown) for f in files)]
    raw = _union(schemas, now.time_col, csv_names)
    text, csv = earlier.text or now.text, earlier.csv or now.csv
    schema = _defaults(raw, now.time_col, text, csv)
    return _as_written(schema, now.time_col, raw, text, csv, csv_names, now.opts or ReadOptions())


def empty_inputs(files: list[InputFile]) -> list[str]:
    """The inputs that are empty files (0 bytes, or blank lines only): sources without
    rows, named in the summary."""
    return [f.shown for f in files if formats.empty(f)]


@dataclass(frozen=True)
class Footing:
    """What is known of the input's rows without a job over them (from the Parquet footers,
    or from the tally :func:`read_tasks` makes as it numbers rows): rows (``good``: with a
    time, ``bad``: without), the least and the greatest time in ns (None: no times), and
    how they were read (said with ``--verbose``)."""

    good: int
    bad: int
    least: int | None
    greatest: int | None
    how: str = ""
    # per Parquet row group, in arrival order: its first arrival's _evt_seq and its
    # greatest time in ns (None: no time), from the footers (None: not known)
    groups: tuple[tuple[int, int | None], ...] | None = None
    # the times read in this process, in arrival order (evtime.io.native.local_times)
    times: object = field(default=None, compare=False)
    # rows per input file, by its index, from the footers (empty: not known)
    file_rows: tuple[int, ...] = ()


@dataclass(frozen=True)
class Chunk:
    file: InputFile
    row_groups: list[int] | None
    first_row: int
    span: formats.Span | None = None  # a part of a big text file (rows numbered from 0)


def chunks(files: list[InputFile], spans: dict[int, list[formats.Span]] | None = None):
    """Units of reading: a Parquet row group, a span of a big text file (``spans``: file
    index -> its spans, :func:`evtime.io.split.plan`), or a whole CSV/JSON file."""
    out: list[Chunk] = []
    for f in files:
        if spans and f.index in spans:
            out.extend(Chunk(f, None, 0, s) for s in spans[f.index])
        elif f.fmt == "parquet" and not formats.empty(f):
            first = 0
            for i, n in enumerate(formats.parquet_row_groups(f)):
                out.append(Chunk(f, [i], first))
                first += n
            if first == 0:
                out.append(Chunk(f, [], 0))
        else:
            out.append(Chunk(f, None, 0))
    return out


class _Problems:
    """Bad values of one file: an error at once (--bad-rows fail), or a reason per row."""

    def __init__(self, f: InputFile, opts: ReadOptions, span: formats.Span | None = None):
        self.f, self.discard, self.span = f, opts.bad_rows == "discard", span
        self.lines = formats.Lines(f, span) if f.fmt in ("csv", "jsonl") else None
        self.first_row = 0
        self.reasons: dict[int, str] = {}  # index in the batch -> reason
        self.malformed = 0  # CSV lines with the wrong number of fields seen (discard)

    def batch(self, first_row: int) -> None:
        self.first_row, self.reasons = first_row, {}

    def at(self, row: int) -> str:
        try:
            line = self.lines.line(row) if self.lines else None
        except (OSError, ValueError):  # the file cannot be read again: say the row
            line = None
        if line is not None:
            return f"line {line}"
        s = self.span  # (rows of a span are numbered from its start)
        return f"row {row + 1}" + (f" of bytes {s.start}-{s.end - 1}" if s else "")

    def rows(self, first: int, n: int) -> str:
        """Where rows ``first`` .. ``first + n - 1`` are (a span's: their lines)."""
        if self.span is None:
            return f"rows {first + 1}-{first + n}"
        return f"{self.at(first)} to {self.at(first + n - 1)}"

    def add(self, i: int, col: str | None, what: str) -> None:
        at = self.at(self.first_row + i)
        if not self.discard:
            column = f", column {col!r}" if col else ""
            raise in_task(InputError(f"{self.f.shown}: {at}{column}: {what}"))
        if i not in self.reasons:
            column = f" column {col}" if col else ""
            self.reasons[i] = f"bad input: {what} (file {self.f.shown} {at}{column})"

    def json_malformed(self) -> set[int]:
        """The JSON Lines lines that are not a row: an error (fail), or left out and later
        given as bad rows (discard)."""
        bad = self.lines.scan().malformed
        if bad and not self.discard:
            line, _, what = bad[0]
            raise in_task(InputError(f"{self.f.shown}: line {line}: {_malformed('JSON', what)}"))
        self.malformed = len(bad)
        return {line for line, _, _ in bad}

    def on_malformed(self) -> str:
        self.malformed += 1
        return "skip" if self.discard else "error"

    def reason_array(self, n: int) -> pa.Array:
        if not self.reasons:
            return pa.nulls(n, pa.string())
        return pa.array([self.reasons.get(i) for i in range(n)], pa.string())


def _time_ns(arr: pa.Array, f: InputFile, lay: Layout, opts: ReadOptions, probs: _Problems):
    try:
        ns = to_ns(arr, opts.time_format, opts.tz)
    except (ValueError, pa.ArrowInvalid) as err:
        raise in_task(InputError(f"{f.shown}: column {lay.time_col!r}: {err}")) from None
    if ns.null_count:
        fmt = f" (--time-format {opts.time_format})" if opts.time_format else ""
        for i in pc.indices_nonzero(pc.is_null(ns)).to_pylist():
            value = arr[i].as_py()
            if value in (None, ""):
                probs.add(i, lay.time_col, "no time (empty)")
            else:
                shown = (
                    value if not isinstance(value, str) or len(value) <= 40 else value[:40] + "..."
                )
                probs.add(i, lay.time_col, f"cannot be read as a time: {shown!r}{fmt}")
    return ns


def _text(arr: pa.Array, name: str, probs: _Problems) -> pa.Array:
    """CSV bytes -> text; a value that is not UTF-8 is a problem (and null)."""
    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:
        pass
    out: list[str | None] = []
    for i, v in enumerate(arr.to_pylist()):
        try:
            out.append(None if v is None else v.decode("utf-8"))
        except UnicodeDecodeError as err:
            probs.add(i, name, f"not UTF-8 text (byte 0x{v[err.start]:02x})")
            out.append(None)
    return pa.array(out, pa.string())


def _convert(arr: pa.Array, want: pa.DataType, name: str, probs: _Problems) -> pa.Array:
    """A CSV column read as bytes -> its type, finding the values that do not convert."""
    text = _text(arr, name, probs)
    if pa.types.is_string(want) or pa.types.is_large_string(want):
        return text.cast(want)
    text = pc.if_else(
        pc.is_in(text, pa.array(formats.CSV_NULLS, pa.string())), pa.scalar(None, pa.string()), text
    )
    try:
        return text.cast(want)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    out = []
    for i, v in enumerate(text.to_pylist()):
        try:
            out.append(None if v is None else pa.array([v]).cast(want)[0].as_py())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            shown = v if len(v) <= 40 else v[:40] + "..."
            probs.add(i, name, f"{shown!r} is not {want}")
            out.append(None)
    return pa.array(out, want)


def _from_bytes(batch: pa.RecordBatch, schema: pa.Schema, probs: _Problems) -> pa.RecordBatch:
    """A CSV batch read as raw bytes (it has a bad value) -> the types of ``schema``."""
    arrays = []
    for name in batch.schema.names:
        arr = batch.column(name)
        want = schema.field(name).type if name in schema.names else pa.string()
        if pa.types.is_binary(arr.type) and not pa.types.is_binary(want):
            arr = _convert(arr, want, name, probs)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _as_carried(arr: pa.Array, fld: pa.Field, want: pa.DataType) -> pa.Array:
    """A column of a file as Spark carries ``fld`` (``want``: its carried type)."""
    if pa.types.is_timestamp(arr.type) and pa.types.is_string(want):
        return format_ns(arr)  # a time column that is text in other files
    if pa.types.is_timestamp(arr.type) or pa.types.is_duration(arr.type):
        if arr.type != fld.type:
            arr = arr.cast(fld.type)
        arr = arr.cast(pa.int64())
    elif pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_string(want) and not _is_text(arr.type):
        return value_text(arr)  # (a column that is text in a CSV input)
    return arr if arr.type == want else arr.cast(want)


def recarried(df, earlier: Layout, now: Layout, what: str):  # -> DataFrame
    """Rows saved as ``earlier`` carries the input's columns (the held rows and the keys of
    a ``--state``) as ``now`` carries them, each value converted as :func:`_carry` converts
    a file's (a column with no value, int64 to double, a time column become text); ``what``
    names the rows in an error."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    old = {f.name: f.type for f in earlier.schema}
    changed = {
        f.name: f
        for f in now.schema
        if f.name in df.columns and f.name in old and old[f.name] != f.type
    }
    if not changed:
        return df
    schema = StructType(
        [
            StructField(f.name, from_arrow_type(now.spark_type(changed[f.name].type)), True)
            if f.name in changed
            else f
            for f in df.schema
        ]
    )

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            arrays = []
            for name, arr in zip(b.schema.names, b.columns, strict=True):
                fld = changed.get(name)
                if fld is not None:
                    if pa.types.is_null(old[name]):
                        arr = pa.nulls(len(arr), old[name])
                    else:
                        arr = earlier.restore(name, arr)
                    try:
                        arr = _as_carried(arr, fld, now.spark_type(fld.type))
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                        raise in_task(
                            InputError(f"{what}: column {name!r}: {formats._first_line(err)}")
                        ) from None
                arrays.append(arr)
            yield pa.RecordBatch.from_arrays(arrays, names=b.schema.names)

    return df.mapInArrow(convert, schema)


def _carry(batch: pa.RecordBatch, lay: Layout, f: InputFile, where) -> list[pa.Array]:
    """The batch's columns as Spark carries them; ``where()`` says where its rows are."""
    cols = []
    for fld in lay.schema:
        want = lay.spark_type(fld.type)
        if fld.name not in batch.schema.names:
            cols.append(pa.nulls(batch.num_rows, want))
            continue
        try:
            cols.append(_as_carried(batch.column(fld.name), fld, want))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise in_task(
                InputError(f"{f.shown}: {where()}: column {fld.name!r}: {formats._first_line(err)}")
            ) from None
    return cols


def _names(lay: Layout, opts: ReadOptions, span: bool = False) -> list[str]:
    return [
        *lay.schema.names,
        T,
        FILE,
        ROW,
        SEQ,
        CHUNK,
        *([BAD] if opts.bad_rows == "discard" else []),
        *([SPAN] if span else []),
        *(f.name for f in lay.text_fields),
    ]


def _hidden(f: InputFile, rows: np.ndarray) -> list[pa.Array]:
    """FILE, ROW, SEQ and CHUNK of rows ``rows`` (int64) of file ``f``."""
    seq = rows + (f.index << SEQ_FILE_SHIFT)
    return [
        pa.repeat(pa.scalar(f.index, pa.int32()), len(rows)),
        pa.array(rows),
        pa.array(seq),
        pa.array(seq >> CHUNK_SHIFT),
    ]


def _malformed(kind: str, what: str) -> str:
    """Why a line is not a row, in words (a JSON Lines value of another type than the
    column's first is said as it is: the line is JSON)."""
    return what if what.startswith("column ") else f"malformed {kind} line: {what}"


def _malformed_rows(lay: Layout, probs: _Problems, part: int | None) -> pa.RecordBatch:
    """--bad-rows discard: the malformed lines (CSV: the wrong number of fields; JSON Lines:
    not a JSON object), as rows with no values and a reason (in span ``part``: not rows of
    its numbering, ``SPAN`` says -1 - part)."""
    bad = probs.lines.scan().malformed
    n, kind = len(bad), "CSV" if probs.f.fmt == "csv" else "JSON"
    reasons = [
        f"bad input: {_malformed(kind, what)} (file {probs.f.shown} line {line})"
        for line, _, what in bad
    ]
    rows = np.array([row for _, row, _ in bad], np.int64)
    cols = [pa.nulls(n, t) for t in lay.carried.types]
    cols += [pa.nulls(n, pa.int64()), *_hidden(probs.f, rows), pa.array(reasons, pa.string())]
    if part is not None:
        cols.append(pa.repeat(pa.scalar(-1 - part, pa.int32()), n))
    cols += [pa.nulls(n, pa.string()) for _ in lay.texts]
    names = _names(lay, ReadOptions(bad_rows="discard"), part is not None)
    return pa.RecordBatch.from_arrays(cols, names=names)


EXACT_EPOCH = pa.decimal128(38, 18)  # JSON numbers read as written (up to 18 fraction digits)


def _as_read(f: InputFile, lay: Layout, opts: ReadOptions) -> pa.Schema:
    """The types file ``f`` is read in: the layout's, except a JSON Lines time column of
    numbers with an epoch --time-format: read from the numbers' text as decimals (a float64
    keeps about 16 digits: 1235909722.345678901 would be .345678848), carried as before."""
    schema = lay.schema
    if f.fmt == "csv":  # (the columns that carry their text too: read as text)
        for name in lay.texts:
            schema = schema.set(schema.get_field_index(name), pa.field(name, pa.string()))
    elif f.fmt == "jsonl":  # (a value in a text column: read as its JSON type, then text)
        own = formats.file_schema(f)
        for name in lay.csv_names:
            text = _is_text(lay.schema.field(name).type) if name in lay.schema.names else False
            if text and name != lay.time_col and name in own.names:
                t = own.field(name).type
                if pa.types.is_null(t) and lay.raw is not None and name in lay.raw.names:
                    t = lay.raw.field(name).type  # (no value in its first block: the union's)
                if not pa.types.is_null(t):
                    schema = schema.set(schema.get_field_index(name), pa.field(name, t))
    t = lay.schema.field(lay.time_col).type
    if f.fmt == "jsonl" and opts.time_format in EPOCH_FORMATS and pa.types.is_floating(t):
        i = lay.schema.get_field_index(lay.time_col)
        return schema.set(i, pa.field(lay.time_col, EXACT_EPOCH))
    return schema


def _with_texts(
    batch: pa.RecordBatch, f: InputFile, lay: Layout, probs: _Problems
) -> tuple[pa.RecordBatch, list[pa.Array]]:
    """The batch with the columns of :attr:`Layout.texts` in the layout's types, and their
    text: a CSV file's as written (read as text, then converted as a CSV value that does
    not convert is found, :func:`_convert`), another file's values as text."""
    texts = []
    for name in lay.texts:
        if name not in batch.schema.names:
            texts.append(pa.nulls(batch.num_rows, pa.string()))
            continue
        i = batch.schema.get_field_index(name)
        arr = batch.column(i)
        if f.fmt == "csv":
            texts.append(arr)
            typed = _convert(arr, lay.schema.field(name).type, name, probs)
            batch = batch.set_column(i, name, typed)
        else:
            texts.append(value_text(arr))
    return batch, texts


def _read_chunk(
    c: Chunk, lay: Layout, opts: ReadOptions, part: int | None = None
) -> Iterator[pa.RecordBatch]:
    """The rows of chunk ``c``; with ``part`` (its index, when some chunk is a span), with
    a ``SPAN`` column saying it."""
    row = c.first_row
    names = _names(lay, opts, part is not None)
    probs = _Problems(c.file, opts, c.span)
    as_read = _as_read(c.file, lay, opts)
    try:
        for batch in formats.read_batches(
            c.file,
            as_read,
            c.row_groups,
            probs.on_malformed if c.file.fmt == "csv" else None,
            probs.json_malformed if c.file.fmt == "jsonl" else None,
            c.span,
        ):
            n = batch.num_rows
            if n == 0:
                continue
            if lay.time_col not in batch.schema.names:
                raise in_task(InputError(f"{c.file.shown}: no column {lay.time_col!r}"))
            probs.batch(row)
            batch = _from_bytes(batch, as_read, probs)
            batch, texts = _with_texts(batch, c.file, lay, probs)
            ns = _time_ns(batch.column(lay.time_col), c.file, lay, opts, probs)
            cols = [*_carry(batch, lay, c.file, partial(probs.rows, row, n)), ns]
            cols += _hidden(c.file, np.arange(row, row + n, dtype=np.int64))
            if probs.discard:
                bad = probs.reason_array(n)
                if probs.reasons:  # a bad row has no time
                    cols[len(lay.schema)] = pc.if_else(
                        pc.is_valid(bad), pa.scalar(None, pa.int64()), ns
                    )
                cols.append(bad)
            if part is not None:
                cols.append(pa.repeat(pa.scalar(part, pa.int32()), n))
            cols += texts
            yield pa.RecordBatch.from_arrays(cols, names=names)
            row += n
        if probs.malformed and probs.discard:
            yield _malformed_rows(lay, probs, part)
    except (pa.ArrowInvalid, OSError) as err:
        if c.file.fmt == "csv" and "CSV parse error" in str(err):
            bad = probs.lines.scan().malformed
            if bad:
                line, _, what = bad[0]
                raise in_task(
                    InputError(f"{c.file.shown}: line {line}: malformed CSV line: {what}")
                ) from None
        start = "at the start" if c.span is None else f"at line {c.span.first_line}"
        raise in_task(
            InputError(
                f"{c.file.shown}: "
                f"{f'after {probs.at(row - 1)}' if row > c.first_row else start}: "
                f"{formats._first_line(err)}"
            )
        ) from None


def locate(df, files: list[InputFile], column: str, value: str) -> str | None:
    """Where the first row (in arrival order) of ``df`` (:func:`read`'s) whose ``column``
    holds the text ``value`` is: ``FILE: line L`` (Parquet: ``row R``), None if no row
    does.  One small job, for an error message only (a value Spark could not compute with)."""
    from pyspark.sql import functions as F

    found = (
        df.where(F.col(f"`{column}`") == F.lit(value))
        .select(FILE, ROW)
        .orderBy(SEQ)
        .limit(1)
        .collect()
    )
    if not found:
        return None
    f = next(x for x in files if x.index == found[0][FILE])
    row = found[0][ROW]
    line = None
    if f.fmt in ("csv", "jsonl"):
        try:
            line = formats.Lines(f).line(row)
        except (OSError, ValueError):
            line = None
    return f"{f.shown}: " + (f"line {line}" if line is not None else f"row {row + 1}")


def spark_schema(
    lay: Layout, opts: ReadOptions | None = None, span: bool = False
):  # -> pyspark StructType
    from pyspark.sql.pandas.types import from_arrow_schema

    extra = [
        (T, pa.int64()),
        (FILE, pa.int32()),
        (ROW, pa.int64()),
        (SEQ, pa.int64()),
        (CHUNK, pa.int64()),
    ]
    if opts is not None and opts.bad_rows == "discard":
        extra.append((BAD, pa.string()))
    if span:
        extra.append((SPAN, pa.int32()))
    extra += [(f.name, f.type) for f in lay.text_fields]
    try:
        return from_arrow_schema(pa.schema([*lay.carried, *extra]))
    except TypeError as err:
        raise InputError(f"a column has a type evtime cannot carry through Spark: {err}") from None


def read_tasks(spark, files: list[InputFile], opts: ReadOptions, lay: Layout):
    """The rows read by pyarrow inside Spark tasks, one task per chunk (a Parquet row group,
    a span of a big text file or a whole text file), checkpointed, and their
    :class:`Footing`, from one small job that also numbers the rows of spans."""
    from evtime.io import split

    parts = chunks(files, split.plan(spark, files))
    spans = any(c.span is not None for c in parts)
    schema = spark_schema(lay, opts, spans)

    def read_ids(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for i in b.column(0).to_pylist():
                yield from _read_chunk(parts[i], lay, opts, i if spans else None)

    ids = spark.range(0, len(parts), 1, numPartitions=max(1, min(len(parts), 256)))
    # Read once: every later pass (scans, sort sampling, write) starts from these blocks
    # instead of running the Python reader again; this also pins arrival numbering.
    df = ids.mapInArrow(read_ids, schema).localCheckpoint()
    tally = _tally(df, opts, spans)
    if spans:
        df = _numbered(spark, df, parts, {r[SPAN]: r["n"] for r in tally})
    return df, Footing(
        sum(r["n"] - r["bad"] for r in tally),
        sum(r["bad"] for r in tally),
        min((r["lo"] for r in tally if r["lo"] is not None), default=None),
        max((r["hi"] for r in tally if r["hi"] is not None), default=None),
        _how(parts),
    )


@dataclass(frozen=True)
class ChunkReader:
    """The rows of the chunks of ``files`` (:func:`chunks`: a Parquet row group each, a
    whole text file) as :func:`read_tasks` reads them, in the Arrow types of
    :func:`spark_schema`, read where it is called (``reader(i)``: chunk ``i``'s batches;
    ``len(reader)`` chunks): for the writer's tasks that read the rows they write."""

    parts: tuple[Chunk, ...]
    lay: Layout
    opts: ReadOptions
    want: pa.Schema

    @classmethod
    def of(cls, files: list[InputFile], opts: ReadOptions, lay: Layout) -> ChunkReader:
        from pyspark.sql.pandas.types import to_arrow_schema

        want = to_arrow_schema(spark_schema(lay, opts))
        return cls(tuple(chunks(files)), lay, opts, want)

    def __len__(self) -> int:
        return len(self.parts)

    def __call__(self, i: int) -> Iterator[pa.RecordBatch]:
        for b in _read_chunk(self.parts[i], self.lay, self.opts):
            yield b.cast(self.want)


def _how(parts: list[Chunk]) -> str:
    """How :func:`read_tasks` reads ``parts``, in words."""
    n = len(parts)
    said = f"read by pyarrow in {n} Spark task{'s' if n != 1 else ''}"
    spans: dict[str, int] = {}
    for c in parts:
        if c.span is not None:
            spans[c.file.shown] = spans.get(c.file.shown, 0) + 1
    return said + "".join(f", {name} in {k} spans" for name, k in spans.items())


def _tally(df, opts: ReadOptions, spans: bool) -> list:  # -> [Row(n, bad, lo, hi)]
    """Rows, bad rows, least and greatest time: of the whole input, or per span (one row
    per span: a small collect)."""
    from pyspark.sql import functions as F

    bad = F.count(BAD) if opts.bad_rows == "discard" else F.lit(0)
    return (
        df.groupBy(*([SPAN] if spans else []))
        .agg(
            F.count(F.lit(1)).alias("n"),
            bad.alias("bad"),
            F.min(T).alias("lo"),
            F.max(T).alias("hi"),
        )
        .collect()
    )


def _numbered(spark, df, parts: list[Chunk], rows: dict[int, int]):  # -> DataFrame
    """Rows of spans numbered in their file: each span's rows after those of the file's
    spans before it (``rows``: span -> its rows; malformed lines, -1 - span, are not
    rows of the numbering but go with their span).  Other chunks (Parquet row groups,
    whole files) were numbered as they were read."""
    from pyspark.sql import functions as F

    offsets, before = [], {}
    for i, c in enumerate(parts):
        k = c.file.index
        first = before.get(k, 0) if c.span is not None else 0  # (others: numbered as read)
        offsets += [(i, first), (-1 - i, first)]
        before[k] = first + rows.get(i, 0)
    # (from Arrow: a local relation, no Python worker to turn rows into Spark's)
    spans, firsts = zip(*offsets, strict=True)
    table = pa.table({SPAN: pa.array(spans, pa.int32()), "_evt_off": pa.array(firsts, pa.int64())})
    off = spark.createDataFrame(table)
    row = F.col(ROW) + F.col("_evt_off")
    seq = F.shiftleft(F.col(FILE).cast("long"), SEQ_FILE_SHIFT) + row
    new = {ROW: row, SEQ: seq, CHUNK: F.shiftright(seq, CHUNK_SHIFT)}
    # (broadcast: one row per span; the rows stay where they were read)
    joined = df.join(F.broadcast(off), SPAN)
    return joined.select(
        *[new[n].alias(n) if n in new else F.col(f"`{n}`") for n in df.columns if n != SPAN]
    )


def read_here(files: list[InputFile], opts: ReadOptions, lay: Layout) -> pa.Table:
    """The rows :func:`read` gives, read in this process as one Arrow table in the types of
    :func:`spark_schema` (small local inputs only: evtime.runner.driver.driver_io)."""
    read = ChunkReader.of(files, opts, lay)
    return pa.Table.from_batches([b for i in range(len(read)) for b in read(i)], read.want)
