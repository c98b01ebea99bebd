"""The one mechanism under every operator (SPEC §0), in parallel, DataFrame API only.

* :func:`prefix_max` - a bound as a running maximum over arrival order: two passes over
  the data (per-chunk maxima -> carry from earlier chunks -> running max inside a chunk),
  never a window over the whole input.  Without keys, on the input as read
  (:class:`AsRead`), the second pass runs where the rows were read, in Arrow
  (:func:`_streamed`), and for Parquet the footers stand in for the first
  (:func:`_streamed_from`).
* :func:`first_above` - a search in a monotone sequence: for each query value, the first
  arrival whose value passes it (release points, closing points).
* :func:`arrival_numbers` / :func:`positions` - dense 1-based numbers in arrival order and
  in output order, from per-chunk / per-bucket counts.
* :func:`kept_in_parts` - the keep rule of a bound found in the output's own parts; its
  last step (:class:`KeptInPart`) runs in Arrow on each whole part, where the part is
  written (per-row Python here, with the streamed scans of :mod:`evtime.engine.running`:
  numpy over whole arrays).

Rows carry ``_evt_seq`` (increasing in arrival order, unique) and ``_evt_chunk``
(``_evt_seq >> 20``: runs of consecutive arrivals, dense inside a run).  Windows below are
partitioned by (keys, chunk) or (keys, bucket) over the rows, or run over small tables of
per-chunk / per-bucket aggregates.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.functions import arrow_udf
from pyspark.sql.types import LongType, StructField, StructType
from pyspark.util import PythonEvalType

from evtime.columns import CHUNK, CHUNK_SHIFT, FILE, PART, ROW, SEQ, SEQ_FILE_SHIFT
from evtime.engine.running import NONE, RunningFromGroups, RunningInRuns, values_of
from evtime.units import LAST

UNBOUNDED = Window.unboundedPreceding
BUCKET_BITS = 10  # up to 1024 value buckets for searches and output positions
AFTER_PARTS = 1 << BUCKET_BITS  # part numbers from here on come after every sorted part


def running(
    small: DataFrame,
    by: Sequence[str],
    order: str,
    aggs: Mapping[str, tuple[str, str]],
    descending: bool = False,
    at: DataFrame | None = None,
    through: bool = False,
) -> DataFrame:
    """Running aggregates over the rows *before* each row of a small table (one row per
    (keys, order) value: per-chunk or per-bucket aggregates; ``through``: and the row
    itself).  ``aggs`` maps an output name to ``(function, column)``, e.g. ``{"_off":
    ("sum", "_n")}``; a row with nothing before it gets null.  Returns ``(by..., order,
    outputs...)``; without keys, ``at`` (a table of ``order`` values) gives the values to
    return rows for instead of the table's own.

    With keys this is a window partitioned by the keys.  Without keys a window would need
    every row in one partition (an exchange into a single partition); instead the small
    table is joined with itself (broadcast, ``earlier.order < row.order``) and aggregated:
    quadratic in the small table's rows (chunks of 2^20 arrivals, or <= 1024 buckets), so
    cheap, and parallel; the table is computed once for both sides."""
    if by:
        o = F.col(order).desc() if descending else F.col(order)
        w = Window.partitionBy(*by).orderBy(o).rowsBetween(UNBOUNDED, 0 if through else -1)
        return small.select(
            *by, order, *[getattr(F, fn)(c).over(w).alias(out) for out, (fn, c) in aggs.items()]
        )
    cols = sorted({c for _, c in aggs.values()})
    other = F.broadcast(
        small.select(F.col(order).alias("_ro"), *[F.col(c).alias(f"_rx_{c}") for c in cols])
    )
    earlier, row = (F.col(order), F.col("_ro")) if descending else (F.col("_ro"), F.col(order))
    # Without ``at`` both sides read the same table, and Spark computes it once if both
    # plans are the same: the row side keeps the table's columns as grouping columns (the
    # optimizer prunes unused aggregates, never grouping columns; with one row per order
    # value they group nothing), and the condition is not null-intolerant (no filter is
    # inferred for one side only)
    before = F.coalesce(earlier <= row if through else earlier < row, F.lit(False))
    own = {} if at is not None else {f"_rp_{c}": F.col(c) for c in cols}
    return (
        (small if at is None else at)
        .select(order, *[c.alias(name) for name, c in own.items()])
        .join(other, before, "left")
        .groupBy(order, *own)
        .agg(*[getattr(F, fn)(f"_rx_{c}").alias(out) for out, (fn, c) in aggs.items()])
        .select(order, *aggs)
    )


def join_small(df: DataFrame, small: DataFrame, on: Sequence[str]) -> DataFrame:
    """``df`` left-joined with a small table on ``on`` (null-safe: null keys match)."""
    renamed = small.select(
        *[F.col(c).alias(f"_r_{c}") for c in on],
        *[c for c in small.columns if c not in on],
    )
    cond = None
    for c in on:
        eq = df[c].eqNullSafe(renamed[f"_r_{c}"])
        cond = eq if cond is None else cond & eq
    return df.join(renamed, cond, "left").drop(*[f"_r_{c}" for c in on])


_PROBE = "_evt_probe"  # a carry row inside a chunk's window (see _carried_in)


def _carried_in(
    df: DataFrame, by: Sequence[str], carry: DataFrame, values: Sequence[str]
) -> DataFrame:
    """``df`` plus one *probe* row per ``(by..., chunk)`` of ``carry``, with its ``values``
    (what the chunks before carry in) and ``_evt_seq`` below every arrival, so that it
    sorts first in its chunk: a window over ``(by, chunk)`` in ``_evt_seq`` order then
    includes the carry in every row's frame, and no join brings it to the rows (a join
    would shuffle every row once more: it needs another partitioning than the window)."""
    rows = carry.select(
        *by, CHUNK, *values, F.lit(-(1 << 63)).alias(SEQ), F.lit(True).alias(_PROBE)
    )
    return df.withColumn(_PROBE, F.lit(False)).unionByName(rows, allowMissingColumns=True)


def prefix_max(
    df: DataFrame,
    values: Mapping[str, Column | str],
    by: Sequence[str] = (),
    inclusive=True,
    one_chunk=False,
    as_read: AsRead | None = None,
    known: tuple[np.ndarray, np.ndarray] | None = None,
) -> DataFrame:
    """Add, per ``out -> value``, the max of ``value`` over the key's arrivals up to this one.

    ``inclusive=False`` excludes the row itself (the bound in force when it arrives).
    Nulls are ignored; a key with no value yet gives null.  ``one_chunk``, ``as_read``,
    ``known``: see :func:`prefix_count_max`.
    """
    return prefix_count_max(df, {}, values, by, inclusive, one_chunk, as_read, known)


def value_limits(df: DataFrame, col: str) -> tuple[int | None, int | None]:
    """The least and the greatest value of an int64 column (one small aggregate job)."""
    lo, hi = df.agg(F.min(col), F.max(col)).first()
    return lo, hi


def bucketer(lo: int | None, hi: int | None) -> Callable[[Column], Column]:
    """A monotone bucket number (0..1023) for int64 values between ``lo`` and ``hi``
    (values outside go to the first or the last bucket)."""
    if lo is None:
        return lambda c: F.lit(0)
    shift = max(0, (hi - lo).bit_length() - BUCKET_BITS)
    top = (1 << BUCKET_BITS) - 1

    def bucket(c: Column) -> Column:
        if shift == 0:  # (hi - lo < 1024: c - lo overflows only far past hi)
            past = c >= F.lit(lo + top) if lo + top <= LAST else F.lit(False)
            return F.when(c <= F.lit(lo), 0).when(past, top).otherwise(c - F.lit(lo))
        # (c - lo) >> shift without overflow (lo and c may be 2**63 or more apart): halves
        half = F.shiftright(c, 1) - F.lit(lo >> 1)
        if lo & 1:
            half = half - F.when(F.pmod(c, F.lit(2)) == 0, 1).otherwise(0)
        b = F.shiftright(half, shift - 1)
        return F.when(c <= F.lit(lo), 0).when(b >= top, top).otherwise(b)

    return bucket


def bucket_number(lo: int, hi: int, value: int | np.ndarray) -> int | np.ndarray:
    """:func:`bucketer`'s bucket of ``value`` (an int, or each of an int64 array), here
    (``lo`` and ``hi`` not None)."""
    shift = max(0, (hi - lo).bit_length() - BUCKET_BITS)
    top = (1 << BUCKET_BITS) - 1
    if isinstance(value, np.ndarray):  # (as bucketer: no int64 overflow)
        if shift == 0:  # (value - lo wraps only where value is past lo + top: not taken)
            past = value >= lo + top if lo + top <= LAST else np.zeros(value.shape, bool)
            return np.where(value <= lo, 0, np.where(past, top, value - lo))
        half = (value >> 1) - (lo >> 1) - (((value & 1) == 0) & bool(lo & 1))
        return np.where(value <= lo, 0, np.minimum(half >> (shift - 1), top))
    return 0 if value <= lo else min((value - lo) >> shift, top)


def first_reaching(
    times: Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]], thresholds: np.ndarray
) -> np.ndarray:
    """Per threshold (ascending), the first arrival (its ``_evt_seq``) whose time is at or
    above it, -1 where none is: the first place where the running maximum of the times
    reaches it (a search in a monotone sequence, batch by batch).  ``times()``:
    ``(_evt_seq, time)`` batches in arrival order (:attr:`AsRead.times`)."""
    found = np.full(len(thresholds), -1, np.int64)
    j, top = 0, None
    for seq, t in times():
        if j == len(thresholds):
            break
        if not len(t):
            continue
        reached = np.maximum.accumulate(t)
        if top is not None:
            np.maximum(reached, top, out=reached)
        top = reached[-1]
        at = np.searchsorted(reached, thresholds[j:], side="left")
        n = int(np.count_nonzero(at < len(reached)))  # (a prefix: both ascend)
        found[j : j + n] = seq[at[:n]]
        j += n
    return found


def rounded_up(x: np.ndarray, unit: int | None) -> np.ndarray:
    """``x`` rounded up to a multiple of ``unit`` (as it is for no unit, 0 or 1; the int64
    maximum where rounding leaves the int64 range: no time reaches it)."""
    if not unit or unit <= 1:
        return x
    down = x - np.mod(x, unit)
    return np.where(down == x, x, np.minimum(down, np.iinfo(np.int64).max - unit) + unit)


Times = Callable[..., Iterator[tuple[np.ndarray, np.ndarray]]]  # see AsRead.times
Reach = Callable[[np.ndarray], Mapping[tuple, np.ndarray]]  # see carry_here


def reach_from(times: Times, unit: int | None, keys: Sequence[int] = ()) -> Reach:
    """``reach`` for :func:`kept_in_parts` from the times read here (:attr:`AsRead.times`),
    for a lead that is the time truncated to ``unit`` ns (None: the time itself): evtime >= x
    exactly when the time is at or above x rounded up to the unit.  ``keys``: each input
    file's key (merge: its source number), one search per key over its own files; empty:
    one search over every file, for the key ``()``."""
    files = {(k,): {i for i, g in enumerate(keys) if g == k} for k in set(keys)}

    def reach(thresholds: np.ndarray) -> dict[tuple, np.ndarray]:
        at = rounded_up(thresholds, unit)
        if not files:
            return {(): first_reaching(times, at)}
        return {k: first_reaching(lambda f=f: times(f), at) for k, f in files.items()}

    return reach


@dataclass(frozen=True)
class ArrivalsHere:
    """What one pass over the times read here (:attr:`AsRead.times`) tells of the dense
    arrival numbers 1..n (:func:`arrivals_here`): ``before``, per input file (by its
    index), the arrivals of the files before it; ``tops``, per part of the arrivals
    (:func:`bucketer` over 1..n), the greatest time floored to the unit (:data:`NONE`:
    none); when the row groups were given, ``group_starts``, the first arrival of each
    row group that has rows (ascending), and ``group_tops``, their greatest time floored
    to the unit (else None)."""

    before: np.ndarray
    tops: np.ndarray
    group_starts: np.ndarray | None = field(default=None, compare=False)
    group_tops: np.ndarray | None = field(default=None, compare=False)

    def numbers(self) -> Column:
        """Each row's arrival number, from its ``_evt_seq``: no Spark job (as
        :func:`arrival_numbers` needs to count the rows per chunk)."""
        return numbers_after(self.before)

    def arrival_of(self, seq: np.ndarray) -> np.ndarray:
        """The arrival numbers of ``_evt_seq`` values (:func:`arrival_of`)."""
        return arrival_of(self.before, seq)

    def dense(self, reach: Reach) -> Reach:
        """``reach`` (:func:`reach_from`) giving arrival numbers, not ``_evt_seq`` values."""

        def numbered(thresholds: np.ndarray) -> dict[tuple, np.ndarray]:
            out = {}
            for key, seq in reach(thresholds).items():
                out[key] = np.where(seq >= 0, self.arrival_of(np.maximum(seq, 0)), -1)
            return out

        return numbered


def arrival_of(before: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """The 1-based arrival numbers of ``_evt_seq`` values (at least 0), ``before[i]``
    being the arrivals of the files before file ``i``: as :func:`numbers_after`, here."""
    return before[seq >> SEQ_FILE_SHIFT] + (seq & ((1 << SEQ_FILE_SHIFT) - 1)) + 1


def numbers_after(before: Sequence[int], seq: str = SEQ) -> Column:
    """The 1-based arrival number of the ``_evt_seq`` in column ``seq`` (null stays null),
    ``before[i]`` being the arrivals of the files before file ``i``: an expression, no
    Spark job and no join."""
    offsets = F.array(*[F.lit(int(b)).cast("long") for b in before])
    file = F.shiftright(F.col(seq), SEQ_FILE_SHIFT)
    row = F.col(seq).bitwiseAND(F.lit((1 << SEQ_FILE_SHIFT) - 1))
    return F.element_at(offsets, file.cast("int") + 1) + row + 1


def arrivals_here(
    times: Times, unit: int | None, arrivals: int, groups: Sequence[int] = ()
) -> ArrivalsHere | None:
    """:class:`ArrivalsHere` of ``arrivals`` rows, from one pass over their times read here
    (None when the pass does not find that many rows); ``groups``: the first ``_evt_seq``
    of every Parquet row group, in arrival order (:attr:`AsRead.groups`), for the
    greatest time of each."""
    last = max(arrivals, 1)
    tops = np.full(AFTER_PARTS, NONE, np.int64)
    firsts = np.asarray(groups, np.int64)
    in_groups = np.full(len(firsts), NONE, np.int64)
    seen = np.zeros(len(firsts), bool)
    rows: dict[int, int] = {}
    n = 0
    for seq, t in times():
        if not len(t):
            continue
        file = int(seq[0]) >> SEQ_FILE_SHIFT  # (a batch is of one file)
        rows[file] = rows.get(file, 0) + len(t)
        part = bucket_number(1, last, np.arange(n + 1, n + len(t) + 1, dtype=np.int64))
        starts = np.flatnonzero(np.r_[True, part[1:] != part[:-1]])
        floored = t if not unit or unit <= 1 else np.where(t == NONE, NONE, t - np.mod(t, unit))
        np.maximum.at(tops, part[starts], np.maximum.reduceat(floored, starts))
        if len(firsts):
            g = np.searchsorted(firsts, seq, "right") - 1
            cut = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
            if g[0] < 0:  # (rows before the first row group: the groups are not these rows')
                firsts = firsts[:0]
            else:
                np.maximum.at(in_groups, g[cut], np.maximum.reduceat(floored, cut))
                seen[g[cut]] = True
        n += len(t)
    if n != arrivals:
        return None
    counts = np.zeros(max(rows, default=-1) + 1, np.int64)
    for file, k in rows.items():
        counts[file] = k
    before = rows_before(counts)
    if not len(firsts) or not seen.any():
        return ArrivalsHere(before, tops)
    return ArrivalsHere(before, tops, arrival_of(before, firsts[seen]), in_groups[seen])


def sliced_groups(groups: Sequence[int], file_rows: Sequence[int], most: int) -> list[int]:
    """The first ``_evt_seq`` of every row group (``groups``, ascending, as
    :func:`arrivals_here` takes them), each row group of more than ``most`` rows cut into
    even slices of at most ``most`` rows, each then counted as a group of its own.  A row
    group's rows: up to the next one of its file, the last one's up to the file's rows in
    ``file_rows`` (by file index; a file it does not give keeps its last row group whole).
    """
    out: list[int] = []
    for i, first in enumerate(groups):
        file = first >> SEQ_FILE_SHIFT
        if i + 1 < len(groups) and groups[i + 1] >> SEQ_FILE_SHIFT == file:
            end = groups[i + 1]
        elif file < len(file_rows):
            end = (file << SEQ_FILE_SHIFT) + file_rows[file]
        else:
            end = first
        n = end - first
        k = max(1, -(-n // most))  # slices
        out.extend(first + j * n // k for j in range(k))
    return out


def rows_before(counts) -> np.ndarray:
    """Per entry of ``counts`` (rows per file, by index), the rows of the entries before."""
    counts = np.asarray(counts, np.int64)
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def _part(bucket: Callable[[Column], Column], lead: str) -> Column:
    """A row's output part: the bucket of its ``lead`` (a null ``lead``: part 0, first)."""
    return F.coalesce(bucket(F.col(lead)), F.lit(0))


