"""``bound --state DIR [--flush]`` (:func:`stateful`): the stream of windows saved in DIR
continued (SPEC §4 over all runs' inputs as one stream); the outputs and the new state are
committed together."""

from __future__ import annotations

from evtime.runner import bound_windows, inputs, state, summary
from evtime.runner.bound_windows import BoundArgs
from evtime.runner.context import Session
from evtime.runner.inputs import Inputs


def state_record(args: BoundArgs, spec, inp: Inputs) -> dict:
    """The options a --state stream must keep from run to run (state.json)."""

    def ns(d: int | None) -> str | None:
        return None if d is None else f"{d}ns"

    return {
        "--window": ns(spec.size),
        "--slide": ns(spec.slide),
        "--offset": ns(spec.offset),
        "--window-end": "inclusive" if spec.inclusive else "exclusive",
        "--bounds": spec.bounds,
        "--bound-marker": "=".join(spec.marker) if spec.marker else None,
        "--strict-bounds": spec.strict,
        "--tick": ns(spec.tick),
        "--cti-every": spec.cti_every,
        "--cti-delay": ns(spec.cti_delay),
        "--late": spec.late,
        "--unit": spec.unit,
        "--range": spec.range,
        "--key": list(spec.keys),
        "--agg": list(args.aggs),
        "--udaf": list(args.udafs),
        "--order-by": inp.order_by,
    }


def stateful(
    args: BoundArgs, spec, items, record: dict, ses: Session, inp: Inputs, started: float
) -> None:
    """Continue the stream saved in ``args.state`` (``record``: :func:`state_record`);
    raises :class:`evtime.runner.state.NothingToDo` for a rerun of the last committed
    run."""
    box: list = []
    try:
        got = inputs.start(
            inp,
            ses,
            bound_windows.check_columns(spec),
            before_spark=state.state_opener(args, "bound", record, box),
        )
        spark, df, lay = got.spark, got.df, got.lay
        (stf,) = box
        _stateful_run(args, spec, items, ses, got, started, spark, df, lay, stf)
    finally:
        for stf in box:
            stf.sd.close()  # the lock on DIR


def _stateful_run(args: BoundArgs, spec, items, ses, got, started, spark, df, lay, stf) -> None:
    from evtime.engine import bound as engine
    from evtime.engine import bound_state as bs
    from evtime.engine.scan import arrival_range
    from evtime.io.writer import Sink

    good = inputs.count_good(df, got)  # bad rows (--bad-rows discard) take no arrival number
    read = good + inputs.rejected_count(got)
    sinks, df = bound_windows.sinks(args, lay, df)
    held, carried = stf.read(spark, "held.parquet"), stf.read(spark, "keys.parquet")
    carried = carried if carried is not None else bs.no_state(df, spec)
    cl = engine.prepare(df, spec, carried, stf.st.arrivals, got.one_chunk, got.as_read)
    rows, keep = bs.open_windows(bs.rows_in_windows(cl, held), carried, spec)
    w, names = bound_windows.windows(cl, spec, items, lay.schema.names, rows, keep)
    out_frame, key_lay = bound_windows.output(
        bs.released(w, stf.flush), spec, names, sinks[0], lay, stf.st.arrivals + good
    )
    kept = bs.next_state(cl, carried, spec)
    # (the arrival numbers of this run and of the carried rows: known, no aggregate job)
    limits = arrival_range(stf.st.arrivals + good)
    frame = bs.routed(cl, held, kept, spec, stf.flush, bool(args.discards), limits)
    frame = inputs.with_rejected(frame, got)
    own = lay.schema.names

    def jobs(gen: str) -> list:
        row_sinks = sinks[1:]
        if not stf.flush:
            row_sinks = [
                *row_sinks,
                Sink(
                    "held",
                    bs.held_routes(),
                    f"{gen}/held.parquet",
                    "parquet",
                    [*own, *bs.HELD_COLUMNS],
                    raw=True,
                ),
                Sink(
                    "keys",
                    ("state",),
                    f"{gen}/keys.parquet",
                    "parquet",
                    [*spec.keys, *bs.STATE_COLUMNS],
                    raw=True,
                ),
            ]
        return [(out_frame, [sinks[0]], key_lay), (frame, row_sinks, lay)]

    meta = {"command": "bound", "arrivals": stf.st.arrivals + good}
    n = state.commit_jobs(ses.run, sinks, jobs, stf, meta)
    counts = {
        "out": n.get("released", 0) + n.get("released:adjusted", 0),
        "discard": n.get("discard", 0),
        "bound": n.get("bound", 0),
        "held": n.get("held", 0) + n.get("held:adjusted", 0),
    }
    detail = bound_windows.detail(n, counts)
    summary.summary(
        "bound", ses, counts, started, read, args.max_discards, detail, carried=stf.carried
    )
