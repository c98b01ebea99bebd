"""explain adjust without a prefix scan: the rows by arrival (:func:`by_arrival`), then
one of four ways, which :func:`evtime.engine.adjust.choose.choose_in_parts` picks
(:func:`all_here`, :func:`from_plan`, :func:`in_files`, :func:`in_arrival_parts`).

* A run that reads its input in this process explains every row here, as one part
  (:func:`all_here`, :class:`AllHere`): the search in a sorted array
  (:func:`~evtime.engine.scan.least_above`), no Spark job but the one that fetches the rows.

* The search of :func:`~evtime.engine.scan.kept_in_parts`, in the output's parts, gives
  each row the least arrival above its evtime + range*unit: the row is kept when there is
  none or it comes later (then it is the arrival that releases it), and the kept rows'
  places in their part.  It reads only the keys, evtime and arrival numbers.  Each part's
  kept rows are counted (:class:`CountedInPart`); the results go on, in the same job,
  packed (:class:`ResultsInPart`), to the parts of arrivals, where the whole rows, read
  again, meet them.  Those tasks start once every part is counted, and add the count of
  the parts before to the places: the output positions.
* The reference time is the running maximum of evtime over the key's arrivals: each part
  of arrivals starts from a probe row (arrival 0) with the maximum of the parts before it
  (a small aggregate), and the step takes the running maximum over the part.
* Without keys, the arrival numbers, the search's carry and the reference times the parts
  of arrivals start from come from one pass over the times read here
  (:func:`~evtime.engine.scan.arrivals_here`), not from Spark jobs.
* In place (the input's local Parquet row groups, each whole in one task, no bad rows set
  aside), when that pass found more than one row group (those of more than
  :data:`~evtime.engine.adjust.core.IN_PLACE_ROWS` rows in slices): the rows are explained
  where they are read (by the writing task itself, :class:`FromRead`), neither shuffled
  nor sorted, with the search's
  results from a plan of the rows near the groups' edges
  (:class:`~evtime.engine.adjust.in_place.FromPlan`, no search job) or else from files the
  search's own job left by row group (:class:`ResultsInFiles`, :class:`InFiles`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from evtime.columns import CHUNK, FILE, PART, SEQ, T
from evtime.engine import present
from evtime.engine import saturate as sat
from evtime.engine.adjust import in_place
from evtime.engine.adjust.core import (
    ARRIVAL,
    EVT,
    KEEP,
    RANK,
    REL,
    AdjustSpec,
    evtime_of,
    in_place_groups,
    suits_in_place,
    tops_before,
)
from evtime.engine.running import NONE, values_of
from evtime.engine.scan import (
    AFTER_PARTS,
    ArrivalsHere,
    AsRead,
    Carry,
    KeptInPart,
    Ranges,
    apply_in_parts,
    arrival_numbers,
    arrival_of,
    arrivals_here,
    bucket_number,
    bucketer,
    carry_here,
    in_ranges,
    kept_in_parts,
    key_numbers,
    least_above,
    reach_from,
    running,
    stacked_by_key,
    value_limits,
)
from evtime.units import truncated_range


@dataclass(frozen=True)
class EarlyExplain:
    """What :func:`by_arrival` takes from one pass over the times read here, and the
    search's carry, found while Spark starts (:func:`early_explain`)."""

    arrivals: int
    here: ArrivalsHere
    carry: Carry | None
    plan: object = None  # evtime.engine.adjust.in_place.ExplainPlan: no carry needed


def early_explain(spec: AdjustSpec, known) -> EarlyExplain | None:
    """:class:`EarlyExplain` for ``known.good`` arrivals (see :func:`early_carry`)."""
    limits = truncated_range((known.least, known.greatest), spec.unit_ns)
    if limits is None or spec.keys:
        return None
    firsts = in_place_groups(known.groups or (), known.file_rows)
    here = arrivals_here(known.times, spec.unit_ns, known.good, firsts)
    if here is None:
        return None
    as_read = AsRead(known.groups or (), known.times, known.file_rows)
    plan = _explain_plan(spec, as_read, known.good, here, limits[1])
    if plan is not None:
        return EarlyExplain(known.good, here, None, plan)
    reach = here.dense(reach_from(known.times, spec.unit_ns))
    return EarlyExplain(known.good, here, carry_here(reach, (), *limits, spec.width))


