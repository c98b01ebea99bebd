"""``evtime adjust`` below its click command (:func:`adjust`): the inputs read, the path
:func:`evtime.engine.adjust.choose.choose` picks run, the outputs written and published,
the summary; with ``--state DIR`` the stream continued and committed with the outputs."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click

from evtime.runner import inputs, outputs, publish, state, summary
from evtime.runner.context import Session
from evtime.runner.inputs import Inputs


@dataclass(frozen=True)
class AdjustArgs(outputs.OutputArgs):
    """adjust's options, its Spark and input options aside (:class:`Session`,
    :class:`Inputs`); named as the click command names them."""

    unit: str
    range_: int
    as_: str = "evtime"
    emit_bounds: bool = False
    bound_marker: str | None = None

    @classmethod
    def of(cls, kw: Mapping[str, Any]) -> AdjustArgs:
        """The options among the click command's parameters ``kw``."""
        return cls(**{f.name: kw[f.name] for f in dataclasses.fields(cls)})


def adjust(args: AdjustArgs, ses: Session, inp: Inputs) -> None:
    """Run ``evtime adjust`` (SPEC §2): a directory its tasks share lives as long as the
    run."""
    started = time.monotonic()
    with contextlib.ExitStack() as shared:
        _adjust(args, ses, inp, shared, started)


def _adjust(
    args: AdjustArgs, ses: Session, inp: Inputs, shared: contextlib.ExitStack, started: float
) -> None:
    from evtime.engine import adjust as engine
    from evtime.engine.adjust import choose, in_place
    from evtime.errors import UsageError
    from evtime.io.staging import shared_dir
    from evtime.units import truncated_range

    spec = engine.AdjustSpec(args.unit, args.range_, inp.keys)
    outputs.added_name("--as", args.as_)
    if args.emit_bounds and "=" not in (args.bound_marker or ""):
        raise UsageError("--emit-bounds needs --bound-marker COL=VALUE (how bound rows look)")
    state.check_state_outputs(args)
    if not inp.inputs and not args.flush:
        raise UsageError("missing INPUT (only --state DIR --flush runs without one)")
    if args.state:
        if args.emit_bounds:
            raise UsageError("--emit-bounds cannot be combined with --state")
        try:
            return _stateful(args, spec, ses, inp, started)
        except state.NothingToDo as done:
            ses.run.stop_progress()
            if not ses.quiet:
                click.echo(str(done), err=True)
            return
    # the reference time itself is needed only to say why a row was discarded, and by
    # --emit-bounds; without them the keep flag comes out of the output's own sort
    # (a small input read here is quicker with the prefix scan: fewer Spark jobs to plan)
    early = None
    if not (args.discards or args.emit_bounds or spec.keys):  # (while Spark starts)
        early = inputs.from_footers(lambda foot, _: in_place.early_adjust(spec, foot))
    got = inputs.start(inp, ses, meanwhile=early)
    df, lay = got.df, got.lay
    read = inputs.count_read(df, got)  # on the checkpointed input, before any operator
    own = lay.schema.names
    facts = choose.Facts(
        in_driver=ses.run.in_driver,
        rejected=got.rejected is not None,  # (not every row an arrival, as read)
        discards=bool(args.discards),
        emit_bounds=bool(args.emit_bounds),
    )
    zones = lambda: shared.enter_context(shared_dir())  # noqa: E731 (only when taken)
    # the time range, when known (read here, or in the Parquet footers): no job to find it
    limits = truncated_range(got.time_range, spec.unit_ns)
    ctx = choose.Run(read, got.as_read, limits, zones, got.found_early, got.one_chunk)
    path = choose.choose(spec, facts, df, ctx)
    classified, step = path.adjust(df)
    classified = inputs.where_written(got, classified, step, ses.verbose, "ordered")
    df, sinks = _sinks(classified, spec, own, args, got.as_read, got.one_chunk)
    out = sinks[0]
    df, reroute = path.routed(df, step)
    if reroute:  # the keep flag is found as each part is written: the route with it
        step = publish.Routed(step, choose.route_of)
    if args.emit_bounds:
        df, out.columns = engine.with_bounds(
            df, spec, lay, args.bound_marker, got.time_format, got.tz, out.columns
        )
        out.routes = ("out", "emit")
    else:
        df = path.ordered(df)
    df = inputs.with_rejected(df, got)
    counts = publish.write_and_publish(ses.run, df, sinks, lay, step)
    summary.summary("adjust", ses, counts, started, read, args.max_discards)


