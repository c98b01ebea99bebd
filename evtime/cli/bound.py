"""evtime bound / evtime explain bound: strict-bound window aggregation (SPEC §4, §5)."""

from __future__ import annotations

import time

import click

from evtime.cli import options
from evtime.cli.explain import explain_output, plot_option, plot_title
from evtime.runner import driver, inputs, outputs, publish, state, summary
from evtime.runner.explained import explain_format, file_source, rejected_frame
from evtime.units import UNITS

EXAMPLES = """
\b
Examples:
  evtime bound --window 1m --key device --agg 'count(*) AS n' --agg 'avg(temp) AS mean' \\
      --agg 'max(temp) AS peak' --discards late.csv samples/bound/readings.csv
  evtime bound --window 1h --window-end inclusive --bounds markers \\
      --bound-marker kind=bound --strict-bounds --tick 1ms --agg 'sum(shares)' \\
      samples/bound/trades.csv
  evtime bound --window 10s --bounds cti --cti-every 1 --cti-delay 2s --agg 'count(*)' \\
      samples/bound/cti.csv
  evtime bound --window 10m --slide 1m --udaf 'med=samples/bound/udafs.py:SlidingMedian' \\
      --agg 'med(temp) AS median' --key device samples/bound/readings.csv
"""


_duration = options.duration


def bound_options(agg_required: bool):
    return options.stack(
        _window_options(agg_required), _bounds_from, options.marker_options, _bound_sources
    )


def _window_options(agg_required: bool):
    return options.stack(
        click.option(
            "--window",
            "size",
            required=True,
            metavar="SIZE",
            callback=_duration,
            help="Window length, e.g. 1m, 15m, 1h (windows are aligned to the epoch).",
        ),
        click.option(
            "--slide",
            metavar="STEP",
            callback=_duration,
            help="Hop between window starts (hopping windows; default: tumbling, STEP=SIZE).",
        ),
        click.option(
            "--offset",
            metavar="D",
            default="0ns",
            show_default=True,
            callback=_duration,
            help="Shift window starts from the epoch by D (may be negative).",
        ),
        click.option(
            "--window-end",
            type=click.Choice(["exclusive", "inclusive"]),
            default="exclusive",
            show_default=True,
            help="[s, s+SIZE) or [s, s+SIZE] (SQLstream's OVER: a row on the end is in both).",
        ),
        click.option(
            "--agg",
            "aggs",
            multiple=True,
            required=agg_required,
            metavar="EXPR",
            help="A Spark SQL aggregate, e.g. 'count(*)', 'avg(v) AS mean', "
            "'percentile_approx(v, 0.5)', or a --udaf NAME(expr) (repeatable).",
        ),
        click.option(
            "--udaf",
            "udafs",
            multiple=True,
            metavar="NAME=module:Class",
            help="A Python aggregate (class with add, optional remove, result) usable in "
            "--agg as NAME(expr); module may be a file.py (repeatable).",
        ),
        section="Windows",
    )


_bounds_from = options.section(
    "Bounds",
    click.option(
        "--bounds",
        type=click.Choice(["rows", "markers", "cti"]),
        help="Where the bound comes from: every row's time (rows, the default), "
        "--bound-marker rows (markers, the default with --bound-marker), or "
        "generated CTIs (cti).",
    ),
)
_bound_sources = options.stack(
    click.option(
        "--cti-every",
        type=click.IntRange(min=1),
        metavar="N",
        help="--bounds cti: a CTI at every N-th data row of a key (late rows count).",
    ),
    click.option(
        "--cti-delay",
        metavar="D",
        default="0ns",
        show_default=True,
        callback=_duration,
        help="--bounds cti: the CTI is the largest time seen minus D (may be negative: "
        "-1ns puts it one tick past the event).",
    ),
    click.option(
        "--late",
        type=click.Choice(["drop", "adjust"]),
        default="drop",
        show_default=True,
        help="A row below the bound in force: drop it, or move it up to the bound.",
    ),
    click.option(
        "--unit",
        type=click.Choice(list(UNITS)),
        help="Adjust first (as evtime adjust): truncate times to this unit ...",
    ),
    click.option(
        "--range",
        "range_",
        type=click.IntRange(min=0),
        metavar="N",
        help="... and make the bound ref - N units.",
    ),
    section="Bounds",
)


