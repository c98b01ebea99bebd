"""``bound`` in one pass over the classified rows (runs without ``--state`` or a Python
aggregate).

:func:`bound.prepare` numbers and checkpoints every classified row, because the windows,
the closing search, the route counts and ``--discards`` each read them.  Here one
aggregate (:func:`tally`) over the unnumbered, uncheckpointed rows of
:func:`bound.classify` turns every row into *facts* grouped three ways at once:

* ``window`` - one per window an accepted row enters, grouped by (keys, start), with the
  ``--agg`` aggregates and the row count: the windows;
* ``point`` - one per arrival that raises its key's bound, grouped by (keys, search value)
  with the least ``_evt_seq``: the points of the closing search (:func:`bound.close_points`);
* ``count`` - one per arrival, grouped by (chunk, route): the route counts of the summary
  and the per-chunk counts that turn a ``_evt_seq`` into an arrival number.

Everything after it (:func:`windows`) runs over that small table, or, when it has few rows,
in this process (:func:`output_here`: about a dozen small Spark jobs fewer); ``--discards``
classifies the rows once more for the late ones (:func:`late_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from evtime.columns import CHUNK, CHUNK_SHIFT, PART, SEQ
from evtime.engine import present
from evtime.engine import saturate as sat
from evtime.engine.bound import (
    DECISION,
    POSITIONS,
    RELEASE,
    ROUTES,
    ROWS,
    WS,
    BoundSpec,
    check_names,
    close,
    closing_arrivals,
    closing_value,
    first_start,
    last_start,
    quote,
    raises_bound,
    route_number,
    window_starts,
)
from evtime.engine.scan import count_offsets, key_numbers, numbered

FACT, GROUP, ROUTED, LEAST = "_evt_fact", "_evt_group", "_evt_routed", "_evt_least"
WINDOW, POINT, COUNT = 0, 1, 2


def tally(cl: DataFrame, spec: BoundSpec, items: Sequence[str]) -> tuple[DataFrame, list[str]]:
    """The facts of every row of ``cl`` (:func:`bound.classify`) aggregated:
    ``(FACT, GROUP, ROUTED, keys..., aggregates..., ROWS, LEAST)``, and the aggregates'
    column names in ``--agg`` order.  ``items``: Spark SQL aggregate expressions."""
    # (no higher-order function such as transform: they are not compiled to code, and
    # cost more than the whole aggregate here)
    # (the route's number, not its name: string keys cost more to hash and compare)
    cl = cl.withColumn(ROUTED, route_number(spec))
    # (accepted(), without the text)
    took = F.col(ROUTED).isin(ROUTES.index("adjusted"), ROUTES.index("released"))
    if spec.step > spec.size or (spec.step == spec.size and not spec.inclusive):
        # tumbling with exclusive ends, or gapped: at most one window per row
        x, first = cl, F.lit(True)
        start = F.when(took, last_start(spec))
    else:  # hopping: a row per window (one for a row in none), its facts on the first
        starts = F.when(took, window_starts(spec))
        x = cl.select("*", F.posexplode_outer(starts).alias("_evt_i", "_evt_s"))
        first, start = F.coalesce(F.col("_evt_i"), F.lit(0)) == 0, F.col("_evt_s")
    # a fact per kind, its place in the array (WINDOW, POINT, COUNT) the kind: an array of
    # int64, no struct per fact
    facts = F.array(
        start.cast("long"),
        F.when(first & raises_bound(), closing_value(spec)).cast("long"),
        F.when(first, F.col(CHUNK)).cast("long"),
    )
    x = x.select("*", F.posexplode(facts).alias("_evt_f", "_evt_g"))
    x = x.where(F.col("_evt_g").isNotNull())
    kind = F.col("_evt_f")
    t = x.groupBy(
        kind.alias(FACT),
        F.col("_evt_g").alias(GROUP),
        F.when(kind == COUNT, F.col(ROUTED)).alias(ROUTED),
        *[F.when(kind != COUNT, F.col(k)).alias(k) for k in spec.keys],
    ).agg(
        *[F.expr(a) for a in items],
        F.count(F.lit(1)).alias(ROWS),
        F.min(SEQ).alias(LEAST),
    )
    names = t.columns[3 + len(spec.keys) : -2]  # (analysed: a bad --agg fails here)
    check_names(spec, names)
    return t, names


def windows(
    t: DataFrame,
    spec: BoundSpec,
    names: Sequence[str],
    limits: tuple[int, int] | None = None,
) -> DataFrame:
    """The windows of a :func:`tally` with their closing arrival (as :func:`bound.windows`);
    ``limits``: the closing search's value range (from :func:`counts`)."""
    keys = list(spec.keys)
    points = t.where(F.col(FACT) == POINT).select(*keys, F.col(GROUP).alias("_v"), LEAST)
    points = numbered(points, LEAST, _offsets(t), "_a").drop(LEAST)
    w = t.where(F.col(FACT) == WINDOW).select(
        *keys, F.col(GROUP).alias(WS), *[F.col(quote(n)) for n in names], ROWS
    )
    return close(w, points, spec, limits)


