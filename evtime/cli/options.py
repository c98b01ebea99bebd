"""Options shared by several commands, defined once so every command spells them the same."""

from __future__ import annotations

from collections.abc import Callable

import click

from evtime.units import UNITS


def _stack(*decorators: Callable) -> Callable:
    def apply(f: Callable) -> Callable:
        for d in reversed(decorators):
            f = d(f)
        return f

    return apply


def _time_format(ctx, param, value):
    if value is not None:
        from evtime.io.timeparse import check_format

        try:
            check_format(value)
        except ValueError as err:
            raise click.BadParameter(str(err)) from None
    return value


input_options = _stack(
    click.argument("inputs", nargs=-1, required=True, metavar="INPUT..."),
    click.option(
        "--time",
        "time_col",
        metavar="COL",
        help="Time column (default: the one column named time, timestamp, ts, "
        "rowtime or event_time).",
    ),
    click.option(
        "--time-format",
        metavar="FMT",
        callback=_time_format,
        help="How times are written: iso (default), epoch_s, epoch_ms, epoch_us, "
        "epoch_ns, or a pattern such as 'yyyy/MM/dd HH:mm:ss:SSSSSSSSS'.",
    ),
    click.option(
        "--tz",
        metavar="ZONE",
        help="Time zone of times without an offset (default UTC), e.g. Europe/Berlin.",
    ),
    click.option(
        "--input-format",
        type=click.Choice(["csv", "parquet", "jsonl"]),
        help="Input format (default: from each file's extension; CSV for -).",
    ),
    click.option(
        "--order-by",
        metavar="COL",
        help="Arrival order from this column instead of file and row order (ties: input order).",
    ),
    click.option(
        "--bad-rows",
        type=click.Choice(["fail", "discard"]),
        default="fail",
        show_default=True,
        help="A bad row (a time that does not parse or is empty, a value that does not "
        "convert, text that is not UTF-8, a CSV line with the wrong number of fields): stop "
        "with an error naming file, line and column, or discard it with reason 'bad input: "
        "...' (counted, written to --discards).",
    ),
    click.option(
        "--key",
        "keys",
        multiple=True,
        metavar="COL",
        help="Each value of COL is an independent stream (repeatable).",
    ),
)

output_options = _stack(
    click.option(
        "-o",
        "--output",
        metavar="PATH",
        default="-",
        show_default=True,
        help="Where to write (file or s3:// URL; - for standard output).",
    ),
    click.option(
        "--output-format",
        type=click.Choice(["csv", "parquet", "jsonl"]),
        help="Output format (default: from the output's extension; CSV on stdout).",
    ),
    click.option("--overwrite", is_flag=True, help="Replace an existing output."),
    click.option(
        "--max-discards",
        type=click.IntRange(min=0),
        metavar="N",
        help="Exit with status 3 when more than N rows were discarded (outputs are still "
        "written): for alerting from cron.",
    ),
    click.option(
        "--discards",
        metavar="PATH",
        help="Also write discarded rows (their columns, arrival, reason, bound).",
    ),
)

session_options = _stack(
    click.option(
        "--master", metavar="URL", help="Spark master (default local[*]; env EVTIME_MASTER)."
    ),
    click.option(
        "--remote",
        metavar="sc://HOST:PORT",
        help="Run on a Spark Connect server (env SPARK_REMOTE).",
    ),
    click.option(
        "--reuse-server",
        is_flag=True,
        help="Run on a persistent local Spark Connect server, started by the first run and "
        "reused by later ones (env EVTIME_REUSE_SERVER=1); see 'evtime server'.",
    ),
    click.option(
        "--conf",
        multiple=True,
        metavar="KEY=VALUE",
        help="Spark setting (repeatable; env EVTIME_CONF=K=V,K=V).",
    ),
    click.option("-v", "--verbose", is_flag=True, help="Spark's warnings and full tracebacks."),
    click.option("-q", "--quiet", is_flag=True, help="No summary on stderr."),
)

adjust_options = _stack(
    click.option(
        "--unit", required=True, type=click.Choice(list(UNITS)), help="Truncate times to this unit."
    ),
    click.option(
        "--range",
        "range_",
        required=True,
        type=click.IntRange(min=0),
        metavar="N",
        help="Hold rows up to N units behind the reference time; discard older.",
    ),
)
