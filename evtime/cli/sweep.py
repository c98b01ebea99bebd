"""evtime sweep: what-if tables, one row per setting, from one pass over the data."""

from __future__ import annotations

import time

import click

from evtime.cli import options
from evtime.cli.bound import bound_options
from evtime.cli.lazy import LazyGroup
from evtime.cli.merge import merge_options, setup
from evtime.runner import context, inputs, publish
from evtime.runner.bound_windows import check_columns, spec_of
from evtime.runner.explained import explain_format
from evtime.units import UNITS

# columns of the result, after the setting's own column
COLUMNS = (
    "released",
    "discarded",
    "held_at_end",
    "max_hold_rows",
    "max_hold_s",
    "mean_hold_s",
)

SWEEP_COMMANDS = {
    "adjust": "evtime.cli.sweep:sweep_adjust",
    "merge": "evtime.cli.sweep:sweep_merge",
    "bound": "evtime.cli.sweep:sweep_bound",
}


@click.group(cls=LazyGroup, commands=SWEEP_COMMANDS)
def sweep() -> None:
    """What if: released, discarded and how long rows are held, for several settings of
    one operator, computed in one pass over the data."""


def _int_list(ctx, param, value):
    try:
        values = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: write integers separated by commas, e.g. 0,100,999"
        ) from None
    if not values:
        raise click.BadParameter("give at least one value")
    if any(v < 0 for v in values):
        raise click.BadParameter(f"{value!r}: every value must be >= 0")
    return values


sweep_output = options.table_output("the table of settings")


def _seconds(ns: int | None) -> float | None:
    """A hold in ns (>= 0) as seconds, the number a ``*_s`` column holds (written as the
    shortest text that reads back to it: 0.999, 90, 1.000000001; exact to the ns below
    10^6 s)."""
    return None if ns is None else ns / 1e9


def _publish(ses, spark, rows: list[dict], setting: str, kw: dict, lay, numeric: bool) -> None:
    """Write the (small) table of settings like explain writes its rows; the setting's
    column is an integer when ``numeric``, else text (durations)."""
    import pyarrow as pa
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    from evtime.io.reader import Layout
    from evtime.io.writer import ROUTE, Sink

    types = {"max_hold_s": DoubleType(), "mean_hold_s": DoubleType()}
    schema = StructType(
        [
            StructField(setting, LongType() if numeric else StringType()),
            *[StructField(c, types.get(c, LongType())) for c in COLUMNS],
            StructField(ROUTE, StringType()),
            StructField("_evt_order", LongType()),
        ]
    )
    data = [(r[setting], *[r[c] for c in COLUMNS], "out", i) for i, r in enumerate(rows)]
    frame = spark.createDataFrame(data, schema).coalesce(1).sortWithinPartitions("_evt_order")
    fmt = explain_format(kw["fmt"], kw["output"], ses.call.params)
    sink = Sink("sweep", ("out",), kw["output"], fmt, [setting, *COLUMNS], [], kw["overwrite"])
    # none of these columns is the input's own: no input type to restore
    publish.write_and_publish(ses.run, frame, [sink], Layout(pa.schema([]), lay.time_col))


def _rows(summary, shown: list, setting: str, read: int, bad: int = 0) -> list[dict]:
    """The summary rows in setting order, checked: released + discarded = read (the rows
    that reached the operator); the ``bad`` rows of --bad-rows discard are discarded by
    every setting."""
    from evtime.errors import EvtimeError

    got = {r["_evt_set"]: r for r in summary.collect()}  # one row per setting
    rows = []
    for i, value in enumerate(shown):
        r = got.get(i)
        released, discarded = (r["released"], r["discarded"]) if r else (0, 0)
        bound_rows = r["bound_rows"] if r else 0
        if released + discarded + bound_rows != read:
            raise EvtimeError(
                f"internal error: {setting} {value}: read {read} rows but released "
                f"{released} + discarded {discarded} + bound rows {bound_rows}; please "
                "report this"
            )
        rows.append(
            {
                setting: value,
                "released": released,
                "discarded": discarded + bad,
                "held_at_end": r["held_at_end"] if r else 0,
                "max_hold_rows": r["max_hold_rows"] if r else None,
                "max_hold_s": _seconds(r["max_hold_ns"] if r else None),
                "mean_hold_s": _seconds(r["mean_hold_ns"] if r else None),
            }
        )
    return rows


