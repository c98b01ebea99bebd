"""Timestamp adjustment (SPEC §2, seed 000), on the shared scan.

``evtime = floor(t / unit) * unit``; the reference time is the running max of evtime over
the key's arrivals; a row is discarded when ``evtime < ref_before - range*unit``; a kept
row is released by the first later arrival whose ref passes ``evtime + range*unit``, which
is the first arrival of the key with ``evtime > evtime_i + range*unit`` (a search in the
monotone ref sequence).  The output is the kept rows ordered by (evtime, arrival).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from evtime.engine import present
from evtime.engine import saturate as sat
from evtime.engine.running import NONE, values_of
from evtime.engine.scan import (
    AFTER_PARTS,
    ArrivalsHere,
    AsRead,
    Carry,
    KeptInPart,
    Ranges,
    apply_in_parts,
    arrival_numbers,
    arrivals_here,
    bucket_number,
    bucketer,
    carry_here,
    first_above,
    first_above_in_parts,
    in_ranges,
    join_small,
    kept_in_parts,
    key_numbers,
    positions_in_parts,
    prefix_max,
    reach_from,
    running,
    sliced_groups,
    sort_in_parts,
    stacked_by_key,
    value_limits,
)
from evtime.io.reader import CHUNK, FILE, PART, SEQ, T
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


def _evtime(spec: AdjustSpec):
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
    before any DataFrame exists: a run finds it while Spark starts (0.4 s for 10M rows,
    otherwise spent before its job)."""
    limits = truncated_range((known.least, known.greatest), spec.unit_ns)
    if limits is None or spec.keys:
        return None
    return carry_here(reach_from(known.times, spec.unit_ns), (), *limits, spec.width)


@dataclass(frozen=True)
class EarlyExplain:
    """What :func:`explain_in_parts` takes from one pass over the times read here, and the
    search's carry, found while Spark starts (:func:`early_explain`)."""

    arrivals: int
    here: ArrivalsHere
    carry: Carry | None
    plan: object = None  # evtime.engine.explain_in_place.ExplainPlan: no carry needed


def early_explain(spec: AdjustSpec, known) -> EarlyExplain | None:
    """:class:`EarlyExplain` for ``known.good`` arrivals (see :func:`early_carry`)."""
    limits = truncated_range((known.least, known.greatest), spec.unit_ns)
    if limits is None or spec.keys:
        return None
    firsts = _in_place_groups(known.groups or (), known.file_rows)
    here = arrivals_here(known.times, spec.unit_ns, known.good, firsts)
    if here is None:
        return None
    as_read = AsRead(known.groups or (), known.times, known.file_rows)
    plan = _explain_plan(spec, as_read, known.good, here, limits[1])
    if plan is not None:
        return EarlyExplain(known.good, here, None, plan)
    reach = here.dense(reach_from(known.times, spec.unit_ns))
    return EarlyExplain(known.good, here, carry_here(reach, (), *limits, spec.width))


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
    df = df.withColumn(EVT, _evtime(spec))
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
    timed = df.withColumn(EVT, _evtime(spec))
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
    df: DataFrame, spec: AdjustSpec, as_read: AsRead | None = None
) -> DataFrame:
    """``arrival``, ``reason`` and ``bound`` (the bound the row missed) for the discards;
    the arrival is :data:`ARRIVAL` when the rows have it (``--state``); ``as_read``: see
    :func:`~evtime.engine.scan.arrival_numbers`."""
    if ARRIVAL in df.columns:
        df = df.withColumn("arrival", F.col(ARRIVAL))
    else:
        df = arrival_numbers(df, "arrival", as_read)
    df = df.withColumn("bound", sat.sub(F.col(REF_BEFORE), spec.width))
    return df.withColumn("reason", F.when(F.col(KEEP), None).otherwise(_reason(spec, "bound")))


