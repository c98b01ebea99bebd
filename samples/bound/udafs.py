"""Example user aggregates for `evtime bound --udaf` (SPEC §4; seed 002).

A user aggregate is a class with add(value), optional remove(value) and result(); with
remove, hopping windows are evaluated incrementally: each row is added once when it enters
its first window and removed once when it leaves its last.

  evtime bound --window 2m --slide 30s --key device \
      --udaf 'med=samples/bound/udafs.py:SlidingMedian' --agg 'med(temp) AS median' \
      samples/bound/readings.csv
"""

from __future__ import annotations

import bisect


class SlidingMean:
    """Mean with add and remove: O(1) per row."""

    result_type = "double"

    def __init__(self):
        self.n, self.total = 0, 0.0

    def add(self, v):
        self.n += 1
        self.total += v

    def remove(self, v):
        self.n -= 1
        self.total -= v

    def result(self):
        return self.total / self.n


class SlidingMedian:
    """Median over a sorted list: add and remove keep it sorted."""

    result_type = "double"

    def __init__(self):
        self.values = []

    def add(self, v):
        bisect.insort(self.values, v)

    def remove(self, v):
        del self.values[bisect.bisect_left(self.values, v)]

    def result(self):
        n = len(self.values)
        mid = n // 2
        return float(self.values[mid]) if n % 2 else (self.values[mid - 1] + self.values[mid]) / 2


class Spread:
    """max - min, without remove: every window is recomputed from its rows."""

    result_type = "double"

    def __init__(self):
        self.lo, self.hi = None, None

    def add(self, v):
        self.lo = v if self.lo is None else min(self.lo, v)
        self.hi = v if self.hi is None else max(self.hi, v)

    def result(self):
        return self.hi - self.lo