def _done(command: str, ses: context.Session, read: int, n: int, started: float) -> None:
    ses.run.stop_progress()
    if not ses.quiet:
        click.echo(
            f"evtime sweep {command}: read {read}, {n} settings "
            f"({time.monotonic() - started:.1f}s)",
            err=True,
        )


@click.command(
    "adjust",
    epilog="""
\b
Examples:
  evtime sweep adjust --unit msec --range 0,100,500,999,5000 samples/tuples.parquet
  evtime sweep adjust --unit usec --range 0,999 --key device --format csv 'in/*.parquet'
""",
)
@click.option(
    "--unit", required=True, type=click.Choice(list(UNITS)), help="Truncate times to this unit."
)
@click.option(
    "--range",
    "ranges",
    required=True,
    metavar="N,N,...",
    callback=_int_list,
    help="The ranges to try (integers >= 0, in units), comma-separated: one result row each.",
)
@sweep_output
@options.input_options
@options.session_options
def sweep_adjust(**kw) -> None:
    """What `evtime adjust --unit U --range N` would do, for every N given: rows released
    and discarded, rows held to the end, the largest hold in arrivals and in time, and the
    mean hold in time."""
    started = time.monotonic()
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    from evtime.engine import sweep as engine

    got = inputs.start(inp, ses)
    spark, df, lay = got.spark, got.df, got.lay
    read, bad = inputs.count_good(df, got), inputs.rejected_count(got)
    summary = engine.adjust(df, kw["unit"], kw["ranges"], got.keys)
    rows = _rows(summary, kw["ranges"], "range", read, bad)
    _publish(ses, spark, rows, "range", kw, lay, numeric=True)
    _done("adjust", ses, read + bad, len(rows), started)


def _duration_list(ctx, param, value):
    from evtime.errors import UsageError
    from evtime.units import duration_ns

    texts = [v.strip() for v in value.split(",") if v.strip()]
    if not texts:
        raise click.BadParameter("give at least one duration")
    try:
        values = [options.on_timeline(param.name, t, duration_ns(t)) for t in texts]
    except UsageError as err:
        raise click.BadParameter(str(err)) from None
    if any(v < 0 for v in values) and param.name != "cti_delays":
        raise click.BadParameter(f"{value!r}: every value must be >= 0")
    if any(v == 0 for v in values) and param.name == "sizes":
        raise click.BadParameter(f"{value!r}: every window must be positive")
    return list(zip(texts, values, strict=True))


@click.command(
    "merge",
    epilog="""
\b
Examples:
  evtime sweep merge --arrival wall --wait 0s,30m,1h,2h --time sourceTime \\
      E=samples/merge/apama_e.csv X=samples/merge/apama_x.csv
  evtime sweep merge --arrival received --wait 1s,10s,1m --format csv 'cars/*.parquet'
""",
)
@merge_options
@options.marker_options
@sweep_output
@options.input_options
@options.session_options
def sweep_merge(**kw) -> None:
    """What `evtime merge --arrival COL --wait W` would do, for every W given: rows
    released and discarded, rows held to the end, the largest hold in arrivals and in
    arrival time, and the mean hold in arrival time."""
    started = time.monotonic()
    from evtime.engine import sweep as engine
    from evtime.errors import UsageError

    waits = kw.pop("waits")
    fmt_opt, output, overwrite = kw.pop("fmt"), kw.pop("output"), kw.pop("overwrite")
    if not kw["arrival"]:
        raise UsageError("sweep merge needs --arrival COL (the wait is on that clock)")
    kw["wait"] = None  # the waits are the sweep's settings
    ses, got, spec, df, lay = setup(kw, "sweep merge", classify=False)
    read, bad = inputs.count_good(df, got), inputs.rejected_count(got)
    summary = engine.merge(df, spec, [ns for _, ns in waits])
    rows = _rows(summary, [t for t, _ in waits], "wait", read, bad)
    out = {"fmt": fmt_opt, "output": output, "overwrite": overwrite}
    _publish(ses, df.sparkSession, rows, "wait", out, lay, numeric=False)
    _done("merge", ses, read + bad, len(rows), started)


