"""``evtime merge`` and ``evtime explain merge`` below the command line: several sources into
one stream by event time (SPEC §3).  :func:`merge` checks its options, classifies the rows
(in order, or by the prefix scan: see docs/ARCHITECTURE.md), writes and publishes them and
summarises; ``--state`` goes to :mod:`evtime.runner.merge_state`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import click

from evtime.errors import UsageError
from evtime.runner import inputs, outputs, publish, summary
from evtime.runner.context import Session
from evtime.runner.explained import explain_format, rejected_frame
from evtime.runner.inputs import Inputs, Read
from evtime.runner.merge_setup import MergeArgs, MergeOptions, setup


@dataclass(frozen=True)
class ExplainMergeArgs(outputs.ExplainArgs):
    """``evtime explain merge``'s options besides the inputs and the session: the
    operator's, the table's (``--format``, ``-o``, ``--overwrite``) and ``--plot PATH``
    with its title (the command as typed)."""

    operator: MergeOptions


def merge(args: MergeArgs, ses: Session, inp: Inputs) -> None:
    """``evtime merge``: the rows of every source released in event-time order, or
    discarded with a reason; the bound rows of ``--emit-bounds``; ``--state`` continued."""
    started = time.monotonic()
    if args.emit_bounds and not args.operator.bound_marker:
        raise UsageError("--emit-bounds needs --bound-marker COL=VALUE (how bound rows look)")
    outputs.added_name("--as", args.as_)
    outputs.added_name("--source-as", args.source_as)
    if args.as_ == args.source_as:
        raise UsageError("--as and --source-as name the same column")
    check = _added_columns_check(args)
    if not inp.inputs and not args.flush:
        raise UsageError("missing SOURCE (only --state DIR --flush runs without one)")
    if args.state or args.flush:
        if args.emit_bounds:
            raise UsageError("--emit-bounds cannot be combined with --state")
        from evtime.runner.merge_state import stateful

        return stateful(args, ses, inp, check, started)
    _merge(args, ses, inp, check, started)


def _added_columns_check(args: MergeArgs) -> Callable:
    """A ``check(layout)``: the input has no column named as ``--as`` or ``--source-as``."""

    def check(lay) -> None:
        own = lay.schema.names
        for name, opt in ((args.as_, "--as"), (args.source_as, "--source-as")):
            if name in own:
                raise UsageError(
                    f"the input already has a column {name!r}: name the added column "
                    f"otherwise with {opt} NAME"
                )

    return check


def _early(discards: str | None) -> Callable:
    """The ``meanwhile`` of setup: the in-order search's carry, found from the Parquet
    footers while Spark starts (None when the run takes the prefix scan)."""

    def early(spec):
        if not spec.simple or spec.marker or (discards and spec.width):
            return None
        from evtime.engine import merge as engine

        def find(foot, files):
            return engine.early_carry(spec, foot, [f.group for f in files])

        return inputs.from_footers(find)

    return early


def _classified(df, spec, got: Read, discards: str | None, in_driver: bool, limits):
    """The rows classified, ``(df, step)``: in order (sources one after the other, only data
    rows: the keep flag out of the output's own sort, given by ``step`` as the parts are
    written) or by the prefix scan (``step`` None; :func:`engine.classified` says where)."""
    from evtime.engine import merge as engine

    step = None
    if spec.simple and not (spec.marker or (discards and spec.width) or in_driver):
        late = engine.late_rows(df, spec, got.as_read) if discards else None
        df, step = engine.classify_in_order(
            df, spec, limits, late, got.as_read, got.sources, got.found_early
        )
    if step is None:
        df = engine.classified(df, spec, in_driver, shown=bool(discards))
    return df, step


def _sinks(args: MergeArgs, spec, own: list[str], copies: dict[str, str]) -> list:
    """``-o`` (with the bound rows of --emit-bounds) and ``--discards``; the source's name
    and the event time are made in Arrow, where the rows are written."""
    from evtime.engine import merge as engine
    from evtime.io.writer import Derived, Sink, output_format

    routes = engine.route_names(spec)
    derived = {
        args.source_as: Derived(engine.SRC, tuple(spec.names)),
        args.as_: Derived(engine.EVT),
    }
    sinks = [
        Sink(
            "output",
            (*routes_of(routes, "out:"), "emit"),
            args.output,
            output_format(args.output, args.output_format),
            [*own, args.source_as, args.as_],
            [args.as_],
            args.overwrite,
            derived={**derived, **{c: Derived(k) for c, k in copies.items()}},
        )
    ]
    if args.discards:
        added, discard_routes = (args.source_as, args.as_), routes_of(routes, "discard:")
        late = outputs.discards_sink(
            args.discards, args.overwrite, own, added, (args.as_,), discard_routes, copies, "merge"
        )
        late.derived.update(derived)
        sinks.append(late)
    return sinks


def routes_of(routes: list[str], kind: str) -> tuple[str, ...]:
    """The routes of one kind (``out:``, ``discard:``) of :func:`engine.merge.route_names`."""
    return tuple(r for r in routes if r.startswith(kind))


def _merge(args: MergeArgs, ses: Session, inp: Inputs, check: Callable, started: float) -> None:
    """merge without ``--state``."""
    ses, got, spec, df, lay = setup(
        ses, inp, args.operator, "merge", check, meanwhile=_early(args.discards)
    )
    read = inputs.count_read(df, got)  # on the checkpointed input, before any operator
    copies: dict[str, str] = {}
    if args.discards:  # (the row's own arrival, reason, bound: kept before the operator's)
        df, copies = outputs.keep_own(df, lay.schema.names)
    from evtime.columns import SEQ
    from evtime.engine import merge as engine
    from evtime.engine.scan import sort_in_parts
    from evtime.units import truncated_range

    # the time range, when known (read here, or in the Parquet footers): no job to find it
    limits = truncated_range(got.time_range, spec.unit_ns)
    df, step = _classified(df, spec, got, args.discards, ses.run.in_driver, limits)
    if args.discards and step is None:  # (with a step, the step gives them)
        df = engine.with_discard_columns(df, spec, got.as_read)
    sinks = _sinks(args, spec, lay.schema.names, copies)
    rows = engine.output_rows(df, routed=step is None)
    if args.emit_bounds:
        rows = engine.with_emitted_bounds(rows, df, spec, lay, got.time_format, got.tz)
    if step is None:
        rows = sort_in_parts(rows, engine.EVT, SEQ, engine.KIND, limits=limits)
    else:
        routes = engine.route_names(spec)
        step = publish.Routed(step, partial(engine.route_numbers, routes), (engine.SRC,))
    rows = inputs.with_rejected(rows, got, route=engine.rejected_route())
    counts = publish.write_and_publish(ses.run, rows, sinks, lay, step)
    merge_summary("merge", ses, spec, counts, started, read, args.max_discards)


def explain_merge(args: ExplainMergeArgs, ses: Session, inp: Inputs) -> None:
    """``evtime explain merge``: every row in arrival order with its decision and why (and
    ``--plot``)."""
    started = time.monotonic()
    if args.plot:
        from evtime.io import plot

        plot.check_path(args.plot, args.overwrite)  # before Spark starts
    ses, got, spec, df, lay = setup(ses, inp, args.operator, "explain merge")
    from evtime.columns import ROUTE, SEQ
    from evtime.engine import merge as engine
    from evtime.engine import present
    from evtime.engine.scan import sort_in_parts
    from evtime.io.writer import Sink

    if ses.run.in_driver:  # (a few rows: every step here, one job to fetch them)
        df = engine.explained_here(df, spec)
    else:
        df = engine.explained_routed(engine.classify(df, spec), spec, got.as_read)
    own = present.own_columns(lay.schema.names, lay.time_col)
    summary.note_renamed("explain merge", own)
    hidden = [(ROUTE, ROUTE), (SEQ, SEQ), ("_x_source_bound", "_evt_source_bound")]
    frame = present.explain_frame(df, (), [*own, *hidden])
    cols = [c for c in frame.columns if c not in {h for _, h in hidden}]
    sink = Sink(
        "explain",
        tuple(engine.route_names(spec)),
        args.output,
        explain_format(args.fmt, args.output, ses.call.params),
        cols,
        [c for c in present.NS_COLUMNS if c != "ref"],  # (a row's own ref is its own)
        args.overwrite,
        own=present.own_map(own),
    )
    frame = rejected_frame(
        sort_in_parts(frame, "arrival", SEQ, limits=inputs.arrival_limits(got)),
        got,
        own,
        engine.source_name(spec),
        engine.rejected_route(),
    )
    counts = publish.write_and_publish(ses.run, frame, [sink], lay)
    if args.plot:
        plot.plot(
            frame.withColumnRenamed("_evt_source_bound", "source_bound"),
            sum(counts.values()),
            args.plot,
            args.title,
            extra=("source_bound",),
            bound_label="definitive time after arrival",
            sources_leave=spec.join_leave,
        )
    merge_summary("explain merge", ses, spec, counts, started)


def merge_summary(
    command: str,
    ses: Session,
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


def _print_summary(command: str, ses: Session, spec, counts: dict[str, int], started) -> None:
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
