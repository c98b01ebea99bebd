"""The steps every command shares: start Spark, read the inputs, write sinks, summarise."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from evtime.errors import UsageError

if TYPE_CHECKING:
    from evtime.engine.scan import KeptInPart

_progress = None  # the progress line of this run, if one is shown
_in_driver = False  # this run reads and writes in its own process (driver_io)
_empty: list[str] = []  # the inputs of this run that are empty (no rows, no columns)
# a result of at most this many rows may be written from this process (publish_jobs)
DRIVER_ROWS_MAX = 100_000


SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# rows a shuffle partition is given at most: with a 1 GiB heap, a task of explain adjust
# that sorted 6.25M rows (50M rows in 8 partitions) spilled 470-839 MB to disk
ROWS_PER_TASK = 2_000_000


def shuffle_for(spark, rows: int) -> None:
    """More shuffle partitions than the session's when ``rows`` would give a partition
    more than :data:`ROWS_PER_TASK` (a session setting: it holds for every later shuffle;
    adaptive execution still merges small partitions)."""
    want = -(-rows // ROWS_PER_TASK)
    if want > int(spark.conf.get(SHUFFLE_PARTITIONS)):
        spark.conf.set(SHUFFLE_PARTITIONS, str(want))


def stop_progress() -> None:
    global _progress
    if _progress is not None:
        _progress.stop()
        _progress = None


@dataclass
class Inputs:
    inputs: tuple[str, ...]
    time_col: str | None
    time_format: str | None
    tz: str | None
    input_format: str | None
    order_by: str | None
    keys: tuple[str, ...]
    bad_rows: str = "fail"
    rejected: object = None  # --bad-rows discard: the bad rows (a DataFrame), set by start()
    # (good, bad) rows, when start() counted them (or the Parquet footers say)
    counted: tuple[int, int] | None = None
    # the least and the greatest input time (ns), when start() read the input itself (or
    # the Parquet footers say)
    time_range: tuple[int | None, int | None] | None = None
    # every row has the same _evt_chunk, when start() read the input itself (one file of at
    # most 2^20 rows): prefix scans need no carry between chunks
    one_chunk: bool = False
    # the rows as read (each Spark partition in arrival order) and, from the Parquet
    # footers, where the row groups start (an engine.scan.AsRead, set by start())
    as_read: object = None
    # merge: each input file's source number (set by its setup)
    sources: tuple[int, ...] = ()
    # what start()'s ``meanwhile`` found while Spark started, else None (set by start())
    found_early: object = None
    # CSV columns read in the types their text reads as: all (bound, whose --agg computes
    # with them) but ``text`` (its --bound-marker column), or (None) only the keys and
    # --order-by: every other column passes through as the text it was
    text: tuple[str, ...] | None = None
    # other columns read as time (merge --arrival): CSV keeps their text, as the time's
    text_times: tuple[str, ...] = ()
    # the CSV columns read in their text's type also carry their text (bound --discards)
    keep_text: bool = False


@dataclass
class Session:
    master: str | None
    remote: str | None
    conf: tuple[str, ...]
    verbose: bool
    quiet: bool
    reuse_server: bool = False
    staging: str | None = None


def session_of(kw: dict) -> Session:
    """The command's Spark options, with those given before the command (``evtime
    --reuse-server adjust ...``) where the command has none (--conf: both, its own last)."""
    keys = ("master", "remote", "conf", "verbose", "quiet", "reuse_server", "staging")
    ses = Session(*(kw.pop(k, None) for k in keys))
    ctx = click.get_current_context(silent=True)
    top = (ctx.find_root().obj if ctx else None) or {}
    ses.master = ses.master or top.get("master")
    ses.remote = ses.remote or top.get("remote")
    ses.conf = (*top.get("conf", ()), *ses.conf)
    ses.reuse_server = bool(ses.reuse_server or top.get("reuse_server"))
    return ses


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


# the options that name a file a run writes (checked together before Spark starts)
OUTPUT_OPTIONS = (("-o", "output"), ("--discards", "discards"), ("--plot", "plot"))


@dataclass(frozen=True)
class Dialect:
    """The text of the run's CSV outputs (--delimiter / --tsv / --no-header)."""

    delimiter: str = ","
    header: bool = True


def _params() -> dict:
    ctx = click.get_current_context(silent=True)
    return ctx.params if ctx else {}


