"""``evtime bound`` and ``evtime explain bound`` below their click commands (:func:`bound`,
:func:`explain_bound`): the inputs read, the windows made by the path that fits (``--state``:
:mod:`evtime.runner.bound_state`; only built-in aggregates: one pass over a tally; else the
windows and their closing search), the outputs written and published, the summary."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click

from evtime.runner import bound_state, bound_windows, driver, inputs, publish, state, summary
from evtime.runner.bound_windows import BoundArgs, WindowOptions, check_columns
from evtime.runner.context import Session
from evtime.runner.explained import explain_format, file_source, rejected_frame
from evtime.runner.inputs import Inputs, Read
from evtime.runner.outputs import ExplainArgs


@dataclass(frozen=True)
class ExplainBoundArgs(ExplainArgs):
    """``evtime explain bound``'s options, its Spark and input options aside; ``title``:
    the picture's title (the command as typed), when --plot is given."""

    window: WindowOptions

    @classmethod
    def of(cls, kw: Mapping[str, Any], title: str = "") -> ExplainBoundArgs:
        """The options among the click command's parameters ``kw``."""
        window = WindowOptions.of(kw)
        given = {n: kw[n] for n in ("fmt", "output", "overwrite", "plot")}
        return cls(window, **given, title=title)


def bound(args: BoundArgs, ses: Session, inp: Inputs) -> None:
    """Run ``evtime bound`` (SPEC §4): windows released once the bound says they are final."""
    started = time.monotonic()
    spec = args.window.spec(inp.keys)
    # (--agg computes with CSV columns: read as their text reads, but the marker column)
    inp = inp.but(
        text=(spec.marker[0],) if spec.marker else (),
        keep_text=bool(args.discards),  # (but the discards are written as they were read)
    )
    record = bound_state.state_record(args, spec, inp)
    items = bound_windows.items_of(args.aggs, args.udafs)

    from evtime.errors import UsageError

    state.check_state_outputs(args)
    if not inp.inputs and not args.flush:
        raise UsageError("missing INPUT (only --state DIR --flush runs without one)")
    if args.state:
        try:
            return bound_state.stateful(args, spec, items, record, ses, inp, started)
        except state.NothingToDo as done:
            ses.run.stop_progress()
            if not ses.quiet:
                click.echo(str(done), err=True)
            return
    got = inputs.start(inp, ses, check_columns(spec))
    df, lay, files = got.df, got.lay, got.files
    try:
        _bound(args, spec, items, ses, got, started, df, lay)
    except Exception as err:  # a text value an --agg could not read as a number
        said = _cast_problem(err, df, lay, files, items)
        if said is None:
            raise
        raise said from None


def _cast_problem(err: Exception, df, lay, files, items):  # -> InputError | None
    """Spark's CAST_INVALID_INPUT (an --agg over a text column, one of whose values is
    not a number) as one line naming the file, line and column of the first such value
    (found by one small job), else the column and the value."""
    import re

    from evtime.errors import InputError
    from evtime.io.reader import locate

    m = re.search(
        r"CAST_INVALID_INPUT\] The value '(.*)' of the type \"STRING\" cannot be cast to "
        r"\"(\w+)\"",
        str(err),
    )
    if m is None:
        return None
    value, target = m.group(1), m.group(2)
    aggs = [a for a in items if isinstance(a, str)]
    text = [
        f.name
        for f in lay.schema
        if f.name != lay.time_col
        and _is_text(f.type)
        and any(
            re.search(rf"(?<![\w`]){re.escape(f.name)}(?!\w)|`{re.escape(f.name)}`", a)
            for a in aggs
        )
    ]
    shown = value if len(value) <= 40 else value[:40] + "..."
    what = f"{shown!r} is not a {target.lower()}, which --agg needs here"
    for col in text:
        where = locate(df, files, col, value)
        if where is not None:
            return InputError(f"{where}, column {col!r}: {what}")
    cols = f"column {text[0]!r}: " if len(text) == 1 else ""
    return InputError(f"--agg: {cols}{what}")


def _is_text(t) -> bool:
    import pyarrow as pa

    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _bound(args: BoundArgs, spec, items, ses: Session, got: Read, started, df, lay) -> None:
    """bound without --state, once the input is read."""
    from evtime.engine import bound as engine

    read = inputs.count_read(df, got)  # on the checkpointed input, before any operator
    sinks, df = bound_windows.sinks(args, lay, df)
    if all(isinstance(a, str) for a in items):
        n = _in_one_pass(ses.run, df, spec, items, sinks, lay, got, read)
        counts = bound_windows.counts(n)
        detail = bound_windows.detail(n, counts)
        return summary.summary("bound", ses, counts, started, read, args.max_discards, detail)
    cl = engine.prepare(df, spec, one_chunk=got.one_chunk, as_read=got.as_read)
    w, names = bound_windows.windows(cl, spec, items, lay.schema.names)
    out_frame, key_lay = bound_windows.output(w, spec, names, sinks[0], lay, read)
    # every arrival is routed (the late rows to --discards, if given): the summary's
    # counts come from the writes
    # (without --discards they are only counted: no order needed)
    rows = engine.routed(cl, spec, bool(args.discards))
    if args.discards:
        rows = engine.late_in_order(rows)
    n = publish.publish_jobs(
        ses.run,
        [(out_frame, sinks[:1], key_lay), (inputs.with_rejected(rows, got), sinks[1:], lay)],
    )
    counts = bound_windows.counts(n)
    detail = bound_windows.detail(n, counts)
    summary.summary("bound", ses, counts, started, read, args.max_discards, detail)


