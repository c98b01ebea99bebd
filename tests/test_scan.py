"""The shared prefix scan (evtime.engine.scan.prefix_count_max) against a plain running
count and max, over one chunk (the shortcut for small inputs read in the driver) and over
many chunks (the carry between chunks)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from evtime.engine.scan import prefix_count_max
from evtime.io.reader import CHUNK, CHUNK_SHIFT, SEQ
from tests.examples import spark_settings

rows_st = st.lists(
    st.tuples(st.sampled_from(["a", "b", None]), st.one_of(st.none(), st.integers(-50, 50))),
    min_size=1,
    max_size=40,
)


@pytest.fixture(autouse=True)
def _partitions(spark):
    """Several shuffle partitions, whatever an earlier CLI run left on the shared session."""
    spark.conf.set("spark.sql.shuffle.partitions", "4")


def _expected(rows, inclusive: bool):
    """Per row: (count of non-null values, max value) over its key's arrivals up to it."""
    seen: dict = {}
    out = []
    for k, v in rows:
        before = seen.get(k, (0, None))
        count = before[0] + (v is not None)
        top = before[1] if v is None else v if before[1] is None else max(before[1], v)
        out.append((count, top) if inclusive else before)
        seen[k] = (count, top)
    return out


def _frame(spark, rows, per_chunk: int | None):
    """Rows in arrival order; all in chunk 0, or ``per_chunk`` arrivals per chunk."""
    data = []
    for i, (k, v) in enumerate(rows):
        chunk = 0 if per_chunk is None else i // per_chunk
        seq = (chunk << CHUNK_SHIFT) + (i if per_chunk is None else i % per_chunk)
        data.append((i, k, v, seq, chunk))
    schema = f"i long, k string, v long, {SEQ} long, {CHUNK} long"
    return spark.createDataFrame(data, schema).repartition(3)


def _scan(df, inclusive: bool, one_chunk: bool):
    from pyspark.sql import functions as F

    return prefix_count_max(
        df, {"n": F.col("v").isNotNull()}, {"m": "v"}, ["k"], inclusive, one_chunk
    )


@spark_settings(10, suppress_health_check=[HealthCheck.too_slow])
@given(rows=rows_st, inclusive=st.booleans(), per_chunk=st.sampled_from([None, 1, 2, 5]))
def test_prefix_count_max_equals_a_running_count_and_max(spark, rows, inclusive, per_chunk):
    df = _frame(spark, rows, per_chunk)
    got = _scan(df, inclusive, one_chunk=per_chunk is None).orderBy("i").collect()
    want = _expected(rows, inclusive)
    assert [(r["n"], r["m"]) for r in got] == want


def test_one_chunk_leaves_out_the_per_chunk_pass(spark):
    """With one chunk, the scan is one window: no aggregate, no join for the carry."""
    df = _frame(spark, [("a", 1), ("b", 2), ("a", 3)], None)
    one = _scan(df, False, one_chunk=True)
    many = _scan(df, False, one_chunk=False)
    plan_one = one._jdf.queryExecution().executedPlan().toString()
    plan_many = many._jdf.queryExecution().executedPlan().toString()
    assert "HashAggregate" in plan_many and "HashAggregate" not in plan_one
    assert "Window" in plan_one
    assert sorted(map(tuple, one.collect())) == sorted(map(tuple, many.collect()))
