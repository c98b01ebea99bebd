"""evtime adjust: timestamp adjustment (SPEC §2)."""

from __future__ import annotations

import contextlib
import time

import click

from evtime.cli import options
from evtime.runner import inputs, outputs, publish, state, summary

EXAMPLES = """
\b
Examples:
  evtime adjust --unit msec --range 999 samples/tuples.parquet
  evtime adjust --unit sec --range 2 --key device -o sorted.parquet 'in/*.csv'
  cat events.csv | evtime adjust --unit msec --range 500 --discards late.csv - | head
"""


@click.command(cls=options.Command, epilog=EXAMPLES)
@options.adjust_options
@options.stack(
    click.option(
        "--as",
        "as_",
        default="evtime",
        show_default=True,
        metavar="NAME",
        help="Name of the adjusted-time column added to every row.",
    ),
    click.option(
        "--emit-bounds",
        is_flag=True,
        help="Needs --bound-marker. The output also carries a bound row (marker column set to "
        "VALUE, time and adjusted time = ref - range*unit, key columns set) wherever a key's "
        "reference time moves, for `evtime bound --bounds markers` downstream.",
    ),
    click.option(
        "--bound-marker",
        metavar="COL=VALUE",
        help="How emitted bound rows are marked (COL is added when the input lacks it).",
    ),
    section="Output",
)
@options.output_options
@options.state_options
@options.flushable_input_options
@options.session_options
def adjust(**kw) -> None:
    """Order rows by event time, holding late ones within a range.

    Truncate times to a unit, hold rows up to a range behind the reference time (the latest
    time seen), discard older ones, and release the rest in time order."""
    with contextlib.ExitStack() as shared:
        _adjust(kw, shared)


def _adjust(kw: dict, shared: contextlib.ExitStack) -> None:
    started = time.monotonic()
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    from evtime.engine import adjust as engine
    from evtime.engine.adjust import choose, in_place
    from evtime.errors import UsageError
    from evtime.io.staging import shared_dir
    from evtime.units import truncated_range

    spec = engine.AdjustSpec(kw["unit"], kw["range_"], inp.keys)
    outputs.added_name("--as", kw["as_"])
    if kw["emit_bounds"] and "=" not in (kw["bound_marker"] or ""):
        raise UsageError("--emit-bounds needs --bound-marker COL=VALUE (how bound rows look)")
    state.check_state_outputs(state.StateArgs.of(kw))
    if not inp.inputs and not kw["flush"]:
        raise UsageError("missing INPUT (only --state DIR --flush runs without one)")
    if kw["state"]:
        if kw["emit_bounds"]:
            raise UsageError("--emit-bounds cannot be combined with --state")
        try:
            return _stateful(kw, spec, ses, inp, started)
        except state.NothingToDo as done:
            ses.run.stop_progress()
            if not ses.quiet:
                click.echo(str(done), err=True)
            return
    # the reference time itself is needed only to say why a row was discarded, and by
    # --emit-bounds; without them the keep flag comes out of the output's own sort
    # (a small input read here is quicker with the prefix scan: fewer Spark jobs to plan)
    early = None
    if not (kw["discards"] or kw["emit_bounds"] or spec.keys):  # (while Spark starts)
        early = inputs.from_footers(lambda foot, _: in_place.early_adjust(spec, foot))
    got = inputs.start(inp, ses, meanwhile=early)
    df, lay = got.df, got.lay
    read = inputs.count_read(df, got)  # on the checkpointed input, before any operator
    own = lay.schema.names
    facts = choose.Facts(
        in_driver=ses.run.in_driver,
        rejected=got.rejected is not None,  # (not every row an arrival, as read)
        discards=bool(kw["discards"]),
        emit_bounds=bool(kw["emit_bounds"]),
    )
    zones = lambda: shared.enter_context(shared_dir())  # noqa: E731 (only when taken)
    # the time range, when known (read here, or in the Parquet footers): no job to find it
    limits = truncated_range(got.time_range, spec.unit_ns)
    ctx = choose.Run(read, got.as_read, limits, zones, got.found_early, got.one_chunk)
    path = choose.choose(spec, facts, df, ctx)
    classified, step = path.adjust(df)
    df, sinks = _sinks(classified, spec, own, kw, got.as_read)
    out = sinks[0]
    df, reroute = path.routed(df, step)
    if reroute:  # the keep flag is found as each part is written: the route with it
        step = publish.Routed(step, choose.route_of)
    if kw["emit_bounds"]:
        marker = kw["bound_marker"]
        df, out.columns = engine.with_bounds(
            df, spec, lay, marker, got.time_format, got.tz, out.columns
        )
        out.routes = ("out", "emit")
    else:
        df = path.ordered(df)
    df = inputs.with_rejected(df, got)
    counts = publish.write_and_publish(ses.run, df, sinks, lay, step)
    summary.summary("adjust", ses, counts, started, read, kw["max_discards"])


