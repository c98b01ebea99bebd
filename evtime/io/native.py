"""Parquet inputs read by Spark's own (vectorised) Parquet reader instead of pyarrow in tasks.

:func:`evtime.io.inputs.read` uses :func:`read_native` first: when every input is a Parquet
file that Spark reads exactly as pyarrow does, it gives the DataFrame that
:func:`~evtime.io.reader.read_tasks` would give (same columns, Spark types and values)
without Python workers and without a checkpoint (a Parquet re-scan is cheap):

* arrival: ``_metadata.file_path`` -> the file's index (a map literal), ``_metadata.row_index``
  -> the row in the file;
* times: ``timestamp[ns]`` arrive as int64 (``spark.sql.legacy.parquet.nanosAsLong``);
  ``timestamp[us|ms|s]`` as Spark timestamps, turned back into their integers by
  ``unix_micros``/``unix_millis``/``unix_seconds`` (exact);
* a null time (the only bad value a Parquet file can hold) fails the run with the message
  of the pyarrow path (``raise_error``, no extra pass) or, with ``--bad-rows discard``, gets
  its reason in ``_evt_bad``.

Anything else gives None and the pyarrow path reads the files (:func:`problem` says why):
``EVTIME_NATIVE_READ=0``, CSV/JSON, fsspec-only URLs (``s3://``), more than
:data:`MAX_FILES` files, schemas that differ between files, column types other than signed
integers, floats, booleans, strings, binaries, dates, decimals and timestamps, INT96
timestamps, naive times with ``--tz``, times outside the int64-ns range (or without the
statistics to tell), and Spark settings or readers that do not give the expected types.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

import pyarrow as pa

from evtime.columns import BAD, CHUNK, CHUNK_SHIFT, FILE, ROW, SEQ, SEQ_FILE_SHIFT, T
from evtime.errors import EvtimeError, InputError, task_marks
from evtime.io import formats
from evtime.io.reader import Footing, Layout, ReadOptions, spark_schema
from evtime.io.sources import InputFile
from evtime.io.timeparse import to_ns

SCHEMES = ("s3a", "hdfs", "abfss")  # URLs given to Spark as they are (local paths: file:)
MAX_FILES = 64  # a row's file is looked up in a map literal, linearly in the files
NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"
_UNIX = {"us": "unix_micros", "ms": "unix_millis", "s": "unix_seconds"}
_STORED = {"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "milliseconds"}
_NS_PER = {"nanoseconds": 1, "microseconds": 10**3, "milliseconds": 10**6}
_UNIT_NS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}
_UTC = ("UTC", "Etc/UTC", "Z", "+00:00", "GMT")


def enabled() -> bool:
    return os.environ.get("EVTIME_NATIVE_READ", "1").strip().lower() not in ("0", "false", "no")


def spark_path(f: InputFile) -> str | None:
    """What Spark's reader is given for ``f``; None when Spark cannot read it as it is
    (fsspec-only URLs, names Hadoop would take for a glob or cannot parse)."""
    if any(c in f.url for c in "*?[]{}\\"):
        return None
    if "://" in f.url:
        return f.url if f.url.split("://", 1)[0] in SCHEMES else None
    if ":" in f.url:
        return None
    return "file:" + os.path.abspath(f.url)


def _simple(t: pa.DataType) -> bool:
    """Types Spark reads from Parquet as :meth:`Layout.spark_type` carries them."""
    if pa.types.is_dictionary(t):
        return pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)
    checks = (
        pa.types.is_signed_integer,
        pa.types.is_float32,
        pa.types.is_float64,
        pa.types.is_boolean,
        pa.types.is_string,
        pa.types.is_large_string,
        pa.types.is_binary,
        pa.types.is_large_binary,
        pa.types.is_date32,
        pa.types.is_decimal128,
        pa.types.is_timestamp,
    )
    return any(check(t) for check in checks)


def _schema_problem(files: list[InputFile], lay: Layout, opts: ReadOptions) -> str | None:
    names = lay.schema.names
    if len({n.lower() for n in names}) < len(names):
        return "column names that differ only in case"
    if any(n.startswith("_evt_") or n == "_metadata" or "`" in n for n in names):
        return "a column name Spark or evtime uses itself"
    if any(not formats.file_schema(f).equals(lay.schema) for f in files):
        return "files with different columns or types"
    odd = [f.name for f in lay.schema if not _simple(f.type)]
    if odd:
        return f"column {odd[0]!r} of type {lay.schema.field(odd[0]).type}"
    t = lay.schema.field(lay.time_col).type
    if not pa.types.is_timestamp(t):
        return f"a time column of type {t}"
    if t.tz is None and opts.tz:
        return "naive times with --tz"
    try:
        to_ns(pa.array([], t), opts.time_format, opts.tz)  # what the pyarrow path checks
    except (ValueError, pa.ArrowInvalid):
        return "options the pyarrow path reports"
    return None


def _in_range(rg, i: int, per: int) -> bool:
    """Whether row group ``rg``'s column ``i`` (a timestamp stored in units of ``per`` ns)
    is known to fit int64 ns."""
    st = rg.column(i).statistics
    if st is None or not st.has_null_count:
        return False
    if not st.has_min_max:
        return st.null_count == rg.num_rows
    lo, hi = -(2**63 // per), (2**63 - 1) // per
    return lo <= st.min_raw and st.max_raw <= hi


def local_times(files: list[InputFile], lay: Layout):
    """For local Parquet files (else None): a function that reads the times here, in
    arrival order, with pyarrow (the time column only, a few row groups at a time, see
    :func:`_time_columns`: memory stays bounded), as ``(_evt_seq, time in ns)`` pairs of
    int64 arrays (a null time: the least int64).  For the engine's small per-part tables
    that a pass over the times alone gives (see :class:`~evtime.engine.scan.AsRead`),
    without a Spark job."""
    if not files or any("://" in f.url or f.fmt != "parquet" for f in files):
        return None
    want = lay.schema.field(lay.time_col).type
    per = _UNIT_NS[want.unit]

    def times(only=None):  # -> Iterator[tuple[np.ndarray, np.ndarray]]
        """``only``: the indexes of the files to read (default: all)."""
        import numpy as np
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        least = pa.scalar(np.iinfo(np.int64).min, pa.int64())
        for f in sorted(files, key=lambda f: f.index):
            if only is not None and f.index not in only:
                continue
            first = f.index << SEQ_FILE_SHIFT
            with pq.ParquetFile(f.url) as pf:
                for col in _time_columns(pf, lay.time_col):
                    t = col.cast(want).cast(pa.int64())
                    ns = pc.fill_null(pc.multiply(t, per) if per != 1 else t, least)
                    ns = ns.to_numpy()
                    yield np.arange(first, first + len(ns), dtype=np.int64), ns
                    first += len(ns)

    return times


def _time_columns(pf, name: str, most: int = 1 << 22):  # -> Iterator[pa.ChunkedArray]
    """The column ``name`` of the open Parquet file ``pf``, in row order: two row groups at
    a time, decoded in parallel, or, for
    row groups of more than ``most`` rows, in batches of 2^20 rows (memory stays bounded)."""
    md = pf.metadata
    groups = list(range(md.num_row_groups))
    while groups:
        pair = groups[:2]
        if all(md.row_group(g).num_rows <= most for g in pair):
            del groups[:2]
            yield pf.read_row_groups(pair, columns=[name], use_threads=True).column(0)
            continue
        g = groups.pop(0)
        for b in pf.iter_batches(1 << 20, row_groups=[g], columns=[name], use_threads=False):
            yield pa.chunked_array([b.column(0)])


def _footing(files: list[InputFile], mds: list, lay: Layout) -> Footing:
    """:class:`Footing` of files whose time column has statistics in every row group (as
    :func:`_footer_problem` checked): no Spark job counts or scans for it.  Parquet
    statistics are the row groups' own true minima and maxima (Spark skips row groups by
    them too)."""
    rows = nulls = 0
    least = greatest = None
    groups = []  # (first arrival's _evt_seq, greatest time) per row group
    file_rows = [0] * (max((f.index for f in files), default=-1) + 1)
    t = lay.schema.field(lay.time_col).type
    per = _NS_PER[_STORED[t.unit]]
    for f, md in zip(files, mds, strict=True):
        i = next(j for j in range(md.num_columns) if md.schema.column(j).name == lay.time_col)
        first = f.index << SEQ_FILE_SHIFT
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            st = rg.column(i).statistics
            rows, nulls = rows + rg.num_rows, nulls + st.null_count
            hi = None
            if st.has_min_max:
                lo, hi = st.min_raw * per, st.max_raw * per
                least = lo if least is None else min(least, lo)
                greatest = hi if greatest is None else max(greatest, hi)
            if rg.num_rows:
                groups.append((first, hi))
            first += rg.num_rows
            file_rows[f.index] += rg.num_rows
    how = "read by Spark's Parquet reader"
    times = local_times(files, lay)
    return Footing(
        rows - nulls, nulls, least, greatest, how, tuple(sorted(groups)), times, tuple(file_rows)
    )


def _footer_problem(f: InputFile, lay: Layout, md) -> str | None:
    """What in ``f``'s footer ``md`` Spark would read differently from pyarrow."""
    for i in range(md.num_columns):
        col = md.schema.column(i)
        if col.physical_type == "INT96":
            return f"{f.shown}: INT96 timestamps"
        t = lay.schema.field(col.name).type
        if not pa.types.is_timestamp(t):
            continue
        stored = col.logical_type.to_json()
        if f'"{_STORED[t.unit]}"' not in stored:
            return f"{f.shown}: column {col.name!r} is {t} stored as {stored}"
        per = _NS_PER[_STORED[t.unit]]
        groups = range(md.num_row_groups)
        if col.name == lay.time_col and not all(_in_range(md.row_group(g), i, per) for g in groups):
            return f"{f.shown}: times that may not fit int64 ns (statistics)"
    return None


