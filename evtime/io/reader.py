"""Input files -> a Spark DataFrame that knows each row's arrival and its time in ns.

Files are read by pyarrow inside Spark tasks (``mapInArrow`` over one row per chunk), so
row order inside a file is known exactly and times never pass through Spark's microsecond
TimestampType.  Every row gets:

* ``_evt_t``     its time, int64 ns since the epoch (UTC);
* ``_evt_file``  the file's index in arrival order; ``_evt_row`` the row's index in the file;
* ``_evt_seq``   an int64 increasing in arrival order (file << 40 | row);
* ``_evt_chunk`` ``_evt_seq >> 20``: consecutive runs of arrivals, the units of the scans.

Columns Spark cannot hold exactly (timestamps of any unit) travel as int64 in their own
unit; :class:`Layout` remembers the Arrow types so writers restore them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from evtime.errors import InputError, UsageError, in_task
from evtime.io import formats
from evtime.io.sources import InputFile
from evtime.io.timeparse import format_ns, to_ns

T, FILE, ROW, SEQ, CHUNK = "_evt_t", "_evt_file", "_evt_row", "_evt_seq", "_evt_chunk"
SEQ_FILE_SHIFT = 40
CHUNK_SHIFT = 20
PART = "_evt_part"  # the output part of a row (engine.scan.sort_in_parts; the writer)
TIME_NAMES = ("time", "timestamp", "ts", "rowtime", "event_time")


@dataclass(frozen=True)
class Layout:
    """The input's columns as Arrow types (what users gave) and as Spark carries them."""

    schema: pa.Schema  # original types, the union over all files
    time_col: str

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


def suggest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    return f" - did you mean {close[0]!r}?" if close else ""


def _unify(files: list[InputFile], time_col: str | None) -> pa.Schema:
    """One schema over all files (union by name).  The time column may differ in type from
    file to file (each file's times are parsed on their own): it then travels as ISO text."""
    fields: dict[str, tuple[pa.DataType, str]] = {}
    for f in files:
        for fld in formats.file_schema(f):
            t = fld.type
            if fld.name not in fields:
                fields[fld.name] = (t, f.shown)
                continue
            have, where = fields[fld.name]
            if have == t or pa.types.is_null(t):
                continue
            if pa.types.is_null(have) or pa.types.is_integer(have) and pa.types.is_floating(t):
                fields[fld.name] = (t, f.shown)
            elif pa.types.is_floating(have) and pa.types.is_integer(t):
                pass
            elif fld.name == time_col:
                fields[fld.name] = (pa.string(), f.shown)
            else:
                raise InputError(
                    f"column {fld.name!r} is {have} in {where} but {t} in {f.shown}: "
                    "give all inputs the same type"
                )
    return pa.schema([pa.field(n, t) for n, (t, _) in fields.items()])


def layout(files: list[InputFile], opts: ReadOptions) -> Layout:
    names = list(dict.fromkeys(n for f in files for n in formats.file_schema(f).names))
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
    schema = _unify(files, time_col)
    if any(f.fmt == "csv" for f in files):
        # CSV times are parsed from their text (a float64 guess would lose nanoseconds)
        i = schema.get_field_index(time_col)
        schema = schema.set(i, pa.field(time_col, pa.string()))
    return Layout(schema, time_col)


@dataclass(frozen=True)
class Chunk:
    file: InputFile
    row_groups: list[int] | None
    first_row: int


def chunks(files: list[InputFile]) -> list[Chunk]:
    """Units of reading: a Parquet row group, or a whole CSV/JSON file."""
    out: list[Chunk] = []
    for f in files:
        if f.fmt == "parquet":
            first = 0
            for i, n in enumerate(formats.parquet_row_groups(f)):
                out.append(Chunk(f, [i], first))
                first += n
            if first == 0:
                out.append(Chunk(f, [], 0))
        else:
            out.append(Chunk(f, None, 0))
    return out


