"""evtime merge and evtime explain merge: several sources into one stream by event time
(SPEC §3)."""

from __future__ import annotations

import sys
import time
from functools import partial

import click

from evtime.cli import options
from evtime.cli.explain import explain_output, plot_option, plot_title
from evtime.cli.merge_setup import setup
from evtime.runner import inputs, outputs, publish, summary
from evtime.runner.explained import explain_format, rejected_frame
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


def _summary(
    command: str,
    ses,
    spec,
    counts: dict[str, int],
    started: float,
    read: int | None = None,
    max_discards: int | None = None,
) -> None:
    """The summary line on stderr, per source too; checks read = released + discarded +
    bound rows when ``read`` is given (a mismatch is an internal error) and enforces
    ``--max-discards``."""
    from evtime.errors import EvtimeError, TooManyDiscards

    ses.run.stop_progress()
    kinds = ("out", "discard", "bound")
    total = {k: sum(counts.get(f"{k}:{i}", 0) for i in range(spec.n)) for k in kinds}
    if read is not None and read != sum(total.values()):
        raise EvtimeError(
            f"internal error: read {read} rows but released {total['out']} + discarded "
            f"{total['discard']} + bound rows {total['bound']} = {sum(total.values())}; "
            "please report this"
        )
    if not ses.quiet:
        _print_summary(command, ses, spec, counts, started)
    if max_discards is not None and total["discard"] > max_discards:
        raise TooManyDiscards(
            f"{total['discard']} rows discarded, more than --max-discards {max_discards}"
        )


