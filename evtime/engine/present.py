"""What explain shows (SPEC §5), built once for every operator.

The engine adds its own columns (decision, bound, released_by, ...); this module fixes
their names and order, formats times in words for reasons, and renames a row's own columns
that clash with explain's.  ``released_by`` and ``output_pos`` are int64, null when there is
none; ``released_by`` is null too for a row released only at the end of the input, whose
reason then says so (:data:`HELD_TO_END`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

EXPLAIN_COLUMNS = (
    "arrival",
    "source",
    "time",
    "evtime",
    "decision",
    "bound",
    "released_by",
    "output_pos",
    "windows",
    "reason",
)
NS_COLUMNS = ("time", "evtime", "bound", "ref")
RELEASED, DISCARDED, ADJUSTED, BOUND = "released", "discarded", "adjusted", "bound"
# the reason of a row released only at the end of the input (its ``released_by`` is null)
HELD_TO_END = "held to the end of input"


def iso(name: str) -> Column:
    """int64 ns column -> '2009-03-01T12:15:22.345678901Z' (only whole seconds go through
    Spark's timestamp type, so nothing is rounded)."""
    q = f"`{name}`"
    whole = F.expr(
        f"date_format(timestamp_seconds(({q} div 1000000000L) - "
        f"if({q} < 0 and pmod({q}, 1000000000L) != 0, 1L, 0L)), \"yyyy-MM-dd'T'HH:mm:ss\")"
    )
    frac = F.expr(f"lpad(cast(pmod({q}, 1000000000L) as string), 9, '0')")
    return F.concat(whole, F.lit("."), frac, F.lit("Z"))


def own_columns(
    user_columns: list[str], time_col: str, extra: tuple[str, ...] = ()
) -> list[tuple[str, str]]:
    """(column, shown name) for a row's own columns after explain's: prefix ``row_`` on a
    clash; when that name is taken too (by another of the row's columns, or by an earlier
    renaming), ``row_<name>_2``, ``row_<name>_3``, ... (see :func:`free_name`)."""
    return renamed([c for c in user_columns if c != time_col], set(EXPLAIN_COLUMNS) | set(extra))


def renamed(user_columns: list[str], taken: set[str]) -> list[tuple[str, str]]:
    """(column, written name) for the row's own ``user_columns`` next to evtime's ``taken``
    names: a clash gets ``row_<name>``, or the first of ``row_<name>_2``, ``row_<name>_3``,
    ... that no other column has."""
    used = set(taken) | {c for c in user_columns if c not in taken}
    out = []
    for c in user_columns:
        shown = c
        if c in taken:
            shown = free_name(f"row_{c}", used)
            used.add(shown)
        out.append((c, shown))
    return out


def free_name(name: str, used: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``, ... : the first not in ``used``."""
    n, shown = 1, name
    while shown in used:
        n += 1
        shown = f"{name}_{n}"
    return shown


def crowded(own: list[tuple[str, str]]) -> list[str]:
    """Words for each of the row's columns whose plain ``row_`` name was taken (said once on
    stderr)."""
    return [
        f"column {c!r} written as {s!r} ({'row_' + c!r} is taken)"
        for c, s in own
        if s != c and s != f"row_{c}"
    ]


def own_map(own: list[tuple[str, str]]) -> dict[str, str]:
    """Written name -> the input's name, for :attr:`evtime.io.writer.Sink.own`."""
    return {s: c for c, s in own}


def explain_frame(
    df: DataFrame, extra_after_bound: tuple[str, ...], own: list[tuple[str, str]]
) -> DataFrame:
    """Columns in SPEC §5 order from the engine's ``_x_<name>`` columns, then the row's own."""
    ours = shown_columns(extra_after_bound, [])
    return df.select(
        *[F.col(f"_x_{c}").alias(c) for c in ours], *[F.col(c).alias(s) for c, s in own]
    )


def shown_columns(extra_after_bound: tuple[str, ...], own: list[tuple[str, str]]) -> list[str]:
    """The names of explain's columns in SPEC §5 order (``extra_after_bound`` after
    ``bound``), then the row's own as shown."""
    cols = []
    for c in EXPLAIN_COLUMNS:
        cols.append(c)
        if c == "bound":
            cols.extend(extra_after_bound)
    return [*cols, *(shown for _, shown in own)]


def source_of_file(names: list[str]) -> Column:
    """The explain ``source`` of a row: ``names[file]`` for the file number it was read
    from (:data:`evtime.columns.FILE`)."""
    from evtime.columns import FILE

    return F.element_at(F.array(*[F.lit(n) for n in names]), F.col(FILE) + 1)


def rejected_columns(
    frame: DataFrame, own: list[tuple[str, str]], source: Column, skip: tuple[str, ...]
) -> dict[str, Column]:
    """The explain columns of a row of ``--bad-rows discard``: decision discarded, its
    ``source``, its own columns under their shown names; explain's own columns (time,
    evtime, ...) null, not the row's same-named ones (``skip``: those it has already)."""
    shown = {s: c for c, s in own}
    types = dict(frame.dtypes)
    cols = {
        c: F.lit(None).cast(types[c]) for c in frame.columns if c not in shown and c not in skip
    }
    cols.update({"decision": F.lit(DISCARDED), "source": source})
    cols.update({s: F.col(c) for s, c in shown.items() if s != c})
    return cols
