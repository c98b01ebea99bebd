"""What every ``explain`` command shares once its operator has explained the rows: the
format of its output (:func:`explain_format`) and the rows of ``--bad-rows discard`` after
the explained ones (:func:`rejected_frame`, :func:`file_source`)."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from evtime.runner import inputs, outputs


def explain_format(fmt: str | None, output: str, params: Mapping) -> str:
    """The format of explain's output: ``fmt`` (--format) if given, else a table on a
    terminal (CSV when a CSV option is in ``params``), else what ``output``'s name says."""
    from evtime.io.writer import output_format

    if fmt:
        return fmt
    if output == "-":  # (--delimiter, --tsv, --no-header: CSV, even on a terminal)
        return "table" if sys.stdout.isatty() and not outputs.dialect_given(params) else "csv"
    return output_format(output, None)


def file_source(files):  # -> Column
    """The explain ``source`` of a row: the file it came from."""
    from evtime.engine.present import source_of_file

    return source_of_file([f.shown for f in files])


def rejected_frame(frame, got, own: list[tuple[str, str]], source, route="discard"):
    """The explain frame followed by the rows of ``--bad-rows discard``: decision
    discarded, the reason, their source and own columns, nothing else."""
    if got.rejected is None:
        return frame
    from evtime.columns import ROUTE
    from evtime.engine.present import rejected_columns

    cols = rejected_columns(frame, own, source, (ROUTE, "reason", "_evt_seq"))
    return inputs.with_rejected(frame, got, cols, route)
