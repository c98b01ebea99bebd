"""Merging sources by event time (SPEC §3; seeds 004 and 001), on the shared scan.

Every input row is an arrival of one source (``_evt_src``, the command-line argument it came
from).  A row contributes to its source's own bound: a data row its evtime (``- range*unit``
when adjusted), a bound row its time (``+ tick`` when strict, floored to the unit).

**Without --arrival / --order-by, --wait and --join-leave** (UNION ALL of files): sources
are processed one after the other, and the only discards are rows behind their own source's
bound: an exclusive :func:`prefix_max` per source.  Output = the rest ordered by
(evtime, source, row).  Without bound rows, when only the keep flag is needed, that is
adjust's rule with the source as key, found in the output's own parts
(:func:`classify_in_order`).  For explain, the definitive time after arrival *i* is closed-form:
``-inf`` while a later source has no bound yet, then ``min(C, own bound of the last source)``
with ``C`` the minimum of the other sources' final bounds (one number); release points are a
:func:`first_above` search in that monotone sequence.

**General case** (arrival order given, wait, join/leave).  The stream bound ``B`` and the
discards feed back on each other (a discarded row advances nothing).  The feedback is broken
without a sequential pass by one observation: a discarded row that passed its own bound was
below ``B`` or below ``now - wait`` when it arrived, so counting it in its source's bound
anyway (``own'``) can only change the definitive time ``D`` at arrivals where both the true
and the changed ``D`` are below ``B``, and then neither releases anything (every held row is
at or above ``B``).  So, with ``own'`` = prefix max over *all* the source's rows:

1. ``D'`` after each arrival = ``max(min over attached sources of own'_s, now - wait)``:
   a prefix scan of the vector of per-source maxima (:func:`definitive`: per-chunk vectors,
   carried from earlier chunks through a small table, then a numpy pass per chunk);
2. the release point of every candidate row (not behind its own bound, not older than the
   wait) = first arrival ``j >= i`` with ``D'_j >= evtime`` (:func:`first_above`; ``D'`` is
   monotone except where a source joins, so the search runs per join segment, then over a
   small table of later segments);
3. ``B`` before arrival *i* = max evtime of candidates released before *i*: a prefix max
   over release events placed at their releasing arrival; a row is discarded when it is
   below its own bound, below ``now - wait`` or below ``B``.

The release points found in step 2 are exact for every kept row.  Explain shows own bounds
and ``D`` with discarded rows left out: when a discarded row did move ``own'`` (a row
below ``B`` or the wait but above its own bound), the vector scan runs once more without
it.  Without a clock and arrival order, the stream bound matters only for the words of a
discard (a row behind its own bound may also be behind ``B``): explain then runs the release
search too, and so does --discards with a range; without one, ``B`` before a discarded row
is closed-form (:func:`late_rows`).

Sequential work: none over the whole input.  The vector scan is sequential inside a chunk
(2^20 arrivals, numpy over blocks of rows x sources), parallel across chunks; its cost is
O(rows x sources).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StructField, StructType

from evtime.columns import CHUNK, CHUNK_SHIFT, FILE, ROW, SEQ, T
from evtime.engine import present
from evtime.engine import saturate as sat
from evtime.engine.running import NONE, int64_array, running_max, values_of
from evtime.engine.scan import (
    UNBOUNDED,
    AsRead,
    Carry,
    FilledInPart,
    KeptInPart,
    arrival_numbers,
    arrival_offsets,
    carry_here,
    first_above,
    join_small,
    kept_in_parts,
    numbered,
    positions,
    prefix_max,
    reach_from,
)
from evtime.errors import InputError, in_task
from evtime.units import truncated_range, unit_ns

if TYPE_CHECKING:
    from evtime.io.reader import Layout

SRC, BND, EVT, CON = "_evt_src", "_evt_isbound", "_evt_evtime", "_evt_contrib"
NOW, LAG = "_evt_now", "_evt_lag"
CAND, KEEP = "_evt_cand", "_evt_keep"
OWNP = "_evt_ownp_before"  # own bound before the arrival, every row counted (module doc)
OWN = "_evt_own_before"  # own bound before the arrival, discarded rows left out
DEF, DEF_ARG = "_evt_def", "_evt_def_arg"  # D after the arrival (sentinels), argmin source
REL = "_evt_rel"  # _evt_seq of the releasing arrival (null: end of input)
BB = "_evt_b_before"  # stream bound B before the arrival
SEG = "_evt_seg"
ARRIVAL = "_evt_arrival"
REL_ARRIVAL, OUTPUT_POS = "_evt_rel_arrival", "_evt_x_output_pos"  # (explain)
SHOWN_DEF, SHOWN_ARG = "_evt_def_shown", "_evt_def_arg_shown"  # (explain here: D as shown)
NEG, POS = -(2**63), 2**63 - 1  # -inf / +inf for D inside the engine (never shown)


@dataclass(frozen=True)
class MergeSpec:
    names: tuple[str, ...]  # source names, in source order
    marker: tuple[str, str] | None = None  # (column, value) of bound rows
    strict: bool = False
    tick: int = 1
    ordered: bool = False  # arrival order given (--arrival or --order-by)
    arrival: bool = False  # wall-clock arrival times in NOW (--arrival)
    wait: int | None = None
    wait_text: str | None = None
    join_leave: bool = False
    unit: str | None = None
    range: int = 0

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def unit_ns(self) -> int | None:
        return unit_ns(self.unit) if self.unit else None

    @property
    def width(self) -> int:
        return self.range * (self.unit_ns or 0)

    @property
    def simple(self) -> bool:
        """Sources one after the other, all attached, no clock: own bounds alone decide."""
        return not self.ordered and self.wait is None and not self.join_leave


# ---------------------------------------------------------------------------- preparation


def with_now(
    df: DataFrame, lay: Layout, col: str, fmt: str | None, tz: str | None, shown: list[str]
) -> DataFrame:
    """Add ``NOW``: the arrival column read as a time (int64 ns), like the time column
    (same --time-format and --tz).  pyarrow inside the tasks, so nothing is rounded."""
    from evtime.io.timeparse import to_ns

    schema = StructType([*df.schema.fields, StructField(NOW, LongType())])

    def parse(batches):
        import pyarrow.compute as pc

        for b in batches:
            arr = lay.restore(col, b.column(col))
            try:
                ns = to_ns(arr, fmt, tz)
            except (ValueError, pa.ArrowInvalid) as err:
                raise in_task(InputError(f"--arrival column {col!r}: {err}")) from None
            if ns.null_count:
                i = pc.index(pc.is_null(ns), True).as_py()
                value = arr[i].as_py()
                what = "is empty" if value is None else f"cannot be read as a time: {value!r}"
                f, row = b.column(FILE)[i].as_py(), b.column(ROW)[i].as_py()
                raise in_task(InputError(f"{shown[f]}: row {row + 1}: column {col!r} {what}"))
            yield pa.RecordBatch.from_arrays([*b.columns, ns], names=[*b.schema.names, NOW])

    return df.mapInArrow(parse, schema)


def prepare(df: DataFrame, spec: MergeSpec, groups: list[int]) -> DataFrame:
    """Source index, bound flag, evtime, contribution to the own bound, and ``now - wait``."""
    src = F.element_at(F.array(*[F.lit(g) for g in groups]), F.col(FILE) + 1)
    if spec.marker:
        col, value = spec.marker
        bnd = F.coalesce(F.col(col).cast("string") == F.lit(value), F.lit(False))
    else:
        bnd = F.lit(False)
    u = spec.unit_ns
    evt = sat.floor(F.col(T), u)  # (times past an edge of int64 ns saturate: see saturate)
    b = sat.floor(sat.add(F.col(T), spec.tick) if spec.strict else F.col(T), u)
    df = df.withColumns({SRC: src.cast("int"), BND: bnd})
    df = df.withColumn(EVT, evt)
    df = df.withColumn(CON, F.when(F.col(BND), b).otherwise(sat.sub(F.col(EVT), spec.width)))
    lag = sat.sub(F.col(NOW), spec.wait) if spec.wait is not None else F.lit(None)
    return df.withColumn(LAG, lag.cast("long"))


def with_file_sources(rejected: DataFrame, groups: Sequence[int]) -> DataFrame:
    """The bad rows of ``--bad-rows discard`` with their source (``SRC``): that of the
    file each was read from (``groups[FILE]``, as :func:`prepare` gives the good rows)."""
    of_file = F.array(*[F.lit(g) for g in groups])
    return rejected.withColumn(SRC, F.element_at(of_file, F.col(FILE) + 1))


# ---------------------------------------------------------------------------- the vector scan


@dataclass(frozen=True)
class Facts:
    """Per-source facts collected once (one row per source): first and last arrival
    (_evt_seq; used with --join-leave), final own bound (``top``, None: no bound ever) and
    the range of data-row evtimes."""

    first: tuple[int, ...]
    last: tuple[int, ...]
    top: tuple[int | None, ...]
    lo: int | None
    hi: int | None
    chunks: int = 2  # 1: every arrival in one chunk (nothing to carry between chunks)


def facts(df: DataFrame, spec: MergeSpec) -> Facts:
    data = F.when(~F.col(BND), F.col(EVT))
    rows = (
        df.groupBy(SRC)
        .agg(
            F.min(SEQ).alias("f"),
            F.max(SEQ).alias("l"),
            F.min(data).alias("lo"),
            F.max(data).alias("hi"),
            F.max(CON).alias("top"),
            F.min(CHUNK).alias("c0"),
            F.max(CHUNK).alias("c1"),
        )
        .collect()
    )
    one_chunk = len({r["c0"] for r in rows} | {r["c1"] for r in rows}) == 1
    first, last, top = [POS] * spec.n, [NEG] * spec.n, [None] * spec.n
    for r in rows:
        first[r[SRC]], last[r[SRC]], top[r[SRC]] = r["f"], r["l"], r["top"]
    los = [r["lo"] for r in rows if r["lo"] is not None]
    his = [r["hi"] for r in rows if r["hi"] is not None]
    return Facts(
        tuple(first),
        tuple(last),
        tuple(top),
        min(los, default=None),
        max(his, default=None),
        1 if one_chunk else 2,
    )


def definitive(
    df: DataFrame,
    spec: MergeSpec,
    contrib: str,
    out: str,
    out_arg: str,
    out_own: str,
    fx: Facts,
    init: Sequence[int | None] = (),
) -> DataFrame:
    """Add ``out``: D after each arrival = max(min over attached sources of their own
    bound, now - wait), with ``contrib`` the rows' contributions to their source's bound
    (null: none); NEG/POS for -inf/+inf.  ``out_arg``: the source holding the minimum
    (-1 when none is attached).  ``out_own``: the row's own source's bound before it
    (null: none yet), i.e. the exclusive prefix max per source, for free.

    A prefix scan of the vector of per-source maxima: per (chunk, source) maxima -> the
    vector carried into each chunk (:func:`_carried`) -> one grouped pass per chunk that
    runs the vector through the chunk's rows with numpy, in blocks (:func:`_in_blocks`).
    Without --join-leave every source is attached from start to end; with it, from its
    first arrival to just before its last one is counted.  ``init``: each source's bound
    before the first arrival (``--state``: carried from earlier runs; None: none).
    """
    n, join_leave = spec.n, spec.join_leave
    first, last = fx.first, fx.last
    start = [NEG if v is None else v for v in (*init, *[None] * (n - len(init)))]
    added = [(out, LongType()), (out_arg, IntegerType()), (out_own, LongType())]
    keep = [f for f in df.schema.fields if f.name not in dict(added)]
    schema = StructType([*keep, *[StructField(c, t) for c, t in added]])

    def run(left: pa.Table, right: pa.Table | None = None) -> pa.Table:
        import numpy as np

        left = left.select([f.name for f in keep]).sort_by(SEQ)
        cur = np.array(start, np.int64)
        if right is not None and right.num_rows:
            at = values_of(right.column(SRC))
            cur[at] = np.maximum(cur[at], values_of(right.column("_carry")))
        d, arg, own = _in_blocks(
            cur,
            values_of(left.column(SEQ)),
            values_of(left.column(SRC)),
            values_of(left.column(contrib).fill_null(NEG)),
            values_of(left.column(LAG).fill_null(NEG)),
            (first, last) if join_leave else None,
            n,
        )
        return (
            left.append_column(out, pa.array(d, pa.int64()))
            .append_column(out_arg, pa.array(arg, pa.int32()))
            .append_column(out_own, pa.array(own, pa.int64(), mask=own == NEG))
        )

    if fx.chunks == 1:  # nothing to carry: one grouped pass
        return df.groupBy(CHUNK).applyInArrow(lambda table: run(table), schema)
    carry = _carried(df, contrib)
    return df.groupBy(CHUNK).cogroup(carry.groupBy(CHUNK)).applyInArrow(run, schema)


def _carried(df: DataFrame, contrib: str) -> DataFrame:
    """Per (chunk, source): ``_carry``, the greatest ``contrib`` of the source's rows in
    the chunks before it (a window over the small per-(chunk, source) table; no row where
    there is none): what each chunk's pass starts from."""
    per = df.groupBy(CHUNK, SRC).agg(F.max(contrib).alias("_m"))
    grid = (
        df.select(F.col(CHUNK).alias("_gc"))
        .distinct()
        .crossJoin(per.select(F.col(SRC).alias("_gs")).distinct())
        .join(
            per.select(F.col(CHUNK).alias("_gc"), F.col(SRC).alias("_gs"), "_m"),
            ["_gc", "_gs"],
            "left",
        )
    )
    earlier = Window.partitionBy("_gs").orderBy("_gc").rowsBetween(UNBOUNDED, -1)
    return grid.select(
        F.col("_gc").alias(CHUNK),
        F.col("_gs").alias(SRC),
        F.max("_m").over(earlier).alias("_carry"),
    ).where(F.col("_carry").isNotNull())


