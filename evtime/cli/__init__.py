"""evtime's command line.  Nothing here imports pyspark at module level: --help, --version
and usage errors answer without starting a JVM."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import sys
import traceback

import click

from evtime import __version__, interrupts
from evtime.cli.lazy import LazyGroup
from evtime.errors import (
    EvtimeError,
    ExitStatus,
    PipeClosed,
    from_spark,
    missing_on_workers,
    redact,
)

COMMANDS = {
    "adjust": "evtime.cli.adjust:adjust",
    "merge": "evtime.cli.merge:merge",
    "bound": "evtime.cli.bound:bound",
    "explain": "evtime.cli.explain:explain",
    "sweep": "evtime.cli.sweep:sweep",
    "server": "evtime.cli.server:server",
}


EXAMPLES = """
\b
Examples:
  evtime adjust --unit msec --range 999 samples/tuples.parquet
  evtime explain adjust --unit usec --range 999 samples/tuples.parquet --plot why.svg
  evtime bound --window 1m --key device --agg 'avg(temp) AS mean' samples/bound/readings.csv

\b
'evtime COMMAND --help' and 'man evtime' tell more. Shell completion:
  eval "$(_EVTIME_COMPLETE=bash_source evtime)"   (zsh_source, fish_source alike)
"""


@click.group(
    cls=LazyGroup,
    commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXAMPLES,
)
@click.version_option(__version__, "--version", prog_name="evtime")
@click.option(
    "--reuse-server",
    is_flag=True,
    help="Run the command on the persistent local Spark Connect server (as the command's "
    "own --reuse-server; env EVTIME_REUSE_SERVER=1).",
)
@click.option("--master", metavar="URL", help="Spark master for the command (as its --master).")
@click.option("--remote", metavar="sc://HOST:PORT", help="Spark Connect server (as --remote).")
@click.option("--conf", multiple=True, metavar="KEY=VALUE", help="Spark setting (repeatable).")
@click.pass_context
def cli(ctx: click.Context, **session: object) -> None:
    """Put event files into event-time order the way a stream processor would.

    Hold rows within a bound, drop what is too late, and say why for every row.  The Spark
    options before COMMAND apply to it as if given after it (the command's own win)."""
    ctx.obj = session


def _verbose(argv: list[str]) -> bool:
    return "-v" in argv or "--verbose" in argv


def _traceback() -> None:
    """The current traceback on stderr (-v), without Spark Connect tokens."""
    sys.stderr.write(redact(traceback.format_exc()))
    sys.stderr.flush()


_RAISED = re.compile(r"[A-Za-z_][\w.]*(Error|Exception): ")  # a traceback's last line


def one_line(err: Exception) -> str:
    """A Spark or internal error in one line: its type and first line.  When that line only
    announces an exception from elsewhere (a Python worker's: "An exception was thrown
    from the Python worker:"), the last line of that exception follows it."""
    text = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    first = text[0] if text else ""
    if first.endswith(":"):
        raised = [line for line in text[1:] if _RAISED.match(line)]
        if raised:
            first = f"{first} {raised[-1]}"
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def _fail(message: str, status: int) -> None:
    # (the run's progress line, if any, stopped as its command's context closed)
    click.echo(f"evtime: {redact(message)}", err=True)
    sys.exit(status)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    try:
        status = cli.main(args=argv, prog_name="evtime", standalone_mode=False)
    except click.ClickException as err:
        err.show()
        sys.exit(ExitStatus.USAGE if isinstance(err, click.UsageError) else err.exit_code)
    except click.exceptions.Abort:
        _fail("aborted", ExitStatus.ERROR)
    except EvtimeError as err:
        if _verbose(argv):
            _traceback()
        err = from_spark(err) or err  # raised by task code run in this process
        _fail(str(err), err.exit_status)
    except (BrokenPipeError, PipeClosed):
        # the reader went away (| head): end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(ExitStatus.OK)
    except interrupts.Interrupted as err:
        _fail(interrupts.message(err.signum), interrupts.exit_status(err.signum))
    except KeyboardInterrupt:
        _fail(interrupts.message(signal.SIGINT), interrupts.exit_status(signal.SIGINT))
    except Exception as err:  # Spark errors, internal errors: one line unless -v
        if _verbose(argv):
            _traceback()
        ours = from_spark(err) or missing_on_workers(err)
        if ours is not None:
            _fail(str(ours), ours.exit_status)
        _fail(one_line(err), ExitStatus.ERROR)
    sys.exit(status or ExitStatus.OK)


def entry() -> None:
    """The ``evtime`` program (console script and ``python -m evtime``): :func:`main`, then
    the process ends at once.  Once the atexit handlers have run and the standard streams
    are flushed nothing is left to do but the interpreter's own slow teardown (PySpark's
    gRPC client, pandas, pyarrow).  Tests call :func:`main`, which ends with SystemExit."""
    interrupts.install()
    try:
        main()
        status: object = 0
    except SystemExit as done:
        status = done.code
    except interrupts.Interrupted as err:  # (while main reported another error)
        status = _interrupted(err)
    if status is None:
        status = 0
    elif not isinstance(status, int):
        print(status, file=sys.stderr)
        status = ExitStatus.ERROR
    try:
        if status in (ExitStatus.OK, ExitStatus.TOO_MANY_DISCARDS):  # (a failed run: no wait)
            _train_class_archive(quiet="-q" in sys.argv or "--quiet" in sys.argv)
        atexit._run_exitfuncs()
        _archive_written()
    except interrupts.Interrupted as err:
        status = _interrupted(err)
    if interrupts.received():
        interrupts.reap()  # (what the signal stopped is gone before evtime is)
    for stream in (sys.stdout, sys.stderr):
        # (the reader went away; a closed stream)
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)


def _archive_written() -> None:
    """The JVM that writes the class archive has written it and ended (see
    :func:`evtime.classcache.finish_writing`)."""
    from evtime import classcache

    if classcache.writing:
        classcache.finish_writing()


def _interrupted(err: interrupts.Interrupted) -> int:
    with contextlib.suppress(OSError, ValueError):
        click.echo(f"evtime: {interrupts.message(err.signum)}", err=True)
    return interrupts.exit_status(err.signum)


def _train_class_archive(quiet: bool) -> None:
    """When this run's JVM writes the class archive (the first run, see
    :mod:`evtime.classcache`): once the run is done and its standard output closed (a
    reader downstream sees the end now), the training jobs, in the same JVM."""
    from evtime import classcache

    if not classcache.writing:
        return
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    if not quiet:
        click.echo(
            "evtime: first run: writing Spark's class archive so that later runs start "
            "faster (once, some tens of seconds; EVTIME_CLASS_CACHE=0 turns it off)",
            err=True,
        )
    with contextlib.suppress(Exception, KeyboardInterrupt):
        classcache.train(main)