def _stateful(kw, spec, ses, inp, started) -> None:
    """``adjust --state DIR [--flush]``: continue the stream saved in DIR (SPEC §2 over
    all runs' inputs as one stream), commit the outputs and the new state together."""
    box: list = []
    options = {"--unit": spec.unit, "--range": spec.range, "--key": list(spec.keys)}
    options["--order-by"] = inp.order_by
    try:
        opener = state.state_opener(state.StateArgs.of(kw), "adjust", options, box)
        got = inputs.start(inp, ses, before_spark=opener)
        spark, df, lay = got.spark, got.df, got.lay
        (stf,) = box
        _stateful_run(kw, spec, ses, got, started, spark, df, lay, stf)
    finally:
        for stf in box:
            stf.sd.close()  # the lock on DIR


def _stateful_run(kw, spec, ses, got, started, spark, df, lay, stf) -> None:

    from evtime.engine import adjust as engine
    from evtime.io.reader import T
    from evtime.io.writer import Sink

    good = inputs.count_good(df, got)  # bad rows (--bad-rows discard) take no arrival number
    read = good + inputs.rejected_count(got)
    own = lay.schema.names
    refs, carried = stf.read(spark, "refs.parquet"), stf.read(spark, "held.parquet")
    df = engine.classify(df, spec, refs, one_chunk=got.one_chunk, as_read=got.as_read)
    df = engine.carry_on(df, spec, carried, refs, stf.st.arrivals, stf.flush)
    df, sinks = _sinks(df, spec, own, kw)

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
    summary.summary("adjust", ses, counts, started, read, kw["max_discards"], carried=stf.carried)


def _sinks(df, spec, own: list[str], kw: dict, as_read=None):
    """The output (own columns + the adjusted time as ``--as``) and ``--discards`` sinks,
    with the columns they need added to the classified ``df`` (``as_read``: the input as
    read, for the discards' arrival numbers)."""
    from evtime.engine import adjust as engine
    from evtime.errors import UsageError
    from evtime.io.writer import Derived, Sink, output_format

    if kw["as_"] in own:
        raise UsageError(
            f"the input already has a column {kw['as_']!r}: name the adjusted "
            "time otherwise with --as NAME"
        )
    out = Sink(
        "output",
        ("out",),
        kw["output"],
        output_format(kw["output"], kw["output_format"]),
        [*own, kw["as_"]],
        [kw["as_"]],
        kw["overwrite"],
        derived={kw["as_"]: Derived(engine.EVT)},  # (the adjusted time, made where written)
    )
    if not kw["discards"]:
        return df, [out]
    df, copies = outputs.keep_own(df, own)
    out.derived.update({c: Derived(k) for c, k in copies.items()})
    df = engine.with_discard_columns(df, spec, as_read)
    late = outputs.discards_sink(
        kw["discards"], kw["overwrite"], own, copies=copies, command="adjust"
    )
    return df, [out, late]