# `sweep merge` takes every option of `evtime merge` that changes what is released; its
# --wait takes a list: swap merge's option for this one
_wait = click.Option(
    ["--wait", "waits"],
    required=True,
    metavar="D,D,...",
    callback=_duration_list,
    help="The waits to try (durations such as 0s, 500ms, 1h), comma-separated: one "
    "result row each. Needs --arrival.",
)
sweep_merge.params = [_wait if p.name == "wait" else p for p in sweep_merge.params]
for _p in sweep_merge.params:
    if _p.name == "inputs":
        _p.metavar = "SOURCE..."


@click.command(
    "bound",
    epilog="""
\b
Examples:
  evtime sweep bound --window 10s --bounds cti --cti-every 1 --cti-delay 0s,1s,2s,5s \\
      samples/bound/cti.csv
  evtime sweep bound --window 1m,5m,15m --key device samples/bound/readings.csv
""",
)
@bound_options(agg_required=False)
@sweep_output
@options.input_options
@options.session_options
def sweep_bound(**kw) -> None:
    """What `evtime bound` would do for every --cti-delay (or every --window) given: rows
    released (entering windows) and discarded, rows held to the end, the largest hold in
    arrivals and in time, and the mean hold in time (a row is held until its last window
    closes)."""
    started = time.monotonic()
    import dataclasses

    from evtime.engine import sweep as engine
    from evtime.errors import UsageError

    sizes, delays = kw.pop("sizes"), kw.pop("cti_delays")
    if len(sizes) > 1 and len(delays) > 1:
        raise UsageError("sweep one setting at a time: several --window or several --cti-delay")
    fmt_opt, output, overwrite = kw.pop("fmt"), kw.pop("output"), kw.pop("overwrite")
    kw.pop("aggs"), kw.pop("udafs")
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    kw["size"], kw["cti_delay"] = sizes[0][1], delays[0][1]
    spec = spec_of(kw, inp.keys)
    if len(delays) > 1 or (len(sizes) == 1 and spec.bounds == "cti"):
        setting, values = "cti_delay", delays
        specs = [dataclasses.replace(spec, cti_delay=ns) for _, ns in delays]
    else:
        setting, values = "window", sizes
        specs = [dataclasses.replace(spec, size=ns) for _, ns in sizes]
    for s in specs:
        s.check()
    got = inputs.start(inp, ses, check_columns(spec))
    spark, df, lay = got.spark, got.df, got.lay
    read, bad = inputs.count_good(df, got), inputs.rejected_count(got)
    summary = engine.bound(df, specs)
    rows = _rows(summary, [t for t, _ in values], setting, read, bad)
    out = {"fmt": fmt_opt, "output": output, "overwrite": overwrite}
    _publish(ses, spark, rows, setting, out, lay, numeric=False)
    _done("bound", ses, read + bad, len(rows), started)


# `sweep bound` takes every option of `evtime bound` that changes what is released; its
# --window and --cti-delay take lists
_lists = {
    "size": click.Option(
        ["--window", "sizes"],
        required=True,
        metavar="SIZE,SIZE,...",
        callback=_duration_list,
        help="Window length(s), e.g. 1m or 1m,5m,15m: several sizes are several settings.",
    ),
    "cti_delay": click.Option(
        ["--cti-delay", "cti_delays"],
        default="0ns",
        show_default=True,
        metavar="D,D,...",
        callback=_duration_list,
        help="--bounds cti: the CTI delay(s), e.g. 0s,1s,2s (may be negative): several "
        "delays are several settings.",
    ),
}
sweep_bound.params = [_lists.get(p.name, p) for p in sweep_bound.params]
