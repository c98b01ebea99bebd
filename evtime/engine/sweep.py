"""What-if sweeps (``evtime sweep``): one operator evaluated for several settings at once.

The part of the operator that does not depend on the setting is computed once (adjust: the
reference time before each arrival, a prefix max over arrival order; merge: the minimum of
the sources' own bounds after each arrival, the vector scan; bound: the bound after each
arrival).  Then every row is
copied once per setting, the copy carrying the setting's index (``SET``) and value, and the
setting acts as one more key for the engine's own rules and searches (:func:`kept`,
:func:`release_points`): one query plan for all settings, never one run per setting.

Per setting the result is one row (:func:`summarise`):

* ``released`` / ``discarded``: what the command would do with that setting (and
  ``bound_rows``: bound rows read, neither released nor discarded);
* ``held_at_end``: rows still held when the input ends (released by the end-of-input flush);
* ``max_hold_rows``: the largest ``released_by - arrival`` over rows released by an
  arrival (arrival numbers as in ``explain``: all keys and sources counted);
* ``max_hold_ns`` / ``mean_hold_ns``: the largest and the mean hold in time over the same
  rows, on the operator's clock (adjust: the reference time at release minus the row's
  adjusted time; merge: arrival time at release minus the row's; bound: the bound after
  the arrival that closed the row's last window minus the row's time).  Rows flushed at
  the end have no release time: they count only in ``held_at_end``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from evtime.columns import CHUNK, SEQ
from evtime.engine import adjust as adj
from evtime.engine import saturate as sat
from evtime.engine.scan import arrival_numbers

SET, VALUE = "_evt_set", "_evt_value"
REL = "_evt_sw_rel"  # arrival number of the releasing arrival (null: end of input)
HOLD = "_evt_sw_hold"  # hold in time (ns) of a row released by an arrival
SUMMARY = (
    SET,
    "bound_rows",
    "released",
    "discarded",
    "held_at_end",
    "max_hold_rows",
    "max_hold_ns",
    "mean_hold_ns",
)


def per_setting(df: DataFrame, values: Sequence[int]) -> DataFrame:
    """Every row once per setting: ``SET`` (0-based index) and ``VALUE`` (the setting)."""
    arr = F.array(
        *[
            F.struct(F.lit(i).alias(SET), F.lit(v).cast("long").alias(VALUE))
            for i, v in enumerate(values)
        ]
    )
    return df.withColumn("_evt_sw", F.explode(arr)).select(
        *[c for c in df.columns],
        F.col("_evt_sw")[SET].alias(SET),
        F.col("_evt_sw")[VALUE].alias(VALUE),
    )


def summarise(df: DataFrame, keep: Column, bound: Column | None = None) -> DataFrame:
    """One row per setting (columns ``SUMMARY``) from the rows copied per setting, with
    ``keep`` (released, not discarded), ``REL`` and ``HOLD``; ``bound``: bound rows (never
    released nor discarded, counted apart)."""
    bound = F.lit(False) if bound is None else bound
    keep = keep & ~bound
    by_arrival = keep & F.col(REL).isNotNull()
    mean = F.avg(F.when(by_arrival, F.col(HOLD)))  # (a double: 2**63 past a long's range)
    mean = (
        F.when(mean >= F.lit(2.0**63), F.lit(sat.MAX))
        .when(mean < F.lit(-(2.0**63)), F.lit(sat.MIN))
        .otherwise(F.floor(mean))
    )
    return (
        df.groupBy(SET)
        .agg(
            F.count(F.when(bound, 1)).alias("bound_rows"),
            F.count(F.when(keep, 1)).alias("released"),
            F.count(F.when(~keep & ~bound, 1)).alias("discarded"),
            F.count(F.when(keep & F.col(REL).isNull(), 1)).alias("held_at_end"),
            F.max(F.when(by_arrival, F.col(REL) - F.col("arrival"))).alias("max_hold_rows"),
            F.max(F.when(by_arrival, F.col(HOLD))).alias("max_hold_ns"),
            mean.cast("long").alias("mean_hold_ns"),
        )
        .select(*SUMMARY)
    )


def own_keys(df: DataFrame, keys: Sequence[str]) -> tuple[DataFrame, list[str]]:
    """The user's key columns under names of evtime's own (the sweep writes no key, and a
    key named like a column the sweep computes, e.g. ``arrival``, must not clash with it)."""
    names = {k: f"_evt_sw_key{i}" for i, k in enumerate(keys)}
    return df.withColumnsRenamed(names), list(names.values())


def adjust(df: DataFrame, unit: str, ranges: Sequence[int], keys: Sequence[str]) -> DataFrame:
    """``evtime adjust --unit UNIT --range N`` for every N in ``ranges``: one summary row per
    range (index ``SET`` into ``ranges``).  The hold in time is the key's reference time at
    release (the adjusted time of the releasing arrival) minus the row's adjusted time."""
    df, keys = own_keys(df, keys)
    spec = adj.AdjustSpec(unit, 0, tuple(keys))
    base = adj.classify(df, spec)  # the reference time before each arrival: any range
    base = arrival_numbers(base, "arrival").select(*keys, SEQ, adj.EVT, adj.REF_BEFORE, "arrival")
    # cut the lineage: the copies and searches below read these rows several times
    base = base.localCheckpoint()
    for r in ranges:  # (refused as adjust refuses a range longer than the timeline)
        adj.AdjustSpec(unit, r)
    rows = per_setting(base, [r * spec.unit_ns for r in ranges])
    rows = rows.withColumn(adj.KEEP, adj.kept(F.col(VALUE)))
    rows = adj.release_points(rows, [*keys, SET], F.col(VALUE), REL, keep_by=[SET])
    ref_at = base.select(F.col("arrival").alias(REL), F.col(adj.EVT).alias("_evt_sw_ref"))
    rows = rows.join(ref_at, REL, "left")
    rows = rows.withColumn(HOLD, sat.sub(F.col("_evt_sw_ref"), F.col(adj.EVT)))
    return summarise(rows, F.col(adj.KEEP))


