"""Directory outputs (``-o DIR/``, ``--output-layout parts``): the Spark convention of a
directory of part files, in output order, published atomically.

Each Spark task writes its parts, each run of consecutive engine parts it writes one after
the other as one file (part ``p + 1`` goes on in part ``p``'s file: no other process can
hold a part between them; see evtime.io.writer._write_parts), a complete file of the
output's format (Parquet encoded in the task; every CSV part with its header), straight to
the destination with fsspec, under a hidden name named by its run's first part
(``DIR/_temporary/evtime-<run>/part-<first engine part>.<ext>``: the engine's part numbers
have gaps, so do these).  Its rows per file come back to this process with the rows per
route (the small frame the tasks return).  The files, in the order of their first parts,
hold the output in order, whichever process wrote them (the tasks, or this one for the
parts it makes).  Once every sink of the run is written,
this process publishes the directory: the manifest of an earlier run first removed (a
reader that honours it sees nothing from then on), then the part files no manifest lists
(an earlier run's, a killed run's), then the new parts renamed in output order to dense
names ``part-00000.<ext>``, ``part-00001.<ext>``, ... (``os.replace`` locally, a server-side
copy on object stores), and last the manifest ``_SUCCESS`` (JSON: format, columns, the parts
in order with their rows, total rows).  No byte of data goes through this process, except
the parts it makes itself (small: evtime.io.writer.made_part, small local inputs).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import uuid
from dataclasses import dataclass, field

import pyarrow as pa

from evtime.errors import OutputError, UsageError
from evtime.io import atomic
from evtime.io.staging import fs_of

MANIFEST = "_SUCCESS"
TEMPORARY = "_temporary"  # (Spark's name; hidden from readers: it starts with '_')
ROWS = "\0dir:"  # rows per part of a directory sink travel with the row counts
PART_NAME = re.compile(r"part-\d+\.")  # a part file of a directory output (any run's)
LAYOUTS = ("file", "parts")

_declared: set[str] = set()  # outputs written as directories by --output-layout parts


def declare(params: dict) -> None:
    """Note the run's ``-o`` as a directory output when ``--output-layout parts`` says so
    (before the sinks are made: their format follows); refuse standard output."""
    _declared.clear()
    out = params.get("output")
    parts = params.get("output_layout") == "parts"
    if params.get("fmt") == "table" and (parts or (out or "").endswith("/")):
        directory_format(out or "-", "table")  # (refused: one stream for reading)
    if not parts:
        return
    from evtime.io.compressed import is_stream

    if is_stream(out):
        raise UsageError(
            "--output-layout parts writes a directory of part files: give -o DIR "
            "(standard output is one stream)"
        )
    _declared.add(out)


def is_directory(path: str | None) -> bool:
    """Whether ``path`` is written as a directory of parts: a trailing slash, or declared
    by ``--output-layout parts``."""
    return bool(path) and path != "-" and (path.endswith("/") or path in _declared)


def refuse_with_state(layout: str | None, outputs: list[tuple[str, str | None]]) -> None:
    """``--state`` commits its outputs (``(option, path)``) as files together with the state:
    no directories (``layout``: ``--output-layout``)."""
    if layout == "parts":
        raise UsageError("--output-layout parts is not supported with --state: give -o FILE")
    for opt, path in outputs:
        if path and path.endswith("/"):
            raise UsageError(
                f"{opt} {path}: a directory output is not supported with --state: give a file"
            )


def _name(path: str) -> str:
    return os.path.basename(path.rstrip("/"))


def directory_format(path: str, forced: str | None) -> str:
    """The format of the parts of the directory ``path``: ``forced`` (--output-format), else
    the directory's own extension (``out.csv/``), else Parquet (Spark's default)."""
    from evtime.io.compressed import codec_of
    from evtime.io.sources import format_of

    if forced == "table":
        raise UsageError(
            f"-o {path}: --format table is one table for reading, not a directory of parts: "
            "give --format csv, jsonl or parquet"
        )
    name = _name(path)
    fmt = forced
    if fmt is None:
        try:
            fmt = format_of(name, None)
        except UsageError:
            fmt = "parquet"
    if fmt == "parquet" and codec_of(name):
        raise UsageError(
            f"{path}: Parquet is compressed inside the file; name it without {codec_of(name)}"
        )
    return fmt


def _url(path: str) -> str:
    """The directory as a URL every process can reach: local paths made absolute (Spark's
    Python workers may run in another directory)."""
    path = path.rstrip("/")
    if "://" in path:
        return path
    return os.path.abspath(path)


def _local(fs) -> bool:
    return "file" in fs.protocol


def _listing(fs, root: str) -> list[str]:
    """The names in the directory ``root`` (none when it does not exist)."""
    fs.invalidate_cache(root)  # (what the tasks wrote, and other runs: not what was seen)
    try:
        return [os.path.basename(p.rstrip("/")) for p in fs.ls(root, detail=False)]
    except FileNotFoundError:
        return []


def check_creatable(path: str, opt: str) -> None:
    """Refuse before any work a local directory output whose parent is missing, or that
    is a file."""
    fs, root = fs_of(_url(path))
    if not _local(fs):
        return
    if os.path.exists(root) and not os.path.isdir(root):
        raise OutputError(f"{opt} {path}: is a file, not a directory")
    parent = os.path.dirname(root)
    if not os.path.isdir(parent):
        raise OutputError(f"{opt} {path}: directory {parent} does not exist")


def check(path: str, overwrite: bool) -> None:
    """Refuse a directory output that exists (its manifest is there) without --overwrite,
    or that holds files evtime did not write (a reader would read them with the parts)."""
    fs, root = fs_of(_url(path))
    try:
        if fs.isfile(root):
            raise OutputError(f"{path}: is a file, not a directory")
        names = _listing(fs, root)
    except OSError as err:  # (bad credentials, access denied)
        raise OutputError(f"{path}: cannot write: {type(err).__name__}: {err}") from None
    if MANIFEST in names and not overwrite:
        raise OutputError(f"{path} exists: use --overwrite to replace it")
    foreign = [n for n in names if n[:1] not in "._" and not PART_NAME.match(n)]
    if foreign:
        raise OutputError(
            f"{path}: holds files evtime did not write ({', '.join(sorted(foreign)[:3])}): "
            "give a new or empty directory"
        )


@dataclass
class Directory:
    """One sink written as a directory of parts (see the module's description): what the
    tasks need to write their parts (it travels to them with the sink), and, in this
    process, the rows of each part they wrote (:meth:`take`)."""

    path: str  # as the user gave it
    url: str
    name: str  # the sink's
    fmt: str
    ext: str
    schema: pa.Schema
    overwrite: bool
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    rows: dict[int, int] = field(default_factory=dict)  # a file's first part -> rows (here)

    @classmethod
    def of(cls, sink, schema: pa.Schema) -> Directory:
        from evtime.io.compressed import codec_of

        codec = codec_of(_name(sink.path)) if sink.fmt != "parquet" else None
        ext = sink.fmt + (codec or "")
        return cls(sink.path, _url(sink.path), sink.name, sink.fmt, ext, schema, sink.overwrite)

    @property
    def temporary(self) -> str:
        return f"{self.url}/{TEMPORARY}/evtime-{self.run}"

    def temp(self, part: int) -> str:
        return f"{self.temporary}/part-{part:012d}.{self.ext}"

    def key(self, part: int) -> str:
        return f"{ROWS}{self.name}:{part}"

    def writer(self, sink, part: int) -> PartWriter:
        return PartWriter(self, sink, part)

    def take(self, seen: dict[str, int]) -> None:
        """Take this sink's rows per part (and its count of part files) out of ``seen``."""
        from evtime.io.parts import FILES

        seen.pop(FILES + self.name, None)
        prefix = f"{ROWS}{self.name}:"
        for k in [k for k in seen if k.startswith(prefix)]:
            part = int(k[len(prefix) :])
            self.rows[part] = self.rows.get(part, 0) + seen.pop(k)

    def publish(self) -> None:
        """The parts renamed in output order to dense names, then the manifest (see the
        module's description)."""
        from evtime.io.crash import crash_point

        check(self.path, self.overwrite)
        fs, root = fs_of(self.url)
        local = _local(fs)
        try:
            names = _listing(fs, root)
            if MANIFEST in names:  # (first: from now on, a reader sees no output)
                fs.rm(f"{root}/{MANIFEST}")
            for n in names:  # an earlier run's parts, a killed run's
                if PART_NAME.match(n):
                    fs.rm(f"{root}/{n}")
            _, temp_root = fs_of(f"{self.url}/{TEMPORARY}")
            for n in _listing(fs, temp_root):
                if n.startswith("evtime-") and n != f"evtime-{self.run}":
                    fs.rm(f"{temp_root}/{n}", recursive=True)
            order = sorted(p for p, n in self.rows.items() if n)
            width = max(5, len(str(len(order) - 1)))
            names = [f"part-{i:0{width}d}.{self.ext}" for i in range(len(order))]
            sources = [fs_of(self.temp(p))[1] for p in order]
            _move(fs, local, sources, [f"{root}/{n}" for n in names], self.path)
            parts = [{"name": n, "rows": self.rows[p]} for n, p in zip(names, order, strict=True)]
            crash_point("publishing")  # (tests: the parts published, not the manifest)
            manifest = {
                "format": self.fmt,
                "columns": [{"name": f.name, "type": str(f.type)} for f in self.schema],
                "parts": parts,
                "rows": sum(p["rows"] for p in parts),
            }
            data = (json.dumps(manifest, indent=1) + "\n").encode()
            if local:
                os.makedirs(root, exist_ok=True)
                tmp = f"{root}/.{MANIFEST}.{self.run}"
                with atomic.written(f"{root}/{MANIFEST}", tmp=tmp) as fh:
                    fh.write(data)
            else:
                fs.pipe_file(f"{root}/{MANIFEST}", data)  # (one PUT)
        except OSError as err:
            raise OutputError(f"{self.path}: cannot write: {type(err).__name__}: {err}") from None
        self.abandon()

    def abandon(self) -> None:
        """Remove what the tasks wrote under the hidden name (after publishing, or when the
        run failed)."""
        fs, temp = fs_of(self.temporary)
        with contextlib.suppress(OSError):
            if fs.exists(temp):
                fs.rm(temp, recursive=True)
        if _local(fs):  # (an empty _temporary left by no other run)
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(temp))