def bucket_column(df: DataFrame, col: str) -> Column:
    """A monotone bucket number (0..1023) of an int64 column, from its min and max."""
    return bucketer(*value_limits(df, col))(F.col(col))


def first_above(
    queries: DataFrame,
    data: DataFrame,
    by: Sequence[str],
    out: str,
    strict: bool = True,
    keep_by: Sequence[str] = (),
    limits: tuple[int, int] | None = None,
) -> DataFrame:
    """For each query row ``(by..., _q, _v)``: the least ``_a`` among ``data (by..., _v, _a)``
    rows of the same key with ``_v > query._v`` (``>=`` when ``strict=False``).
    ``limits``: the least and the greatest ``_v`` of both, when the caller knows them (no
    aggregate job to find them; any pair gives the right answer, the true one even buckets).

    Returns ``(keep_by..., _q, out)`` (``keep_by``: columns of ``by`` that, with ``_q``,
    identify a query).  The data's ``_v`` need not be sorted by ``_a``: this is the
    minimum arrival over a suffix in value order, which for a monotone sequence is the first
    point that passes the query.
    """
    kind_q = 1 if strict else -1  # at equal values, queries sort before (strict) or after data
    both = data.select(*by, "_v", "_a", F.lit(0).alias("_k"), F.lit(None).cast("long").alias("_q"))
    both = both.unionByName(
        queries.select(
            *by, "_v", F.lit(None).cast("long").alias("_a"), F.lit(kind_q).alias("_k"), "_q"
        )
    )
    both = both.withColumn("_b", bucketer(*(limits or value_limits(both, "_v")))(F.col("_v")))
    per_bucket = both.groupBy(*by, "_b").agg(F.min("_a").alias("_bm"))
    carry = running(per_bucket, by, "_b", {"_bc": ("min", "_bm")}, descending=True)
    inside = (
        Window.partitionBy(*by, "_b")
        .orderBy(F.col("_v").desc(), F.col("_k").desc())
        .rowsBetween(UNBOUNDED, 0)
    )
    found = both.withColumn("_in", F.min("_a").over(inside)).where(F.col("_k") != 0)
    found = join_small(found, carry, [*by, "_b"])
    return found.select(*keep_by, "_q", F.least("_bc", "_in").alias(out))


