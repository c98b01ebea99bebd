"""evtime explain: the hold / release / discard decision for every row (SPEC §5)."""

from __future__ import annotations

import sys
import time

import click

from evtime.cli import options, run
from evtime.cli.lazy import LazyGroup

FORMATS = ["table", "csv", "jsonl", "parquet"]


EXPLAIN_COMMANDS = {
    "adjust": "evtime.cli.explain:explain_adjust",
    "merge": "evtime.cli.merge:explain_merge",
    "bound": "evtime.cli.bound:explain_bound",
}


@click.group(cls=LazyGroup, commands=EXPLAIN_COMMANDS)
def explain() -> None:
    """Show, for every input row in arrival order, what the operator did with it and why."""


def explain_format(fmt: str | None, output: str) -> str:
    from evtime.io.writer import output_format

    if fmt:
        return fmt
    if output == "-":
        return "table" if sys.stdout.isatty() else "csv"
    return output_format(output, None)


explain_output = options._stack(
    click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        help="table (default on a terminal), csv (default otherwise), jsonl, parquet.",
    ),
    click.option(
        "-o",
        "--output",
        metavar="PATH",
        default="-",
        show_default=True,
        help="Where to write the explanation.",
    ),
    click.option("--overwrite", is_flag=True, help="Replace an existing output."),
)


def file_source(files):
    """The explain ``source`` of a row: the file it came from."""
    from pyspark.sql import functions as F

    from evtime.io.reader import FILE

    return F.element_at(F.array(*[F.lit(f.shown) for f in files]), F.col(FILE) + 1)


def rejected_frame(frame, inp, own: list[tuple[str, str]], source, route="discard"):
    """The explain frame followed by the rows of ``--bad-rows discard``: decision
    discarded, the reason, their source and own columns, nothing else."""
    if inp.rejected is None:
        return frame
    from pyspark.sql import functions as F

    from evtime.engine import present
    from evtime.io.writer import ROUTE

    shown = {s: c for c, s in own}
    types = dict(frame.dtypes)
    # explain's own columns (time, evtime, ...) are unknown: null, not the row's same-named ones
    cols = {
        c: F.lit(None).cast(types[c])
        for c in frame.columns
        if c not in shown and c not in (ROUTE, "reason", "_evt_seq")
    }
    cols.update({"decision": F.lit(present.DISCARDED), "source": source})
    cols.update({s: F.col(c) for s, c in shown.items() if s != c})
    return run.with_rejected(frame, inp, cols, route)


plot_option = click.option(
    "--plot",
    metavar="PATH",
    help="Also draw the stream (.svg, .png or .pdf): arrival on x, event time on y, rows "
    "coloured by decision, the bound (big inputs are sampled, and the picture says so).",
)


@click.command(
    "adjust",
    epilog="""
\b
Examples:
  evtime explain adjust --unit msec --range 999 samples/tuples.csv \\
      --time-format 'yyyy/MM/dd HH:mm:ss:SSSSSSSSS'
  evtime explain adjust --unit usec --range 999 --format csv -o why.csv big.parquet
""",
)
@options.adjust_options
@explain_output
@plot_option
@options.input_options
@options.session_options
def explain_adjust(**kw) -> None:
    """Explain `evtime adjust`: reference time, bound, decision and release for every row."""
    started = time.monotonic()
    ses, inp = run.session_of(kw), run.inputs_of(kw)
    from pyspark.sql import functions as F

    from evtime.engine import adjust as engine
    from evtime.engine import present
    from evtime.io.reader import SEQ
    from evtime.io.writer import ROUTE, Sink

    spec = engine.AdjustSpec(kw["unit"], kw["range_"], inp.keys)
    spark, df, lay, files = run.start(inp, ses)
    read = run.count_read(df, inp)  # on the checkpointed input, before any operator
    df = engine.explain(engine.classify(df, spec), spec, [f.shown for f in files])
    own = present.own_columns(lay.schema.names, lay.time_col, ("ref",))
    frame = present.explain_frame(df.sort(SEQ), ("ref",), own)
    fmt = explain_format(kw["fmt"], kw["output"])
    cols = frame.columns
    frame = frame.withColumn(
        ROUTE, F.when(F.col("decision") == present.DISCARDED, "discard").otherwise("out")
    )
    frame = rejected_frame(frame, inp, own, file_source(files))
    sink = Sink(
        "explain",
        ("out", "discard"),
        kw["output"],
        fmt,
        cols,
        list(present.NS_COLUMNS),
        kw["overwrite"],
    )
    if kw["plot"]:
        from evtime.io import plot

        plot.check_path(kw["plot"])
    counts = run.write_and_publish(frame, [sink], lay)
    if kw["plot"]:
        title = f"evtime explain adjust --unit {spec.unit} --range {spec.range}"
        plot.plot(frame, read, kw["plot"], title)
    run.summary("explain adjust", ses, counts, started, read)
