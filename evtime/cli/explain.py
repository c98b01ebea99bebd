"""evtime explain: the hold / release / discard decision for every row (SPEC §5)."""

from __future__ import annotations

import contextlib
import time

import click

from evtime.cli import options
from evtime.cli.lazy import LazyGroup
from evtime.runner import inputs, publish, summary
from evtime.runner.explained import explain_format, file_source, rejected_frame

EXPLAIN_COMMANDS = {
    "adjust": "evtime.cli.explain:explain_adjust",
    "merge": "evtime.cli.merge:explain_merge",
    "bound": "evtime.cli.bound:explain_bound",
}


@click.group(
    cls=LazyGroup,
    commands=EXPLAIN_COMMANDS,
    epilog="""
\b
Examples:
  evtime explain adjust --unit usec --range 999 samples/tuples.parquet --plot adjust.svg
  evtime explain merge --order-by seq --bound-marker kind=bound --plot merge.svg \\
      samples/merge/orders.csv samples/merge/trades.csv
  evtime explain bound --window 1m --key device samples/bound/readings.csv --format csv
""",
)
def explain() -> None:
    """Show what an operator did with every row, and why.

    Every input row in arrival order: the bound after it, the decision (released,
    discarded, adjusted), the arrival that released it and a reason in words; --plot also
    draws it."""


explain_output = options.table_output("the explanation")


plot_option = options.section(
    "Output",
    click.option(
        "--plot",
        metavar="PATH",
        help="Also draw the stream (.svg, .png or .pdf): arrival on x, event time on y, rows "
        "coloured by decision, the bound (big inputs are sampled, and the picture says so).",
    ),
)


def plot_title() -> str:
    """The command as typed, without where the outputs go."""
    return options.typed(
        ("--plot", "-o", "--output", "--format", "--conf", "--master", "--remote"),
        ("--overwrite", "-q", "--quiet", "-v", "--verbose", "--reuse-server"),
    )


@click.command(
    "adjust",
    cls=options.Command,
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
    """Explain `evtime adjust`: every row's decision, and why.

    For every arrival: the reference time and bound after it, the decision, the arrival
    that released the row and its position in the output."""
    started = time.monotonic()
    if kw["plot"]:
        from evtime.io import plot

        plot.check_path(kw["plot"], kw["overwrite"])  # before Spark starts
    ses, inp = options.session(kw), inputs.inputs_of(kw)

    from evtime.engine import adjust as engine
    from evtime.engine import present
    from evtime.engine.scan import apply_in_parts
    from evtime.io.reader import ROW, T
    from evtime.io.writer import Sink
    from evtime.units import truncated_range

    spec = engine.AdjustSpec(kw["unit"], kw["range_"], inp.keys)
    # (without keys: a pass over the times read here, and the search's carry, while Spark
    # starts)
    early = None if spec.keys else inputs.from_footers(lambda f, _: engine.early_explain(spec, f))
    got = inputs.start(inp, ses, meanwhile=early)
    df, lay, files = got.df, got.lay, got.files
    read = inputs.count_read(df, got)  # on the checkpointed input, before any operator
    # (the raw time and the row number are not shown: explain does not checkpoint them)
    df = df.drop(*({lay.time_col, ROW} - {T}))
    limits = truncated_range(got.time_range, spec.unit_ns)  # (known: no job to find them)
    own = present.own_columns(lay.schema.names, lay.time_col, ("ref",))
    summary.note_renamed("explain adjust", own)
    sources = [f.shown for f in files]
    with contextlib.ExitStack() as shared:
        frame, step = _adjust_frame(ses.run, df, spec, got, own, sources, read, limits, shared)
        frame = rejected_frame(frame, got, own, file_source(files))
        shown = frame if step is None else apply_in_parts(frame, step)  # (as written)
        sink = Sink(
            "explain",
            ("out", "discard"),
            kw["output"],
            explain_format(kw["fmt"], kw["output"], ses.call.params),
            present.shown_columns(("ref",), own),
            list(present.NS_COLUMNS),
            kw["overwrite"],
            text_of={"evtime": ("time", spec.unit_ns)},  # (the time truncated to the unit)
            own=present.own_map(own),
        )
        counts = publish.write_and_publish(ses.run, frame, [sink], lay, step, shown.schema)
        if kw["plot"]:
            keys = tuple(dict(own)[k] for k in spec.keys)
            plot.plot(shown, read, kw["plot"], plot_title(), keys=keys)
    summary.summary("explain adjust", ses, counts, started, read)


def _adjust_frame(run, df, spec, got, own, sources, read, limits, shared):
    """explain adjust's rows in arrival order, to write, and the step the writer runs on
    each part (None: the rows are the explanation), by the path
    :func:`evtime.engine.adjust.choose.choose_explain` picks (a directory the tasks share
    entered on the ``shared`` ExitStack)."""
    from evtime.engine.adjust import choose
    from evtime.io.staging import shared_dir

    facts = choose.Facts(in_driver=run.in_driver, rejected=got.rejected is not None)
    counted = lambda: shared.enter_context(shared_dir())  # noqa: E731 (the kept rows per part)
    ctx = choose.Run(read, got.as_read, limits, counted, got.found_early, got.one_chunk)
    good = lambda: read - inputs.rejected_count(got)  # noqa: E731 (arrivals 1..good: bad rows have none)
    return choose.choose_explain(spec, facts, ctx, sources, own, good).explain(df)