@dataclass(frozen=True)
class ByArrival:
    """What every way of explaining in parts starts from (:func:`by_arrival`): ``rows``
    known by their arrival number (not ``numbered``: by ``_evt_seq``), with their evtime
    and their own columns under the names they are shown by; ``keys`` under those names;
    the pass over the times read here and the search's carry it found (``here``,
    ``carry``: None without it); the evtimes' bounds (``limits``); and what they came
    from."""

    spec: AdjustSpec
    sources: tuple[str, ...]
    keys: tuple[str, ...]
    arrivals: int
    rows: DataFrame
    here: ArrivalsHere | None
    carry: Carry | None
    limits: tuple
    as_read: AsRead | None = None
    early: EarlyExplain | None = None
    own: tuple[tuple[str, str], ...] = ()  # the rows' own columns and their shown names


def by_arrival(
    df: DataFrame,
    spec: AdjustSpec,
    sources: Sequence[str],
    own: Sequence[tuple[str, str]],
    arrivals: int,
    limits: tuple[int, int] | None = None,
    as_read: AsRead | None = None,
    early: EarlyExplain | None = None,
    numbered: bool = True,
) -> ByArrival:
    """:class:`ByArrival` for ``arrivals`` rows of ``df`` (see the module).  ``own``: the
    rows' own columns and their shown names; ``as_read`` / ``early``: the times read here,
    and the pass over them made already (:func:`early_explain`); not ``numbered``: the
    rows keep ``_evt_seq`` instead of an arrival number (:func:`all_here` numbers them).
    Raises OverflowError when a bound leaves the int64 range."""
    keys = tuple(dict(own)[k] for k in spec.keys)
    here, carry = _pass_here(spec, arrivals, as_read, early, keys)
    rows = _by_arrival(df, spec, own, here, as_read, numbered)
    lims = _limits(rows, spec, limits)
    return ByArrival(
        spec, tuple(sources), keys, arrivals, rows, here, carry, lims, as_read, early, tuple(own)
    )


def plan_of(made: ByArrival):  # -> in_place.ExplainPlan | None
    """The plan of the rows near the row groups' edges
    (:func:`~evtime.engine.adjust.in_place.explain_plan`), found while Spark started or
    now; None without the times read here, without rows, or when the row groups do not
    fit."""
    here, early = made.here, made.early
    if here is None or made.limits[0] is None:
        return None
    plan = early.plan if early is not None and early.here is here else None
    if plan is None and early is None:
        plan = _explain_plan(made.spec, made.as_read, made.arrivals, here, made.limits[1])
    return plan


def suits_files(made: ByArrival) -> bool:
    """Whether the row groups the pass over the times read here found suit explaining
    where they are read (:func:`~evtime.engine.adjust.core.suits_in_place`)."""
    here = made.here
    return here is not None and suits_in_place(here, made.arrivals, len(made.as_read.groups))


def all_here(made: ByArrival) -> tuple[DataFrame, Explainer]:
    """Every row as one part, explained in this process (the rows of a run that reads its
    input here come here to be written), ``made`` not ``numbered`` (:func:`by_arrival`):
    the arrivals numbered and searched all at once (:class:`AllHere`).  Raises
    OverflowError when a search value leaves int64."""
    hi = made.limits[1]
    if hi is not None and hi > sat.MAX - made.spec.width - 1:
        raise OverflowError(f"{EVT} + {made.spec.width} leaves the int64 range")
    # (one part is one Spark partition, as evtime.engine.scan.apply_in_parts reads parts:
    # the rows of a run that reads here, at most EVTIME_DRIVER_IO_MAX bytes of input, all
    # in this process already; never chosen for rows read by Spark's tasks)
    rows = made.rows.drop(EVT).withColumn(PART, F.lit(0).cast("long")).coalesce(1)
    return rows, Explainer(made.spec, made.sources, made.keys, made.arrivals, AllHere())