def dialect_given(params: dict | None = None) -> bool:
    """Whether the command was given --delimiter, --tsv or --no-header."""
    p = _params() if params is None else params
    return bool(p.get("delimiter") is not None or p.get("tsv") or p.get("no_header"))


def output_formats(params: dict) -> list[tuple[str, str, str]]:
    """(option, path, format) of the run's -o and --discards (explain's table on a
    terminal: CSV when a CSV option is given, see :func:`evtime.cli.explain.explain_format`)."""
    from evtime.io.writer import output_format

    out = params.get("output")
    forced = params.get("fmt") or params.get("output_format")
    if "fmt" in params and not forced and out in (None, "-"):
        forced = "csv"  # (explain, sweep: a table on a terminal, but for these options)
    found = []
    if out:
        found.append(("-o", out, output_format(out, forced)))
    if params.get("discards"):
        found.append(("--discards", params["discards"], output_format(params["discards"], None)))
    return found


def dialect(params: dict | None = None) -> Dialect:
    """The run's CSV dialect from its options, checked (a usage error, exit 2): one ASCII
    character (``\\t``: a tab) that is not a quote or a line break; not both --tsv and
    --delimiter; only where an output of the run is CSV (not with an explicit --format
    table)."""
    p = _params() if params is None else params
    if not dialect_given(p):
        return Dialect()
    given = [o for o, k in (("--delimiter", "delimiter"), ("--tsv", "tsv")) if p.get(k)]
    if p.get("delimiter") is not None and p.get("tsv"):
        raise UsageError("--tsv is --delimiter '\\t': give one of them")
    delim = "\t" if p.get("tsv") else p.get("delimiter")
    if delim is None:
        delim = ","
    if delim == "\\t":
        delim = "\t"
    if len(delim) != 1 or not delim.isascii() or delim in '"\r\n':
        raise UsageError(
            f"--delimiter {delim!r}: give one ASCII character other than a quote or a line "
            "break, e.g. ';' or '|' (\\t, or --tsv, for a tab)"
        )
    opts = " / ".join([*given, *(["--no-header"] if p.get("no_header") else [])])
    formats = output_formats(p)
    if any(f == "table" for _, _, f in formats):
        raise UsageError(f"{opts}: for CSV outputs; --format table is a table for reading")
    if formats and not any(f == "csv" for _, _, f in formats):
        names = {"parquet": "Parquet", "jsonl": "JSON Lines"}
        shown = ", ".join(f"{o} {path} is {names.get(f, f)}" for o, path, f in formats)
        raise UsageError(f"{opts}: for CSV outputs, and this run writes none ({shown})")
    return Dialect(delim, not p.get("no_header"))


def with_dialect(sinks) -> None:
    """The run's CSV dialect given to its CSV outputs (evtime's own state files are
    Parquet): the one place the CSV options reach the sinks."""
    if not dialect_given():
        return
    d = dialect()
    for s in sinks:
        if s.fmt == "csv" and not s.raw:
            s.delimiter, s.header = d.delimiter, d.header


def _check_outputs() -> None:
    """The command's -o, --discards and --plot refused before Spark starts when two name
    the same file (a usage error), when one cannot be created (its directory missing or
    not writable), or (-o, --discards) when they exist (without --overwrite); the writer
    checks them again before it writes.  With --state, existing ones are checked once the
    state is read: a rerun of its last committed run writes nothing, whatever is there."""
    ctx = click.get_current_context(silent=True)
    params = ctx.params if ctx else {}
    from evtime.io.writer import check_creatable, check_distinct, check_path

    named = [(opt, params.get(key)) for opt, key in OUTPUT_OPTIONS if params.get(key)]
    from evtime.io import directory

    directory.declare(params)  # (--output-layout parts: -o is a directory)
    dialect(params)  # (a usage error: exit 2)
    check_distinct(named)  # (a usage error: exit 2)
    for opt, path in named:  # every output can be created: before the first Spark job
        check_creatable(path, opt)
    if params.get("state"):
        return

    for key in ("output", "discards"):
        check_path(params.get(key), bool(params.get("overwrite")))


