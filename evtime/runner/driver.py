"""Where a run's rows are read and written: in this process (small local inputs on a local
Spark: :func:`driver_io`; results of :func:`few_rows`) or by Spark's tasks.  The limits
come from EVTIME_DRIVER_IO_MAX and EVTIME_DRIVER_ROWS_MAX (0 = never); a run that reads in
this process (``RunContext.in_driver``) makes any result here."""

from __future__ import annotations

from evtime.errors import UsageError
from evtime.runner.context import RunContext

# a result of at most this many rows may be written from this process (publish_jobs)
DRIVER_ROWS_MAX = 100_000


def _local_bytes(files) -> int | None:
    """Total size of the inputs when all are local files (None: a URL, size unknown)."""
    import os

    total = 0
    for f in files:
        if "://" in f.url:
            return None
        try:
            total += os.path.getsize(f.url)
        except OSError:
            return None
    return total


def small_input(files) -> bool:
    """Whether the input is local files of SMALL_INPUT bytes at most (remote URLs: unknown,
    so not small)."""
    from evtime.session import SMALL_INPUT

    size = _local_bytes(files)
    return size is not None and size <= SMALL_INPUT


def driver_io(files, sopts) -> bool:
    """Whether this run reads its input and writes its outputs in this process, Spark
    getting and giving the rows as Arrow tables: local inputs of at most DRIVER_IO_MAX bytes
    (EVTIME_DRIVER_IO_MAX, 0 = never) on a local Spark.  A tiny input then costs no Python
    worker and no checkpoint job; the operator itself runs in Spark as always (but explain
    adjust's: its rows handed over by Spark, numbered and explained here in Arrow, see
    evtime.engine.adjust.parts.all_here)."""
    from evtime.session import DRIVER_IO_MAX

    limit = _env_limit("EVTIME_DRIVER_IO_MAX", DRIVER_IO_MAX, "bytes")
    size = _local_bytes(files)
    return bool(files) and sopts.local_driver and size is not None and size <= limit


def few_rows(run: RunContext, n: int) -> bool:
    """Whether a result of ``n`` rows is made or written in this process (no Python worker
    to start): at most DRIVER_ROWS_MAX (EVTIME_DRIVER_ROWS_MAX, 0 = never), or any result
    of a run that reads in this process."""
    most = _rows_here_max(run)
    return most is None or n <= most


def rows_here(run: RunContext, df):  # -> pyarrow.Table | None
    """All of ``df`` fetched into this process when it has :func:`few_rows` (one job: at
    most one row more than that is fetched), else None."""
    most = _rows_here_max(run)
    if most is None:
        return df.toArrow()
    if most <= 0:
        return None
    got = df.limit(most + 1).toArrow()
    return got if got.num_rows <= most else None


def _rows_here_max(run: RunContext) -> int | None:
    """The most rows of a result made here (None: any, for a run that reads here)."""
    return None if run.in_driver else _env_limit("EVTIME_DRIVER_ROWS_MAX", DRIVER_ROWS_MAX, "rows")


def _env_limit(name: str, default: int, unit: str) -> int:
    """A number from the environment variable ``name`` (``default`` when unset)."""
    import os

    try:
        return int(os.environ.get(name, default))
    except ValueError:
        raise UsageError(f"{name} takes a number of {unit}") from None
