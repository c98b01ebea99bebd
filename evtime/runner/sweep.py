"""``evtime sweep`` below its click commands (:func:`adjust`, :func:`merge`, :func:`bound`):
one pass over the inputs, one summary row per setting, checked, written like explain's
rows.  The operator's spec (and merge's start) come built from the command line: this
module needs nothing of the commands ``merge`` and ``bound``."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import click

from evtime.runner import inputs, publish
from evtime.runner.context import Session
from evtime.runner.explained import explain_format
from evtime.runner.inputs import Inputs

# columns of the result, after the setting's own column
COLUMNS = (
    "released",
    "discarded",
    "held_at_end",
    "max_hold_rows",
    "max_hold_s",
    "mean_hold_s",
)

Durations = tuple[tuple[str, int], ...]  # durations as given, and in ns


@dataclass(frozen=True)
class Table:
    """Where a sweep's table goes: ``--format``, ``-o``, ``--overwrite``."""

    fmt: str | None = None
    output: str = "-"
    overwrite: bool = False


@dataclass(frozen=True)
class SweepAdjustArgs:
    """``sweep adjust``: the unit, the ranges tried (in units), where the table goes."""

    unit: str
    ranges: tuple[int, ...]
    table: Table = Table()


@dataclass(frozen=True)
class SweepMergeArgs:
    """``sweep merge``: ``--arrival`` (the waits are on its clock), the waits tried, where
    the table goes."""

    arrival: str | None
    waits: Durations
    table: Table = Table()


@dataclass(frozen=True)
class SweepBoundArgs:
    """``sweep bound``: the window lengths and the CTI delays tried (several of one of
    them at most: a usage error otherwise), where the table goes."""

    sizes: Durations
    delays: Durations
    table: Table = Table()

    def __post_init__(self) -> None:
        if len(self.sizes) > 1 and len(self.delays) > 1:
            from evtime.errors import UsageError

            raise UsageError("sweep one setting at a time: several --window or several --cti-delay")


def adjust(args: SweepAdjustArgs, ses: Session, inp: Inputs) -> None:
    """What ``evtime adjust --unit U --range N`` would do, for every N of ``args``."""
    started = time.monotonic()
    from evtime.engine import sweep as engine

    got = inputs.start(inp, ses)
    df, lay = got.df, got.lay
    read, bad = inputs.count_good(df, got), inputs.rejected_count(got)
    found = engine.adjust(df, args.unit, list(args.ranges), got.keys)
    rows = _rows(found, list(args.ranges), "range", read, bad)
    _publish(ses, rows, "range", args.table, lay, numeric=True)
    _done("adjust", ses, read + bad, len(rows), started)


def merge(args: SweepMergeArgs, setup: Callable[[], tuple]) -> None:
    """What ``evtime merge --arrival COL --wait W`` would do, for every W of ``args``;
    ``setup()``: merge's start without its wait, unclassified (the Session, Inputs,
    MergeSpec, rows and Layout)."""
    started = time.monotonic()
    from evtime.engine import sweep as engine
    from evtime.errors import UsageError

    if not args.arrival:
        raise UsageError("sweep merge needs --arrival COL (the wait is on that clock)")
    ses, got, spec, df, lay = setup()
    read, bad = inputs.count_good(df, got), inputs.rejected_count(got)
    found = engine.merge(df, spec, [ns for _, ns in args.waits])
    rows = _rows(found, [t for t, _ in args.waits], "wait", read, bad)
    _publish(ses, rows, "wait", args.table, lay, numeric=False)
    _done("merge", ses, read + bad, len(rows), started)