def _check_staging(sopts, given: str | None = None) -> None:
    """Before Spark starts: where the tasks and this process leave each other files
    (evtime.io.staging.configure): ``given`` (--staging) or EVTIME_STAGING, else, with
    tasks on other machines, a prefix beside an object-store output; a staging URL is
    tried once.  Without any, on a cluster, one line that says what to set."""
    from evtime.io.staging import configure

    ctx = click.get_current_context(silent=True)
    params = ctx.params if ctx else {}
    outputs = [params.get(key) for key in ("output", "discards")]
    configure(given, sopts.elsewhere(), outputs)


def start(inp: Inputs, ses: Session, check=None, before_spark=None, meanwhile=None):
    """Spark session and the input DataFrame (lazy), checked against the columns it has;
    ``check(layout)`` runs before Spark starts (usage errors start no JVM).
    ``before_spark(files, lay) -> lay`` runs once the inputs are known, before Spark
    starts; with it, no inputs are allowed (it gives the layout).  ``meanwhile(files,
    lay, opts)`` runs in a thread while Spark starts, for inputs Spark reads (not read
    here); its result goes to ``inp.found_early`` (None if it failed: the run then does
    that work itself, and reports what is wrong)."""
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
    global _empty
    _empty = reader.empty_inputs(files)
    if before_spark is not None:
        lay = before_spark(files, lay)  # without inputs: the layout saved in the state
    for opt, col in [*(("--key", k) for k in inp.keys), ("--order-by", inp.order_by)]:
        column_check(opt, col, lay.schema.names)
    if check:
        check(lay)
    _check_outputs()
    sopts = SessionOptions.from_cli(
        ses.master, ses.remote, ses.conf, ses.verbose, ses.reuse_server, small_input(files)
    )
    _check_staging(sopts, ses.staging)
    global _in_driver
    _in_driver = driver_io(files, sopts)
    if _in_driver:
        from evtime.session import DRIVER_IO_CONF

        sopts.conf = {**DRIVER_IO_CONF, **sopts.conf}
    found = None
    if meanwhile is not None and files and not _in_driver:
        found = _in_background(meanwhile, files, lay, opts)
    spark = build_session(sopts)
    from evtime.engine.scan import AsRead, order_arrivals

    _pyspark_error_logs(ses.verbose)
    global _progress
    from evtime.progress import maybe_start

    label = "evtime " + (
        click.get_current_context().command_path.split(" ", 1)[-1]
        if click.get_current_context(silent=True)
        else ""
    )
    _progress = maybe_start(spark, label, ses.quiet, bool(ses.remote or ses.reuse_server))
    if files and _in_driver:
        table = reader.read_here(files, opts, lay)
        bad = table.column(reader.BAD).null_count if reader.BAD in table.schema.names else None
        # counted here: good rows, bad rows (--bad-rows discard)
        inp.counted = (table.num_rows, 0) if bad is None else (bad, table.num_rows - bad)
        import pyarrow.compute as pc

        least, most = pc.min_max(table.column(reader.T)).values()
        inp.time_range = (least.as_py(), most.as_py())
        first, last = pc.min_max(table.column(reader.CHUNK)).values()
        inp.one_chunk = first.as_py() == last.as_py()
        df = spark.createDataFrame(table, reader.spark_schema(lay, opts))
        # (no streamed scans: they start Python workers, and Spark may evaluate the
        # partition ids of local rows in this process, where they are all 0)
        inp.as_read = None
        how = "read in this process (a small local input)"
    elif files:
        from evtime.io import inputs

        df, lay, footing = inputs.read(spark, files, opts, lay)
        # counted and ranged by the Parquet footers, or as the rows were numbered
        inp.counted = (footing.good, footing.bad)
        inp.time_range = (footing.least, footing.greatest)
        inp.as_read = AsRead(footing.groups or (), footing.times, footing.file_rows)
        inp.found_early = found() if found else None
        how = footing.how
        if SHUFFLE_PARTITIONS not in sopts.conf:
            shuffle_for(spark, sum(inp.counted))
    else:  # `--state DIR --flush` without input
        df = spark.createDataFrame([], reader.spark_schema(lay))
        how = ""
    if ses.verbose and how:
        click.echo(f"evtime: input {how}", err=True)
    if inp.bad_rows == "discard":
        # bad rows have no time: they never reach the operator (inp.rejected, see
        # with_rejected); the others are numbered again so arrivals stay dense
        from pyspark.sql import functions as F

        inp.rejected = df.where(F.col(reader.BAD).isNotNull())
        df = df.where(F.col(reader.BAD).isNull()).drop(reader.BAD)
        if not inp.order_by and (inp.counted[1] if inp.counted else inp.rejected.limit(1).count()):
            df = order_arrivals(df, reader.SEQ)
            inp.one_chunk = False  # (numbered again, per Spark partition)
            inp.as_read = AsRead()  # (no longer the row groups' numbers)
    if inp.order_by:
        df = order_arrivals(df, inp.order_by)
        inp.one_chunk = False
        inp.as_read = AsRead()
    return spark, df, lay, files


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


