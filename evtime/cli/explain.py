"""evtime explain: the hold / release / discard decision for every row (SPEC §5)."""

from __future__ import annotations

import click

from evtime.cli import options
from evtime.cli.lazy import LazyGroup
from evtime.runner import explain_adjust as runner
from evtime.runner import inputs

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
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    args = runner.ExplainAdjustArgs.of(kw, title=plot_title() if kw["plot"] else "")
    runner.explain_adjust(args, ses, inp)