def spec_of(kw: dict, keys: tuple[str, ...]):
    """The engine's spec and the user aggregates, checked before Spark starts."""
    from evtime.engine.bound import BoundSpec

    bounds = kw.pop("bounds") or ("markers" if kw["bound_marker"] else "rows")
    cti_delay = kw.pop("cti_delay")
    spec = BoundSpec(
        size=kw.pop("size"),
        slide=kw.pop("slide"),
        offset=kw.pop("offset"),
        inclusive=kw.pop("window_end") == "inclusive",
        bounds=bounds,
        marker=kw.pop("bound_marker"),
        strict=kw.pop("strict_bounds"),
        tick=kw.pop("tick"),
        cti_every=kw.pop("cti_every"),
        cti_delay=cti_delay,
        late=kw.pop("late"),
        unit=kw.pop("unit"),
        range=kw.pop("range_"),
        keys=keys,
    )
    spec.check()
    return spec


def _items(kw: dict):
    from evtime.engine import udaf

    udafs = dict(udaf.load(u) for u in kw.pop("udafs"))
    return udaf.split_aggs(kw.pop("aggs"), udafs)


def check_columns(spec):
    def check(lay) -> None:
        inputs.column_check("--bound-marker", (spec.marker or (None,))[0], lay.schema.names)

    return check


def _windows(cl, spec, items, columns: list[str], rows=None, keep=None):
    """The windows (see :func:`_analysed`)."""
    from evtime.engine import bound as engine

    return _analysed(lambda: engine.windows(cl, spec, items, rows, keep), columns)


def _analysed(aggregate, columns: list[str]):
    """``aggregate()``, where an --agg that Spark cannot analyse is a usage error, and one
    naming a column the input lacks lists the columns and a close match."""
    import re

    from pyspark.errors import AnalysisException

    from evtime.errors import UsageError
    from evtime.io.reader import suggest

    try:
        return aggregate()
    except AnalysisException as err:
        lines = str(err).strip().splitlines()
        first = lines[0] if lines else str(err)
        missing = re.search(r"name `([^`]+)` cannot be resolved", first)
        if missing:
            col = missing.group(1)
            raise UsageError(
                f"--agg: no column {col!r}; columns: {', '.join(columns)}{suggest(col, columns)}"
            ) from None
        raise UsageError(f"--agg: {first}") from None


def _sinks(kw, spec, lay, df):
    """The output sink (its columns set by :func:`_output`) and the --discards sink, and
    ``df`` with what the discards need: the row's own columns named like the discards'
    ``arrival``, ``reason`` and ``bound`` kept before the operator adds its own (they are
    written as ``row_<name>``), and its CSV values written as they were, from their text
    (:attr:`~evtime.io.reader.Layout.texts`), not the types --agg computes with."""
    from evtime.io.writer import Sink, check_sink, output_format

    out_fmt = output_format(kw["output"], kw["output_format"])
    ns = ["window_start", "window_end"]
    out = Sink("output", ("out",), kw["output"], out_fmt, [], ns, kw["overwrite"])
    sinks = [out]
    if kw["discards"]:
        names = lay.schema.names
        df, copies = outputs.keep_own(df, [c for c in names if c not in lay.texts])
        sinks.append(
            outputs.discards_sink(
                kw["discards"],
                kw["overwrite"],
                names,
                copies=copies,
                command="bound",
                texts=lay.texts,
            )
        )
    for s in sinks:
        check_sink(s)
    return sinks, df