def _in_background(fn, *args):  # -> Callable[[], object]
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


def with_rejected(df, inp: Inputs, columns: dict | None = None, route="discard"):
    """``df`` followed by the bad rows of ``--bad-rows discard`` (in file order), routed to
    ``route`` with their reason in ``reason`` plus ``columns`` (name -> Column); columns
    they lack are null.  Written after ``df``'s rows, whatever its order."""
    if inp.rejected is None:
        return df
    from pyspark.sql import functions as F

    from evtime.engine.scan import AFTER_PARTS
    from evtime.io.reader import BAD, FILE, PART, ROW, TEXT
    from evtime.io.writer import ROUTE

    route_col = F.lit(route) if isinstance(route, str) else route
    bad = inp.rejected.sort(FILE, ROW)
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


def rejected_count(inp: Inputs) -> int:
    if inp.counted is not None:
        return inp.counted[1]
    return 0 if inp.rejected is None else inp.rejected.count()


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


def in_driver() -> bool:
    """Whether this run reads and writes in its own process (see :func:`driver_io`)."""
    return _in_driver


def driver_io(files, sopts) -> bool:
    """Whether this run reads its input and writes its outputs in this process, Spark
    getting and giving the rows as Arrow tables: local inputs of at most DRIVER_IO_MAX bytes
    (EVTIME_DRIVER_IO_MAX, 0 = never) on a local Spark.  A tiny input then costs no Python
    worker and no checkpoint job; the operator itself runs in Spark as always."""
    from evtime.session import DRIVER_IO_MAX

    limit = _env_limit("EVTIME_DRIVER_IO_MAX", DRIVER_IO_MAX, "bytes")
    size = _local_bytes(files)
    return bool(files) and sopts.local_driver and size is not None and size <= limit


def few_rows(n: int) -> bool:
    """Whether a result of ``n`` rows is made or written in this process (no Python worker
    to start): at most DRIVER_ROWS_MAX (EVTIME_DRIVER_ROWS_MAX, 0 = never), or any result
    of a run that reads in this process."""
    most = _rows_here_max()
    return most is None or n <= most


def rows_here(df):  # -> pyarrow.Table | None
    """All of ``df`` fetched into this process when it has :func:`few_rows` (one job: at
    most one row more than that is fetched), else None."""
    most = _rows_here_max()
    if most is None:
        return df.toArrow()
    if most <= 0:
        return None
    got = df.limit(most + 1).toArrow()
    return got if got.num_rows <= most else None


def _rows_here_max() -> int | None:
    """The most rows of a result made here (None: any, for a run that reads here)."""
    return None if _in_driver else _env_limit("EVTIME_DRIVER_ROWS_MAX", DRIVER_ROWS_MAX, "rows")


def _env_limit(name: str, default: int, unit: str) -> int:
    """A number from the environment variable ``name`` (``default`` when unset)."""
    import os

    try:
        return int(os.environ.get(name, default))
    except ValueError:
        raise UsageError(f"{name} takes a number of {unit}") from None


def added_name(opt: str, name: str) -> None:
    """Refuse an empty name for a column evtime adds (``--as ''``)."""
    if not name.strip():
        raise UsageError(f"{opt} needs a column name, not {name!r}")


# the columns --discards adds after the row's own
DISCARD_COLUMNS = ("arrival", "reason", "bound")


def keep_own(df, own: list[str]):
    """``df`` with a copy of each of the row's own columns that ``--discards`` adds a
    column of the same name for (made before the operator adds its own), and {column:
    copy} (see :func:`discards_sink`)."""
    copies = {c: f"_evt_own_{c}" for c in DISCARD_COLUMNS if c in own}
    if copies:
        from pyspark.sql import functions as F

        df = df.withColumns({k: F.col(c) for c, k in copies.items()})
    return df, copies