def _print_summary(command: str, ses, spec, counts: dict[str, int], started: float) -> None:
    def part(s: int | None) -> str:
        def get(kind: str) -> int:
            if s is None:
                return sum(counts.get(f"{kind}:{i}", 0) for i in range(spec.n))
            return counts.get(f"{kind}:{s}", 0)

        out, disc, bnd = get("out"), get("discard"), get("bound")
        text = f"read {out + disc + bnd}, released {out}, discarded {disc}"
        return text + (f", bound rows {bnd}" if bnd else "")

    emitted = counts.get("emit", 0)
    head = part(None) + (f", bounds emitted {emitted}" if emitted else "")
    per = "".join(f"; {name}: {part(s)}" for s, name in enumerate(spec.names))
    click.echo(
        f"evtime {command}: {head}{per}{ses.run.empty_note()} ({time.monotonic() - started:.1f}s)",
        err=True,
    )
    sys.stderr.flush()


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
    started = time.monotonic()
    from evtime.errors import UsageError

    emit, as_, source_as = kw.pop("emit_bounds"), kw.pop("as_"), kw.pop("source_as")
    if emit and not kw["bound_marker"]:
        raise UsageError("--emit-bounds needs --bound-marker COL=VALUE (how bound rows look)")
    fmt_time, tz = kw["time_format"], kw["tz"]
    output, out_fmt, overwrite, discards = (
        kw.pop("output"),
        kw.pop("output_format"),
        kw.pop("overwrite"),
        kw.pop("discards"),
    )
    outputs.added_name("--as", as_)
    outputs.added_name("--source-as", source_as)
    if as_ == source_as:
        raise UsageError("--as and --source-as name the same column")

    def check(lay) -> None:
        own = lay.schema.names
        for name, opt in ((as_, "--as"), (source_as, "--source-as")):
            if name in own:
                raise UsageError(
                    f"the input already has a column {name!r}: name the added column "
                    f"otherwise with {opt} NAME"
                )

    max_discards = kw.pop("max_discards")
    state, flush = kw.pop("state"), kw.pop("flush")
    if not kw["inputs"] and not flush:
        raise UsageError("missing SOURCE (only --state DIR --flush runs without one)")
    if state or flush:
        if emit:
            raise UsageError("--emit-bounds cannot be combined with --state")
        from evtime.cli import merge_state

        out = {
            "output": output,
            "output_format": out_fmt,
            "overwrite": overwrite,
            "discards": discards,
            "as_": as_,
            "source_as": source_as,
            "max_discards": max_discards,
            "state": state,
            "flush": flush,
        }
        return merge_state.stateful({**kw, "state": state, "flush": flush}, out, check, started)

    def early(spec):  # the search's carry (see below), found while Spark starts
        if not spec.simple or spec.marker or (discards and spec.width):
            return None
        from evtime.engine import merge as engine

        def find(foot, files):
            return engine.early_carry(spec, foot, [f.group for f in files])

        return inputs.from_footers(find)

    ses, got, spec, df, lay = setup(kw, "merge", check, classify=False, meanwhile=early)
    read = inputs.count_read(df, got)  # on the checkpointed input, before any operator
    copies: dict[str, str] = {}
    if discards:  # (the row's own arrival, reason, bound: kept before the operator adds its)
        df, copies = outputs.keep_own(df, lay.schema.names)
    from pyspark.sql import functions as F

    from evtime.engine import merge as engine
    from evtime.engine.scan import sort_in_parts
    from evtime.io.reader import SEQ
    from evtime.io.writer import ROUTE, Derived, Sink, output_format
    from evtime.units import truncated_range

    # the time range, when known (read here, or in the Parquet footers): no job to find it
    limits = truncated_range(got.time_range, spec.unit_ns)
    # sources one after the other, only data rows: the keep flag comes out of the output's
    # own sort, and the discards' words (without a range) from a prefix scan of a few
    # columns (a small input read here: the prefix scan of whole rows, fewer jobs)
    step = None
    if spec.simple and not (spec.marker or (discards and spec.width) or ses.run.in_driver):
        late = engine.late_rows(df, spec, got.as_read) if discards else None
        df, step = engine.classify_in_order(
            df, spec, limits, late, got.as_read, got.sources, got.found_early
        )
    if step is None:
        df = engine.classify(df, spec)

    own = lay.schema.names
    routes = engine.route_names(spec)
    # the source's name and the event time are made in Arrow, where the rows are written
    derived = {source_as: Derived(engine.SRC, tuple(spec.names)), as_: Derived(engine.EVT)}
    sinks = [
        Sink(
            "output",
            (*[r for r in routes if r.startswith("out:")], "emit"),
            output,
            output_format(output, out_fmt),
            [*own, source_as, as_],
            [as_],
            overwrite,
            derived={**derived, **{c: Derived(k) for c, k in copies.items()}},
        )
    ]
    if discards:
        if step is None:  # (else the step gives them)
            df = engine.with_discard_columns(df, spec, got.as_read)
        discard_routes = tuple(r for r in routes if r.startswith("discard:"))
        late = outputs.discards_sink(
            discards, overwrite, own, (source_as, as_), (as_,), discard_routes, copies, "merge"
        )
        late.derived.update(derived)
        sinks.append(late)
    rows = df.withColumns(
        {
            # (with a step, the route is given as the parts are written)
            ROUTE: engine.route_column() if step is None else F.lit(None).cast("string"),
            "_evt_kind": F.lit(0),
        }
    )
    if emit:
        col, value = spec.marker
        bounds = engine.emitted_bounds(df, spec)
        types = dict(rows.dtypes)
        bounds = bounds.select(
            SEQ,
            engine.EVT,
            engine.bound_time_value(lay, fmt_time, tz)
            .cast(types[lay.time_col])
            .alias(lay.time_col),
            F.lit(value).cast(types[col]).alias(col),
            F.lit("emit").alias(ROUTE),
            F.lit(1).alias("_evt_kind"),
        )
        rows = rows.unionByName(bounds, allowMissingColumns=True)
    if step is None:
        rows = sort_in_parts(rows, engine.EVT, SEQ, "_evt_kind", limits=limits)
    else:
        step = publish.Routed(step, partial(engine.route_numbers, routes), (engine.SRC,))
    rows = inputs.with_rejected(rows, got, route=engine.rejected_route())
    counts = publish.write_and_publish(ses.run, rows, sinks, lay, step)
    _summary("merge", ses, spec, counts, started, read, max_discards)


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
    started = time.monotonic()
    fmt_opt, output, overwrite = kw.pop("fmt"), kw.pop("output"), kw.pop("overwrite")
    plot_path = kw.pop("plot")
    if plot_path:
        from evtime.io import plot

        plot.check_path(plot_path, overwrite)  # before Spark starts
    ses, got, spec, df, lay = setup(kw, "explain merge")
    from evtime.engine import merge as engine
    from evtime.engine import present
    from evtime.engine.scan import sort_in_parts
    from evtime.io.reader import SEQ
    from evtime.io.writer import ROUTE, Sink

    df = engine.explain(df, spec, got.as_read).withColumn(ROUTE, engine.route_column())
    own = present.own_columns(lay.schema.names, lay.time_col)
    summary.note_renamed("explain merge", own)
    hidden = [(ROUTE, ROUTE), (SEQ, SEQ), ("_x_source_bound", "_evt_source_bound")]
    frame = present.explain_frame(df, (), [*own, *hidden])
    cols = [c for c in frame.columns if c not in {h for _, h in hidden}]
    fmt = explain_format(fmt_opt, output, ses.call.params)
    sink = Sink(
        "explain",
        tuple(engine.route_names(spec)),
        output,
        fmt,
        cols,
        [c for c in present.NS_COLUMNS if c != "ref"],  # (a row's own ref is its own)
        overwrite,
        own=present.own_map(own),
    )
    frame = rejected_frame(
        sort_in_parts(frame, "arrival", SEQ),
        got,
        own,
        engine.source_name(spec),
        engine.rejected_route(),
    )
    counts = publish.write_and_publish(ses.run, frame, [sink], lay)
    if plot_path:
        plot.plot(
            frame.withColumnRenamed("_evt_source_bound", "source_bound"),
            sum(counts.values()),
            plot_path,
            plot_title(),
            extra=("source_bound",),
            bound_label="definitive time after arrival",
            sources_leave=spec.join_leave,
        )
    _summary("explain merge", ses, spec, counts, started)


for _cmd in (merge, explain_merge):
    for _p in _cmd.params:
        if _p.name == "inputs":
            _p.metavar = "[SOURCE...]" if _cmd is merge else "SOURCE..."