def _output(w, spec, names, out, lay, arrivals: int | None = None, made=None):
    """The windows as the output frame (routed 'out') and its layout; ``arrivals``: the
    last arrival number, when known; ``made``: the output frame already made (see
    :func:`~evtime.engine.bound_tally.output_here`)."""
    from pyspark.sql import functions as F

    from evtime.engine import bound as engine
    from evtime.io.writer import ROUTE

    frame = engine.output(w, spec, names, arrivals) if made is None else made
    return frame.withColumn(ROUTE, F.lit("out")), _windows_layout(spec, names, out, lay)


def _windows_layout(spec, names, out, lay):
    """Set the output sink's columns; the layout of the windows' own columns."""
    import pyarrow as pa

    from evtime.io.reader import Layout

    out.columns = [*spec.keys, "window_start", "window_end", *names, "rows", "closed_by"]
    # the windows carry only the key columns of the input (their types are restored)
    return Layout(pa.schema([lay.schema.field(k) for k in spec.keys]), lay.time_col)


def _output_here(table, schema, spec, names, out, lay):
    """:func:`_output` for windows made in this process (``table``, Arrow, and its Spark
    ``schema``): rows the writer writes from here (:class:`~evtime.io.writer.LocalRows`)."""
    import pyarrow as pa
    from pyspark.sql.types import StringType, StructField, StructType

    from evtime.io.writer import ROUTE, LocalRows

    route = pa.array(["out"] * table.num_rows, pa.string())
    rows = LocalRows(
        table.append_column(ROUTE, route),
        StructType([*schema.fields, StructField(ROUTE, StringType(), False)]),
    )
    return rows, _windows_layout(spec, names, out, lay)


def _state_record(kw: dict, spec, inp) -> dict:
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
        "--agg": list(kw["aggs"]),
        "--udaf": list(kw["udafs"]),
        "--order-by": inp.order_by,
    }


@click.command("bound", cls=options.Command, epilog=EXAMPLES)
@bound_options(agg_required=True)
@options.output_options
@options.state_options
@options.flushable_input_options
@options.session_options
def bound(**kw) -> None:
    """Aggregate event-time windows, each released once it is final.

    A window is output once the bound (rows' times, marker rows or generated CTIs)
    says no more rows can enter it, with the arrival that closed it; rows below the bound
    are dropped or moved up to it."""
    started = time.monotonic()
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    spec = spec_of(kw, inp.keys)
    # (--agg computes with CSV columns: read as their text reads, but the marker column)
    inp = inp.but(
        text=(spec.marker[0],) if spec.marker else (),
        keep_text=bool(kw["discards"]),  # (but the discards are written as they were read)
    )
    record = _state_record(kw, spec, inp)
    items = _items(kw)
    from evtime.errors import UsageError

    state.check_state_outputs(state.StateArgs.of(kw))
    if not inp.inputs and not kw["flush"]:
        raise UsageError("missing INPUT (only --state DIR --flush runs without one)")
    if kw["state"]:
        try:
            return _stateful(kw, spec, items, record, ses, inp, started)
        except state.NothingToDo as done:
            ses.run.stop_progress()
            if not ses.quiet:
                click.echo(str(done), err=True)
            return
    got = inputs.start(inp, ses, check_columns(spec))
    df, lay, files = got.df, got.lay, got.files
    try:
        _bound(kw, spec, items, ses, got, started, df, lay)
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


def _bound(kw, spec, items, ses, got, started, df, lay) -> None:
    """bound without --state, once the input is read."""
    from evtime.engine import bound as engine

    read = inputs.count_read(df, got)  # on the checkpointed input, before any operator
    sinks, df = _sinks(kw, spec, lay, df)
    if all(isinstance(a, str) for a in items):
        n = _in_one_pass(ses.run, df, spec, items, sinks, lay, got, read)
        counts = _counts(n)
        detail = _detail(n, counts)
        return summary.summary("bound", ses, counts, started, read, kw.get("max_discards"), detail)
    cl = engine.prepare(df, spec, one_chunk=got.one_chunk, as_read=got.as_read)
    w, names = _windows(cl, spec, items, lay.schema.names)
    out_frame, key_lay = _output(w, spec, names, sinks[0], lay, read)
    # every arrival is routed (the late rows to --discards, if given): the summary's
    # counts come from the writes
    # (without --discards they are only counted: no order needed)
    rows = engine.routed(cl, spec, bool(kw["discards"]))
    if kw["discards"]:
        rows = engine.late_in_order(rows)
    n = publish.publish_jobs(
        ses.run,
        [(out_frame, sinks[:1], key_lay), (inputs.with_rejected(rows, got), sinks[1:], lay)],
    )
    counts = _counts(n)
    summary.summary("bound", ses, counts, started, read, kw.get("max_discards"), _detail(n, counts))