def _in_one_pass(run, df, spec, items, sinks, lay, got: Read, read: int) -> dict[str, int]:
    """Without --state or a Python aggregate: one aggregate over the classified rows gives
    the windows, the closing search's points and the route counts
    (:mod:`evtime.engine.bound_tally`); --discards classifies the rows again, for the late
    ones only, numbered from the tally's counts.  The discards' count is that of the rows
    written (so the summary checks the tally against them)."""
    from evtime.engine import bound as engine
    from evtime.engine import bound_tally
    from evtime.engine.scan import arrival_range

    cl = engine.classify(df, spec, one_chunk=got.one_chunk, as_read=got.as_read)
    t, names = bound_windows.analysed(lambda: bound_tally.tally(cl, spec, items), lay.schema.names)
    # (the small table: everything below reads it; lazy, so that the first read, which
    # fetches it when small, also fills it: one job fewer)
    t = t.localCheckpoint(eager=False)
    here = driver.rows_here(run, t)  # (a small tally, bounded: fetched with one job)
    if here is not None:
        routes, windows, limits, size = bound_tally.counts_here(here, spec)
    else:
        routes, windows, limits, size = bound_tally.counts(t, spec)
    if driver.few_rows(run, size):  # a small tally (bounded): searched and ordered here
        made = bound_tally.output_rows_here(t, spec, names, read, here)
        # (written from here: no Spark job)
        out_frame, key_lay = bound_windows.output_here(*made, spec, names, sinks[0], lay)
    else:
        w = bound_tally.windows(t, spec, names, limits)
        out_frame, key_lay = bound_windows.output(w, spec, names, sinks[0], lay, read)
    jobs = [(out_frame, sinks[:1], key_lay)]
    if len(sinks) > 1:
        late = bound_tally.late_rows(cl, t, engine.ARRIVAL, got.one_chunk)
        late = engine.routed(late, spec, True)
        late = engine.late_in_order(late, limits=arrival_range(read))
        jobs.append((inputs.with_rejected(late, got), sinks[1:], lay))
    written = publish.publish_jobs(
        run, jobs, [driver.few_rows(run, windows), run.in_driver][: len(jobs)]
    )
    n = {**routes, "out": written.get("out", 0)}
    if len(sinks) > 1:
        n["discard"] = written.get("discard", 0)
    else:
        n["discard"] = n.get("discard", 0) + inputs.rejected_count(got)
    return n


def explain_bound(args: ExplainBoundArgs, ses: Session, inp: Inputs) -> None:
    """Run ``evtime explain bound`` (SPEC §5): every arrival with the bound after it, its
    decision, the windows it entered and the arrival that released it; --plot also draws
    the stream and the windows."""
    started = time.monotonic()
    if args.plot:
        from evtime.io import plot

        plot.check_path(args.plot, args.overwrite)  # before Spark starts
    spec = args.window.spec(inp.keys)
    from evtime.engine import bound as engine
    from evtime.engine import bound_tally, present
    from evtime.engine.scan import arrival_range, sort_in_parts
    from evtime.io.writer import Sink

    fmt = explain_format(args.fmt, args.output, ses.call.params)
    got = inputs.start(inp, ses, check_columns(spec))
    df, lay, files = got.df, got.lay, got.files
    cl = engine.prepare(df, spec, one_chunk=got.one_chunk, as_read=got.as_read)
    # the windows' positions: found here from a small tally (a run that reads its input
    # here, no picture: the tally fetched with one job), else by the windows and their
    # search in Spark
    here = None
    if ses.run.in_driver and not args.plot:
        rows = driver.rows_here(ses.run, bound_tally.tally(cl, spec, [])[0])
        here = bound_tally.positions_here(cl, spec, rows)
    if here is not None:
        pos, arrivals = here
        limits = arrival_range(arrivals)
    else:
        w, _ = engine.windows(cl, spec, [engine.opened()] if args.plot else [])
        if args.plot:
            w = w.localCheckpoint()  # read by explain and by the picture
        pos = engine.positions(w, spec)
        limits = inputs.arrival_limits(got)
    df = engine.explain(cl, pos, spec, [f.shown for f in files])
    own = present.own_columns(lay.schema.names, lay.time_col)
    summary.note_renamed("explain bound", own)
    frame = present.explain_frame(df, (), own)
    cols = frame.columns
    frame = sort_in_parts(engine.explain_routed(frame), "arrival", limits=limits)
    frame = rejected_frame(frame, got, own, file_source(files))
    sink = Sink(
        "explain",
        ("out", "discard", "bound"),
        args.output,
        fmt,
        cols,
        ["time", "evtime", "bound"],
        args.overwrite,
        own=present.own_map(own),
    )
    counts = publish.write_and_publish(ses.run, frame, [sink], lay)
    if args.plot:
        windows, wk, wtotal = plot.sample_windows(engine.spans(w, spec), spec.keys)
        shown = dict(own)
        plot.plot(
            frame,
            sum(counts.values()),
            args.plot,
            args.title,
            keys=tuple(shown[k] for k in spec.keys),
            windows=windows,
            wk=wk,
            wtotal=wtotal,
        )
    summary.summary("explain bound", ses, counts, started)