def count_offsets(
    df: DataFrame, group: str, out: str, weight: str | None = None, through: bool = False
) -> DataFrame:
    """``(group, out)``: how many rows of ``df`` are in groups before each group (with
    ``weight``, a column of row counts: their sum); ``through``: and in the group itself."""
    n = F.sum(weight) if weight else F.count(F.lit(1))
    counts = df.groupBy(group).agg(n.alias("_n"))
    return running(counts, (), group, {"_before": ("sum", "_n")}, through=through).select(
        group, F.coalesce("_before", F.lit(0)).alias(out)
    )


def chunk_offsets(df: DataFrame, out: str) -> DataFrame:
    """``(_evt_chunk, out)``: arrivals before each chunk (a small table)."""
    return count_offsets(df, CHUNK, out)


def arrival_offsets(
    df: DataFrame, as_read: AsRead | None = None, one_chunk: bool = False
) -> DataFrame | np.ndarray | None:
    """What :func:`numbered` numbers the arrivals of ``df`` from: None when the caller
    knows every row has the same ``_evt_chunk`` (``one_chunk``: a small input read in the
    driver; no arrival comes before that chunk); when ``as_read`` knows the rows of every
    file (:attr:`AsRead.file_rows`), the rows before each file; neither needs a Spark job.
    Else the arrivals before each chunk (:func:`chunk_offsets`)."""
    if one_chunk:
        return None
    if as_read is not None and as_read.file_rows:
        return rows_before(as_read.file_rows)
    return chunk_offsets(df, "_off")


def arrival_numbers(
    df: DataFrame, out: str = "arrival", as_read: AsRead | None = None, one_chunk: bool = False
) -> DataFrame:
    """1-based arrival numbers over the whole input (dense) (:func:`arrival_offsets`)."""
    return numbered(df, SEQ, arrival_offsets(df, as_read, one_chunk), out)


def numbered(
    df: DataFrame, seq: str, offsets: DataFrame | np.ndarray | None, out: str
) -> DataFrame:
    """Add ``out``: the 1-based arrival number of the ``_evt_seq`` value in column ``seq``
    (null stays null), from ``offsets``: ``(_evt_chunk, _off)`` (:func:`chunk_offsets`),
    the rows before each file, or None for one chunk and nothing before it
    (:func:`arrival_offsets`: those two an expression, no join)."""
    if isinstance(offsets, np.ndarray):
        return df.withColumn(out, numbers_after(offsets, seq))
    in_chunk = F.col(seq).bitwiseAND(F.lit((1 << CHUNK_SHIFT) - 1)) + 1
    if offsets is None:
        return df.withColumn(out, in_chunk)
    # (broadcast: one row per 2^20 arrivals; a shuffle join would move every row)
    offsets = F.broadcast(offsets.withColumnRenamed(CHUNK, "_nb_chunk"))
    return (
        df.join(offsets, F.shiftright(seq, CHUNK_SHIFT) == F.col("_nb_chunk"), "left")
        .withColumn(out, F.col("_off") + in_chunk)
        .drop("_off", "_nb_chunk")
    )


def positions(df: DataFrame, time: str, out: str, keep: Column) -> DataFrame:
    """1-based positions in output order ``(time, arrival)`` of the rows where ``keep``."""
    kept = df.where(keep).select(time, SEQ)
    kept = kept.withColumn("_b", bucket_column(kept, time))
    offsets = count_offsets(kept, "_b", "_off")
    ranked = join_small(kept, offsets, ["_b"]).select(
        SEQ,
        (F.col("_off") + F.row_number().over(Window.partitionBy("_b").orderBy(time, SEQ))).alias(
            out
        ),
    )
    return join_small(df, ranked, [SEQ])


def sort_in_parts(
    df: DataFrame, lead: str, *then: Column | str, limits: tuple[int, int] | None = None
) -> DataFrame:
    """Rows in the order ``(lead, *then)`` as numbered parts, without a global sort.

    A global sort samples its input first: one more pass over the whole plan that leads to
    it (the scans and windows of the operator).  Here the order is cut by value instead:
    ``PART`` = a monotone bucket of ``lead`` (int64), from its min and max (one small
    aggregate), rows are shuffled by ``PART`` and sorted inside each partition by
    ``(PART, lead, *then)``.  The writer writes one file per ``PART`` and concatenates them
    in ``PART`` order.  Skew: equal-width buckets; a value far away from the rest (a
    marker in the far future) puts most rows in one part - correct, less parallel.  A null
    ``lead`` goes to part 0 and sorts first, as in a sort.  ``limits``: the least and the
    greatest ``lead`` when the caller knows them (no aggregate job; any pair gives the
    right order, the true one gives even parts).
    """
    bucket = bucketer(*limits) if limits else bucketer(*value_limits(df, lead))
    df = df.withColumn(PART, _part(bucket, lead))
    return df.repartition(PART).sortWithinPartitions(PART, lead, *then)


