"""The Python daemon of local runs (evtime.daemon): the workers import the installed
pyspark, not Spark's zip of it."""

from __future__ import annotations

import sys

import pyarrow as pa

from evtime.daemon import without_spark_zips

ZIPS = ["/spark/python/lib/pyspark.zip", "/spark/python/lib/py4j-0.10.9.9-src.zip"]


def test_sparks_zips_leave_the_path_when_pyspark_and_py4j_are_installed():
    path = [ZIPS[0], "", *sys.path, ZIPS[1]]
    assert without_spark_zips(path) == ["", *sys.path]


def test_sparks_zips_stay_last_when_pyspark_is_only_there(tmp_path):
    """(a Spark distribution without pyspark installed: its zips are the only copy)"""
    assert without_spark_zips([*ZIPS, str(tmp_path)]) == [str(tmp_path), *ZIPS]
    other = "/elsewhere/pyspark-helpers.zip"  # (not Spark's: left where it is)
    assert without_spark_zips([ZIPS[1], other, str(tmp_path)]) == [other, str(tmp_path), ZIPS[1]]


def test_python_workers_import_the_installed_pyspark(spark):
    import pyspark

    def where(batches):
        import pyspark as imported

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"file": [imported.__file__]})

    (row,) = spark.range(1, numPartitions=1).mapInArrow(where, "file string").collect()
    assert row.file == pyspark.__file__  # (from Spark's zip: .../pyspark.zip/pyspark/...)