def bound(args: SweepBoundArgs, spec, check, ses: Session, inp: Inputs) -> None:
    """What ``evtime bound`` would do for every CTI delay of ``args`` (or every window):
    ``spec`` is bound's spec (engine.bound.BoundSpec) for the first of each, ``check(lay)``
    its check of the input's columns."""
    started = time.monotonic()
    from evtime.engine import sweep as engine

    if len(args.delays) > 1 or (len(args.sizes) == 1 and spec.bounds == "cti"):
        setting, values = "cti_delay", args.delays
        specs = [dataclasses.replace(spec, cti_delay=ns) for _, ns in args.delays]
    else:
        setting, values = "window", args.sizes
        specs = [dataclasses.replace(spec, size=ns) for _, ns in args.sizes]
    for s in specs:
        s.check()
    got = inputs.start(inp, ses, check)
    df, lay = got.df, got.lay
    read, bad = inputs.count_good(df, got), inputs.rejected_count(got)
    found = engine.bound(df, specs)
    rows = _rows(found, [t for t, _ in values], setting, read, bad)
    _publish(ses, rows, setting, args.table, lay, numeric=False)
    _done("bound", ses, read + bad, len(rows), started)


def _seconds(ns: int | None) -> float | None:
    """A hold in ns (>= 0) as seconds, the number a ``*_s`` column holds (written as the
    shortest text that reads back to it: 0.999, 90, 1.000000001; exact to the ns below
    10^6 s)."""
    return None if ns is None else ns / 1e9


def _publish(ses, rows: list[dict], setting: str, table: Table, lay, numeric: bool) -> None:
    """Write the (small: one row per setting) table of settings like explain writes its
    rows, from this process (no Spark job); the setting's column is an integer when
    ``numeric``, else text (durations)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    from evtime.columns import PART, ROUTE
    from evtime.io.reader import Layout
    from evtime.io.writer import LocalRows, Sink

    types = {"max_hold_s": DoubleType(), "mean_hold_s": DoubleType()}
    schema = StructType(
        [
            StructField(setting, LongType() if numeric else StringType()),
            *[StructField(c, types.get(c, LongType())) for c in COLUMNS],
            StructField(ROUTE, StringType()),
            StructField(PART, LongType()),
        ]
    )
    data = {c: [r[c] for r in rows] for c in (setting, *COLUMNS)}
    data |= {ROUTE: ["out"] * len(rows), PART: [0] * len(rows)}  # (one part, in order)
    frame = LocalRows(pa.table(data, schema=to_arrow_schema(schema)), schema)
    fmt = explain_format(table.fmt, table.output, ses.call.params)
    sink = Sink("sweep", ("out",), table.output, fmt, [setting, *COLUMNS], [], table.overwrite)
    # none of these columns is the input's own: no input type to restore
    publish.write_and_publish(ses.run, frame, [sink], Layout(pa.schema([]), lay.time_col))


def _rows(found, shown: list, setting: str, read: int, bad: int = 0) -> list[dict]:
    """The summary rows ``found`` in setting order, checked: released + discarded = read
    (the rows that reached the operator); the ``bad`` rows of --bad-rows discard are
    discarded by every setting."""
    from evtime.errors import EvtimeError

    got = {r["_evt_set"]: r for r in found.collect()}  # one row per setting
    rows = []
    for i, value in enumerate(shown):
        r = got.get(i)
        released, discarded = (r["released"], r["discarded"]) if r else (0, 0)
        bound_rows = r["bound_rows"] if r else 0
        if released + discarded + bound_rows != read:
            raise EvtimeError(
                f"internal error: {setting} {value}: read {read} rows but released "
                f"{released} + discarded {discarded} + bound rows {bound_rows}; please "
                "report this"
            )
        rows.append(
            {
                setting: value,
                "released": released,
                "discarded": discarded + bad,
                "held_at_end": r["held_at_end"] if r else 0,
                "max_hold_rows": r["max_hold_rows"] if r else None,
                "max_hold_s": _seconds(r["max_hold_ns"] if r else None),
                "mean_hold_s": _seconds(r["mean_hold_ns"] if r else None),
            }
        )
    return rows


def _done(command: str, ses: Session, read: int, n: int, started: float) -> None:
    ses.run.stop_progress()
    if not ses.quiet:
        click.echo(
            f"evtime sweep {command}: read {read}, {n} settings "
            f"({time.monotonic() - started:.1f}s)",
            err=True,
        )