@dataclass(frozen=True)
class AllHere:
    """The search's results for every row at once (:func:`all_here`): a row is kept when
    its evtime is at least its key's reference time before it minus the range (the first
    arrival of a key: always); the arrival that releases it is the least arrival of its key
    whose evtime is above its own + range (:func:`~evtime.engine.scan.least_above`; no
    earlier arrival's is, or it would not be kept); its output position its rank among the
    kept rows by ``(evtime, arrival)``."""

    READS = (SEQ,)

    def results(self, step: Explainer, part: pa.Table) -> tuple[pa.Table, tuple]:
        """The part in arrival order, numbered (``_evt_seq`` increases with the arrivals,
        and every arrival is here)."""
        part = part.take(pc.sort_indices(part.column(SEQ)))
        if ARRIVAL in part.column_names:  # (a null column: bad rows set aside)
            part = part.drop_columns([ARRIVAL])
        arrival = pa.array(np.arange(1, part.num_rows + 1, dtype=np.int64))
        return part.append_column(ARRIVAL, arrival), ()

    def searched(self, step, rows, evt, before, known, ref, results):
        width = step.spec.width
        arrival = values_of(rows.column(ARRIVAL))
        keep = evt >= np.where(known, before, evt) - width
        order, key = key_numbers(rows, step.keys)
        if order is None:
            order = np.argsort(evt, kind="stable")
        else:  # (by key, then evtime)
            by = np.lexsort((evt[order], key))
            order, key = order[by], key[by]
        least = np.full(len(evt), -1, np.int64)
        above, found = least_above(evt[order], arrival[order], width, key)
        least[order] = np.where(found, above, -1)
        kept = np.flatnonzero(keep)
        kept = kept[np.lexsort((arrival[kept], evt[kept]))]
        pos = np.zeros(len(evt), np.int64)
        pos[kept] = np.arange(1, len(kept) + 1)
        return least, keep, pos


def from_plan(made: ByArrival, plan) -> tuple[DataFrame, Explainer]:
    """Each row group explained where it is read, with the search's results from ``plan``
    (:func:`plan_of`): no search job."""
    return _where_read(made, in_place.FromPlan(made.here.group_starts, plan))


def in_files(made: ByArrival, counts: str) -> tuple[DataFrame, Explainer]:
    """Runs the search (one Spark job), its results left by row group in ``counts`` (a
    directory the tasks and this process share), then each row group explained where it
    is read, with its results from those files (:class:`InFiles`)."""
    from evtime.engine import scan
    from evtime.errors import EvtimeError

    parts, search = _search(made)
    starts, arrivals = made.here.group_starts, made.arrivals
    step = ResultsInFiles(CountedInPart(search, counts), starts)
    got = sum(r["rows"] for r in scan.collect_few(apply_in_parts(parts, step)))
    if got != arrivals:
        raise EvtimeError(f"internal error: the search found {got} of {arrivals} rows")
    return _where_read(made, InFiles(counts, starts))


def _where_read(made: ByArrival, source) -> tuple[DataFrame, Explainer]:
    """The rows as read and the :class:`Explainer` of each row group where it is read,
    the search's results from ``source``."""
    from evtime.steps import EachPart

    here = made.here
    rows = made.rows.drop(EVT).withColumn(PART, F.lit(-1).cast("long"))
    shown = {s: c for c, s in made.own}
    names = tuple((c, None if c == ARRIVAL else shown.get(c, c)) for c in rows.columns)
    step = Explainer(
        made.spec,
        made.sources,
        made.keys,
        made.arrivals,
        source,
        EachPart(len(here.group_starts)),
        tops_before(here.group_tops),
        FromRead(tuple(n for n in names if n[0] != PART), here.before),
    )
    return rows, step


@dataclass(frozen=True)
class FromRead:
    """:func:`_where_read`'s rows made in Arrow from a batch as the input is read (so the
    writer's tasks may read them themselves, :class:`evtime.io.writer.TaskRows`): per
    ``(name, column as read)`` of ``names``, that column, or (None) the arrival number
    from ``_evt_seq`` (``before``: the arrivals of the files before each file)."""

    names: tuple[tuple[str, str | None], ...]
    before: np.ndarray = field(compare=False)

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        cols = {}
        for name, read in self.names:
            if read is None:
                arrival = arrival_of(self.before, values_of(batch.column(SEQ)))
                cols[name] = pa.array(arrival, pa.int64())
            else:
                cols[name] = batch.column(read)
        return pa.RecordBatch.from_pydict(cols)


def in_arrival_parts(made: ByArrival, counts: str) -> tuple[DataFrame, Explainer]:
    """The search and the rows shuffled into parts of arrivals, each explained by the
    writer's :class:`Explainer` (the search's results sent on in the same job,
    :class:`InParts`; ``counts``: a directory the tasks and this process share)."""
    parts, search = _search(made)
    step = Explainer(made.spec, made.sources, made.keys, made.arrivals, InParts(counts))
    return _in_arrival_parts(made.rows, parts, search, step, made.here)


