"""Reading a run's inputs: the command's input options (:class:`Inputs`), checked against
the input's columns before Spark starts, then Spark started and the input read (lazily)
by :func:`start`, which returns what it read and learnt (:class:`Read`, immutable) and
fills the run's context (``ses.run``).  Bad rows of
``--bad-rows discard`` are kept aside and written after the others (:func:`with_rejected`);
the counts of rows read come from the read itself where it could count them."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace

import click

from evtime import columns
from evtime.errors import UsageError
from evtime.runner.context import SHUFFLE_PARTITIONS, Session, shuffle_for
from evtime.runner.driver import driver_io, small_input
from evtime.runner.outputs import DISCARD_COLUMNS, check_outputs, check_staging


@dataclass(frozen=True)
class Inputs:
    """The command's input options (what to read and how)."""

    inputs: tuple[str, ...]
    time_col: str | None
    time_format: str | None
    tz: str | None
    input_format: str | None
    order_by: str | None
    keys: tuple[str, ...]
    bad_rows: str = "fail"
    # CSV columns read in the types their text reads as: all (bound, whose --agg computes
    # with them) but ``text`` (its --bound-marker column), or (None) only the keys and
    # --order-by: every other column passes through as the text it was
    text: tuple[str, ...] | None = None
    # other columns read as time (merge --arrival): CSV keeps their text, as the time's
    text_times: tuple[str, ...] = ()
    # the CSV columns read in their text's type also carry their text (bound --discards)
    keep_text: bool = False

    def but(self, **changes) -> Inputs:
        """These options with ``changes``."""
        return replace(self, **changes)


@dataclass(frozen=True)
class Read:
    """What :func:`start` read (the input frame, lazy; its layout and files; the Spark
    session) and learnt while reading; ``inp``: the options it read with."""

    spark: object
    df: object
    lay: object
    files: list
    inp: Inputs
    rejected: object = None  # --bad-rows discard: the bad rows (a DataFrame)
    # (good, bad) rows, when start() counted them (or the Parquet footers say)
    counted: tuple[int, int] | None = None
    # the least and the greatest input time (ns), when start() read the input itself (or
    # the Parquet footers say)
    time_range: tuple[int | None, int | None] | None = None
    # every row has the same _evt_chunk, when start() read the input itself (one file of at
    # most 2^20 rows): prefix scans need no carry between chunks
    one_chunk: bool = False
    # the rows as read (each Spark partition in arrival order) and, from the Parquet
    # footers, where the row groups start (an engine.scan.AsRead)
    as_read: object = None
    # what start()'s ``meanwhile`` found while Spark started, else None
    found_early: object = None
    # merge: each input file's source number (set by its setup)
    sources: tuple[int, ...] = ()
    opts: object = None  # the evtime.io.reader.ReadOptions it read with

    def but(self, **changes) -> Read:
        """This read with ``changes`` (a command's own steps after reading)."""
        return replace(self, **changes)

    # the options the steps after reading ask for, as read
    keys = property(lambda self: self.inp.keys)
    order_by = property(lambda self: self.inp.order_by)
    time_format = property(lambda self: self.inp.time_format)
    tz = property(lambda self: self.inp.tz)


def inputs_of(kw: dict) -> Inputs:
    return Inputs(
        *(
            kw.pop(k)
            for k in (
                "inputs",
                "time_col",
                "time_format",
                "tz",
                "input_format",
                "order_by",
                "keys",
                "bad_rows",
            )
        )
    )


def column_check(opt: str, col: str | None, names: list[str]) -> None:
    """A column named by the user (``opt COL``) must exist: the error lists the columns and
    a close match."""
    from evtime.io.reader import suggest

    if col is not None and col not in names:
        raise UsageError(
            f"{opt}: no column {col!r}; columns: {', '.join(names)}{suggest(col, names)}"
        )


