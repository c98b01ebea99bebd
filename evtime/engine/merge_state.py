"""``merge --state``: one run of a merged stream that goes on across runs (SPEC §3).

What a run carries in (:class:`Carried`, a few numbers per source, plus the held rows):
each source's own bound (every row counted, as the engine's ``OWNP``; and with discarded
rows left out, for the reasons), the stream bound ``B`` (largest time released), the last
arrival time (``--arrival``: the clock never goes back) and the number of arrivals so far.

**General case** (``--arrival`` / ``--order-by``, ``--wait``): the run's rows are the
arrivals that follow the earlier runs' ones.  The vector scan starts from the carried own
bounds; the held rows take part in the release search as arrivals before this run's first
one (``_evt_seq`` = :data:`CARRIED` + their arrival number: they were candidates already);
their releases count in the stream bound, which starts at the carried ``B``.  A kept row
is held for the next run when no arrival of this run releases it.

**Default mode** (sources one after the other): one run over all the files reads each
source's rows of every run before the next source's, so no run can release a row that a
later run's row could precede.  A kept row is released when it is strictly below every
source's own bound after the run (a later kept row of source *s* is at or above *s*'s own
bound); the output order is (evtime, source, arrival).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from evtime.columns import CHUNK, CHUNK_SHIFT, SEQ, T
from evtime.engine import saturate as sat
from evtime.engine.merge import (
    BB,
    BND,
    CAND,
    CON,
    DEF,
    DEF_ARG,
    EVT,
    KEEP,
    LAG,
    NEG,
    NOW,
    OWN,
    OWNP,
    REL,
    SRC,
    MergeSpec,
    definitive,
    discard_words,
    facts,
    release_points,
    route_column,
    source_name,
    stream_bound,
)
from evtime.engine.scan import AsRead, arrival_numbers, prefix_max

ARRIVAL = "_evt_arrival"  # the arrival number in the whole stream (all runs), 1-based
HELD = "_evt_held"  # kept, and not released by this run
CARRIED = -(1 << 61)  # _evt_seq of a row carried from an earlier run: CARRIED + its arrival
HELD_COLUMNS = (T, SRC, EVT, ARRIVAL)  # saved with the held rows' own columns


@dataclass(frozen=True)
class Carried:
    """What the stream knew after the last run (per source: in the stream's source order)."""

    own: tuple[int | None, ...] = ()  # own bound, every row counted (None: none yet)
    true_own: tuple[int | None, ...] = ()  # own bound, discarded rows left out
    b: int | None = None  # stream bound: the largest time released so far
    now: int | None = None  # the last arrival time (--arrival)
    arrivals: int = 0

    def to_json(self) -> dict:
        """For state.json (``arrivals`` is saved by the state itself)."""
        return {
            "own": list(self.own),
            "true_own": list(self.true_own),
            "b": self.b,
            "now": self.now,
        }

    @classmethod
    def from_json(cls, d: dict, arrivals: int) -> Carried:
        return cls(tuple(d["own"]), tuple(d["true_own"]), d["b"], d["now"], arrivals)


def _per_source(values: tuple[int | None, ...], n: int) -> Column:
    """The value of the row's source (null: none)."""
    vals = [*values, *[None] * (n - len(values))]
    if not vals:
        return F.lit(None).cast("long")
    arr = F.array(*[F.lit(v).cast("long") for v in vals])
    return F.element_at(arr, F.col(SRC) + 1)


def _carried_rows(held: DataFrame) -> DataFrame:
    """Held rows of an earlier run, as rows of this run that arrived before its first one."""
    seq = F.lit(CARRIED) + F.col(ARRIVAL)
    return held.withColumns(
        {
            SEQ: seq,
            CHUNK: F.shiftright(seq, CHUNK_SHIFT),
            BND: F.lit(False),
            CON: F.lit(None).cast("long"),
        }
    )


def _cand() -> Column:
    return (
        ~F.col(BND)
        & (F.col(OWNP).isNull() | (F.col(EVT) >= F.col(OWNP)))
        & (F.col(LAG).isNull() | (F.col(EVT) >= F.col(LAG)))
    )


def classify(
    df: DataFrame,
    spec: MergeSpec,
    c: Carried,
    held: DataFrame | None,
    flush: bool,
    one_chunk: bool = False,
    as_read: AsRead | None = None,
) -> tuple[DataFrame, Carried]:
    """This run's prepared rows (``SRC`` = the source's place in the stream) and the rows
    carried in: every row with ``KEEP``, ``HELD`` (kept for the next run; never with
    ``flush``), ``ARRIVAL``; and what the next run carries.  ``one_chunk``, ``as_read``:
    what the reading knows, for this run's arrival numbers (see
    :func:`~evtime.engine.scan.arrival_numbers`)."""
    n = spec.n
    if spec.arrival and c.now is not None:  # the clock never goes back across runs
        df = df.withColumn(NOW, F.greatest(F.col(NOW), F.lit(c.now)))
        if spec.wait is not None:
            df = df.withColumn(LAG, sat.sub(F.col(NOW), spec.wait).cast("long"))
    df = arrival_numbers(df, ARRIVAL, as_read, one_chunk)
    df = df.withColumn(ARRIVAL, F.col(ARRIVAL) + F.lit(c.arrivals))
    if spec.simple:
        return _simple(df, spec, c, held, flush)
    carried = _carried_rows(held) if held is not None else None
    both = df if carried is None else df.unionByName(carried, allowMissingColumns=True)
    fx = facts(both, spec)
    df = definitive(df, spec, CON, DEF, DEF_ARG, OWNP, fx, init=c.own).localCheckpoint()
    if carried is not None:
        carried = carried.withColumns(
            {DEF: F.lit(NEG), DEF_ARG: F.lit(-1), OWNP: F.lit(None).cast("long")}
        )
        df = df.unionByName(carried, allowMissingColumns=True)
    df = stream_bound(release_points(df.withColumn(CAND, _cand()), spec, DEF, fx))
    df = df.withColumn(BB, F.greatest(F.col(BB), F.lit(c.b).cast("long")))
    keep = F.col(CAND) & (F.col(BB).isNull() | (F.col(EVT) >= F.col(BB)))
    df = df.withColumn(KEEP, keep)
    df = df.withColumn(HELD, F.col(KEEP) & F.lit(not flush) & F.col(REL).isNull())
    df = df.localCheckpoint()
    counted = F.when(F.col(BND) | F.col(KEEP), F.col(CON))
    released = F.when(F.col(KEEP) & ~F.col(HELD), F.col(EVT))
    per = _per_source_facts(df, counted, released)
    nxt = Carried(
        _merged(c.own, {s: v[0] for s, v in per.items()}, n),
        _merged(c.true_own, {s: v[1] for s, v in per.items()}, n),
        _max(c.b, *[v[2] for v in per.values()]),
        _max(c.now, *[v[3] for v in per.values()]),
        c.arrivals,
    )
    return df, nxt


def _simple(df, spec: MergeSpec, c: Carried, held, flush: bool):
    n = spec.n
    df = prefix_max(df, {OWNP: CON}, by=[SRC], inclusive=False)
    df = df.withColumn(OWNP, F.greatest(F.col(OWNP), _per_source(c.own, n)))
    df = df.withColumn(KEEP, _cand())
    per = _per_source_facts(df, F.col(CON), F.lit(None).cast("long"))
    own = _merged(c.own, {s: v[0] for s, v in per.items()}, n)
    if held is not None:
        df = df.unionByName(
            _carried_rows(held).withColumn(KEEP, F.lit(True)), allowMissingColumns=True
        )
    # released: strictly below every source's own bound (none without a bound: nothing)
    d = None if None in own else min(own)
    if flush:
        still = F.lit(False)
    elif d is None:
        still = F.col(KEEP)
    else:
        still = F.col(KEEP) & (F.col(EVT) >= F.lit(d))
    df = df.withColumn(HELD, still)
    return df, Carried(own, own, None, None, c.arrivals)


def _per_source_facts(df: DataFrame, counted: Column, released: Column) -> dict:
    """Per source of this run: (max contribution, max counted contribution, max released
    evtime, last arrival time) - one small row per source."""
    now = F.col(NOW) if NOW in df.columns else F.lit(None).cast("long")
    rows = df.groupBy(SRC).agg(F.max(CON), F.max(counted), F.max(released), F.max(now)).collect()
    return {r[0]: tuple(r[1:]) for r in rows}


def _max(*vals: int | None) -> int | None:
    return max((v for v in vals if v is not None), default=None)


def _merged(old: tuple[int | None, ...], new: dict, n: int) -> tuple[int | None, ...]:
    old = (*old, *[None] * (n - len(old)))
    return tuple(_max(old[s], new.get(s)) for s in range(n))


def with_discard_columns(df: DataFrame, spec: MergeSpec, c: Carried) -> DataFrame:
    """``arrival`` (in the whole stream), ``reason`` and ``bound`` for the discards sink.
    Default mode: the reasons name the own bound only (the stream bound a single run may add
    depends on the runs to come)."""
    if spec.simple:
        df = df.withColumns({OWN: F.col(OWNP), BB: F.lit(None).cast("long")})
    else:
        counted = F.when(F.col(BND) | F.col(KEEP), F.col(CON))
        df = prefix_max(df.withColumn("_evt_tc", counted), {OWN: "_evt_tc"}, [SRC], False)
        df = df.withColumn(OWN, F.greatest(F.col(OWN), _per_source(c.true_own, spec.n)))
    if LAG not in df.columns:
        df = df.withColumn(LAG, F.lit(None).cast("long"))
    return discard_words(df.withColumn("arrival", F.col(ARRIVAL)), spec)


def output_rows(df: DataFrame, spec: MergeSpec, source_as: str, as_: str) -> DataFrame:
    """The rows of :func:`classify` as the writer takes them: the source's name in
    ``source_as``, the event time in ``as_``, and the ``ROUTE``: ``held`` (kept for the
    next run, the state's own file), else merge's (:func:`route_column`)."""
    from evtime.columns import ROUTE

    route = F.when(F.col(HELD), "held").otherwise(route_column())
    return df.withColumns({source_as: source_name(spec), as_: F.col(EVT), ROUTE: route})
