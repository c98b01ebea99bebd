"""User aggregates for ``evtime bound`` (SPEC §4; seed 002, the Oracle CEP patent).

A user aggregate is a Python class with ``add(value)``, optional ``remove(value)`` and
``result()`` (and optionally ``result_type``, a Spark type name, default ``double``).  It is
used in ``--agg`` as ``NAME(expr) [AS alias]`` where ``--udaf NAME=module:Class`` (or
``path/to/file.py:Class``) names it.

Evaluation runs once per key, in a Spark task (``applyInArrow`` grouped by key): the key's
accepted rows are swept in time order (time, arrival) through the windows in start order.
When the class has ``remove``, the sweep is incremental in the patent's way: a row is added
to the aggregate instance once, when it enters its first window, and removed once, when it
leaves its last; an instance is created when its count of values goes from 0 to 1 and
released when it drops back to 0.  Without ``remove`` each window gets a fresh instance and
its rows are added to it (recomputation).  Null values are skipped, as SQL aggregates do.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from evtime.engine.saturate import MIN
from evtime.errors import EvtimeError, UsageError, in_task

RESULT_TYPES = {
    "double": "double",
    "float": "float",
    "long": "bigint",
    "bigint": "bigint",
    "int": "int",
    "integer": "int",
    "string": "string",
    "boolean": "boolean",
}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Call:
    """One use of a user aggregate in ``--agg``: ``NAME(arg) AS alias``."""

    name: str
    cls: type
    arg: str
    alias: str

    @property
    def incremental(self) -> bool:
        return callable(getattr(self.cls, "remove", None))

    @property
    def result_type(self) -> str:
        t = str(getattr(self.cls, "result_type", "double")).lower()
        if t not in RESULT_TYPES:
            raise UsageError(
                f"user aggregate {self.name}: result_type {t!r} is not one of "
                f"{', '.join(sorted(RESULT_TYPES))}"
            )
        return RESULT_TYPES[t]


def _import(module: str):
    if module.endswith(".py") or "/" in module:
        path = Path(module)
        if not path.is_file():
            raise UsageError(f"--udaf: no file {module}")
        name = "evtime_udaf_" + re.sub(r"\W", "_", path.stem)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise UsageError(f"--udaf: cannot import {module!r}: {err}") from None


def load(text: str) -> tuple[str, type]:
    """``NAME=module:Class`` -> (name, class); the module is shipped to Spark's Python
    workers by value, so they need not be able to import it."""
    name, sep, target = text.partition("=")
    module, colon, attr = target.rpartition(":")
    if not sep or not colon or not _NAME.match(name.strip()) or not module or not attr:
        raise UsageError(f"--udaf {text!r}: write it NAME=module:Class or NAME=file.py:Class")
    mod = _import(module.strip())
    cls = getattr(mod, attr.strip(), None)
    if not isinstance(cls, type):
        raise UsageError(f"--udaf {text!r}: {module} has no class {attr!r}")
    for method in ("add", "result"):
        if not callable(getattr(cls, method, None)):
            raise UsageError(f"--udaf {text!r}: class {attr} has no method {method}()")
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(mod)
    return name.strip(), cls


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def split_aggs(aggs: Sequence[str], udafs: dict[str, type]) -> list[str | Call]:
    """Each ``--agg`` as a Spark SQL expression (str) or a user aggregate call."""
    out: list[str | Call] = []
    for text in aggs:
        call = None
        for name, cls in udafs.items():
            m = re.match(
                rf"^\s*({re.escape(name)})\s*\((.*)\)\s*(?:as\s+(`[^`]+`|\w+))?\s*$",
                text,
                re.I | re.S,
            )
            if m and _balanced(m.group(2)):
                arg = m.group(2).strip()
                if not arg:
                    raise UsageError(f"--agg {text!r}: {name} takes one argument")
                alias = (m.group(3) or f"{m.group(1)}({arg})").strip("`")
                call = Call(name, cls, arg, alias)
                break
            if re.search(rf"\b{re.escape(name)}\s*\(", text, re.I):
                raise UsageError(
                    f"--agg {text!r}: a user aggregate must be used alone: "
                    f"--agg '{name}(expr) [AS name]'"
                )
        out.append(call if call is not None else text)
    return out


# --------------------------------------------------------------- the sweep (pure Python)


def first_start(t: int, size: int, slide: int, offset: int, inclusive: bool) -> int:
    """Start of the first window containing ``t`` (or, in a gap, of the next window)."""
    latest = t - (t - offset) % slide
    x = latest + size - t
    n = (x // slide + 1 if x >= 0 else 0) if inclusive else (-(-x // slide) if x > 0 else 0)
    return latest - (n - 1) * slide if n > 0 else latest + slide


class _Slot:
    """One user aggregate's instance and its count of values (the patent's count)."""

    def __init__(self, call: Call, j: int):
        self.cls, self.incremental, self.j = call.cls, call.incremental, j
        self.inst, self.count = None, 0

    def add(self, v) -> None:
        if v is None:
            return
        if self.count == 0:
            self.inst = self.cls()
        self.inst.add(v)
        self.count += 1

    def remove(self, v) -> None:
        if v is None:
            return
        self.inst.remove(v)
        self.count -= 1
        if self.count == 0:
            self.inst = None  # released

    def result(self, window: deque):
        if not self.incremental:  # recompute: a fresh instance with the window's rows
            self.inst, self.count = None, 0
            for _, vals in window:
                self.add(vals[self.j])
            res = self.inst.result() if self.inst is not None else None
            self.inst, self.count = None, 0
            return res
        return self.inst.result() if self.inst is not None else None


def sweep(
    times: Sequence[int],
    values: Sequence[Sequence],
    calls: Sequence[Call],
    size: int,
    slide: int,
    offset: int,
    inclusive: bool,
) -> Iterator[tuple[int, list]]:
    """(window start, [result per call]) for every non-empty window of one key.

    ``times`` are sorted (time, arrival); ``values[j][i]`` is call j's argument on row i.
    """
    slots = [_Slot(c, j) for j, c in enumerate(calls)]
    inc = [s for s in slots if s.incremental]
    window: deque = deque()  # (time, [value per call]) of the rows in the current window
    n, hi = len(times), 0
    if n == 0:
        return
    start = first_start(times[0], size, slide, offset, inclusive)
    while True:
        while window and window[0][0] < start:  # rows that left
            _, vals = window.popleft()
            for s in inc:
                s.remove(vals[s.j])
        end = start + size
        while hi < n and (times[hi] < end or (inclusive and times[hi] == end)):
            t = times[hi]
            if t >= start:  # (a row in a gap between windows enters nothing)
                vals = [v[hi] for v in values]
                window.append((t, vals))
                for s in inc:
                    s.add(vals[s.j])
            hi += 1
        if window:  # (a start before the first instant is written as it, as bound does)
            yield max(start, MIN), [s.result(window) for s in slots]
            start += slide
        elif hi < n:
            start = max(start + slide, first_start(times[hi], size, slide, offset, inclusive))
        else:
            return


# --------------------------------------------------------------- on Spark


def _result_schema(rows, keys: Sequence[str], calls: Sequence[Call], start_col: str):
    """The Spark schema of :func:`evaluate`'s result: the keys as ``rows`` has them, the
    window's start (bigint), then each call's alias as its ``result_type``."""
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    spark_types = {
        "double": DoubleType(),
        "float": FloatType(),
        "bigint": LongType(),
        "int": IntegerType(),
        "string": StringType(),
        "boolean": BooleanType(),
    }
    fields = [rows.schema[k] for k in keys]
    fields.append(StructField(start_col, LongType()))
    fields += [StructField(c.alias, spark_types[c.result_type]) for c in calls]
    return StructType(fields)


def _swept(times: list, values: list[list], calls: Sequence[Call], *window) -> tuple:
    """:func:`sweep` of one key's rows (``window``: size, slide, offset, inclusive) as
    columns: the windows' starts, and per call its results; an exception of the user's code
    becomes one line that names the aggregates (raised in the task)."""
    starts: list[int] = []
    results: list[list] = [[] for _ in calls]
    try:
        for s, res in sweep(times, values, calls, *window):
            starts.append(s)
            for j, r in enumerate(res):
                results[j].append(r)
    except Exception as err:  # the user's code: say whose, in one line
        names = ", ".join(sorted({c.name for c in calls}))
        raise in_task(
            EvtimeError(f"user aggregate ({names}) failed: {type(err).__name__}: {err}")
        ) from None
    return starts, results


def _result_array(results: list, call: Call, arrow_type):
    """One call's results as Arrow of ``arrow_type``; a result that does not fit it (too
    big an int, another type) is one line that names the aggregate (raised in the task)."""
    import pyarrow as pa

    try:
        return pa.array(results, arrow_type)
    except OverflowError:  # (a Python int past the type: no Arrow message)
        top = 1 << (31 if call.result_type == "int" else 63)
        big = next((v for v in results if isinstance(v, int) and not -top <= v < top), "")
        raise in_task(
            EvtimeError(
                f"user aggregate {call.name}: result() {big} does not fit a "
                f"{call.result_type} (set result_type on the class, e.g. 'double')"
            )
        ) from None
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as err:
        raise in_task(
            EvtimeError(
                f"user aggregate {call.name}: result() is not a "
                f"{call.result_type} (set result_type on the class): {err}"
            )
        ) from None


def evaluate(
    rows,  # DataFrame: keys, time, seq and one column per call (_evt_u<j>)
    keys: Sequence[str],
    calls: Sequence[Call],
    time: str,
    seq: str,
    size: int,
    slide: int,
    offset: int,
    inclusive: bool,
    start_col: str,
):  # -> DataFrame(keys..., start_col, alias per call)
    """The user aggregates of every (key, window), one sequential sweep per key."""
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_type

    group = list(keys)
    if not group:
        rows = rows.withColumn("_evt_g", F.lit(0))
        group = ["_evt_g"]
    schema = _result_schema(rows, keys, calls, start_col)
    arrow_types = [to_arrow_type(f.dataType) for f in schema.fields]
    ucols = [f"_evt_u{j}" for j in range(len(calls))]
    key_names = list(keys)

    def per_key(table: pa.Table) -> pa.Table:
        table = table.sort_by([(time, "ascending"), (seq, "ascending")])
        times = table.column(time).to_pylist()
        values = [table.column(c).to_pylist() for c in ucols]
        starts, results = _swept(times, values, calls, size, slide, offset, inclusive)
        m = len(starts)
        cols = [
            pa.array([table.column(k)[0].as_py() if m else None] * m, arrow_types[i])
            for i, k in enumerate(key_names)
        ]
        cols.append(pa.array(starts, pa.int64()))
        for j, r in enumerate(results):
            cols.append(_result_array(r, calls[j], arrow_types[len(key_names) + 1 + j]))
        return pa.Table.from_arrays(
            cols,
            schema=pa.schema(
                [pa.field(f.name, t) for f, t in zip(schema.fields, arrow_types, strict=True)]
            ),
        )

    return rows.groupBy(*group).applyInArrow(per_key, schema)
