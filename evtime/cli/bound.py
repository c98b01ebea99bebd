"""evtime bound / evtime explain bound: strict-bound window aggregation (SPEC §4, §5)."""

from __future__ import annotations

import click

from evtime.cli import options
from evtime.cli.explain import explain_output, plot_option, plot_title
from evtime.runner import bound as runner
from evtime.runner import inputs
from evtime.units import UNITS

EXAMPLES = """
\b
Examples:
  evtime bound --window 1m --key device --agg 'count(*) AS n' --agg 'avg(temp) AS mean' \\
      --agg 'max(temp) AS peak' --discards late.csv samples/bound/readings.csv
  evtime bound --window 1h --window-end inclusive --bounds markers \\
      --bound-marker kind=bound --strict-bounds --tick 1ms --agg 'sum(shares)' \\
      samples/bound/trades.csv
  evtime bound --window 10s --bounds cti --cti-every 1 --cti-delay 2s --agg 'count(*)' \\
      samples/bound/cti.csv
  evtime bound --window 10m --slide 1m --udaf 'med=samples/bound/udafs.py:SlidingMedian' \\
      --agg 'med(temp) AS median' --key device samples/bound/readings.csv
"""


_duration = options.duration


def bound_options(agg_required: bool):
    return options.stack(
        _window_options(agg_required), _bounds_from, options.marker_options, _bound_sources
    )


def _window_options(agg_required: bool):
    return options.stack(
        click.option(
            "--window",
            "size",
            required=True,
            metavar="SIZE",
            callback=_duration,
            help="Window length, e.g. 1m, 15m, 1h (windows are aligned to the epoch).",
        ),
        click.option(
            "--slide",
            metavar="STEP",
            callback=_duration,
            help="Hop between window starts (hopping windows; default: tumbling, STEP=SIZE).",
        ),
        click.option(
            "--offset",
            metavar="D",
            default="0ns",
            show_default=True,
            callback=_duration,
            help="Shift window starts from the epoch by D (may be negative).",
        ),
        click.option(
            "--window-end",
            type=click.Choice(["exclusive", "inclusive"]),
            default="exclusive",
            show_default=True,
            help="[s, s+SIZE) or [s, s+SIZE] (SQLstream's OVER: a row on the end is in both).",
        ),
        click.option(
            "--agg",
            "aggs",
            multiple=True,
            required=agg_required,
            metavar="EXPR",
            help="A Spark SQL aggregate, e.g. 'count(*)', 'avg(v) AS mean', "
            "'percentile_approx(v, 0.5)', or a --udaf NAME(expr) (repeatable).",
        ),
        click.option(
            "--udaf",
            "udafs",
            multiple=True,
            metavar="NAME=module:Class",
            help="A Python aggregate (class with add, optional remove, result) usable in "
            "--agg as NAME(expr); module may be a file.py (repeatable).",
        ),
        section="Windows",
    )


_bounds_from = options.section(
    "Bounds",
    click.option(
        "--bounds",
        type=click.Choice(["rows", "markers", "cti"]),
        help="Where the bound comes from: every row's time (rows, the default), "
        "--bound-marker rows (markers, the default with --bound-marker), or "
        "generated CTIs (cti).",
    ),
)
_bound_sources = options.stack(
    click.option(
        "--cti-every",
        type=click.IntRange(min=1),
        metavar="N",
        help="--bounds cti: a CTI at every N-th data row of a key (late rows count).",
    ),
    click.option(
        "--cti-delay",
        metavar="D",
        default="0ns",
        show_default=True,
        callback=_duration,
        help="--bounds cti: the CTI is the largest time seen minus D (may be negative: "
        "-1ns puts it one tick past the event).",
    ),
    click.option(
        "--late",
        type=click.Choice(["drop", "adjust"]),
        default="drop",
        show_default=True,
        help="A row below the bound in force: drop it, or move it up to the bound.",
    ),
    click.option(
        "--unit",
        type=click.Choice(list(UNITS)),
        help="Adjust first (as evtime adjust): truncate times to this unit ...",
    ),
    click.option(
        "--range",
        "range_",
        type=click.IntRange(min=0),
        metavar="N",
        help="... and make the bound ref - N units.",
    ),
    section="Bounds",
)


@click.command("bound", cls=options.Command, epilog=EXAMPLES)
@bound_options(agg_required=True)
@options.output_options
@options.state_options
@options.flushable_input_options
@options.session_options
def bound(**kw) -> None:
    """Aggregate event-time windows, each released once it is final.

    A window is output once the bound (rows' times, marker rows or generated CTIs)
    says no more rows can enter it, with the arrival that closed it; rows below the bound
    are dropped or moved up to it."""
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    runner.bound(runner.BoundArgs.of(kw), ses, inp)


@click.command(
    "bound",
    cls=options.Command,
    epilog="""
\b
Examples:
  evtime explain bound --window 1m --key device samples/bound/readings.csv
  evtime explain bound --window 1h --window-end inclusive --bound-marker kind=bound \\
      --strict-bounds --tick 1ms --format csv samples/bound/trades.csv
""",
)
@bound_options(agg_required=False)
@explain_output
@plot_option
@options.input_options
@options.session_options
def explain_bound(**kw) -> None:
    """Explain `evtime bound`: every row's decision and windows.

    For every arrival: the bound after it, the decision, the windows the row entered and
    the arrival that released it (--agg / --udaf are accepted and ignored)."""
    title = plot_title() if kw["plot"] else ""  # (from the click context)
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    runner.explain_bound(runner.ExplainBoundArgs.of(kw, title), ses, inp)
