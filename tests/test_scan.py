"""The shared prefix scan (evtime.engine.scan.prefix_count_max) against a plain running
count and max, over one chunk (the shortcut for small inputs read in the driver) and over
many chunks (the carry between chunks); the keep rule found in value-ordered parts
(kept_in_parts, KeptInPart) against the same rule over arrival order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evtime.columns import CHUNK, CHUNK_SHIFT, PART, SEQ, SEQ_FILE_SHIFT
from evtime.engine.running import NONE
from evtime.engine.scan import (
    AsRead,
    Carry,
    FilledInPart,
    KeptInPart,
    apply_in_parts,
    arrival_numbers,
    arrivals_here,
    bucket_number,
    first_reaching,
    kept_in_parts,
    prefix_count_max,
    running,
    sliced_groups,
)
from tests.examples import examples, spark_settings

rows_st = st.lists(
    st.tuples(st.sampled_from(["a", "b", None]), st.one_of(st.none(), st.integers(-50, 50))),
    min_size=1,
    max_size=40,
)


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


@pytest.mark.parametrize("file,chunk", [(0, 0), (3, 5)])
def test_arrival_numbers_of_one_chunk_without_counting_it(spark, file, chunk):
    """A one-chunk input (a file of a small input read in the driver, its rows in any
    order, a row without ``_evt_seq``) is numbered as the chunks' counts number it, with no
    aggregate and no join in the plan."""
    from pyspark.sql import functions as F

    base = (file << SEQ_FILE_SHIFT) + (chunk << CHUNK_SHIFT)
    seqs = [base + i for i in (4, 0, 2, 1, 3)] + [None]
    df = spark.createDataFrame([(s,) for s in seqs], f"{SEQ} long").withColumn(
        CHUNK, F.shiftright(F.col(SEQ), CHUNK_SHIFT)
    )
    one = arrival_numbers(df, "a", one_chunk=True)
    counted = arrival_numbers(df, "a")
    plan = one._jdf.queryExecution().executedPlan().toString()
    assert "Aggregate" not in plan and "Join" not in plan
    got = sorted(one.collect(), key=lambda r: (r[SEQ] is None, r[SEQ] or 0))
    assert [r["a"] for r in got] == [1, 2, 3, 4, 5, None]
    assert sorted(map(tuple, one.collect()), key=repr) == sorted(
        map(tuple, counted.collect()), key=repr
    )


def _as_read(spark, rows, per_chunk: int, parts: int):
    """Rows as a reader gives them: ``parts`` Spark partitions, each a stretch of
    consecutive arrivals in arrival order, ``per_chunk`` arrivals per chunk."""
    from pyspark.sql import functions as F

    n = len(rows)
    values = F.array(*[F.lit(v).cast("long") for _, v in rows])
    seq = (F.col("id") / per_chunk).cast("long") * (1 << CHUNK_SHIFT) + F.col("id") % per_chunk
    return spark.range(0, n, 1, parts).select(
        F.col("id").alias("i"),
        F.element_at(values, (F.col("id") + 1).cast("int")).alias("v"),
        seq.alias(SEQ),
        F.shiftright(seq, CHUNK_SHIFT).alias(CHUNK),
    )


@spark_settings(10, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.tuples(st.just(None), st.one_of(st.none(), st.integers(-50, 50))),
        min_size=1,
        max_size=40,
    ),
    inclusive=st.booleans(),
    per_chunk=st.sampled_from([1, 3, 7, 64]),
    parts=st.integers(1, 4),
)
def test_prefix_as_read_equals_a_running_count_and_max(spark, rows, inclusive, per_chunk, parts):
    """Without keys, on rows as read: the carry joined to each run (a partition's part of
    a chunk), continued in Arrow where the rows are."""
    from pyspark.sql import functions as F

    df = _as_read(spark, rows, per_chunk, parts)
    got = prefix_count_max(
        df, {"n": F.col("v").isNotNull()}, {"m": "v"}, (), inclusive, as_read=AsRead()
    )
    plan = got._jdf.queryExecution().executedPlan().toString()
    assert "Window" not in plan and "ArrowEvalPython" in plan
    got = got.orderBy("i").collect()
    assert [(r["n"], r["m"]) for r in got] == _expected(rows, inclusive)


def test_prefix_as_read_refuses_rows_out_of_arrival_order(spark):
    """Partitions that are not stretches of arrivals (here dealt round-robin) stop the run
    with an internal error instead of a wrong bound."""
    df = _as_read(spark, [(None, v) for v in range(12)], 64, 1).repartition(3)
    got = prefix_count_max(df, {}, {"m": "v"}, (), False, as_read=AsRead())
    with pytest.raises(Exception, match="not in arrival order"):
        got.collect()


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("through", [False, True])
def test_running_without_keys_computes_its_table_once(spark, through, descending):
    """The self-join of a small table without keys gives the running sums, and Spark
    computes the table once for both sides (the second side reuses the first's exchange):
    without keys a prefix scan would otherwise read its input twice."""
    from pyspark.sql import functions as F

    src = spark.range(0, 1000, numPartitions=4)
    small = src.groupBy((F.col("id") % 7).alias("g")).agg(F.count(F.lit(1)).alias("_n"))
    got = running(small, (), "g", {"o": ("sum", "_n")}, descending, through=through)
    rows = {r["g"]: r["o"] for r in got.collect()}
    per = {g: sum(1 for i in range(1000) if i % 7 == g) for g in range(7)}
    for g in range(7):
        before = [h for h in range(7) if (h > g if descending else h < g) or (through and h == g)]
        assert rows[g] == (sum(per[h] for h in before) if before else None)
    plan = got._jdf.queryExecution().executedPlan().toString()  # (run: the final plan)
    final = plan.split("== Initial Plan ==")[0]
    assert final.count("Range (0, 1000") == 1 and "ReusedExchange" in final


def _kept_by_arrival(values, width: int, keys=None) -> list[bool]:
    """The keep rule over arrival order: no earlier arrival of the row's key above the
    row's value + width."""
    out, top = [], {}
    for k, v in zip(keys or [None] * len(values), values, strict=True):
        out.append(k not in top or v >= top[k] - width)
        top[k] = max(top.get(k, v), v)
    return out


values_st = st.lists(st.integers(-30, 30), min_size=1, max_size=60)
keys_st = st.lists(st.sampled_from(["a", "b", None]), min_size=60, max_size=60)


@settings(max_examples=examples(200))
@given(values=values_st, width=st.integers(0, 20), keys=st.one_of(st.none(), keys_st))
def test_kept_in_one_part_is_the_rule_over_arrival_order(values, width, keys):
    """One part without probes: the sorted search and suffix minimum (per key) give the
    rule."""
    import pyarrow as pa

    from evtime.engine.scan import PROBE

    keys = keys[: len(values)] if keys else None
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    part = pa.table(
        {
            "k": pa.array([keys[i] if keys else None for i in order], pa.string()),
            "v": pa.array([values[i] for i in order], pa.int64()),
            "a": pa.array(order, pa.int64()),
            PROBE: [False] * len(order),
        }
    )
    step = KeptInPart("v", "a", width, "keep", ("k",) if keys else (), "least", "rank")
    got = pa.Table.from_batches(list(step(part)))
    want = _kept_by_arrival(values, width, keys)
    assert got.column("keep").to_pylist() == [want[i] for i in order]
    assert got.column("a").to_pylist() == order and PROBE not in got.column_names
    key = keys or [None] * len(values)
    above = [
        min(
            (j for j in range(len(values)) if key[j] == key[i] and values[j] > values[i] + width),
            default=None,
        )
        for i in order
    ]  # the least arrival of the row's key above its value + width
    assert got.column("least").to_pylist() == above
    ranks = [sum(want[j] for j in order[: at + 1]) for at in range(len(order))]
    kept_ranks = [r if want[i] else None for r, i in zip(ranks, order, strict=True)]
    assert got.column("rank").to_pylist() == kept_ranks


@spark_settings(10, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(st.integers(0, 12), min_size=1, max_size=60),
    width=st.integers(0, 4),
    spread=st.sampled_from([1, 1000, 10**9]),
    keys=st.one_of(st.none(), keys_st),
    known=st.booleans(),
    here=st.sampled_from([None, 1, 4, 100]),
)
@example(values=[5, 2], width=2, spread=1, keys=None, known=False, here=None)  # 5 passes 2 (halo)
@example(values=[9, 2], width=2, spread=1, keys=None, known=False, here=None)  # 9: 2's part (carry)
@example(values=[9, 2], width=2, spread=1, keys=None, known=False, here=1)
@example(values=[9, 2], width=2, spread=1, keys=[None, None], known=False, here=1)  # null key
@example(values=[5, 2, 9, 2], width=2, spread=1, keys=["a", "b", "b", "a"], known=False, here=None)
@example(values=[5, 2, 9, 2], width=2, spread=1, keys=["a", "b", "b", "a"], known=True, here=None)
def test_kept_in_parts_is_the_rule_over_arrival_order(
    spark, values, width, spread, keys, known, here
):
    """Many parts: each part's rows with the halo and carry probes the engine adds, the
    step run on each whole part (apply_in_parts); values spread so that parts are narrow
    (or one part: a far value puts the rest in part 0); with and without keys, and with
    keys given as a table of every key (``known``: one more key than the rows have).
    ``here``: the carry from the values read in this process (per key) instead of a Spark
    aggregate, in batches of that many rows (first_reaching)."""
    keys = keys[: len(values)] if keys else None
    vals = [v * spread if i % 7 == 3 else v for i, v in enumerate(values)]
    data = [(i, keys[i] if keys else None, v, i) for i, v in enumerate(vals)]
    df = spark.createDataFrame(data, f"i long, k string, v long, {SEQ} long").repartition(3)
    every = None
    if keys and known:
        every = spark.createDataFrame([(k,) for k in {*keys, "unseen"}], "k string")
    reach = None
    if here:
        key = keys or [None] * len(vals)

        def times(k):
            mine = [i for i in range(len(vals)) if key[i] == k]
            for at in range(0, len(mine), here):
                got = mine[at : at + here]
                yield np.array(got, np.int64), np.array([vals[i] for i in got], np.int64)

        def reach(thresholds):
            found = {k: first_reaching(lambda k=k: times(k), thresholds) for k in set(key)}
            return {(k,) if keys else (): f for k, f in found.items()}

    rows, step = kept_in_parts(
        df, "v", width, SEQ, "keep", ("k",) if keys else (), keys=every, reach=reach
    )
    got = apply_in_parts(rows, step).collect()
    want = _kept_by_arrival(vals, width, keys)
    order = sorted(range(len(vals)), key=lambda i: (vals[i], i))
    assert [r["i"] for r in sorted(got, key=lambda r: (r[PART], r["v"], r["i"]))] == order
    assert {r["i"]: r["keep"] for r in got} == dict(enumerate(want))


I64 = (-(1 << 63), (1 << 63) - 1)


@given(
    found=st.dictionaries(
        st.integers(-3, 6), st.lists(st.integers(-1, 50), min_size=0, max_size=6), min_size=1
    ),
    rows=st.lists(st.sampled_from([*range(-4, 8), *I64]), min_size=1, max_size=30),
    part=st.integers(0, 7),
    typ=st.sampled_from(["int8", "int32", "int64", "uint32"]),
)
def test_carry_of_one_integer_key_is_each_rows_keys_carry(found, rows, part, typ):
    """With one integer key (merge's sources) the carry is looked up by number: per row,
    its key's carry in the part, -1 where the key has none (not in ``found``, a part past
    its array, or -1 there); any int64 value, and narrower integer columns."""
    import pyarrow as pa

    if typ != "int64":
        rows = [v for v in rows if v not in I64 and (v >= 0 or typ != "uint32")] or [0]
    carry = Carry(("k",), (0, 1, 0), {(k,): np.array(f, np.int64) for k, f in found.items()})
    table = pa.table({"k": pa.array(rows, typ), PART: pa.array([part] * len(rows), pa.int64())})
    got = carry.of(table)
    want = [found[v][part] if v in found and part < len(found[v]) else -1 for v in rows]
    assert got.tolist() == want


def test_kept_in_parts_with_the_carry_found_here_reads_its_input_once(spark):
    """With ``reach`` the carry needs no aggregate over the input: one read, one job."""
    from pyspark.sql import functions as F

    vals = [i * 7919 % 1000 for i in range(1000)]
    df = spark.range(0, 1000, numPartitions=4).select(
        (F.col("id") * 7919 % 1000).alias("v"), F.col("id").alias(SEQ)
    )

    def times():
        yield np.arange(1000), np.array(vals, np.int64)

    rows, step = kept_in_parts(
        df, "v", 50, SEQ, "keep", reach=lambda t: {(): first_reaching(times, t)}
    )
    got = apply_in_parts(rows, step)
    keep = {r[SEQ]: r["keep"] for r in got.collect()}
    assert keep == dict(enumerate(_kept_by_arrival(vals, 50)))
    plan = got._jdf.queryExecution().executedPlan().toString()  # (run: the final plan)
    assert plan.split("== Initial Plan ==")[0].count("Range (0, 1000") == 1


@given(
    times=st.lists(st.integers(-50, 50), max_size=40),
    thresholds=st.lists(st.integers(-60, 60), max_size=10),
    batch=st.integers(1, 7),
)
def test_first_reaching_is_the_first_arrival_at_or_above(times, thresholds, batch):
    """Per ascending threshold, the first arrival whose time is at or above it (-1: none),
    whatever the batches (empty ones too)."""
    thresholds = np.array(sorted(thresholds), np.int64)

    def batches():
        for at in range(0, len(times), batch):
            got = np.array(times[at : at + batch], np.int64)
            yield np.arange(at, at + len(got)) + 100, got
            yield np.zeros(0, np.int64), np.zeros(0, np.int64)

    want = [next((i + 100 for i, t in enumerate(times) if t >= x), -1) for x in thresholds]
    assert first_reaching(batches, thresholds).tolist() == want


@given(
    files=st.lists(
        st.lists(st.integers(1, 40), max_size=4), min_size=1, max_size=4
    ),  # per file, its row groups' rows
    most=st.integers(1, 12),
    known=st.booleans(),
)
@example(files=[[12, 13, 25], [24]], most=12, known=True)  # at, one above, twice the limit
def test_sliced_groups_cut_big_row_groups_evenly(files, most, known):
    """Row groups of more than ``most`` rows are cut into the fewest slices of at most
    ``most`` rows, as even as can be (sizes differ by one at most), in order; each
    slice's first _evt_seq is a row of the row group; a file's last row group stays whole
    when its file's rows are not known."""
    groups = []  # (first _evt_seq, rows, whether it is cut)
    for f, sizes in enumerate(files):
        at = f << SEQ_FILE_SHIFT
        for i, n in enumerate(sizes):
            groups.append((at, n, n > most and (known or i + 1 < len(sizes))))
            at += n
    file_rows = [sum(sizes) for sizes in files] if known else []
    got = sliced_groups([g for g, _, _ in groups], file_rows, most)
    assert got == sorted(set(got))
    placed = 0
    for first, n, cut in groups:
        inside = [x for x in got if first <= x < first + n]
        assert inside and inside[0] == first
        placed += len(inside)
        slices = np.diff([*inside, first + n]).tolist()
        if cut:
            assert len(slices) == -(-n // most) and max(slices) - min(slices) <= 1, slices
        else:
            assert slices == [n]
    assert placed == len(got)  # (no slice outside a row group)


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.lists(st.lists(st.integers(-3_000, 3_000), max_size=30), min_size=1, max_size=4),
    batch=st.integers(1, 9),
    unit=st.sampled_from([None, 1, 7, 1000]),
    group=st.integers(1, 12),
)
@example(files=[[5], [], [9, -2]], batch=1, unit=7, group=1)  # an empty file between two
def test_arrivals_here_numbers_files_and_parts(spark, files, batch, unit, group):
    """One pass over the times read here, as local_times gives them (per file, in batches):
    the arrivals before each file, which number every row densely from its _evt_seq (in
    Spark, and for the search's carry), and per part of the arrivals (as bucketer(1, n)
    cuts them) the greatest time floored to the unit; given the row groups (``group`` rows
    each, in every file), the first arrival of each and its greatest time floored."""
    flat = [(f, r, t) for f, ts in enumerate(files) for r, t in enumerate(ts)]
    n = len(flat)

    def times(only=None):
        for f, ts in enumerate(files):
            for at in range(0, len(ts), batch):
                got = np.array(ts[at : at + batch], np.int64)
                seq = (f << SEQ_FILE_SHIFT) + at + np.arange(len(got), dtype=np.int64)
                yield seq, got

    firsts = [
        (f << SEQ_FILE_SHIFT) + r for f, ts in enumerate(files) for r in range(0, len(ts), group)
    ]
    here = arrivals_here(times, unit, n, firsts)
    assert arrivals_here(times, unit, n + 1) is None  # (not the rows the footers count)
    u = unit if unit and unit > 1 else 1
    starts = [a for a, (_, r, _) in enumerate(flat, 1) if r % group == 0]
    tops = [
        max(t - t % u for a, (_, _, t) in enumerate(flat, 1) if s <= a < e)
        for s, e in zip(starts, [*starts[1:], n + 1][: len(starts)], strict=True)
    ]
    if n:
        assert here.group_starts.tolist() == starts and here.group_tops.tolist() == tops
    else:
        assert here.group_starts is None
    assert arrivals_here(times, unit, n).group_starts is None  # (no groups given)
    seqs = [(f << SEQ_FILE_SHIFT) + r for f, r, _ in flat]
    if seqs:
        df = spark.createDataFrame([(s,) for s in seqs], f"{SEQ} long").repartition(3)
        got = {r[SEQ]: r["a"] for r in df.select(SEQ, here.numbers().alias("a")).collect()}
        assert [got[s] for s in seqs] == list(range(1, n + 1))
    want = {}
    for a, (_, _, t) in enumerate(flat, 1):
        p = bucket_number(1, max(n, 1), a)
        want[p] = max(want.get(p, t - t % u), t - t % u)
    assert {p: int(v) for p, v in enumerate(here.tops) if v != NONE} == want
    # the search over _evt_seq, given as arrival numbers
    reach = here.dense(lambda th: {(): np.array([seqs[i] if i >= 0 else -1 for i in th])})
    picks = np.array([-1, *range(n)], np.int64)
    assert reach(picks)[()].tolist() == [-1, *range(1, n + 1)]


def test_kept_in_parts_reads_its_input_twice(spark):
    """The carry's aggregate reads the input once; the rows and their halo copies come
    from one more read (a union with the halo would read it a third time)."""
    from pyspark.sql import functions as F

    df = spark.range(0, 1000, numPartitions=4).select(
        (F.col("id") * 7919 % 1000).alias("v"), F.col("id").alias(SEQ)
    )
    rows, step = kept_in_parts(df, "v", 50, SEQ, "keep")
    got = apply_in_parts(rows, step)
    keep = {r[SEQ]: r["keep"] for r in got.collect()}
    assert keep == dict(enumerate(_kept_by_arrival([i * 7919 % 1000 for i in range(1000)], 50)))
    plan = got._jdf.queryExecution().executedPlan().toString()  # (run: the final plan)
    assert plan.split("== Initial Plan ==")[0].count("Range (0, 1000") == 2


@spark_settings(10, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(st.integers(0, 12), min_size=1, max_size=60),
    width=st.integers(0, 4),
    keys=st.one_of(st.none(), keys_st),
)
@example(values=[9, 2, 9, 1], width=2, keys=None)  # late rows in more than one part
def test_fill_rows_give_the_rows_set_aside_their_values(spark, values, width, keys):
    """kept_in_parts with fill rows (the rows the rule sets aside, with a value each, found
    by another computation): every row set aside gets its own fill row's value, the kept
    rows none, and no fill row comes out as a row."""
    keys = keys[: len(values)] if keys else None
    data = [(i, keys[i] if keys else None, v, i) for i, v in enumerate(values)]
    df = spark.createDataFrame(data, f"i long, k string, v long, {SEQ} long").repartition(3)
    want = _kept_by_arrival(values, width, keys)
    late = [
        (k, v, seq, f"late {i}")
        for (i, k, v, seq), kept in zip(data, want, strict=True)
        if not kept
    ]
    fill = spark.createDataFrame(late, f"k string, v long, {SEQ} long, words string")
    rows, step = kept_in_parts(df, "v", width, SEQ, "keep", ("k",) if keys else (), fill=fill)
    assert isinstance(step, FilledInPart)
    got = apply_in_parts(rows, step).collect()
    assert sorted(r["i"] for r in got) == list(range(len(values)))
    assert {r["i"]: r["words"] for r in got} == {
        i: None if kept else f"late {i}" for i, kept in enumerate(want)
    }


def test_fill_rows_that_disagree_with_the_search_stop_the_run():
    """A row set aside without its fill row, or a fill row without its row, is an internal
    error (two computations of one rule disagree), not a row without its words."""
    import pyarrow as pa

    from evtime.engine.scan import FILL, PROBE
    from evtime.errors import EvtimeError

    step = FilledInPart(KeptInPart("v", SEQ, 0, "keep"), ("words",))

    def part(fills: list[int]) -> pa.Table:  # rows 5, 9, 2 (2 is set aside), and fills
        v = [5, 9, 2, *[2] * len(fills)]
        table = pa.table(
            {
                "v": v,
                SEQ: [0, 1, 2, *fills],
                PROBE: [False] * 3 + [True] * len(fills),
                FILL: pa.array([None] * 3 + [True] * len(fills), pa.bool_()),
                "words": pa.array([None] * 3 + [f"late {a}" for a in fills], pa.string()),
                PART: [0] * len(v),
            }
        )
        return table.sort_by([("v", "ascending"), (SEQ, "ascending")])  # (as in a part)

    (good,) = step(part([2]))
    assert good.column("v").to_pylist() == [2, 5, 9]
    assert good.column("words").to_pylist() == ["late 2", None, None]
    for fills, what in [([], "has no fill row"), ([2, 7], "2 fill rows for 1")]:
        with pytest.raises(EvtimeError, match=f"internal error in part 0: .*{what}"):
            list(step(part(fills)))


def test_kept_with_keys_far_apart_in_value_and_arrival():
    """Keys whose values or arrivals span most of int64 are searched by rank (moving each
    key's values above the last key's would leave int64): the same answers."""
    import numpy as np

    big = 1 << 61
    keys = ["a", "b", "a", "b", "c", "c", "a", "b"]
    far = [-big, 3, big, 1, big - 5, -big + 2, 0, 2]  # (by rank)
    early = [-(1 << 63) + 10 * v for v in (1, 3, 9, 1, 5, 2, 0, 2)]  # (moved: stays in int64)
    for values, arrivals in [
        (far, list(range(8))),
        (far, [big * (i % 3 - 1) + i for i in range(8)]),
        (early, list(range(8))),
    ]:
        order = sorted(range(8), key=lambda i: (keys[i], values[i], arrivals[i]))
        code = np.array([ord(keys[i]) - ord("a") for i in order])
        step = KeptInPart("v", "a", 4, "keep", ("k",))
        lead = np.array([values[i] for i in order], np.int64)
        arrival = np.array([arrivals[i] for i in order], np.int64)
        got, least, found = step.search(lead, arrival, code)
        assert np.array_equal(got, step.kept(lead, arrival, code))
        for at, i in enumerate(order):  # the least arrival of the key above value + 4
            above = [
                arrivals[j] for j in range(8) if keys[j] == keys[i] and values[j] > values[i] + 4
            ]
            assert (least[at] if found[at] else None) == (min(above) if above else None)
        by_arrival = sorted(range(8), key=lambda i: arrivals[i])
        want = dict(
            zip(
                by_arrival,
                _kept_by_arrival([values[i] for i in by_arrival], 4, [keys[i] for i in by_arrival]),
                strict=True,
            )
        )
        assert [bool(g) for g in got] == [want[i] for i in order]


def test_kept_before_counts_every_part_or_says_where(tmp_path):
    """explain adjust's output positions start from the kept rows of the parts before; the
    counts the search tasks leave must account for every row read, or the run stops with
    the way out (a staging directory the executors share)."""
    from evtime.engine.adjust import kept_before
    from evtime.errors import OutputError

    (tmp_path / "kept-000000").write_text("3 4\n")
    (tmp_path / "kept-000002").write_text("5 5\n")
    (tmp_path / "kept-000007.ab12").write_text("9 9\n")  # (a file being written: not read)
    before = kept_before(str(tmp_path), 9)
    assert list(before[:4]) == [0, 3, 3, 8] and before[7] == 8 and len(before) == 1024
    with pytest.raises(OutputError, match="counted 9 of 10 rows.*EVTIME_STAGING"):
        kept_before(str(tmp_path), 10)


def test_a_part_without_rows_leaves_no_count(tmp_path):
    """(on a staging URL each count file is a request to write it and one per task to read
    it: a part of only probe rows, as most of the 1024 parts of a small input are, leaves
    none, and kept_before reads no file for it)"""
    import pyarrow as pa

    from evtime.engine.adjust import ARRIVAL, CountedInPart, kept_before
    from evtime.engine.scan import PROBE

    search = KeptInPart("v", ARRIVAL, 15, "keep", least="rel", rank="rank")
    counted = CountedInPart(search, str(tmp_path))
    probes = pa.table({"v": [99], ARRIVAL: [7], PART: [3], PROBE: [True]})
    rows = pa.table({"v": [10, 20], ARRIVAL: [1, 2], PART: [5, 5], PROBE: [False, False]})
    assert sum(b.num_rows for b in counted(probes)) == 0
    assert sum(b.num_rows for b in counted(rows)) == 2
    assert sorted(f.name for f in tmp_path.iterdir()) == ["kept-000005"]
    assert (tmp_path / "kept-000005").read_text() == "2 2\n"
    assert kept_before(str(tmp_path), 2)[6] == 2  # (every row accounted for, none missing)


def test_search_results_go_to_their_parts_of_arrivals_whole(tmp_path):
    """explain adjust's search sends its results per part of arrivals, packed: every row of
    a part of arrivals gets the least arrival above it, its place among its output part's
    kept rows and that part; a row without results stops the run (no row is lost)."""
    import pyarrow as pa

    from evtime.engine.adjust import (
        ARRIVAL,
        BLOB,
        CountedInPart,
        ResultsInPart,
        found,
        results_of,
    )
    from evtime.engine.scan import PROBE

    # one part of the output (part 5): arrivals 1..6 by value, a probe of a later part
    part = pa.table(
        {
            "v": [10, 20, 30, 40, 50, 60, 99],
            ARRIVAL: [4, 2, 6, 1, 3, 5, 7],
            PART: [5] * 7,
            PROBE: [False] * 6 + [True],
        }
    )
    search = KeptInPart("v", ARRIVAL, 15, "keep", least="rel", rank="rank")
    step = ResultsInPart(CountedInPart(search, str(tmp_path)), last=6)  # (a part per row)
    (got,) = step(part)
    assert (tmp_path / "kept-000005").read_text() == "3 6\n"  # (kept, rows: counted)
    assert got.column(PART).to_pylist() == [0, 1, 2, 3, 4, 5]  # (arrival 1..6: parts 0..5)
    assert {bytes(b)[:8] for b in got.column(BLOB).to_pylist()} == {(5).to_bytes(8, "little")}
    # the rows of arrival parts 2 and 3 (arrivals 3 and 4), as one part of arrivals
    results = got.filter(pa.array([p in (2, 3) for p in got.column(PART).to_pylist()]))
    results = results_of(results.column(BLOB).to_pylist())
    least, rank, vpart = found(np.array([3, 4]), results)
    # arrival 3 (50): kept (arrivals 1, 3 and 5), 2nd in value order, the probe's arrival 7
    # (99) the first above 65; arrival 4 (10): arrival 1 (40) is above 25 and earlier
    assert least.tolist() == [7, 1] and rank.tolist() == [2, 0] and vpart.tolist() == [5, 5]
    with pytest.raises(Exception, match="internal error: 2 search results for 3 rows"):
        found(np.array([3, 4, 5]), results)
    assert BLOB in got.schema.names


def test_search_results_by_row_group_go_to_files_read_where_the_rows_are(tmp_path):
    """Explained where they are read (evtime.engine.adjust.parts.InFiles), the rows of
    each row group find the search's results for them in files, one per (row group, part
    of the output), left by the search's own job (ResultsInFiles); each row's row group
    is its part of arrivals, from its arrival number."""
    import pyarrow as pa

    from evtime.engine.adjust import (
        ARRIVAL,
        BLOB,
        AdjustSpec,
        CountedInPart,
        Explainer,
        InFiles,
        ResultsInFiles,
        results_of,
    )
    from evtime.engine.scan import PROBE

    part = pa.table(
        {
            "v": [10, 20, 30, 40, 50, 60],
            ARRIVAL: [4, 2, 6, 1, 3, 5],
            PART: [5] * 6,
            PROBE: [False] * 6,
        }
    )
    search = KeptInPart("v", ARRIVAL, 15, "keep", least="rel", rank="rank")
    starts = np.array([1, 3, 5])  # (row groups of arrivals 1-2, 3-4, 5-6)
    (got,) = ResultsInFiles(CountedInPart(search, str(tmp_path)), starts)(part)
    assert got.to_pydict() == {PART: [5], "rows": [6]}
    names = sorted(f.name for f in tmp_path.iterdir())
    assert names == ["kept-000005", *(f"res-{g:06d}" for g in range(3))]
    assert [f.name for f in (tmp_path / "res-000001").iterdir()] == ["000005"]
    # arrivals 3, 4 (row group 1): 50 kept, 2nd in value order, nothing later above 65;
    # 10 discarded, arrival 1 (40) is above 25 and earlier
    a, least, rank, vpart = results_of([(tmp_path / "res-000001" / "000005").read_bytes()])
    assert (a.tolist(), least.tolist(), rank.tolist(), vpart.tolist()) == (
        [4, 3],
        [1, -1],
        [0, 2],
        [5, 5],
    )  # (in the part's order)
    step = Explainer(AdjustSpec("nsec", 15), ("f",), (), 6, InFiles(str(tmp_path), starts))
    batch = pa.RecordBatch.from_pydict({ARRIVAL: [2, 3, 4, 5, 6], PART: [-1] * 5})
    assert step.numbered(batch).column(PART).to_pylist() == [0, 1, 1, 2, 2]
    assert BLOB not in step.columns


def test_int64_arrays_to_numpy_and_back_without_pandas():
    """The streamed scans' conversions: nulls, slices (offsets) and narrower integers; and
    the module the Python workers import for them brings in neither pandas nor pyspark.sql
    (their imports are most of a worker's start)."""
    import subprocess
    import sys

    import numpy as np
    import pyarrow as pa

    from evtime.engine.running import filled, int64_array

    a = pa.array([5, None, -3, 7, None, 2**62], pa.int64()).slice(1, 4)
    assert filled(a, -1).tolist() == [-1, -3, 7, -1]
    assert filled(pa.array([1, None, 3], pa.int32()), 0).tolist() == [1, 0, 3]
    assert filled(pa.array([], pa.int64()), 0).tolist() == []
    x = np.array([4, 0, 9])
    assert int64_array(x, x == 0).to_pylist() == [4, None, 9]
    assert int64_array(x).to_pylist() == [4, 0, 9] and int64_array(x).null_count == 0
    code = (
        "import sys, numpy as np\n"
        "from evtime.engine.running import RunningFromGroups, int64_array\n"
        "seq = int64_array(np.arange(5)); v = int64_array(np.array([3, 1, 4, 1, 5]))\n"
        "step = RunningFromGroups(np.array([0]), np.array([2]), False)\n"
        "(out,) = step(iter([(seq, v)]))\n"
        "assert out.to_pylist() == [2, 3, 3, 4, 4], out\n"
        "print('pandas' in sys.modules, 'pyspark.sql' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"], done.stdout


@pytest.mark.parametrize(("n", "top"), [(1, 0), (3, 9), (8, 1023), (5, 2)])
def test_in_ranges_puts_each_run_of_parts_in_its_partition(spark, n, top):
    """Partition i holds exactly the parts of Ranges.parts(i), in order: every part, and
    no partition merged by adaptive execution."""
    from pyspark.sql import functions as F

    from evtime.engine.scan import Ranges, in_ranges

    ranges = Ranges(n, top)
    assert [p for i in range(n) for p in ranges.parts(i)] == list(range(top + 1))
    assert all(ranges.of_part(p) == i for i in range(n) for p in ranges.parts(i))
    df = spark.range(0, top + 6).select(F.col("id").alias(PART))  # (parts above top too)
    got = in_ranges(df, ranges).select(PART, F.spark_partition_id().alias("i")).collect()
    assert in_ranges(df, ranges).rdd.getNumPartitions() == n
    assert sorted(r[PART] for r in got) == list(range(top + 6))
    assert all(r["i"] == ranges.of_part(r[PART]) for r in got)


EDGE = -(1 << 63), (1 << 63) - 1  # (values 2**63 or more apart: no overflow, issue 47)


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(1, 1), (1, 7), (1, 5000), (-(10**12), 10**15), EDGE, (EDGE[0] + 5, EDGE[1] - 2),
     (-7, EDGE[1]), (EDGE[0] + 1, -3)],
)  # fmt: skip
def test_bucket_number_is_the_bucketers_bucket(spark, lo, hi):
    import numpy as np
    from pyspark.sql import functions as F

    from evtime.engine.scan import bucket_number, bucketer

    shift = max(0, (hi - lo).bit_length() - 10)
    values = {lo - 1, lo, lo + 1, (lo + hi) // 2, hi - 1, hi, hi + 1, *EDGE}
    values |= {lo + (k << shift) + d for k in (1, 2, 511, 512, 1022, 1023) for d in (-1, 0, 1)}
    values = sorted(v for v in values if EDGE[0] <= v <= EDGE[1])
    df = spark.createDataFrame([(v,) for v in values], "v long")
    got = df.select("v", bucketer(lo, hi)(F.col("v")).alias("b")).collect()
    want = {v: bucket_number(lo, hi, v) for v in values}  # (Python ints: exact)
    assert {r["v"]: r["b"] for r in got} == want
    here = bucket_number(lo, hi, np.array(values, np.int64))
    assert dict(zip(values, here.tolist(), strict=True)) == want


def test_hash_long_is_sparks_hash(spark):
    """(in_ranges relies on it to place every run of parts in its own partition)"""
    from pyspark.sql import functions as F

    from evtime.engine.scan import hash_long

    values = [0, 1, -1, 42, 2**31, -(2**31) - 1, 2**62 + 12345, -(2**63), 2**63 - 1]
    values += list(range(2, 300, 7))
    df = spark.createDataFrame([(v,) for v in values], "v long")
    got = {r["v"]: r["h"] for r in df.select("v", F.hash("v").alias("h")).collect()}
    assert got == {v: hash_long(v) for v in values}
