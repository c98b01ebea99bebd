"""Reference model of ``evtime bound`` (SPEC §4; seeds 004 strict bounds, 003 StreamInsight
CTIs, 002 windowed aggregation).

A plain sequential simulation over arrivals. Every key value is an independent stream
(SPEC §1 "Keys"): its own bound, CTI counter, reference time and windows.

* Windows start at ``offset + k*slide`` (``slide`` defaults to ``size``) and are ``[s, s+size)``,
  or ``[s, s+size]`` with ``inclusive_end``. A window exists once a row enters it (empty windows
  produce nothing).
* The bound of a key (non-strict, "no later row below b"; -inf at first) comes from ``bounds``:
  ``'rows'``: every accepted data row raises it to its own time (with ``unit_ns``/``range_n`` the
  row is adjusted first and the bound is ``ref - range*unit``); ``'markers'``: only marker rows
  (``is_bound=True``) raise it, to ``t`` or ``t + tick`` with ``strict_bounds``. **A marker row
  applies to the key in its own ``key`` tuple only** (a marker with key ``()`` is the bound of
  the unkeyed stream); ``'cti'``: at the N-th, 2N-th, ... data row of the key (late rows
  counted) the bound is raised to (largest data-row time of the key seen so far, late rows
  included, original time) minus ``cti_delay``. Bounds are never lowered.
* A data row is late when its time is below the bound in force *before* it arrives: dropped
  (``late='drop'``) or moved up to that bound (``late='adjust'``, decision 'adjusted'). Late
  rows advance nothing (except the CTI count/max, as SPEC §4 says for ``cti``).
* After each arrival (its own new bound included) the key's windows are final when
  ``bound >= end`` (exclusive) or ``bound >= end + tick`` (inclusive); they are released with
  ``closed_by`` = that arrival, ordered by start. At end of input every open window is flushed
  (``closed_by`` None, as evtime writes it: null), ordered by start, then key; the reason of
  a row whose last window is flushed so ends with ``HELD_TO_END``.
* ``unit_ns``/``range_n`` are only allowed with ``bounds='rows'`` (SPEC: the bound then *is*
  ``ref - range*unit``).

Oracle for the Spark engine; clarity over speed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from .adjust import HELD_TO_END, floor_to, iso

INF = math.inf


@dataclass
class Event:
    key: tuple
    time: int
    is_bound: bool = False  # marker row (only with bounds='markers')
    value: float | None = None  # payload for aggregates


@dataclass
class Window:  # output row, in release order
    key: tuple
    start: int
    end: int
    values: list  # values of the rows in the window, in arrival order
    rows: int
    closed_by: int | None  # arrival number; None: flushed at the end of the input


@dataclass
class BoundRow:  # explain, one per arrival
    arrival: int
    key: tuple
    time: int
    evtime: int
    decision: str  # 'released' | 'discarded' | 'adjusted' | 'bound'
    bound: int | None  # bound in force after this arrival (None = none yet)
    windows: list[tuple[int, int]] = field(default_factory=list)  # windows the row entered
    reason: str | None = None


def windows_of(
    t: int, size: int, slide: int, offset: int, inclusive: bool
) -> list[tuple[int, int]]:
    """(start, end) of every window containing time t, by start."""
    s = offset + ((t - offset) // slide) * slide  # latest start <= t
    out = []
    while s + size > t or (inclusive and s + size == t):
        out.append((s, s + size))
        s -= slide
    return out[::-1]


def bound(
    events: list[Event],
    *,
    size: int,
    slide: int | None = None,
    offset: int = 0,
    inclusive_end: bool = False,
    bounds: str = "rows",
    strict_bounds: bool = False,
    tick: int = 1,
    cti_every: int | None = None,
    cti_delay: int = 0,
    late: str = "drop",
    unit_ns: int | None = None,
    range_n: int | None = None,
) -> tuple[list[Window], list[BoundRow]]:
    """Run the SPEC §4 machine; returns (windows in release order, one BoundRow per arrival)."""
    slide = size if slide is None else slide
    if size <= 0 or slide <= 0:
        raise ValueError("size and slide must be positive")
    if bounds not in ("rows", "markers", "cti") or late not in ("drop", "adjust"):
        raise ValueError("bounds must be rows|markers|cti and late drop|adjust")
    if bounds == "cti" and (cti_every is None or cti_every < 1):
        raise ValueError("bounds='cti' needs cti_every >= 1")
    if unit_ns is not None and bounds != "rows":
        raise ValueError("unit/range give the bound themselves: only with bounds='rows'")
    if range_n is not None and unit_ns is None:
        raise ValueError("range_n needs unit_ns")
    width = (range_n or 0) * unit_ns if unit_ns is not None else 0

    bnd: dict[tuple, float | int] = defaultdict(lambda: -INF)  # bound in force per key
    ref: dict[tuple, float | int] = defaultdict(lambda: -INF)  # adjust reference per key
    seen: dict[tuple, float | int] = defaultdict(lambda: -INF)  # cti: largest time seen
    count: dict[tuple, int] = defaultdict(int)  # cti: data rows seen
    open_: dict[tuple, dict[tuple[int, int], list]] = defaultdict(dict)  # key -> window -> values
    out: list[Window] = []
    explain: list[BoundRow] = []

    def close(key: tuple, by: int, upto: float | int) -> None:
        for s, e in sorted(open_[key]):
            if upto >= (e + tick if inclusive_end else e):
                vals = open_[key].pop((s, e))
                out.append(Window(key, s, e, vals, len(vals), by))

    for i, ev in enumerate(events, start=1):
        k = ev.key
        before = bnd[k]
        if ev.is_bound:
            if bounds != "markers":
                raise ValueError(f"arrival {i} is a marker row but bounds={bounds!r}")
            row = BoundRow(i, k, ev.time, ev.time, "bound", None)
            bnd[k] = max(before, ev.time + (tick if strict_bounds else 0))
        else:
            t = floor_to(ev.time, unit_ns) if unit_ns is not None else ev.time
            row = BoundRow(i, k, ev.time, t, "released", None)
            is_late = t < before
            if is_late and late == "drop":
                row.decision = "discarded"
                row.reason = f"time {iso(t)} is below the bound in force {iso(before)}"
            else:
                if is_late:
                    row.decision, row.evtime = "adjusted", before
                    row.reason = f"time {iso(t)} was below the bound {iso(before)}: moved up to it"
                row.windows = windows_of(row.evtime, size, slide, offset, inclusive_end)
                for w in row.windows:
                    open_[k].setdefault(w, []).append(ev.value)
                if bounds == "rows" and not is_late:
                    ref[k] = max(ref[k], t)
                    bnd[k] = max(bnd[k], ref[k] - width)
            if bounds == "cti":
                count[k] += 1
                seen[k] = max(seen[k], t)
                if count[k] % cti_every == 0:
                    bnd[k] = max(bnd[k], seen[k] - cti_delay)
        row.bound = bnd[k] if math.isfinite(bnd[k]) else None
        explain.append(row)
        close(k, i, bnd[k])

    flushed = [(s, key) for key, ws in open_.items() for (s, _e) in ws]
    for s, key in sorted(flushed):
        vals = open_[key].pop((s, s + size))
        out.append(Window(key, s, s + size, vals, len(vals), None))
    # a row is held till its last window closes: flushed, its reason says so (after any other)
    at_end = set(flushed)
    for row in explain:
        if row.windows and (row.windows[-1][0], row.key) in at_end:
            row.reason = "; ".join(w for w in (row.reason, HELD_TO_END) if w)
    return out, explain