def _in_one_pass(run, df, spec, items, sinks, lay, got, read: int) -> dict[str, int]:
    """Without --state or a Python aggregate: one aggregate over the classified rows gives
    the windows, the closing search's points and the route counts
    (:mod:`evtime.engine.bound_tally`); --discards classifies the rows again, for the late
    ones only, numbered from the tally's counts.  The discards' count is that of the rows
    written (so the summary checks the tally against them)."""
    from evtime.engine import bound as engine
    from evtime.engine import bound_tally

    cl = engine.classify(df, spec, one_chunk=got.one_chunk, as_read=got.as_read)
    t, names = _analysed(lambda: bound_tally.tally(cl, spec, items), lay.schema.names)
    # (the small table: everything below reads it; lazy, so that the first read, which
    # fetches it when small, also fills it: one job fewer)
    t = t.localCheckpoint(eager=False)
    here = driver.rows_here(run, t)  # (a small tally, bounded: fetched with one job)
    if here is not None:
        routes, windows, limits, size = bound_tally.counts_here(here, spec)
    else:
        routes, windows, limits, size = bound_tally.counts(t, spec)
    made = None
    if driver.few_rows(run, size):  # a small tally (bounded): searched and ordered here
        made = bound_tally.output_rows_here(t, spec, names, read, here)
    if made is not None:  # (written from here: no Spark job)
        out_frame, key_lay = _output_here(*made, spec, names, sinks[0], lay)
    else:
        w = bound_tally.windows(t, spec, names, limits)
        out_frame, key_lay = _output(w, spec, names, sinks[0], lay, read)
    jobs = [(out_frame, sinks[:1], key_lay)]
    if len(sinks) > 1:
        late = engine.routed(bound_tally.late_rows(cl, t, engine.ARRIVAL), spec, True)
        late = engine.late_in_order(late, limits=(1, max(read, 1)))
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


def _counts(n: dict[str, int]) -> dict[str, int]:
    return {
        "out": n.get("released", 0) + n.get("adjusted", 0),
        "discard": n.get("discard", 0),
        "bound": n.get("bound", 0),
    }


def _detail(n: dict[str, int], counts: dict[str, int]) -> str:
    adjusted = n.get("adjusted", 0) + n.get("released:adjusted", 0) + n.get("held:adjusted", 0)
    detail = f", adjusted {adjusted}" if adjusted else ""
    detail += f", bound rows {counts['bound']}" if counts["bound"] else ""
    return detail + f", windows {n.get('out', 0)}"


def _stateful(kw, spec, items, record, ses, inp, started) -> None:
    """``bound --state DIR [--flush]``: continue the stream of windows saved in DIR (SPEC §4
    over all runs' inputs as one stream); the outputs and the new state are committed
    together."""
    box: list = []
    try:
        got = inputs.start(
            inp,
            ses,
            check_columns(spec),
            before_spark=state.state_opener(state.StateArgs.of(kw), "bound", record, box),
        )
        spark, df, lay = got.spark, got.df, got.lay
        (stf,) = box
        _stateful_run(kw, spec, items, ses, got, started, spark, df, lay, stf)
    finally:
        for stf in box:
            stf.sd.close()  # the lock on DIR


