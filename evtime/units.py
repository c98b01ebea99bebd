"""Units and durations, as int64 nanoseconds."""

from __future__ import annotations

import re

from evtime.errors import UsageError

FIRST = -(1 << 63)  # the first and last instants of the int64 ns timeline
LAST = (1 << 63) - 1


def clamp(x: int) -> int:
    """``x`` (a Python int, any size) saturated to the int64 range."""
    return FIRST if x < FIRST else LAST if x > LAST else x


UNITS = {
    "nsec": 1,
    "usec": 1_000,
    "msec": 1_000_000,
    "sec": 1_000_000_000,
    "min": 60_000_000_000,
    "hour": 3_600_000_000_000,
    "day": 86_400_000_000_000,
}
_SUFFIX = {
    "ns": 1,
    "us": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
}
_DURATION = re.compile(r"^\s*(-?\d+)\s*(ns|us|ms|s|m|h|d)\s*$")


def unit_ns(name: str) -> int:
    try:
        return UNITS[name]
    except KeyError:
        raise UsageError(f"unknown unit {name!r}: use one of {', '.join(UNITS)}") from None


def truncated_range(
    times: tuple[int | None, int | None] | None, unit: int | None
) -> tuple[int, int] | None:
    """The least and the greatest time truncated to ``unit`` ns (None or 0: as they are),
    from the least and the greatest time: truncation is monotone, so bounds of the times
    give bounds of the truncated times.  None when the times are not known or there are
    none."""
    lo, hi = times or (None, None)
    if lo is None or hi is None:
        return None
    lo_t, hi_t = (lo - lo % unit, hi - hi % unit) if unit else (lo, hi)
    return max(lo_t, FIRST), max(hi_t, FIRST)  # (saturated: see engine/saturate)


def duration_ns(text: str) -> int:
    """'250ms', '2s', '15m', '1h', '1d', '1ns', '-1ns', '10us' -> ns."""
    m = _DURATION.match(text)
    if not m:
        raise UsageError(
            f"bad duration {text!r}: write it like 250ms, 2s, 15m, 1h, 1d, 1ns or -1ns"
        )
    return int(m.group(1)) * _SUFFIX[m.group(2)]