def _time_ns(
    arr: pa.Array, f: InputFile, first_row: int, lay: Layout, opts: ReadOptions
) -> pa.Array:
    try:
        ns = to_ns(arr, opts.time_format, opts.tz)
    except (ValueError, pa.ArrowInvalid) as err:
        raise in_task(InputError(f"{f.shown}: column {lay.time_col!r}: {err}")) from None
    if ns.null_count:
        bad = pc.index(pc.is_null(ns), True).as_py()
        value = arr[bad].as_py()
        what = "is empty" if value is None else f"cannot be read as a time: {value!r}"
        fmt = f" (--time-format {opts.time_format})" if opts.time_format else ""
        raise in_task(
            InputError(f"{f.shown}: row {first_row + bad + 1}: column {lay.time_col!r} {what}{fmt}")
        )
    return ns


def _carry(batch: pa.RecordBatch, lay: Layout, f: InputFile, first_row: int) -> list[pa.Array]:
    cols = []
    for fld in lay.schema:
        want = lay.spark_type(fld.type)
        if fld.name not in batch.schema.names:
            cols.append(pa.nulls(batch.num_rows, want))
            continue
        arr = batch.column(fld.name)
        try:
            if pa.types.is_timestamp(arr.type) and pa.types.is_string(want):
                arr = format_ns(arr)  # a time column that is text in other files
            elif pa.types.is_timestamp(arr.type) or pa.types.is_duration(arr.type):
                if arr.type != fld.type:
                    arr = arr.cast(fld.type)
                arr = arr.cast(pa.int64())
            elif pa.types.is_dictionary(arr.type):
                arr = arr.dictionary_decode()
            cols.append(arr if arr.type == want else arr.cast(want))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise in_task(
                InputError(
                    f"{f.shown}: rows {first_row + 1}-{first_row + batch.num_rows}: "
                    f"column {fld.name!r}: {formats._first_line(err)}"
                )
            ) from None
    return cols


def _read_chunk(c: Chunk, lay: Layout, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    row = c.first_row
    names = [*lay.schema.names, T, FILE, ROW, SEQ, CHUNK]
    try:
        for batch in formats.read_batches(c.file, lay.schema, c.row_groups):
            n = batch.num_rows
            if n == 0:
                continue
            if lay.time_col not in batch.schema.names:
                raise in_task(InputError(f"{c.file.shown}: no column {lay.time_col!r}"))
            ns = _time_ns(batch.column(lay.time_col), c.file, row, lay, opts)
            rows = pa.array(range(row, row + n), pa.int64())
            seq = pc.add(rows, c.file.index << SEQ_FILE_SHIFT)
            cols = [
                *_carry(batch, lay, c.file, row),
                ns,
                pa.array([c.file.index] * n, pa.int32()),
                rows,
                seq,
                pc.shift_right(seq, CHUNK_SHIFT),
            ]
            yield pa.RecordBatch.from_arrays(cols, names=names)
            row += n
    except (pa.ArrowInvalid, OSError) as err:
        raise in_task(
            InputError(f"{c.file.shown}: after row {row}: {formats._first_line(err)}")
        ) from None


def spark_schema(lay: Layout):  # -> pyspark StructType
    from pyspark.sql.pandas.types import from_arrow_schema

    extra = [
        (T, pa.int64()),
        (FILE, pa.int32()),
        (ROW, pa.int64()),
        (SEQ, pa.int64()),
        (CHUNK, pa.int64()),
    ]
    try:
        return from_arrow_schema(pa.schema([*lay.carried, *extra]))
    except TypeError as err:
        raise InputError(f"a column has a type evtime cannot carry through Spark: {err}") from None


def read(
    spark, files: list[InputFile], opts: ReadOptions, lay: Layout | None = None
):  # -> (DataFrame, Layout)
    """The rows of ``files`` as a DataFrame with arrival and ns-time columns; ``lay`` is the
    :func:`layout` when the caller already has it."""
    lay = lay or layout(files, opts)
    parts = chunks(files)
    schema = spark_schema(lay)

    def read_ids(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for i in b.column(0).to_pylist():
                yield from _read_chunk(parts[i], lay, opts)

    ids = spark.range(0, len(parts), 1, numPartitions=max(1, min(len(parts), 256)))
    # Read once: every later pass (scans, sort sampling, write) starts from these blocks
    # instead of running the Python reader again; this also pins arrival numbering.
    return ids.mapInArrow(read_ids, schema).localCheckpoint(), lay
