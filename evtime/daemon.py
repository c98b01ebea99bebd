"""Spark's Python daemon (``pyspark.daemon``, which forks the Python workers), started
with pyspark and py4j imported from where they are installed, not from Spark's
``pyspark.zip`` and ``py4j-*-src.zip``.

Spark puts those zips first on the daemon's path (and its core jar, also a zip).  Python
keeps no compiled code for a module imported from a zip: the daemon and the workers it
forks compiled every pyspark module they import from source again, on every run, before
the first Python task could start.  The installed copies are the same pyspark (Spark found its
home there) and have their compiled code beside them.  A pyspark that is only in the zip
is still imported from it.

Set for local mode (``spark.python.daemon.module`` in :data:`evtime.session.LOCAL_CONF`),
where this machine's Python, the one evtime runs in, starts the workers."""

from __future__ import annotations

import gc
import os
import sys
from importlib.machinery import PathFinder


def without_spark_zips(path: list[str]) -> list[str]:
    """``path`` without Spark's zips of pyspark and py4j when both are found elsewhere on
    it, else with the zips moved behind every other entry."""
    zips = [p for p in path if _spark_zip(p)]
    rest = [p for p in path if p not in zips]
    elsewhere = all(PathFinder.find_spec(m, rest) is not None for m in ("pyspark", "py4j"))
    return rest if elsewhere else rest + zips


def _spark_zip(entry: str) -> bool:
    """Whether ``entry`` is one of the archives Spark puts on its workers' path for pyspark:
    its ``pyspark.zip`` and ``py4j-*-src.zip``, and its core jar (``spark-core_*.jar``,
    which may hold pyspark in some builds; pip's pyspark has no Python file in it, but as
    a zip on the path before the standard library, every import looked into it)."""
    name = os.path.basename(entry)
    return (
        name == "pyspark.zip"
        or (name.startswith("py4j-") and name.endswith("-src.zip"))
        or (name.startswith("spark-core_") and name.endswith(".jar"))
    )


# What every evtime task in Python imports, imported once here, before the daemon forks
# its workers: each worker then starts with them (pyarrow's compute functions import
# pandas, about 0.2 s; evtime's writer and scan, with pyspark.sql, about 0.3 s more).
PRELOAD = ("pandas", "pyarrow.compute", "pyarrow.ipc", "evtime.io.writer", "evtime.engine.scan")


def preload(names: tuple[str, ...] = PRELOAD) -> None:
    """Import ``names``; one that fails to import is left to the task that needs it (which
    then reports the error where it belongs)."""
    import contextlib
    import importlib

    for name in names:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def forget_finders(gone: set[str]) -> None:
    """Drop the cached finders of path entries no longer on the path (``gone``).  Python
    made a zip importer for each of Spark's zips while it looked for this module; each
    worker's first task calls ``importlib.invalidate_caches()`` (pyspark adds the Spark
    files' directory to its path), which makes every cached zip importer read its zip's
    directory again."""
    for entry in gone:
        sys.path_importer_cache.pop(entry, None)


if __name__ == "__main__":
    before = list(sys.path)
    sys.path[:] = without_spark_zips(sys.path)
    forget_finders(set(before) - set(sys.path))
    from pyspark import daemon

    preload()
    # what the daemon holds now lives as long as every worker it forks: out of the garbage
    # collector's sight (a worker collects after each task, 20-50 ms each that touched
    # every inherited object, copying its pages; 0.6 s of an adjust's workers at 10M)
    gc.freeze()
    daemon.manager()
