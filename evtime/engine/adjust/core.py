"""Timestamp adjustment (SPEC §2, seed 000), on the shared scan.

``evtime = floor(t / unit) * unit``; the reference time is the running max of evtime over
the key's arrivals; a row is discarded when ``evtime < ref_before - range*unit``; a kept
row is released by the first later arrival whose ref passes ``evtime + range*unit``, which
is the first arrival of the key with ``evtime > evtime_i + range*unit`` (a search in the
monotone ref sequence).  The output is the kept rows ordered by (evtime, arrival).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from evtime.columns import CHUNK, ROW, SEQ, T
from evtime.engine import present
from evtime.engine import saturate as sat
from evtime.engine.running import NONE
from evtime.engine.scan import (
    ArrivalsHere,
    AsRead,
    Carry,
    KeptInPart,
    arrival_numbers,
    carry_here,
    first_above,
    first_above_in_parts,
    join_small,
    kept_in_parts,
    positions_in_parts,
    prefix_max,
    reach_from,
    sliced_groups,
    sort_in_parts,
    value_limits,
)
from evtime.units import truncated_range, unit_ns

EVT, REF_BEFORE, KEEP = "_evt_evtime", "_evt_ref_before", "_evt_keep"
REF, ARRIVAL = "_evt_ref", "_evt_arrival"  # a key's reference time; a global arrival number
CARRIED = -(1 << 62)  # _evt_seq of a row carried from an earlier run: CARRIED + its arrival
REL, RANK = "_evt_rel", "_evt_rank"  # explain: released by, place among its part's kept rows


@dataclass(frozen=True)
class AdjustSpec:
    unit: str = "nsec"
    range: int = 0
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.width >= 1 << 63:
            from evtime.errors import UsageError

            raise UsageError(
                f"--range {self.range} --unit {self.unit} is longer than evtime's timeline "
                "(int64 nanoseconds, about 292 years)"
            )

    @property
    def unit_ns(self) -> int:
        return unit_ns(self.unit)

    @property
    def width(self) -> int:
        return self.range * self.unit_ns


def evtime_of(spec: AdjustSpec):
    return sat.floor(F.col(T), spec.unit_ns)


def join_keys(df: DataFrame, small: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """``df`` left-joined with a small per-key table (one row, when there are no keys)."""
    if keys:
        return join_small(df, small, list(keys))
    one = "_evt_one"
    joined = join_small(df.withColumn(one, F.lit(0)), small.withColumn(one, F.lit(0)), [one])
    return joined.drop(one)


def early_carry(spec: AdjustSpec, known) -> Carry | None:
    """The search's carry for :func:`classify_in_order` without keys, from the input's
    times read here and what is ``known`` of them (a :class:`~evtime.io.reader.Footing`:
    ``times``, see :attr:`~evtime.engine.scan.AsRead.times`, the least and the greatest),
    before any DataFrame exists: a run finds it while Spark starts."""
    limits = truncated_range((known.least, known.greatest), spec.unit_ns)
    if limits is None or spec.keys:
        return None
    return carry_here(reach_from(known.times, spec.unit_ns), (), *limits, spec.width)


def classify(
    df: DataFrame,
    spec: AdjustSpec,
    refs: DataFrame | None = None,
    one_chunk: bool = False,
    as_read: AsRead | None = None,
) -> DataFrame:
    """Add the adjusted time, the reference time before the arrival and the keep flag.
    ``refs`` ``(keys..., _evt_ref)``: reference times carried from an earlier run
    (``--state``), in force before the first arrival of their key.  ``one_chunk``: every
    row has the same ``_evt_chunk``; ``as_read``: ``df`` is the input as read (see
    :func:`~evtime.engine.scan.prefix_count_max`)."""
    df = df.withColumn(EVT, evtime_of(spec))
    known = as_read.time_maxima(spec.unit_ns) if as_read and not spec.keys else None
    df = prefix_max(df, {REF_BEFORE: EVT}, spec.keys, False, one_chunk, as_read, known)
    if refs is not None:
        df = join_keys(df, refs, spec.keys)
        df = df.withColumn(REF_BEFORE, F.greatest(F.col(REF_BEFORE), F.col(REF))).drop(REF)
    return df.withColumn(KEEP, kept(spec.width))


def classify_in_order(
    df: DataFrame,
    spec: AdjustSpec,
    limits: tuple[int, int] | None = None,
    as_read: AsRead | None = None,
    early: Carry | None = None,
) -> tuple[DataFrame, KeptInPart | None]:
    """:func:`classify` and :func:`order` in one pass, for runs that need only the keep flag
    (no reference time): a row is discarded exactly when an earlier arrival of its key has
    evtime > evtime + range*unit (its reference time then exceeds the bound), found in the
    output's own parts (:func:`~evtime.engine.scan.kept_in_parts`).  ``limits``: bounds of
    the evtimes, when known (:func:`~evtime.units.truncated_range`; no aggregate job).
    Returns the rows in output order and the step that adds the keep flag to each whole
    part (:class:`~evtime.engine.scan.KeptInPart`; None: the rows have it).  ``as_read``:
    when it can read the times here (no keys), the search's carry comes from them, not
    from a Spark job (:func:`~evtime.engine.scan.reach_from`), or is ``early``, when that
    is the carry of these limits (:func:`early_carry`, found while Spark started)."""
    timed = df.withColumn(EVT, evtime_of(spec))
    reach = None
    if as_read is not None and as_read.times is not None and not spec.keys:
        reach = reach_from(as_read.times, spec.unit_ns)
        if early is not None and limits is not None and early.fits((), *limits, spec.width):
            reach = early
    try:  # (no rows: kept_in_parts gives them as one part)
        return kept_in_parts(timed, EVT, spec.width, SEQ, KEEP, spec.keys, limits, reach=reach)
    except OverflowError:  # a range beyond the int64 ns timeline: the prefix scan
        return order(classify(df, spec)), None


def kept(width: int | Column) -> Column:
    """The keep rule for a bound ``width`` (range*unit in ns, a literal or a per-row
    column): the first arrival of a key, or evtime at or above ref_before - width."""
    return F.col(REF_BEFORE).isNull() | (F.col(EVT) >= sat.sub(F.col(REF_BEFORE), width))


def release_points(
    df: DataFrame,
    by: Sequence[str],
    width: Column,
    out: str = "_rel",
    keep_by: Sequence[str] = (),
) -> DataFrame:
    """Add ``out``: the arrival number (column ``arrival``) that released each kept row,
    the first later arrival of the same ``by`` with evtime > evtime + width (null: released
    at the end of the input).  Needs :func:`classify` (or :func:`kept` in ``KEEP``) and
    :func:`~evtime.engine.scan.arrival_numbers`; ``width`` may be a column, so ``by`` may
    include a setting that copies every row once per width (``evtime sweep``); the columns
    of ``by`` in ``keep_by`` identify a row together with its arrival."""
    q = df.where(KEEP).select(*by, F.col(SEQ).alias("_q"), sat.add(F.col(EVT), width).alias("_v"))
    d = df.select(*by, F.col(EVT).alias("_v"), F.col("arrival").alias("_a"))
    released = first_above(q, d, by, out, keep_by=keep_by).withColumnRenamed("_q", SEQ)
    return join_small(df, released, [SEQ, *keep_by])


def _reason(spec: AdjustSpec, bound: str):
    return F.concat(
        F.lit("late: evtime "),
        present.iso(EVT),
        F.lit(" is below the bound "),
        present.iso(bound),
        F.lit(f" (reference time - {spec.range} {spec.unit})"),
    )


def with_discard_columns(
    df: DataFrame, spec: AdjustSpec, as_read: AsRead | None = None, one_chunk: bool = False
) -> DataFrame:
    """``arrival``, ``reason`` and ``bound`` (the bound the row missed) for the discards;
    the arrival is :data:`ARRIVAL` when the rows have it (``--state``); ``as_read`` and
    ``one_chunk``: see :func:`~evtime.engine.scan.arrival_numbers`."""
    if ARRIVAL in df.columns:
        df = df.withColumn("arrival", F.col(ARRIVAL))
    else:
        df = arrival_numbers(df, "arrival", as_read, one_chunk)
    df = df.withColumn("bound", sat.sub(F.col(REF_BEFORE), spec.width))
    return df.withColumn("reason", F.when(F.col(KEEP), None).otherwise(_reason(spec, "bound")))


def order(df: DataFrame, limits: tuple[int, int] | None = None) -> DataFrame:
    """Output order: (evtime, arrival); ``limits``: the least and the greatest evtime, when
    known (see :func:`~evtime.units.truncated_range`)."""
    return sort_in_parts(df, EVT, SEQ, limits=limits)


def explained_input(df: DataFrame, time_col: str) -> DataFrame:
    """The rows as read, as explain adjust takes them: without the row's time column as
    read (its time in ns, ``T``, stays) and its row number, which explain does not show
    (nor checkpoint)."""
    return df.drop(*({time_col, ROW} - {T}))


_ARR, _POS = "_evt_x_arrival", "_evt_x_output_pos"  # (not the row's own arrival, output_pos)


def explain(
    df: DataFrame,
    spec: AdjustSpec,
    sources: list[str],
    limits: tuple[int, int] | None = None,
) -> DataFrame:
    """Every arrival with its decision (SPEC §5), in arrival order; needs :func:`classify`.
    ``limits``: bounds of the evtimes, when known (:func:`~evtime.units.truncated_range`)."""
    # cut the lineage: the search below plans and runs over these rows more than once
    rows = arrival_numbers(df, _ARR).drop(CHUNK).localCheckpoint()
    # for a kept row the least arrival above evtime + range*unit is the one that released
    # it (no earlier arrival is above it); the output positions follow in the same parts
    lims = limits or value_limits(rows, EVT)
    df = first_above_in_parts(rows, EVT, spec.width, _ARR, "_rel", spec.keys, lims, [SEQ])
    if lims[0] is not None:  # (without keys, in the search's own order: no second sort)
        df = positions_in_parts(df, rows, lims, F.col(KEEP), _POS, EVT, [SEQ])
    else:
        df = df.withColumn(_POS, F.lit(None).cast("long"))
    ref = F.greatest(F.col(REF_BEFORE), F.col(EVT))
    src = F.element_at(F.array(*[F.lit(s) for s in sources]), F.col("_evt_file") + 1)
    return (
        df.withColumn("_bound_before", sat.sub(F.col(REF_BEFORE), spec.width))
        .withColumns(
            {
                "_x_arrival": F.col(_ARR),
                "_x_source": src,
                "_x_time": F.col(T),
                "_x_evtime": F.col(EVT),
                "_x_decision": F.when(F.col(KEEP), present.RELEASED).otherwise(present.DISCARDED),
                "_x_bound": sat.sub(ref, spec.width),
                "_x_ref": ref,
                "_x_released_by": F.when(F.col(KEEP), F.col("_rel").cast("long")),
                "_x_output_pos": F.col(_POS),
                "_x_windows": F.lit(None).cast("string"),
                "_x_reason": F.when(
                    F.col(KEEP), F.when(F.col("_rel").isNull(), F.lit(present.HELD_TO_END))
                ).otherwise(_reason(spec, "_bound_before")),
            }
        )
        .drop("_rel", "_bound_before", _ARR, _POS)
    )


def in_place_groups(groups: Sequence[tuple[int, int | None]], file_rows) -> list[int]:
    """The first ``_evt_seq`` of each group of rows explained (or ordered) in place as one
    part: the Parquet row groups (``groups``: :attr:`AsRead.groups`), those of more than
    :data:`IN_PLACE_ROWS` rows in slices (Spark-written files often have row groups of
    128 MB; each slice is still read whole by one task)."""
    return sliced_groups([g for g, _ in groups], file_rows, IN_PLACE_ROWS)


def suits_in_place(here: ArrivalsHere, arrivals: int, row_groups: int) -> bool:
    """Whether the groups ``here`` found suit explaining in place: more than one row
    group (of ``row_groups``; else one task does it all), no group above
    :data:`IN_PLACE_ROWS` rows (each is held whole)."""
    starts = here.group_starts
    if starts is None or row_groups < 2 or starts[0] != 1:
        return False
    return int(np.diff(np.r_[starts, arrivals + 1]).max()) <= IN_PLACE_ROWS


def tops_before(tops: np.ndarray) -> np.ndarray:
    """Per part of arrivals that has rows (its ``tops`` entry, its greatest evtime, is not
    :data:`~evtime.engine.running.NONE`), the greatest evtime of the parts before it
    (NONE: there is none, or the part has no rows): ``running`` over the per-part maxima,
    from the times read here."""
    before = np.r_[NONE, np.maximum.accumulate(tops)[:-1]]
    return np.where(tops == NONE, NONE, before).astype(np.int64)


IN_PLACE_ROWS = 1 << 21  # the most rows explained in place as one part (a row group or a slice)


def emitted_bounds(df: DataFrame, spec: AdjustSpec) -> DataFrame:
    """Bound rows for ``adjust --emit-bounds``: one per arrival that moves its key's
    reference time, ``(keys..., SEQ, EVT = ref - range*unit)``; written after the rows it
    releases and before any row with a later (evtime, arrival), it is a true non-strict
    bound of the output stream.  Needs :func:`classify`."""
    moved = F.col(KEEP) & (F.col(REF_BEFORE).isNull() | (F.col(EVT) > F.col(REF_BEFORE)))
    return df.where(moved).select(*spec.keys, SEQ, sat.sub(F.col(EVT), spec.width).alias(EVT))


def carry_on(
    df: DataFrame,
    spec: AdjustSpec,
    carried: DataFrame | None,
    refs: DataFrame | None,
    arrivals: int,
    flush: bool,
    one_chunk: bool = False,
    as_read: AsRead | None = None,
) -> DataFrame:
    """One run of a stream with ``--state``; needs :func:`classify` (with ``refs``).

    ``carried``: the rows an earlier run still held (own columns, ``_evt_t`` and their
    global arrival number :data:`ARRIVAL`), ``refs`` the reference time per key, and
    ``arrivals`` the rows read before this run.  The result has every row with
    ``_evt_route``: ``out`` (released now: ``evtime < ref - range*unit`` with the key's
    reference time after this run's last arrival, or everything with ``flush``),
    ``discard``, ``held`` (kept for the next run), plus one ``ref`` row per key carrying the
    new reference time in :data:`REF`.  Carried rows sort before this run's rows at equal
    evtime (``_evt_seq`` = :data:`CARRIED` + arrival), so released rows come out exactly as
    one run over all the inputs would order them.  ``one_chunk``, ``as_read``: what the
    reading knows, for this run's arrival numbers (see
    :func:`~evtime.engine.scan.arrival_numbers`)."""
    from evtime.columns import ROUTE

    df = arrival_numbers(df, ARRIVAL, as_read, one_chunk)
    df = df.withColumn(ARRIVAL, F.col(ARRIVAL) + F.lit(arrivals))
    rows = df
    if carried is not None:
        carried = carried.withColumns(
            {
                EVT: evtime_of(spec),
                SEQ: F.lit(CARRIED) + F.col(ARRIVAL),
                KEEP: F.lit(True),
            }
        )
        rows = rows.unionByName(carried, allowMissingColumns=True)
    new_refs = df.groupBy(*spec.keys).agg(F.max(EVT).alias(REF))
    if refs is not None:
        new_refs = new_refs.unionByName(refs).groupBy(*spec.keys).agg(F.max(REF).alias(REF))
    rows = join_keys(rows, new_refs, spec.keys)
    released = F.lit(flush) | (F.col(EVT) < sat.sub(F.col(REF), spec.width))
    rows = rows.withColumn(
        ROUTE, F.when(~F.col(KEEP), "discard").when(released, "out").otherwise("held")
    )
    if not flush:
        ref_rows = new_refs.where(F.col(REF).isNotNull()).select(
            *spec.keys,
            REF,
            F.col(REF).alias(EVT),
            F.lit(0).cast("long").alias(SEQ),
            F.lit("ref").alias(ROUTE),
        )
        rows = rows.unionByName(ref_rows, allowMissingColumns=True)
    return rows


def with_bounds(df, spec: AdjustSpec, lay, marker: str, time_format, tz, columns: list[str]):
    """``adjust --emit-bounds``: the output rows plus bound rows (routed 'emit', marked
    ``COL=VALUE`` by ``marker``), ordered after the rows with the same (evtime, arrival);
    and the output's ``columns`` with the marker column, when the input lacks it."""
    from evtime.engine.merge import KIND, marked_bounds

    col, _, value = marker.partition("=")
    if col not in df.columns:
        df = df.withColumn(col, F.lit(None).cast("string"))
        columns = [*columns[:-1], col, columns[-1]]
    bounds = emitted_bounds(df, spec)
    bounds = marked_bounds(bounds, spec.keys, lay, time_format, tz, col, value, df.dtypes)
    rows = df.withColumn(KIND, F.lit(0)).unionByName(bounds, allowMissingColumns=True)
    return sort_in_parts(rows, EVT, SEQ, KIND), columns
