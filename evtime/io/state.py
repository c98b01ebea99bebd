"""``--state DIR``: what a stream holds between runs, committed together with the outputs.

Layout of DIR (local directories only)::

    DIR/CURRENT          {"generation": "gen-<id>"}: the committed state (absent: none yet)
    DIR/gen-<id>/        one generation: state.json (options, counters, inputs consumed),
                         the command's Parquet files (e.g. held.parquet), manifest.json
    DIR/.lock            held (flock) by the run using DIR

A run commits in this order (each step is a crash point, see :func:`crash_point`):

1. the new generation ``gen-<id>`` is created and its ``manifest.json`` written with status
   ``prepared`` and the temporary names its outputs will be assembled under;
2. Spark writes everything; the state files land in ``gen-<id>``; every output is
   assembled complete under its temporary name (next to a local destination; inside
   ``gen-<id>`` for object stores);
3. ``manifest.json`` becomes ``ready``, with each output's size;
4. each output is published (rename, or one PUT);
5. ``CURRENT`` is replaced (write + rename) to name ``gen-<id>``: the commit point;
6. the parent generation is removed.

A run that finds a generation other than CURRENT first recovers it: ``ready`` with
CURRENT as parent is rolled forward (outputs whose temporary file is still there are
published; the others must exist with the recorded size), then committed; anything else
(``prepared``, a stale generation, a ``ready`` one whose outputs are gone) is rolled back:
its temporary files and directory are removed, CURRENT stays.  So a crash loses and
duplicates nothing: either the run's outputs and its state are both there, or neither.
A rerun with exactly the inputs of the last committed run is a no-op (a cron retry).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field

import click

from evtime import __version__
from evtime.errors import EvtimeError, UsageError
from evtime.io import atomic
from evtime.io.crash import InjectedCrash, crash_point  # noqa: F401 (the crash points: here too)

FORMAT = 1


def _write_json(path: str, obj: dict) -> None:
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    with atomic.written(path, "w", fsync=True, tmp=tmp) as fh:
        json.dump(obj, fh, indent=1, sort_keys=True)


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise EvtimeError(f"{path}: unreadable state file: {err}") from None


@dataclass
class Output:
    path: str  # the destination (local path or URL)
    tmp: str  # local file it is assembled in
    size: int | None = None


@dataclass
class State:
    """The committed state of a stream (``meta`` is empty for a fresh stream)."""

    dir: str
    generation: str | None
    meta: dict = field(default_factory=dict)
    run: dict = field(default_factory=dict)  # this run's options and inputs (state.json)

    @property
    def fresh(self) -> bool:
        return not self.meta or self.meta.get("ended", False)

    @property
    def arrivals(self) -> int:
        return 0 if self.fresh else int(self.meta["arrivals"])

    def file(self, name: str) -> str:
        assert self.generation is not None
        return os.path.join(self.dir, self.generation, name)

    def read(self, spark, name: str):  # -> DataFrame
        """The Parquet file ``name`` of this state, read by Spark with the schema its footer
        gives (read here: no Spark job to infer it); Spark infers it when the footer has a
        type that Spark's reader may read otherwise than Arrow's types say."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import from_arrow_schema

        path = self.file(name)
        try:
            footer = pq.read_schema(path)
            plain = not any(
                pa.types.is_timestamp(t) and t.unit == "ns" or pa.types.is_dictionary(t)
                for t in footer.types
            )
            schema = from_arrow_schema(footer, prefer_timestamp_ntz=True) if plain else None
        except (OSError, TypeError, ValueError, NotImplementedError, pa.ArrowException):
            schema = None
        reader = spark.read if schema is None else spark.read.schema(schema)
        return reader.parquet(path)


def _local_dir(path: str) -> str:
    if "://" in path and not path.startswith("file://"):
        raise UsageError(f"--state {path}: the state must be a local directory")
    return os.path.abspath(path.removeprefix("file://"))