def order(df: DataFrame, limits: tuple[int, int] | None = None) -> DataFrame:
    """Output order: (evtime, arrival); ``limits``: the least and the greatest evtime, when
    known (see :func:`~evtime.units.truncated_range`)."""
    return sort_in_parts(df, EVT, SEQ, limits=limits)


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


def explain_in_parts(
    df: DataFrame,
    spec: AdjustSpec,
    sources: Sequence[str],
    own: Sequence[tuple[str, str]],
    arrivals: int,
    counts: str,
    limits: tuple[int, int] | None = None,
    as_read: AsRead | None = None,
    early: EarlyExplain | None = None,
    in_place: bool = False,
) -> tuple[DataFrame, ExplainInPart]:
    """:func:`explain` without a prefix scan, for ``arrivals`` rows: returns them in
    arrival order, as numbered parts with probe rows, and the step that makes each whole
    part the explanation (:class:`ExplainInPart`; the writer runs it, or
    :func:`~evtime.engine.scan.apply_in_parts`).  ``own``: the rows' own columns and the
    names they are shown under (:func:`~evtime.engine.present.own_columns`); ``counts``: a
    directory every Spark task and this process share (the writer's staging directory),
    where the search leaves the kept rows per part of the output.

    * The search of :func:`~evtime.engine.scan.kept_in_parts`, in the output's parts,
      gives each row the least arrival above its evtime + range*unit: the row is kept when
      there is none or it comes later (then it is the arrival that releases it), and the
      kept rows' places in their part.  It reads only the keys, evtime and arrival
      numbers.  Each part's kept rows are counted (:class:`CountedInPart`); the results
      go on, in the same job, packed (:class:`ResultsInPart`), to the parts of arrivals,
      where the whole rows, read again, meet them.  Those tasks start once every part is
      counted, and add the count of the parts before to the places: the output
      positions.
    * The reference time is the running maximum of evtime over the key's arrivals: each
      part of arrivals starts from a probe row (arrival 0) with the maximum of the parts
      before it (a small aggregate), and the step takes the running maximum over the part.

    ``as_read``: when it can read the times here (no keys), the arrival numbers, the
    search's carry and the reference times the parts of arrivals start from come from one
    pass over them (:func:`~evtime.engine.scan.arrivals_here`), not from Spark jobs;
    ``early``: that pass and the carry, made already (:func:`early_explain`).

    ``in_place``: ``df`` is the rows as Spark's Parquet reader reads them (each row group
    whole in one task), every one an arrival (no bad rows set aside).  When that pass also
    found the row groups (more than one; those of more than :data:`IN_PLACE_ROWS` rows
    in slices), the search runs first, as a job of its own, and leaves its results in
    ``counts`` by row group or slice (:class:`ResultsInFiles`); the rows are then
    explained where they are read, group by group (:class:`ExplainInPlace`): the whole
    rows are neither shuffled nor sorted.

    Raises OverflowError when bounds or search values leave the int64 range."""
    shown = dict(own)
    keys = tuple(shown[k] for k in spec.keys)
    here = carry = None
    if as_read is not None and as_read.times is not None and not keys:
        if early is not None and early.arrivals == arrivals:
            here, carry = early.here, early.carry
        else:
            firsts = _in_place_groups(as_read.groups, as_read.file_rows)
            here = arrivals_here(as_read.times, spec.unit_ns, arrivals, firsts)
    # (from here on rows are known by their arrival number: no SEQ through the shuffles)
    rows = df.withColumn(ARRIVAL, here.numbers()) if here else arrival_numbers(df, ARRIVAL, as_read)
    rows = rows.drop(CHUNK, SEQ).withColumn(EVT, _evtime(spec))
    rows = rows.withColumnsRenamed({c: s for c, s in own if c != s})
    lims = limits or value_limits(rows, EVT)
    if lims[0] is not None and lims[0] - spec.width < -(1 << 63):
        raise OverflowError(f"{EVT} - {spec.width} leaves the int64 range")
    if in_place and here is not None and lims[0] is not None:
        plan = early.plan if early is not None and early.here is here else None
        if plan is None and early is None:
            plan = _explain_plan(spec, as_read, arrivals, here, lims[1])
        if plan is not None:  # (no search job: each row group explained from the plan)
            return _explained_from_plan(rows.drop(EVT), spec, sources, keys, arrivals, here, plan)
    reach = here.dense(reach_from(as_read.times, spec.unit_ns)) if here else None
    if carry is not None and carry.fits((), *lims, spec.width):
        reach = carry
    narrow = rows.select(*keys, EVT, ARRIVAL)
    parts, search = kept_in_parts(
        narrow, EVT, spec.width, ARRIVAL, KEEP, keys, lims, REL, RANK, reach=reach
    )
    if in_place and here is not None and _in_place(here, arrivals, len(as_read.groups)):
        return _explained_in_place(
            rows.drop(EVT), parts, search, spec, sources, keys, counts, here, arrivals
        )
    # the search's results, a few rows per part of the output: one per part of arrivals
    # that has rows there, with their numbers packed (the rows themselves are not in the
    # search, which then moves only the columns it reads)
    last = max(arrivals, 1)
    found = apply_in_parts(parts, ResultsInPart(CountedInPart(search, counts), last))
    # parts of arrivals, each led by the reference time per key the parts before leave
    in_arrivals = bucketer(1, last)(F.col(ARRIVAL))
    # (evtime is made again from the time where it is shown: one column less to move)
    whole = rows.drop(EVT).withColumn(PART, in_arrivals)
    tops = None
    if here:  # (given to the step, not added as probe rows)
        tops = tops_before(here.tops)
    else:
        top = rows.groupBy(*keys, in_arrivals.alias(PART)).agg(F.max(EVT).alias("_top"))
        carry = running(top, keys, PART, {EVT: ("max", "_top")}).where(F.col(EVT).isNotNull())
        # (the carried reference time as a time: an evtime is its own evtime)
        carry = carry.select(*keys, F.col(EVT).alias(T), PART, F.lit(0).cast("long").alias(ARRIVAL))
        whole = whole.unionByName(carry, allowMissingColumns=True)
    found = found.withColumn(ARRIVAL, F.lit(0).cast("long"))
    rows = whole.unionByName(found, allowMissingColumns=True)
    # the parts of arrivals in runs, one per Spark partition, in order: each run can be
    # added to the output as soon as its task is done (arrival numbers are dense: the
    # runs are even)
    n = int(rows.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    ranges = Ranges(n, bucket_number(1, last, last))
    step = ExplainInPart(spec, tuple(sources), keys, counts, arrivals, ranges, tops)
    return in_ranges(rows, ranges).sortWithinPartitions(PART, ARRIVAL), step


def _in_place_groups(groups: Sequence[tuple[int, int | None]], file_rows) -> list[int]:
    """The first ``_evt_seq`` of each group of rows :class:`ExplainInPlace` explains as one
    part: the Parquet row groups (``groups``: :attr:`AsRead.groups`), those of more than
    :data:`IN_PLACE_ROWS` rows in slices (Spark-written files often have row groups of
    128 MB; each slice is still read whole by one task)."""
    return sliced_groups([g for g, _ in groups], file_rows, IN_PLACE_ROWS)


def _in_place(here: ArrivalsHere, arrivals: int, row_groups: int) -> bool:
    """Whether the groups ``here`` found suit :class:`ExplainInPlace`: more than one row
    group (of ``row_groups``; else one task does it all), no group above
    :data:`IN_PLACE_ROWS` rows (each is held whole)."""
    starts = here.group_starts
    if starts is None or row_groups < 2 or starts[0] != 1:
        return False
    return int(np.diff(np.r_[starts, arrivals + 1]).max()) <= IN_PLACE_ROWS


def _explained_in_place(
    rows: DataFrame,
    parts: DataFrame,
    search: KeptInPart,
    spec: AdjustSpec,
    sources: Sequence[str],
    keys: tuple[str, ...],
    counts: str,
    here: ArrivalsHere,
    arrivals: int,
) -> tuple[DataFrame, ExplainInPart]:
    """:func:`explain_in_parts` with ``in_place``: runs the search (one Spark job), returns
    the rows as read and :class:`ExplainInPlace`."""
    from evtime.engine import scan
    from evtime.errors import EvtimeError
    from evtime.io.writer import EachPart

    step = ResultsInFiles(CountedInPart(search, counts), here.group_starts)
    got = sum(r["rows"] for r in scan.collect_few(apply_in_parts(parts, step)))
    if got != arrivals:
        raise EvtimeError(f"internal error: the search found {got} of {arrivals} rows")
    explain = ExplainInPlace(
        spec,
        tuple(sources),
        keys,
        counts,
        arrivals,
        EachPart(len(here.group_starts)),
        tops_before(here.group_tops),
        here.group_starts,
    )
    return rows.withColumn(PART, F.lit(-1).cast("long")), explain


def _explain_plan(spec: AdjustSpec, as_read: AsRead, arrivals: int, here: ArrivalsHere, hi: int):
    """:func:`~evtime.engine.explain_in_place.explain_plan` when the row groups ``here``
    found fit (see :func:`~evtime.engine.adjust_in_place.fits`), else None."""
    from evtime.engine.adjust_in_place import fits
    from evtime.engine.explain_in_place import explain_plan

    if spec.keys or not fits(here, arrivals, len(as_read.groups), spec.width):
        return None
    return explain_plan(as_read.times, spec.unit_ns, spec.width, arrivals, here, hi)


def _explained_from_plan(
    rows, spec, sources, keys, arrivals, here, plan
) -> tuple[DataFrame, ExplainInPart]:
    """The rows as read and :class:`~evtime.engine.explain_in_place.ExplainedInPlace`."""
    from evtime.engine.explain_in_place import ExplainedInPlace
    from evtime.io.writer import EachPart

    step = ExplainedInPlace(
        spec,
        tuple(sources),
        keys,
        "",
        arrivals,
        EachPart(len(here.group_starts)),
        tops_before(here.group_tops),
        here.group_starts,
        plan,
    )
    return rows.withColumn(PART, F.lit(-1).cast("long")), step


def tops_before(tops: np.ndarray) -> np.ndarray:
    """Per part of arrivals that has rows (its ``tops`` entry, its greatest evtime, is not
    :data:`~evtime.engine.running.NONE`), the greatest evtime of the parts before it
    (NONE: there is none, or the part has no rows): ``running`` over the per-part maxima,
    from the times read here."""
    before = np.r_[NONE, np.maximum.accumulate(tops)[:-1]]
    return np.where(tops == NONE, NONE, before).astype(np.int64)


@dataclass(frozen=True)
class CountedInPart:
    """:class:`~evtime.engine.scan.KeptInPart` (with a ``rank``) that also leaves, per
    part, how many of its rows are kept and how many it has, in the file
    ``<counts>/kept-<part>`` (written whole under another name, then renamed: a task run
    again writes the same numbers)."""

    search: KeptInPart
    counts: str

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.search.columns, PART)

    def schema(self, schema: StructType) -> StructType:
        return self.search.schema(schema)

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        from evtime.io import staging

        kept = rows = 0
        for b in self.search(part):
            kept += b.num_rows - b.column(self.search.rank).null_count
            rows += b.num_rows
            yield b
        path = staging.join(self.counts, f"kept-{part.column(PART)[0].as_py():06d}")
        staging.put(path, f"{kept} {rows}\n".encode())


