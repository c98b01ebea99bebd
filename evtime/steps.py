"""What an operator gives the writer besides its rows: the protocol of a step run on each
whole output part (:class:`PartStep`), the parts of rows left where Spark holds them
(:class:`EachPart`), and a route column made in Arrow (:func:`routes`).  The operators
(``evtime.engine``) implement them; the writer (``evtime.io.writer``) runs them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa


class PartStep(Protocol):
    """A step run on every whole part (rows sorted by PART, parts below a number) before
    its rows are routed and written: it yields the part's rows to write, with their ROUTE
    (evtime.runner.publish.Routed around evtime.engine.scan.KeptInPart; explain adjust's
    evtime.engine.adjust.parts.Explainer, which also makes the columns it writes).  A step
    may also number the parts itself: ``numbered(batch)`` then gives every batch its
    ``PART`` first (the Explainer with in-place results: a row group each)."""

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads besides the sinks'."""

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]: ...


@dataclass(frozen=True)
class EachPart:
    """Parts ``0..n-1`` wherever Spark holds them (rows as read: each part in one task, the
    tasks in any order): the writer leaves a done file per part as soon as it is written
    (``parts(i)`` is part ``i`` alone), and can assemble the output part after part."""

    n: int

    def parts(self, i: int) -> range:
        return range(i, i + 1)


def routes(index, names: list[str]) -> pa.DictionaryArray:
    """A ``ROUTE`` column made in Arrow: per row, the number of its route in ``names``
    (non-negative integers, no nulls).  Dictionary-encoded: no string per row is made,
    and the writer counts the routes on the numbers."""
    numbers = pa.array(np.asarray(index, np.int32))
    return pa.DictionaryArray.from_arrays(numbers, pa.array(names, pa.string()))
