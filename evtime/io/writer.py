"""Writing results: ordered part files written by Spark tasks, published atomically.

One Spark job writes every sink (the output and the discards) from one ordered DataFrame:
each task writes its partition with pyarrow to ``part-<sink>-<partition>`` (so ns
timestamps stay ns and the files are in output order) and reports how many rows it saw of
each kind.  The driver then assembles the parts into the destination by streaming them
(never holding the data), into a temporary name first, renamed (or, on object stores,
uploaded in one PUT) only when complete.  Standard output is assembled the same way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from evtime.columns import PART, ROUTE
from evtime.errors import OutputError, PipeClosed, UsageError
from evtime.io import csvtext, directory, jsonlines, s3concat
from evtime.io import staging as shared
from evtime.io.compressed import Compressed, codec_of, is_stream
from evtime.io.parts import CSV_BATCH, FILES, ROW_GROUP, arrow_schema, parquet_encodings
from evtime.io.reader import Layout
from evtime.io.sources import format_of
from evtime.io.staging import note_temp
from evtime.io.timeparse import format_ns, truncated_text
from evtime.steps import EachPart, PartStep

OUT_FORMATS = ("csv", "parquet", "jsonl", "table")


@dataclass(frozen=True)
class Derived:
    """A column a sink writes that the rows do not carry themselves, made in Arrow where
    the parts are written: a copy of ``source`` under another name, or, with ``labels``,
    the label that the integer in ``source`` numbers (null for null).  What Spark would
    otherwise send to Python twice (adjust's adjusted time, a copy of its own), or as a
    long string per row (merge's source names), comes once, or as a number."""

    source: str
    labels: tuple[str, ...] | None = None

    def values(self, batch: pa.RecordBatch) -> pa.Array:
        arr = batch.column(self.source)
        if self.labels is None:
            return arr
        return pa.array(self.labels, pa.string()).take(arr)

    def arrow_type(self, carried: pa.DataType) -> pa.DataType:
        return carried if self.labels is None else pa.string()


@dataclass(frozen=True)
class LocalRows:
    """Rows already in this process, as Arrow (with ``PART`` and ``ROUTE``), and the Spark
    schema they stand for: written as :func:`write` writes a DataFrame's rows in this
    process, without a Spark job (a result made here, such as bound's few windows)."""

    table: pa.Table
    schema: object  # pyspark.sql.types.StructType

    @property
    def columns(self) -> list[str]:
        return self.table.column_names


@dataclass(frozen=True)
class TaskRows:
    """Rows read where they are written: each Spark task takes the numbers its partition
    of ``ids`` (a DataFrame of one long column) holds, reads those chunks' rows with
    ``read(i)`` (Arrow batches: :class:`evtime.io.reader.ChunkReader`) and writes them,
    so no row passes through the JVM; ``prep``: what makes each batch as read into the rows
    they stand for (the step's ``from_read``); ``schema``: the Spark schema of those rows
    (with the columns a step makes)."""

    ids: object  # pyspark DataFrame
    read: Callable[[int], Iterator[pa.RecordBatch]]
    schema: object  # pyspark.sql.types.StructType
    prep: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)


@dataclass
class Sink:
    """One destination: its name, which rows (routes), which columns, where, what format."""

    name: str
    routes: tuple[str, ...]
    path: str | None  # None or '-' = standard output
    fmt: str
    columns: list[str]
    ns_columns: list[str] = field(default_factory=list)  # int64 ns -> timestamp / ISO text
    overwrite: bool = False
    raw: bool = False  # columns as Spark carries them (evtime's own state files)
    derived: dict[str, Derived] = field(default_factory=dict)  # columns made in Arrow
    # ns columns whose text is another's (written before it) truncated to a unit (ns): made
    # from that text (see timeparse.truncated_text), not formatted again
    text_of: dict[str, tuple[str, int]] = field(default_factory=dict)
    delimiter: str = ","  # (CSV)
    header: bool = True  # (CSV)
    # the row's own columns: written name -> the input's name (restored to the type it was
    # read with); None: every column named as in the input is the input's
    own: dict[str, str] | None = None
    # written as a directory of parts (-o DIR/): set by evtime.io.directory.attach
    directory: directory.Directory | None = None

    def input_name(self, name: str) -> str | None:
        """The input column written as ``name`` (None: one of evtime's own)."""
        if self.own is None:
            return name
        return self.own.get(name)

    def reads(self) -> set[str]:
        """The columns of the rows it reads."""
        return {self.derived[c].source if c in self.derived else c for c in self.columns}

    def column(self, batch: pa.RecordBatch, name: str) -> pa.Array:
        d = self.derived.get(name)
        return batch.column(name) if d is None else d.values(batch)

    @property
    def to_stdout(self) -> bool:
        """Written as a stream: standard output, or a character device or FIFO named by
        its path (/dev/stdout, a named pipe), never replaced or published."""
        return is_stream(self.path)


def output_format(path: str | None, forced: str | None, default: str = "csv") -> str:
    if directory.is_directory(path):
        return directory.directory_format(path, forced)
    if forced:
        return forced
    if is_stream(path):  # (-, /dev/stdout, a FIFO)
        return default
    try:
        fmt = format_of(path, None)
    except UsageError:
        raise UsageError(
            f"cannot tell the output format of {path!r}: use --output-format csv|parquet|jsonl"
        ) from None
    if fmt == "parquet" and codec_of(path):
        raise UsageError(
            f"{path}: Parquet is compressed inside the file; name it without {codec_of(path)}"
        )
    return fmt


def _fs(path: str):
    import fsspec

    fs, _, (p,) = fsspec.get_fs_token_paths(path)
    return fs, p


def check_sink(sink: Sink) -> None:
    """Refuse before any work: an existing output without --overwrite, a missing directory."""
    check_path(sink.path, sink.overwrite)


def check_path(path: str | None, overwrite: bool) -> None:
    """:func:`check_sink` for an output path (None or '-': standard output, nothing to
    check)."""
    if is_stream(path):
        return
    if directory.is_directory(path):
        return directory.check(path, overwrite)
    fs, p = _fs(path)
    try:
        exists = fs.exists(p)
    except OSError as err:  # PermissionError: bad credentials, access denied
        raise OutputError(f"{path}: cannot write: {type(err).__name__}: {err}") from None
    if exists and not overwrite:
        raise OutputError(f"{path} exists: use --overwrite to replace it")
    parent = os.path.dirname(p)
    if "file" in fs.protocol and parent and not os.path.isdir(parent):
        raise OutputError(f"{path}: directory {parent} does not exist")


def check_creatable(path: str | None, opt: str = "-o") -> None:
    """Refuse before any work a local output that cannot be created: its directory is
    missing or not writable (a file is made there and removed at once: what the writer
    will do), or the path is a directory.  The message names the user's path."""
    if is_stream(path):
        return
    if directory.is_directory(path):
        return directory.check_creatable(path, opt)
    fs, p = _fs(path)
    if "file" not in fs.protocol:
        return
    full = os.path.abspath(p)
    if os.path.isdir(full):
        raise OutputError(f"{opt} {path}: is a directory")
    parent = os.path.dirname(full)
    if not os.path.isdir(parent):
        raise OutputError(f"{opt} {path}: directory {parent} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{os.path.basename(full)}.evtime-", dir=parent)
    except OSError as err:
        raise OutputError(
            f"{opt} {path}: cannot write in directory {parent}: {err.strerror}"
        ) from None
    os.close(fd)
    os.unlink(probe)


def _same_file_key(path: str) -> object:
    """What names one destination however it is spelt (./a.csv, a.csv, /abs/a.csv, a
    symbolic or hard link): None for a stream (standard output, a device, a FIFO)."""
    if is_stream(path):
        return None
    fs, p = _fs(path)
    if "file" not in fs.protocol:
        return (fs.protocol, fs._strip_protocol(p))
    full = os.path.realpath(os.path.abspath(p))
    try:
        st = os.stat(full)
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", full)


def check_distinct(named: Sequence[tuple[str, str | None]]) -> None:
    """Refuse (a usage error) two outputs of one run that name the same file: ``named``
    is (option, path) pairs, e.g. ``("-o", "same.csv"), ("--discards", "./same.csv")``."""
    seen: dict[object, tuple[str, str]] = {}
    for opt, path in named:
        if not path:
            continue
        key = _same_file_key(path)
        if key is None:
            continue
        if key in seen:
            first, where = seen[key]
            raise UsageError(
                f"{first} {where} and {opt} {path} name the same file: give each output "
                "its own path"
            )
        seen[key] = (opt, path)


def _prepare(batch: pa.RecordBatch, sink: Sink, lay: Layout) -> pa.Table:
    if sink.raw:
        return pa.Table.from_batches([batch.select(sink.columns)])
    cols, names = [], []
    texts: dict[str, pa.Array] = {}
    for name in sink.columns:
        arr = sink.column(batch, name)
        if name in sink.ns_columns and sink.fmt == "parquet":
            arr = arr.cast(pa.timestamp("ns", "UTC"))
        elif name in sink.ns_columns:
            src, unit = sink.text_of.get(name, (None, 0))
            made = None
            # (not on the first day of the timeline: an evtime there is saturated to its
            # first instant, the text of the time with digits zeroed is below it)
            whole = not arr.null_count and (not len(arr) or pc.min(arr).as_py() != -(1 << 63))
            if src in texts and whole and not texts[src].null_count:
                made = truncated_text(texts[src], unit)
            arr = texts[name] = format_ns(arr) if made is None else made
        elif (given := sink.input_name(name)) is not None:
            arr = lay.restore(given, arr)
            if sink.fmt != "parquet" and pa.types.is_timestamp(arr.type):
                arr = format_ns(arr)
        cols.append(arr)
        names.append(name)
    return pa.Table.from_arrays(cols, names=names)


class _PartWriter:
    """One part file: Parquet sinks are staged as Arrow IPC (no encoding here, no decoding
    in the driver: Parquet is encoded once, when the parts are assembled), the text formats
    as the text they will be.  Written under a hidden name, renamed when complete: a part
    file the driver sees is whole."""

    def __init__(self, path: str, sink: Sink):
        self.path, self.sink, self.out = path, sink, None
        self.tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path))
        self.remote = None  # (staging on a URL: the file being uploaded)

    def write(self, table: pa.Table) -> None:
        fmt = self.sink.fmt
        if self.out is None and shared.is_url(self.path):
            self.remote = shared.RemoteFile(self.path)
            self.out = self.remote.file
            if fmt == "parquet":
                self.out = pa.ipc.new_file(self.out, table.schema)
        elif self.out is None:
            if fmt == "parquet":
                self.out = pa.ipc.new_file(self.tmp, table.schema)
            else:
                self.out = open(self.tmp, "wb")  # noqa: SIM115 (closed in close())
        if fmt == "parquet":
            self.out.write_table(table)
        elif fmt == "jsonl":
            self.out.write(jsonlines.encode(table))
        else:  # csv and table are staged as CSV
            clean = set(self.sink.ns_columns)  # (ISO text made by evtime: never quoted)
            for start in range(0, table.num_rows, CSV_BATCH):
                part = table.slice(start, CSV_BATCH)
                csvtext.write(part, self.out, self.sink.delimiter, clean=clean)

    def close(self) -> None:
        if self.remote is not None:
            if self.out is not self.remote.file:
                self.out.close()
            self.remote.close()
        elif self.out is not None:
            self.out.close()
            os.replace(self.tmp, self.path)