def _move(fs, local: bool, sources: list[str], targets: list[str], path: str) -> None:
    """The parts ``sources`` renamed to ``targets``: locally by ``os.replace``; on an object
    store by server-side copies, many at once, their sources removed later with the run's
    temporary directory, in batched deletes (:meth:`Directory.abandon`) -- ``fs.mv`` of
    one part after the other took five requests a part (two listings, a HEAD, the copy, a
    delete), one after the other; elsewhere (HDFS) by ``fs.mv`` (a rename)."""
    store = not local and _object_store(path)
    missing = ""
    try:
        if store and sources:
            fs.copy(sources, targets)  # (lists: no listing, no existence check)
        elif not store:
            for src, dst in zip(sources, targets, strict=True):
                missing = src
                if local:
                    os.replace(src, dst)
                else:
                    fs.mv(src, dst)
    except FileNotFoundError:
        if store:  # (the copies left every source in place)
            missing = next((s for s in sources if not fs.exists(s)), sources[0])
        raise OutputError(
            f"{path}: the Spark tasks wrote part files that this machine "
            f"cannot see ({missing}): write the output where every executor and this "
            "machine reach the same files (an object store, a shared mount)"
        ) from None


def _object_store(path: str) -> bool:
    from evtime.io.staging import on_object_store

    return on_object_store(_url(path))