def merge(df: DataFrame, spec, waits: Sequence[int]) -> DataFrame:
    """``evtime merge --arrival COL --wait W`` for every W in ``waits`` (ns); ``df`` is
    :func:`evtime.engine.merge.prepare`'d with a ``spec`` without a wait.  The vector scan
    (the minimum over attached sources of their own bounds after each arrival) does not
    depend on the wait: it runs once; per wait, ``D = max(that minimum, now - wait)`` (+inf
    stays +inf: nobody attached), then the engine's release search and stream bound run
    with the wait as one more key.  The hold in time is on the arrival clock: the arrival
    time of the releasing arrival minus the row's own arrival time."""
    from evtime.engine import merge as m

    fx = m.facts(df, spec)
    base = m.definitive(df, spec, m.CON, m.DEF, m.DEF_ARG, m.OWNP, fx)
    base = arrival_numbers(base, "arrival").select(
        SEQ, CHUNK, m.SRC, m.BND, m.EVT, m.CON, m.NOW, m.DEF, m.OWNP, "arrival"
    )
    base = base.localCheckpoint()  # the copies and searches below read it several times
    rows = per_setting(base, waits)
    lag = sat.sub(F.col(m.NOW), F.col(VALUE))  # (before the first instant: saturated)
    rows = rows.withColumns(
        {
            m.LAG: lag,
            m.DEF: F.when(F.col(m.DEF) == F.lit(m.POS), F.col(m.DEF)).otherwise(
                F.greatest(F.col(m.DEF), lag)
            ),
        }
    )
    cand = (
        ~F.col(m.BND)
        & (F.col(m.OWNP).isNull() | (F.col(m.EVT) >= F.col(m.OWNP)))
        & (F.col(m.EVT) >= F.col(m.LAG))
    )
    rows = rows.withColumn(m.CAND, cand)
    rows = m.stream_bound(m.release_points(rows, spec, m.DEF, fx, [SET]), [SET])
    keep = F.col(m.CAND) & (F.col(m.BB).isNull() | (F.col(m.EVT) >= F.col(m.BB)))
    at = base.select(
        F.col(SEQ).alias(m.REL), F.col("arrival").alias(REL), F.col(m.NOW).alias("_evt_sw_now")
    )
    rows = rows.withColumn(m.KEEP, keep).join(at, m.REL, "left")
    rows = rows.withColumn(HOLD, sat.sub(F.col("_evt_sw_now"), F.col(m.NOW)))
    return summarise(rows, F.col(m.KEEP), F.col(m.BND))


