"""``evtime bound --state DIR``: a stream of windows continued over several runs (SPEC §4,
issue 7), on top of :mod:`evtime.engine.bound`.

What a run leaves for the next one:

* **held rows**: every accepted row (on time, or moved up by ``--late adjust``) of which
  a window is still open after the run's last arrival, saved once (a row of several
  hopping windows too), with its window time ``EVT``, global arrival number and decision.
  Rows, not partial aggregates: the next run aggregates them again with its own rows, so
  every Spark SQL aggregate and every user aggregate stays exact.  A row's windows close
  in start order, so a row is held exactly when its *last* window is open.
* **per key** (:data:`~evtime.engine.bound.BOUND`, ``CTI_N``, ``CTI_SEEN``): the bound
  after the key's last arrival (with ``--unit/--range`` it is ``ref - range*unit``, so it
  carries the reference time), and for ``--bounds cti`` the key's count of data rows and
  largest data time.

The next run starts every key from its saved bound (:func:`~evtime.engine.bound.classify`
with ``carried``); a carried row re-enters only its windows the saved bound left open
(a window it closed was released by an earlier run; a new row can never enter such a
window, it would be late).  Windows a bound of this run closes are released; the others
stay open (or, with ``--flush``, are flushed: ``closed_by`` null).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from evtime.columns import SEQ, T
from evtime.engine import present
from evtime.engine.adjust import CARRIED, join_keys
from evtime.engine.bound import (
    AFTER,
    ARRIVAL,
    BEFORE,
    BOUND,
    CLOSED,
    CTI_N,
    CTI_SEEN,
    DECISION,
    EVT,
    MARK,
    WS,
    BoundSpec,
    accepted,
    last_start,
    late_reason,
    never_closes,
    window_end,
)

HELD_COLUMNS = (T, EVT, ARRIVAL, DECISION)  # saved with a held row, after its own columns
STATE_COLUMNS = (BOUND, CTI_N, CTI_SEEN)
_B0 = "_evt_bound0"  # the key's bound before this run
_BF = "_evt_bound1"  # the key's bound after this run


def no_state(df: DataFrame, spec: BoundSpec) -> DataFrame:
    """The per-key state of a fresh stream: none (typed like the keys of ``df``)."""
    return (
        df.select(*spec.keys)
        .where(F.lit(False))
        .withColumns({c: F.lit(None).cast("long") for c in STATE_COLUMNS})
    )


def carried_rows(held: DataFrame | None) -> DataFrame | None:
    """Held rows of an earlier run, numbered before this run's rows (``SEQ`` = CARRIED +
    arrival: negative, in arrival order)."""
    if held is None:
        return None
    return held.withColumn(SEQ, F.lit(CARRIED) + F.col(ARRIVAL))


def rows_in_windows(cl: DataFrame, held: DataFrame | None) -> DataFrame:
    """This run's rows (after :func:`~evtime.engine.bound.prepare`) and the carried ones."""
    rows = cl.where(accepted())
    if held is None:
        return rows
    return rows.unionByName(carried_rows(held), allowMissingColumns=True)


def open_windows(rows: DataFrame, carried: DataFrame, spec: BoundSpec) -> tuple[DataFrame, Column]:
    """``rows`` with the key's bound before this run, and the condition that keeps only the
    windows that bound left open (for :func:`~evtime.engine.bound.windows`)."""
    b0 = carried.select(*spec.keys, F.col(BOUND).alias(_B0))
    rows = join_keys(rows, b0, spec.keys)
    end = window_end(F.col(WS), spec, spec.close_after)  # (saturated: see bound)
    keep = F.col(_B0).isNull() | never_closes(F.col(WS), spec) | (end > F.col(_B0))
    return rows, keep


def released(w: DataFrame, flush: bool) -> DataFrame:
    """The windows this run releases: those closed by one of its arrivals (all, with
    ``flush``: the others are flushed: ``closed_by`` null)."""
    return w if flush else w.where(F.col(CLOSED).isNotNull())


def next_state(cl: DataFrame, carried: DataFrame, spec: BoundSpec) -> DataFrame:
    """Per key: the bound after its last arrival so far, and (cti) its count and max."""
    keys = list(spec.keys)
    now = cl.groupBy(*keys).agg(
        F.max(AFTER).alias(BOUND), F.max(CTI_N).alias(CTI_N), F.max(CTI_SEEN).alias(CTI_SEEN)
    )
    both = now.unionByName(carried.select(*keys, *STATE_COLUMNS))
    return both.groupBy(*keys).agg(*[F.max(c).alias(c) for c in STATE_COLUMNS])


def routed(
    cl: DataFrame,
    held: DataFrame | None,
    state: DataFrame,
    spec: BoundSpec,
    flush: bool,
    discard_columns: bool = False,
    limits: tuple[int, int] | None = None,
) -> DataFrame:
    """Every row of this run and every carried row, with ``ROUTE``: ``discard`` (late,
    dropped; with ``discard_columns``, ``arrival``, ``reason`` and ``bound`` are added for the
    discards), ``bound`` (marker
    rows), ``held`` (a window of it is still open: saved for the next run) or ``released``
    (all its windows were released); ``:adjusted`` is added for this run's rows moved up
    by ``--late adjust``.  Unless ``flush``, followed by the new per-key ``state`` rows
    (route ``state``).  The discards come in arrival order (:func:`late_in_order`;
    ``limits``: the least and the greatest arrival number, when known: no aggregate job)."""
    from evtime.columns import ROUTE
    from evtime.engine.bound import late_in_order

    rows = cl if held is None else cl.unionByName(carried_rows(held), allowMissingColumns=True)
    final = state.select(*spec.keys, F.col(BOUND).alias(_BF))
    rows = join_keys(rows, final, spec.keys)
    last = last_start(spec)
    still_open = (
        F.lit(not flush)
        & last.isNotNull()
        & (
            F.col(_BF).isNull()
            | never_closes(last, spec)
            | (window_end(last, spec, spec.close_after) > F.col(_BF))
        )
    )
    fate = F.when(still_open, "held").otherwise("released")
    new_adjusted = (F.col(DECISION) == present.ADJUSTED) & (F.col(SEQ) >= 0)
    route = (
        F.when(F.col(MARK) & (F.col(DECISION) == present.BOUND), "bound")
        .when(F.col(DECISION) == present.DISCARDED, "discard")
        .when(new_adjusted, F.concat(fate, F.lit(":adjusted")))
        .otherwise(fate)
    )
    rows = rows.withColumn(ROUTE, route).drop(_BF)
    if discard_columns:
        rows = rows.withColumns(
            {"arrival": F.col(ARRIVAL), "reason": late_reason(spec), "bound": F.col(BEFORE)}
        )
    if not flush:
        rows = rows.unionByName(state.withColumn(ROUTE, F.lit("state")), allowMissingColumns=True)
    return late_in_order(rows, limits)


def held_routes() -> tuple[str, ...]:
    return ("held", "held:adjusted")
