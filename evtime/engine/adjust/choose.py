"""Which path adjust and explain adjust take: the conditions in one place, in order.

adjust (:func:`choose`), the first that holds:

1. ``--state``: the prefix scan, then :func:`~evtime.engine.adjust.core.carry_on` (the
   state run calls it; not chosen here).
2. :class:`InPlace`: in order (below), no bad rows set aside, and
   :func:`~evtime.engine.adjust.in_place.ordered_in_place` finds the row groups fit.
3. :class:`InOrder`: no ``--discards``, no ``--emit-bounds``, not read in this process.
4. :class:`PrefixScan`: everything else.

explain adjust (:func:`choose_explain`): :class:`ExplainInParts`, the prefix scan
(:class:`ExplainHere`) when its bounds leave int64, which takes (:func:`choose_in_parts`),
the first that holds:

1. :class:`ExplainAllHere`: read in this process: every row explained here, no Spark job
   but the one that fetches the rows.
2. :class:`ExplainFromPlan`: no bad rows set aside, no keys, the times read here, and
   the row groups fit (:func:`~evtime.engine.adjust.parts.plan_of`): no search job.
3. :class:`ExplainInFiles`: no bad rows set aside, no keys, the times read here, more
   than one row group (:func:`~evtime.engine.adjust.parts.suits_files`).
4. :class:`ExplainInArrivalParts`: everything else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from evtime.columns import ROUTE
from evtime.engine import present
from evtime.engine.adjust import core, in_place, parts
from evtime.engine.scan import AsRead, arrival_range, sort_in_parts
from evtime.steps import routes


@dataclass(frozen=True)
class Facts:
    """What the choice needs to know of a run, before any Spark job."""

    in_driver: bool = False  # read in this process (the rows handed to Spark as Arrow)
    rejected: bool = False  # bad rows set aside (--bad-rows discard): not every row arrives
    discards: bool = False  # --discards asked
    emit_bounds: bool = False  # --emit-bounds asked
    state: bool = False  # --state DIR

    @property
    def in_order(self) -> bool:
        """Only the keep flag is needed (not the reference time), in Spark tasks."""
        return not (self.discards or self.emit_bounds or self.in_driver)


@dataclass(frozen=True)
class Run:
    """What a path reads: the rows read (``arrivals``), the input as read, the evtimes'
    bounds when known, the shared directory (made when called), what was found while
    Spark started, and whether every row has the same chunk."""

    arrivals: int = 0
    as_read: AsRead | None = None
    limits: tuple[int, int] | None = None
    where: Callable[[], str] = str
    early: object = None
    one_chunk: bool = False


def route_of(batch: pa.RecordBatch) -> pa.Array:
    """A row's route from its keep flag (in Arrow, where the parts are written)."""
    kept = batch.column(core.KEEP).to_numpy(zero_copy_only=False)
    return routes(~kept, ["out", "discard"])


@dataclass(frozen=True)
class PrefixScan:
    """:func:`~evtime.engine.adjust.core.classify`, routed by the keep flag, then
    :func:`~evtime.engine.adjust.core.order`."""

    spec: core.AdjustSpec
    run: Run
    name = "prefix scan"

    def adjust(self, df: DataFrame) -> tuple[DataFrame, object]:
        cl = core.classify(df, self.spec, one_chunk=self.run.one_chunk, as_read=self.run.as_read)
        return cl, None

    def routed(self, df: DataFrame, step: object) -> tuple[DataFrame, bool]:
        """``df`` with its route column, and whether ``step`` must route the rows
        (:func:`route_of`) as it finds their keep flag."""
        if step is None:
            return df.withColumn(ROUTE, F.when(F.col(core.KEEP), "out").otherwise("discard")), False
        return df.withColumn(ROUTE, F.lit(None).cast("string")), not isinstance(self, InPlace)

    def ordered(self, df: DataFrame) -> DataFrame:
        return core.order(df, self.run.limits)


@dataclass(frozen=True)
class InOrder(PrefixScan):
    """:func:`~evtime.engine.adjust.core.classify_in_order`: the keep flag found as each
    part of the output is written (the step, routed by :func:`route_of`)."""

    name = "in order"

    def adjust(self, df: DataFrame) -> tuple[DataFrame, object]:
        run, found = self.run, self.run.early
        carry = found.carry if found is not None else None
        return core.classify_in_order(df, self.spec, run.limits, run.as_read, carry)

    def ordered(self, df: DataFrame) -> DataFrame:
        return df


@dataclass(frozen=True)
class InPlace(InOrder):
    """:func:`~evtime.engine.adjust.in_place.ordered_in_place`: its rows and step, made
    when chosen (``placed``)."""

    placed: tuple = ()
    name = "in place"

    def adjust(self, df: DataFrame) -> tuple[DataFrame, object]:
        return self.placed

    def routed(self, df: DataFrame, step: object) -> tuple[DataFrame, bool]:
        """``df`` as it is: the step routes every row (the rows may be read where they
        are written, not a DataFrame)."""
        return df, False