def bound(df: DataFrame, specs: Sequence) -> DataFrame:
    """``evtime bound`` with every spec in ``specs`` (BoundSpecs that differ only in
    ``cti_delay`` or in ``size``).  The bound does not depend on the window, and a CTI
    delay only shifts it (the running max of ``seen - d`` is the running max of ``seen``,
    minus d): the bound is computed once, for ``specs[0]``; per setting it is shifted by
    the difference of the delays, then the engine's decision (:func:`bound.decide`), the
    row's last window (:func:`bound.last_start`) and the search for the arrival whose
    bound closes that window run with the setting as one more key.  A row is held until
    its last window closes (``released_by`` of ``explain bound``); a row in no window (a
    gap between hopping windows) is not held.  The hold in time is the bound after the
    releasing arrival minus the row's time (after ``--late adjust``)."""
    import dataclasses

    from evtime.engine import bound as b
    from evtime.engine.scan import first_above

    df, keys = own_keys(df, specs[0].keys)
    specs = [dataclasses.replace(s, keys=tuple(keys)) for s in specs]
    # (the bound without a delay, shifted per setting by its own delay, saturated: the
    # running max of seen - d, saturated, is the saturated running max of seen, minus d)
    base = b.classify(df, dataclasses.replace(specs[0], cti_delay=0))
    base = arrival_numbers(base, b.ARRIVAL).select(
        *keys, SEQ, b.T0, b.MARK, b.BEFORE, b.AFTER, b.ARRIVAL
    )
    base = base.localCheckpoint()  # the copies and searches below read it several times
    shifts = [s.cti_delay for s in specs]
    rows = per_setting(base, shifts)
    rows = rows.withColumns(
        {
            b.BEFORE: sat.sub(F.col(b.BEFORE), F.col(VALUE)),
            b.AFTER: sat.sub(F.col(b.AFTER), F.col(VALUE)),
        }
    )
    rows = rows.withColumns(b.decide(specs[0]))

    def per(column) -> Column:
        out = column(specs[-1])
        for i in range(len(specs) - 2, -1, -1):
            out = F.when(F.col(SET) == F.lit(i), column(specs[i])).otherwise(out)
        return out

    accepted = b.accepted()
    rows = rows.withColumns(
        {
            "_evt_sw_close": per(lambda s: b.window_end(b.last_start(s), s, s.close_after)),
            # (a last window ending past the last instant: no bound closes it)
            "_evt_sw_never": per(lambda s: b.never_closes(b.last_start(s), s)),
        }
    ).localCheckpoint()
    closes = F.col("_evt_sw_close").isNotNull() & ~F.col("_evt_sw_never")
    queries = rows.where(accepted & closes).select(
        *keys, SET, F.col(SEQ).alias("_q"), F.col("_evt_sw_close").alias("_v")
    )
    moved = F.col(b.AFTER).isNotNull() & (
        F.col(b.BEFORE).isNull() | (F.col(b.AFTER) > F.col(b.BEFORE))
    )
    data = rows.where(moved).select(
        *keys, SET, F.col(b.AFTER).alias("_v"), F.col(b.ARRIVAL).alias("_a")
    )
    found = first_above(queries, data, [*keys, SET], REL, strict=False, keep_by=[SET])
    found = found.withColumnRenamed("_q", SEQ)
    rows = rows.join(found, [SEQ, SET], "left")
    gap = accepted & F.col("_evt_sw_close").isNull()  # in no window: not held
    rows = rows.withColumn(REL, F.when(gap, F.col(b.ARRIVAL)).otherwise(F.col(REL)))
    at = base.select(F.col(b.ARRIVAL).alias(REL), F.col(b.AFTER).alias("_evt_sw_after"))
    rows = rows.join(at, REL, "left")
    bound_at = sat.sub(F.col("_evt_sw_after"), F.col(VALUE))
    rows = rows.withColumns(
        {
            HOLD: F.when(gap, F.lit(0)).otherwise(sat.sub(bound_at, F.col(b.EVT))),
            "arrival": F.col(b.ARRIVAL),
        }
    )
    return summarise(rows, accepted, F.col(b.MARK))