def attach(sinks, lay, spark_schema) -> None:
    """Give each sink written as a directory its :class:`Directory` (before the job: the
    tasks write to it)."""
    from evtime.io.parts import arrow_schema

    for s in sinks:
        if s.directory is None and not s.to_stdout and is_directory(s.path):
            s.directory = Directory.of(s, arrow_schema(s, lay, spark_schema))


def abandon(sinks) -> None:
    """The temporary parts of every directory sink removed (none are left after a
    publication; after a failure, the job's)."""
    for s in sinks:
        if s.directory is not None:
            s.directory.abandon()


class PartWriter:
    """One file of a directory output (a run of consecutive parts), written by the task that
    holds its rows (see evtime.io.writer._PartWriter for parts staged for the driver): a
    complete file of the output's format under the hidden name of its first part.  Locally,
    written under a name of its own then renamed (two attempts of one task never write one
    file); on object stores, the object appears when it is closed."""

    def __init__(self, d: Directory, sink, part: int):
        self.d, self.sink = d, sink
        self.fs, self.path = fs_of(d.temp(part))
        self.local = _local(self.fs)
        self.tmp = f"{self.path}.{uuid.uuid4().hex[:8]}" if self.local else self.path
        self.raw = self.out = self.pw = self.compressed = None
        self.held: list[pa.Table] = []
        self.n = 0

    def _open(self) -> None:
        from evtime.io import csvtext
        from evtime.io.compressed import Compressed
        from evtime.io.parts import parquet_encodings

        if self.local:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.raw = self.fs.open(self.tmp, "wb")
        if self.d.fmt == "parquet":
            import pyarrow.parquet as pq

            schema = self.d.schema
            self.pw = pq.ParquetWriter(self.raw, schema, **parquet_encodings(schema))
            return
        codec = self.d.ext[len(self.d.fmt) :] or None
        self.compressed = Compressed(self.raw, codec) if codec else None
        self.out = self.compressed or self.raw
        if self.d.fmt == "csv" and self.sink.header:
            self.out.write(csvtext.header(self.d.schema.names, self.sink.delimiter))

    def write(self, table: pa.Table) -> None:
        from evtime.io import csvtext, jsonlines
        from evtime.io.parts import CSV_BATCH, ROW_GROUP

        if self.raw is None:
            self._open()
        if self.pw is not None:  # whole row groups
            self.held.append(table)
            self.n += table.num_rows
            if self.n >= ROW_GROUP:
                rows = pa.concat_tables(self.held)
                cut = self.n - self.n % ROW_GROUP
                self.pw.write_table(rows.slice(0, cut).cast(self.d.schema), ROW_GROUP)
                self.held, self.n = [rows.slice(cut)], self.n - cut
        elif self.d.fmt == "jsonl":
            self.out.write(jsonlines.encode(table))
        else:
            clean = set(self.sink.ns_columns)
            for start in range(0, table.num_rows, CSV_BATCH):
                part = table.slice(start, CSV_BATCH)
                if self.compressed is None:
                    csvtext.write(part, self.out, self.sink.delimiter, clean=clean)
                    continue
                text = io.BytesIO()  # (pyarrow's CSV writer wants a file: compressed after)
                csvtext.write(part, text, self.sink.delimiter, clean=clean)
                self.out.write(text.getvalue())

    def close(self) -> None:
        from evtime.io.parts import ROW_GROUP

        if self.raw is None:
            return
        if self.pw is not None:
            if self.n:
                rows = pa.concat_tables(self.held).cast(self.d.schema)
                self.pw.write_table(rows, ROW_GROUP)
            self.pw.close()
        if self.compressed is not None:
            self.compressed.finish()
        self.raw.close()
        self.raw = None
        if self.local:
            os.replace(self.tmp, self.path)
