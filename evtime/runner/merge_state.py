"""``evtime merge --state DIR [--flush]``: a merged stream continued across runs (SPEC §3;
the commit protocol is evtime.io.state's, shared with adjust)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace

import click

from evtime.errors import UsageError
from evtime.runner import inputs, outputs
from evtime.runner.context import Session
from evtime.runner.inputs import Inputs
from evtime.runner.merge_setup import MergeArgs, MergeOptions, setup, sources
from evtime.runner.state import (
    NothingToDo,
    check_state_outputs,
    state_opener,
    write_and_commit,
)


class Stream:
    """The ``stream`` hook of :func:`evtime.runner.merge_setup.setup`: opens ``--state
    DIR`` before Spark starts and maps this run's sources to the stream's (by NAME)."""

    def __init__(self, state_dir: str, flush: bool, options: dict):
        self.state_dir, self.flush, self.options, self.box = state_dir, flush, options, []
        self.names: tuple[str, ...] = ()  # the stream's sources, in the stream's order
        self.given: list[str] = []  # this run's sources (command-line order)
        self.carried = None

    def opener(self, given: list[str]):
        from evtime.engine.merge_state import Carried

        self.given = list(given)
        where = outputs.OutputArgs(state=self.state_dir, flush=self.flush)
        inner = state_opener(where, "merge", self.options, self.box)

        def open_(files, lay):
            lay = inner(files, lay)
            st = self.box[0].st
            known = () if st.fresh else tuple(st.meta["sources"])
            self.carried = (
                Carried() if st.fresh else Carried.from_json(st.meta["merge"], st.arrivals)
            )
            self.names = (*known, *[n for n in given if n not in known])
            at = [self.names.index(n) for n in given]
            if at != sorted(at):
                raise UsageError(
                    f"--state {self.state_dir}: the stream's sources are "
                    f"{', '.join(self.names)}, in this order: give them in that order (new "
                    "sources after them)"
                )
            return lay

        return open_

    def sources(self, spec, groups: list[int]):
        index = {n: i for i, n in enumerate(self.names)}
        return replace(spec, names=self.names), [index[self.given[g]] for g in groups]


def options_of(opts: MergeOptions, inp: Inputs) -> dict:
    """The options a stream keeps from run to run (a state of others is refused)."""
    marker = opts.bound_marker
    return {
        "--arrival": opts.arrival,
        "--wait": opts.wait,
        "--order-by": inp.order_by,
        "--bound-marker": "=".join(marker) if marker else None,
        "--strict-bounds": opts.strict_bounds,
        "--tick": opts.tick,
        "--unit": opts.unit,
        "--range": opts.range,
        "--time-format": inp.time_format,
        "--tz": inp.tz,
    }


def stateful(args: MergeArgs, ses: Session, inp: Inputs, check: Callable, started: float) -> None:
    """``merge --state DIR [--flush]``; ``check(layout)``: merge's own check of the input's
    columns."""
    check_state_outputs(args)
    if args.operator.join_leave:
        raise UsageError(
            "--join-leave cannot be combined with --state (a source's last row is not known "
            "before the stream ends)"
        )
    unnamed = [n for n, p in zip(*sources(inp.inputs), strict=True) if n == p]
    if unnamed:
        raise UsageError(
            f"--state needs every source named, as NAME=PATH ({unnamed[0]}): the stream "
            "knows its sources by name from run to run"
        )
    stream = Stream(args.state, args.flush, options_of(args.operator, inp))
    try:
        _run(args, ses, inp, check, started, stream)
    except NothingToDo as done:  # (raised before Spark starts: no progress line yet)
        if not ses.quiet:
            click.echo(str(done), err=True)
    finally:
        for stf in stream.box:
            stf.sd.close()  # the lock on DIR


def _sinks(args: MergeArgs, spec, own: list[str]) -> list:
    """The outputs of a stateful run: ``-o`` and ``--discards`` (committed with the state)."""
    from evtime.engine import merge as engine
    from evtime.io.writer import Sink, output_format

    routes = engine.route_names(spec)
    sinks = [
        Sink(
            "output",
            tuple(r for r in routes if r.startswith("out:")),
            args.output,
            output_format(args.output, args.output_format),
            [*own, args.source_as, args.as_],
            [args.as_],
            args.overwrite,
        )
    ]
    if args.discards:
        sinks.append(
            outputs.discards_sink(
                args.discards,
                args.overwrite,
                own,
                (args.source_as, args.as_),
                (args.as_,),
                tuple(r for r in routes if r.startswith("discard:")),
            )
        )
    return sinks


def _run(
    args: MergeArgs, ses: Session, inp: Inputs, check: Callable, started: float, stream: Stream
) -> None:
    from evtime.columns import SEQ
    from evtime.engine import merge as engine
    from evtime.engine import merge_state as engine_state
    from evtime.engine.scan import sort_in_parts
    from evtime.io.writer import Sink
    from evtime.units import truncated_range

    ses, got, spec, df, lay = setup(ses, inp, args.operator, "merge", check, stream=stream)
    (stf,) = stream.box
    good = inputs.count_good(df, got)  # bad rows (--bad-rows discard) take no arrival number
    read = good + inputs.rejected_count(got)
    held = stf.read(df.sparkSession, "held.parquet")
    rows, nxt = engine_state.classify(
        df, spec, stream.carried, held, stf.flush, got.one_chunk, got.as_read
    )
    own = lay.schema.names
    if args.discards:
        rows = engine_state.with_discard_columns(rows, spec, stream.carried)
    sinks = _sinks(args, spec, own)
    rows = engine_state.output_rows(rows, spec, args.source_as, args.as_)
    # default mode: sources one after the other, so ties go by source first
    then = (engine.SRC, SEQ) if spec.simple else (SEQ,)
    # the parts cut by this run's times as read (no aggregate job; a carried row outside
    # them goes to the first or the last part, in order all the same)
    limits = truncated_range(got.time_range, spec.unit_ns)
    rows = inputs.with_rejected(
        sort_in_parts(rows, engine.EVT, *then, limits=limits),
        got,
        {args.source_as: engine.source_name(spec)},
        engine.rejected_route(),
    )

    def state_sinks(gen: str) -> list:
        cols = [*own, *engine_state.HELD_COLUMNS]
        return [Sink("held", ("held",), f"{gen}/held.parquet", "parquet", cols, raw=True)]

    meta = {
        "command": "merge",
        "arrivals": stream.carried.arrivals + good,
        "sources": list(spec.names),
        "merge": nxt.to_json(),
    }
    counts = write_and_commit(ses.run, rows, sinks, lay, stf, state_sinks, meta)
    stateful_summary(ses, spec, counts, started, read, stf.carried, args.max_discards)


def stateful_summary(
    ses: Session,
    spec,
    counts: dict[str, int],
    started: float,
    read: int,
    carried: int,
    max_discards: int | None,
) -> None:
    """``read R, carried C, released X, discarded D, held H`` (+ bound rows), then per
    source; checks R + C = X + D + H + bound rows (a mismatch is an internal error)."""
    from evtime.errors import EvtimeError, TooManyDiscards

    ses.run.stop_progress()

    def get(kind: str, s: int | None = None) -> int:
        if s is None:
            return sum(counts.get(f"{kind}:{i}", 0) for i in range(spec.n))
        return counts.get(f"{kind}:{s}", 0)

    out, disc, bnd, held = get("out"), get("discard"), get("bound"), counts.get("held", 0)
    if read + carried != out + disc + bnd + held:
        raise EvtimeError(
            f"internal error: read {read} + carried {carried} rows but released {out} + "
            f"discarded {disc} + bound rows {bnd} + held {held} = {out + disc + bnd + held}; "
            "please report this"
        )
    if not ses.quiet:
        b = f", bound rows {bnd}" if bnd else ""
        head = f"read {read}, carried {carried}, released {out}, discarded {disc}, held {held}{b}"
        per = "".join(
            f"; {name}: released {get('out', s)}, discarded {get('discard', s)}"
            + (f", bound rows {get('bound', s)}" if get("bound", s) else "")
            for s, name in enumerate(spec.names)
        )
        click.echo(f"evtime merge: {head}{per} ({time.monotonic() - started:.1f}s)", err=True)
        sys.stderr.flush()
    if max_discards is not None and disc > max_discards:
        raise TooManyDiscards(f"{disc} rows discarded, more than --max-discards {max_discards}")