def _stateful_run(kw, spec, items, ses, got, started, spark, df, lay, stf) -> None:
    from evtime.engine import bound as engine
    from evtime.engine import bound_state as bs
    from evtime.io.writer import Sink

    good = inputs.count_good(df, got)  # bad rows (--bad-rows discard) take no arrival number
    read = good + inputs.rejected_count(got)
    sinks, df = _sinks(kw, spec, lay, df)
    held, carried = stf.read(spark, "held.parquet"), stf.read(spark, "keys.parquet")
    carried = carried if carried is not None else bs.no_state(df, spec)
    cl = engine.prepare(df, spec, carried, stf.st.arrivals, got.one_chunk, got.as_read)
    rows, keep = bs.open_windows(bs.rows_in_windows(cl, held), carried, spec)
    w, names = _windows(cl, spec, items, lay.schema.names, rows, keep)
    out_frame, key_lay = _output(
        bs.released(w, stf.flush), spec, names, sinks[0], lay, stf.st.arrivals + good
    )
    kept = bs.next_state(cl, carried, spec)
    frame = bs.routed(cl, held, kept, spec, stf.flush, bool(kw["discards"]))
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
    detail = _detail(n, counts)
    summary.summary(
        "bound", ses, counts, started, read, kw.get("max_discards"), detail, carried=stf.carried
    )


@click.command(
    "bound",
    cls=options.Command,
    epilog="""
\b
Examples:
  evtime explain bound --window 1m --key device samples/bound/readings.csv
  evtime explain bound --window 1h --window-end inclusive --bound-marker kind=bound \\
      --strict-bounds --tick 1ms --format csv samples/bound/trades.csv
""",
)
@bound_options(agg_required=False)
@explain_output
@plot_option
@options.input_options
@options.session_options
def explain_bound(**kw) -> None:
    """Explain `evtime bound`: every row's decision and windows.

    For every arrival: the bound after it, the decision, the windows the row entered and
    the arrival that released it (--agg / --udaf are accepted and ignored)."""
    started = time.monotonic()
    plot_path = kw.pop("plot")
    if plot_path:
        from evtime.io import plot

        plot.check_path(plot_path, kw["overwrite"])  # before Spark starts
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    spec = spec_of(kw, inp.keys)
    kw.pop("aggs"), kw.pop("udafs")
    from pyspark.sql import functions as F

    from evtime.engine import bound as engine
    from evtime.engine import present
    from evtime.engine.scan import sort_in_parts
    from evtime.io.writer import ROUTE, Sink

    fmt = explain_format(kw["fmt"], kw["output"], ses.call.params)
    got = inputs.start(inp, ses, check_columns(spec))
    df, lay, files = got.df, got.lay, got.files
    cl = engine.prepare(df, spec, one_chunk=got.one_chunk, as_read=got.as_read)
    w, _ = engine.windows(cl, spec, [engine.opened()] if plot_path else [])
    if plot_path:
        w = w.localCheckpoint()  # read by explain and by the picture
    df = engine.explain(cl, w, spec, [f.shown for f in files])
    own = present.own_columns(lay.schema.names, lay.time_col)
    summary.note_renamed("explain bound", own)
    frame = present.explain_frame(df, (), own)
    cols = frame.columns
    frame = frame.withColumn(
        ROUTE,
        F.when(F.col("decision") == present.DISCARDED, "discard")
        .when(F.col("decision") == present.BOUND, "bound")
        .otherwise("out"),
    )
    frame = sort_in_parts(frame, "arrival")
    frame = rejected_frame(frame, got, own, file_source(files))
    sink = Sink(
        "explain",
        ("out", "discard", "bound"),
        kw["output"],
        fmt,
        cols,
        ["time", "evtime", "bound"],
        kw["overwrite"],
        own=present.own_map(own),
    )
    counts = publish.write_and_publish(ses.run, frame, [sink], lay)
    if plot_path:
        windows, wk, wtotal = plot.sample_windows(engine.spans(w, spec), spec.keys)
        shown = dict(own)
        plot.plot(
            frame,
            sum(counts.values()),
            plot_path,
            plot_title(),
            keys=tuple(shown[k] for k in spec.keys),
            windows=windows,
            wk=wk,
            wtotal=wtotal,
        )
    summary.summary("explain bound", ses, counts, started)