def _pyspark_error_logs(verbose: bool) -> None:
    """PySpark logs every analysis error it raises as a JSON line on stderr; evtime reports
    the error itself in one line (the log only with -v)."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = not verbose


def start(inp: Inputs, ses: Session, check=None, before_spark=None, meanwhile=None) -> Read:
    """Spark session and the input DataFrame (lazy) as a :class:`Read`, checked against the
    columns it has; ``check(layout)`` runs before Spark starts (usage errors start no JVM).
    ``before_spark(files, lay) -> lay`` runs once the inputs are known, before Spark
    starts; with it, no inputs are allowed (it gives the layout).  ``meanwhile(files,
    lay, opts)`` runs in a thread while Spark starts, for inputs Spark reads (not read
    here); its result goes to ``found_early`` (None if it failed: the run then does
    that work itself, and reports what is wrong).  Fills ``ses.run``: the run's empty
    inputs, whether it reads and writes in this process, its CSV dialect, its progress line
    (the caller stops it however the run ends: ``ses.run.stop_progress``)."""
    from evtime.io import reader
    from evtime.io.sources import expand_inputs
    from evtime.session import SessionOptions, build_session

    typed = tuple(c for c in (*inp.keys, inp.order_by) if c)
    opts = reader.ReadOptions(
        inp.time_col,
        inp.time_format,
        inp.tz,
        inp.bad_rows,
        typed,
        inp.text is not None,
        inp.text or (),
        inp.text_times,
        inp.keep_text,
    )
    files, lay = [], None
    if inp.inputs or before_spark is None:
        files = expand_inputs(list(inp.inputs), inp.input_format)
        lay = reader.layout(files, opts)  # fails fast on a missing time column, before Spark
    run = ses.run
    run.empty = tuple(reader.empty_inputs(files))
    if before_spark is not None:
        lay = before_spark(files, lay)  # without inputs: the layout saved in the state
    for opt, col in [*(("--key", k) for k in inp.keys), ("--order-by", inp.order_by)]:
        column_check(opt, col, lay.schema.names)
    if check:
        check(lay)
    run.dialect = check_outputs(ses.call.params)
    sopts = SessionOptions.from_cli(
        ses.master, ses.remote, ses.conf, ses.verbose, ses.reuse_server, small_input(files)
    )
    check_staging(sopts, ses.staging, ses.call.params)
    run.in_driver = driver_io(files, sopts)
    if run.in_driver:
        from evtime.session import DRIVER_IO_CONF

        sopts.conf = {**DRIVER_IO_CONF, **sopts.conf}
    found = None
    if meanwhile is not None and files and not run.in_driver:
        found = in_background(meanwhile, files, lay, opts)
    spark = build_session(sopts)
    from evtime.engine.scan import AsRead, order_arrivals

    _pyspark_error_logs(ses.verbose)
    from evtime.progress import maybe_start

    remote = bool(ses.remote or ses.reuse_server)
    run.progress = maybe_start(spark, ses.call.label, ses.quiet, remote)
    rejected = counted = time_range = as_read = found_early = None
    one_chunk = False
    if files and run.in_driver:
        table = reader.read_here(files, opts, lay)
        bad = table.column(columns.BAD).null_count if columns.BAD in table.schema.names else None
        # counted here: good rows, bad rows (--bad-rows discard)
        counted = (table.num_rows, 0) if bad is None else (bad, table.num_rows - bad)
        import pyarrow.compute as pc

        least, most = pc.min_max(table.column(columns.T)).values()
        time_range = (least.as_py(), most.as_py())
        schema = reader.spark_schema(lay, opts)
        if inp.bad_rows == "discard":  # (set aside here: no Spark job to number them again)
            table, bad_rows = _set_aside_here(table, renumber=not inp.order_by)
            rejected = spark.createDataFrame(bad_rows, schema)
            schema = reader.spark_schema(lay)
        first, last = pc.min_max(table.column(columns.CHUNK)).values()
        one_chunk = first.as_py() == last.as_py()
        df = spark.createDataFrame(table, schema)
        # (no streamed scans: they start Python workers, and Spark may evaluate the
        # partition ids of local rows in this process, where they are all 0)
        how = "read in this process (a small local input)"
    elif files:
        from evtime.io import inputs

        df, lay, footing = inputs.read(spark, files, opts, lay)
        # counted and ranged by the Parquet footers, or as the rows were numbered
        counted = (footing.good, footing.bad)
        time_range = (footing.least, footing.greatest)
        as_read = AsRead(footing.groups or (), footing.times, footing.file_rows)
        found_early = found() if found else None
        how = footing.how
        if SHUFFLE_PARTITIONS not in sopts.conf:
            shuffle_for(spark, sum(counted))
    else:  # `--state DIR --flush` without input
        df = spark.createDataFrame([], reader.spark_schema(lay))
        how = ""
    if ses.verbose and how:
        click.echo(f"evtime: input {how}", err=True)
    if inp.bad_rows == "discard" and rejected is None:
        # bad rows have no time: they never reach the operator (Read.rejected, see
        # with_rejected); the others are numbered again so arrivals stay dense
        from pyspark.sql import functions as F

        rejected = df.where(F.col(columns.BAD).isNotNull())
        df = df.where(F.col(columns.BAD).isNull()).drop(columns.BAD)
        if not inp.order_by and (counted[1] if counted else rejected.limit(1).count()):
            df = order_arrivals(df, columns.SEQ)
            one_chunk = False  # (numbered again, per Spark partition)
            as_read = AsRead()  # (no longer the row groups' numbers)
    if inp.order_by:
        df = order_arrivals(df, inp.order_by)
        one_chunk = False
        as_read = AsRead()
    return Read(
        spark,
        df,
        lay,
        files,
        inp,
        rejected,
        counted,
        time_range,
        one_chunk,
        as_read,
        found_early,
        opts=opts,
    )


def _set_aside_here(table, renumber: bool):  # -> (good rows, bad rows): pa.Table
    """The rows read here without and with a reason to be set aside (``--bad-rows
    discard``); the good ones numbered again in arrival order when some were set aside
    and ``renumber`` (so arrivals stay dense, as ``order_arrivals`` numbers them in Spark),
    without the reason column."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    why = table.column(columns.BAD)
    bad = table.filter(pc.is_valid(why))
    good = table.filter(pc.is_null(why)).drop_columns([columns.BAD])
    if bad.num_rows and renumber:
        good = good.sort_by(columns.SEQ)  # (as order_arrivals: by the arrival as read)
        seq = np.arange(good.num_rows, dtype=np.int64)
        at = good.schema.get_field_index(columns.SEQ)
        good = good.set_column(at, columns.SEQ, pa.array(seq))
        at = good.schema.get_field_index(columns.CHUNK)
        good = good.set_column(at, columns.CHUNK, pa.array(seq >> columns.CHUNK_SHIFT))
    return good, bad


