"""evtime adjust: timestamp adjustment (SPEC §2)."""

from __future__ import annotations

import time

import click

from evtime.cli import options, run

EXAMPLES = """
\b
Examples:
  evtime adjust --unit msec --range 999 samples/tuples.parquet
  evtime adjust --unit sec --range 2 --key device -o sorted.parquet 'in/*.csv'
  cat events.csv | evtime adjust --unit msec --range 500 --discards late.csv - | head
"""


@click.command(epilog=EXAMPLES)
@options.adjust_options
@click.option(
    "--as",
    "as_",
    default="evtime",
    show_default=True,
    metavar="NAME",
    help="Name of the adjusted-time column added to every row.",
)
@click.option(
    "--emit-bounds",
    is_flag=True,
    help="Needs --bound-marker. The output also carries a bound row (marker column set to "
    "VALUE, time and adjusted time = ref - range*unit, key columns set) wherever a key's "
    "reference time moves, for `evtime bound --bounds markers` downstream.",
)
@click.option(
    "--bound-marker",
    metavar="COL=VALUE",
    help="How emitted bound rows are marked (COL is added when the input lacks it).",
)
@options.output_options
@options.input_options
@options.session_options
def adjust(**kw) -> None:
    """Truncate times to a unit, hold rows within a range behind the reference time,
    discard older ones, and release them in time order."""
    started = time.monotonic()
    ses, inp = run.session_of(kw), run.inputs_of(kw)
    from evtime.engine import adjust as engine
    from evtime.errors import UsageError
    from evtime.io.writer import ROUTE, Sink, output_format

    spec = engine.AdjustSpec(kw["unit"], kw["range_"], inp.keys)
    if kw["emit_bounds"] and "=" not in (kw["bound_marker"] or ""):
        raise UsageError("--emit-bounds needs --bound-marker COL=VALUE (how bound rows look)")
    spark, df, lay, files = run.start(inp, ses)
    read = run.count_read(df, inp)  # on the checkpointed input, before any operator
    own = lay.schema.names
    if kw["as_"] in own:
        raise UsageError(
            f"the input already has a column {kw['as_']!r}: name the adjusted "
            "time otherwise with --as NAME"
        )
    df = engine.classify(df, spec)
    out = Sink(
        "output",
        ("out",),
        kw["output"],
        output_format(kw["output"], kw["output_format"]),
        [*own, kw["as_"]],
        [kw["as_"]],
        kw["overwrite"],
    )
    sinks = [out]
    from pyspark.sql import functions as F

    df = df.withColumn(kw["as_"], F.col(engine.EVT))
    if kw["discards"]:
        df = engine.with_discard_columns(df, spec)
        sinks.append(run.discards_sink(kw["discards"], kw["overwrite"], own))
    df = df.withColumn(ROUTE, F.when(F.col(engine.KEEP), "out").otherwise("discard"))
    if kw["emit_bounds"]:
        df, out.columns = _with_bounds(df, spec, lay, kw, inp, out.columns)
        out.routes = ("out", "emit")
    else:
        df = engine.order(df)
    df = run.with_rejected(df, inp)
    counts = run.write_and_publish(df, sinks, lay)
    run.summary("adjust", ses, counts, started, read, kw["max_discards"])


def _with_bounds(df, spec, lay, kw, inp, columns):
    """``adjust --emit-bounds``: the output rows plus bound rows (routed 'emit'), ordered
    after the rows with the same (evtime, arrival)."""
    from pyspark.sql import functions as F

    from evtime.engine import adjust as engine
    from evtime.engine.merge import bound_time_value
    from evtime.io.reader import SEQ
    from evtime.io.writer import ROUTE

    col, _, value = kw["bound_marker"].partition("=")
    if col not in df.columns:
        df = df.withColumn(col, F.lit(None).cast("string"))
        columns = [*columns[:-1], col, columns[-1]]
    types = dict(df.dtypes)
    bounds = engine.emitted_bounds(df, spec).select(
        *spec.keys,
        SEQ,
        engine.EVT,
        F.col(engine.EVT).alias(kw["as_"]),
        bound_time_value(lay, inp.time_format, inp.tz)
        .cast(types[lay.time_col])
        .alias(lay.time_col),
        F.lit(value).cast(types[col]).alias(col),
        F.lit("emit").alias(ROUTE),
        F.lit(1).alias("_evt_kind"),
    )
    rows = df.withColumn("_evt_kind", F.lit(0)).unionByName(bounds, allowMissingColumns=True)
    return rows.sort(engine.EVT, SEQ, "_evt_kind"), columns
