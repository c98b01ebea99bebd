"""evtime merge and evtime explain merge: several sources into one stream by event time
(SPEC §3)."""

from __future__ import annotations

import click

from evtime.cli import options
from evtime.cli.explain import explain_output, plot_option, plot_title
from evtime.runner import inputs, merge_setup
from evtime.runner import merge as runner
from evtime.runner.merge_setup import MergeArgs, MergeOptions
from evtime.units import UNITS

EXAMPLES = """
\b
Examples:
  evtime merge orders=samples/merge/orders.csv trades=samples/merge/trades.csv \\
      --order-by seq --bound-marker kind=bound
  evtime merge --arrival received --wait 1h 'cars/car-*.parquet' -o merged.parquet
  evtime merge --join-leave --arrival received a.csv b.csv --discards late.csv
  evtime merge --state st/ --arrival received -o day2.csv a=a-day2.csv b=b-day2.csv
"""


def _wait(ctx, param, value):
    """--wait: checked, kept as typed (the reasons quote it)."""
    ns = options.duration(ctx, param, value)
    if ns is not None and ns < 0:
        raise click.BadParameter(f"{value!r}: must be >= 0")
    return value


merge_options = options.stack(
    click.option(
        "--arrival",
        metavar="COL",
        help="Wall-clock arrival time of every row: all sources' rows are processed in this "
        "order (ties: source order, row order). Read like the time column.",
    ),
    click.option(
        "--wait",
        metavar="DURATION",
        callback=_wait,
        help="Needs --arrival. Wait at most this long for a source: its bound is at least "
        "arrival time - wait, and a row older than that is discarded (exactly the wait is fine).",
    ),
    click.option(
        "--join-leave",
        is_flag=True,
        help="A source is waited for only from its first row to its last one (producers "
        "entering and leaving a stream), instead of from start to end.",
    ),
    click.option(
        "--unit",
        type=click.Choice(list(UNITS)),
        help="With --range: adjust every source first (as evtime adjust); the source's "
        "bound is its reference time - range*unit.",
    ),
    click.option(
        "--range",
        "range_",
        type=click.IntRange(min=0),
        metavar="N",
        help="With --unit: rows up to N units behind their source's reference time are held.",
    ),
    section="Operator",
)


def merge_options_of(kw: dict) -> MergeOptions:
    """The operator's options (:data:`merge_options` and ``options.marker_options``),
    popped from ``kw``."""
    keys = ("arrival", "wait", "join_leave", "unit", "bound_marker", "strict_bounds", "tick")
    return MergeOptions(range=kw.pop("range_"), **{k: kw.pop(k) for k in keys})


def setup(kw: dict, command: str):
    """:func:`evtime.runner.merge_setup.setup` from a command's ``kw`` (sweep merge): the
    session, the inputs and the operator's options popped from it."""
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    return merge_setup.setup(ses, inp, merge_options_of(kw), command)


merge_output = options.stack(
    click.option(
        "--emit-bounds",
        is_flag=True,
        help="Needs --bound-marker. The output also carries bound rows (marker column set to "
        "VALUE) wherever the merged stream's definitive time advances, so it can be a source "
        "with punctuation for another evtime command.",
    ),
    click.option(
        "--as",
        "as_",
        default="evtime",
        show_default=True,
        metavar="NAME",
        help="Name of the event-time column added to every row.",
    ),
    click.option(
        "--source-as",
        default="source",
        show_default=True,
        metavar="NAME",
        help="Name of the column that says which source a row came from.",
    ),
    section="Output",
)


@click.command(cls=options.Command, epilog=EXAMPLES)
@merge_options
@options.marker_options
@merge_output
@options.output_options
@options.state_options
@options.flushable_input_options
@options.session_options
def merge(**kw) -> None:
    """Merge several sources into one stream in event-time order.

    Each SOURCE is a file or glob (NAME=PATH names it). A row is held until every source's
    bound has passed it; rows that break a source's promise are discarded."""
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    args = MergeArgs(
        merge_options_of(kw),
        output=kw.pop("output"),
        output_format=kw.pop("output_format"),
        output_layout=kw.pop("output_layout"),
        overwrite=kw.pop("overwrite"),
        discards=kw.pop("discards"),
        max_discards=kw.pop("max_discards"),
        emit_bounds=kw.pop("emit_bounds"),
        as_=kw.pop("as_"),
        source_as=kw.pop("source_as"),
        state=kw.pop("state"),
        flush=kw.pop("flush"),
    )
    runner.merge(args, ses, inp)  # (the CSV options: read by the runner from ses.call)


@click.command(
    "merge",
    cls=options.Command,
    epilog="""
\b
Examples:
  evtime explain merge --order-by seq --bound-marker kind=bound \\
      samples/merge/orders.csv samples/merge/trades.csv
  evtime explain merge --arrival wall --wait 1h --time sourceTime --format csv \\
      E=samples/merge/apama_e.csv X=samples/merge/apama_x.csv
""",
)
@merge_options
@options.marker_options
@explain_output
@plot_option
@options.input_options
@options.session_options
def explain_merge(**kw) -> None:
    """Explain `evtime merge`: every row's decision and why.

    The definitive time after every arrival, each row's decision, what released it (or
    which source held it), and which promise a discarded row broke."""
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    args = runner.ExplainMergeArgs(
        merge_options_of(kw),
        fmt=kw.pop("fmt"),
        output=kw.pop("output"),
        overwrite=kw.pop("overwrite"),
        plot=kw.pop("plot"),
        title=plot_title(),
    )
    runner.explain_merge(args, ses, inp)


for _cmd in (merge, explain_merge):
    for _p in _cmd.params:
        if _p.name == "inputs":
            _p.metavar = "[SOURCE...]" if _cmd is merge else "SOURCE..."
