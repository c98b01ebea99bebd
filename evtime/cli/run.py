"""The steps every command shares: start Spark, read the inputs, write sinks, summarise."""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass

import click

from evtime.errors import UsageError

_progress = None  # the progress line of this run, if one is shown


def stop_progress() -> None:
    global _progress
    if _progress is not None:
        _progress.stop()
        _progress = None


@dataclass
class Inputs:
    inputs: tuple[str, ...]
    time_col: str | None
    time_format: str | None
    tz: str | None
    input_format: str | None
    order_by: str | None
    keys: tuple[str, ...]


@dataclass
class Session:
    master: str | None
    remote: str | None
    conf: tuple[str, ...]
    verbose: bool
    quiet: bool
    reuse_server: bool = False


def session_of(kw: dict) -> Session:
    keys = ("master", "remote", "conf", "verbose", "quiet", "reuse_server")
    return Session(*(kw.pop(k) for k in keys))


def inputs_of(kw: dict) -> Inputs:
    return Inputs(
        *(
            kw.pop(k)
            for k in ("inputs", "time_col", "time_format", "tz", "input_format", "order_by", "keys")
        )
    )


def start(inp: Inputs, ses: Session):
    """Spark session and the input DataFrame (lazy), checked against the columns it has."""
    from evtime.io import reader
    from evtime.io.sources import expand_inputs
    from evtime.session import SessionOptions, build_session

    files = expand_inputs(list(inp.inputs), inp.input_format)
    opts = reader.ReadOptions(inp.time_col, inp.time_format, inp.tz)
    lay = reader.layout(files, opts)  # fails fast on a missing time column, before Spark
    for col in [*inp.keys, *([inp.order_by] if inp.order_by else [])]:
        if col not in lay.schema.names:
            names = lay.schema.names
            raise UsageError(
                f"no column {col!r}; columns: {', '.join(names)}{reader.suggest(col, names)}"
            )
    spark = build_session(
        SessionOptions.from_cli(
            ses.master, ses.remote, ses.conf, ses.verbose, ses.reuse_server, small_input(files)
        )
    )
    global _progress
    from evtime.progress import maybe_start

    label = "evtime " + (
        click.get_current_context().command_path.split(" ", 1)[-1]
        if click.get_current_context(silent=True)
        else ""
    )
    _progress = maybe_start(spark, label, ses.quiet, bool(ses.remote or ses.reuse_server))
    df, lay = reader.read(spark, files, opts, lay)
    if inp.order_by:
        from evtime.engine.scan import order_arrivals

        df = order_arrivals(df, inp.order_by)
    return spark, df, lay, files


def small_input(files) -> bool:
    """Whether the input is local files of SMALL_INPUT bytes at most (remote URLs: unknown,
    so not small)."""
    import os

    from evtime.session import SMALL_INPUT

    total = 0
    for f in files:
        if "://" in f.url:
            return False
        try:
            total += os.path.getsize(f.url)
        except OSError:
            return False
    return total <= SMALL_INPUT


def discards_sink(
    path: str,
    overwrite: bool,
    own: list[str],
    extra: tuple[str, ...] = (),
    ns: tuple[str, ...] = (),
    routes: tuple[str, ...] = ("discard",),
):
    """The ``--discards`` sink: the row's own columns (plus ``extra``), then its arrival
    number, the reason and the bound it missed."""
    from evtime.io.writer import Sink, output_format

    added = ("arrival", "reason", "bound")
    clash = [c for c in added if c in own]
    if clash:
        raise UsageError(f"--discards adds columns {', '.join(clash)} that the input has")
    return Sink(
        "discards",
        routes,
        path,
        output_format(path, None),
        [*own, *extra, *added],
        [*ns, "bound"],
        overwrite,
    )


def write_and_publish(df, sinks, lay) -> dict[str, int]:
    from evtime.io import writer

    for s in sinks:
        writer.check_sink(s)
    staging = writer.staging_dir()
    try:
        counts = writer.write(df, sinks, lay, staging)
        for s in sinks:
            writer.publish(s, staging, lay, df.schema)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return counts


def count_read(df) -> int:
    """Rows read, counted on the input itself (checkpointed: no second read of the files),
    so the summary's accounting is a real check of the operator."""
    return df.count()


def summary(
    command: str,
    ses: Session,
    counts: dict[str, int],
    started: float,
    read: int | None = None,
    max_discards: int | None = None,
    detail: str = "",
) -> None:
    """The summary line on stderr; checks read = released + discarded when ``read`` is
    given (a mismatch is an internal error) and enforces ``--max-discards``."""
    from evtime.errors import EvtimeError, TooManyDiscards

    stop_progress()
    released, discarded = counts.get("out", 0), counts.get("discard", 0)
    seen = sum(counts.values())
    if read is None:
        read = seen
    elif read != released + discarded:
        raise EvtimeError(
            f"internal error: read {read} rows but released {released} + discarded "
            f"{discarded} = {released + discarded}; please report this"
        )
    if not ses.quiet:
        click.echo(
            f"evtime {command}: read {read}, released {released}, discarded {discarded}"
            f"{detail} ({time.monotonic() - started:.1f}s)",
            err=True,
        )
        sys.stderr.flush()
    if max_discards is not None and discarded > max_discards:
        raise TooManyDiscards(
            f"{discarded} rows discarded, more than --max-discards {max_discards}"
        )