def counts(
    t: DataFrame, spec: BoundSpec
) -> tuple[dict[str, int], int, tuple[int, int] | None, int]:
    """Arrivals per route, how many windows there are, the least and the greatest value of
    the closing search (window start + close_after, and the points' values; None when there
    are neither), and how many rows the tally has: one job, a few rows."""
    rows = (
        t.groupBy(FACT, ROUTED)
        .agg(
            F.sum(ROWS).alias("n"),
            F.count(F.lit(1)).alias("k"),
            F.min(GROUP).alias("lo"),
            F.max(GROUP).alias("hi"),
        )
        .collect()
    )
    return _summed([(r[FACT], r[ROUTED], r["n"], r["k"], r["lo"], r["hi"]) for r in rows], spec)


def counts_here(rows: pa.Table, spec: BoundSpec) -> tuple[dict[str, int], int, tuple | None, int]:
    """:func:`counts` of a tally fetched into this process (``rows``: all of it)."""
    g = rows.group_by([FACT, ROUTED]).aggregate(
        [(ROWS, "sum"), (GROUP, "count"), (GROUP, "min"), (GROUP, "max")]
    )
    cols = [FACT, ROUTED, f"{ROWS}_sum", f"{GROUP}_count", f"{GROUP}_min", f"{GROUP}_max"]
    return _summed(list(zip(*[g.column(c).to_pylist() for c in cols], strict=True)), spec)


def _summed(groups: list[tuple], spec: BoundSpec):
    """:func:`counts` from the tally's rows summed per (fact, route): ``(fact, route,
    arrivals, rows, least group, greatest group)``."""
    routes = {ROUTES[r]: int(n) for f, r, n, _, _, _ in groups if f == COUNT}
    shift = {WINDOW: spec.close_after, POINT: 0}
    ends = [(lo + shift[f], hi + shift[f]) for f, _, _, _, lo, hi in groups if f in shift]
    limits = (min(e[0] for e in ends), max(e[1] for e in ends)) if ends else None
    windows = sum(int(k) for f, _, _, k, _, _ in groups if f == WINDOW)
    return routes, windows, limits, sum(int(k) for *_, k, _, _ in groups)


def _offsets(t: DataFrame) -> DataFrame:
    """``(_evt_chunk, _off)``: arrivals before each chunk, from the tally's counts."""
    counts = t.where(F.col(FACT) == COUNT).select(F.col(GROUP).alias(CHUNK), ROWS)
    return count_offsets(counts, CHUNK, "_off", weight=ROWS)


def late_rows(cl: DataFrame, t: DataFrame, out: str, one_chunk: bool = False) -> DataFrame:
    """The dropped late rows of ``cl`` (for ``--discards``), with their arrival number in
    ``out`` from the tally's counts (the rows are not numbered otherwise); ``one_chunk``:
    every row of one chunk, nothing before it (their numbers an expression: no join)."""
    late = cl.where(F.col(DECISION) == present.DISCARDED)
    return numbered(late, SEQ, None if one_chunk else _offsets(t), out)


# ---------------------------------------------------------------- a few windows, here


def output_here(
    t: DataFrame,
    spec: BoundSpec,
    names: Sequence[str],
    arrivals: int,
    rows: pa.Table | None = None,
):
    """:func:`windows` and :func:`bound.output` of the tally ``t``, a few rows (the caller
    knows how many: :func:`counts`), fetched here with one small job: the output frame, one
    part (``PART`` 0) in release order, made in this process (window ends past the last
    instant saturated, those windows flushed at the end, as in Spark); ``rows``: the
    tally, when the caller fetched it already.  The search is
    :func:`~evtime.engine.bound.closing_arrivals`, as :func:`bound.close` runs it per key."""
    return t.sparkSession.createDataFrame(*output_rows_here(t, spec, names, arrivals, rows))


