"""Options shared by several commands, defined once so every command spells them the same."""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

import click

from evtime.runner import context
from evtime.units import UNITS

# --help lists options under these headings, in this order (an option's heading is the
# stack it came from; --help and options without one are under "Other")
SECTIONS = ("Operator", "Windows", "Bounds", "Input", "Output", "Incremental", "Spark", "Other")


def stack(*decorators: Callable, section: str | None = None) -> Callable:
    """Apply ``decorators`` as one; their options are listed under ``section`` in --help."""

    def apply(f: Callable) -> Callable:
        before = len(getattr(f, "__click_params__", []))
        for d in reversed(decorators):
            f = d(f)
        if section:
            for p in getattr(f, "__click_params__", [])[before:]:
                if not hasattr(p, "evtime_section"):
                    p.evtime_section = section  # type: ignore[attr-defined]
        return f

    return apply


def section(name: str, decorator: Callable) -> Callable:
    """One option decorator whose option is listed under ``name`` in --help."""
    return stack(decorator, section=name)


class Command(click.Command):
    """A command whose --help lists its options under headings (Operator, Input, Output,
    Spark, ...) and that remembers the arguments it was given (for a picture's title)."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        groups: dict[str, list[tuple[str, str]]] = {}
        for p in self.get_params(ctx):
            record = p.get_help_record(ctx)
            if record is not None:
                groups.setdefault(getattr(p, "evtime_section", "Other"), []).append(record)
        # one column width for every section (write_dl sizes each call on its own terms)
        width = min(max((len(t) for g in groups.values() for t, _ in g), default=0), 30)
        for name in sorted(groups, key=lambda g: SECTIONS.index(g) if g in SECTIONS else 99):
            with formatter.section(name):
                formatter.write_dl([(t.ljust(width), h) for t, h in groups[name]], col_max=30)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["evtime.args"] = list(args)
        return super().parse_args(ctx, args)


def session(kw: dict) -> context.Session:
    """The running command's Spark options (popped from ``kw``) and what the runner needs
    of the command line (:class:`evtime.runner.context.Call`); its progress line is
    stopped when the command's click context closes, however the run ends."""
    ctx = click.get_current_context()
    call = context.Call(
        label="evtime " + ctx.command_path.split(" ", 1)[-1],
        params=MappingProxyType(dict(ctx.params)),
        top=MappingProxyType(ctx.find_root().obj or {}),
    )
    ses = context.session_of(kw, call)
    ctx.call_on_close(ses.run.stop_progress)
    return ses


def typed(drop: tuple[str, ...] = (), flags: tuple[str, ...] = ()) -> str:
    """The running command as the user typed it, without the options in ``drop`` (with
    their values) and the flags in ``flags``; inputs that are paths shown by file name.
    For titles."""
    import os
    import shlex

    ctx = click.get_current_context()
    words: list[str] = []
    skip = False
    for a in ctx.meta.get("evtime.args", []):
        if skip:
            skip = False
            continue
        if a in flags:
            continue
        if a.split("=", 1)[0] in drop:
            skip = "=" not in a
            continue
        name, eq, path = a.rpartition("=")
        if os.sep in path and os.path.exists(path):
            a = name + eq + os.path.basename(path)
        words.append(a)
    return shlex.join(["evtime", *ctx.command_path.split()[1:], *words])


def _time_format(ctx, param, value):
    if value is not None:
        from evtime.io.timeparse import check_format

        try:
            check_format(value)
        except ValueError as err:
            raise click.BadParameter(str(err)) from None
    return value


_input_rest = (
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
        help="Input format (default: from each file's extension; for -, from its first bytes).",
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
input_options = stack(
    click.argument("inputs", nargs=-1, required=True, metavar="INPUT..."),
    *_input_rest,
    section="Input",
)
# for commands with --state: `--state DIR --flush` alone ends a stream without new input
flushable_input_options = stack(
    click.argument("inputs", nargs=-1, required=False, metavar="[INPUT...]"),
    *_input_rest,
    section="Input",
)

# the text of CSV outputs (csvkit / xsv names); checked and applied by evtime.runner.outputs
csv_options = (
    click.option(
        "--delimiter",
        metavar="CHAR",
        help="Field delimiter of CSV outputs (one ASCII character; \\t for a tab).",
    ),
    click.option("--tsv", is_flag=True, help="Tab-separated CSV outputs (--delimiter '\\t')."),
    click.option("--no-header", "no_header", is_flag=True, help="CSV outputs without a header."),
)

# -o as one file, or as a directory of part files (evtime.io.directory)
_output_layout = click.option(
    "--output-layout",
    type=click.Choice(["file", "parts"]),
    default="file",
    show_default=True,
    help="parts: -o names a directory of part files part-00000.EXT, ... in output order, "
    "written by the Spark tasks, with a manifest _SUCCESS written last (as -o DIR/ does).",
)

output_options = stack(
    click.option(
        "-o",
        "--output",
        metavar="PATH",
        default="-",
        show_default=True,
        help="Where to write (file or s3:// URL; - for standard output; a trailing / for "
        "a directory of part files, see --output-layout).",
    ),
    click.option(
        "--output-format",
        "--format",
        "output_format",
        type=click.Choice(["csv", "parquet", "jsonl"]),
        help="Output format (default: from the output's extension; CSV on stdout); "
        "--format is the same option.",
    ),
    click.option("--overwrite", is_flag=True, help="Replace an existing output."),
    _output_layout,
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
    *csv_options,
    section="Output",
)

session_options = stack(
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
        "--staging",
        metavar="URL",
        help="Where Spark's tasks and evtime leave each other files: s3://, gs://, "
        "abfss://, hdfs:// or a directory every executor sees (env EVTIME_STAGING; on a "
        "cluster, default _evtime_temporary/ beside an object-store -o).",
    ),
    click.option(
        "--conf",
        multiple=True,
        metavar="KEY=VALUE",
        help="Spark setting (repeatable; env EVTIME_CONF=K=V,K=V).",
    ),
    click.option(
        "-v",
        "--verbose",
        is_flag=True,
        help="How the input is read, Spark's warnings, full tracebacks.",
    ),
    click.option("-q", "--quiet", is_flag=True, help="No summary on stderr."),
    section="Spark",
)