def discards_sink(
    path: str,
    overwrite: bool,
    own: list[str],
    extra: tuple[str, ...] = (),
    ns: tuple[str, ...] = (),
    routes: tuple[str, ...] = ("discard",),
    copies: dict[str, str] | None = None,
    command: str = "",
    texts: tuple[str, ...] = (),
):
    """The ``--discards`` sink: the row's own columns (plus ``extra``), then its arrival
    number, the reason and the bound it missed.  A row's own column named like one of these
    is written as ``row_<name>`` (as explain does), from its copy in ``copies`` (see
    :func:`keep_own`).  The columns in ``texts`` are written from their text as read
    (:attr:`evtime.io.reader.Layout.texts`), the others restored to their input type."""
    from evtime.engine.present import renamed
    from evtime.io.reader import TEXT
    from evtime.io.writer import Derived, Sink, output_format

    copies = copies or {}
    for name in extra:
        if name in DISCARD_COLUMNS:
            raise UsageError(
                f"--discards adds a column {name!r} after the row's own: name the added "
                f"column {name!r} otherwise (--as / --source-as NAME)"
            )
    clash = [c for c in DISCARD_COLUMNS if c in own and c not in copies and c not in texts]
    if clash:  # (no copy: the operator's own column replaced the row's)
        raise UsageError(f"--discards adds columns {', '.join(clash)} that the input has")
    shown = renamed(list(own), {*DISCARD_COLUMNS, *extra})
    note_renamed(f"{command} --discards".strip(), shown)
    return Sink(
        "discards",
        routes,
        path,
        output_format(path, None),
        [*(s for _, s in shown), *extra, *DISCARD_COLUMNS],
        [*ns, "bound"],
        overwrite,
        derived={
            **{s: Derived(copies[c]) for c, s in shown if c != s and c not in texts},
            **{s: Derived(TEXT + c) for c, s in shown if c in texts},
        },
        own={s: c for c, s in shown if c not in texts},
    )


@dataclass(frozen=True)
class Routed:
    """A part step (:class:`evtime.engine.scan.KeptInPart`) whose rows then get their
    route from the step's flag: ``route(batch) -> array``, reading ``reads`` too."""

    step: KeptInPart
    route: Callable
    reads: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.step.columns, *self.reads)

    def __call__(self, part):
        from evtime.io.writer import ROUTE

        for b in self.step(part):
            route = self.route(b)
            b = b.drop_columns([c for c in (ROUTE, self.step.out) if c in b.schema.names])
            yield b.append_column(ROUTE, route)


def write_and_publish(df, sinks, lay, step=None, schema=None) -> dict[str, int]:
    """``step``: run on each of ``df``'s sorted parts (not the bad rows after them) before
    it is written (an :class:`evtime.io.writer.PartStep`, such as :class:`Routed`);
    ``schema``: the Spark schema of the rows it yields, when it makes columns ``df`` lacks."""
    return publish_jobs([(df, sinks, lay)], step=step, schema=schema)


def publish_jobs(
    jobs, in_driver: Sequence[bool] | None = None, step=None, schema=None
) -> dict[str, int]:
    """Write every ``(frame, sinks, layout)`` (one Spark job each), then publish them all:
    no sink is published unless every one was written.  Rows seen per route, summed.
    ``in_driver``: per job, whether its rows come to this process to be written (default:
    as the run reads, :func:`in_driver`; see also :func:`few_rows`); ``step``, ``schema``:
    see :func:`write_and_publish`."""
    from evtime.io import writer
    from evtime.io.staging import shared_dir

    for _, sinks, _ in jobs:
        with_dialect(sinks)
        for s in sinks:
            writer.check_sink(s)
    with shared_dir() as staging:
        staged: dict[str, str] = {}  # sink name -> its output, assembled as its job ran
        try:
            counts = _write_jobs(jobs, staging, in_driver, step, schema, staged)
            _before_stdout(jobs)
            for frame, sinks, lay in jobs:
                for s in sinks:
                    if s.name in staged:
                        writer.commit(s, staged[s.name])
                    else:
                        writer.publish(s, staging, lay, schema or frame.schema)
        finally:
            from evtime.io import directory

            for _, sinks, _ in jobs:  # (a directory output's parts, left by a failure)
                directory.abandon(sinks)
            for tmp in staged.values():
                if os.path.exists(tmp):
                    os.unlink(tmp)
    return counts


