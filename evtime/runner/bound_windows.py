"""What every path of ``evtime bound`` shares: its options (:class:`WindowOptions`,
:class:`BoundArgs`) and the engine's spec made from them (:func:`spec_of`), the --agg items,
the windows (:func:`windows`), their output frame and sinks (:func:`output`,
:func:`sinks`) and the summary's counts (:func:`counts`, :func:`detail`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evtime.runner import outputs
from evtime.runner.inputs import column_check

if TYPE_CHECKING:
    from evtime.engine.bound import BoundSpec


@dataclass(frozen=True)
class WindowOptions:
    """The windows, the bound and late rows as given (``bound_options``), named as the
    click commands name them; checked by :meth:`spec`."""

    size: int
    slide: int | None = None
    offset: int = 0
    window_end: str = "exclusive"
    bounds: str | None = None
    bound_marker: tuple[str, str] | None = None
    strict_bounds: bool = False
    tick: int = 1
    cti_every: int | None = None
    cti_delay: int = 0
    late: str = "drop"
    unit: str | None = None
    range_: int | None = None

    @classmethod
    def of(cls, kw: Mapping[str, Any]) -> WindowOptions:
        """The options among the click command's parameters ``kw``."""
        return cls(**{f.name: kw[f.name] for f in dataclasses.fields(cls)})

    def spec(self, keys: tuple[str, ...]) -> BoundSpec:
        """The engine's spec for the streams of ``keys``, checked (a usage error before
        Spark starts)."""
        from evtime.engine.bound import BoundSpec

        spec = BoundSpec(
            size=self.size,
            slide=self.slide,
            offset=self.offset,
            inclusive=self.window_end == "inclusive",
            bounds=self.bounds or ("markers" if self.bound_marker else "rows"),
            marker=self.bound_marker,
            strict=self.strict_bounds,
            tick=self.tick,
            cti_every=self.cti_every,
            cti_delay=self.cti_delay,
            late=self.late,
            unit=self.unit,
            range=self.range_,
            keys=keys,
        )
        spec.check()
        return spec


@dataclass(frozen=True)
class BoundArgs(outputs.OutputArgs):
    """``evtime bound``'s options, its Spark and input options aside (``Session``,
    ``Inputs``); named as the click command names them."""

    window: WindowOptions
    aggs: tuple[str, ...] = ()
    udafs: tuple[str, ...] = ()

    @classmethod
    def of(cls, kw: Mapping[str, Any]) -> BoundArgs:
        """The options among the click command's parameters ``kw``."""
        own = {f.name: kw[f.name] for f in dataclasses.fields(cls) if f.name != "window"}
        return cls(WindowOptions.of(kw), **own)


def spec_of(kw: Mapping[str, Any], keys: tuple[str, ...]) -> BoundSpec:
    """The engine's spec from the click parameters ``kw`` of ``bound_options``, checked
    before Spark starts."""
    return WindowOptions.of(kw).spec(keys)


def check_columns(spec: BoundSpec):  # -> a check(layout) for inputs.start
    """The input must have the --bound-marker column (checked before Spark starts)."""

    def check(lay) -> None:
        column_check("--bound-marker", (spec.marker or (None,))[0], lay.schema.names)

    return check


def items_of(aggs: tuple[str, ...], udafs: tuple[str, ...]) -> list:
    """The --agg items: Spark SQL aggregates (text) and --udaf calls (loaded here)."""
    from evtime.engine import udaf

    loaded = dict(udaf.load(u) for u in udafs)
    return udaf.split_aggs(aggs, loaded)


def windows(cl, spec, items, columns: list[str], rows=None, keep=None):
    """The windows (see :func:`analysed`)."""
    from evtime.engine import bound as engine

    return analysed(lambda: engine.windows(cl, spec, items, rows, keep), columns)


def analysed(aggregate, columns: list[str]):
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


def sinks(args: BoundArgs, lay, df):
    """The output sink (its columns set by :func:`output`) and the --discards sink, and
    ``df`` with what the discards need: the row's own columns named like the discards'
    ``arrival``, ``reason`` and ``bound`` kept before the operator adds its own (they are
    written as ``row_<name>``), and its CSV values written as they were, from their text
    (:attr:`~evtime.io.reader.Layout.texts`), not the types --agg computes with."""
    from evtime.io.writer import Sink, check_sink, output_format

    out_fmt = output_format(args.output, args.output_format)
    ns = ["window_start", "window_end"]
    out = Sink("output", ("out",), args.output, out_fmt, [], ns, args.overwrite)
    made = [out]
    if args.discards:
        names = lay.schema.names
        df, copies = outputs.keep_own(df, [c for c in names if c not in lay.texts])
        made.append(
            outputs.discards_sink(
                args.discards,
                args.overwrite,
                names,
                copies=copies,
                command="bound",
                texts=lay.texts,
            )
        )
    for s in made:
        check_sink(s)
    return made, df


def output(w, spec, names, out, lay, arrivals: int | None = None):
    """The windows ``w`` as the output frame (routed 'out') and its layout; ``arrivals``:
    the last arrival number, when known."""
    from evtime.engine import bound as engine

    frame = engine.out_routed(engine.output(w, spec, names, arrivals))
    return frame, windows_layout(spec, names, out, lay)


def output_here(table, schema, spec, names, out, lay):
    """:func:`output` for windows made in this process (``table``, Arrow, and its Spark
    ``schema``): rows the writer writes from here (:class:`~evtime.io.writer.LocalRows`)."""
    import pyarrow as pa
    from pyspark.sql.types import StringType, StructField, StructType

    from evtime.columns import ROUTE
    from evtime.io.writer import LocalRows

    route = pa.array(["out"] * table.num_rows, pa.string())
    rows = LocalRows(
        table.append_column(ROUTE, route),
        StructType([*schema.fields, StructField(ROUTE, StringType(), False)]),
    )
    return rows, windows_layout(spec, names, out, lay)


def windows_layout(spec, names, out, lay):
    """Set the output sink's columns; the layout of the windows' own columns."""
    import pyarrow as pa

    from evtime.io.reader import Layout

    out.columns = [*spec.keys, "window_start", "window_end", *names, "rows", "closed_by"]
    # the windows carry only the key columns of the input (their types are restored)
    return Layout(pa.schema([lay.schema.field(k) for k in spec.keys]), lay.time_col)


def counts(n: dict[str, int]) -> dict[str, int]:
    """The summary's counts from the routes written (without --state)."""
    return {
        "out": n.get("released", 0) + n.get("adjusted", 0),
        "discard": n.get("discard", 0),
        "bound": n.get("bound", 0),
    }


def detail(n: dict[str, int], counted: dict[str, int]) -> str:
    """The summary's words on rows adjusted, bound rows and windows written."""
    adjusted = n.get("adjusted", 0) + n.get("released:adjusted", 0) + n.get("held:adjusted", 0)
    words = f", adjusted {adjusted}" if adjusted else ""
    words += f", bound rows {counted['bound']}" if counted["bound"] else ""
    return words + f", windows {n.get('out', 0)}"
