"""What the writer's staged parts and directory outputs share: how rows are encoded in a
part (Parquet row groups and encodings, CSV batches), the Arrow schema a sink writes, and
how the tasks count the part files they wrote."""

from __future__ import annotations

import pyarrow as pa

from evtime.io.reader import Layout

FILES = "\0files:"  # counts of part files per sink travel with the row counts
ROW_GROUP = 1 << 20  # rows per row group of a Parquet output (parts are smaller)
CSV_BATCH = 1 << 16  # a part's CSV text made at most CSV_BATCH rows at a time


def arrow_schema(sink, lay: Layout, spark_schema) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    carried = to_arrow_schema(spark_schema)
    if sink.raw:
        return pa.schema([carried.field(name) for name in sink.columns])
    fields = []
    for name in sink.columns:
        if name in sink.ns_columns:
            t = pa.timestamp("ns", "UTC") if sink.fmt == "parquet" else pa.string()
        elif (given := sink.input_name(name)) in lay.schema.names:
            t = lay.schema.field(given).type
            if sink.fmt != "parquet" and pa.types.is_timestamp(t):
                t = pa.string()
        elif name in sink.derived:
            d = sink.derived[name]
            t = d.arrow_type(carried.field(d.source).type)
        else:
            t = carried.field(name).type
        fields.append(pa.field(name, t))
    return pa.schema(fields)


def parquet_encodings(schema: pa.Schema) -> dict:
    """ParquetWriter options: timestamp columns delta-encoded (DELTA_BINARY_PACKED), the
    rest as pyarrow's default (dictionary, falling back to plain).  An output is in time
    order, so its times are nearly sorted: small deltas.  10M adjust rows: 72 MB written
    in 0.85 s, against 142 MB in 1.16 s with a dictionary tried first for every column.
    Only for flat schemas (``use_dictionary`` then names every other column as its leaf)."""
    times = [f.name for f in schema if pa.types.is_timestamp(f.type)]
    if not times or any(pa.types.is_nested(f.type) for f in schema):
        return {}
    return {
        "use_dictionary": [f.name for f in schema if f.name not in times],
        "column_encoding": dict.fromkeys(times, "DELTA_BINARY_PACKED"),
    }