def arrival_range(arrivals: int) -> tuple[int, int]:
    """The least and the greatest 1-based arrival number of ``arrivals`` rows: the
    ``limits`` of :func:`sort_in_parts` by arrival (no aggregate job to find them)."""
    return 1, max(arrivals, 1)


@dataclass(frozen=True)
class Ranges:
    """Parts ``0..top`` as ``n`` runs of consecutive parts, run ``i`` in Spark partition
    ``i`` (:func:`in_ranges`): the tasks then hold the output in order, and the writer can
    assemble each run as soon as its task is done, while the later ones run."""

    n: int
    top: int

    def of_part(self, part: int) -> int:
        """The partition that holds ``part`` (a part above ``top``: the last)."""
        return min(part, self.top) * self.n // (self.top + 1)

    def parts(self, i: int) -> range:
        """The parts partition ``i`` holds (the last one also those above ``top``)."""
        size = self.top + 1
        return range(-(-i * size // self.n), -(-(i + 1) * size // self.n))


_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix(h1: int, k1: int) -> int:
    k1 = _rotl((k1 * 0xCC9E2D51) & _M32, 15) * 0x1B873593 & _M32
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _M32


def hash_long(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of a long (Murmur3 x86 32-bit, seed 42, as its hash partitioning
    computes it), here, without a job: a job to ask Spark took 1.5 s of a run."""
    h1 = _mix(_mix(seed, value & _M32), (value >> 32) & _M32) ^ 8
    h1 = (h1 ^ (h1 >> 16)) * 0x85EBCA6B & _M32
    h1 = (h1 ^ (h1 >> 13)) * 0xC2B2AE35 & _M32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >> 31 else h1


def in_ranges(df: DataFrame, ranges: Ranges) -> DataFrame:
    """``df`` (with ``PART``) shuffled so that Spark partition ``i`` holds the parts of
    ``ranges.parts(i)``.  Spark puts a row in partition ``pmod(hash(key), n)``: the key is
    a value that hashes to the row's partition, one per partition (the first of 0, 1, 2,
    ... that does, by :func:`hash_long`).  The number of partitions is explicit, so
    adaptive execution leaves it as it is."""
    n = ranges.n
    keys: dict[int, int] = {}
    v = 0
    while len(keys) < n:  # (about n log n tries)
        keys.setdefault(hash_long(v) % n, v)
        v += 1
    table = F.array(*[F.lit(keys[i]).cast("long") for i in range(n)])
    part = F.least(F.col(PART), F.lit(ranges.top))
    at = F.floor(part * F.lit(n) / F.lit(ranges.top + 1)).cast("int") + F.lit(1)
    # (an expression, not a column: the shuffle computes it, the rows do not carry it)
    return df.repartition(n, F.element_at(table, at))


PROBE = "_fa_probe"  # rows that only take part in the in-parts search (halo, carry)


def _with_probes(
    df: DataFrame,
    lead: str,
    width: int,
    arrival: str,
    by: Sequence[str],
    lo: int,
    hi: int,
    keys: DataFrame | None = None,
    carried: bool = False,
) -> DataFrame:
    """The rows of :func:`first_above_in_parts` with ``PART`` and :data:`PROBE`, plus the
    probe rows (``by``, ``lead``, ``arrival``, ``PART``; the rest null) that put into each
    part every arrival that can pass one of its rows: the *halo* (rows of later parts
    within ``width`` of the part's lower edge, copied into it) and the *carry* (per part,
    the least arrival of the rows beyond the part + ``width``, with ``lead`` above every
    row's ``lead + width``).  ``keys``: every value of ``by`` (a small table of those
    columns), when known, such as merge's source numbers.  ``carried``: the carry is
    found here and given to the step (:class:`Carry`), not added as rows.  Raises
    OverflowError when that value leaves the int64 range."""
    beyond = hi + width + 1  # above every row's lead + width: the carry rows' value
    if beyond + width + 1 >= 1 << 63:
        raise OverflowError(f"{lead} + {width} leaves the int64 range")
    bucket = bucketer(lo, hi)
    back = F.col(lead) - F.lit(width + 1)  # a row passes the rows at or below this value
    reaches = F.col(lead) >= F.lit(lo + width + 1)  # the row passes some value
    own, reached = bucket(F.col(lead)), bucket(back)  # its part; the lowest part it passes
    carry = None
    if not carried:
        carry = _carry_in_spark(df, by, arrival, lo, reaches, reached, own, keys)
        carry = carry.where(F.col(arrival).isNotNull()).select(
            *by, F.lit(beyond).alias(lead), arrival, PART, F.lit(True).alias(PROBE)
        )
    # the halo in the same scan as the rows (a union would read the input once more): a
    # row that reaches back into an earlier part comes out twice, the second time as a
    # probe there, with only its key, lead and arrival
    halo = reaches & (reached < own)
    twice = F.when(halo, F.array(F.lit(False), F.lit(True))).otherwise(F.array(F.lit(False)))
    probe, whole = F.col(PROBE), {*by, lead, arrival}
    rows = df.withColumn(PROBE, F.explode(twice)).select(
        *[c if c in whole else F.when(~probe, F.col(c)).alias(c) for c in df.columns],
        F.when(probe, reached).otherwise(_part(bucket, lead)).alias(PART),
        PROBE,
    )
    return rows if carry is None else rows.unionByName(carry, allowMissingColumns=True)


def _carry_in_spark(
    df: DataFrame,
    by: Sequence[str],
    arrival: str,
    lo: int,
    reaches: Column,
    reached: Column,
    own: Column,
    keys: DataFrame | None,
) -> DataFrame:
    """The carry of :func:`_with_probes`, ``(by..., PART, arrival)``, by an aggregate of
    the input (see there)."""
    # per part of the output: the least arrival of the rows that pass the whole part.
    # Without keys, for every possible part (running() would otherwise join the aggregate
    # with itself, and Spark computes it, a scan of the input, twice), from one aggregate
    # of (part of back, arrival); with keys, for every (key, part) that has rows, from one
    # aggregate over (own part, null) and (part of back, arrival) pairs, or, when every key
    # is known, for every (key, part), from (part of back, arrival) and that small table
    every = None if by else df.sparkSession.range(1 << BUCKET_BITS).withColumnRenamed("id", PART)
    if keys is not None:
        passing = df.where(reaches).select(*by, reached.alias("p"), F.col(arrival).alias("m"))
        types = dict(df.dtypes)
        # (every part of every key: a generator, not a join, which would broadcast a table)
        none = keys.select(
            *[F.col(c).cast(types[c]) for c in by],
            F.explode(
                F.sequence(F.lit(0), F.lit((1 << BUCKET_BITS) - 1)).cast("array<long>")
            ).alias("p"),
            F.lit(None).cast(types[arrival]).alias("m"),
        )
        passing = passing.unionByName(none)
    elif by:
        pairs = F.array(
            F.struct(own.alias("p"), F.lit(None).cast("long").alias("m")),
            F.struct(F.when(reaches, reached).alias("p"), F.col(arrival).alias("m")),
        )
        passing = df.select(*by, F.inline(pairs)).where(F.col("p").isNotNull())
    else:
        passing = df.where(reaches).select(reached.alias("p"), F.col(arrival).alias("m"))
    least = passing.groupBy(*by, F.col("p").alias(PART)).agg(F.min("m").alias("_fa_m"))
    return running(least, by, PART, {arrival: ("min", "_fa_m")}, descending=True, at=every)


@dataclass(frozen=True)
class Carry:
    """The carry of :func:`_with_probes` found here (:func:`carry_here`): per key (a tuple
    of the values of ``by``; ``()`` without keys), per part below the last, the least
    arrival of the key's rows that pass the whole part (-1: none).  The step of
    :func:`kept_in_parts` takes it into each part's search (:meth:`of`): as probe rows,
    it cost a small DataFrame made here (0.3-0.4 s of a cold run's planning) and a
    union before the shuffle.  ``at``: the ``(lo, hi, width)`` it was found for."""

    by: tuple[str, ...]
    at: tuple[int, int, int]
    found: Mapping[tuple, np.ndarray] = field(compare=False)

    def fits(self, by: Sequence[str], lo: int | None, hi: int | None, width: int) -> bool:
        """Is it the carry of these keys, limits and width?"""
        return self.by == tuple(by) and self.at == (lo, hi, width)

    @cached_property
    def _by_number(self) -> tuple[int, np.ndarray, np.ndarray] | None:
        """With one integer key of a small range (merge's source numbers): ``(lo, row,
        table)``, ``table`` holding per key (row) and part (column) its carry, -1 for
        none, and a last row of -1 for keys not in ``found``; ``row[v - lo + 1]`` the row
        of key ``v`` (``row[0]``: that last row).  None for other keys."""
        keys = [k for (k,) in self.found] if len(self.by) == 1 else []
        if not keys or not all(isinstance(k, int | np.integer) for k in keys):
            return None
        if any(isinstance(k, bool | np.bool_) for k in keys):
            return None
        keys = [int(k) for k in keys]
        lo, span = min(keys), max(keys) - min(keys) + 1
        if span > 1 << 16:
            return None
        width = max(len(f) for f in self.found.values())
        table = np.full((len(keys) + 1, width), -1, np.int64)
        row = np.full(span + 2, len(keys), np.int64)
        for i, (k, f) in enumerate(zip(keys, self.found.values(), strict=True)):
            table[i, : len(f)] = np.where(f < 0, -1, f)
            row[k - lo + 1] = i
        return lo, row, table

    def of(self, part: pa.Table) -> np.ndarray:
        """Per row of a whole part (every row of one ``PART``): its key's carry there."""
        out = np.full(part.num_rows, -1, np.int64)
        if part.num_rows == 0:
            return out
        p = part.column(PART)[0].as_py()
        numbered = self._by_number
        col = part.column(self.by[0]) if self.by else None
        if numbered is not None and _fits_int64(col.type) and not col.null_count:
            # (one lookup per row, not one comparison of the part's rows per key)
            lo, row, table = numbered
            if p >= table.shape[1]:
                return out
            v = values_of(col).astype(np.int64, copy=False)
            inside = (v >= lo) & (v <= lo + len(row) - 3)  # (no int64 wrap below)
            return table[:, p][row[np.where(inside, v - lo + 1, 0)]]
        for key, found in self.found.items():
            if p >= len(found) or found[p] < 0:
                continue
            if not self.by:
                out[:] = found[p]
                continue
            mine = np.ones(part.num_rows, bool)
            for c, v in zip(self.by, key, strict=True):
                mine &= _same(part.column(c), v)
            out[mine] = found[p]
        return out


def _fits_int64(t: pa.DataType) -> bool:
    """An integer type whose every value is an int64."""
    return pa.types.is_signed_integer(t) or (pa.types.is_unsigned_integer(t) and t.bit_width < 64)


def _same(col: pa.ChunkedArray, value) -> np.ndarray:
    """Per value of ``col``: is it ``value``, as Spark's grouping compares keys (null is a
    key of its own, so is NaN)?"""
    if value is None:
        same = pc.is_null(col)
    elif isinstance(value, float) and value != value:
        same = pc.is_nan(col)
    else:
        same = pc.equal(col, value)
    return pc.fill_null(same, False).to_numpy(zero_copy_only=False)


def carry_here(reach: Reach, by: Sequence[str], lo: int, hi: int, width: int) -> Carry:
    """The :class:`Carry` from ``reach(thresholds)``: per key, per ascending threshold,
    the first arrival of the key whose lead is at or above it (-1: none;
    :func:`first_reaching` over the times read here).  A row passes the whole of part
    ``p`` when its ``lead - width - 1`` falls in a later part, that is, when its lead is
    at least the lower edge of part ``p + 1`` plus ``width + 1``.  No Spark job, where the
    aggregate over the input cost a job of its own (a scan of the input) and a
    broadcast."""
    shift = max(0, (hi - lo).bit_length() - BUCKET_BITS)
    top = (1 << BUCKET_BITS) - 1  # (the last part has no later part)
    most = (1 << 63) - 1  # (thresholds past the int64 range are never reached)
    thresholds = np.array(
        [min(lo + ((p + 1) << shift) + width + 1, most) for p in range(top)], np.int64
    )
    return Carry(tuple(by), (lo, hi, width), dict(reach(thresholds)))


def first_above_in_parts(
    df: DataFrame,
    lead: str,
    width: int,
    arrival: str,
    out: str,
    by: Sequence[str] = (),
    limits: tuple[int, int] | None = None,
    then: Sequence[str] = (),
) -> DataFrame:
    """The rows cut into parts as by :func:`sort_in_parts` (``PART``; each part whole in one
    Spark partition, sorted by ``by``, then by descending ``(lead, *then)``: sort them again
    for the output), each
    with ``out``: the least ``arrival`` among the rows of its ``by`` whose ``lead`` is above
    the row's own ``lead + width`` (null: there is none).  For a row that no earlier
    arrival passes, that is the first later arrival whose value passes it: the search of
    :func:`first_above`, done in the parts the output is cut into anyway.

    Every part is a range of ``lead`` values, so the rows that pass a row of part ``p``
    are (a) rows of ``p`` above it, found by a window over the part in descending value
    order (a frame that only grows: linear), (b) rows of later parts whose ``lead - width``
    still falls in ``p`` (the *halo*, copied into ``p`` as probes: the rows within
    ``width`` of a part's lower edge), and (c) rows whose ``lead - width`` lies beyond
    ``p``, which pass every row of ``p``: their least arrival per part is a small table
    (a suffix minimum over the parts).  ``width`` is an int >= 0 in the units of ``lead``."""
    lo, hi = limits or value_limits(df, lead)
    if lo is None:
        return df.withColumns({PART: F.lit(0).cast("long"), out: F.lit(None).cast("long")})
    # (no lead is above hi >= lead + (hi - lo): a wider width passes nothing more, and the
    # search's values stay in int64 for a range up to the whole timeline)
    width = min(width, hi - lo)
    if hi + 2 * width + 2 >= 1 << 63 and lo > 0:  # (near the last instant: search lead - lo)
        moved = "_fa_lead"
        df = df.withColumn(moved, F.col(lead) - F.lit(lo))
        found = first_above_in_parts(df, moved, width, arrival, out, by, (0, hi - lo), then)
        return found.drop(moved)
    inside = (
        Window.partitionBy(PART, *by)
        .orderBy(F.col(lead).desc())
        .rangeBetween(UNBOUNDED, -(width + 1))
    )
    return (
        _with_probes(df, lead, width, arrival, by, lo, hi)
        .repartition(PART)
        .sortWithinPartitions(PART, *by, F.col(lead).desc(), *[F.col(c).desc() for c in then])
        .withColumn(out, F.min(arrival).over(inside))
        .where(~F.col(PROBE))
        .drop(PROBE)
    )


@dataclass(frozen=True)
class KeptInPart:
    """The keep rule of :func:`kept_in_parts` for one whole part, in Arrow: the part's rows
    (with their probes) sorted by ``(lead, arrival)``; a row is kept when the least arrival
    among the rows of its ``by`` whose ``lead`` is above its own ``lead + width`` (a suffix
    of the key's rows in value order: a search in a sorted array, then a suffix minimum) is
    later than its own arrival, or there is none.  Called with a part, it yields the part's
    batches without the probe rows, with the boolean column ``out``; with ``least``, also
    that least arrival (null: none; for a kept row, the arrival that releases it); with
    ``rank``, the kept rows' 1-based positions in the part (null for the others).
    ``carry``: the arrivals that pass a whole part, found here (:class:`Carry`), where
    the part has no probe rows for them."""

    lead: str
    arrival: str
    width: int
    out: str
    by: tuple[str, ...] = ()
    least: str | None = None
    rank: str | None = None
    carry: Carry | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads (beside the ones it passes on)."""
        return (*self.by, self.lead, self.arrival, PROBE)

    def kept(
        self, lead: np.ndarray, arrival: np.ndarray, key: np.ndarray | None = None
    ) -> np.ndarray:
        """Per row, sorted by ``(key, lead)``: is it kept?  (see :meth:`search`)"""
        return self.search(lead, arrival, key)[0]

    def search(
        self, lead: np.ndarray, arrival: np.ndarray, key: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row, sorted by ``(key, lead)``: is it kept, the least arrival above it and
        whether there is one (where not, the least is meaningless; :func:`least_above`).
        (``lead + width + 1`` stays in int64: :func:`_with_probes` checked it for every
        row and probe.)"""
        least, found = least_above(lead, arrival, self.width, key)
        return ~found | (least > arrival), least, found

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        lead, arrival = (values_of(part.column(c)) for c in (self.lead, self.arrival))
        order, key = key_numbers(part, self.by)
        if order is None:
            kept, least, found = self.search(lead, arrival)
        else:
            kept, found = np.empty(len(order), bool), np.empty(len(order), bool)
            least = np.empty(len(order), np.int64)
            kept[order], least[order], found[order] = self.search(lead[order], arrival[order], key)
        if self.carry is not None:  # (passes every row of the part: the least with the rest)
            carry = self.carry.of(part)
            has = carry >= 0
            least = np.where(found & has, np.minimum(least, carry), np.where(has, carry, least))
            found |= has
            kept = ~found | (least > arrival)
        real = ~values_of(part.column(PROBE))
        rank = np.cumsum(kept & real) if self.rank else None
        start = 0
        for b in part.to_batches():
            n = b.num_rows
            rows = real[start : start + n]
            at = slice(start, start + n)
            start += n
            if not rows.any():  # (probes sort last in a part: batches of them alone)
                continue
            # (most batches have no probe: no copy)
            b = (b if rows.all() else b.filter(pa.array(rows))).drop_columns([PROBE])
            k = kept[at][rows]
            b = b.append_column(self.out, pa.array(k))
            if self.least:
                b = b.append_column(self.least, pa.array(least[at][rows], mask=~found[at][rows]))
            if self.rank:
                b = b.append_column(self.rank, pa.array(rank[at][rows], mask=~k))
            yield b

    def schema(self, schema: StructType) -> StructType:
        """The Spark schema of the rows it yields, for rows of ``schema``."""
        from pyspark.sql.types import BooleanType, LongType, StructField

        out = [f for f in schema.fields if f.name not in (PROBE, self.out, self.least, self.rank)]
        out.append(StructField(self.out, BooleanType()))
        out.extend(StructField(c, LongType()) for c in (self.least, self.rank) if c)
        return StructType(out)


def key_numbers(part: pa.Table, by: Sequence[str]) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The order that groups a part's rows by the columns ``by``, each key's rows in their
    order (None: no keys), and their key numbers (0, 1, ...) in that order.  Keys compare
    as in Spark's grouping: null is a key of its own, -0.0 is 0.0."""
    if not by:
        return None, None
    if part.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    code = np.zeros(part.num_rows, np.int64)
    for c in by:
        col = part.column(c)
        if pa.types.is_floating(col.type):  # (-0.0 is 0.0, as in Spark's grouping)
            col = pc.add(col, 0.0)
        codes = pc.dictionary_encode(col).combine_chunks()
        many = len(codes.dictionary)  # (null is a key of its own: number ``many``)
        values = codes.indices.fill_null(many).to_numpy().astype(np.int64)
        code = code * (many + 1) + values
        if len(by) > 1:  # (numbered again: the product stays small)
            code = np.unique(code, return_inverse=True)[1].astype(np.int64)
    order = np.argsort(code, kind="stable")
    code = code[order]
    return order, np.cumsum(np.r_[True, code[1:] != code[:-1]]) - 1


def stacked_by_key(
    values: np.ndarray, key: np.ndarray, more: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None, Callable[[np.ndarray], np.ndarray]]:
    """``values`` (and ``more``, the same way) with each key's block moved above every
    earlier key's: ``value + key * span``, or, when that would leave int64, the values'
    ranks among both arrays (same order, smaller numbers); and the function that takes
    such numbers, one per row (of the row's key), back to values.  ``key``:
    non-decreasing."""
    both = values if more is None else np.concatenate([values, more])
    lo, hi = int(both.min()), int(both.max())
    span = hi - lo + 1
    if span * (int(key[-1]) + 1) < 1 << 62:  # (then no step below leaves int64 either)
        shift = key * span
        return (
            values - lo + shift,
            None if more is None else more - lo + shift,
            lambda s: s - shift + lo,
        )
    distinct, rank = np.unique(both, return_inverse=True)
    shift = key * len(both)
    n = len(values)
    return (
        rank[:n] + shift,
        None if more is None else rank[n:] + shift,
        lambda s: distinct[s - shift],
    )


def least_above(
    lead: np.ndarray, arrival: np.ndarray, width: int, key: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The search in a sorted array, then a suffix minimum: per row, sorted by ``(key,
    lead)``, the least ``arrival`` among the rows of its key whose ``lead`` is above its own
    ``lead + width``, and whether there is one (where not: its own arrival with keys,
    anything without).  ``key``: the rows' key numbers (0, 1, ...; None: one key)."""
    n = len(lead)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    target = lead + (width + 1)
    if key is None:
        values, targets, arrivals, ends = lead, target, arrival, n
        back = None
    else:  # each key's values (and arrivals) moved above every earlier key's: one
        # sorted array to search, one suffix minimum that cannot cross into an earlier key
        values, targets, _ = stacked_by_key(lead, key, target)
        arrivals, _, back = stacked_by_key(arrival, key)
        ends = np.searchsorted(key, key, side="right")  # (where each row's key ends)
    above = np.searchsorted(values, targets, side="left")
    found = above < ends
    least = np.minimum.accumulate(arrivals[::-1])[::-1]  # from each row on
    least = least[np.where(found, above, 0)]
    if back is not None:  # (the least above a row is of its own key: each row's own
        # shift takes it back; rows with none take their own arrival, in their key too)
        least = back(np.where(found, least, arrivals))
    return least, found


def kept_in_parts(
    df: DataFrame,
    lead: str,
    width: int,
    arrival: str,
    out: str,
    by: Sequence[str] = (),
    limits: tuple[int, int] | None = None,
    least: str | None = None,
    rank: str | None = None,
    fill: DataFrame | None = None,
    keys: DataFrame | None = None,
    reach: Reach | Carry | None = None,
) -> tuple[DataFrame, KeptInPart | FilledInPart]:
    """The rows in numbered parts, in the order ``(lead, arrival)`` (as
    :func:`sort_in_parts`), for the keep rule of a bound ``width`` behind the running
    maximum of ``lead`` per ``by``: no earlier ``arrival`` of the row's ``by`` has ``lead``
    above the row's own ``lead + width``; that is, the least arrival above it is later than
    the row, or there is none.  Found in the parts the output is cut into (one shuffle of
    the rows) instead of by a prefix scan.

    The parts also hold the probe rows (:data:`PROBE`, see :func:`_with_probes`); the rule
    is applied by the returned :class:`KeptInPart` to each whole part, where the rows are
    written: it drops the probes and adds ``out`` (a window in Spark cost more than the
    search in Arrow).  Run it over a DataFrame with :func:`apply_in_parts`.  ``least``,
    ``rank``: columns the step adds too (see :class:`KeptInPart`).

    ``fill``: the rows the rule does not keep, found otherwise (``by``, ``lead``,
    ``arrival`` and columns of values for them, such as the words of a discard); they go
    into the parts beside those rows, and the step is a :class:`FilledInPart`, which gives
    each row it does not keep the values of its fill row (the rows without one: null).
    ``keys``: every value of ``by``, when known; ``reach``: the carry found here (see
    :func:`carry_here`), without a Spark job, or that :class:`Carry`, found already (for
    these ``by``, limits and width: the caller checks :meth:`Carry.fits`)."""
    lo, hi = limits or value_limits(df, lead)
    if lo is not None and width > hi - lo:  # (passes nothing more than hi - lo: see
        width = hi - lo  # first_above_in_parts; a carry for the wider one is redone)
        reach = None if isinstance(reach, Carry) else reach
    carry = None
    if isinstance(reach, Carry):
        if not reach.fits(by, lo, hi, width):
            raise ValueError(f"a carry for {reach.at}, not {(lo, hi, width)}")
        carry = reach
    elif reach is not None and lo is not None:
        carry = carry_here(reach, by, lo, hi, width)
    step = KeptInPart(lead, arrival, width, out, tuple(by), least, rank, carry)
    if lo is None:
        rows = df.withColumns({PART: F.lit(0).cast("long"), PROBE: F.lit(False)})
    else:
        rows = _with_probes(df, lead, width, arrival, by, lo, hi, keys, carry is not None)
    if fill is not None:  # (no rows: no fill rows either, but their columns)
        values = tuple(c for c in fill.columns if c not in {*by, lead, arrival})
        # (probes to the search: each the copy of a row's key, lead and arrival, which
        # changes no least arrival above anything)
        fill = fill.withColumns(
            {PART: _part(bucketer(lo, hi), lead), PROBE: F.lit(True), FILL: F.lit(True)}
        )
        rows = rows.unionByName(fill, allowMissingColumns=True)
        step = FilledInPart(step, values)
    if lo is not None:
        rows = rows.repartition(PART)
    return rows.sortWithinPartitions(PART, lead, arrival), step


FILL = "_evt_fill"  # rows that carry values for the row of the same arrival (FilledInPart)


@dataclass(frozen=True)
class FilledInPart:
    """:class:`KeptInPart` with fill rows (:data:`FILL`, see :func:`kept_in_parts`): each
    row the search does not keep takes ``values`` from the fill row of the same arrival
    (the fill rows are probes: the search leaves them out).  The two must agree: a row
    set aside without its fill row, or a fill row without its row, is an internal error
    (the fill rows come from another computation of the same rule)."""

    search: KeptInPart
    values: tuple[str, ...]

    @property
    def out(self) -> str:
        return self.search.out

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads (beside the ones it passes on)."""
        return (*self.search.columns, FILL, *self.values)

    def schema(self, schema: StructType) -> StructType:
        return self.search.schema(StructType([f for f in schema.fields if f.name != FILL]))

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        is_fill = pc.fill_null(part.column(FILL), False)
        fills = part.select([self.search.arrival, *self.values]).filter(is_fill)
        values = {c: fills.column(c).combine_chunks() for c in self.values}
        at = values_of(fills.column(self.search.arrival))
        order = np.argsort(at, kind="stable")
        at = at[order]
        used = 0
        for b in self.search(part):
            b = b.drop_columns([FILL])
            late = ~b.column(self.search.out).to_numpy(zero_copy_only=False)
            if late.any():
                mine = b.column(self.search.arrival).to_numpy()[late]
                i = np.minimum(np.searchsorted(at, mine), max(len(at) - 1, 0))
                if len(at) == 0 or not np.array_equal(at[i], mine):
                    raise _disagree(part, "a row the search set aside has no fill row")
                which = np.zeros(b.num_rows, np.int64)
                which[late] = order[i]
                used += len(mine)
                index = pa.array(which, mask=~late)
                for c, v in values.items():
                    b = b.set_column(b.schema.get_field_index(c), c, v.take(index))
            yield b
        if used != len(at):
            raise _disagree(part, f"{len(at)} fill rows for {used} rows set aside")


def _disagree(part: pa.Table, what: str) -> Exception:
    from evtime.errors import EvtimeError, in_task

    where = part.column(PART)[0].as_py() if part.num_rows else None
    return in_task(EvtimeError(f"internal error in part {where}: {what}; please report this"))


def collect_few(df: DataFrame) -> list:
    """The rows of ``df``, a job's few results (a row per part, at most :data:`AFTER_PARTS`
    and a few more), here.  (One place: the plan tests look at these jobs too.)"""
    return df.collect()


def apply_in_parts(df: DataFrame, step) -> DataFrame:
    """``step`` (a :class:`~evtime.steps.PartStep` with a ``schema``, such as
    :class:`KeptInPart`) run over each whole part of ``df`` (rows sorted by ``PART``, each
    part in one Spark partition, the parts from :data:`AFTER_PARTS` on passed as they are):
    the rows it yields.  The writer can run a step itself, in the tasks that write the parts
    (no second trip of the rows to Python); this is for every other reader of the rows."""
    from evtime.io.writer import through_step

    schema = step.schema(df.schema)
    names = schema.fieldNames()

    def each(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        number = getattr(step, "numbered", None)
        if number is not None:  # (its parts numbered here, as the writer does)
            batches = map(number, batches)
        for _, b in through_step(batches, step, AFTER_PARTS):
            yield decoded(b.select(names))

    return df.mapInArrow(each, schema)


def decoded(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its dictionary-encoded columns (a step's routes, see
    :func:`~evtime.steps.routes`) as plain arrays: Spark reads no dictionary from
    Python."""
    if not any(pa.types.is_dictionary(t) for t in batch.schema.types):
        return batch
    cols = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in batch.columns]
    return pa.RecordBatch.from_arrays(cols, names=batch.schema.names)


def positions_in_parts(
    df: DataFrame,
    upstream: DataFrame,
    limits: tuple[int, int],
    keep: Column,
    out: str,
    lead: str,
    then: Sequence[str] = (),
) -> DataFrame:
    """1-based positions in the order ``(lead, *then)`` of the rows where ``keep``, for
    ``df`` in the parts :func:`first_above_in_parts` cut at ``limits`` (the kept rows up to
    the end of the row's part, less those after the row: a count inside each part, which
    needs no shuffle).  The per-part counts come from ``upstream``, the rows before they
    were cut into parts, so they cost a pass over those rows, not another run of the
    shuffle.  The count inside a part runs in
    descending order (the kept rows at or after a row, taken from the part's kept rows),
    the order :func:`first_above_in_parts` leaves the parts in when it has no keys and the
    same ``then``: the parts are then sorted once, not twice."""
    bucket = bucketer(*limits)
    kept = upstream.where(keep).select(_part(bucket, lead).alias(PART))
    # kept rows up to the end of each part (a part with kept rows has its row here)
    through = count_offsets(kept, PART, "_pp_to", through=True)
    desc = Window.partitionBy(PART).orderBy(*[F.col(c).desc() for c in (lead, *then)])
    at_or_after = F.sum(F.when(keep, 1).otherwise(0)).over(desc.rowsBetween(UNBOUNDED, 0))
    ranked = df.withColumn("_pp_n", at_or_after)
    through = F.broadcast(through.withColumnRenamed(PART, "_pp_part"))
    ranked = ranked.join(through, F.col(PART) == F.col("_pp_part"), "left")
    pos = F.col("_pp_to") - F.col("_pp_n") + 1
    return ranked.withColumn(out, F.when(keep, pos)).drop("_pp_n", "_pp_to", "_pp_part")


def order_arrivals(df: DataFrame, col: str) -> DataFrame:
    """Arrival order from an explicit column (ties, and rows whose value is null, which arrive
    after every other row: input order): ``_evt_seq`` becomes the
    row's place in a sort by (col, file, row), numbered per sorted partition (dense inside a
    partition, so chunks stay dense runs).  Checkpointed so every later pass sees the same
    numbering."""
    ordered = df.sort(F.col(col).asc_nulls_last(), FILE, ROW).withColumn(
        SEQ, F.monotonically_increasing_id()
    )
    return ordered.withColumn(CHUNK, F.shiftright(SEQ, CHUNK_SHIFT)).localCheckpoint()


@dataclass(frozen=True)
class AsRead:
    """Rows as the input was read: each Spark partition holds stretches of consecutive
    arrivals, each in arrival order (a file's splits, the reader's chunks, a checkpoint of
    them; no shuffle since).  ``groups``: ``(first _evt_seq, greatest time in ns or None)``
    of every Parquet row group, in arrival order, from the footers (Spark's reader splits
    files between row groups, so every stretch starts at one); empty: not known.
    ``file_rows``: the rows of every input file, by its index, from the footers, all of
    them arrivals (no row was set aside as bad); empty: not known.
    ``times``: when the input is local Parquet files, a function that reads its times in
    this process, in arrival order (``(_evt_seq, time in ns)`` batches, a null time as
    :data:`NONE`; an optional set of file indexes reads only those files;
    :func:`evtime.io.native.local_times`), else None."""

    groups: tuple[tuple[int, int | None], ...] = ()
    times: Times | None = field(default=None, compare=False)
    file_rows: tuple[int, ...] = ()

    def time_maxima(self, unit: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Per row group: its first ``_evt_seq`` and the greatest time floored to ``unit``
        ns over the arrivals before it (:data:`NONE`: none); None without groups."""
        if not self.groups:
            return None
        starts = np.array([g for g, _ in self.groups], np.int64)
        top = np.array([NONE if t is None else t for _, t in self.groups], np.int64)
        before = np.concatenate([[NONE], np.maximum.accumulate(top)[:-1]])
        floored = before - np.mod(before, unit)
        return starts, np.where(before == NONE, NONE, floored)


def prefix_count_max(
    df: DataFrame,
    counts: Mapping[str, Column],
    maxes: Mapping[str, Column | str] | None = None,
    by: Sequence[str] = (),
    inclusive: bool = True,
    one_chunk: bool = False,
    as_read: AsRead | None = None,
    known: tuple[np.ndarray, np.ndarray] | None = None,
) -> DataFrame:
    """Add, per ``out -> cond`` in ``counts``, how many of the key's arrivals up to and
    including this one satisfy ``cond``, and per ``out -> value`` in ``maxes`` the running
    max (as :func:`prefix_max`): running sums and maxima in the same two passes, per-chunk
    aggregates carried into a window over each (key, chunk) (:func:`_carried_in`).
    ``inclusive=False`` leaves the row itself out.  ``one_chunk``: the caller knows that
    every row has the same ``_evt_chunk`` (a small input read in the driver): nothing is
    carried between chunks, and the first pass (its Spark jobs) is left out."""
    maxes = maxes or {}
    ones = {
        f"_pn_{o}": F.when(c, F.lit(1)).otherwise(F.lit(0)).cast("long") for o, c in counts.items()
    }
    vals = {f"_pv_{o}": (F.col(v) if isinstance(v, str) else v) for o, v in maxes.items()}
    if as_read is not None and not by and not one_chunk:
        vals = {c: v.cast("long") for c, v in vals.items()}
        if known is not None and not counts and len(maxes) == 1:
            (v,), (o,) = vals.values(), maxes
            return _streamed_from(df, v, o, inclusive, known)
        outs = {**{f"_pn_{o}": o for o in counts}, **{f"_pv_{o}": o for o in maxes}}
        return _streamed(df, ones, vals, outs, inclusive)
    df = df.withColumns({**ones, **vals})
    if one_chunk:
        both = df.withColumn(_PROBE, F.lit(False))
    else:
        per_chunk = df.groupBy(*by, CHUNK).agg(
            *[F.sum(c).alias(f"_pk{c}") for c in ones],
            *[F.max(c).alias(f"_pk{c}") for c in vals],
        )
        carry = running(
            per_chunk,
            by,
            CHUNK,
            {
                **{c: ("sum", f"_pk{c}") for c in ones},
                **{c: ("max", f"_pk{c}") for c in vals},
            },
        )
        both = _carried_in(df, by, carry, [*ones, *vals])
    rows = (
        Window.partitionBy(*by, CHUNK).orderBy(SEQ).rowsBetween(UNBOUNDED, 0 if inclusive else -1)
    )
    new = {o: F.coalesce(F.sum(f"_pn_{o}").over(rows), F.lit(0)) for o in counts}
    new.update({o: F.max(f"_pv_{o}").over(rows) for o in maxes})
    out_df = both.withColumns(new).where(~F.col(_PROBE))
    return out_df.drop(*ones, *vals, _PROBE)


def positions_by(df: DataFrame, lead: str, order: Sequence[Column | str], out: str) -> DataFrame:
    """1-based positions of all rows in the order ``(lead, *order)``; ``lead`` is an int64
    column (no nulls) that buckets the rows, ``order`` breaks ties inside a bucket."""
    df = df.withColumn("_pb_b", bucket_column(df, lead))
    offsets = count_offsets(df, "_pb_b", "_pb_off")
    inside = Window.partitionBy("_pb_b").orderBy(lead, *order)
    return (
        join_small(df, offsets, ["_pb_b"])
        .withColumn(out, F.col("_pb_off") + F.row_number().over(inside))
        .drop("_pb_b", "_pb_off")
    )


RUN = "_evt_run"  # (streamed scans) the Spark partition that read a row


def _streamed(
    df: DataFrame,
    ones: Mapping[str, Column],
    vals: Mapping[str, Column],
    outs: Mapping[str, str],
    inclusive: bool,
) -> DataFrame:
    """:func:`prefix_count_max` without keys, for rows that each Spark partition holds in
    arrival order (as read: a file's splits, the reader's chunks, a checkpoint of them).

    No shuffle and no sort: a *run* is what one partition holds of one chunk (a range of
    ``_evt_seq`` values, in order); one aggregate per run and a running aggregate over the
    runs (a small table, ordered by their first arrival) give each run its carry, joined to
    its rows (broadcast: it keeps the rows where they are), and a pass in Arrow over each
    partition continues it row by row (:class:`RunningInRuns`).  That pass checks what it
    relies on: every run's rows in increasing ``_evt_seq``, from its first one, and runs
    that do not overlap (an internal error otherwise, never a wrong answer)."""
    df = df.withColumns({**ones, **vals, RUN: F.spark_partition_id()})
    cs, vs = list(ones), list(vals)
    per_run = (
        df.groupBy(RUN, CHUNK)
        .agg(
            F.min(SEQ).alias("_sr_lo"),
            F.max(SEQ).alias("_sr_hi"),
            *[F.sum(c).alias(f"_pk{c}") for c in cs],
            *[F.max(c).alias(f"_pk{c}") for c in vs],
        )
        .localCheckpoint()  # (a few rows, read three times below)
    )
    carry = running(
        per_run.drop(RUN, CHUNK),
        (),
        "_sr_lo",
        {
            "_sr_before": ("max", "_sr_hi"),
            **{f"_sc{c}": ("sum", f"_pk{c}") for c in cs},
            **{f"_sc{c}": ("max", f"_pk{c}") for c in vs},
        },
    )
    carry = per_run.select(RUN, CHUNK, "_sr_lo").join(carry, "_sr_lo")
    joined = df.join(
        F.broadcast(carry.withColumnsRenamed({RUN: "_sr_run", CHUNK: "_sr_chunk"})),
        (F.col(RUN) == F.col("_sr_run")) & (F.col(CHUNK) == F.col("_sr_chunk")),
        "left",
    )
    step = RunningInRuns(len(cs), len(vs), inclusive, tuple(outs.values()))
    got = StructType([StructField(o, LongType()) for o in outs.values()])
    args = [RUN, CHUNK, SEQ, "_sr_lo", "_sr_before", *[f"_sc{c}" for c in (*cs, *vs)], *cs, *vs]
    joined = joined.withColumn("_sr_out", _per_partition(step, got)(*args))
    helpers = [RUN, "_sr_run", "_sr_chunk", "_sr_lo", "_sr_before", *args[5:], "_sr_out"]
    out = {o: F.col(f"_sr_out.{o}") for o in outs.values()}
    return joined.withColumns(out).drop(*helpers)


def _streamed_from(
    df: DataFrame, value: Column, out: str, inclusive: bool, known: tuple[np.ndarray, np.ndarray]
) -> DataFrame:
    """:func:`_streamed` for one maximum whose carry into every row group is ``known``
    (:meth:`AsRead.time_maxima`): no first pass; only ``_evt_seq`` and the value go to
    Python (:class:`RunningFromGroups`)."""
    step = RunningFromGroups(known[0], known[1], inclusive)
    return df.withColumn(out, _per_partition(step, LongType())(F.col(SEQ), value))


def _per_partition(step, returns):  # -> a UDF
    """``step`` as an iterator Arrow UDF: called once per partition with its rows' batches
    in order (only its columns go to Python; the rows stay in the JVM), nondeterministic
    (evaluated once, where it stands)."""
    with warnings.catch_warnings():  # (type hints: not on a callable object)
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(step, returns, PythonEvalType.SQL_SCALAR_ARROW_ITER_UDF)
    return udf.asNondeterministic()
