"""Reference model of ``evtime merge`` (SPEC §3; seeds 004 "UNION ALL / named streams" and
001 "Apama definitive time").

A plain sequential simulation over arrivals in processing order:

* **Processing order.** When every row has ``arrival_time``: all sources' rows sorted by
  ``(arrival_time, source, row-in-source)``. When none has one: the sources one after the
  other (all of source 0 in row order, then all of source 1, ...). Mixing is an error.
  Without arrival times / ``wait`` / ``join_leave`` the *released rows* do not depend on the
  interleaving (see ``merge_output``), only the explain columns (release points, ``bound``).
* **Own bound** of a source: a data row is a non-strict bound at its own (adjusted) time; a
  bound row at ``t`` is a bound at ``t`` (``t + tick`` with ``strict_bounds``). Never lowered.
  With ``unit_ns``/``range_n`` every source first goes through ``adjust``: a data row's time is
  ``floor(t/unit)*unit`` and the source's bound is ``ref - range*unit``; a bound row there
  gives ``floor(b/unit)*unit`` (the least adjusted time a later row can have).
* **Effective bound** of a source = ``max(own bound, now - wait)`` (``now`` = the current
  arrival's ``arrival_time``; the clock applies to every attached source).
* **Attached sources**: all of them, from start to end (also a source with no rows at all);
  with ``join_leave`` a source attaches at its first arrival (even if that row is discarded)
  and leaves right after its last arrival has been processed.
* **D** (definitive time) after each arrival = min over attached sources of their effective
  bounds; +inf when none is attached. Reported as ``None`` when infinite (+inf or -inf).
  Held rows with ``evtime <= D`` are released, ordered ``(evtime, arrival)``.
  ``B`` = largest evtime released so far (kept after every source has left).
* **Discard** a data row when ``evtime < own bound`` ('own bound'), ``evtime < now - wait``
  ('wait'), or ``evtime < B`` ('stream bound'); all reasons that apply are listed. A discarded
  row advances nothing.
* End of input: all sources leave; everything held is released (``released_by`` None, as
  evtime writes it: null; decision 'released' and an ``output_pos`` tell it from a discard).

Oracle for the Spark engine; clarity over speed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .adjust import floor_to, iso

INF = math.inf


@dataclass
class Arrival:
    source: int  # 0-based source index (source order = order given)
    time: int  # event time ns (for a bound row: the bound's time)
    is_bound: bool = False  # bound-marker row (punctuation)
    arrival_time: int | None = None  # wall-clock arrival ns; None when not given


@dataclass
class MergeRow:
    arrival: int  # 1-based processing order
    source: int
    time: int
    evtime: int  # = time unless unit/range given (then adjusted)
    decision: str  # 'released' | 'discarded' | 'bound'
    bound: int | None  # definitive time D after this arrival (None = infinite / undefined)
    released_by: int | None  # None: not released, or released at the end of the input
    output_pos: int | None
    reason: str | None  # names the broken promise: 'own bound' / 'stream bound' / 'wait'


def processing_order(arrivals_per_source: list[list[Arrival]]) -> list[tuple[int, int]]:
    """(source, row index in source) of every arrival, in processing order (see module doc)."""
    items = [(s, j) for s, src in enumerate(arrivals_per_source) for j in range(len(src))]
    for s, j in items:
        if (said := arrivals_per_source[s][j].source) != s:
            raise ValueError(f"row {j} of source {s} says source={said}")
    timed = [arrivals_per_source[s][j].arrival_time is not None for s, j in items]
    if all(timed):
        items.sort(key=lambda sj: (arrivals_per_source[sj[0]][sj[1]].arrival_time, *sj))
    elif any(timed):
        raise ValueError("arrival_time must be given for every row or for none")
    return items


def _simulate(arrivals_per_source, strict_bounds, tick, wait, join_leave, unit_ns, range_n):
    if range_n is not None and unit_ns is None:
        raise ValueError("range_n needs unit_ns")
    width = (range_n or 0) * unit_ns if unit_ns is not None else 0
    order = processing_order(arrivals_per_source)
    if wait is not None and any(arrivals_per_source[s][j].arrival_time is None for s, j in order):
        raise ValueError("wait needs arrival times")
    n = len(arrivals_per_source)
    last = {s: i for i, (s, _) in enumerate(order, start=1)}  # last arrival of each source
    own: list[float | int] = [-INF] * n  # own (non-strict) bound of each source
    ref: list[float | int] = [-INF] * n  # adjust reference time (unit/range only)
    attached: set[int] = set() if join_leave else set(range(n))
    held: list[MergeRow] = []
    B: float | int = -INF
    rows: list[MergeRow] = []
    pos = 0

    def release(upto: float | int, by: int | None) -> None:
        nonlocal held, B, pos
        out = sorted((r for r in held if r.evtime <= upto), key=lambda r: (r.evtime, r.arrival))
        held = [r for r in held if r.evtime > upto]
        for r in out:
            pos += 1
            r.released_by, r.output_pos = by, pos
            B = max(B, r.evtime)

    for i, (s, j) in enumerate(order, start=1):
        a = arrivals_per_source[s][j]
        now = a.arrival_time
        attached.add(s)  # no-op unless join_leave
        ev = floor_to(a.time, unit_ns) if unit_ns is not None else a.time
        row = MergeRow(i, s, a.time, ev, "bound", None, None, None, None)
        rows.append(row)
        if a.is_bound:
            b = a.time + (tick if strict_bounds else 0)
            own[s] = max(own[s], floor_to(b, unit_ns) if unit_ns is not None else b)
        else:
            why = []
            if ev < own[s]:
                why.append(f"its source's own bound {iso(own[s])}")
            if wait is not None and ev < now - wait:
                why.append(f"the wait: now {iso(now)} - wait {wait}ns = {iso(now - wait)}")
            if ev < B:
                why.append(f"the stream bound {iso(B)} (largest time released)")
            if why:
                row.decision = "discarded"
                row.reason = f"evtime {iso(ev)} is below " + "; and below ".join(why)
            else:
                row.decision = "released"
                held.append(row)
                if unit_ns is not None:
                    ref[s] = max(ref[s], ev)
                    own[s] = max(own[s], ref[s] - width)
                else:
                    own[s] = max(own[s], ev)
        if join_leave and last[s] == i:
            attached.discard(s)  # leaves right after its last arrival
        lag = now - wait if wait is not None else -INF
        D = min((max(own[x], lag) for x in attached), default=INF)
        release(D, i)
        row.bound = D if math.isfinite(D) else None
    release(INF, None)  # the end of the input
    return rows, order


def merge(
    arrivals_per_source: list[list[Arrival]],
    *,
    strict_bounds: bool = False,
    tick: int = 1,
    wait: int | None = None,
    join_leave: bool = False,
    unit_ns: int | None = None,
    range_n: int | None = None,
) -> list[MergeRow]:
    """One MergeRow per arrival, in processing order (see module doc)."""
    return _simulate(arrivals_per_source, strict_bounds, tick, wait, join_leave, unit_ns, range_n)[
        0
    ]


def merge_output(
    arrivals_per_source: list[list[Arrival]],
    *,
    strict_bounds: bool = False,
    tick: int = 1,
    wait: int | None = None,
    join_leave: bool = False,
    unit_ns: int | None = None,
    range_n: int | None = None,
) -> list[tuple[int, int, int]]:
    """Released rows in output order as (source, row index in source, evtime); the row index
    is 0-based into ``arrivals_per_source[source]`` (bound rows counted). Same options as
    ``merge``; without arrival times, ``wait`` and ``join_leave`` the result does not depend on
    the interleaving: it is the non-discarded rows ordered by (evtime, source, row)."""
    rows, order = _simulate(
        arrivals_per_source, strict_bounds, tick, wait, join_leave, unit_ns, range_n
    )
    out = [(r.output_pos, order[r.arrival - 1], r.evtime) for r in rows if r.output_pos]
    return [(s, j, ev) for _, (s, j), ev in sorted(out)]