def _stateful(args: AdjustArgs, spec, ses: Session, inp: Inputs, started: float) -> None:
    """``adjust --state DIR [--flush]``: continue the stream saved in DIR (SPEC §2 over
    all runs' inputs as one stream), commit the outputs and the new state together."""
    box: list = []
    record = {"--unit": spec.unit, "--range": spec.range, "--key": list(spec.keys)}
    record["--order-by"] = inp.order_by
    try:
        got = inputs.start(
            inp,
            ses,
            before_spark=state.state_opener(args, "adjust", record, box),
        )
        spark, df, lay = got.spark, got.df, got.lay
        (stf,) = box
        _stateful_run(args, spec, ses, got, started, spark, df, lay, stf)
    finally:
        for stf in box:
            stf.sd.close()  # the lock on DIR


def _stateful_run(args: AdjustArgs, spec, ses, got, started, spark, df, lay, stf) -> None:
    from evtime.columns import T
    from evtime.engine import adjust as engine
    from evtime.io.writer import Sink

    good = inputs.count_good(df, got)  # bad rows (--bad-rows discard) take no arrival number
    read = good + inputs.rejected_count(got)
    own = lay.schema.names
    refs, carried = stf.read(spark, "refs.parquet"), stf.read(spark, "held.parquet")
    df = engine.classify(df, spec, refs, one_chunk=got.one_chunk, as_read=got.as_read)
    df = engine.carry_on(
        df, spec, carried, refs, stf.st.arrivals, stf.flush, got.one_chunk, got.as_read
    )
    df, sinks = _sinks(df, spec, own, args)

    def state_sinks(gen: str) -> list:
        held_cols = [*own, T, engine.ARRIVAL]
        return [
            Sink("held", ("held",), f"{gen}/held.parquet", "parquet", held_cols, raw=True),
            Sink(
                "refs",
                ("ref",),
                f"{gen}/refs.parquet",
                "parquet",
                [*spec.keys, engine.REF],
                raw=True,
            ),
        ]

    meta = {"command": "adjust", "arrivals": stf.st.arrivals + good}
    df = inputs.with_rejected(engine.order(df), got)
    counts = state.write_and_commit(ses.run, df, sinks, lay, stf, state_sinks, meta)
    summary.summary("adjust", ses, counts, started, read, args.max_discards, carried=stf.carried)


def _sinks(df, spec, own: list[str], args: AdjustArgs, as_read=None, one_chunk=False):
    """The output (own columns + the adjusted time as ``--as``) and ``--discards`` sinks,
    with the columns they need added to the classified ``df`` (``as_read``, ``one_chunk``:
    what the reading knows, for the discards' arrival numbers)."""
    from evtime.engine import adjust as engine
    from evtime.errors import UsageError
    from evtime.io.writer import Derived, Sink, output_format

    if args.as_ in own:
        raise UsageError(
            f"the input already has a column {args.as_!r}: name the adjusted "
            "time otherwise with --as NAME"
        )
    out = Sink(
        "output",
        ("out",),
        args.output,
        output_format(args.output, args.output_format),
        [*own, args.as_],
        [args.as_],
        args.overwrite,
        derived={args.as_: Derived(engine.EVT)},  # (the adjusted time, made where written)
    )
    if not args.discards:
        return df, [out]
    df, copies = outputs.keep_own(df, own)
    out.derived.update({c: Derived(k) for c, k in copies.items()})
    df = engine.with_discard_columns(df, spec, as_read, one_chunk)
    late = outputs.discards_sink(
        args.discards, args.overwrite, own, copies=copies, command="adjust"
    )
    return df, [out, late]
