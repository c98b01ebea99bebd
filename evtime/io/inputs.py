"""The rows of the inputs as a Spark DataFrame: the one place that chooses which reader
reads them (Spark's own Parquet reader, or pyarrow in Spark tasks)."""

from __future__ import annotations

from evtime.io import native, reader
from evtime.io.reader import Layout, ReadOptions
from evtime.io.sources import InputFile


def read(
    spark, files: list[InputFile], opts: ReadOptions, lay: Layout | None = None
):  # -> (DataFrame, Layout, Footing)
    """The rows of ``files`` as a DataFrame with arrival and ns-time columns, and their
    :class:`~evtime.io.reader.Footing`; ``lay`` is the :func:`~evtime.io.reader.layout`
    when the caller already has it.  Parquet inputs that Spark's own reader gives exactly
    are read by it (:func:`~evtime.io.native.read_native`, the footing from their footers),
    the others by pyarrow in tasks (:func:`~evtime.io.reader.read_tasks`)."""
    lay = lay or reader.layout(files, opts)
    spark_read = native.read_native(spark, files, opts, lay)
    if spark_read is not None:
        return spark_read[0], lay, spark_read[1]
    df, footing = reader.read_tasks(spark, files, opts, lay)
    return df, lay, footing