def _in_blocks(cur, seq, src, con, lag, attach, n: int) -> tuple:
    """One chunk's rows (sorted by arrival ``seq``, of source ``src``, contributing
    ``con``, ``lag`` = now - wait) run through ``cur`` (the n sources' bounds before
    them), in blocks of about 2^20 cells: (D, the source holding it or -1, the row's own
    source's bound before it), numpy arrays.  ``attach``: (first, last) arrivals per source
    (--join-leave: attached in [first, last)); None: every source attached."""
    import numpy as np

    if attach is not None:
        f_arr, l_arr = np.array(attach[0], np.int64), np.array(attach[1], np.int64)
    m = len(seq)
    d, arg, own = np.empty(m, np.int64), np.empty(m, np.int32), np.empty(m, np.int64)
    step = max(1, (1 << 20) // n)
    for lo in range(0, m, step):
        hi = min(m, lo + step)
        k = hi - lo
        rows = np.arange(k)
        vec = np.full((k, n), NEG, np.int64)
        vec[rows, src[lo:hi]] = con[lo:hi]
        vec[0] = np.maximum(vec[0], cur)
        np.maximum.accumulate(vec, axis=0, out=vec)
        own[lo] = cur[src[lo]]
        own[lo + 1 : hi] = vec[rows[:-1], src[lo + 1 : hi]]
        cur = vec[-1].copy()
        if attach is not None:
            s = seq[lo:hi, None]
            attached = (f_arr[None, :] <= s) & (s < l_arr[None, :])
            vec = np.where(attached, vec, POS)
            nobody = ~attached.any(axis=1)
        else:
            nobody = np.zeros(k, bool)
        a = vec.argmin(axis=1)
        dd = np.maximum(vec[rows, a], lag[lo:hi])
        dd[nobody], a[nobody] = POS, -1
        d[lo:hi], arg[lo:hi] = dd, a
    return d, arg, own


# ---------------------------------------------------------------------------- searches


def _segments(spec: MergeSpec, fx: Facts) -> Column:
    """Join segments: D is monotone between two arrivals where a source joins."""
    if not spec.join_leave:
        return F.lit(0)
    firsts = sorted(f for f in fx.first if f != POS)
    return F.size(F.filter(F.array(*[F.lit(f) for f in firsts]), lambda x: x <= F.col(SEQ)))


def release_points(
    df: DataFrame, spec: MergeSpec, d: str, fx: Facts, by: Sequence[str] = ()
) -> DataFrame:
    """Add ``REL``: for every ``CAND`` row, the first arrival (its _evt_seq) at or after it
    whose D (column ``d``) is >= its evtime; null = released at the end of the input.
    ``by``: independent copies of the rows (``evtime sweep``: one per setting)."""
    by = list(by)
    lo, hi = fx.lo, fx.hi
    if lo is None:
        return df.withColumn(REL, F.lit(None).cast("long"))
    df = df.withColumn(SEG, _segments(spec, fx))
    # D below every candidate never releases one; +inf releases all: clamp to the max
    data = df.where(F.col(d) >= F.lit(lo)).select(
        *by, SEG, F.least(F.col(d), F.lit(hi)).alias("_v"), F.col(SEQ).alias("_a")
    )
    queries = df.where(CAND).select(*by, SEG, F.col(SEQ).alias("_q"), F.col(EVT).alias("_v"))
    # (both sides' values are data rows' evtimes, or D clamped to them: within lo..hi)
    lims = (lo, hi)
    found = first_above(queries, data, [*by, SEG], "_f", strict=False, keep_by=by, limits=lims)
    # inside the row's own segment D is monotone: a hit before the row means the row itself
    rel = found.select(
        *by, "_q", F.when(F.col("_f").isNotNull(), F.greatest("_q", "_f")).alias("_rel")
    )
    if spec.join_leave:
        # each search plans its inputs several times: materialise between them (flat plans)
        rel = rel.localCheckpoint()
        left = (
            rel.where(F.col("_rel").isNull())
            .join(queries, [*by, "_q"])
            .select(*by, SEG, "_q", "_v")
        )
        if not left.isEmpty():
            # not in its own segment: the first later segment whose top passes it, then there
            tops = data.groupBy(*by, SEG).agg(F.max("_v").alias("_top"))
            later_tops = tops.select(*by, F.col(SEG).alias("_a"), F.col("_top").alias("_v"))
            segs = left.select(*by, SEG).distinct()
            pairs = (
                (segs.join(later_tops, by) if by else segs.crossJoin(later_tops))
                .where(F.col("_a") > F.col(SEG))
                .select(*by, SEG, "_v", "_a")
            )
            later = first_above(
                left, pairs, [*by, SEG], "_k", strict=False, keep_by=by, limits=lims
            )
            later = later.localCheckpoint()
            q2 = later.where(F.col("_k").isNotNull()).join(left.drop(SEG), [*by, "_q"])
            q2 = q2.select(*by, F.col("_k").alias(SEG), "_q", "_v")
            there = first_above(q2, data, [*by, SEG], "_f2", strict=False, keep_by=by, limits=lims)
            rel = rel.join(there, [*by, "_q"], "left").select(
                *by, "_q", F.coalesce("_rel", "_f2").alias("_rel")
            )
    rel = rel.select(*by, F.col("_q").alias(SEQ), F.col("_rel").alias(REL)).localCheckpoint()
    return df.drop(SEG).join(rel, [SEQ, *by], "left")


def stream_bound(df: DataFrame, by: Sequence[str] = ()) -> DataFrame:
    """Add ``BB``: max evtime of the candidates released before each arrival (a prefix max
    over release events placed just after their releasing arrival), per ``by``."""
    events = df.where(F.col(CAND) & F.col(REL).isNotNull()).select(
        *by,
        (F.col(REL) * 2 + 1).alias(SEQ),
        F.shiftright(F.col(REL), CHUNK_SHIFT).alias(CHUNK),
        F.col(EVT).alias("_relev"),
        F.lit(1).alias("_kind"),
    )
    rows = df.withColumns({"_oseq": F.col(SEQ), SEQ: F.col(SEQ) * 2, "_kind": F.lit(0)})
    both = prefix_max(rows.unionByName(events, allowMissingColumns=True), {BB: "_relev"}, by)
    return (
        both.where(F.col("_kind") == 0)
        .withColumn(SEQ, F.col("_oseq"))
        .drop("_oseq", "_kind", "_relev")
    )


# ---------------------------------------------------------------------------- classify


def classify(df: DataFrame, spec: MergeSpec) -> DataFrame:
    """Add ``KEEP`` (released, not discarded; false for bound rows), and what it took:
    ``OWNP``; in the general case also ``DEF`` (D'), ``REL`` and ``BB``."""
    if spec.simple:
        df = prefix_max(df, {OWNP: CON}, by=[SRC], inclusive=False)
    else:
        fx = facts(df, spec)
        # cut the lineage: the searches below run over these rows several times
        df = definitive(df, spec, CON, DEF, DEF_ARG, OWNP, fx).localCheckpoint()
    cand = (
        ~F.col(BND)
        & (F.col(OWNP).isNull() | (F.col(EVT) >= F.col(OWNP)))
        & (F.col(LAG).isNull() | (F.col(EVT) >= F.col(LAG)))
    )
    df = df.withColumn(CAND, cand)
    if spec.simple:
        return df.withColumn(KEEP, F.col(CAND))
    df = stream_bound(release_points(df, spec, DEF, fx))
    keep = F.col(CAND) & (F.col(BB).isNull() | (F.col(EVT) >= F.col(BB)))
    return df.withColumn(KEEP, keep).localCheckpoint()


def classified(df: DataFrame, spec: MergeSpec, here: bool, shown: bool = False) -> DataFrame:
    """:func:`classify`, or :func:`classify_here` for rows read in this process (``here``)
    in the general case (an arrival order, a wait or --join-leave), whose steps in Spark
    are a dozen small jobs, and whenever the rows' own bounds and arrivals are ``shown``
    (--discards); else sources one after the other take one plan in Spark, run by the job
    that writes the output."""
    if here and (shown or not spec.simple):
        return classify_here(df, spec, shown)
    return classify(df, spec)


def classify_here(df: DataFrame, spec: MergeSpec, shown: bool = False) -> DataFrame:
    """:func:`classify` of a few rows (a run that reads its input in this process): the
    rows fetched with one Spark job and classified here (:func:`_classified_here`), given
    back as a DataFrame of the same columns; ``shown``: also what explain and the discards
    show.  (Bounded: the run holds its input here already.)"""
    from pyspark.sql.pandas.types import to_arrow_schema

    t = df.toArrow().sort_by(SEQ)
    added = _classified_here(t, spec, shown)
    for name, (values, _) in added.items():
        t = t.append_column(name, values)
    schema = StructType(
        [*df.schema.fields, *[StructField(c, kind) for c, (_, kind) in added.items()]]
    )
    return df.sparkSession.createDataFrame(t.cast(to_arrow_schema(schema)), schema)


def _classified_here(
    t: pa.Table, spec: MergeSpec, shown: bool
) -> dict[str, tuple[pa.Array, object]]:
    """The columns :func:`classify` adds, for the rows of ``t`` (sorted by arrival), by
    the same steps over numpy, ``{name: (values, Spark type)}``: the vector scan
    :func:`_in_blocks` over all rows as one chunk; each candidate's release point the first
    arrival at or after it whose D' reaches its evtime (:func:`_first_reaching`); the
    stream bound an exclusive prefix max of the released rows' evtimes placed at their
    releasing arrival.  Sources one after the other give the same columns (D' is then the
    closed form of :func:`_simple_definitive` and no candidate is below the stream bound).

    ``shown``: also what :func:`explain` and :func:`with_discard_columns` find in Spark:
    the own bounds and D after each arrival with the discarded rows left out (the vector
    scan again: the same as D' where no discarded row moved a bound; ``OWN``, and
    ``SHOWN_DEF``, ``SHOWN_ARG`` beside D' and its source, which --emit-bounds reads),
    arrival numbers (the rows' places in arrival order), release arrivals and output
    positions (the kept rows sorted by ``(evtime, arrival)``)."""
    import numpy as np
    from pyspark.sql.types import BooleanType

    seq, src = values_of(t.column(SEQ)), values_of(t.column(SRC))
    bnd, evt = values_of(t.column(BND)), values_of(t.column(EVT))
    con = values_of(t.column(CON).fill_null(NEG))
    lag = values_of(t.column(LAG).fill_null(NEG))  # (NEG: no wait)
    attach, m = _attached(spec, seq, src), len(seq)
    start = np.full(spec.n, NEG, np.int64)
    d, arg, own = _in_blocks(start, seq, src, con, lag, attach, spec.n)
    cand = ~bnd & ((own == NEG) | (evt >= own)) & (evt >= lag)
    at = _first_reaching(d, evt, cand)
    done = at >= 0
    rel = np.where(done, seq[np.maximum(at, 0)], 0)
    # the stream bound before each arrival (as stream_bound): the released candidates'
    # evtimes placed at their releasing arrival, their running max without the arrival's own
    placed, bb = np.full(m, NONE, np.int64), np.full(m, NONE, np.int64)
    np.maximum.at(placed, at[done], evt[done])
    if m:
        running_max(placed, NONE, False, bb)
    keep = cand & ((bb == NONE) | (evt >= bb))
    out = {
        DEF: (pa.array(d), LongType()),
        DEF_ARG: (pa.array(arg, pa.int32()), IntegerType()),
        OWNP: (int64_array(own, own == NEG), LongType()),
        CAND: (pa.array(cand), BooleanType()),
        REL: (int64_array(rel, ~done), LongType()),
        BB: (int64_array(bb, bb == NONE), LongType()),
        KEEP: (pa.array(keep), BooleanType()),
    }
    if not shown:
        return out
    counted = np.where(bnd | keep, con, NEG)
    d, arg, own = _in_blocks(start, seq, src, counted, lag, attach, spec.n)
    kept = np.flatnonzero(keep)
    pos = np.zeros(m, np.int64)
    pos[kept[np.lexsort((seq[kept], evt[kept]))]] = np.arange(1, len(kept) + 1)
    return out | {
        SHOWN_DEF: (pa.array(d), LongType()),
        SHOWN_ARG: (pa.array(arg, pa.int32()), IntegerType()),
        OWN: (int64_array(own, own == NEG), LongType()),
        ARRIVAL: (pa.array(np.arange(1, m + 1, dtype=np.int64)), LongType()),
        REL_ARRIVAL: (int64_array(at + 1, ~done), LongType()),
        OUTPUT_POS: (int64_array(pos, ~keep), LongType()),
    }


def _attached(spec: MergeSpec, seq, src):  # -> tuple[np.ndarray, np.ndarray] | None
    """--join-leave: each source's first and last arrival among rows ``seq`` of sources
    ``src`` (the ``attach`` of :func:`_in_blocks`); None without it."""
    import numpy as np

    if not spec.join_leave:
        return None
    first, last = np.full(spec.n, POS, np.int64), np.full(spec.n, NEG, np.int64)
    np.minimum.at(first, src, seq)
    np.maximum.at(last, src, seq)
    return first, last


def _first_reaching(d, evt, cand):  # -> np.ndarray
    """Per row (in arrival order), the position of the first arrival at or after it whose
    ``d`` is at least its ``evt`` (-1: none, or not a ``cand`` row): a search of each
    candidate down a table of block maxima (blocks of 2^k arrivals: those whose maximum is
    below its evtime are stepped over), exact whatever the shape of ``d``."""
    import numpy as np

    m = len(d)
    levels = [d]
    while (1 << len(levels)) <= m:
        prev, h = levels[-1], 1 << (len(levels) - 1)
        levels.append(np.maximum(prev[:-h], prev[h:]))  # (max of d[j : j + 2h])
    rows = np.flatnonzero(cand)
    pos, want = rows.copy(), evt[rows]
    for k in range(len(levels) - 1, -1, -1):
        lv = levels[k]
        step = pos < len(lv)
        step[step] = lv[pos[step]] < want[step]
        pos[step] += 1 << k
    found = pos < m
    found[found] = d[pos[found]] >= want[found]
    out = np.full(m, -1, np.int64)
    out[rows[found]] = pos[found]
    return out


def classify_in_order(
    df: DataFrame,
    spec: MergeSpec,
    limits: tuple[int, int] | None = None,
    late: DataFrame | None = None,
    as_read: AsRead | None = None,
    sources: Sequence[int] = (),
    early: tuple[tuple[int, ...], Carry] | None = None,
) -> tuple[DataFrame, KeptInPart | FilledInPart | None]:
    """:func:`classify` and the output order in one pass, for sources one after the other
    with data rows only (``spec.simple``, no bound marker) when only the keep flag is
    needed: a row is discarded exactly when an earlier row of its source has evtime -
    range*unit above its evtime (its own bound), the keep rule of adjust with the source
    as key (:func:`~evtime.engine.scan.kept_in_parts`; the output order (evtime, arrival) is
    the order of the parts).  ``limits``: bounds of the evtimes, when known.  ``late``:
    :func:`late_rows` (``--discards``): the step gives each discarded row its columns.
    Returns the rows and the step that adds ``KEEP`` to each part (None: a width beyond
    the int64 timeline; use :func:`classify`).  ``as_read``, ``sources`` (each input
    file's source number): when the times can be read here, the search's carry comes from
    them, per source, not from a Spark job (as adjust's), or is ``early`` when that is
    the carry of these sources and limits (:func:`early_carry`, found while Spark
    started)."""
    reach = None
    if as_read is not None and as_read.times is not None and sources:
        reach = reach_from(as_read.times, spec.unit_ns, sources)
        fits = early is not None and limits is not None and early[0] == tuple(sources)
        if fits and early[1].fits([SRC], *limits, spec.width):
            reach = early[1]
    try:
        # (every source's number is known: no aggregate over pairs per row to find them)
        keys = df.sparkSession.range(spec.n).select(F.col("id").cast("int").alias(SRC))
        return kept_in_parts(
            df, EVT, spec.width, SEQ, KEEP, [SRC], limits, fill=late, keys=keys, reach=reach
        )
    except OverflowError:
        return df, None


def early_carry(
    spec: MergeSpec, known, sources: Sequence[int]
) -> tuple[tuple[int, ...], Carry] | None:
    """The search's carry for :func:`classify_in_order`, per source (``sources``: each
    input file's source number), from the input's times read here and what is ``known``
    of them (a :class:`~evtime.io.reader.Footing`), before any DataFrame exists (as
    adjust's :func:`~evtime.engine.adjust.early_carry`); with the sources it is for."""
    limits = truncated_range((known.least, known.greatest), spec.unit_ns)
    if limits is None or not sources:
        return None
    reach = reach_from(known.times, spec.unit_ns, sources)
    return tuple(sources), carry_here(reach, [SRC], *limits, spec.width)


def late_rows(df: DataFrame, spec: MergeSpec, as_read: AsRead | None = None) -> DataFrame:
    """The rows merge discards, ``(_evt_src, _evt_evtime, _evt_seq)`` with the columns of
    ``--discards`` (:func:`discard_words`), for :func:`classify_in_order`, when sources come
    one after the other with data rows only and no range (``spec.simple``, ``width`` 0):
    the prefix scan of the own bounds runs over a few columns of every row, and only the
    discarded rows go on.

    A discarded row is behind its own source's bound, the greatest evtime of its source
    before it.  A row of the last source may also be behind the stream bound ``B``, which
    is then the definitive time before it, ``min(C, own bound)`` with ``C`` the least final
    bound of the other sources: rows are released only while the last source arrives (D
    is -inf before), and the first row of a source to reach a bound is kept, so a row at
    exactly that time was released before (with a range that need not hold: the caller
    takes :func:`classify`)."""
    last = spec.n - 1
    narrow = df.select(SRC, SEQ, CHUNK, EVT, CON)
    late = prefix_max(narrow, {OWNP: CON}, by=[SRC], inclusive=False)
    late = late.where(F.col(EVT) < F.col(OWNP)).withColumns(
        {OWN: F.col(OWNP), LAG: F.lit(None).cast("long"), BND: F.lit(False), KEEP: F.lit(False)}
    )
    if last == 0:  # (no other source: D is the own bound)
        bb = F.col(OWN)
    else:  # C, when every other source has a bound (else D stays -inf: nothing released)
        tops = df.where(F.col(SRC) < last).groupBy(SRC).agg(F.max(CON).alias("_top"))
        c = tops.groupBy(F.lit(0).alias("_one")).agg(
            F.when(F.count(F.lit(1)) == last, F.min("_top")).alias("_c")
        )
        late = join_small(late.withColumn("_one", F.lit(0)), c, ["_one"])
        known = (F.col(SRC) == last) & F.col("_c").isNotNull()
        bb = F.when(known, F.least(F.col("_c"), F.col(OWN)))
    late = numbered(late.withColumn(BB, bb), SEQ, arrival_offsets(df, as_read), "arrival")
    return discard_words(late, spec).select(SRC, EVT, SEQ, "arrival", "reason", "bound")


def _simple_definitive(df: DataFrame, spec: MergeSpec, fx: Facts) -> DataFrame:
    """D and its argmin source after each arrival when sources come one after the other."""
    last = spec.n - 1
    empty = next((s for s in range(spec.n) if fx.top[s] is None), spec.n)
    others = [(NEG if fx.top[s] is None else fx.top[s], s) for s in range(last)]
    c, c_src = min(others) if others else (POS, -1)
    own_after = F.greatest(F.col(OWNP), F.col(CON))
    if c == NEG:  # (a source with no bound, or one saturated at the first instant)
        d, arg = F.lit(NEG), F.lit(empty if empty < spec.n else c_src)
    else:
        d = F.when(F.col(SRC) == last, F.least(F.lit(c), own_after)).otherwise(F.lit(NEG))
        arg = F.when(F.col(SRC) == last, F.when(own_after < F.lit(c), last).otherwise(c_src))
        arg = arg.otherwise(F.when(F.lit(empty) < F.col(SRC), empty).otherwise(F.col(SRC) + 1))
    return df.withColumns({DEF: d.cast("long"), DEF_ARG: arg.cast("int")})


# ---------------------------------------------------------------------------- words


def source_name(spec: MergeSpec, col: str = SRC) -> Column:
    return F.element_at(F.array(*[F.lit(s) for s in spec.names]), F.col(col) + 1)


def _gap(a: Column, b: Column) -> Column:
    """``a - b`` exactly, for times at both ends of the int64 timeline (a decimal)."""
    return a.cast("decimal(20,0)") - b.cast("decimal(20,0)")


def _duration(col: Column) -> Column:
    """ns (>= 0) -> '90s', '0.5s', '1.000000001s'."""
    secs = F.floor(col / F.lit(1_000_000_000)).cast("long")
    frac = F.lpad(F.pmod(col, F.lit(1_000_000_000)).cast("string"), 9, "0")
    frac = F.regexp_replace(frac, "0+$", "")
    dot = F.when(frac != "", F.concat(F.lit("."), frac)).otherwise(F.lit(""))
    return F.concat(secs.cast("string"), dot, F.lit("s"))


def _reason(spec: MergeSpec) -> Column:
    """Which promises a discarded row broke (all that apply)."""
    ev = F.col(EVT)
    parts = [
        F.when(
            F.col(OWN).isNotNull() & (ev < F.col(OWN)),
            F.concat(F.lit("its source's own bound "), present.iso(OWN)),
        )
    ]
    if spec.wait is not None:
        parts.append(
            F.when(
                ev < F.col(LAG),
                F.concat(
                    F.lit("the wait: now "),
                    present.iso(NOW),
                    F.lit(f" - wait {spec.wait_text or spec.wait} = "),
                    present.iso(LAG),
                ),
            )
        )
    parts.append(
        F.when(
            F.col(BB).isNotNull() & (ev < F.col(BB)),
            F.concat(
                F.lit("the stream bound "), present.iso(BB), F.lit(" (largest time released)")
            ),
        )
    )
    return F.concat(
        F.lit("evtime "), present.iso(EVT), F.lit(" is below "), F.concat_ws("; and below ", *parts)
    )


def missed_bound() -> Column:
    """The highest bound a discarded row fell below."""
    return F.greatest(*[F.col(c) for c in (OWN, LAG, BB)])


def _own_moved(df: DataFrame, spec: MergeSpec) -> bool:
    """Did a discarded row move its source's bound in ``OWNP`` (so own bounds and D shown
    must be recomputed without it)?  Never without a clock or an arrival order."""
    if spec.simple:  # only own-bound discards: they never move the bound
        return False
    moved = ~F.col(BND) & ~F.col(KEEP) & (F.col(OWNP).isNull() | (F.col(CON) > F.col(OWNP)))
    return not df.where(moved).isEmpty()


def true_own(df: DataFrame, spec: MergeSpec) -> DataFrame:
    """Add ``OWN``: the own bound before each arrival, discarded rows left out."""
    if not _own_moved(df, spec):
        return df.withColumn(OWN, F.col(OWNP))
    counted = F.when(F.col(BND) | F.col(KEEP), F.col(CON))
    return prefix_max(
        df.withColumn("_evt_tc", counted), {OWN: "_evt_tc"}, by=[SRC], inclusive=False
    )


def _simple_releases(df: DataFrame, spec: MergeSpec) -> DataFrame:
    """Sources one after the other: D (closed form), release points and the stream bound
    before each arrival (only explain and the discards' reasons need them)."""
    fx = facts(df, spec)
    df = _simple_definitive(df.withColumn(OWN, F.col(OWNP)), spec, fx).localCheckpoint()
    df = release_points(df, spec, DEF, fx)
    if df.where(~F.col(BND) & ~F.col(KEEP)).isEmpty():  # no discards: no words needed
        return df.withColumn(BB, F.lit(None).cast("long"))
    return stream_bound(df)


def with_discard_columns(
    df: DataFrame, spec: MergeSpec, as_read: AsRead | None = None
) -> DataFrame:
    """``arrival``, ``reason`` and ``bound`` (the bound missed) for the discards sink;
    ``as_read``: see :func:`~evtime.engine.scan.arrival_numbers`.  Rows that have their own
    bounds and arrivals already (:func:`classify_here` with what is shown) just take
    their words."""
    if OWN in df.columns and ARRIVAL in df.columns:
        return discard_words(df.withColumn("arrival", F.col(ARRIVAL)), spec)
    if spec.simple:  # a row behind its own bound may be behind the stream bound too
        df = _simple_releases(df, spec)
    return discard_words(arrival_numbers(true_own(df, spec), "arrival", as_read), spec)


def discard_words(df: DataFrame, spec: MergeSpec) -> DataFrame:
    """``reason`` and ``bound`` of the discarded rows; needs ``OWN``, ``BB`` and ``LAG``."""
    discarded = ~F.col(BND) & ~F.col(KEEP)
    return df.withColumns(
        {
            "reason": F.when(discarded, _reason(spec)),
            "bound": F.when(discarded, missed_bound()),
        }
    )


# ---------------------------------------------------------------------------- emitted bounds


def emitted_bounds(df: DataFrame, spec: MergeSpec) -> DataFrame:
    """Arrivals after which the merged stream's definitive time passes every earlier one:
    ``(SEQ, EVT = bound to write)``.  Needs :func:`classify`."""
    if spec.simple:
        df = _simple_definitive(df, spec, facts(df, spec))
    finite = F.when((F.col(DEF) != F.lit(NEG)) & (F.col(DEF) != F.lit(POS)), F.col(DEF))
    df = prefix_max(df.withColumn("_evt_df", finite), {"_evt_dmax": "_evt_df"}, inclusive=False)
    new = F.col("_evt_df").isNotNull() & (
        F.col("_evt_dmax").isNull() | (F.col("_evt_df") > F.col("_evt_dmax"))
    )
    shown = sat.sub(F.col("_evt_df"), spec.tick) if spec.strict else F.col("_evt_df")
    return df.where(new).select(SEQ, CHUNK, shown.alias(EVT))


KIND = "_evt_kind"  # in merge's output: 0 a data row, 1 an emitted bound row (after the data)


def output_rows(df: DataFrame, routed: bool) -> DataFrame:
    """The classified rows as merge writes them: their ``ROUTE`` (:func:`route_column`;
    null when ``routed`` is False: a part step gives it as the parts are written) and
    :data:`KIND` 0 (data rows)."""
    from evtime.columns import ROUTE

    route = route_column() if routed else F.lit(None).cast("string")
    return df.withColumns({ROUTE: route, KIND: F.lit(0)})


def with_emitted_bounds(
    rows: DataFrame, df: DataFrame, spec: MergeSpec, lay: Layout, fmt: str | None, tz: str | None
) -> DataFrame:
    """``rows`` (:func:`output_rows` of ``df``) and the bound rows of ``--emit-bounds``
    (:func:`emitted_bounds` of ``df``): their time column in its own type and
    representation (:func:`bound_time_value`, ``fmt``/``tz`` as read), the marker column set
    to the marker's value, route ``emit``, :data:`KIND` 1; their other columns null."""
    col, value = spec.marker
    bounds = marked_bounds(emitted_bounds(df, spec), (), lay, fmt, tz, col, value, rows.dtypes)
    return rows.unionByName(bounds, allowMissingColumns=True)


def marked_bounds(
    bounds: DataFrame,
    keys: tuple[str, ...],
    lay: Layout,
    fmt: str | None,
    tz: str | None,
    col: str,
    value: str,
    dtypes: list[tuple[str, str]],
) -> DataFrame:
    """The bound rows of ``--emit-bounds`` (adjust's and merge's) from ``bounds`` (``keys``,
    ``SEQ``, ``EVT``): the time column at ``EVT`` in its own type and representation
    (:func:`bound_time_value`), ``col`` set to the marker's ``value``, route ``emit``,
    :data:`KIND` 1; typed as the rows they join (``dtypes``)."""
    from evtime.columns import ROUTE

    types = dict(dtypes)
    return bounds.select(
        *keys,
        SEQ,
        EVT,
        bound_time_value(lay, fmt, tz).cast(types[lay.time_col]).alias(lay.time_col),
        F.lit(value).cast(types[col]).alias(col),
        F.lit("emit").alias(ROUTE),
        F.lit(1).alias(KIND),
    )


def bound_time_value(lay: Layout, fmt: str | None, tz: str | None) -> Column:
    """The time column's value for an emitted bound at ``EVT``, in the column's own
    representation (floored to its precision, which keeps the promise true)."""
    t = lay.schema.field(lay.time_col).type
    v = F.col(EVT)

    def floor_div(k: int) -> Column:
        return ((v - F.pmod(v, F.lit(k))) / F.lit(k)).cast("long")

    if pa.types.is_timestamp(t):
        return floor_div({"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[t.unit])
    from evtime.io.timeparse import EPOCH_FORMATS

    if pa.types.is_integer(t) or pa.types.is_floating(t):
        k = EPOCH_FORMATS.get(fmt or "", 1)
        return floor_div(k) if pa.types.is_integer(t) else v / F.lit(k)
    if fmt in EPOCH_FORMATS:
        return floor_div(EPOCH_FORMATS[fmt]).cast("string")
    if fmt in (None, "iso"):
        return present.iso(EVT)
    micros = F.timestamp_micros(floor_div(1000))
    if tz:
        micros = F.from_utc_timestamp(micros, tz)
    return F.date_format(micros, fmt)


# ---------------------------------------------------------------------------- explain


def _blame(spec: MergeSpec) -> Column:
    """Why a released row was held: the state of the definitive time at its arrival."""
    rel = F.col("_x_released_by")
    n = rel - F.col(ARRIVAL)
    held = F.when(rel.isNull(), F.lit(present.HELD_TO_END)).otherwise(
        F.concat(
            F.lit("held "),
            n.cast("string"),
            F.when(n == 1, F.lit(" arrival")).otherwise(F.lit(" arrivals")),
        )
    )
    who = source_name(spec, DEF_ARG)
    d = F.col(DEF)
    by_wait = F.col(LAG).isNotNull() & (d == F.col(LAG))
    why = (
        F.when(F.col(DEF_ARG) < 0, F.lit("no source attached"))
        .when(d == F.lit(NEG), F.concat(F.lit("source "), who, F.lit(" had no bound yet")))
        .when(
            by_wait,
            F.concat(
                F.lit("the definitive time was now - wait = "),
                present.iso(DEF),
                F.lit(", "),
                _duration(_gap(F.col(EVT), d)),
                F.lit(" behind"),
            ),
        )
        .otherwise(
            F.concat(
                F.lit("source "),
                who,
                F.lit(" held the definitive time at "),
                present.iso(DEF),
                F.lit(", "),
                _duration(_gap(F.col(EVT), d)),
                F.lit(" behind"),
            )
        )
    )
    return F.concat(held, F.lit(": at its arrival "), why)


def explain(df: DataFrame, spec: MergeSpec, as_read: AsRead | None = None) -> DataFrame:
    """Every arrival with its decision (SPEC §5), ``_x_<col>`` columns; needs
    :func:`classify`.  ``bound`` is D after the arrival, discarded rows left out.
    ``as_read``: see :func:`~evtime.engine.scan.arrival_numbers`."""
    if spec.simple:
        df = _simple_releases(df, spec)
    elif _own_moved(df, spec):
        # D and own bounds as shown: recomputed with the discarded rows left out
        counted = F.when(F.col(BND) | F.col(KEEP), F.col(CON))
        df = df.withColumn("_evt_tc", counted)
        df = definitive(df, spec, "_evt_tc", DEF, DEF_ARG, OWN, facts(df, spec))
    else:
        df = df.withColumn(OWN, F.col(OWNP))
    offsets = arrival_offsets(df, as_read)
    df = numbered(df, SEQ, offsets, ARRIVAL)
    df = numbered(df, REL, offsets, REL_ARRIVAL).localCheckpoint()
    return _explained(positions(df, EVT, OUTPUT_POS, F.col(KEEP)), spec)


def explain_here(df: DataFrame, spec: MergeSpec) -> DataFrame:
    """:func:`explain` of :func:`classify` for a few rows (a run that reads its input in
    this process), in every case: :func:`classify_here` with what explain shows, then the
    words of :func:`explain` (Spark expressions, evaluated by the job that writes them)."""
    df = classify_here(df, spec, shown=True)
    return _explained(df.withColumns({DEF: F.col(SHOWN_DEF), DEF_ARG: F.col(SHOWN_ARG)}), spec)


def _explained(df: DataFrame, spec: MergeSpec) -> DataFrame:
    """The ``_x_<col>`` columns of :func:`explain` from the rows' numbers (D, the own bound
    as shown, arrival numbers, release arrivals, output positions)."""
    d = F.col(DEF)
    decision = (
        F.when(F.col(BND), present.BOUND)
        .when(F.col(KEEP), present.RELEASED)
        .otherwise(present.DISCARDED)
    )
    df = df.withColumns(
        {
            "_x_arrival": F.col(ARRIVAL),
            "_x_source": source_name(spec),
            "_x_time": F.col(T),
            "_x_evtime": F.col(EVT),
            "_x_decision": decision,
            "_x_bound": F.when((d != F.lit(NEG)) & (d != F.lit(POS)), d),
            "_x_released_by": F.when(F.col(KEEP), F.col(REL_ARRIVAL).cast("long")),
            "_x_output_pos": F.col(OUTPUT_POS),
            "_x_windows": F.lit(None).cast("string"),
            # the row's source's own bound after the arrival (for pictures, not shown)
            "_x_source_bound": F.greatest(F.col(OWN), F.when(F.col(BND) | F.col(KEEP), F.col(CON))),
        }
    )
    held = F.col(KEEP) & (  # (released_by null: released only at the end of the input)
        F.col("_x_released_by").isNull() | (F.col("_x_released_by") > F.col(ARRIVAL))
    )
    reason = (
        F.when(F.col(BND), F.lit(None)).when(~F.col(KEEP), _reason(spec)).when(held, _blame(spec))
    )
    return df.withColumn("_x_reason", reason)


def route_names(spec: MergeSpec) -> list[str]:
    """The writer's routes of a merge, in the order :func:`route_numbers` numbers them:
    per source, ``out:<i>``, ``discard:<i>``, ``bound:<i>``."""
    return [f"{kind}:{s}" for s in range(spec.n) for kind in ("out", "discard", "bound")]


def route_column() -> Column:
    """Each classified row's route (:func:`route_names`): a bound row, a kept row, else
    a discarded one, with its source's number."""
    kind = F.when(F.col(BND), "bound").when(F.col(KEEP), "out").otherwise("discard")
    return F.concat(kind, F.lit(":"), F.col(SRC).cast("string"))


def rejected_route() -> Column:
    """The route of a bad input row: discarded, by its source."""
    return F.concat(F.lit("discard:"), F.col(SRC).cast("string"))


def explained_routed(df: DataFrame, spec: MergeSpec, as_read: AsRead | None = None) -> DataFrame:
    """:func:`explain` of the classified rows, each with its ``ROUTE`` (:func:`route_column`:
    explain merge's counts are merge's)."""
    from evtime.columns import ROUTE

    return explain(df, spec, as_read).withColumn(ROUTE, route_column())


def explained_here(df: DataFrame, spec: MergeSpec) -> DataFrame:
    """:func:`explain_here` of the prepared rows, each with its ``ROUTE``."""
    from evtime.columns import ROUTE

    return explain_here(df, spec).withColumn(ROUTE, route_column())


def route_numbers(names: list[str], batch: pa.RecordBatch) -> pa.DictionaryArray:
    """:func:`route_column` in Arrow, from the keep flag a part step gives (data rows
    only), as numbers into ``names`` (:func:`route_names`)."""
    from evtime.steps import routes

    kept = batch.column(KEEP).to_numpy(zero_copy_only=False)
    return routes(batch.column(SRC).to_numpy() * 3 + ~kept, names)