def problem(
    files: list[InputFile], lay: Layout, opts: ReadOptions, footers: list | None = None
) -> str | None:
    """Why Spark's reader cannot give these inputs exactly (None: it can), before Spark;
    the files' footers go into ``footers`` (when given) as they are read."""
    if not enabled():
        return "EVTIME_NATIVE_READ=0"
    if not files or any(f.fmt != "parquet" for f in files):
        return "not all inputs are Parquet"
    if len(files) > MAX_FILES:
        return f"more than {MAX_FILES} files"
    paths = [spark_path(f) for f in files]
    if None in paths:
        return "a path Spark does not read as it is"
    if len(set(paths)) < len(paths):
        return "a file given twice"
    found = _schema_problem(files, lay, opts)
    for f in files:
        if found:
            break
        md = formats.parquet_metadata(f)
        found = _footer_problem(f, lay, md)
        if footers is not None:
            footers.append(md)
    return found


def _conf_problem(spark, lay: Layout) -> str | None:
    """Settings of the session that Spark's reader needs (a server evtime did not start
    may lack them)."""
    times = [f.type for f in lay.schema if pa.types.is_timestamp(f.type)]
    if any(t.unit == "ns" for t in times) and spark.conf.get(NANOS_AS_LONG, "false") != "true":
        try:
            spark.conf.set(NANOS_AS_LONG, "true")
        except Exception:  # noqa: BLE001 - a server may refuse: pyarrow reads then
            return f"{NANOS_AS_LONG} is not set"
    naive = any(t.tz is None and t.unit != "ns" for t in times)
    if naive and spark.conf.get("spark.sql.session.timeZone", "") not in _UTC:
        return "naive timestamps with a session time zone other than UTC"
    return None