class _HeldPart:
    """The rows of one part kept until the part is complete (for a :class:`PartStep`): in
    memory, or, past ``HELD_MAX`` bytes, staged as Arrow IPC and read back mapped (memory
    stays bounded whatever the part's size)."""

    def __init__(self, path: str):
        self.path, self.batches, self.size, self.out = path, [], 0, None

    def add(self, batch: pa.RecordBatch) -> None:
        if self.out is None and self.size + batch.nbytes > HELD_MAX:
            self.out = pa.ipc.new_file(self.path, batch.schema)
            for b in self.batches:
                self.out.write_batch(b)
            self.batches = []
        if self.out is not None:
            self.out.write_batch(batch)
        else:
            self.batches.append(batch)
        self.size += batch.nbytes

    @contextlib.contextmanager
    def table(self) -> Iterator[pa.Table]:
        if self.out is None:
            yield pa.Table.from_batches(self.batches)
            return
        self.out.close()
        try:
            with pa.memory_map(self.path) as src:
                yield pa.ipc.open_file(src).read_all()  # (in place: no copy)
        finally:
            os.unlink(self.path)


HELD_MAX = 64 << 20  # bytes of a part held in memory for a PartStep; beyond: staged


def through_step(
    batches: Iterator[pa.RecordBatch],
    step: PartStep | None,
    below: int,
    staging: str | None = None,
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """``(part, batch)`` of rows sorted by ``PART``, each part numbered below ``below``
    first held whole (:class:`_HeldPart`, staged under ``staging``, default the temp
    directory) and passed through ``step``; the other parts as they come."""
    part, held = None, None
    for pid, b in parts_of(batches):
        if pid != part:
            if held is not None:
                with held.table() as rows:
                    yield from ((part, x) for x in step(rows))
            part, held = pid, None
            if step is not None and pid < below:
                where = shared.scratch_of(staging) if staging else tempfile.gettempdir()
                held = _HeldPart(os.path.join(where, f"held-{uuid.uuid4().hex}"))
        if held is not None:
            held.add(b)
        else:
            yield pid, b
    if held is not None:
        with held.table() as rows:
            yield from ((part, x) for x in step(rows))


def _write_parts(
    batches: Iterator[pa.RecordBatch],
    sinks: list[Sink],
    lay: Layout,
    staging: str,
    step: PartStep | None = None,
    step_below: int = 0,
    done: Callable[[int], None] | None = None,
    one_file: bool = False,
) -> dict[str, int]:
    """Write rows (sorted by ``PART``) to part files under ``staging``: rows seen per
    route, and part files written per sink (``FILES`` + name).  The parts numbered below
    ``step_below`` go through ``step`` first, each whole.  ``done``: called with each part
    once its staged files are written.  ``one_file`` (every part written by this call, none
    elsewhere): a sink's parts all go on in one file, known by the first part.

    A directory output (``sink.directory``) gets one file per run of consecutive part
    numbers written here: its file goes on with part ``p + 1`` after part ``p`` (no other
    process can hold a part between them), and is known by its run's first part (its
    temporary name, its rows for the manifest): the files, in the order of their first
    parts, hold the output in order.  Parts staged for this process stay one file each."""
    seen: dict[str, int] = {}
    writers: dict[str, _PartWriter] = {}
    firsts: dict[str, int] = {}  # directory sinks: the first part of the open file

    part = None  # the part being written (rows arrive sorted by part)
    try:
        for pid, b in through_step(batches, step, step_below, staging):
            if pid != part:
                follows = part is not None and pid == part + 1
                for name in list(writers):
                    if one_file and name not in firsts:
                        continue  # (no other part can fall between: one file)
                    if not (follows and name in firsts):
                        writers.pop(name).close()
                        firsts.pop(name, None)
                if done is not None and part is not None:
                    done(part)
                part = pid
            route = b.column(ROUTE)
            counts = route_counts(route)
            for r, n in counts.items():
                seen[r] = seen.get(r, 0) + n
            present = set(counts)
            for sink in sinks:
                if present.isdisjoint(sink.routes):
                    continue
                sel = b  # (most batches go whole to one sink: no filter, no copy)
                if not present.issubset(sink.routes):
                    sel = b.filter(in_routes(route, sink.routes))
                if sink.name not in writers:
                    path = part_path(staging, sink.name, pid)
                    d = sink.directory  # (a directory output: the part written there)
                    w = _PartWriter(path, sink) if d is None else d.writer(sink, pid)
                    writers[sink.name] = w
                    if d is not None:
                        firsts[sink.name] = pid
                    # one per part file: the driver checks it can see them all
                    key = FILES + sink.name
                    seen[key] = seen.get(key, 0) + 1
                writers[sink.name].write(_prepare(sel, sink, lay))
                if sink.directory is not None:  # (its rows per file, for its manifest)
                    key = sink.directory.key(firsts[sink.name])
                    seen[key] = seen.get(key, 0) + sel.num_rows
    finally:
        for w in writers.values():
            w.close()
    if done is not None and part is not None:
        done(part)
    return seen


def in_routes(route: pa.Array, names: Sequence[str]) -> pa.Array:
    """Whether each row's ``ROUTE`` is one of ``names``: of dictionary-encoded routes (as
    the part steps make them, :func:`routes`), on the indices, with numpy (pyarrow's
    ``is_in`` would look the strings up)."""
    if pa.types.is_dictionary(route.type) and not route.null_count:
        wanted = np.array([r in names for r in route.dictionary.to_pylist()])
        return pa.array(wanted[route.indices.to_numpy()])
    import pyarrow.compute as pc

    return pc.is_in(route, pa.array(list(names), pa.string()))


def route_counts(route: pa.Array) -> dict[str, int]:
    """Rows per route in a batch's ``ROUTE`` column: strings, or dictionary-encoded (as
    the part steps make it, :func:`routes`), then counted on the indices."""
    if pa.types.is_dictionary(route.type):
        n = np.bincount(route.indices.to_numpy(), minlength=len(route.dictionary))
        return {r: int(k) for r, k in zip(route.dictionary.to_pylist(), n, strict=True) if k}
    import pyarrow.compute as pc

    values, counts = pc.value_counts(route).flatten()
    return dict(zip(values.to_pylist(), counts.to_pylist(), strict=True))


def write(
    df,
    sinks: list[Sink],
    lay: Layout,
    staging: str,
    in_driver: bool = False,
    step: PartStep | None = None,
    step_below: int = 0,
    ranges=None,
) -> dict[str, int]:
    """Run the job: write every sink's parts under ``staging``; rows seen per route, and
    part files written per sink (``FILES`` + name: see :func:`check_parts`).
    ``in_driver`` (small local inputs, see evtime.runner.driver.driver_io, or few rows,
    see evtime.runner.driver.few_rows): the rows come to this process as Arrow and the parts are
    written here, without Python workers.  ``step``: run on each whole part numbered
    below ``step_below`` (reading its ``columns`` too) before it is written.  ``ranges``
    (:class:`~evtime.engine.scan.Ranges`): the parts below ``step_below`` are in runs,
    one per Spark partition, in order; each task checks it holds only its own and, when
    done, leaves the file ``done-<partition>`` (see :class:`Early`); :class:`EachPart`:
    the parts are wherever the rows were read, and a task leaves ``done-<part>`` for each
    part it has written.  The way it is written: :func:`choose`."""
    job = Job(sinks, lay, staging, step, step_below)
    return choose(df, job, in_driver, ranges).run(df, job)


@dataclass(frozen=True)
class Job:
    """What every write plan writes: the sinks and layout, the staging directory, the
    step run on each whole part numbered below ``step_below``."""

    sinks: list[Sink]
    lay: Layout
    staging: str
    step: PartStep | None = None
    step_below: int = 0

    def parts(
        self,
        batches: Iterator[pa.RecordBatch],
        done: Callable[[int], None] | None = None,
        one_file: bool = False,
    ) -> dict[str, int]:
        """:func:`_write_parts` of rows sorted by ``PART``."""
        return _write_parts(
            batches, self.sinks, self.lay, self.staging, self.step, self.step_below, done,
            one_file,
        )  # fmt: skip

    def here(self, rows: pa.Table) -> dict[str, int]:
        """:func:`_write_parts` of rows in this process, in the order of their partitions: a
        stable sort by ``PART`` keeps each part's own order (Arrow's sort is stable).  Every
        part is written here: a file per sink (thousands of rows of a time-bucketed output
        are hundreds of parts; a file each cost ~3 ms per part and sink, to write and to
        assemble)."""
        import pyarrow.compute as pc

        rows = rows.take(pc.sort_indices(rows.column(PART)))
        return self.parts(iter(rows.to_batches()), one_file=True)

    def mark_done(self, i: int) -> None:
        """Leave ``done-<i>`` (a part or partition written: see :class:`Early`)."""
        shared.put(done_path(self.staging, i), b"")

    def frame(self, df):
        """``df`` with its ``PART`` (the Spark partition when it has none) and only the
        columns the sinks and the step read: not the engine's own."""
        from pyspark.sql import functions as F

        if PART not in df.columns:  # no parts: the Spark partitions are in order
            df = df.withColumn(PART, F.spark_partition_id().cast("long"))
        needed = self.needed()
        return df.select(*[c for c in df.columns if c in needed])

    def needed(self) -> set[str]:
        """The columns the sinks and the step read (and ``PART``, ``ROUTE``)."""
        needed = {PART, ROUTE, *(c for s in self.sinks for c in s.reads())}
        return needed | set(self.step.columns if self.step is not None else ())


class WritePlan(Protocol):
    """One way to write a job: ``run(df, job)`` writes ``job``'s parts of ``df``, and gives
    the rows seen per route (and ``FILES`` + name per sink)."""

    def run(self, df, job: Job) -> dict[str, int]: ...


class LocalHere:
    """Rows already in this process (:class:`LocalRows`): written here, no Spark job."""

    def run(self, df: LocalRows, job: Job) -> dict[str, int]:
        return job.here(df.table)


class CountsOnly:
    """No sinks, a ``ROUTE``: the rows only counted, in Spark, without Python workers."""

    def run(self, df, job: Job) -> dict[str, int]:
        counts = df.groupBy(ROUTE).count().collect()  # one row per route
        return {r[ROUTE]: r["count"] for r in counts}


class InDriver:
    """The rows fetched to this process as Arrow and written here (bounded: inputs of at
    most EVTIME_DRIVER_IO_MAX bytes, or results known to have at most
    EVTIME_DRIVER_ROWS_MAX rows: see evtime.runner.driver.few_rows)."""

    def run(self, df, job: Job) -> dict[str, int]:
        return job.here(job.frame(df).toArrow())


class InTasks:
    """Each Spark task writes its partition (:meth:`task`, run where the rows are) and
    reports a row per route; summed here (no aggregate in Spark, whose stage would cost a
    job after the writing one: the driver hears from every task anyway)."""

    def run(self, df, job: Job) -> dict[str, int]:
        def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            seen = self.task(batches, job)
            if seen:
                yield pa.RecordBatch.from_pydict(
                    {"route": list(seen), "rows": list(seen.values())},
                    schema=pa.schema([("route", pa.string()), ("rows", pa.int64())]),
                )

        seen: dict[str, int] = {}
        for r in (
            self.source(df, job).mapInArrow(write_partition, "route string, rows long").collect()
        ):
            seen[r["route"]] = seen.get(r["route"], 0) + r["rows"]
        return seen

    def source(self, df, job: Job):
        """The DataFrame the tasks run over."""
        return job.frame(df)

    def task(self, batches: Iterator[pa.RecordBatch], job: Job) -> dict[str, int]:
        """Write one partition's rows (sorted by ``PART``): rows seen per route."""
        return job.parts(batches)


class ReadThen(InTasks):
    """:class:`InTasks` of :class:`TaskRows`: each task reads the chunks it is given
    (only the columns the job needs), then writes them as ``then`` writes them."""

    def __init__(self, then: InTasks, rows: TaskRows):
        self.then, self.read, self.prep = then, rows.read, rows.prep

    def source(self, df: TaskRows, job: Job):
        return df.ids

    def task(self, batches: Iterator[pa.RecordBatch], job: Job) -> dict[str, int]:
        ids = (i for b in batches for i in b.column(0).to_pylist())
        read = (b for i in ids for b in self.read(i))
        if self.prep is not None:
            read = map(self.prep, read)
        needed = job.needed()
        rows = (b.select([c for c in b.schema.names if c in needed]) for b in read)
        return self.then.task(rows, job)


class WithNumbering(InTasks):
    """:class:`InTasks` whose step numbers the parts itself: every batch gets its ``PART``
    from ``step.numbered`` first, then is written as ``then`` writes it."""

    def __init__(self, then: InTasks):
        self.then = then

    def task(self, batches: Iterator[pa.RecordBatch], job: Job) -> dict[str, int]:
        return self.then.task(map(job.step.numbered, batches), job)


class WithPartMarks(InTasks):
    """:class:`InTasks` for :class:`EachPart`: a task leaves ``done-<part>`` for each part
    as soon as it is written."""

    def task(self, batches: Iterator[pa.RecordBatch], job: Job) -> dict[str, int]:
        return job.parts(batches, job.mark_done)


class WithRangeChecks(InTasks):
    """:class:`InTasks` for :class:`~evtime.engine.scan.Ranges`: a task checks it holds
    no part below ``step_below`` outside its partition's run (:func:`_in_range`), and
    leaves ``done-<partition>`` when done."""

    def __init__(self, ranges):
        self.ranges = ranges

    def task(self, batches: Iterator[pa.RecordBatch], job: Job) -> dict[str, int]:
        from pyspark import TaskContext

        i = TaskContext.get().partitionId()
        mine = self.ranges.parts(i) if i < self.ranges.n else range(0)
        seen = job.parts(_in_range(batches, mine, job.step_below))
        job.mark_done(i)
        return seen


def choose(df, job: Job, in_driver: bool = False, ranges=None) -> WritePlan:
    """How :func:`write` writes ``df``: the first that holds (see docs/ARCHITECTURE.md)."""
    if isinstance(df, LocalRows):
        return LocalHere()
    if not job.sinks and ROUTE in df.columns:
        return CountsOnly()
    if in_driver:
        return InDriver()
    if ranges is None:
        tasks = InTasks()
    elif isinstance(ranges, EachPart):
        tasks = WithPartMarks()
    else:
        tasks = WithRangeChecks(ranges)
    if getattr(job.step, "numbered", None) is not None:  # (its parts numbered in the task)
        tasks = WithNumbering(tasks)
    if isinstance(df, TaskRows):  # (each task reads the rows it writes)
        return ReadThen(tasks, df)
    return tasks


def _in_range(
    batches: Iterator[pa.RecordBatch], mine: range, below: int
) -> Iterator[pa.RecordBatch]:
    """The batches, checked to hold no part below ``below`` outside ``mine``."""
    for b in batches:
        if b.num_rows:
            first, last = b.column(PART)[0].as_py(), b.column(PART)[-1].as_py()
            for p in (first, last):
                if p < below and p not in mine:
                    from evtime.errors import EvtimeError, in_task

                    raise in_task(
                        EvtimeError(
                            f"internal error: part {p} is not in this task's range "
                            f"{mine.start}..{mine.stop - 1}; please report this"
                        )
                    )
        yield b


def check_parts(seen: dict[str, int], sinks: list[Sink], staging: str, taken=None) -> None:
    """Check that this process sees every part file the tasks wrote (``FILES`` counts,
    removed from ``seen``), besides those ``taken`` already (sink name -> count)."""
    taken = taken or {}
    for sink in sinks:
        if sink.directory is not None:  # (its parts are at their destination)
            sink.directory.take(seen)
            continue
        written = seen.pop(FILES + sink.name, 0)
        found = len(_parts(staging, sink.name)) + taken.get(sink.name, 0)
        if found != written:
            # tasks ran where the driver's staging directory is not (a real cluster)
            raise OutputError(
                f"the Spark tasks wrote {written} part file(s) of {sink.name} that this machine "
                f"cannot see in {staging} (found {found}): on a cluster, set --staging (or "
                "EVTIME_STAGING) to a URL or directory this machine and every executor reach"
            )


class Early:
    """Sinks assembled while their job runs: a thread of this process that, partition
    after partition of ``ranges`` (in order), waits for the task's ``done-<partition>``
    file (see :func:`write`), then adds that run of parts to each sink's
    :class:`Assembly`; :meth:`finish`, once the job is over, adds the parts left (the bad
    rows') and closes them.  The output is staged in ``tmp[name]`` (published by the
    caller, with the other sinks, only when every one is complete)."""

    POLL = 0.02  # seconds between looks for the next done file
    POLL_REMOTE = 0.2  # (on a staging URL: a request each)

    def __init__(self, sinks: list[Sink], staging: str, lay: Layout, spark_schema, ranges):
        import threading

        schemas = [arrow_schema(s, lay, spark_schema) for s in sinks]  # (checked already)
        self.sinks, self.staging, self.ranges, self.lay = sinks, staging, ranges, lay
        self.seen: dict[str, int] = {}  # rows and part files of the parts made here
        self.tmp = {s.name: temp_name(s, staging) for s in sinks}
        for tmp in self.tmp.values():
            note_temp(staging, tmp)
        self.files = []
        for s in sinks:
            try:
                self.files.append(open(self.tmp[s.name], "wb"))  # noqa: SIM115 (finish)
            except OSError as err:
                for f in self.files:
                    f.close()
                    os.unlink(f.name)
                raise OutputError(f"{s.path}: cannot write: {err}") from None
        self.wholes = [
            Assembly(s, schema, f) for s, schema, f in zip(sinks, schemas, self.files, strict=True)
        ]
        self.stop, self.over = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="evtime-early", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        waits_for = getattr(self.ranges, "waits_for", lambda i: i)
        try:
            for i in range(self.ranges.n):
                done = done_path(self.staging, waits_for(i))
                # (once the job is over, a partition without a done file had no task in
                # Python, and no rows)
                poll = self.POLL if not shared.is_url(done) else self.POLL_REMOTE
                while not shared.exists(done) and not self.over.is_set():
                    if self.stop.wait(poll):
                        return
                add_counts(self.seen, made_part(self.ranges, i, self.sinks, self.lay, self.staging))
                for sink, whole in zip(self.sinks, self.wholes, strict=True):
                    for p in self.ranges.parts(i):
                        path = part_path(self.staging, sink.name, p)
                        if shared.exists(path):
                            whole.add(path)
        except BaseException as err:  # (reported by finish)
            self.error = err

    def finish(self) -> dict[str, int]:
        """After the job: the remaining parts added, every sink closed; part files taken
        per sink."""
        self.over.set()
        self.thread.join()
        try:
            if self.error is not None:
                raise self.error
            for sink, whole in zip(self.sinks, self.wholes, strict=True):
                for path in _parts(self.staging, sink.name):
                    whole.add(path)
                whole.close()
            for f in self.files:
                f.close()
        except OSError as err:
            where = ", ".join(str(s.path) for s in self.sinks)
            raise OutputError(f"{where}: cannot write: {err}") from None
        return {s.name: w.added for s, w in zip(self.sinks, self.wholes, strict=True)}

    def abandon(self) -> None:
        """The job failed: stop, and remove what was staged."""
        self.stop.set()
        self.thread.join()
        for whole in self.wholes:  # (a Parquet writer left open closes at garbage
            # collection, into a closed file: closed now, its held rows dropped)
            if whole.w is not None:
                with contextlib.suppress(Exception):
                    whole.w.close()
        for f in self.files:
            f.close()
        for path in self.tmp.values():
            with contextlib.suppress(OSError):
                os.unlink(path)


def made_part(ranges, i: int, sinks: list[Sink], lay: Layout, staging: str) -> dict[str, int]:
    """Part ``i`` written here when ``ranges`` makes its rows in this process
    (``ranges.made(i)``, a table with ``ROUTE``; such as the zones of
    evtime.engine.adjust.in_place.Zones): rows seen per route and part files written, as
    :func:`_write_parts` counts them (none for the parts the tasks write)."""
    made = getattr(ranges, "made", None)
    rows = made(i) if made is not None else None
    if rows is None or not rows.num_rows:
        return {}
    rows = rows.drop_columns([c for c in (PART,) if c in rows.column_names])
    rows = rows.append_column(PART, pa.array(np.full(rows.num_rows, i, np.int64)))
    return _write_parts(iter(rows.to_batches()), sinks, lay, staging)


def add_counts(into: dict[str, int], more: dict[str, int]) -> None:
    """Add the counts ``more`` (rows per route, part files per sink) to ``into``."""
    for k, n in more.items():
        into[k] = into.get(k, 0) + n


def parts_of(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Batches of rows sorted by ``PART`` cut into runs of one part: ``(part, run)``."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        parts = batch.column(PART).to_numpy()  # (int64 without nulls: no copy)
        first, last = int(parts[0]), int(parts[-1])
        if first == last:
            yield first, batch
            continue
        starts = [0, *(np.flatnonzero(parts[1:] != parts[:-1]) + 1).tolist(), batch.num_rows]
        for lo, hi in zip(starts, starts[1:], strict=False):
            yield int(parts[lo]), batch.slice(lo, hi - lo)


def part_path(staging: str, name: str, part: int) -> str:
    """The file of one part of the sink ``name``."""
    return os.path.join(staging, f"part-{name}-{part:06d}")


def done_path(staging: str, partition: int) -> str:
    """The file a task leaves when it has written every part of its partition (with
    ``ranges``, see :func:`write`)."""
    return os.path.join(staging, f"done-{partition:06d}")


def _parts(staging: str, name: str) -> list[str]:
    prefix = f"part-{name}-"
    return [os.path.join(staging, n) for n in shared.names(staging) if n.startswith(prefix)]


def _assemble(sink: Sink, parts: list[str], schema: pa.Schema, out) -> None:
    """Stream the parts, in order, into the open binary file ``out`` (see :class:`Assembly`)."""
    whole = Assembly(sink, schema, out)
    for p in parts:
        whole.add(p)
    whole.close()


class Assembly:
    """One sink's output being assembled into the open binary file ``out``, part after
    part (:meth:`add`, in order; :meth:`close` at the end).  Each part is removed as soon
    as it is read: its page cache is freed at once.  (At the end of a big run, memory is
    full of Spark's shuffle files; the kernel then reclaims pages for every page copied,
    and copying explain's 2.3 GB of CSV parts took 5-6 s instead of 1-2 s.)"""

    def __init__(self, sink: Sink, schema: pa.Schema, out):
        codec = None if sink.to_stdout or sink.fmt == "parquet" else codec_of(sink.path)
        self.compressed = Compressed(out, codec) if codec else None
        self.sink, self.schema = sink, schema
        self.out = self.compressed or out  # (-o out.csv.gz: compressed as it is written)
        self.added = 0
        self.held: list[pa.RecordBatch] = []  # (Parquet) fewer than ROW_GROUP rows, + one
        self.n = 0
        self.w = None
        if sink.fmt == "parquet":
            self.w = pq.ParquetWriter(out, schema, **parquet_encodings(schema))
            return
        if sink.fmt == "csv" and sink.header:
            self.out.write(csvtext.header(schema.names, sink.delimiter))
        self.out.flush()

    def add(self, path: str) -> None:
        self.added += 1
        if shared.is_url(path):  # (staging on a URL: streamed, or, Parquet, copied here)
            if self.w is None:
                fs, p = shared.fs_of(path)
                with fs.open(p, "rb") as fh:
                    shutil.copyfileobj(fh, self.out, 1 << 20)
                fs.rm_file(p)
                return
            path = shared.fetched(path)
        if self.w is None:
            with open(path, "rb", buffering=0) as fh:
                _copy(fh, self.out)
            os.unlink(path)
            return
        # (mapped: the batches are read in place, not copied; the mapping lives as long as
        # a batch held over to the next row group refers to it)
        with pa.memory_map(path) as src:
            os.unlink(path)  # (the mapping keeps its pages while batches use them)
            staged = pa.ipc.open_file(src)
            for i in range(staged.num_record_batches):
                self.held.append(staged.get_batch(i))
                self.n += self.held[-1].num_rows
                if self.n >= ROW_GROUP:  # write whole row groups, keep the rest
                    rows, cut = pa.Table.from_batches(self.held), self.n - self.n % ROW_GROUP
                    self.w.write_table(rows.slice(0, cut).cast(self.schema), ROW_GROUP)
                    self.held, self.n = rows.slice(cut).to_batches(), self.n - cut

    def close(self) -> None:
        if self.compressed is not None:
            self.compressed.finish()
        if self.w is None:
            return
        if self.n:
            self.w.write_table(pa.Table.from_batches(self.held).cast(self.schema), ROW_GROUP)
        self.w.close()


def _copy(src, out) -> None:
    """The rest of the unbuffered file ``src`` appended to the flushed binary file ``out``:
    in the kernel (``copy_file_range``; 2.3 GB of explain CSV in 4 s instead of 11 s), else
    (a pipe, another OS) through a buffer from where the kernel stopped."""
    try:
        while os.copy_file_range(src.fileno(), out.fileno(), 1 << 30):
            pass
    except (AttributeError, OSError, ValueError):  # (no such call, a pipe, no file number)
        shutil.copyfileobj(src, out, 1 << 20)


def publish(sink: Sink, staging: str, lay: Layout, spark_schema) -> None:
    """Move one sink's parts to its destination, complete or not at all."""
    if sink.directory is not None:
        return sink.directory.publish()
    if sink.to_stdout:
        parts = _parts(staging, sink.name)
        schema = arrow_schema(sink, lay, spark_schema)
        if sink.fmt == "table":
            from evtime.io.table import print_table

            parts = [shared.fetched(p) if shared.is_url(p) else p for p in parts]
            try:
                print_table(parts, schema, sys.stdout)
            except BrokenPipeError:
                raise PipeClosed() from None
            return
        out = sys.stdout.buffer if sink.path in (None, "-") else None
        try:
            if out is None:  # (a device or FIFO named by its path)
                with open(sink.path, "wb") as dev:
                    _assemble(sink, parts, schema, dev)
            else:
                _assemble(sink, parts, schema, out)
                out.flush()
        except BrokenPipeError:
            raise PipeClosed() from None
        return
    check_sink(sink)
    if server_side(sink, staging):  # (CSV, JSON Lines on S3: see evtime.io.s3concat)
        head = b""
        if sink.fmt == "csv" and sink.header:
            head = csvtext.header(arrow_schema(sink, lay, spark_schema).names, sink.delimiter)
        s3concat.publish(sink.path, _parts(staging, sink.name), head)
        return
    tmp = temp_name(sink, staging)
    note_temp(staging, tmp)
    try:
        stage(sink, staging, lay, spark_schema, tmp)
        from evtime.io.crash import crash_point

        crash_point("publishing")  # (tests: the output complete, not yet renamed)
        commit(sink, tmp)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def server_side(sink: Sink, staging: str) -> bool:
    """Whether ``sink`` is assembled from its parts on the object store itself, not
    streamed through this process (:mod:`evtime.io.s3concat`)."""
    if sink.to_stdout or sink.directory is not None or not shared.is_url(staging):
        return False
    return s3concat.applies(sink.path, sink.fmt, staging, bool(codec_of(sink.path)))


def temp_name(sink: Sink, elsewhere: str) -> str:
    """Where ``sink`` is assembled before it is published: next to a local destination (so
    a rename publishes it), under ``elsewhere`` (a local directory) for object stores."""
    fs, p = _fs(sink.path)
    local = "file" in fs.protocol
    tmp_dir = os.path.dirname(os.path.abspath(p)) if local else shared.scratch_of(elsewhere)
    return os.path.join(tmp_dir, f".{os.path.basename(p)}.evtime-{uuid.uuid4().hex[:8]}")


def stage(sink: Sink, staging: str, lay: Layout, spark_schema, tmp: str) -> int:
    """Assemble one sink's parts, complete, into the local file ``tmp``; its size."""
    parts = _parts(staging, sink.name)
    schema = arrow_schema(sink, lay, spark_schema)
    try:
        with open(tmp, "wb") as out:
            _assemble(sink, parts, schema, out)
    except OSError as err:
        raise OutputError(f"{sink.path}: cannot write: {err}") from None
    return os.path.getsize(tmp)


def commit(sink: Sink, tmp: str) -> None:
    """Publish the staged ``tmp`` at the sink's destination in one step (rename, or one PUT
    on object stores, after which ``tmp`` is removed)."""
    fs, p = _fs(sink.path)
    try:
        if "file" in fs.protocol:
            os.replace(tmp, p)
        else:
            fs.put_file(tmp, p)  # one PUT: the object appears complete or not at all
            os.unlink(tmp)
    except OSError as err:
        raise OutputError(f"{sink.path}: cannot write: {err}") from None


def size_of(path: str) -> int | None:
    """The size of a published output, None when it does not exist."""
    fs, p = _fs(path)
    try:
        return fs.size(p) if fs.exists(p) else None
    except OSError:
        return None
