"""What merge, explain merge and sweep merge share before their own work: their options
(:class:`MergeOptions`, and merge's :class:`MergeArgs`), the sources named on the command
line (:func:`sources`), the options checked, the sources read and classified (:func:`setup`)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from evtime.errors import UsageError
from evtime.runner import inputs
from evtime.runner.context import Session
from evtime.runner.inputs import Inputs
from evtime.runner.outputs import OutputArgs

_NAME = re.compile(r"[\w.\-]+")


@dataclass(frozen=True)
class MergeOptions:
    """The merge operator's options (merge, explain merge, sweep merge): ``--arrival``,
    ``--wait`` (as typed: the reasons quote it), ``--join-leave``, ``--unit`` and
    ``--range``, and the bound rows' ``--bound-marker`` (COL, VALUE), ``--strict-bounds``,
    ``--tick`` (ns)."""

    arrival: str | None = None
    wait: str | None = None
    join_leave: bool = False
    unit: str | None = None
    range: int | None = None
    bound_marker: tuple[str, str] | None = None
    strict_bounds: bool = False
    tick: int = 1


@dataclass(frozen=True)
class MergeArgs(OutputArgs):
    """``evtime merge``'s options besides the inputs and the session: the operator's, the
    outputs (``-o``, its format and layout, ``--discards``, ``--max-discards``), the added
    columns (``--as``, ``--source-as``), ``--emit-bounds`` and ``--state DIR [--flush]``."""

    operator: MergeOptions
    emit_bounds: bool = False
    as_: str = "evtime"
    source_as: str = "source"


def sources(args: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """NAME=PATH -> (names, paths); a source without a name is named by its path."""
    names, paths = [], []
    for a in args:
        name, sep, path = a.partition("=")
        if sep and path and _NAME.fullmatch(name) and not os.path.exists(a):
            names.append(name)
            paths.append(path)
        else:
            names.append(a)
            paths.append(a)
    seen = set()
    for n in names:
        if n in seen:
            raise UsageError(f"two sources are named {n!r}: name them with NAME=PATH")
        seen.add(n)
    return names, paths


def _check(opts: MergeOptions, inp: Inputs, command: str) -> None:
    """The usage errors of the operator's options."""
    if inp.keys:
        raise UsageError(f"{command} does not take --key: every source is one stream")
    if opts.wait is not None and not opts.arrival:
        raise UsageError("--wait needs --arrival COL (the wall-clock arrival time of each row)")
    if opts.arrival and inp.order_by:
        raise UsageError("give --arrival or --order-by, not both (--arrival also orders)")
    if (opts.unit is None) != (opts.range is None):
        raise UsageError("--unit and --range go together")


def spec_of(opts: MergeOptions, inp: Inputs, names: list[str]):  # -> engine.merge.MergeSpec
    """The operator's spec: the sources ``names`` merged with ``opts``."""
    from evtime.engine import merge as engine
    from evtime.units import duration_ns

    return engine.MergeSpec(
        names=tuple(names),
        marker=opts.bound_marker,
        strict=opts.strict_bounds,
        tick=opts.tick,
        ordered=bool(opts.arrival or inp.order_by),
        arrival=bool(opts.arrival),
        wait=duration_ns(opts.wait) if opts.wait is not None else None,
        wait_text=opts.wait,
        join_leave=opts.join_leave,
        unit=opts.unit,
        range=opts.range or 0,
    )


def setup(
    ses: Session,
    inp: Inputs,
    opts: MergeOptions,
    command: str,
    check: Callable | None = None,
    stream=None,
    meanwhile: Callable | None = None,
):
    """Check options, read the sources (``check(layout)`` before any work on them), and
    prepare every row for the operator (``engine.merge.prepare``).  ``stream``: ``--state``
    (:class:`evtime.runner.merge_state.Stream`): opens the state before Spark, and maps this
    run's sources to the stream's.  ``meanwhile(spec)``: what inputs.start runs while Spark
    starts (None: nothing).  Returns ``(ses, got, spec, df, lay)`` (``got``: the
    :class:`~evtime.runner.inputs.Read`)."""
    _check(opts, inp, command)
    names, paths = sources(inp.inputs)
    inp = inp.but(inputs=tuple(paths), text_times=(opts.arrival,) if opts.arrival else ())
    spec = spec_of(opts, inp, names)
    from evtime.engine import merge as engine

    def checks(lay) -> None:
        inputs.column_check("--bound-marker", (spec.marker or (None,))[0], lay.schema.names)
        inputs.column_check("--arrival", opts.arrival, lay.schema.names)
        if check:
            check(lay)

    before = stream.opener(names) if stream else None
    during = meanwhile(spec) if meanwhile and not stream else None
    got = inputs.start(inp, ses, checks, before, during)
    df, lay, files = got.df, got.lay, got.files
    groups = [f.group for f in files]
    if stream:
        spec, groups = stream.sources(spec, groups)
    got = got.but(sources=tuple(groups))
    if got.rejected is not None:
        got = got.but(rejected=engine.with_file_sources(got.rejected, groups))
    if opts.arrival:
        from evtime.engine.scan import AsRead, order_arrivals

        shown = [f.shown for f in files]
        df = engine.with_now(df, lay, opts.arrival, got.time_format, got.tz, shown)
        df = order_arrivals(df, engine.NOW)
        got = got.but(as_read=AsRead(), one_chunk=False)  # (numbered again: not as read)
    return ses, got, spec, engine.prepare(df, spec, groups), lay