def choose(spec: core.AdjustSpec, facts: Facts, df: DataFrame, run: Run) -> PrefixScan:
    """adjust's path for ``df`` (the rows as read), by the table of this module."""
    if facts.state:
        return PrefixScan(spec, run)  # (then carry_on, in the state run)
    if facts.in_order and not facts.rejected:
        placed = in_place.ordered_in_place(
            df, spec, run.arrivals, run.as_read, run.limits, run.where, run.early
        )
        if placed is not None:
            return InPlace(spec, run, placed)
    if facts.in_order:
        return InOrder(spec, run)
    return PrefixScan(spec, run)


@dataclass(frozen=True)
class ExplainHere:
    """The prefix scan, then :func:`~evtime.engine.adjust.core.explain` (for bounds
    beyond int64)."""

    spec: core.AdjustSpec
    run: Run
    sources: Sequence[str]
    own: Sequence[tuple[str, str]]
    name = "prefix scan"

    def explain(self, df: DataFrame) -> tuple[DataFrame, object]:
        spec, run = self.spec, self.run
        cl = core.classify(df, spec, one_chunk=run.one_chunk, as_read=run.as_read)
        frame = core.explain(cl, spec, list(self.sources), run.limits)
        frame = present.explain_frame(frame, ("ref",), self.own)
        discarded = F.col("decision") == present.DISCARDED
        frame = frame.withColumn(ROUTE, F.when(discarded, "discard").otherwise("out"))
        return sort_in_parts(frame, "arrival", limits=arrival_range(run.arrivals)), None


@dataclass(frozen=True)
class ExplainInParts(ExplainHere):
    """:func:`~evtime.engine.adjust.parts.by_arrival` for ``good`` arrivals, then the way
    :func:`choose_in_parts` picks (the prefix scan when bounds leave int64); with bad rows
    set aside, the explain columns the step makes are added to the rows as nulls (the bad
    rows bring their own)."""

    good: Callable[[], int] = int
    rejected: bool = False
    here: bool = False  # read in this process
    name = "in parts"

    def explain(self, df: DataFrame) -> tuple[DataFrame, object]:
        spec, run = self.spec, self.run
        try:
            arrivals = self.good()
            made = parts.by_arrival(
                df,
                spec,
                self.sources,
                self.own,
                arrivals,
                run.limits,
                run.as_read,
                run.early,
                numbered=not self.here,  # (all here: numbered by the step)
            )
            way = choose_in_parts(made, in_place=not self.rejected, here=self.here)
            frame, step = way.explain(made, run.where)  # (the ways that share files make
            # their directory: none for the rows explained here or from the plan)
        except OverflowError:  # (times and range beyond int64 ns)
            return super().explain(df)
        if self.rejected:  # (null here: made by the step)
            fields = step.schema(frame.schema).fields
            nulls = {f.name: F.lit(None).cast(f.dataType) for f in fields}
            frame = frame.withColumns({c: v for c, v in nulls.items() if c not in frame.columns})
        return frame, step


@dataclass(frozen=True)
class ExplainAllHere:
    """:func:`~evtime.engine.adjust.parts.all_here`: every row explained in this process."""

    name = "all here"

    def explain(self, made: parts.ByArrival, where: Callable[[], str]) -> tuple[DataFrame, object]:
        return parts.all_here(made)


@dataclass(frozen=True)
class ExplainFromPlan:
    """:func:`~evtime.engine.adjust.parts.from_plan`: each row group explained where it is
    read, from the plan of the rows near the groups' edges."""

    plan: object
    name = "from the plan"

    def explain(self, made: parts.ByArrival, where: Callable[[], str]) -> tuple[DataFrame, object]:
        return parts.from_plan(made, self.plan)


@dataclass(frozen=True)
class ExplainInFiles:
    """:func:`~evtime.engine.adjust.parts.in_files`: the search's job leaves its results
    by row group, then each row group is explained where it is read."""

    name = "in files"

    def explain(self, made: parts.ByArrival, where: Callable[[], str]) -> tuple[DataFrame, object]:
        return parts.in_files(made, where())


@dataclass(frozen=True)
class ExplainInArrivalParts:
    """:func:`~evtime.engine.adjust.parts.in_arrival_parts`: the search and the rows
    shuffled into parts of arrivals, explained as they are written."""

    name = "in parts of arrivals"

    def explain(self, made: parts.ByArrival, where: Callable[[], str]) -> tuple[DataFrame, object]:
        return parts.in_arrival_parts(made, where())


def choose_in_parts(
    made: parts.ByArrival, in_place: bool, here: bool = False
) -> ExplainAllHere | ExplainFromPlan | ExplainInFiles | ExplainInArrivalParts:
    """How :class:`ExplainInParts` explains the rows ``made``, by the table of this module
    (``in_place``: no bad rows set aside, every row of ``df`` an arrival as read;
    ``here``: read in this process)."""
    if here:
        return ExplainAllHere()
    if in_place:
        plan = parts.plan_of(made)
        if plan is not None:
            return ExplainFromPlan(plan)
        if parts.suits_files(made):
            return ExplainInFiles()
    return ExplainInArrivalParts()


def choose_explain(
    spec: core.AdjustSpec,
    facts: Facts,
    run: Run,
    sources: Sequence[str],
    own: Sequence[tuple[str, str]],
    good: Callable[[], int],
) -> ExplainHere:
    """explain adjust's path, by the table of this module (``good()``: the arrivals, the
    rows read but the bad ones set aside)."""
    return ExplainInParts(spec, run, sources, own, good, facts.rejected, facts.in_driver)
