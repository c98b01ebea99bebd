"""Reading one file's rows in order with pyarrow, whatever its format and location.

Used on the driver (schemas: first block only) and inside Spark tasks (all rows).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import fsspec
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from evtime.errors import InputError
from evtime.io.sources import InputFile

BLOCK = 1 << 22  # 4 MiB: CSV/JSON block, also what types are guessed from


def _open(f: InputFile):
    return fsspec.open(f.url, "rb", compression="infer").open()


def _csv_convert(schema: pa.Schema | None) -> pcsv.ConvertOptions:
    # Times stay text (evtime parses them itself, to the nanosecond); empty cells are null
    # except in text columns, so CSV text comes back unchanged.
    kw: dict = {"timestamp_parsers": [], "strings_can_be_null": False}
    if schema is not None:
        kw["column_types"] = {f.name: f.type for f in schema}
    return pcsv.ConvertOptions(**kw)


def _json_parse(schema: pa.Schema | None) -> pjson.ParseOptions:
    if schema is None:
        return pjson.ParseOptions()
    return pjson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")


def _csv_type(t: pa.DataType) -> pa.DataType:
    return pa.string() if pa.types.is_null(t) else t


@functools.lru_cache(maxsize=4096)
def file_schema(f: InputFile) -> pa.Schema:
    """The columns and types of one file (CSV/JSON types guessed from the first block)."""
    try:
        with _open(f) as fh:
            if f.fmt == "parquet":
                return pq.ParquetFile(fh).schema_arrow
            if f.fmt == "csv":
                reader = pcsv.open_csv(
                    fh,
                    read_options=pcsv.ReadOptions(block_size=BLOCK),
                    convert_options=_csv_convert(None),
                )
                return pa.schema([pa.field(c.name, _csv_type(c.type)) for c in reader.schema])
            reader = pjson.open_json(fh, read_options=pjson.ReadOptions(block_size=BLOCK))
            return pa.schema([pa.field(c.name, _csv_type(c.type)) for c in reader.schema])
    except FileNotFoundError:
        raise InputError(f"{f.shown}: no such file") from None
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(f"{f.shown}: cannot read as {f.fmt}: {_first_line(err)}") from None


def parquet_row_groups(f: InputFile) -> list[int]:
    """Rows per row group of a Parquet file (the units a big file is split into)."""
    with _open(f) as fh:
        md = pq.ParquetFile(fh).metadata
        return [md.row_group(i).num_rows for i in range(md.num_row_groups)]


def read_batches(
    f: InputFile, schema: pa.Schema, row_groups: list[int] | None = None
) -> Iterator[pa.RecordBatch]:
    """The file's rows in file order, as batches with (a subset of) ``schema``'s columns."""
    with _open(f) as fh:
        if f.fmt == "parquet":
            pf = pq.ParquetFile(fh)
            names = [n for n in schema.names if n in pf.schema_arrow.names]
            yield from pf.iter_batches(batch_size=65536, row_groups=row_groups, columns=names)
        elif f.fmt == "csv":
            own = file_schema(f)
            want = pa.schema(
                [schema.field(n) if n in schema.names else own.field(n) for n in own.names]
            )
            yield from pcsv.open_csv(
                fh,
                read_options=pcsv.ReadOptions(block_size=BLOCK),
                convert_options=_csv_convert(want),
            )
        else:
            yield from pjson.open_json(
                fh,
                read_options=pjson.ReadOptions(block_size=BLOCK),
                parse_options=_json_parse(schema),
            )


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