adjust_options = stack(
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
    section="Operator",
)


def _marker(ctx, param, value):
    if value is None:
        return None
    col, sep, val = value.partition("=")
    if not sep or not col:
        raise click.BadParameter(f"{value!r}: write it COL=VALUE, e.g. kind=bound")
    return col, val


_LENGTHS = ("size", "sizes", "slide")  # (window lengths and hops: refused past the timeline)


def on_timeline(name: str, text: str, ns: int) -> int:
    """A duration of the option ``name`` as evtime computes with it: a window length or hop
    longer than the int64 ns timeline is refused (a usage error); any other duration (a
    wait, a delay, an offset) past it saturates: it reaches past every time as it is."""
    from evtime.units import LAST, clamp

    if name in _LENGTHS and ns > LAST:
        raise click.BadParameter(
            f"{text!r}: longer than the int64 ns timeline (at most {LAST}ns, about 292 years)"
        )
    return clamp(ns)


def duration(ctx, param, value):
    """A duration option's value in ns (e.g. 1ms, -2s); None stays None."""
    if value is None:
        return None
    from evtime.errors import UsageError
    from evtime.units import duration_ns

    try:
        return on_timeline(param.name, value, duration_ns(value))
    except UsageError as err:
        raise click.BadParameter(str(err)) from None


def _tick(ctx, param, value):
    ns = duration(ctx, param, value)
    if ns is not None and ns <= 0:
        from evtime.errors import UsageError

        raise UsageError("--tick must be a positive duration, e.g. 1ns or 1ms")
    return ns


# bound rows (punctuation) in the input: evtime merge and evtime bound
marker_options = stack(
    click.option(
        "--bound-marker",
        metavar="COL=VALUE",
        callback=_marker,
        help="Rows whose COL is VALUE are bound rows (punctuation, heartbeats): a promise "
        "that nothing earlier than their time follows (from their source, or key); they are "
        "never in the output.",
    ),
    click.option(
        "--strict-bounds",
        is_flag=True,
        help="A bound row at t promises times after t, not at or after t (the same as a "
        "bound row at t + tick).",
    ),
    click.option(
        "--tick",
        default="1ns",
        show_default=True,
        metavar="DURATION",
        callback=_tick,
        help="Time resolution of --strict-bounds (and of bound's inclusive window ends): "
        "SQLstream 1ms, StreamInsight 100ns.",
    ),
    section="Bounds",
)

state_options = stack(
    click.option(
        "--state",
        metavar="DIR",
        help="Continue a stream across runs: start from the rows, reference times and "
        "counters saved in the local directory DIR (if any) and, instead of flushing at the "
        "end, save what is still held there, committed together with the outputs.",
    ),
    click.option(
        "--flush",
        is_flag=True,
        help="With --state: end the stream - release everything held and clear the state.",
    ),
    section="Incremental",
)


TABLE_FORMATS = ["table", "csv", "jsonl", "parquet"]


def table_output(what: str) -> Callable:
    """``--format``, ``-o``, ``--overwrite`` of commands that print a table (explain, sweep):
    ``what`` is what gets written."""
    return stack(
        click.option(
            "--format",
            "--output-format",
            "fmt",
            type=click.Choice(TABLE_FORMATS),
            help="table (default on a terminal), csv (default otherwise), jsonl, parquet; "
            "--output-format is the same option.",
        ),
        click.option(
            "-o",
            "--output",
            metavar="PATH",
            default="-",
            show_default=True,
            help=f"Where to write {what} (a trailing / for a directory of part files).",
        ),
        click.option("--overwrite", is_flag=True, help="Replace an existing output."),
        _output_layout,
        *csv_options,
        section="Output",
    )
