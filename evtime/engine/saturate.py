"""Saturating arithmetic on int64 nanosecond times (SPEC §1: times are int64 ns).

A time that evtime computes (a bound ``ref - range*unit``, ``now - wait``, ``t + tick``, a
window's start or end, ``seen - cti delay``) can fall outside the int64 timeline
(1677-09-21T00:12:43.145224192Z ... 2262-04-11T23:47:16.854775807Z) although every input
time is inside it.  Such a time is *saturated*: written as the first or the last instant
there is.  A bound below the first instant holds nothing back (no time is below it), one
above the last closes nothing that a bound at the last instant would not: the decisions
stay those of exact integers (the reference models in tests/model compute with Python's
unbounded ints).  Spark (ANSI mode) would stop with ARITHMETIC_OVERFLOW, numpy would wrap
around silently: every such sum goes through these helpers.

The Spark forms compare against a threshold computed here (``c < MIN + n``), so plans
stay plain comparisons; literals only (DataFrame API, also under Spark Connect).
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import Column
from pyspark.sql import functions as F

# (the timeline's limits and clamp, for the engine under the names it uses)
from evtime.units import FIRST as MIN
from evtime.units import LAST as MAX
from evtime.units import clamp as clamp


def _plus(x, n: int, lit):
    """``x + n`` for a sum known to be in range, with ``n`` possibly outside it: in steps
    of at most MAX that stay in range, each a subtraction (Spark's optimizer would fold a
    chain of additions of literals into one literal, out of range again)."""
    step = MAX if n > 0 else -MAX
    while not MIN < n <= MAX:
        x, n = x - lit(-step), n - step
    return x - lit(-n)


def add(c: Column, n: int | Column) -> Column:
    """``c + n`` saturated to the int64 range (null stays null).  ``n``: a Python int of
    any size, or a long column (then ``c + n`` saturates for ``n`` of either sign)."""
    if isinstance(n, Column):
        pos, neg = F.greatest(n, F.lit(0)), F.least(n, F.lit(0))  # (thresholds in range)
        return (
            F.when(c > F.lit(MAX) - pos, F.lit(MAX))
            .when(c < F.lit(MIN) - neg, F.lit(MIN))
            .otherwise(c + n)
        )
    if n == 0:
        return c
    edge, cut = (MAX, MAX - n) if n > 0 else (MIN, MIN - n)
    if not MIN <= cut <= MAX:  # every sum is past the edge
        return F.when(c.isNotNull(), F.lit(edge))
    past = c > F.lit(cut) if n > 0 else c < F.lit(cut)
    return F.when(past, F.lit(edge)).otherwise(_plus(c, n, F.lit))


def sub(c: Column, n: int | Column) -> Column:
    """``c - n`` saturated to the int64 range (see :func:`add`)."""
    if isinstance(n, Column):
        pos, neg = F.greatest(n, F.lit(0)), F.least(n, F.lit(0))
        return (
            F.when(c < F.lit(MIN) + pos, F.lit(MIN))
            .when(c > F.lit(MAX) + neg, F.lit(MAX))
            .otherwise(c - n)
        )
    return add(c, -n)


def add_np(a: np.ndarray, n: int) -> np.ndarray:
    """``a + n`` for an int64 array, saturated (numpy itself wraps around silently)."""
    a = np.asarray(a, np.int64)
    if n == 0:
        return a.copy()
    edge, cut = (MAX, MAX - n) if n > 0 else (MIN, MIN - n)
    out = np.full_like(a, edge)
    if not MIN <= cut <= MAX:
        return out
    ok = a <= cut if n > 0 else a >= cut
    out[ok] = _plus(a[ok], n, np.int64)
    return out


def sub_np(a: np.ndarray, n: int) -> np.ndarray:
    """``a - n`` for an int64 array, saturated."""
    return add_np(a, -n)


def lowest(unit: int) -> int:
    """The least multiple of ``unit`` ns on the timeline: a time below it is truncated to
    a multiple below the first instant, and saturates to :data:`MIN`."""
    return -((-MIN) // unit * unit)


def floor_int(t: int, unit: int | None) -> int:
    """``floor(t / unit) * unit``, saturated to :data:`MIN` (see :func:`lowest`)."""
    return t if not unit or unit <= 1 else max(t - t % unit, MIN)


def floor(c: Column, unit: int | None) -> Column:
    """``floor(c / unit) * unit`` for a long column, saturated to :data:`MIN` (the times on
    the first day of the timeline, for ``--unit day``, are truncated to its first instant)."""
    if not unit or unit <= 1:
        return c
    return F.when(c < F.lit(lowest(unit)), F.lit(MIN)).otherwise(c - F.pmod(c, F.lit(unit)))


def floor_np(t: np.ndarray, unit: int | None) -> np.ndarray:
    """:func:`floor` for an int64 array."""
    if not unit or unit <= 1:
        return t
    return np.where(t < lowest(unit), MIN, t - np.mod(t, unit))
