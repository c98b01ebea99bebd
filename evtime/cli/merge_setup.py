"""What merge, explain merge and sweep merge share before their own work: the sources
named on the command line, the options checked, the sources read and classified."""

from __future__ import annotations

import os
import re

from evtime.cli import options
from evtime.runner import inputs

_NAME = re.compile(r"[\w.\-]+")


def sources(args: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """NAME=PATH -> (names, paths); a source without a name is named by its path."""
    from evtime.errors import UsageError

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


def setup(kw: dict, command: str, check=None, classify: bool = True, stream=None, meanwhile=None):
    """Check options, read the sources (``check(layout)`` before any work on them), and
    classify every row (only prepare it: ``classify=False``).  ``stream``: ``--state``
    (:mod:`evtime.cli.merge_state`): opens the state before Spark, and maps this run's
    sources to the stream's.  ``meanwhile(spec)``: what inputs.start runs while Spark starts
    (None: nothing)."""
    from evtime.errors import UsageError
    from evtime.units import duration_ns

    ses, inp = options.session(kw), inputs.inputs_of(kw)
    if inp.keys:
        raise UsageError(f"{command} does not take --key: every source is one stream")
    if kw["wait"] is not None and not kw["arrival"]:
        raise UsageError("--wait needs --arrival COL (the wall-clock arrival time of each row)")
    if kw["arrival"] and inp.order_by:
        raise UsageError("give --arrival or --order-by, not both (--arrival also orders)")
    if (kw["unit"] is None) != (kw["range_"] is None):
        raise UsageError("--unit and --range go together")
    names, paths = sources(inp.inputs)
    inp = inp.but(inputs=tuple(paths), text_times=(kw["arrival"],) if kw["arrival"] else ())
    from evtime.engine import merge as engine

    spec = engine.MergeSpec(
        names=tuple(names),
        marker=kw["bound_marker"],
        strict=kw["strict_bounds"],
        tick=kw["tick"],
        ordered=bool(kw["arrival"] or inp.order_by),
        arrival=bool(kw["arrival"]),
        wait=duration_ns(kw["wait"]) if kw["wait"] is not None else None,
        wait_text=kw["wait"],
        join_leave=kw["join_leave"],
        unit=kw["unit"],
        range=kw["range_"] or 0,
    )

    def checks(lay) -> None:
        inputs.column_check("--bound-marker", (spec.marker or (None,))[0], lay.schema.names)
        inputs.column_check("--arrival", kw["arrival"], lay.schema.names)
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
        from pyspark.sql import functions as F

        from evtime.io.reader import FILE

        of_file = F.array(*[F.lit(g) for g in groups])
        got = got.but(
            rejected=got.rejected.withColumn(engine.SRC, F.element_at(of_file, F.col(FILE) + 1))
        )
    if kw["arrival"]:
        from evtime.engine.scan import AsRead, order_arrivals

        df = engine.with_now(
            df, lay, kw["arrival"], got.time_format, got.tz, [f.shown for f in files]
        )
        df = order_arrivals(df, engine.NOW)
        got = got.but(as_read=AsRead())  # (numbered again: no longer as read)
    df = engine.prepare(df, spec, groups)
    if classify:
        df = engine.classify(df, spec)
    return ses, got, spec, df, lay