def _write_jobs(
    jobs,
    staging: str,
    in_driver: Sequence[bool] | None = None,
    step=None,
    schema=None,
    staged: dict[str, str] | None = None,
) -> dict[str, int]:
    """Write every ``(frame, sinks, layout)`` under ``staging``: rows seen per route, summed.
    ``in_driver``, ``step``, ``schema``: see :func:`publish_jobs`.  A step with ``ranges``
    (its parts in runs, one per Spark partition, in order) has its one job's file sinks
    assembled while the job runs (:class:`evtime.io.writer.Early`), into the files that
    ``staged`` then names."""
    from evtime.engine.scan import AFTER_PARTS
    from evtime.io import directory, writer

    counts: dict[str, int] = {}
    in_driver = in_driver or [_in_driver] * len(jobs)
    ranges = getattr(step, "ranges", None)
    for (frame, sinks, lay), here in zip(jobs, in_driver, strict=True):
        early = None
        directory.attach(sinks, lay, schema or frame.schema)  # (-o DIR/: parts written there)
        files = all(not s.to_stdout and s.fmt != "table" and not s.directory for s in sinks)
        files = files and not any(writer.server_side(s, staging) for s in sinks)
        if ranges is not None and not here and len(jobs) == 1 and staged is not None and files:
            early = writer.Early(sinks, staging, lay, schema or frame.schema, ranges)
        try:
            # (the step skips the bad rows' parts, numbered from AFTER_PARTS on)
            seen = writer.write(
                frame, sinks, lay, staging, here, step, AFTER_PARTS, ranges if early else None
            )
            taken = early.finish() if early else {}
        except BaseException:
            if early:
                early.abandon()
            raise
        if early:
            staged.update(early.tmp)
            writer.add_counts(seen, early.seen)
        elif ranges is not None:  # (parts this process makes: after the job, in order)
            for i in range(ranges.n):
                writer.add_counts(seen, writer.made_part(ranges, i, sinks, lay, staging))
        writer.check_parts(seen, sinks, staging, taken)
        writer.add_counts(counts, seen)
    return counts


def _before_stdout(jobs) -> None:
    """The progress line off the terminal before data goes to standard output (which is
    often the same terminal): the data's first line must not start after it."""
    if any(s.to_stdout for _, sinks, _ in jobs for s in sinks):
        stop_progress()


class NothingToDo(Exception):
    """The run has nothing to do (a rerun of the last run committed to --state)."""


@dataclass
class Stateful:
    """``--state DIR`` for one run: the locked directory and the committed state."""

    sd: object  # evtime.io.state.StateDir
    st: object  # evtime.io.state.State
    flush: bool
    earlier: object = None  # the input layout of the earlier runs (evtime.io.reader.Layout)
    lay: object = None  # this run's input layout

    @property
    def carried(self) -> int:
        return 0 if self.st.fresh else int(self.st.meta.get("held", 0))

    def file(self, name: str) -> str | None:
        """A file of the committed state, None for a fresh stream."""
        return None if self.st.fresh else self.st.file(name)

    def read(self, spark, name: str):  # -> DataFrame | None
        """A Parquet file of the committed state (None for a fresh stream), its input
        columns in this run's types (which may be wider than the earlier runs', as one run
        over all the inputs has them: :func:`evtime.io.reader.continued`)."""
        from evtime.io.reader import recarried

        path = self.file(name)
        if path is None:
            return None
        df = spark.read.parquet(path)
        if self.earlier is None or self.lay is None:
            return df
        return recarried(df, self.earlier, self.lay, f"--state {self.sd.shown}: {name}")


def check_state_outputs(kw: dict) -> None:
    """--flush needs --state; --state needs its outputs in files (committed with it)."""
    if kw.get("flush") and not kw.get("state"):
        raise UsageError("--flush needs --state DIR")
    from evtime.io.directory import refuse_with_state

    refuse_with_state(kw)
    if kw.get("state"):
        for opt, path in (("-o", kw.get("output")), ("--discards", kw.get("discards"))):
            if path == "-":
                raise UsageError(
                    f"--state needs {opt} PATH: standard output cannot be committed together "
                    "with the state"
                )


