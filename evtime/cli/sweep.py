"""evtime sweep: what-if tables, one row per setting, from one pass over the data."""

from __future__ import annotations

import click

from evtime.cli import options
from evtime.cli.bound import bound_options
from evtime.cli.lazy import LazyGroup
from evtime.cli.merge import merge_options, setup
from evtime.runner import inputs
from evtime.runner import sweep as runner
from evtime.runner.bound_windows import check_columns, spec_of
from evtime.units import UNITS

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


def _table(kw: dict) -> runner.Table:
    """Where the table goes (taken out of ``kw``)."""
    return runner.Table(kw.pop("fmt"), kw.pop("output"), kw.pop("overwrite"))


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
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    runner.adjust(runner.SweepAdjustArgs(kw["unit"], tuple(kw["ranges"]), _table(kw)), ses, inp)


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
    args = runner.SweepMergeArgs(kw["arrival"], tuple(kw.pop("waits")), _table(kw))
    kw["wait"] = None  # the waits are the sweep's settings
    runner.merge(args, lambda: setup(kw, "sweep merge"))


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
    sizes, delays = tuple(kw.pop("sizes")), tuple(kw.pop("cti_delays"))
    args = runner.SweepBoundArgs(sizes, delays, _table(kw))
    kw.pop("aggs"), kw.pop("udafs")
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    kw["size"], kw["cti_delay"] = sizes[0][1], delays[0][1]
    spec = spec_of(kw, inp.keys)
    runner.bound(args, spec, check_columns(spec), ses, inp)


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
