"""Units and durations, as int64 nanoseconds."""

from __future__ import annotations

import re

from evtime.errors import UsageError

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


def duration_ns(text: str) -> int:
    """'250ms', '2s', '15m', '1h', '1d', '1ns', '-1ns', '10us' -> ns."""
    m = _DURATION.match(text)
    if not m:
        raise UsageError(
            f"bad duration {text!r}: write it like 250ms, 2s, 15m, 1h, 1d, 1ns or -1ns"
        )
    return int(m.group(1)) * _SUFFIX[m.group(2)]