def state_opener(kw: dict, command: str, options: dict, box: list):
    """A ``before_spark`` hook for :func:`start`: lock and recover ``--state DIR``, check it
    was written by this version with these ``options`` and the same input columns, whose
    types are those of one run over all the stream's inputs (the earlier runs' types and
    this run's unified: :func:`evtime.io.reader.continued`); appends the :class:`Stateful`
    to ``box``.  Raises :class:`NothingToDo` for a rerun of the last
    committed run."""
    from evtime.io.state import StateDir, input_record

    def opener(files, lay):
        from evtime.errors import InputError
        from evtime.io.reader import continued

        sd = StateDir(kw["state"])
        try:
            st = sd.load()
            earlier = None if st.fresh or "layout" not in st.meta else _saved_layout(sd, st)
            conflict = None
            if lay is None:
                lay = earlier if earlier is not None else _saved_layout(sd, st)
            elif earlier is not None and earlier.time_col == lay.time_col:
                # one run over all the stream's inputs unifies their types: so do the runs
                try:
                    lay = continued(earlier, lay, files, f"the earlier runs of --state {sd.shown}")
                except InputError as err:
                    conflict = err  # (after the checks of version, command and options)
            cols = ",".join(lay.schema.names)
            opts = {**options, "input columns": cols, "time column": lay.time_col}
            inputs = input_record(files)
            if sd.check(st, command, opts, inputs):
                raise NothingToDo(
                    f"evtime {command}: the inputs were already read by the last run committed "
                    f"to --state {kw['state']}: nothing to do"
                )
            if conflict is not None:
                raise conflict
        except BaseException:
            sd.close()
            raise
        st.run = {"options": opts, "inputs": inputs, "layout": _layout_record(lay)}
        box.append(Stateful(sd, st, bool(kw.get("flush")), earlier, lay))
        return lay

    return opener


def _layout_record(lay) -> dict:
    import base64

    def b64(schema) -> str:
        return base64.b64encode(schema.serialize().to_pybytes()).decode()

    return {
        "schema": b64(lay.schema),
        "raw": b64(lay.raw if lay.raw is not None else lay.schema),
        "text": lay.text,
        "csv": lay.csv,
        "time": lay.time_col,
        "csv columns": sorted(lay.csv_names),
    }


def _saved_layout(sd, st):
    """The input layout saved in a state (a `--state DIR --flush` run without input)."""
    import base64

    import pyarrow as pa

    from evtime.io.reader import Layout

    if "layout" not in st.meta:
        raise UsageError(f"--state {sd.shown} holds no stream to flush: give the INPUT to read")
    saved = st.meta["layout"]

    def schema(key: str):
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(saved[key])))

    # (a state of this version written before the layout kept its union: the types as
    # they were, each a type of its own)
    raw = schema("raw") if "raw" in saved else schema("schema")
    text, csv = saved.get("text", False), saved.get("csv", False)
    kept = schema("schema")
    if "csv columns" in saved:
        csv_names = frozenset(saved["csv columns"])
    else:  # (written before it was kept: the text columns of a CSV stream)
        csv_names = frozenset(f.name for f in kept if csv and pa.types.is_string(f.type))
    return Layout(kept, saved["time"], raw, text, csv, csv_names=csv_names)


def write_and_commit(df, sinks, lay, stf: Stateful, state_sinks, meta: dict) -> dict[str, int]:
    """:func:`write_and_publish` with ``--state``: the outputs and the new state are
    committed together (evtime.io.state).  ``state_sinks(gen_dir)`` are the sinks of the
    state's own files; ``meta`` goes to its state.json."""

    def jobs(gen: str) -> list:
        return [(df, [*sinks, *([] if stf.flush else state_sinks(gen))], lay)]

    return commit_jobs(sinks, jobs, stf, meta)