def arrival_limits(got: Read) -> tuple[int, int] | None:
    """The arrival numbers of the rows read (1 to the good rows), when they were counted as
    read: the ``limits`` of a sort by arrival (no aggregate job); else None."""
    from evtime.engine.scan import arrival_range

    return arrival_range(got.counted[0]) if got.counted else None


# rows a task reads and writes where the rows are read by the writing tasks (a 1M-row row
# group a task, as Parquet files are often written; many small row groups share a task)
TASK_ROWS = 1 << 20


def where_written(got: Read, df, step, verbose: bool, doing: str):  # -> DataFrame | TaskRows
    """``df`` as it is, unless ``step`` makes its rows from batches of the input as read
    (its ``from_read``: ``df`` is those rows): then the rows read instead by the tasks that
    write them (:class:`evtime.io.writer.TaskRows`): pyarrow reads each chunk (a Parquet row
    group) in a Spark task, runs of consecutive chunks of about :data:`TASK_ROWS` rows a
    task (at least two tasks, at most one per chunk and 256), and no row passes through
    the JVM; ``-v`` says so (``doing``: what the task does to them)."""
    prep = getattr(step, "from_read", None)
    if prep is None:
        return df
    from evtime.io.reader import ChunkReader
    from evtime.io.writer import TaskRows

    if verbose:
        click.echo(
            f"evtime: each row group read by pyarrow, {doing} and written by one Spark task",
            err=True,
        )
    read = ChunkReader.of(got.files, got.opts, got.lay)
    n = len(read)
    rows = sum(got.counted) if got.counted else n * TASK_ROWS
    tasks = max(1, min(n, 256, max(2, -(-rows // TASK_ROWS))))
    ids = got.spark.range(0, n, 1, numPartitions=tasks)
    return TaskRows(ids, read, df.schema, prep)


def from_footers(find):  # -> a start() meanwhile
    """A ``meanwhile`` for :func:`start`: ``find(footing, files)`` with the
    :class:`~evtime.io.reader.Footing` of local Parquet inputs, from their footers, whose
    times can be read here (else nothing is found)."""

    def meanwhile(files, lay, opts):
        from evtime.io.native import footing_here

        foot = footing_here(files, lay, opts)
        if foot is None or foot.times is None:
            return None
        return find(foot, files)

    return meanwhile


def in_background(fn, *args):  # -> Callable[[], object]
    """``fn(*args)`` started in a thread; the returned function waits for its result (None
    when it raised: the caller does that work itself, and reports what went wrong)."""
    import threading

    box: list = [None]

    def run() -> None:
        with contextlib.suppress(Exception):
            box[0] = fn(*args)

    thread = threading.Thread(target=run, name="evtime-meanwhile", daemon=True)
    thread.start()

    def result():
        thread.join()
        return box[0]

    return result


def with_rejected(df, got: Read, columns: dict | None = None, route="discard"):
    """``df`` followed by the bad rows of ``--bad-rows discard`` (in file order), routed to
    ``route`` with their reason in ``reason`` plus ``columns`` (name -> Column); columns
    they lack are null.  Written after ``df``'s rows, whatever its order."""
    if got.rejected is None:
        return df
    from pyspark.sql import functions as F

    from evtime.columns import BAD, FILE, PART, ROUTE, ROW, TEXT
    from evtime.engine.scan import AFTER_PARTS

    route_col = F.lit(route) if isinstance(route, str) else route
    bad = got.rejected.sort(FILE, ROW)
    # the row's own columns named like the discards' arrival, reason, bound: in df those
    # names are evtime's (the row's own go in a copy, or in their text): so in the bad rows
    copies = {c: f"_evt_own_{c}" for c in DISCARD_COLUMNS if f"_evt_own_{c}" in df.columns}
    theirs = [
        c
        for c in DISCARD_COLUMNS
        if c in bad.columns and (c in copies or f"{TEXT}{c}" in df.columns)
    ]
    if theirs:
        bad = bad.withColumns({copies[c]: F.col(c) for c in theirs if c in copies})
        bad = bad.drop(*theirs)
    bad = bad.withColumns({ROUTE: route_col, "reason": F.col(BAD), **(columns or {})})
    bad = bad.select(*[c for c in df.columns if c in bad.columns])
    types = dict(df.dtypes)
    missing = {c: F.lit(None).cast(types[c]) for c in df.columns if c not in bad.columns}
    if missing:  # (Spark Connect refuses withColumns({}): an AssertionError in its plan)
        bad = bad.withColumns(missing)
    if PART in df.columns:  # df is in numbered parts: the bad rows' parts come after them all
        bad = bad.withColumn(PART, F.lit(AFTER_PARTS) + F.spark_partition_id())
    return df.unionByName(bad.select(*df.columns))


def rejected_count(got: Read) -> int:
    if got.counted is not None:
        return got.counted[1]
    return 0 if got.rejected is None else got.rejected.count()


def count_read(df, got: Read | None = None) -> int:
    """Rows read, counted on the input itself (checkpointed: no second read of the files),
    so the summary's accounting is a real check of the operator; bad rows count."""
    if got is None:
        return df.count()
    return count_good(df, got) + rejected_count(got)


def count_good(df, got: Read) -> int:
    """Rows read that are not bad input (counted by start() when it read them itself)."""
    return got.counted[0] if got.counted is not None else df.count()