class StateDir:
    """One ``--state DIR`` for the length of a run: locked, recovered, then committed."""

    def __init__(self, path: str):
        self.shown = path
        self.dir = _local_dir(path)
        if os.path.exists(self.dir) and not os.path.isdir(self.dir):
            raise UsageError(f"--state {path}: not a directory")
        try:
            os.makedirs(self.dir, exist_ok=True)
            self._lock = open(os.path.join(self.dir, ".lock"), "w")  # noqa: SIM115
        except OSError as err:
            raise EvtimeError(f"--state {path}: cannot use it: {err.strerror}") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise EvtimeError(f"--state {path}: another evtime run is using it") from None
        self.new: str | None = None
        self.outputs: list[Output] = []

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._lock.close()

    # -- reading and recovery ------------------------------------------------------------

    def _current(self) -> str | None:
        cur = _read_json(os.path.join(self.dir, "CURRENT"))
        return None if cur is None else cur["generation"]

    def load(self) -> State:
        """Recover an interrupted run if there is one, then the committed state."""
        self.recover()
        gen = self._current()
        if gen is None:
            return State(self.dir, None)
        meta = _read_json(os.path.join(self.dir, gen, "state.json"))
        if meta is None:
            raise EvtimeError(f"--state {self.shown}: {gen}/state.json is missing")
        return State(self.dir, gen, meta)

    def recover(self) -> None:
        cur = self._current()
        for name in sorted(os.listdir(self.dir)):
            if not name.startswith("gen-") or name == cur:
                continue
            gen = os.path.join(self.dir, name)
            man = _read_json(os.path.join(gen, "manifest.json")) or {}
            outs = [Output(**o) for o in man.get("outputs", [])]
            if man.get("status") == "ready" and man.get("parent") == cur:
                if self._roll_forward(outs):
                    self._set_current(name)
                    self._drop(cur, [])
                    cur = name
                    click.echo(
                        f"evtime: --state {self.shown}: completed the interrupted run {name}",
                        err=True,
                    )
                    continue
                click.echo(
                    f"evtime: --state {self.shown}: rolled back the interrupted run {name} "
                    "(an output it published is gone or changed)",
                    err=True,
                )
            self._drop(name, outs)

    def _roll_forward(self, outs: list[Output]) -> bool:
        from evtime.io import writer

        for o in outs:
            if not os.path.exists(o.tmp) and writer.size_of(o.path) != o.size:
                return False
        for o in outs:
            if os.path.exists(o.tmp):
                writer.commit(writer.Sink("", (), o.path, "", []), o.tmp)
        return True

    def _drop(self, name: str | None, outs: list[Output]) -> None:
        for o in outs:
            with contextlib.suppress(OSError):
                os.unlink(o.tmp)
        if name:
            shutil.rmtree(os.path.join(self.dir, name), ignore_errors=True)

    def _set_current(self, name: str) -> None:
        _write_json(os.path.join(self.dir, "CURRENT"), {"generation": name})

    # -- checks --------------------------------------------------------------------------

    def check(self, state: State, command: str, options: dict, inputs: list[dict]) -> bool:
        """Refuse a state of another version, command or options (one line, exit 1);
        True when ``inputs`` are exactly those of the last committed run (nothing to do)."""
        meta = state.meta
        if not meta:
            return False
        last = meta.get("inputs", [])
        stdin = any(i["path"] == "-" for i in inputs)
        if inputs == last and not stdin:
            return True
        if state.fresh:
            return False
        seen = {i["path"] for i in last if i["path"] != "-"}
        again = [i["path"] for i in inputs if i["path"] in seen]
        if again:
            raise EvtimeError(
                f"--state {self.shown}: {again[0]} was already read by the last run "
                "(a stream reads each input once)"
            )
        if meta.get("format") != FORMAT or meta.get("version") != __version__:
            raise EvtimeError(
                f"--state {self.shown} was written by evtime {meta.get('version')}; this is "
                f"evtime {__version__}: finish that stream with its version (--flush)"
            )
        if meta.get("command") != command:
            raise EvtimeError(
                f"--state {self.shown} belongs to 'evtime {meta.get('command')}', "
                f"not 'evtime {command}'"
            )
        old = meta.get("options", {})
        for k in sorted(set(old) | set(options)):
            if old.get(k) != options.get(k):
                raise EvtimeError(
                    f"--state {self.shown} was written with {k} {_shown(old.get(k))}; "
                    f"this run has {k} {_shown(options.get(k))}: use the same options or "
                    "another state directory"
                )
        return False

    # -- writing and commit --------------------------------------------------------------

    def begin(self, state: State, outputs: list, staging: str) -> str:
        """Create the new generation and its ``prepared`` manifest; its directory."""
        from evtime.io import writer

        self.new = f"gen-{uuid.uuid4().hex[:12]}"
        gen = os.path.join(self.dir, self.new)
        os.makedirs(gen)
        self.outputs = [Output(s.path, writer.temp_name(s, gen)) for s in outputs]
        self._manifest(state, "prepared")
        self._parent = state.generation
        return gen

    def _manifest(self, state: State, status: str) -> None:
        assert self.new is not None
        _write_json(
            os.path.join(self.dir, self.new, "manifest.json"),
            {
                "status": status,
                "parent": state.generation,
                "outputs": [o.__dict__ for o in self.outputs],
            },
        )

    def commit(
        self,
        state: State,
        sinks: list,
        staging: str,
        lay,
        spark_schema,
        meta: dict,
        layouts: list | None = None,
    ) -> None:
        """Steps 2 (assemble) to 6 of the protocol; ``meta`` goes to state.json.  Every sink
        was written with ``lay`` and ``spark_schema``, or with its own pair in ``layouts``."""
        from evtime.io import writer

        assert self.new is not None
        gen = os.path.join(self.dir, self.new)
        _write_json(
            os.path.join(gen, "state.json"),
            {**meta, "format": FORMAT, "version": __version__},
        )
        layouts = layouts or [(lay, spark_schema)] * len(sinks)
        for s, o, (s_lay, s_schema) in zip(sinks, self.outputs, layouts, strict=True):
            o.size = writer.stage(s, staging, s_lay, s_schema, o.tmp)
        crash_point("staged")
        self._manifest(state, "ready")
        crash_point("ready")
        for i, (s, o) in enumerate(zip(sinks, self.outputs, strict=True)):
            writer.commit(s, o.tmp)
            if i == 0:
                crash_point("published-1")
        crash_point("published")
        self._set_current(self.new)
        crash_point("committed")
        self._drop(state.generation, [])

    def abort(self) -> None:
        """An error (not a crash) before the commit point: remove what this run began."""
        if self.new is not None and self._current() != self.new:
            self._drop(self.new, self.outputs)


def _shown(v) -> str:
    if v is None or v == [] or v is False:
        return "none"
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return str(v)


def input_record(files) -> list[dict]:
    """What a run read, to recognise a rerun of the last committed run: path and size."""
    from evtime.io.writer import size_of

    out = []
    for f in files:
        if f.shown == "-":
            out.append({"path": "-", "size": None})
            continue
        size = None
        with contextlib.suppress(Exception):
            size = size_of(f.url)
        out.append({"path": f.url, "size": size})
    return out
