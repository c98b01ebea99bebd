"""Strict-bound window aggregation (SPEC §4; seeds 004, 003, 002), on the shared scan.

Per key, in arrival order:

* **the bound** after each arrival is a running maximum (:func:`scan.prefix_max`) of what
  each arrival promises: ``rows`` - its own (adjusted) time, i.e. the adjust reference
  ``ref - range*unit`` (:func:`adjust.classify`); ``markers`` - a marker row's time
  (+ tick when strict); ``cti`` - at every N-th data row (a running count,
  :func:`scan.prefix_count`) the running max of data times so far minus the delay.  The
  bound *in force* when a row arrives is the same maximum without the row itself.
* a data row is **late** when its time is below the bound in force: dropped, or moved up to
  it (``--late adjust``).  Late rows advance nothing (they cannot raise a max they are
  below), except that CTI counts and maxima include them, as SPEC §4 says.
* the **windows** of an accepted row are the aligned starts whose window contains its time
  (an ``explode``); a window's aggregates are one ``groupBy(key, start)``.
* a window's **closing arrival** is the first arrival of its key whose bound reaches ``end``
  (exclusive end) or ``end + tick`` (inclusive end): a search in the key's monotone bound
  sequence (:func:`scan.first_above`).  None found: flushed at the end of the input.
* **release order**: (closing arrival, window start, key), the end-of-input flush last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from evtime.columns import PART, SEQ, T
from evtime.engine import adjust, present, udaf
from evtime.engine import saturate as sat
from evtime.engine.running import values_of
from evtime.engine.scan import (
    AsRead,
    arrival_numbers,
    first_above,
    join_small,
    least_above,
    positions_by,
    prefix_count_max,
    prefix_max,
    sort_in_parts,
    value_limits,
)
from evtime.errors import UsageError
from evtime.units import unit_ns

T0 = "_evt_t0"  # the row's time (floored to --unit) before any late adjustment
EVT = "_evt_evtime"  # the time that places the row in windows (moved up when adjusted)
BEFORE, AFTER = "_evt_bound_before", "_evt_bound_after"  # bound in force / after arrival
MARK, DECISION, ARRIVAL = "_evt_marker", "_evt_decision", "_evt_arrival"
WS, ROWS, CLOSED = "_evt_ws", "_evt_rows", "_evt_closed"
RELEASE = "_evt_release"  # a window's place in the output: its closing arrival, or last
OPENED = "_evt_opened"  # arrival of a window's first row (pictures)
OUT_FIXED = ("window_start", "window_end", "rows", "closed_by")
# --state: a key's bound after the last arrival, and (cti) its data rows and largest time
BOUND, CTI_N, CTI_SEEN = "_evt_bound", "_evt_cti_n", "_evt_cti_seen"
MAX_WINDOWS_PER_ROW = 10_000


@dataclass(frozen=True)
class BoundSpec:
    size: int
    slide: int | None = None
    offset: int = 0
    inclusive: bool = False
    bounds: str = "rows"  # rows | markers | cti
    marker: tuple[str, str] | None = None  # (column, value) of bound-marker rows
    strict: bool = False
    tick: int = 1
    cti_every: int | None = None
    cti_delay: int = 0
    late: str = "drop"  # drop | adjust
    unit: str | None = None
    range: int | None = None
    keys: tuple[str, ...] = ()

    @property
    def step(self) -> int:
        return self.slide or self.size

    @property
    def width(self) -> int:
        return (self.range or 0) * unit_ns(self.unit) if self.unit else 0

    @property
    def close_after(self) -> int:
        """A window [s, s+size) / [s, s+size] is final once the bound reaches s + this."""
        return self.size + (self.tick if self.inclusive else 0)

    def check(self) -> None:
        if self.size <= 0:
            raise UsageError("--window must be a positive duration, e.g. 1m")
        if self.slide is not None and self.slide <= 0:
            raise UsageError("--slide must be a positive duration, e.g. 30s")
        if self.tick <= 0:
            raise UsageError("--tick must be a positive duration, e.g. 1ns or 1ms")
        if -(-self.size // self.step) > MAX_WINDOWS_PER_ROW:
            raise UsageError(
                f"--window / --slide puts every row in more than {MAX_WINDOWS_PER_ROW} "
                "windows: use a larger --slide"
            )
        if self.bounds not in ("rows", "markers", "cti"):
            raise UsageError("--bounds must be rows, markers or cti")
        if self.bounds == "markers" and self.marker is None:
            raise UsageError("--bounds markers needs --bound-marker COL=VALUE")
        if self.bounds != "markers" and self.marker is not None:
            raise UsageError(f"--bound-marker needs --bounds markers (not {self.bounds})")
        if self.strict and self.bounds != "markers":
            raise UsageError("--strict-bounds applies to marker rows: use --bounds markers")
        if self.bounds == "cti" and not self.cti_every:
            raise UsageError("--bounds cti needs --cti-every N")
        if self.bounds != "cti" and (self.cti_every is not None or self.cti_delay):
            raise UsageError("--cti-every / --cti-delay need --bounds cti")
        if (self.unit is None) != (self.range is None):
            raise UsageError("--unit and --range go together")
        if self.unit is not None and self.bounds != "rows":
            raise UsageError(
                "--unit/--range make the bound ref - range*unit: use them with --bounds rows"
            )
        if self.late not in ("drop", "adjust"):
            raise UsageError("--late must be drop or adjust")


# ---------------------------------------------------------------- bounds and decisions


def _marker(spec: BoundSpec) -> Column:
    if spec.bounds != "markers":
        return F.lit(False)
    col, value = spec.marker
    return F.coalesce(F.col(col).cast("string") == F.lit(value), F.lit(False))


def classify(
    df: DataFrame,
    spec: BoundSpec,
    carried: DataFrame | None = None,
    one_chunk: bool = False,
    as_read: AsRead | None = None,
) -> DataFrame:
    """Add the bound in force / after each arrival, the decision and the window time.
    ``carried`` ``(keys..., BOUND, CTI_N, CTI_SEEN)``: what an earlier run left per key
    (``--state``): its bound (in force before the key's first arrival here) and, for
    ``cti``, its count of data rows and largest data time; with it, the rows carry the
    running ``CTI_N`` / ``CTI_SEEN`` (cti) for the next state.  ``one_chunk``: every row
    has the same ``_evt_chunk``; ``as_read``: ``df`` is the input as read (see
    :func:`~evtime.engine.scan.prefix_count_max`)."""
    keys = spec.keys
    df = df.withColumn(MARK, _marker(spec))
    if carried is not None:
        df = adjust.join_keys(df, carried.select(*keys, BOUND, CTI_N, CTI_SEEN), keys)
        as_read = None  # (a join may have shuffled the rows)
    if spec.bounds == "rows":
        aspec = adjust.AdjustSpec(spec.unit or "nsec", spec.range or 0, keys)
        df = adjust.classify(df, aspec, one_chunk=one_chunk, as_read=as_read)
        df = df.withColumnRenamed(adjust.EVT, T0).drop(adjust.KEEP)
        ref = F.col(adjust.REF_BEFORE)
        df = df.withColumns(
            {
                BEFORE: sat.sub(ref, spec.width),
                AFTER: sat.sub(F.greatest(ref, F.col(T0)), spec.width),
            }
        ).drop(adjust.REF_BEFORE)
    else:
        df = df.withColumn(T0, F.col(T))
        if spec.bounds == "markers":
            strict = spec.tick if spec.strict else 0
            promise = F.when(F.col(MARK), sat.add(F.col(T), strict))
        else:  # cti: every N-th data row of the key, max data time so far - delay
            n, seen = {"_evt_n": F.lit(True)}, {"_evt_seen": T}
            df = prefix_count_max(df, n, seen, keys, one_chunk=one_chunk, as_read=as_read)
            if carried is not None:
                df = df.withColumns(
                    {
                        "_evt_n": F.col("_evt_n") + F.coalesce(F.col(CTI_N), F.lit(0)),
                        "_evt_seen": F.greatest("_evt_seen", CTI_SEEN),
                    }
                ).withColumns({CTI_N: F.col("_evt_n"), CTI_SEEN: F.col("_evt_seen")})
            promise = F.when(
                F.col("_evt_n") % F.lit(spec.cti_every) == 0,
                sat.sub(F.col("_evt_seen"), spec.cti_delay),
            )
        df = df.withColumn("_evt_promise", promise)
        df = prefix_max(df, {BEFORE: "_evt_promise"}, keys, False, one_chunk, as_read)
        df = df.withColumn(AFTER, F.greatest(BEFORE, "_evt_promise"))
        df = df.drop("_evt_promise", "_evt_seen", "_evt_n")  # (absent names: no-op)
    if carried is not None:
        df = df.withColumns(
            {BEFORE: F.greatest(BEFORE, BOUND), AFTER: F.greatest(AFTER, BOUND)}
        ).drop(BOUND)
    return df.withColumns(decide(spec))


def decide(spec: BoundSpec) -> dict[str, Column]:
    """``DECISION`` and ``EVT`` from the bound in force (``BEFORE``) and ``T0``."""
    late = _late()
    late_decision = present.ADJUSTED if spec.late == "adjust" else present.DISCARDED
    return {
        DECISION: F.when(F.col(MARK), present.BOUND)
        .when(late, late_decision)
        .otherwise(present.RELEASED),
        EVT: F.when(late & F.lit(spec.late == "adjust"), F.col(BEFORE)).otherwise(F.col(T0)),
    }


def _late() -> Column:
    """A data row below the bound in force."""
    return ~F.col(MARK) & F.col(BEFORE).isNotNull() & (F.col(T0) < F.col(BEFORE))


def route_number(spec: BoundSpec) -> Column:
    """:func:`route` ``(numbered=True)`` from what :func:`decide` decides on, not from the
    ``DECISION`` text (no string compared per row)."""
    late = ROUTES.index("adjusted" if spec.late == "adjust" else "discard")
    return (
        F.when(F.col(MARK), F.lit(ROUTES.index("bound")))
        .when(_late(), F.lit(late))
        .otherwise(F.lit(ROUTES.index("released")))
    )


def prepare(
    df: DataFrame,
    spec: BoundSpec,
    carried: DataFrame | None = None,
    arrivals: int = 0,
    one_chunk: bool = False,
    as_read: AsRead | None = None,
) -> DataFrame:
    """:func:`classify` plus 1-based arrival numbers (after ``arrivals`` read by earlier
    runs), cut from its lineage (every later step reads these rows several times)."""
    # (numbered from the footers' rows per file when known: a join may have moved the
    # rows, not changed their _evt_seq)
    cl = classify(df, spec, carried, one_chunk, as_read)
    df = arrival_numbers(cl, ARRIVAL, as_read, one_chunk)
    if arrivals:
        df = df.withColumn(ARRIVAL, F.col(ARRIVAL) + F.lit(arrivals))
    return df.localCheckpoint()


def accepted() -> Column:
    """Rows that enter windows (on time, or moved up by --late adjust)."""
    return F.col(DECISION).isin(present.RELEASED, present.ADJUSTED)


# ---------------------------------------------------------------- windows


_MIN_SQL = "(-9223372036854775807L - 1L)"


def _long_sql(v: int) -> str:
    return _MIN_SQL if v == sat.MIN else f"{v}L"


def first_start(spec: BoundSpec) -> int:
    """The start of the window that saturates to the first instant: the greatest aligned
    start below it (its rows are written with ``window_start`` the first instant, its true
    end kept), or the first instant itself when a window starts there (then no window may
    start before it: :func:`_sql_windows` refuses a row in one)."""
    off = spec.offset % spec.step
    if (sat.MIN - off) % spec.step == 0:
        return sat.MIN
    return sat.MIN - 1 - ((sat.MIN - 1 - off) % spec.step)


def _sql_windows(spec: BoundSpec) -> tuple[str, str, str]:
    """SQL for (number of windows of the row, latest start, array of starts).

    Without overflow at the edges of int64 (the offset taken modulo the step, the row's
    distance to its latest start ``r`` and to its earliest ``d`` computed apart): a start
    before the first instant is written as the first instant (:func:`first_start`), for
    one window only; a row in two windows starting before it (hopping windows), or in one
    when a window starts at the first instant itself, would merge distinct windows: the
    run stops with one line naming the row's time."""
    from evtime.errors import EvtimeError, task_marks

    e, step, size = f"`{EVT}`", spec.step, spec.size
    off = spec.offset % step
    r = f"pmod(pmod({e}, {step}L) - {off}L, {step}L)"  # (e - latest start, in [0, step))
    latest = f"(CASE WHEN {e} < {_MIN_SQL} + {r} THEN {_MIN_SQL} ELSE {e} - {r} END)"
    x = f"({size}L - {r})"
    if spec.inclusive:
        n = f"(CASE WHEN {x} >= 0 THEN {x} div {step}L + 1 ELSE 0L END)"
    else:
        n = f"(CASE WHEN {x} > 0 THEN ({x} + {step - 1}L) div {step}L ELSE 0L END)"
    d = f"({r} + ({n} - 1) * {step}L)"  # (e - earliest start, at most size)
    # a row in more than one window before the first instant (or in one, when a window
    # starts at it): no sound way to write them
    merged = f"({d} >= {step}L AND {e} < {_MIN_SQL} + ({d} - {step}L))"
    if first_start(spec) == sat.MIN:
        merged = f"{e} < {_MIN_SQL} + {d}"
    pre, post = task_marks(EvtimeError)
    text = (
        f"the row with time ' || {_iso_sql(e)} || ' is in windows (--window {size}ns, "
        f"--slide {step}ns, --offset {spec.offset}ns) that start before the first instant "
        "of the int64 ns timeline, 1677-09-21T00:12:43.145224192Z: they would all be "
        "written as starting there; use a --slide at least the --window, or times after "
        "the first window"
    )
    error = f"raise_error('{pre}' || '{text}' || '{post}')"
    starts = (
        f"(CASE WHEN {n} <= 0 THEN NULL "
        f"WHEN {e} >= {_MIN_SQL} + {d} THEN sequence({e} - {d}, {e} - {r}, {step}L) "
        f"WHEN {merged} THEN {error} "
        f"WHEN {n} = 1 THEN array({_MIN_SQL}) "
        f"ELSE concat(array({_MIN_SQL}), sequence({e} - ({d} - {step}L), {e} - {r}, {step}L)) END)"
    )
    return n, latest, starts


def window_end(ws: Column, spec: BoundSpec, after: int | None = None) -> Column:
    """A window's end (``after``: its start + this, default the size), saturated at the
    last instant; the window saturated at the first instant keeps its true end."""
    after = spec.size if after is None else after
    low = sat.clamp(first_start(spec) + after)
    return F.when(ws == F.lit(sat.MIN), F.lit(low)).otherwise(sat.add(ws, after))


def never_closes(ws: Column, spec: BoundSpec) -> Column:
    """Windows whose end (+ tick, inclusive) is past the last instant: no bound reaches it
    (a bound is at most the last instant); flushed at the end of the input."""
    return ws > F.lit(sat.MAX - spec.close_after)


def window_starts(spec: BoundSpec) -> Column:
    """Array of the starts of every window containing the row's time (null: none)."""
    return F.expr(_sql_windows(spec)[2])


def last_start(spec: BoundSpec) -> Column:
    """Start of the row's last window (null when its time falls in a gap)."""
    n, latest, _ = _sql_windows(spec)
    return F.expr(f"CASE WHEN {n} > 0 THEN {latest} END")


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def aggregate(
    df: DataFrame,
    spec: BoundSpec,
    items: Sequence[str | udaf.Call],
    keep: Column | None = None,
) -> tuple[DataFrame, list[str]]:
    """(keys, start, aggregates..., rows) of every non-empty window (only those where
    ``keep``, a condition on the row and ``WS``), and the aggregates' column names in
    ``--agg`` order."""
    keys = list(spec.keys)
    rows = df.where(accepted())
    exploded = rows.withColumn(WS, F.explode(window_starts(spec)))
    if keep is not None:
        exploded = exploded.where(keep)
    sql = [F.expr(a) for a in items if isinstance(a, str)]
    w = exploded.groupBy(*keys, WS).agg(*sql, F.count(F.lit(1)).alias(ROWS))
    sql_names = w.columns[len(keys) + 1 : -1]  # (analysed: a bad --agg fails here)
    names, it = [], iter(sql_names)
    for a in items:
        names.append(a.alias if isinstance(a, udaf.Call) else next(it))
    calls = [a for a in items if isinstance(a, udaf.Call)]
    if calls:
        args = {f"_evt_u{j}": F.expr(c.arg) for j, c in enumerate(calls)}
        u = udaf.evaluate(
            rows.select(*keys, EVT, SEQ, *[v.alias(k) for k, v in args.items()]),
            keys,
            calls,
            EVT,
            SEQ,
            spec.size,
            spec.step,
            spec.offset,
            spec.inclusive,
            WS,
        )
        w = join_small(w, u, [*keys, WS])
    return w, names


def check_names(spec: BoundSpec, names: list[str]) -> None:
    for k in spec.keys:
        if k in OUT_FIXED:
            raise UsageError(f"--key {k!r} clashes with the output column {k!r}: rename it")
    taken = {*spec.keys, *OUT_FIXED}
    seen: set[str] = set()
    for n in names:
        if n in taken or n in seen:
            raise UsageError(
                f"two output columns would be named {n!r}: name the aggregate with "
                f"--agg '... AS other_name'"
            )
        seen.add(n)


def raises_bound() -> Column:
    """Arrivals that raise their key's bound (only they can close a window first)."""
    return F.col(AFTER).isNotNull() & (F.col(BEFORE).isNull() | (F.col(AFTER) > F.col(BEFORE)))


def closing_value(spec: BoundSpec) -> Column:
    """The search value of an arrival's bound: a bound x closes the windows starting at or
    before x - close_after, so the bounds that close the same windows (the same latest start
    g) are one point of the search, (g + close_after, their first arrival), and it runs over
    about as many points as windows."""
    # (as AFTER - pmod(AFTER - close_after - offset, step), without overflow; a value
    # before the first instant closes no window that holds a row: the first instant)
    c = (spec.close_after + spec.offset) % spec.step
    a, step = F.col(AFTER), F.lit(spec.step)
    p = F.pmod(F.pmod(a, step) - F.lit(c), step)
    return F.when(a < F.lit(sat.MIN) + p, F.lit(sat.MIN)).otherwise(a - p)


def close_points(cl: DataFrame, spec: BoundSpec) -> DataFrame:
    """``(keys..., _v, _a)``: the points of the closing search (:func:`close`)."""
    return (
        cl.where(raises_bound())
        .groupBy(*spec.keys, closing_value(spec).alias("_v"))
        .agg(F.min(ARRIVAL).alias("_a"))
    )


def close(
    w: DataFrame, points: DataFrame, spec: BoundSpec, limits: tuple[int, int] | None = None
) -> DataFrame:
    """Add ``CLOSED``: the arrival whose bound made each window final (null: end of input),
    the first of ``points`` (:func:`close_points`) at or above the window's start +
    close_after.  ``limits``: the least and the greatest search value (window start +
    close_after, and the points' values), when known.  With keys, each key's windows and
    points are searched together in Arrow (:func:`closing_arrivals`, grouped by key, as
    the Python aggregates are); without, in value buckets (:func:`first_above`)."""
    keys = list(spec.keys)
    end = window_end(F.col(WS), spec, spec.close_after)
    if limits is not None:
        limits = (sat.clamp(limits[0]), sat.clamp(limits[1]))
    return _never(_close(w, points, spec, limits, end, keys), spec)


def _never(w: DataFrame, spec: BoundSpec) -> DataFrame:
    """:func:`never_closes` windows flushed at the end (the search saturates their end)."""
    return w.withColumn(CLOSED, F.when(~never_closes(F.col(WS), spec), F.col(CLOSED)))


def _close(w, points, spec, limits, end: Column, keys: list[str]) -> DataFrame:
    if keys:
        both = w.select("*", end.alias("_v"), F.lit(None).cast("long").alias("_a")).unionByName(
            points, allowMissingColumns=True
        )
        schema = StructType([*w.schema.fields, StructField(CLOSED, LongType())])
        columns = w.columns

        def closed_in_key(both: pa.Table) -> pa.Table:  # one key's windows (with WS), points
            window = values_of(both.column(WS).is_valid())
            v = values_of(both.column("_v"))
            a = values_of(both.column("_a").fill_null(0))
            closed = closing_arrivals(v[~window], a[~window], v[window])
            rows = both.filter(pa.array(window)).select(columns)
            return rows.append_column(CLOSED, pa.array(closed, mask=closed < 0))

        return both.groupBy(*keys).applyInArrow(closed_in_key, schema)
    # (a window is one (keys, start): its start is the query's id among the key's)
    queries = w.select(*keys, F.col(WS).alias("_q"), end.alias("_v"))
    found = first_above(queries, points, keys, CLOSED, strict=False, keep_by=keys, limits=limits)
    return join_small(w, found.withColumnRenamed("_q", WS), [*keys, WS])


def closing_arrivals(
    v: np.ndarray, a: np.ndarray, ends: np.ndarray, key: np.ndarray | None = None
) -> np.ndarray:
    """Per window (its start + close_after in ``ends``), the least arrival ``a`` among the
    points of its key whose value ``v`` is at or above it; -1: none (flushed at the end).
    ``key``: the key numbers of the points, then of the windows (None: one key).  The search
    is :func:`~evtime.engine.scan.least_above` (the windows take part with no arrival)."""
    top = np.iinfo(np.int64).max
    lead = np.concatenate([v, ends - 1])  # (above end - 1: at or above end)
    arrival = np.concatenate([a, np.full(len(ends), top)])
    if key is None:
        order = np.argsort(lead, kind="stable")
    else:
        order = np.lexsort((lead, key))
        key = key[order]
    least, found = least_above(lead[order], arrival[order], 0, key)
    closed = np.empty(len(lead), np.int64)
    closed[order] = np.where(found & (least != top), least, -1)
    return closed[len(v) :]


def windows(
    cl: DataFrame,
    spec: BoundSpec,
    items: Sequence[str | udaf.Call],
    rows: DataFrame | None = None,
    keep: Column | None = None,
) -> tuple[DataFrame, list[str]]:
    """Every non-empty window with its aggregates and closing arrival (unordered), and the
    aggregate names.  ``rows`` (default ``cl``): the rows to put in windows (``--state``:
    also those carried), ``keep``: which windows (see :func:`aggregate`)."""
    w, names = aggregate(cl if rows is None else rows, spec, items, keep)
    check_names(spec, names)
    w = w.localCheckpoint()  # (read twice by the search without keys, and by what follows)
    return close(w, close_points(cl, spec), spec), names


def output(
    w: DataFrame, spec: BoundSpec, names: list[str], arrivals: int | None = None
) -> DataFrame:
    """SPEC §4 output columns, in release order: numbered parts
    (:func:`~evtime.engine.scan.sort_in_parts`) by closing arrival, the windows flushed at
    the end after them; no global sort (its sampling pass would run the windows' plan
    again).  ``arrivals``: the last arrival number, when the caller knows it."""
    lo, hi = (1, arrivals) if arrivals is not None else value_limits(w, CLOSED)
    last = (hi or 0) + 1
    w = w.withColumn(RELEASE, F.coalesce(F.col(CLOSED), F.lit(last)))
    w = sort_in_parts(w, RELEASE, WS, *spec.keys, limits=(lo or last, last))
    return w.select(
        PART,
        *spec.keys,
        F.col(WS).alias("window_start"),
        window_end(F.col(WS), spec).alias("window_end"),
        *[F.col(quote(n)) for n in names],
        F.col(ROWS).alias("rows"),
        F.col(CLOSED).cast("long").alias("closed_by"),  # (null: flushed at the end)
    )


def out_routed(frame: DataFrame) -> DataFrame:
    """``frame`` (windows as :func:`output` gives them) with every row routed to the
    output sink: ``ROUTE`` is ``out`` on every row, so the writer sends them all to ``-o``
    and counts them as windows."""
    from evtime.columns import ROUTE

    return frame.withColumn(ROUTE, F.lit("out"))


def opened() -> str:
    """The aggregate that gives each window the arrival of its first row (``OPENED``)."""
    return f"min({quote(ARRIVAL)}) AS {quote(OPENED)}"


def spans(w: DataFrame, spec: BoundSpec) -> DataFrame:
    """(keys, start, end, opened, closed) of every window of :func:`windows` run with
    :func:`opened` among its aggregates: what a picture of the windows needs."""
    return w.select(
        *spec.keys,
        F.col(WS).alias("start"),
        window_end(F.col(WS), spec).alias("end"),
        F.col(OPENED).alias("opened"),
        F.col(CLOSED).alias("closed"),
    )


# ---------------------------------------------------------------- discards and explain


def late_reason(spec: BoundSpec) -> Column:
    """Why a late row was discarded: its (e)vtime below the bound in force when it arrived."""
    what = "evtime" if spec.unit else "time"
    why = f" (reference time - {spec.range} {spec.unit})" if spec.unit else ""
    t0, before = present.iso(T0), present.iso(BEFORE)
    return F.when(
        F.col(DECISION) == present.DISCARDED,
        F.concat(
            F.lit(f"late: {what} "),
            t0,
            F.lit(" is below the bound in force "),
            before,
            F.lit(why),
        ),
    ).when(
        F.col(DECISION) == present.ADJUSTED,
        F.concat(
            F.lit(f"late: {what} "),
            t0,
            F.lit(" was below the bound in force "),
            before,
            F.lit(f"{why}: moved up to it"),
        ),
    )


ROUTES = ("discard", "bound", "adjusted", "released")  # (the last: any other decision)


def route(numbered: bool = False) -> Column:
    """The route that counts an arrival: ``discard`` (late, dropped), ``bound`` (marker
    rows), ``adjusted`` or ``released`` (in windows); ``numbered``: its place in
    :data:`ROUTES` instead of its name."""
    d = F.col(DECISION)
    decided = (present.DISCARDED, present.BOUND, present.ADJUSTED)
    out = F.lit(len(decided) if numbered else ROUTES[-1])
    for i in reversed(range(len(decided))):
        out = F.when(d == decided[i], F.lit(i if numbered else ROUTES[i])).otherwise(out)
    return out


def routed(cl: DataFrame, spec: BoundSpec, discard_columns: bool) -> DataFrame:
    """Every arrival with the route that counts it: ``discard`` (late, dropped), ``bound``
    (marker rows), ``adjusted`` or ``released`` (in windows); with ``discard_columns``, the
    discards' ``arrival``, ``reason`` and ``bound``.  For :func:`late_in_order`."""
    from evtime.columns import ROUTE

    df = cl.withColumn(ROUTE, route())
    if discard_columns:
        df = df.withColumns(
            {"arrival": F.col(ARRIVAL), "reason": late_reason(spec), "bound": F.col(BEFORE)}
        )
    return df


def late_in_order(df: DataFrame, limits: tuple[int, int] | None = None) -> DataFrame:
    """``df`` ready for one write: the dropped late rows in arrival order (numbered parts,
    :func:`~evtime.engine.scan.sort_in_parts`), the other rows after them in no order and
    without a shuffle (they are counted, or written where order does not matter).
    ``limits``: the least and the greatest arrival number, when known (no aggregate job)."""
    from evtime.columns import PART
    from evtime.engine.scan import AFTER_PARTS, bucket_column, bucketer

    late = F.coalesce(F.col(DECISION) == present.DISCARDED, F.lit(False))
    first = df.where(late)
    # as sort_in_parts, but the part stays a column expression (ARRIVAL >> 62 is 0) when
    # there is no late row (the bucket is then a literal, and a repartition by a literal is
    # an exchange into a single partition)
    bucket = bucketer(*limits)(F.col(ARRIVAL)) if limits else bucket_column(first, ARRIVAL)
    part = F.shiftright(F.col(ARRIVAL), 62) + bucket
    first = (
        first.withColumn(PART, part.cast("long"))
        .repartition(PART)
        .sortWithinPartitions(PART, ARRIVAL)
    )
    rest = df.where(~late).withColumn(
        PART, (F.lit(2 * AFTER_PARTS) + F.spark_partition_id()).cast("long")
    )
    return first.unionByName(rest)


def explain_routed(frame: DataFrame) -> DataFrame:
    """explain bound's rows (with their ``decision`` column, as
    :func:`~evtime.engine.present.explain_frame` names it) routed for its one sink by their
    decision: ``discard`` (discarded), ``bound`` (bound rows), ``out`` (every other), so
    the writer counts each kind for the summary."""
    from evtime.columns import ROUTE

    decision = F.col("decision")
    return frame.withColumn(
        ROUTE,
        F.when(decision == present.DISCARDED, "discard")
        .when(decision == present.BOUND, "bound")
        .otherwise("out"),
    )


def _iso_sql(e: str) -> str:
    e = f"({e})"  # (an expression such as 'a + b': its value, whatever surrounds it)
    return (
        f"concat(date_format(timestamp_seconds(({e} div 1000000000L) "
        f"- if({e} < 0 and pmod({e}, 1000000000L) != 0, 1L, 0L)), "
        f"\"yyyy-MM-dd'T'HH:mm:ss\"), '.', lpad(cast(pmod({e}, 1000000000L) as string), 9, '0'), "
        "'Z')"
    )


def windows_text(spec: BoundSpec) -> Column:
    """'[start,end) [start,end)' in ISO times: the windows a row entered."""
    close_ch = "]" if spec.inclusive else ")"
    starts = _sql_windows(spec)[2]
    low = sat.clamp(first_start(spec) + spec.size)  # (see window_end)
    end = (
        f"CASE WHEN s = {_MIN_SQL} THEN {_long_sql(low)} WHEN s > {sat.MAX - spec.size}L "
        f"THEN {sat.MAX}L ELSE s + {spec.size}L END"
    )
    one = f"concat('[', {_iso_sql('s')}, ',', {_iso_sql(end)}, '{close_ch}')"
    return F.expr(f"array_join(transform({starts}, s -> {one}), ' ')")


POSITIONS = ("_evt_last", "_rb", "_pos")  # (after the keys) what explain needs of a window


def positions(w: DataFrame, spec: BoundSpec) -> DataFrame:
    """The output position of every window of :func:`windows` (``w``), in release order:
    closed windows by (closing arrival, start, key), then the end-of-input flush by (start,
    key); as ``(keys..., POSITIONS)``: its start, closing arrival (null: flushed at the
    end) and 1-based position."""
    keys = list(spec.keys)
    w = w.select(*keys, WS, CLOSED).localCheckpoint()  # read several times below
    closed, flushed = w.where(F.col(CLOSED).isNotNull()), w.where(F.col(CLOSED).isNull())
    first = positions_by(closed, CLOSED, [F.col(WS), *keys], "_pos")
    rest = positions_by(flushed, WS, keys, "_pos")
    rest = rest.withColumn("_pos", F.col("_pos") + F.lit(closed.count()))
    start, closing, pos = POSITIONS
    return first.unionByName(rest).select(
        *keys, F.col(WS).alias(start), F.col(CLOSED).alias(closing), F.col("_pos").alias(pos)
    )


def explain(cl: DataFrame, pos: DataFrame, spec: BoundSpec, sources: list[str]) -> DataFrame:
    """Every arrival of ``cl`` (:func:`prepare`) with its decision (SPEC §5) as
    ``_x_<column>`` (unordered: sort by ``SEQ`` for arrival order); ``pos``: the windows'
    positions (:func:`positions`, or found here by
    :func:`~evtime.engine.bound_tally.positions_here`).

    ``released_by`` / ``output_pos`` of an accepted row are those of its last window (the
    one that closes last: only then is the row no longer held)."""
    keys = list(spec.keys)
    df = cl.withColumn("_evt_last", F.when(accepted(), last_start(spec)))
    df = join_small(df, pos, [*keys, "_evt_last"])
    src = F.element_at(F.array(*[F.lit(s) for s in sources]), F.col("_evt_file") + 1)
    return df.withColumns(
        {
            "_x_arrival": F.col(ARRIVAL),
            "_x_source": src,
            "_x_time": F.col(T),
            "_x_evtime": F.col(EVT),
            "_x_decision": F.col(DECISION),
            "_x_bound": F.col(AFTER),
            "_x_released_by": F.when(F.col("_pos").isNotNull(), F.col("_rb").cast("long")),
            "_x_output_pos": F.col("_pos"),
            "_x_windows": F.when(accepted(), windows_text(spec)),
            # (a row whose last window is flushed at the end: released_by null, and words)
            "_x_reason": F.when(
                F.col("_pos").isNotNull() & F.col("_rb").isNull(),
                F.concat_ws("; ", late_reason(spec), F.lit(present.HELD_TO_END)),
            ).otherwise(late_reason(spec)),
        }
    ).drop("_evt_last", "_rb", "_pos")
