"""adjust's rows put in time order where they are read: no shuffle, no sort in Spark.

Without keys, the reference time before a Parquet row group (or slice, see
:func:`~evtime.engine.adjust.in_place_groups`) is the greatest evtime of the groups before
it, ``B[g]``, known from one pass over the times read here; the running maximum inside
the group is the task's own.  Every row group's kept rows have evtime in
``[B[g] - width, B[g + 1]]``, so the output, in (evtime, arrival) order, is cut on the
time line into:

* the *gap* of group ``g``, evtime in ``(B[g], B[g + 1] - width)``: rows of ``g`` alone
  (the earlier groups' evtimes are at most ``B[g]``, the later groups' kept rows at least
  ``B[g + 1] - width``), sorted by the task that read ``g``;
* the *zone* ``k`` (``1 <= k < groups``), evtime in ``[B[k] - width, B[k]]``: kept rows of
  groups ``k - 1`` and ``k`` only, when every group after the first moves the reference
  time by more than ``width`` (``B[k + 1] - B[k] > width``; checked before the job, else
  the shuffled path runs).  Each task leaves its rows of the zones next to it in a file;
  this process merges the two files of a zone (a few rows: those within ``width`` of a
  group's edge) as soon as both tasks are done, and adds the zone as the part between the
  two gaps.

Parts: the gap of group ``g`` is part ``2g``, zone ``k`` part ``2k - 1``
(:class:`Zones`), all added to the output in order as they are done
(:class:`~evtime.io.writer.Early`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from evtime.columns import PART, SEQ, T
from evtime.engine.adjust.core import (
    ARRIVAL,
    EVT,
    AdjustSpec,
    early_carry,
    in_place_groups,
    suits_in_place,
    tops_before,
)
from evtime.engine.running import NONE, values_of
from evtime.engine.saturate import floor_np
from evtime.engine.scan import ArrivalsHere, AsRead, Carry, Times, arrival_of, arrivals_here
from evtime.steps import EachPart

ROUTES = ["out", "discard"]  # the routes this step gives (by number)


def fits(here: ArrivalsHere | None, arrivals: int, row_groups: int, width: int) -> bool:
    """Whether ``here`` (:func:`~evtime.engine.scan.arrivals_here` with the groups) suits
    :class:`OrderedInPlace`: the groups suit explain's in-place path (more than one row
    group, none above :data:`~evtime.engine.adjust.core.IN_PLACE_ROWS` rows), every one has a
    time, and each after the first but the last moves the reference time by more than
    ``width`` (the zones between gaps are then apart, each of two groups' rows)."""
    if here is None or not suits_in_place(here, arrivals, row_groups):
        return False
    tops = here.group_tops
    if (tops == NONE).any():
        return False
    return _apart((int(t) for t in tops), width)  # (Python ints: no overflow)


def _apart(tops: Iterable[int], width: int) -> bool:
    """Whether each group after the first but the last moves the greatest of ``tops``
    (per group, in order) by more than ``width``."""
    upto = list(accumulate(tops, max))
    return all(b - a > width for a, b in zip(upto[:-2], upto[1:-1], strict=True))


def may_fit(groups: Sequence[tuple[int, int | None]], unit: int, width: int) -> bool:
    """False when the Parquet footers' greatest time per row group (``groups``:
    :attr:`~evtime.io.reader.Footing.groups`) already show that the groups do not fit
    (:func:`fits`: one after the first but the last does not move the reference time by
    more than ``width``), so that no pass over the times is made to find it; True
    otherwise (a group without its greatest time: the pass tells).  Slices of a row group
    only cut its move into smaller ones: what does not fit whole does not fit sliced."""
    tops = [top for _, top in groups]
    if any(top is None for top in tops):
        return True
    return _apart((t - t % unit if unit > 1 else t for t in tops), width)


def near_edges(
    evt: np.ndarray,
    ref_before: np.ndarray,
    group: np.ndarray | int,
    before: np.ndarray,
    upto: np.ndarray,
    width: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rule every in-place step keeps to, per row of row group ``group`` (one for all,
    or one per row): whether it is kept (evtime at least its reference time before it,
    ``ref_before``, minus ``width``; :data:`NONE`, the first arrival: kept), and whether
    a kept row is in the zone below its group (evtime at most ``before[group]``, the
    greatest evtime of the groups before; none in the first group) or in the zone above it
    (evtime at least ``upto[group] - width``, ``upto`` the greatest evtime up to each
    group's end; none in the last).  :func:`fits` makes the two zones of a group apart."""
    keep = evt >= np.where(ref_before == NONE, evt, ref_before) - width
    low = keep & (group >= 1) & (evt <= before[group])
    high = keep & (group < len(upto) - 1) & (evt >= upto[group] - width)
    return keep, low, high


def ordered_in_place(
    df: DataFrame,
    spec: AdjustSpec,
    arrivals: int,
    as_read: AsRead | None,
    limits: tuple[int, int] | None,
    where: Callable[[], str],
    early: EarlyAdjust | None = None,
) -> tuple[DataFrame, OrderedInPlace] | None:
    """adjust's output rows (no keys, no ``--discards``) ordered where they are read, when
    ``df`` is ``arrivals`` rows as Spark's Parquet reader reads them (every one an arrival)
    and the pass over their times (``early``'s, or made now from ``as_read``) says it can
    be (:func:`fits`): the rows as read, and the step the writer runs on each row group
    (:class:`OrderedInPlace`, which also makes :data:`EVT` in Arrow, so the rows may as
    well be read by the writer's tasks themselves; its zone files go to ``where()``, a
    directory the tasks and this process share, made only then).  None: take the shuffled
    path."""
    if spec.keys or as_read is None or as_read.times is None or len(as_read.groups) < 2:
        return None
    if limits is None or limits[0] - spec.width < NONE:  # (bounds stay in int64)
        return None
    if early is not None and early.arrivals == arrivals:
        here = early.here  # (None: they did not fit)
    else:
        firsts = in_place_groups(as_read.groups, as_read.file_rows)
        here = arrivals_here(as_read.times, spec.unit_ns, arrivals, firsts)
    if not fits(here, arrivals, len(as_read.groups), spec.width):
        return None
    tops = here.group_tops
    step = OrderedInPlace(
        spec.width,
        spec.unit_ns,
        where(),
        here.before,
        here.group_starts,
        tops_before(tops),
        np.maximum.accumulate(tops),
    )
    # (EVT typed, its values made by the step: nothing computed for it in Spark)
    none = F.lit(None).cast("long")
    return df.withColumns({EVT: none, PART: F.lit(-1).cast("long")}), step


@dataclass(frozen=True)
class EarlyAdjust:
    """What adjust (no keys) takes from one pass over the times read here, found while
    Spark starts: the groups for :func:`ordered_in_place` (``here``, when they fit) or
    else the search's carry for the shuffled path
    (:func:`~evtime.engine.adjust.core.early_carry`)."""

    arrivals: int
    here: ArrivalsHere | None
    carry: Carry | None


def early_adjust(spec: AdjustSpec, known) -> EarlyAdjust | None:
    """:class:`EarlyAdjust` from what is ``known`` of the input (a
    :class:`~evtime.io.reader.Footing`)."""
    if spec.keys:
        return None
    groups = known.groups or ()
    if len(groups) >= 2 and may_fit(groups, spec.unit_ns, spec.width):
        firsts = in_place_groups(groups, known.file_rows)
        here = arrivals_here(known.times, spec.unit_ns, known.good, firsts)
        if fits(here, known.good, len(groups), spec.width):
            return EarlyAdjust(known.good, here, None)
    return EarlyAdjust(known.good, None, early_carry(spec, known))


def _zone_path(where: str, zone: int, group: int) -> str:
    from evtime.io import staging

    return staging.join(where, f"zone-{zone:06d}-{group:06d}")


@dataclass(frozen=True)
class Zones(EachPart):
    """The writer's ``n`` parts of :class:`OrderedInPlace` (``(n + 1) / 2`` row groups),
    each wherever Spark holds it: part ``2g`` the gap of group ``g``, written by its task;
    part ``2k - 1`` zone ``k``, made here (:meth:`made`) from the files the tasks of groups
    ``k - 1`` and ``k`` left in ``where``, once the second is done (:meth:`waits_for`)."""

    where: str = ""

    def waits_for(self, i: int) -> int:
        """The part whose task must be done before part ``i`` is added."""
        return i + 1 if i % 2 else i

    def made(self, i: int) -> pa.Table | None:
        """Part ``i``'s rows when this process makes them (a zone: its two groups' rows,
        by (evtime, arrival), routed ``out``), else None."""
        from evtime.errors import OutputError
        from evtime.io import staging

        if i % 2 == 0:
            return None
        zone = (i + 1) // 2
        tables = []
        for group in (zone - 1, zone):
            path = _zone_path(self.where, zone, group)
            try:
                if staging.is_url(path):
                    data = pa.BufferReader(staging.get(path))
                    tables.append(pa.ipc.open_file(data).read_all())
                else:
                    with pa.OSFile(path) as src:
                        tables.append(pa.ipc.open_file(src).read_all())
            except FileNotFoundError:
                raise OutputError(
                    f"a Spark task left no {path}: on a cluster, set --staging (or "
                    "EVTIME_STAGING) to a URL or directory this machine and every executor reach"
                ) from None
            staging.remove(path)
        rows = pa.concat_tables(tables)
        order = np.lexsort((values_of(rows.column(SEQ)), values_of(rows.column(EVT))))
        return _routed(rows.take(order), np.zeros(rows.num_rows, np.int32))


def _routed(rows: pa.Table, route: np.ndarray) -> pa.Table:
    from evtime.columns import ROUTE
    from evtime.steps import routes

    if ROUTE in rows.column_names:
        rows = rows.drop_columns([ROUTE])
    return rows.append_column(ROUTE, routes(route, ROUTES))


@dataclass(frozen=True)
class OrderedInPlace:
    """The writer's step for :func:`ordered_in_place`, on each row group (or slice) whole,
    as read: numbers it (:meth:`numbered`: part ``2g``; and the evtime, :data:`EVT`, the
    time floored to ``unit`` ns), keeps the rows at or above their
    reference time minus ``width`` (the greatest evtime of the groups before, ``before``,
    and of the group's earlier rows), yields the gap's rows sorted by (evtime, arrival) and
    the discarded rows (routed ``discard``), and leaves the rows of the zones on each side
    in files in ``where`` (:class:`Zones`).  ``files_before``: the arrivals of the files
    before each file (:attr:`~evtime.engine.scan.ArrivalsHere.before`); ``starts``: each
    group's first arrival; ``upto``: the greatest evtime up to each group's end."""

    width: int
    unit: int
    where: str
    files_before: np.ndarray = field(compare=False)
    starts: np.ndarray = field(compare=False)
    before: np.ndarray = field(compare=False)
    upto: np.ndarray = field(compare=False)

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads (beside the sinks')."""
        return (T, SEQ)

    @property
    def ranges(self) -> Zones:
        return Zones(2 * len(self.starts) - 1, self.where)

    def from_read(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Its rows from a batch as the input is read: the same (the rows may be read by
        the writer's tasks themselves, :class:`evtime.io.writer.TaskRows`)."""
        return batch

    def numbered(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch with each row's part (``2g``, ``g`` its row group) and evtime."""
        arrival = arrival_of(self.files_before, values_of(batch.column(SEQ)))
        group = np.searchsorted(self.starts, arrival, "right") - 1
        cols = dict(zip(batch.schema.names, batch.columns, strict=True))
        cols[PART] = pa.array(2 * group, pa.int64())
        if batch.column(T).null_count:
            from evtime.errors import EvtimeError, in_task

            raise in_task(EvtimeError("internal error: a row without a time in place"))
        cols[EVT] = pa.array(floor_np(values_of(batch.column(T)), self.unit), pa.int64())
        return pa.RecordBatch.from_pydict(cols)

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        group = part.column(PART)[0].as_py() // 2
        evt = values_of(part.column(EVT))
        # the reference time before each row: the groups' before, then the group's own
        ref = np.empty(len(evt), np.int64)
        ref[0] = self.before[group]  # (NONE in the first group: the first arrival)
        ref[1:] = np.maximum(np.maximum.accumulate(evt)[:-1], ref[0])
        keep, low, high = near_edges(evt, ref, group, self.before, self.upto, self.width)
        kept = np.flatnonzero(keep)
        kept = kept[np.argsort(evt[kept], kind="stable")]  # (by evtime, then arrival)
        if group:
            self._leave(group, group, part.take(kept[low[kept]]))
        if group < len(self.upto) - 1:
            self._leave(group + 1, group, part.take(kept[high[kept]]))
        gap = part.take(kept[~(low | high)[kept]])
        yield from _routed(gap, np.zeros(gap.num_rows, np.int32)).to_batches()
        late = np.flatnonzero(~keep)
        if len(late):
            yield from _routed(part.take(late), np.ones(len(late), np.int32)).to_batches()

    def _leave(self, zone: int, group: int, rows: pa.Table) -> None:
        """The group's rows of a zone, in a file (written whole under another name, then
        renamed: a task run again writes the same rows)."""
        from evtime.io import atomic, staging

        path = _zone_path(self.where, zone, group)
        if staging.is_url(path):  # (in memory, then one PUT: a zone is a few rows)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_file(sink, rows.schema) as out:
                out.write_table(rows)
            staging.put(path, sink.getvalue().to_pybytes())
            return
        with (
            atomic.replacing(path) as tmp,
            pa.OSFile(tmp, "wb") as sink,
            pa.ipc.new_file(sink, rows.schema) as out,
        ):
            out.write_table(rows)


MOST_HERE = 1 << 18  # the most zone and next-group rows the pass keeps (else: the search job)
TOP = (1 << 63) - 1


@dataclass(frozen=True)
class ExplainPlan:
    """What :func:`explain_plan` found, per row group ``g``: ``gap_before``, the output
    position before the gap's first row; ``zone_arrivals`` / ``zone_positions``, its rows
    in zones (by arrival) and their output positions; ``next_refs`` / ``next_arrivals``:
    the first rows of group ``g + 1`` whose reference time before them is at most
    ``A[g] + width``, their reference time after them (ascending) and arrival."""

    upto: np.ndarray = field(compare=False)
    gap_before: np.ndarray = field(compare=False)
    zone_arrivals: list[np.ndarray] = field(compare=False)
    zone_positions: list[np.ndarray] = field(compare=False)
    next_refs: list[np.ndarray] = field(compare=False)
    next_arrivals: list[np.ndarray] = field(compare=False)


def _split(group: np.ndarray, groups: int, *arrays: np.ndarray) -> list[list[np.ndarray]]:
    """``arrays`` (rows sorted by ``group``, then arrival) cut per group 0..groups-1."""
    cuts = np.searchsorted(group, np.arange(groups + 1), "left")
    return [[a[cuts[g] : cuts[g + 1]] for g in range(groups)] for a in arrays]


def explain_plan(
    times: Times, unit: int, width: int, arrivals: int, here: ArrivalsHere, hi: int
) -> ExplainPlan | None:
    """The :class:`ExplainPlan` of ``arrivals`` rows from a second pass over their times
    (``here``: the first's, with the row groups, which fit (see
    :func:`~evtime.engine.adjust.in_place.fits`); ``hi``: the greatest evtime).  None when
    the rows it keeps would pass :data:`MOST_HERE`, a time is null, bounds leave int64, or
    the last group does not move the reference time by more than ``width``."""
    starts, tops = here.group_starts, here.group_tops
    groups = len(starts)
    before, upto = tops_before(tops), np.maximum.accumulate(tops)
    if hi + width + 1 > TOP or int(upto[-1]) - int(upto[-2]) <= width:
        return None
    kept = np.zeros(groups, np.int64)
    zone: list[tuple[np.ndarray, ...]] = []  # (zone, evtime, arrival, group)
    nxt: list[tuple[np.ndarray, ...]] = []  # (group before, ref after, arrival)
    held, carry, n = 0, NONE, 0
    for _, t in times():
        if not len(t):
            continue
        if (t == NONE).any():
            return None
        evt = t - np.mod(t, unit) if unit > 1 else t
        arrival = np.arange(n + 1, n + len(t) + 1, dtype=np.int64)
        g = np.searchsorted(starts, arrival, "right") - 1
        ref = np.maximum(np.maximum.accumulate(evt), carry)  # (after each row)
        ref_before = np.r_[carry, ref[:-1]]
        keep, low, high = near_edges(evt, ref_before, g, before, upto, width)
        kept += np.bincount(g[keep], minlength=groups)
        first = (g >= 1) & (ref_before <= upto[np.maximum(g - 1, 0)] + width)
        for rows, to in ((low, g), (high, g + 1)):
            if rows.any():
                zone.append((to[rows], evt[rows], arrival[rows], g[rows]))
        if first.any():
            nxt.append((g[first] - 1, ref[first], arrival[first]))
        held += int(low.sum() + high.sum() + first.sum())
        if held > MOST_HERE:
            return None
        carry, n = ref[-1], n + len(t)
    if n != arrivals:
        return None
    # zone rows by (zone, evtime, arrival): their positions
    if zone:
        to, evt, arrival, g = (np.concatenate(c) for c in zip(*zone, strict=True))
    else:
        to = evt = arrival = g = np.zeros(0, np.int64)
    order = np.lexsort((arrival, evt, to))
    to, arrival, g = to[order], arrival[order], g[order]
    kept_before = np.r_[0, np.cumsum(kept)]
    low_of = np.bincount(g[to == g], minlength=groups)  # per group: its rows in its own zone
    high_of = np.bincount(g[to != g], minlength=groups)  # in the next group's zone
    zone_start = kept_before[:groups] - np.r_[0, high_of[:-1]]  # (zone k: before gap k)
    rank = np.arange(len(to)) - np.searchsorted(to, to, "left") + 1
    position = zone_start[to] + rank
    # per group, its zone rows by arrival
    order = np.lexsort((arrival, g))
    zone_arrivals, zone_positions = _split(g[order], groups, arrival[order], position[order])
    if nxt:
        of, refs, arrivals_next = (np.concatenate(c) for c in zip(*nxt, strict=True))
    else:
        of = refs = arrivals_next = np.zeros(0, np.int64)
    next_refs, next_arrivals = _split(of, groups, refs, arrivals_next)
    return ExplainPlan(
        upto,
        kept_before[:groups] + low_of,
        zone_arrivals,
        zone_positions,
        next_refs,
        next_arrivals,
    )


def numbered_by_group(starts: np.ndarray, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with each row's part of arrivals: its row group (``starts``: their first
    arrivals)."""
    group = np.searchsorted(starts, values_of(batch.column(ARRIVAL)), "right") - 1
    cols = dict(zip(batch.schema.names, batch.columns, strict=True))
    cols[PART] = pa.array(group, pa.int64())
    return pa.RecordBatch.from_pydict(cols)


@dataclass(frozen=True)
class FromPlan:
    """The search's results for explain's step, found by each row group itself from
    ``plan`` (:func:`explain_plan`): no search job, no files.  ``starts``: the row groups'
    first arrivals."""

    starts: np.ndarray = field(compare=False)
    plan: ExplainPlan = field(compare=False)

    READS = ()

    def numbered(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return numbered_by_group(self.starts, batch)

    def results(self, step, part: pa.Table) -> tuple[pa.Table, tuple]:
        return part, ()

    def searched(self, step, rows, evt, before, known, ref, results):
        """Per row of a row group: the least arrival above it (-1: none), whether it is
        kept and its output position, from the plan (``step``: the explainer)."""
        from evtime.errors import EvtimeError, in_task

        plan, width = self.plan, step.spec.width
        group = rows.column(PART)[0].as_py()
        last = len(self.starts) - 1
        arrival = values_of(rows.column(ARRIVAL))
        ref_before = np.where(known, before, NONE)
        keep, low, high = near_edges(evt, ref_before, group, step.tops, plan.upto, width)
        # released by: the first arrival whose reference time passes evtime + width
        # (kept rows: none before them), here or among the next group's first rows
        above = evt + width
        at = np.searchsorted(ref, above, "right")
        least = np.full(len(evt), -1, np.int64)
        here = at < len(ref)
        least[here] = arrival[at[here]]
        if group < last:
            refs, arrivals = plan.next_refs[group], plan.next_arrivals[group]
            k = np.searchsorted(refs, above[~here], "right")
            least[~here] = np.where(k < len(refs), arrivals[np.minimum(k, len(refs) - 1)], -1)
        # output positions: the gap's rows by rank; the zones' from the plan
        zoned = low | high
        pos = np.zeros(len(evt), np.int64)
        gap = np.flatnonzero(keep & ~zoned)
        gap = gap[np.argsort(evt[gap], kind="stable")]
        pos[gap] = plan.gap_before[group] + np.arange(1, len(gap) + 1)
        mine, where = plan.zone_arrivals[group], plan.zone_positions[group]
        if int(zoned.sum()) != len(mine) or not np.array_equal(arrival[zoned], mine):
            raise in_task(
                EvtimeError(
                    f"internal error: row group {group} has {int(zoned.sum())} rows near "
                    f"its edges, the pass over the times {len(mine)}"
                )
            )
        pos[zoned] = where
        return least, keep, pos
