"""The end of a run: the summary line on stderr, which checks the run's accounting (read =
released + discarded + held + bound rows: a mismatch is an internal error) and enforces
--max-discards; and the warning for the row's columns that were renamed."""

from __future__ import annotations

import sys
import time

import click

from evtime.runner.context import Session


def summary(
    command: str,
    ses: Session,
    counts: dict[str, int],
    started: float,
    read: int | None = None,
    max_discards: int | None = None,
    detail: str = "",
    carried: int | None = None,
) -> None:
    """The summary line on stderr; checks read = released + discarded (+ bound rows) when
    ``read`` is given (a mismatch is an internal error) and enforces ``--max-discards``.  With
    ``--state`` (``carried`` given: rows an earlier run held) the check is
    read + carried = released + discarded + held, and both appear in the summary."""
    from evtime.errors import EvtimeError, TooManyDiscards

    ses.run.stop_progress()
    released, discarded = counts.get("out", 0), counts.get("discard", 0)
    held, bound_rows = counts.get("held", 0), counts.get("bound", 0)
    seen = sum(counts.values())
    if read is None:
        read = seen
    elif carried is None and read != released + discarded + bound_rows:
        raise EvtimeError(
            f"internal error: read {read} rows but released {released} + discarded "
            f"{discarded} + bound rows {bound_rows} = {released + discarded + bound_rows}; "
            "please report this"
        )
    elif carried is not None and read + carried != released + discarded + held + bound_rows:
        raise EvtimeError(
            f"internal error: read {read} + carried {carried} rows but released {released} "
            f"+ discarded {discarded} + held {held} + bound rows {bound_rows} = "
            f"{released + discarded + held + bound_rows}; please report this"
        )
    if not ses.quiet:
        counted = f"read {read}, released {released}, discarded {discarded}"
        if carried is not None:
            counted = (
                f"read {read}, carried {carried}, released {released}, discarded {discarded}, "
                f"held {held}"
            )
        click.echo(
            f"evtime {command}: {counted}{detail}{ses.run.empty_note()} "
            f"({time.monotonic() - started:.1f}s)",
            err=True,
        )
        sys.stderr.flush()
    if max_discards is not None and discarded > max_discards:
        raise TooManyDiscards(
            f"{discarded} rows discarded, more than --max-discards {max_discards}"
        )


def note_renamed(command: str, own: list[tuple[str, str]]) -> None:
    """Say once on stderr which of the row's columns could not take the plain ``row_`` name
    (a warning, even with -q: the output's columns are not the ones the user expects)."""
    from evtime.engine.present import crowded

    for words in crowded(own):
        print(f"evtime {command}: {words}", file=sys.stderr)