def output_rows_here(
    t: DataFrame,
    spec: BoundSpec,
    names: Sequence[str],
    arrivals: int,
    rows: pa.Table | None = None,
) -> tuple[pa.Table, StructType]:
    """The rows of :func:`output_here` as Arrow, with their Spark schema (the Arrow types
    are those Spark gives that schema): for a caller that writes them here, without
    making them a DataFrame (one Spark job fewer)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import LongType, StructField

    made = _made_here(t.toArrow() if rows is None else rows, spec, names, arrivals)
    schema = StructType(  # (the tally's types for the keys and the aggregates)
        [
            StructField(PART, LongType()),
            *[t.schema[k] for k in spec.keys],
            StructField("window_start", LongType()),
            StructField("window_end", LongType()),
            *[t.schema[n] for n in names],
            StructField("rows", LongType()),
            StructField("closed_by", LongType()),
        ]
    )
    return made.cast(to_arrow_schema(schema)), schema


def positions_here(cl: DataFrame, spec: BoundSpec, rows: pa.Table) -> tuple[DataFrame, int]:
    """``explain bound``'s window positions (as :func:`bound.positions` gives them) of the
    rows of ``cl`` (:func:`bound.prepare`), found in this process from their tally
    (``rows``: all of :func:`tally`'s, fetched by the caller), and the number of arrivals."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import LongType, StructField

    routes = counts_here(rows, spec)[0]
    arrivals = sum(routes.values())
    made = _made_here(rows, spec, [], arrivals)
    keys = list(spec.keys)
    start, closing, pos = POSITIONS
    table = pa.table(
        {
            **{k: made.column(k) for k in keys},
            start: made.column("window_start"),
            closing: made.column("closed_by"),
            pos: np.arange(1, made.num_rows + 1, dtype=np.int64),
        }
    )
    schema = StructType(
        [cl.schema[k] for k in keys] + [StructField(c, LongType()) for c in POSITIONS]
    )
    return cl.sparkSession.createDataFrame(table.cast(to_arrow_schema(schema)), schema), arrivals


def _made_here(rows: pa.Table, spec: BoundSpec, names: Sequence[str], arrivals: int):
    """The rows of :func:`output_here`, as Arrow."""
    keys = list(spec.keys)
    fact = rows.column(FACT)
    w = rows.filter(pc.equal(fact, WINDOW))
    p = rows.filter(pc.equal(fact, POINT))
    c = rows.filter(pc.equal(fact, COUNT))
    # arrivals before each chunk (the tally counts every arrival once, by chunk and route)
    chunk, n = c.column(GROUP).to_numpy(), c.column(ROWS).to_numpy()
    chunks, at = np.unique(chunk, return_inverse=True)
    per = np.zeros(len(chunks), np.int64)
    np.add.at(per, at, n)
    before = np.cumsum(per) - per
    least = p.column(LEAST).to_numpy()
    a = before[np.searchsorted(chunks, least >> CHUNK_SHIFT)] + (least & ((1 << CHUNK_SHIFT) - 1))
    a = a + 1  # the points' arrival numbers
    # the closing search (as bound.close): per window, the least arrival of its key's points
    # at or above its start + close_after
    ws = w.column(GROUP).to_numpy()
    v = p.column(GROUP).to_numpy()
    order, numbers = key_numbers(pa.concat_tables([p.select(keys), w.select(keys)]), keys)
    key = None
    if order is not None:
        key = np.empty_like(numbers)
        key[order] = numbers
    closed = closing_arrivals(v, a, _end(ws, spec, spec.close_after), key)
    # (windows whose end is past the last instant: flushed at the end, as bound._never has
    # them; the search saw their end saturated)
    cut = sat.MAX - spec.close_after
    closed[ws > cut if cut >= sat.MIN else slice(None)] = -1
    release = np.where(closed >= 0, closed, arrivals + 1)
    out = pa.table(
        {
            RELEASE: release,
            PART: np.zeros(len(ws), np.int64),
            **{k: w.column(k) for k in keys},
            "window_start": ws,
            "window_end": _end(ws, spec, spec.size),
            **{n: w.column(n) for n in names},
            "rows": w.column(ROWS),
            "closed_by": pa.array(closed, pa.int64(), mask=closed < 0),  # (null: at the end)
        }
    )
    return out.take(_ascending(out, [RELEASE, "window_start", *keys])).drop_columns([RELEASE])


def _end(ws: np.ndarray, spec: BoundSpec, after: int) -> np.ndarray:
    """:func:`~evtime.engine.bound.window_end` of an array of starts (saturated)."""
    low = sat.clamp(first_start(spec) + after)
    return np.where(ws == sat.MIN, low, sat.add_np(ws, after))


def _ascending(table: pa.Table, columns: Sequence[str]) -> pa.Array:
    """The order that sorts ``table`` by ``columns`` as Spark sorts them: nulls first."""
    try:  # (pyarrow 25 on: null placement per sort key)
        return pc.sort_indices(table, sort_keys=[(c, "ascending", "at_start") for c in columns])
    except (TypeError, ValueError):
        keys = [(c, "ascending") for c in columns]
        return pc.sort_indices(table, sort_keys=keys, null_placement="at_start")