def _search(made: ByArrival) -> tuple[DataFrame, KeptInPart]:
    """The search of :func:`~evtime.engine.scan.kept_in_parts` over the keys, evtime and
    arrival numbers, from the carry found here when it fits.  Raises OverflowError when
    search values leave the int64 range."""
    spec, here, carry, lims = made.spec, made.here, made.carry, made.limits
    reach = here.dense(reach_from(made.as_read.times, spec.unit_ns)) if here else None
    if carry is not None and carry.fits((), *lims, spec.width):
        reach = carry
    narrow = made.rows.select(*made.keys, EVT, ARRIVAL)
    return kept_in_parts(
        narrow, EVT, spec.width, ARRIVAL, KEEP, made.keys, lims, REL, RANK, reach=reach
    )


def _pass_here(spec, arrivals: int, as_read, early, keys) -> tuple:
    """The pass over the times read here (``early``'s, or made now) and the search's carry
    it found (no keys, the times readable here; else None, None)."""
    if as_read is None or as_read.times is None or keys:
        return None, None
    if early is not None and early.arrivals == arrivals:
        return early.here, early.carry
    firsts = in_place_groups(as_read.groups, as_read.file_rows)
    return arrivals_here(as_read.times, spec.unit_ns, arrivals, firsts), None


def _by_arrival(
    df: DataFrame, spec: AdjustSpec, own, here, as_read, numbered: bool = True
) -> DataFrame:
    """The rows known by their arrival number (no SEQ through the shuffles; not
    ``numbered``: by SEQ), with their evtime, their own columns under the names they are
    shown by."""
    if not numbered:
        rows = df.drop(CHUNK)
    elif here:
        rows = df.withColumn(ARRIVAL, here.numbers()).drop(CHUNK, SEQ)
    else:
        rows = arrival_numbers(df, ARRIVAL, as_read).drop(CHUNK, SEQ)
    rows = rows.withColumn(EVT, evtime_of(spec))
    return rows.withColumnsRenamed({c: s for c, s in own if c != s})


def _limits(rows: DataFrame, spec: AdjustSpec, limits) -> tuple:
    """The evtimes' bounds (a job, when not known); OverflowError when a bound leaves int64."""
    lims = limits or value_limits(rows, EVT)
    if lims[0] is not None and lims[0] - spec.width < -(1 << 63):
        raise OverflowError(f"{EVT} - {spec.width} leaves the int64 range")
    return lims


def _in_arrival_parts(rows, parts, search, step: Explainer, here) -> tuple[DataFrame, Explainer]:
    """The search's results (a few rows per part of the output: one per part of arrivals
    it has rows of, numbers packed) sent to the parts of arrivals, each led by the
    reference time per key of the parts before it; ``step`` laid out over them."""
    last = max(step.arrivals, 1)
    counted = CountedInPart(search, step.source.counts)
    found = apply_in_parts(parts, ResultsInPart(counted, last))
    in_arrivals = bucketer(1, last)(F.col(ARRIVAL))
    # (evtime is made again from the time where it is shown: one column less to move)
    whole = rows.drop(EVT).withColumn(PART, in_arrivals)
    tops = None
    if here:  # (given to the step, not added as probe rows)
        tops = tops_before(here.tops)
    else:
        whole = whole.unionByName(_probes(rows, step.keys, in_arrivals), allowMissingColumns=True)
    found = found.withColumn(ARRIVAL, F.lit(0).cast("long"))
    rows = whole.unionByName(found, allowMissingColumns=True)
    # the parts of arrivals in runs, one per Spark partition, in order: each run can be
    # added to the output as soon as its task is done (arrival numbers are dense)
    n = int(rows.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    ranges = Ranges(n, bucket_number(1, last, last))
    step = replace(step, ranges=ranges, tops=tops)
    return in_ranges(rows, ranges).sortWithinPartitions(PART, ARRIVAL), step


def _probes(rows: DataFrame, keys, in_arrivals) -> DataFrame:
    """Per part of arrivals and key, a probe row (arrival 0) carrying the greatest evtime
    of the parts before it as its time (an evtime is its own evtime)."""
    top = rows.groupBy(*keys, in_arrivals.alias(PART)).agg(F.max(EVT).alias("_top"))
    carry = running(top, keys, PART, {EVT: ("max", "_top")}).where(F.col(EVT).isNotNull())
    return carry.select(*keys, F.col(EVT).alias(T), PART, F.lit(0).cast("long").alias(ARRIVAL))


def _explain_plan(spec: AdjustSpec, as_read: AsRead, arrivals: int, here: ArrivalsHere, hi: int):
    """:func:`~evtime.engine.adjust.in_place.explain_plan` when the row groups ``here``
    found fit (see :func:`~evtime.engine.adjust.in_place.fits`), else None."""
    if spec.keys or not in_place.fits(here, arrivals, len(as_read.groups), spec.width):
        return None
    return in_place.explain_plan(as_read.times, spec.unit_ns, spec.width, arrivals, here, hi)


@dataclass(frozen=True)
class CountedInPart:
    """:class:`~evtime.engine.scan.KeptInPart` (with a ``rank``) that also leaves, per
    part, how many of its rows are kept and how many it has, in the file
    ``<counts>/kept-<part>`` (written whole under another name, then renamed: a task run
    again writes the same numbers).  A part that yields no row leaves no file (its zeros
    add nothing: on a staging URL, each file is a request to write it and one per task to
    read it, and most of the up to 1024 parts of a small input are empty)."""

    search: KeptInPart
    counts: str

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.search.columns, PART)

    def schema(self, schema: StructType) -> StructType:
        return self.search.schema(schema)

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        from evtime.io import staging

        kept = rows = 0
        for b in self.search(part):
            kept += b.num_rows - b.column(self.search.rank).null_count
            rows += b.num_rows
            yield b
        if rows:
            path = staging.join(self.counts, f"kept-{part.column(PART)[0].as_py():06d}")
            staging.put(path, f"{kept} {rows}\n".encode())


