"""Reference model of ``evtime adjust`` (SPEC §2, seed 000: Hitachi SDP timestamp adjustment).

A plain sequential simulation: arrivals are read one at a time, each key keeps a reference
time and a list of held rows, exactly as SPEC §2 describes the machine.

* ``evtime = floor(time / unit) * unit`` (Python floor division, so negative times floor down).
* The first arrival of a key sets ``ref``; an arrival with ``evtime > ref`` moves ``ref``.
* An arrival with ``evtime < ref - range*unit`` (judged after its own ``ref`` update, which
  can only matter when it moves ``ref``, and then it is inside the range) is discarded.
* When ``ref`` moves, every held row of that key with ``evtime < ref - range*unit`` is
  released by that arrival; at the end of the input everything still held is released
  (``released_by`` None, as evtime writes it: null; the reason says ``HELD_TO_END``).
* ``output_pos`` numbers all released rows (all keys together) by ``(evtime, arrival)``.

Oracle for the Spark engine; clarity over speed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

NS_PER_S = 1_000_000_000


def iso(ns: int | None) -> str:
    """ISO-8601 UTC with 9 fractional digits (SPEC §5), '' for None."""
    if ns is None:
        return ""
    s, frac = divmod(ns, NS_PER_S)
    return datetime.fromtimestamp(s, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


HELD_TO_END = "held to the end of input"  # reason of a row released at the end of the input

FIRST = -(1 << 63)  # the first instant of the int64 ns timeline


def floor_to(t: int, unit_ns: int) -> int:
    """``floor(t / unit) * unit`` for integer nanoseconds; a time truncated below the first
    instant is the first instant (evtime's documented choice at the edge of the timeline)."""
    return max((t // unit_ns) * unit_ns, FIRST)


@dataclass
class Row:
    arrival: int  # 1-based
    key: tuple  # () when no keys
    time: int  # original ns
    evtime: int  # floor(time/unit)*unit
    decision: str  # 'released' | 'discarded'
    ref: int  # reference time of this key after this arrival
    bound: int  # ref - range*unit after this arrival
    released_by: int | None  # arrival that released it; None: discarded, or at the end
    output_pos: int | None  # 1-based position in the whole output; None if discarded
    reason: str | None  # words for a discard, HELD_TO_END for a row released at the end


def adjust(arrivals: list[tuple[tuple, int]], unit_ns: int, range_n: int) -> list[Row]:
    """Run the SPEC §2 machine over ``[(key, time_ns), ...]`` (arrival order); one Row each."""
    if unit_ns <= 0:
        raise ValueError("unit must be a positive number of nanoseconds")
    if range_n < 0:
        raise ValueError("range must be >= 0")
    width = range_n * unit_ns
    refs: dict[tuple, int] = {}  # key -> reference time
    held: dict[tuple, list[Row]] = {}  # key -> rows held, in arrival order
    rows: list[Row] = []

    for i, (key, t) in enumerate(arrivals, start=1):
        ev = floor_to(t, unit_ns)
        row = Row(i, key, t, ev, "released", 0, 0, None, None, None)
        rows.append(row)
        if key not in refs or ev > refs[key]:
            refs[key] = ev  # the first arrival sets ref; a later one moves it
            lo = ev - width
            keep = []
            for h in held.get(key, []):
                if h.evtime < lo:
                    h.released_by = i
                else:
                    keep.append(h)
            held[key] = keep + [row]
        elif ev >= refs[key] - width:
            held[key].append(row)
        else:
            row.decision = "discarded"
            row.reason = (
                f"evtime {iso(ev)} is below bound {iso(refs[key] - width)} "
                f"(ref {iso(refs[key])} - range {range_n} x {unit_ns}ns)"
            )
        row.ref = refs[key]
        row.bound = refs[key] - width

    for key_rows in held.values():  # end of input: flush everything still held
        for h in key_rows:
            h.released_by, h.reason = None, HELD_TO_END

    released = sorted(
        (r for r in rows if r.decision == "released"), key=lambda r: (r.evtime, r.arrival)
    )
    for pos, r in enumerate(released, start=1):
        r.output_pos = pos
    return rows
