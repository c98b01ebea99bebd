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
    spark, df, lay, files = run.start(inp, ses)
    read = run.count_read(df)  # on the checkpointed input, before any operator
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
        extra = [c for c in ("arrival", "reason", "bound") if c in own]
        if extra:
            raise UsageError(f"--discards adds columns {', '.join(extra)} that the input has")
        sinks.append(
            Sink(
                "discards",
                ("discard",),
                kw["discards"],
                output_format(kw["discards"], None),
                [*own, "arrival", "reason", "bound"],
                ["bound"],
                kw["overwrite"],
            )
        )
    df = df.withColumn(ROUTE, F.when(F.col(engine.KEEP), "out").otherwise("discard"))
    counts = run.write_and_publish(engine.order(df), sinks, lay)
    run.summary("adjust", ses, counts, started, read, kw["max_discards"])