BLOB = "_evt_blob"  # explain: the search's results for rows of one part of arrivals


@dataclass(frozen=True)
class ResultsInPart:
    """The rows :class:`CountedInPart` yields for one part of the output, sent on as one
    row per part of the arrivals ``1..last`` (:func:`~evtime.engine.scan.bucketer`) that
    has rows there: ``PART`` that part of arrivals and :data:`BLOB` this part of the output,
    then their arrival numbers, the least arrival above each (-1: none) and each one's
    place among the part's kept rows (0: not kept), as int64 numbers and three arrays
    (:func:`results_of`)."""

    counted: CountedInPart
    last: int

    @property
    def columns(self) -> tuple[str, ...]:
        return self.counted.columns

    def schema(self, schema: StructType) -> StructType:
        from pyspark.sql.types import BinaryType, LongType, StructField

        return StructType([StructField(PART, LongType()), StructField(BLOB, BinaryType())])

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        to, blobs = packed_results(self.counted, part, lambda a: bucket_number(1, self.last, a))
        if len(to):
            yield pa.RecordBatch.from_pydict(
                {PART: to, BLOB: blobs},
                schema=pa.schema([(PART, pa.int64()), (BLOB, pa.binary())]),
            )


def packed_results(
    counted: CountedInPart, part: pa.Table, to: Callable[[np.ndarray], np.ndarray]
) -> tuple[np.ndarray, list[bytes]]:
    """What ``counted`` finds for one part of the output, by the parts of arrivals its rows
    are in (``to``: the part of each arrival number): those parts, ascending, and per each
    its rows' numbers packed (:class:`ResultsInPart`, :func:`results_of`)."""
    search = counted.search
    here = part.column(PART)[0].as_py()
    got = [
        (
            b.column(ARRIVAL).to_numpy(),
            b.column(search.least).fill_null(-1).to_numpy(),
            b.column(search.rank).fill_null(0).to_numpy(),
        )
        for b in counted(part)
    ]
    if not got or not sum(len(a) for a, _, _ in got):
        return np.zeros(0, np.int64), []
    arrival, least, rank = (np.concatenate(c) for c in zip(*got, strict=True))
    dest = to(arrival)
    order = np.argsort(dest, kind="stable")
    dest, packed = dest[order], np.stack([arrival[order], least[order], rank[order]])
    cuts = np.flatnonzero(np.r_[True, dest[1:] != dest[:-1], True])
    head = np.int64(here).tobytes()
    blobs = [head + packed[:, a:b].tobytes() for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    return dest[cuts[:-1]], blobs


def results_of(blobs: Sequence[bytes]) -> tuple[np.ndarray, ...]:
    """The arrays of :class:`ResultsInPart`'s rows (their :data:`BLOB`s) or
    :class:`ResultsInFiles`' files: arrival numbers, least arrivals above (-1: none),
    places among their part's kept rows (0: not kept) and their parts of the output, for
    every row they tell of."""
    numbers = [np.frombuffer(b, np.int64) for b in blobs]
    if not numbers:
        return tuple(np.zeros(0, np.int64) for _ in range(4))
    arrival, least, rank = np.concatenate([x[1:].reshape(3, -1) for x in numbers], axis=1)
    sizes = [(len(x) - 1) // 3 for x in numbers]
    return arrival, least, rank, np.repeat([x[0] for x in numbers], sizes).astype(np.int64)


def kept_before(counts: str, arrivals: int) -> np.ndarray:
    """Per part of the output (0..1023), the kept rows of the parts before it, from the
    files :class:`CountedInPart` left in ``counts``; they must account for every one of
    the ``arrivals``."""
    from evtime.errors import OutputError, in_task
    from evtime.io import staging

    kept = np.zeros(AFTER_PARTS + 1, np.int64)
    rows = 0
    for name in staging.names(counts):
        if name.startswith("kept-") and "." not in name:  # (not a file being written)
            k, n = map(int, staging.get(staging.join(counts, name)).split())
            kept[int(name[5:]) + 1] = k
            rows += n
    if rows != arrivals:
        raise in_task(  # (raised in a Spark task: the CLI shows the line alone)
            OutputError(
                f"the Spark tasks counted {rows} of {arrivals} rows in {counts}: on a cluster, "
                "set --staging (or EVTIME_STAGING) to a URL or directory this machine and "
                "every executor reach"
            )
        )
    return np.cumsum(kept)[:-1]


_KEPT_BEFORE: dict[str, np.ndarray] = {}  # per counts directory, in a Python worker


@dataclass(frozen=True)
class ExplainInPart:
    """The last step of :func:`explain_in_parts`, in Arrow, on each whole part of arrivals
    (sorted by arrival, probe rows first): the reference time per key as a running maximum,
    the output positions (:func:`kept_before`), then every explain column (SPEC §5) and the
    route (released rows ``out``, discarded ``discard``); the probe rows and the engine's
    columns are left out.  ``tops``: without keys, per part of arrivals, the greatest
    evtime of the parts before it (:func:`tops_before`), where the parts have no probe
    rows for it."""

    spec: AdjustSpec
    sources: tuple[str, ...]
    keys: tuple[str, ...]  # the key columns, as the rows name them
    counts: str
    arrivals: int
    ranges: Ranges | None = None  # how its parts are laid out in Spark partitions
    tops: np.ndarray | None = field(default=None, compare=False)

    READS = (T, FILE, ARRIVAL, BLOB)

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads (beside the ones it passes on)."""
        return (*self.keys, *self.READS)

    def schema(self, schema: StructType) -> StructType:
        """The Spark schema of the rows it yields, for rows of ``schema``."""
        from pyspark.sql.types import LongType, StringType, StructField

        from evtime.io.writer import ROUTE

        made = {c: LongType() for c in (*present.EXPLAIN_COLUMNS, "ref")}
        made.update({c: StringType() for c in _TEXT_COLUMNS})
        made[ROUTE] = StringType()
        gone = {*self.READS, *made}
        kept = [f for f in schema.fields if f.name not in gone]
        return StructType([*kept, *(StructField(c, t) for c, t in made.items())])

    def ref_before(self, part: pa.Table, evt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row: the max evtime (``evt``) of the key's earlier arrivals (the part's probe
        rows carry the parts before it), and whether there is one."""
        order, key = key_numbers(part, self.keys)
        if order is None:
            order, key = np.arange(len(evt)), np.zeros(len(evt), np.int64)
        ref, found = np.empty(len(evt), np.int64), np.empty(len(evt), bool)
        if len(evt) == 0:
            return ref, found
        stacked, _, back = stacked_by_key(evt[order], key)
        upto = np.maximum.accumulate(stacked)  # (no key's maximum reaches into the next)
        first = np.r_[True, key[1:] != key[:-1]]
        ref[order] = back(np.where(first, stacked, np.r_[stacked[:1], upto[:-1]]))
        found[order] = ~first
        return ref, found

    def kept(self) -> np.ndarray:
        """Per part of the output, the kept rows of the parts before it (:func:`kept_before`)."""
        if self.counts not in _KEPT_BEFORE:  # (a worker lives on: only this run's)
            _KEPT_BEFORE.clear()
            _KEPT_BEFORE[self.counts] = kept_before(self.counts, self.arrivals)
        return _KEPT_BEFORE[self.counts]

    @staticmethod
    def found(arrival: np.ndarray, results: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """Per row of a part of arrivals (``arrival``: dense, ascending), from the search's
        ``results`` (:func:`results_of`): the least arrival above it (-1: none), its place
        among its output part's kept rows (0: not kept) and that part."""
        from evtime.errors import OutputError, in_task

        a, least, rank, vpart = results
        at = a - (arrival[0] if len(arrival) else 0)
        seen = np.zeros(len(arrival), bool)
        if len(at) == len(arrival) and (not len(at) or 0 <= at.min() <= at.max() < len(at)):
            seen[at] = True
        if not seen.all():  # (every row is in exactly one part of the output)
            raise in_task(
                OutputError(
                    f"internal error: {len(at)} search results for {len(arrival)} rows "
                    f"from arrival {int(arrival[0]) if len(arrival) else None}"
                )
            )
        out = [np.empty(len(at), np.int64) for _ in range(3)]
        for o, v in zip(out, (least, rank, vpart), strict=True):
            o[at] = v
        return tuple(out)

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        packed = part.column(BLOB).is_valid()
        results = results_of(part.filter(packed).column(BLOB).to_pylist())
        yield from self.explained(part.filter(pc.invert(packed)), results)

    def explained(
        self, part: pa.Table, results: tuple[np.ndarray, ...]
    ) -> Iterator[pa.RecordBatch]:
        """The part's rows explained, with the search's ``results`` for them
        (:func:`results_of`)."""

        unit = self.spec.unit_ns
        t = values_of(part.column(T))  # (a probe row's: the evtime it carries)
        evt = t - np.mod(t, unit) if unit > 1 else t
        before, known = self.ref_before(part, evt)
        if self.tops is not None and part.num_rows:  # (before every row of the part)
            top = self.tops[part.column(PART)[0].as_py()]
            if top != NONE:
                before = np.where(known, np.maximum(before, top), top)
                known[:] = True
        real = values_of(part.column(ARRIVAL)) > 0  # (probe rows: arrival 0)
        rows = part if real.all() else part.filter(pa.array(real))
        before, known, evt = before[real], known[real], evt[real]
        ref = np.where(known, np.maximum(before, evt), evt)
        least, keep, pos = self.searched(rows, evt, before, known, ref, results)
        # (the columns made a slice at a time: a whole row group's text would be big)
        for at in range(0, rows.num_rows, EXPLAIN_SLICE):
            cut = slice(at, at + EXPLAIN_SLICE)
            yield from self.made(
                rows.slice(at, EXPLAIN_SLICE),
                evt[cut],
                before[cut],
                ref[cut],
                keep[cut],
                least[cut],
                pos[cut],
            )

    def searched(
        self,
        rows: pa.Table,
        evt: np.ndarray,
        before: np.ndarray,
        known: np.ndarray,
        ref: np.ndarray,
        results: tuple[np.ndarray, ...],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row of a part of arrivals: the least arrival above it (-1: none), whether it
        is kept and its output position (kept rows), from the search's ``results``."""
        least, rank, vpart = self.found(values_of(rows.column(ARRIVAL)), results)
        return least, rank > 0, self.kept()[vpart] + rank

    def made(
        self,
        rows: pa.Table,
        evt: np.ndarray,
        before: np.ndarray,
        ref: np.ndarray,
        keep: np.ndarray,
        least: np.ndarray,
        pos: np.ndarray,
    ) -> Iterator[pa.RecordBatch]:
        """``rows`` with the explain columns and the route, from their evtime, the greatest
        evtime before (their key's), the reference time, whether kept, the least arrival
        above (-1: none) and the output position (kept rows)."""
        from evtime.io.timeparse import format_ns
        from evtime.io.writer import ROUTE, routes

        late = np.flatnonzero(~keep)
        reason = pa.nulls(len(evt), pa.string())
        if len(late):
            words = pc.binary_join_element_wise(
                "late: evtime ",
                format_ns(pa.array(evt[late])),
                " is below the bound ",
                format_ns(pa.array(sat.sub_np(before[late], self.spec.width))),
                f" (reference time - {self.spec.range} {self.spec.unit})",
                "",
            )
            reason = pc.replace_with_mask(reason, pa.array(~keep), words)
        kept = pa.array(keep)
        end = keep & (least < 0)  # released only at the end of the input: by no arrival
        if end.any():
            reason = pc.if_else(pa.array(end), present.HELD_TO_END, reason)
        made = {
            "arrival": rows.column(ARRIVAL),
            "source": pa.array(self.sources, pa.string()).take(rows.column(FILE)),
            "time": rows.column(T),
            "evtime": pa.array(evt),
            "decision": pc.if_else(kept, present.RELEASED, present.DISCARDED),
            "bound": pa.array(sat.sub_np(ref, self.spec.width)),
            "ref": pa.array(ref),
            "released_by": pa.array(least, pa.int64(), mask=~keep | (least < 0)),
            "output_pos": pa.array(pos, mask=~keep),
            "windows": pa.nulls(len(evt), pa.string()),
            "reason": reason,
            ROUTE: routes(~keep, ["out", "discard"]),
        }
        rows = rows.drop_columns([c for c in rows.column_names if c in {*self.READS, *made}])
        for name, col in made.items():
            rows = rows.append_column(name, col)
        yield from rows.to_batches()


EXPLAIN_SLICE = 1 << 16  # rows of a part explained at a time


_TEXT_COLUMNS = ("source", "decision", "windows", "reason")

IN_PLACE_ROWS = 1 << 21  # the most rows explained in place as one part (a row group or a slice)


def _results_of_group(counts: str, group: int) -> str:
    """The directory of one row group's results (:class:`ResultsInFiles`)."""
    from evtime.io import staging

    return staging.join(counts, f"res-{group:06d}")


@dataclass(frozen=True)
class ResultsInFiles:
    """:class:`ResultsInPart` for rows explained where they were read
    (:class:`ExplainInPlace`): what each part of the output finds for the rows of each row
    group goes to the file ``<counts>/res-<group>/<part>`` (the numbers of a
    :data:`BLOB`; written whole under another name, then renamed: a task run again writes
    the same numbers), and the part yields one row, its rows' count.  ``starts``: the
    first arrival of every row group, ascending."""

    counted: CountedInPart
    starts: np.ndarray = field(compare=False)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.counted.columns

    def schema(self, schema: StructType) -> StructType:
        from pyspark.sql.types import LongType, StructField

        return StructType([StructField(PART, LongType()), StructField("rows", LongType())])

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        from evtime.io import staging

        here = part.column(PART)[0].as_py()
        groups, blobs = packed_results(
            self.counted, part, lambda a: np.searchsorted(self.starts, a, "right") - 1
        )
        rows = 0
        for g, blob in zip(groups.tolist(), blobs, strict=True):
            where = _results_of_group(self.counted.counts, g)
            staging.put(staging.join(where, f"{here:06d}"), blob)
            rows += (len(blob) - 8) // 24
        yield pa.RecordBatch.from_pydict({PART: [here], "rows": [rows]})


@dataclass(frozen=True)
class ExplainInPlace(ExplainInPart):
    """:class:`ExplainInPart` on rows where they were read (Spark's Parquet reader: each
    row group whole in one task, in order): each row group is a part of arrivals, numbered
    in the writer (:meth:`numbered`), and takes the search's results from the files
    :class:`ResultsInFiles` left.  ``starts``: the first arrival of every row group;
    ``tops``: per row group, the greatest evtime before it (:func:`tops_before`)."""

    starts: np.ndarray = field(default=None, compare=False)

    READS = (T, FILE, ARRIVAL)

    def numbered(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch with each row's part of arrivals: its row group."""
        group = np.searchsorted(self.starts, values_of(batch.column(ARRIVAL)), "right") - 1
        cols = dict(zip(batch.schema.names, batch.columns, strict=True))
        cols[PART] = pa.array(group, pa.int64())
        return pa.RecordBatch.from_pydict(cols)

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        from evtime.io import staging

        group = part.column(PART)[0].as_py()
        self.kept()  # (first: it says where the files are missing)
        where = _results_of_group(self.counts, group)
        blobs = []
        for name in staging.names(where):
            if "." not in name:  # (not a file being written)
                blobs.append(staging.get(staging.join(where, name)))
        yield from self.explained(part, results_of(blobs))


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
    one run over all the inputs would order them."""
    from evtime.io.writer import ROUTE

    df = arrival_numbers(df, ARRIVAL).withColumn(ARRIVAL, F.col(ARRIVAL) + F.lit(arrivals))
    rows = df
    if carried is not None:
        carried = carried.withColumns(
            {
                EVT: _evtime(spec),
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
