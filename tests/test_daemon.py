"""The Python daemon of local runs (evtime.daemon): the workers import the installed
pyspark, not Spark's zip of it."""

from __future__ import annotations

import sys

import pyarrow as pa

from evtime.daemon import without_spark_zips

ZIPS = [
    "/spark/python/lib/pyspark.zip",
    "/spark/python/lib/py4j-0.10.9.9-src.zip",
    "/site-packages/pyspark/jars/spark-core_2.13-4.3.0.jar",
]


def test_sparks_zips_leave_the_path_when_pyspark_and_py4j_are_installed():
    path = [ZIPS[0], "", ZIPS[2], *sys.path, ZIPS[1]]
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


def test_python_workers_start_with_the_modules_evtime_tasks_import(spark):
    """The daemon imports them before it forks: a worker has them before its first task."""
    from evtime.daemon import PRELOAD

    def loaded(batches):
        names = [n for n in PRELOAD if n in sys.modules]
        for _ in batches:
            yield pa.RecordBatch.from_pydict({"names": [",".join(names)]})

    (row,) = spark.range(1, numPartitions=1).mapInArrow(loaded, "names string").collect()
    assert row.names.split(",") == list(PRELOAD)


def test_a_module_that_fails_to_import_is_left_to_its_task():
    from evtime.daemon import preload

    sys.modules.pop("colorsys", None)  # (one this process has not imported yet, now)
    preload(("evtime_no_such_module", "colorsys"))  # (no error)
    assert "colorsys" in sys.modules and "evtime_no_such_module" not in sys.modules


def test_python_workers_hold_no_finder_of_spark_zips(spark):
    """Each worker's first task invalidates the import caches: a zip importer still cached
    for Spark's zips would read its zip's directory again there (0.1 s per worker)."""
    from evtime.daemon import _spark_zip

    def cached(batches):
        zips = [k for k in sys.path_importer_cache if _spark_zip(k)]
        for _ in batches:
            yield pa.RecordBatch.from_pydict({"zips": [",".join(zips)]})

    (row,) = spark.range(1, numPartitions=1).mapInArrow(cached, "zips string").collect()
    assert row.zips == ""


def test_forget_finders_drops_only_the_entries_gone(monkeypatch):
    from evtime.daemon import forget_finders

    cache = {"/a/pyspark.zip": object(), "/b": object()}
    monkeypatch.setattr(sys, "path_importer_cache", dict(cache))
    forget_finders({"/a/pyspark.zip", "/not/cached"})
    assert list(sys.path_importer_cache) == ["/b"]


def test_python_workers_start_with_the_daemons_objects_frozen(spark):
    """(out of the garbage collector's sight: a worker collects after every task)"""

    def frozen(batches):
        import gc

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"n": [gc.get_freeze_count()]})

    (row,) = spark.range(1, numPartitions=1).mapInArrow(frozen, "n long").collect()
    assert row.n > 10_000  # (pyspark, pyarrow, pandas and evtime's modules: ~78,000)