BLOB = "_evt_blob"  # explain: the search's results for rows of one part of arrivals


@dataclass(frozen=True)
class ResultsInPart:
    """The rows :class:`CountedInPart` yields for one part of the output, sent on as one
    row per part of the arrivals ``1..last`` (:func:`~evtime.engine.scan.bucketer`) that
    has rows there: ``PART`` that part of arrivals and :data:`BLOB` this part of the output,
    then their arrival numbers, the least arrival above each (-1: none) and each one's
    place among the part's kept rows (0: not kept), as int64 numbers and three arrays
    (:func:`results_of`)."""

    counted: CountedInPart
    last: int

    @property
    def columns(self) -> tuple[str, ...]:
        return self.counted.columns

    def schema(self, schema: StructType) -> StructType:
        from pyspark.sql.types import BinaryType, LongType, StructField

        return StructType([StructField(PART, LongType()), StructField(BLOB, BinaryType())])

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        to, blobs = packed_results(self.counted, part, lambda a: bucket_number(1, self.last, a))
        if len(to):
            yield pa.RecordBatch.from_pydict(
                {PART: to, BLOB: blobs},
                schema=pa.schema([(PART, pa.int64()), (BLOB, pa.binary())]),
            )


def packed_results(
    counted: CountedInPart, part: pa.Table, to: Callable[[np.ndarray], np.ndarray]
) -> tuple[np.ndarray, list[bytes]]:
    """What ``counted`` finds for one part of the output, by the parts of arrivals its rows
    are in (``to``: the part of each arrival number): those parts, ascending, and per each
    its rows' numbers packed (:class:`ResultsInPart`, :func:`results_of`)."""
    search = counted.search
    here = part.column(PART)[0].as_py()
    got = [
        (
            b.column(ARRIVAL).to_numpy(),
            b.column(search.least).fill_null(-1).to_numpy(),
            b.column(search.rank).fill_null(0).to_numpy(),
        )
        for b in counted(part)
    ]
    if not got or not sum(len(a) for a, _, _ in got):
        return np.zeros(0, np.int64), []
    arrival, least, rank = (np.concatenate(c) for c in zip(*got, strict=True))
    dest = to(arrival)
    order = np.argsort(dest, kind="stable")
    dest, packed = dest[order], np.stack([arrival[order], least[order], rank[order]])
    cuts = np.flatnonzero(np.r_[True, dest[1:] != dest[:-1], True])
    head = np.int64(here).tobytes()
    blobs = [head + packed[:, a:b].tobytes() for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    return dest[cuts[:-1]], blobs


def results_of(blobs: Sequence[bytes]) -> tuple[np.ndarray, ...]:
    """The arrays of :class:`ResultsInPart`'s rows (their :data:`BLOB`s) or
    :class:`ResultsInFiles`' files: arrival numbers, least arrivals above (-1: none),
    places among their part's kept rows (0: not kept) and their parts of the output, for
    every row they tell of."""
    numbers = [np.frombuffer(b, np.int64) for b in blobs]
    if not numbers:
        return tuple(np.zeros(0, np.int64) for _ in range(4))
    arrival, least, rank = np.concatenate([x[1:].reshape(3, -1) for x in numbers], axis=1)
    sizes = [(len(x) - 1) // 3 for x in numbers]
    return arrival, least, rank, np.repeat([x[0] for x in numbers], sizes).astype(np.int64)


def kept_before(counts: str, arrivals: int) -> np.ndarray:
    """Per part of the output (0..1023), the kept rows of the parts before it, from the
    files :class:`CountedInPart` left in ``counts``; they must account for every one of
    the ``arrivals``."""
    from evtime.errors import OutputError, in_task
    from evtime.io import staging

    kept = np.zeros(AFTER_PARTS + 1, np.int64)
    rows = 0
    # (not the files being written)
    names = [n for n in staging.names(counts) if n.startswith("kept-") and "." not in n]
    for name, data in zip(
        names, staging.get_all([staging.join(counts, n) for n in names]), strict=True
    ):
        k, n = map(int, data.split())
        kept[int(name[5:]) + 1] = k
        rows += n
    if rows != arrivals:
        raise in_task(  # (raised in a Spark task: the CLI shows the line alone)
            OutputError(
                f"the Spark tasks counted {rows} of {arrivals} rows in {counts}: on a cluster, "
                "set --staging (or EVTIME_STAGING) to a URL or directory this machine and "
                "every executor reach"
            )
        )
    return np.cumsum(kept)[:-1]


_KEPT_BEFORE: dict[str, np.ndarray] = {}  # per counts directory, in a Python worker


@dataclass(frozen=True)
class Explainer:
    """The last step of explaining in parts, in Arrow, on each whole part of arrivals
    (sorted by arrival, probe rows first) or row group: the reference time per key as a
    running maximum, the search's results from ``source`` (:class:`InParts`,
    :class:`InFiles`, :class:`~evtime.engine.adjust.in_place.FromPlan`), then every explain
    column (SPEC §5) and the route (released ``out``, discarded ``discard``); probe rows
    and the engine's columns left out.  ``tops``: without keys, per part of arrivals, the
    greatest evtime of the parts before it (:func:`tops_before`)."""

    spec: AdjustSpec
    sources: tuple[str, ...]
    keys: tuple[str, ...]  # the key columns, as the rows name them
    arrivals: int
    source: object  # where the search's results come from
    ranges: Ranges | None = None  # how its parts are laid out in Spark partitions
    tops: np.ndarray | None = field(default=None, compare=False)
    # its rows from a batch as the input is read, when they are the rows as read
    from_read: FromRead | None = None

    READS = (T, FILE, ARRIVAL)

    @property
    def reads(self) -> tuple[str, ...]:
        return (*self.READS, *self.source.READS)

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads (beside the ones it passes on)."""
        return (*self.keys, *self.reads)

    @property
    def numbered(self):
        """The source's numbering of the parts, when it numbers them (in place), else None
        (the writer then takes the parts as Spark numbered them)."""
        return getattr(self.source, "numbered", None)

    def schema(self, schema: StructType) -> StructType:
        """The Spark schema of the rows it yields, for rows of ``schema``."""
        from pyspark.sql.types import LongType, StringType, StructField

        from evtime.columns import ROUTE

        made = {c: LongType() for c in (*present.EXPLAIN_COLUMNS, "ref")}
        made.update({c: StringType() for c in _TEXT_COLUMNS})
        made[ROUTE] = StringType()
        gone = {*self.reads, *made}
        kept = [f for f in schema.fields if f.name not in gone]
        return StructType([*kept, *(StructField(c, t) for c, t in made.items())])

    def ref_before(self, part: pa.Table, evt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row: the max evtime (``evt``) of the key's earlier arrivals (the part's probe
        rows carry the parts before it), and whether there is one."""
        order, key = key_numbers(part, self.keys)
        if order is None:
            order, key = np.arange(len(evt)), np.zeros(len(evt), np.int64)
        ref, found = np.empty(len(evt), np.int64), np.empty(len(evt), bool)
        if len(evt) == 0:
            return ref, found
        stacked, _, back = stacked_by_key(evt[order], key)
        upto = np.maximum.accumulate(stacked)  # (no key's maximum reaches into the next)
        first = np.r_[True, key[1:] != key[:-1]]
        ref[order] = back(np.where(first, stacked, np.r_[stacked[:1], upto[:-1]]))
        found[order] = ~first
        return ref, found

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        rows, results = self.source.results(self, part)
        yield from self.explained(rows, results)

    def explained(
        self, part: pa.Table, results: tuple[np.ndarray, ...]
    ) -> Iterator[pa.RecordBatch]:
        """The part's rows explained, with the search's ``results`` for them
        (:func:`results_of`)."""

        unit = self.spec.unit_ns
        t = values_of(part.column(T))  # (a probe row's: the evtime it carries)
        evt = t - np.mod(t, unit) if unit > 1 else t
        before, known = self.ref_before(part, evt)
        if self.tops is not None and part.num_rows:  # (before every row of the part)
            top = self.tops[part.column(PART)[0].as_py()]
            if top != NONE:
                before = np.where(known, np.maximum(before, top), top)
                known[:] = True
        real = values_of(part.column(ARRIVAL)) > 0  # (probe rows: arrival 0)
        rows = part if real.all() else part.filter(pa.array(real))
        before, known, evt = before[real], known[real], evt[real]
        ref = np.where(known, np.maximum(before, evt), evt)
        least, keep, pos = self.searched(rows, evt, before, known, ref, results)
        # (the columns made a slice at a time: a whole row group's text would be big)
        for at in range(0, rows.num_rows, EXPLAIN_SLICE):
            cut = slice(at, at + EXPLAIN_SLICE)
            yield from self.made(
                rows.slice(at, EXPLAIN_SLICE),
                evt[cut],
                before[cut],
                ref[cut],
                keep[cut],
                least[cut],
                pos[cut],
            )

    def searched(
        self,
        rows: pa.Table,
        evt: np.ndarray,
        before: np.ndarray,
        known: np.ndarray,
        ref: np.ndarray,
        results: tuple[np.ndarray, ...],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row of a part of arrivals: the least arrival above it (-1: none), whether it
        is kept and its output position (kept rows), from its source."""
        return self.source.searched(self, rows, evt, before, known, ref, results)

    def made(
        self,
        rows: pa.Table,
        evt: np.ndarray,
        before: np.ndarray,
        ref: np.ndarray,
        keep: np.ndarray,
        least: np.ndarray,
        pos: np.ndarray,
    ) -> Iterator[pa.RecordBatch]:
        """``rows`` with the explain columns and the route, from their evtime, the greatest
        evtime before (their key's), the reference time, whether kept, the least arrival
        above (-1: none) and the output position (kept rows)."""
        from evtime.columns import ROUTE
        from evtime.io.timeparse import format_ns
        from evtime.steps import routes

        late = np.flatnonzero(~keep)
        reason = pa.nulls(len(evt), pa.string())
        if len(late):
            words = pc.binary_join_element_wise(
                "late: evtime ",
                format_ns(pa.array(evt[late])),
                " is below the bound ",
                format_ns(pa.array(sat.sub_np(before[late], self.spec.width))),
                f" (reference time - {self.spec.range} {self.spec.unit})",
                "",
            )
            reason = pc.replace_with_mask(reason, pa.array(~keep), words)
        kept = pa.array(keep)
        end = keep & (least < 0)  # released only at the end of the input: by no arrival
        if end.any():
            reason = pc.if_else(pa.array(end), present.HELD_TO_END, reason)
        made = {
            "arrival": rows.column(ARRIVAL),
            "source": pa.array(self.sources, pa.string()).take(rows.column(FILE)),
            "time": rows.column(T),
            "evtime": pa.array(evt),
            "decision": pc.if_else(kept, present.RELEASED, present.DISCARDED),
            "bound": pa.array(sat.sub_np(ref, self.spec.width)),
            "ref": pa.array(ref),
            "released_by": pa.array(least, pa.int64(), mask=~keep | (least < 0)),
            "output_pos": pa.array(pos, mask=~keep),
            "windows": pa.nulls(len(evt), pa.string()),
            "reason": reason,
            ROUTE: routes(~keep, ["out", "discard"]),
        }
        rows = rows.drop_columns([c for c in rows.column_names if c in {*self.reads, *made}])
        for name, col in made.items():
            rows = rows.append_column(name, col)
        yield from rows.to_batches()


EXPLAIN_SLICE = 1 << 16  # rows of a part explained at a time


_TEXT_COLUMNS = ("source", "decision", "windows", "reason")


def _results_of_group(counts: str, group: int) -> str:
    """The directory of one row group's results (:class:`ResultsInFiles`)."""
    from evtime.io import staging

    return staging.join(counts, f"res-{group:06d}")


@dataclass(frozen=True)
class ResultsInFiles:
    """:class:`ResultsInPart` for rows explained where they were read
    (:class:`InFiles`): what each part of the output finds for the rows of each row
    group goes to the file ``<counts>/res-<group>/<part>`` (the numbers of a
    :data:`BLOB`; written whole under another name, then renamed: a task run again writes
    the same numbers), and the part yields one row, its rows' count.  ``starts``: the
    first arrival of every row group, ascending."""

    counted: CountedInPart
    starts: np.ndarray = field(compare=False)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.counted.columns

    def schema(self, schema: StructType) -> StructType:
        from pyspark.sql.types import LongType, StructField

        return StructType([StructField(PART, LongType()), StructField("rows", LongType())])

    def __call__(self, part: pa.Table) -> Iterator[pa.RecordBatch]:
        from evtime.io import staging

        here = part.column(PART)[0].as_py()
        groups, blobs = packed_results(
            self.counted, part, lambda a: np.searchsorted(self.starts, a, "right") - 1
        )
        rows = 0
        for g, blob in zip(groups.tolist(), blobs, strict=True):
            where = _results_of_group(self.counted.counts, g)
            staging.put(staging.join(where, f"{here:06d}"), blob)
            rows += (len(blob) - 8) // 24
        yield pa.RecordBatch.from_pydict({PART: [here], "rows": [rows]})


def found(arrival: np.ndarray, results: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Per row of a part of arrivals (``arrival``: dense, ascending), from the search's
    ``results`` (:func:`results_of`): the least arrival above it (-1: none), its place
    among its output part's kept rows (0: not kept) and that part."""
    from evtime.errors import OutputError, in_task

    a, least, rank, vpart = results
    at = a - (arrival[0] if len(arrival) else 0)
    seen = np.zeros(len(arrival), bool)
    if len(at) == len(arrival) and (not len(at) or 0 <= at.min() <= at.max() < len(at)):
        seen[at] = True
    if not seen.all():  # (every row is in exactly one part of the output)
        raise in_task(
            OutputError(
                f"internal error: {len(at)} search results for {len(arrival)} rows "
                f"from arrival {int(arrival[0]) if len(arrival) else None}"
            )
        )
    out = [np.empty(len(at), np.int64) for _ in range(3)]
    for o, v in zip(out, (least, rank, vpart), strict=True):
        o[at] = v
    return tuple(out)


def kept_of(counts: str, arrivals: int) -> np.ndarray:
    """Per part of the output, the kept rows of the parts before it (:func:`kept_before`),
    read once per worker."""
    if counts not in _KEPT_BEFORE:  # (a worker lives on: only this run's)
        _KEPT_BEFORE.clear()
        _KEPT_BEFORE[counts] = kept_before(counts, arrivals)
    return _KEPT_BEFORE[counts]


def searched_in_counts(counts: str, step: Explainer, rows: pa.Table, results) -> tuple:
    """:meth:`Explainer.searched` from the search's ``results`` and the kept rows it
    counted in ``counts``."""
    least, rank, vpart = found(values_of(rows.column(ARRIVAL)), results)
    return least, rank > 0, kept_of(counts, step.arrivals)[vpart] + rank


@dataclass(frozen=True)
class InParts:
    """The search's results sent with the rows (:class:`ResultsInPart`'s rows in each
    part of arrivals), its kept rows counted in ``counts``."""

    counts: str

    READS = (BLOB,)

    def results(self, step: Explainer, part: pa.Table) -> tuple[pa.Table, tuple]:
        packed = part.column(BLOB).is_valid()
        results = results_of(part.filter(packed).column(BLOB).to_pylist())
        return part.filter(pc.invert(packed)), results

    def searched(self, step, rows, evt, before, known, ref, results):
        return searched_in_counts(self.counts, step, rows, results)


@dataclass(frozen=True)
class InFiles:
    """The search's results in the files :class:`ResultsInFiles` left in ``counts``, for
    rows explained where they were read (each row group whole in one task): each row
    group is a part of arrivals (``starts``: their first arrivals), numbered in the writer."""

    counts: str
    starts: np.ndarray = field(compare=False)

    READS = ()

    def numbered(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return in_place.numbered_by_group(self.starts, batch)

    def results(self, step: Explainer, part: pa.Table) -> tuple[pa.Table, tuple]:
        from evtime.io import staging

        group = part.column(PART)[0].as_py()
        kept_of(self.counts, step.arrivals)  # (first: it says where the files are missing)
        where = _results_of_group(self.counts, group)
        # (not the files being written)
        names = [n for n in staging.names(where) if "." not in n]
        return part, results_of(staging.get_all([staging.join(where, n) for n in names]))

    def searched(self, step, rows, evt, before, known, ref, results):
        return searched_in_counts(self.counts, step, rows, results)
