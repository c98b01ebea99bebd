"""The Python side of the streamed prefix scans (:func:`evtime.engine.scan._streamed`,
:func:`~evtime.engine.scan._streamed_from`): running maxima and counts over each Spark
partition's rows in arrival order, in numpy.

This module runs in the Python workers: it imports numpy and pyarrow only (a worker
imports it as it unpickles the UDF, before its first row), and converts int64 arrays by
their buffers (pyarrow's conversions import pandas)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

NONE = np.iinfo(np.int64).min  # (a running max with no value yet)


@dataclass(frozen=True)
class RunningInRuns:
    """The row-by-row pass of :func:`~evtime.engine.scan._streamed`: called once per Spark
    partition with its batches in order, of ``(RUN, CHUNK, SEQ, the run's first SEQ, the
    greatest SEQ of the runs before it, the carries, the counted 0/1 columns, the
    maximised int64 columns)``;
    yields, per batch, a struct of the running sums (``counts`` of them) and maxima
    (``maxes``; nulls ignored, null before any value) of each run, from its carry;
    ``inclusive=False`` leaves each row out of its own."""

    counts: int
    maxes: int
    inclusive: bool
    names: tuple[str, ...]  # (of the struct's fields)

    def __call__(self, batches: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.StructArray]:
        state: dict[tuple[int, int], list[int]] = {}  # run -> [last seq, sums..., maxima...]
        for cols in batches:
            got = self.running(cols, state)
            yield pa.StructArray.from_arrays(got, names=list(self.names))

    def running(self, cols: tuple[pa.Array, ...], state: dict) -> list[pa.Array]:
        nc, nv = self.counts, self.maxes
        run, chunk, seq = (filled(a, 0) for a in cols[:3])
        carries = cols[5 : 5 + nc + nv]
        ones = [filled(a, 0) for a in cols[5 + nc + nv : 5 + 2 * nc + nv]]
        vals = [filled(a, NONE) for a in cols[5 + 2 * nc + nv :]]
        n = len(seq)
        sums = [np.empty(n, np.int64) for _ in ones]
        maxes = [np.empty(n, np.int64) for _ in vals]
        cuts = np.flatnonzero((run[1:] != run[:-1]) | (chunk[1:] != chunk[:-1])) + 1
        edges = [0, *cuts.tolist(), n]
        for i, j in itertools.pairwise(edges):
            at = (int(run[i]), int(chunk[i]))
            st = state.get(at)
            if st is None:  # the run's first row: it starts from its carry
                lo, before = cols[3][i].as_py(), cols[4][i].as_py()
                if lo != seq[i] or (before is not None and before >= lo):
                    raise _out_of_order(at)
                st = [int(seq[i]) - 1, *[_or(c[i].as_py(), 0) for c in carries[:nc]]]
                st += [_or(c[i].as_py(), NONE) for c in carries[nc:]]
            if seq[i] <= st[0] or (j - i > 1 and not (np.diff(seq[i:j]) > 0).all()):
                raise _out_of_order(at)
            st[0] = int(seq[j - 1])
            for k, (o, x) in enumerate(zip(ones, sums, strict=True)):
                c = np.cumsum(o[i:j]) + st[1 + k]
                x[i:j] = c if self.inclusive else c - o[i:j]
                st[1 + k] = int(c[-1])
            for k, (v, x) in enumerate(zip(vals, maxes, strict=True), start=1 + nc):
                st[k] = running_max(v[i:j], st[k], self.inclusive, x[i:j])
            state[at] = st
        return [int64_array(x) for x in sums] + [int64_array(x, x == NONE) for x in maxes]


def running_max(values: np.ndarray, top: int, inclusive: bool, out: np.ndarray) -> int:
    """Into ``out``: the running maximum of ``values`` from ``top`` (the maximum before
    them), each row's own value left out unless ``inclusive``; returns the maximum after
    the last."""
    m = np.maximum.accumulate(np.maximum(values, top))
    if inclusive:
        out[:] = m
    else:
        out[0], out[1:] = top, m[:-1]
    return int(m[-1])


def _or(x: int | None, default: int) -> int:
    return default if x is None else x


def values_of(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A column's values as numpy (nulls as pyarrow's ``to_numpy`` gives them), the chunks
    of a table's column combined first: ``ChunkedArray.to_numpy`` of three or more chunks
    goes through pyarrow's conversion for pandas, far slower than combining first."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return col.to_numpy(zero_copy_only=False)


def filled(a: pa.Array, fill: int) -> np.ndarray:
    """An integer Arrow array as int64 numpy, nulls as ``fill``.  (From its buffers: the
    pyarrow calls that convert arrays import pandas, ~0.5 s of a Python worker's start.)"""
    if a.type != pa.int64():
        a = a.cast(pa.int64())
    validity, data = a.buffers()[:2]
    x = np.frombuffer(data, np.int64, len(a), a.offset * 8) if len(a) else np.empty(0, np.int64)
    if a.null_count:
        bits = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
        x = np.where(bits[a.offset : a.offset + len(a)].astype(bool), x, fill)
    return x


def int64_array(x: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    """``x`` as an Arrow int64 array, null where ``null`` (from buffers, as :func:`filled`)."""
    x = np.ascontiguousarray(x, np.int64)
    valid = None
    if null is not None and null.any():
        valid = pa.py_buffer(np.packbits(~null, bitorder="little"))
    return pa.Array.from_buffers(pa.int64(), len(x), [valid, pa.py_buffer(x)])


def _out_of_order(at: tuple[int, int]) -> Exception:
    return RuntimeError(
        f"evtime internal error: the rows of partition {at[0]}, chunk {at[1]} are not in "
        "arrival order (a streamed prefix scan needs each partition as read)"
    )


@dataclass(frozen=True)
class RunningFromGroups:
    """The pass of :func:`~evtime.engine.scan._streamed_from`, called once per Spark
    partition with its batches of ``(_evt_seq, value)`` in order: a *stretch* is a run of
    consecutive ``_evt_seq``; each starts at a row group's first arrival (``starts``;
    anything else is an internal error), from the maximum before it (``before``), and
    runs on row by row."""

    starts: np.ndarray
    before: np.ndarray
    inclusive: bool

    def __call__(self, batches: Iterator[tuple[pa.Array, pa.Array]]) -> Iterator[pa.Array]:
        last, top = None, NONE  # the previous row's _evt_seq and running maximum
        for seq_a, value_a in batches:
            seq, value = filled(seq_a, 0), filled(value_a, NONE)
            n = len(seq)
            if n == 0:
                yield int64_array(seq)
                continue
            prev = np.concatenate([[NONE if last is None else last], seq[:-1]])
            fresh = set(np.flatnonzero(seq != prev + 1).tolist())  # stretches starting here
            out = np.empty(n, np.int64)
            for i, j in itertools.pairwise(sorted({0, *fresh, n})):
                if i in fresh:  # (else: the stretch of the batch before goes on)
                    top = self._carry(int(seq[i]))
                top = running_max(value[i:j], top, self.inclusive, out[i:j])
            last = int(seq[-1])
            yield int64_array(out, out == NONE)

    def _carry(self, seq: int) -> int:
        at = int(np.searchsorted(self.starts, seq))
        if at == len(self.starts) or self.starts[at] != seq:
            raise RuntimeError(
                f"evtime internal error: a stretch of arrivals starts at {seq}, not at a "
                "Parquet row group's first row (a streamed prefix scan needs the input as read)"
            )
        return int(self.before[at])