def _key(url: str) -> tuple[str, str, str]:
    """(scheme, host, path) of a URL as Spark spells it (percent-encoded)."""
    u = urlsplit(url)
    return u.scheme, u.netloc, unquote(u.path)


def _own_key(path: str) -> tuple[str, str, str]:
    """(scheme, host, path) of what :func:`spark_path` gives (not encoded)."""
    scheme, _, rest = path.partition(":")
    if not rest.startswith("//"):
        return scheme, "", rest
    host, _, tail = rest[2:].partition("/")
    return scheme, host, "/" + tail


def _spellings(spelled: list[str], files: list[InputFile]) -> dict[str, int] | None:
    """Spark's spellings of the files (``inputFiles``; ``_metadata.file_path`` writes
    ``file:/`` for ``file:///``) -> the file's index; None unless they are exactly ours."""
    index = {_own_key(spark_path(f)): f.index for f in files}
    out: dict[str, int] = {}
    for s in spelled:
        i = index.get(_key(s))
        if i is None:
            return None
        out[s] = i
        if s.startswith("file:///"):
            out["file:/" + s[len("file:///") :]] = i
    return out if set(out.values()) == set(index.values()) else None


def _carried(fld: pa.Field, got, want):  # -> Column | None
    """Column ``fld`` as the pyarrow path carries it, from Spark's type ``got``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, TimestampNTZType, TimestampType

    c = F.col(f"`{fld.name}`")
    if not pa.types.is_timestamp(fld.type):
        return c if got == want else None
    if fld.type.unit == "ns":
        return c if isinstance(got, LongType) else None
    if isinstance(got, (TimestampType, TimestampNTZType)):
        return getattr(F, _UNIX[fld.type.unit])(c)
    return None


def _shown(files: list[InputFile], file):  # -> Column
    from pyspark.sql import functions as F

    if len(files) == 1:
        return F.lit(files[0].shown)
    shown = [""] * (max(f.index for f in files) + 1)
    for f in files:
        shown[f.index] = f.shown
    return F.element_at(F.array(*map(F.lit, shown)), file + 1)


def _file(files: list[InputFile], spelled: dict[str, int]):  # -> Column
    from pyspark.sql import functions as F

    if len(files) == 1:
        return F.lit(files[0].index)
    pairs = [x for path, i in spelled.items() for x in (F.lit(path), F.lit(i))]
    path = F.col("_metadata.file_path")
    lost = F.concat(F.lit("internal error: evtime does not know the input file "), path)
    return F.coalesce(F.try_element_at(F.create_map(*pairs), path), F.raise_error(lost))


def _time(fld: pa.Field, carried, files, opts: ReadOptions, file, row):  # -> (t, bad)
    """``_evt_t`` (ns) and, with --bad-rows discard, ``_evt_bad``: a null time is bad."""
    from pyspark.sql import functions as F

    unit = fld.type.unit
    t = carried if unit == "ns" else carried * F.lit(_UNIT_NS[unit])
    shown, line = _shown(files, file), (row + 1).cast("string")
    if opts.bad_rows == "discard":  # the texts of reader._Problems.add
        head, tail = F.lit("bad input: no time (empty) (file "), F.lit(f" column {fld.name})")
        why = F.concat(head, shown, F.lit(" row "), line, tail)
        return t, F.when(t.isNull(), why)
    pre, post = task_marks(InputError)
    tail = F.lit(f", column {fld.name!r}: no time (empty){post}")
    said = F.concat(F.lit(pre), shown, F.lit(": row "), line, tail)
    return F.when(t.isNull(), F.raise_error(said)).otherwise(t), None


def _frame(sdf, files, lay: Layout, opts: ReadOptions, spelled):  # -> DataFrame | None
    from pyspark.sql import functions as F

    want = {f.name: f.dataType for f in spark_schema(lay)}
    got = {f.name: f.dataType for f in sdf.schema}
    own = {}
    for fld in lay.schema:
        c = _carried(fld, got.get(fld.name), want[fld.name])
        if c is None:
            return None
        own[fld.name] = c
    row = F.col("_metadata.row_index")
    file = _file(files, spelled).cast("int")
    cols = [c.alias(n) for n, c in own.items()]
    df = sdf.select(*cols, file.alias(FILE), row.alias(ROW))
    fld = lay.schema.field(lay.time_col)
    t, bad = _time(fld, F.col(f"`{fld.name}`"), files, opts, F.col(FILE), F.col(ROW))
    seq = F.shiftleft(F.col(FILE).cast("long"), SEQ_FILE_SHIFT) + F.col(ROW)
    df = df.select(
        *[F.col(f"`{n}`") for n in own],
        t.alias(T),
        FILE,
        ROW,
        seq.alias(SEQ),
        F.shiftright(seq, CHUNK_SHIFT).alias(CHUNK),
        *([bad.alias(BAD)] if bad is not None else []),
    )
    return df


def _given_schema(lay: Layout):  # -> StructType | None
    """The schema Spark's reader would infer for the files, given to it so that it reads
    no footer to infer it (a Spark job, ~0.5 s of a local run): when every timestamp column
    is ns (int64, :data:`NANOS_AS_LONG`).  None for other timestamps, whose Spark type
    depends on how they are stored (TIMESTAMP or TIMESTAMP_NTZ): Spark infers them."""
    if any(pa.types.is_timestamp(f.type) and f.type.unit != "ns" for f in lay.schema):
        return None
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(lay.carried)


def footing_here(files: list[InputFile], lay: Layout, opts: ReadOptions) -> Footing | None:
    """The :class:`Footing` :func:`read_native` gives, from the footers alone (no Spark):
    None where it would read otherwise for a reason known before Spark starts."""
    footers: list = []
    if problem(files, lay, opts, footers):
        return None
    return _footing(files, footers, lay)


def read_native(spark, files: list[InputFile], opts: ReadOptions, lay: Layout):
    """The DataFrame of :func:`~evtime.io.reader.read_tasks`, read by Spark's Parquet
    reader, and its :class:`Footing`; None when it cannot give exactly that (the caller
    reads with pyarrow)."""
    footing = footing_here(files, lay, opts)
    if footing is None or _conf_problem(spark, lay):
        return None
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        given = _given_schema(lay)
        reader = spark.read if given is None else spark.read.schema(given)
        sdf = reader.parquet(*[spark_path(f) for f in files])
        spelled = _spellings(sdf.inputFiles(), files)
        df = _frame(sdf, files, lay, opts, spelled) if spelled else None
        if df is None:
            return None
        expected = [(f.name, f.dataType) for f in spark_schema(lay, opts)]
        if [(f.name, f.dataType) for f in df.schema] != expected:
            return None
        return df, footing
    except (PySparkException, Py4JError, EvtimeError):
        # Spark cannot list or read them (no FileSystem for the scheme, ...): pyarrow can,
        # or says why not
        return None