def commit_jobs(sinks, jobs, stf: Stateful, meta: dict) -> dict[str, int]:
    """:func:`write_and_commit` for outputs written from several frames: ``jobs(gen_dir)``
    gives ``(frame, sinks, layout)`` triples, each written by one Spark job; their sinks are
    the outputs ``sinks`` (committed with the state) and the state's own files (in
    ``gen_dir``).  Counts are summed over the jobs; routes ``held`` and ``held:...`` are
    the rows the state holds."""
    from evtime.io import writer
    from evtime.io.crash import crash_point
    from evtime.io.staging import shared_dir

    with_dialect(sinks)
    for s in sinks:
        writer.check_sink(s)
    with shared_dir() as staging:
        try:
            gen = stf.sd.begin(stf.st, sinks, staging)
            placed: dict[str, tuple] = {}
            written = list(jobs(gen))
            counts = _write_jobs(written, staging)
            _before_stdout(written)
            for frame, job_sinks, lay in written:
                for s in job_sinks:
                    if any(s is o for o in sinks):
                        placed[s.name] = (lay, frame.schema)
                    else:
                        writer.publish(s, staging, lay, frame.schema)
            crash_point("state-written")
            held = sum(n for r, n in counts.items() if r == "held" or r.startswith("held:"))
            meta = {
                **meta,
                **stf.st.run,
                "command": meta["command"],
                "held": held,
                "ended": stf.flush,
            }
            layouts = [placed[s.name] for s in sinks]
            stf.sd.commit(stf.st, sinks, staging, None, None, meta, layouts)
        except Exception:
            stf.sd.abort()
            raise
        finally:
            stf.sd.close()
        return counts


def count_read(df, inp: Inputs | None = None) -> int:
    """Rows read, counted on the input itself (checkpointed: no second read of the files),
    so the summary's accounting is a real check of the operator; bad rows count."""
    if inp is None:
        return df.count()
    return count_good(df, inp) + rejected_count(inp)


def count_good(df, inp: Inputs) -> int:
    """Rows read that are not bad input (counted by start() when it read them itself)."""
    return inp.counted[0] if inp.counted is not None else df.count()


def empty_note() -> str:
    """The summary's words on the empty inputs of this run ('' when none)."""
    if not _empty:
        return ""
    names = ", ".join(_empty[:5]) + (", ..." if len(_empty) > 5 else "")
    return f"; {len(_empty)} empty input{'s' if len(_empty) != 1 else ''} ({names})"


def summary(
    command: str,
    ses: Session,
    counts: dict[str, int],
    started: float,
    read: int | None = None,
    max_discards: int | None = None,
    detail: str = "",
    carried: int | None = None,
) -> None:
    """The summary line on stderr; checks read = released + discarded (+ bound rows) when
    ``read`` is given (a mismatch is an internal error) and enforces ``--max-discards``.  With
    ``--state`` (``carried`` given: rows an earlier run held) the check is
    read + carried = released + discarded + held, and both appear in the summary."""
    from evtime.errors import EvtimeError, TooManyDiscards

    stop_progress()
    released, discarded = counts.get("out", 0), counts.get("discard", 0)
    held, bound_rows = counts.get("held", 0), counts.get("bound", 0)
    seen = sum(counts.values())
    if read is None:
        read = seen
    elif carried is None and read != released + discarded + bound_rows:
        raise EvtimeError(
            f"internal error: read {read} rows but released {released} + discarded "
            f"{discarded} + bound rows {bound_rows} = {released + discarded + bound_rows}; "
            "please report this"
        )
    elif carried is not None and read + carried != released + discarded + held + bound_rows:
        raise EvtimeError(
            f"internal error: read {read} + carried {carried} rows but released {released} "
            f"+ discarded {discarded} + held {held} + bound rows {bound_rows} = "
            f"{released + discarded + held + bound_rows}; please report this"
        )
    if not ses.quiet:
        counted = f"read {read}, released {released}, discarded {discarded}"
        if carried is not None:
            counted = (
                f"read {read}, carried {carried}, released {released}, discarded {discarded}, "
                f"held {held}"
            )
        click.echo(
            f"evtime {command}: {counted}{detail}{empty_note()} "
            f"({time.monotonic() - started:.1f}s)",
            err=True,
        )
        sys.stderr.flush()
    if max_discards is not None and discarded > max_discards:
        raise TooManyDiscards(
            f"{discarded} rows discarded, more than --max-discards {max_discards}"
        )


def note_renamed(command: str, own: list[tuple[str, str]]) -> None:
    """Say once on stderr which of the row's columns could not take the plain ``row_`` name
    (a warning, even with -q: the output's columns are not the ones the user expects)."""
    from evtime.engine.present import crowded

    for words in crowded(own):
        print(f"evtime {command}: {words}", file=sys.stderr)
