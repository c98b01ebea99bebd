"""explain adjust without a search job: each row group explained where it is read, from
what one pass over the times read here tells (no keys; local Parquet whose row groups
each move the reference time by more than range*unit, as in
:mod:`evtime.engine.adjust_in_place`).

The task of row group ``g`` finds, for its own rows, the reference time (from the greatest
evtime before the group, ``B[g]``), the keep flag, and the arrival that releases each kept
row: the first arrival whose reference time passes ``evtime + width``, in the group itself
or else among the first rows of the next group (those whose reference time before them is
at most ``A[g] + width``, ``A[g]`` the greatest evtime up to the group's end: the next
group passes it).  Output positions: a row of the gap of ``g`` (see
:mod:`evtime.engine.adjust_in_place`) comes after the kept rows of every group before and
the group's own rows in zone ``g``, then by its rank in the gap; a zone row's position is
found here, with the zone's rows from both groups.  The pass gives those few rows (zones,
next groups' first rows) and the kept rows per group; the tasks check that they find the
same rows in their zones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from evtime.engine.adjust import ARRIVAL, ExplainInPlace, tops_before
from evtime.engine.adjust_in_place import near_edges
from evtime.engine.running import NONE, values_of
from evtime.engine.scan import ArrivalsHere, Times
from evtime.io.reader import PART

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
    :func:`~evtime.engine.adjust_in_place.fits`); ``hi``: the greatest evtime).  None when
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


@dataclass(frozen=True)
class ExplainedInPlace(ExplainInPlace):
    """:class:`~evtime.engine.adjust.ExplainInPlace` without the search's files: each row
    group finds its own rows' releasing arrivals and output positions from ``plan``
    (:func:`explain_plan`)."""

    plan: ExplainPlan | None = field(default=None, compare=False)

    def __call__(self, part: pa.Table):
        yield from self.explained(part, ())

    def searched(self, rows, evt, before, known, ref, results):
        from evtime.errors import EvtimeError, in_task

        plan, width = self.plan, self.spec.width
        group = rows.column(PART)[0].as_py()
        last = len(self.starts) - 1
        arrival = values_of(rows.column(ARRIVAL))
        ref_before = np.where(known, before, NONE)
        keep, low, high = near_edges(evt, ref_before, group, self.tops, plan.upto, width)
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
