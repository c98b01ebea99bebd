"""The context of one run: its Spark options (:class:`Session`) and what its start learnt
(:class:`RunContext`: the progress line, whether it reads and writes in this process, its empty
inputs).  :func:`evtime.runner.inputs.start` fills ``ses.run``; the later steps read it
from there.  Nothing here outlives the run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass
class RunContext:
    """What one run learnt as it started (set by :func:`evtime.runner.inputs.start`)."""

    progress: object = None  # the progress line of this run, if one is shown
    in_driver: bool = False  # it reads and writes in its own process (driver.driver_io)
    empty: tuple[str, ...] = ()  # its inputs that are empty (no rows, no columns)
    dialect: object = None  # the CSV dialect of its outputs (outputs.Dialect), if given

    def stop_progress(self) -> None:
        """The progress line off the terminal (if one is shown)."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def empty_note(self) -> str:
        """The summary's words on the empty inputs of this run ('' when none)."""
        if not self.empty:
            return ""
        names = ", ".join(self.empty[:5]) + (", ..." if len(self.empty) > 5 else "")
        return f"; {len(self.empty)} empty input{'s' if len(self.empty) != 1 else ''} ({names})"


@dataclass(frozen=True)
class Call:
    """What the command line asked for, as the runner needs it (the CLI makes it; the
    runner reads no click context): the command as typed (``evtime adjust``: the progress
    line's label), its parameters by name, and the options given before the command
    (``evtime --reuse-server adjust ...``)."""

    label: str = "evtime"
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    top: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


# rows a shuffle partition is given at most: with a 1 GiB heap, a task of explain adjust
# that sorted 6.25M rows (50M rows in 8 partitions) spilled 470-839 MB to disk
ROWS_PER_TASK = 2_000_000


def shuffle_for(spark, rows: int) -> None:
    """More shuffle partitions than the session's when ``rows`` would give a partition
    more than :data:`ROWS_PER_TASK` (a session setting: it holds for every later shuffle;
    adaptive execution still merges small partitions)."""
    want = -(-rows // ROWS_PER_TASK)
    if want > int(spark.conf.get(SHUFFLE_PARTITIONS)):
        spark.conf.set(SHUFFLE_PARTITIONS, str(want))


@dataclass
class Session:
    """The command's Spark options, and the context of its run (filled by ``start``)."""

    master: str | None
    remote: str | None
    conf: tuple[str, ...]
    verbose: bool
    quiet: bool
    reuse_server: bool = False
    staging: str | None = None
    run: RunContext = field(default_factory=RunContext)
    call: Call = field(default_factory=Call)


def session_of(kw: dict, call: Call | None = None) -> Session:
    """The command's Spark options, with those given before the command (``call.top``:
    ``evtime --reuse-server adjust ...``) where the command has none (--conf: both, its own
    last)."""
    keys = ("master", "remote", "conf", "verbose", "quiet", "reuse_server", "staging")
    ses = Session(*(kw.pop(k, None) for k in keys), call=call or Call())
    top = ses.call.top
    ses.master = ses.master or top.get("master")
    ses.remote = ses.remote or top.get("remote")
    ses.conf = (*top.get("conf", ()), *ses.conf)
    ses.reuse_server = bool(ses.reuse_server or top.get("reuse_server"))
    return ses
