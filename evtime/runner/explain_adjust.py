"""``evtime explain adjust`` below its click command (:func:`explain_adjust`): every
arrival's decision, by the path
:func:`evtime.engine.adjust.choose.choose_explain` picks, written (and drawn with
``--plot``), then the summary."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evtime.runner import inputs, publish, summary
from evtime.runner.context import Session
from evtime.runner.explained import explain_format, file_source, rejected_frame
from evtime.runner.inputs import Inputs
from evtime.runner.outputs import ExplainArgs


@dataclass(frozen=True)
class ExplainAdjustArgs(ExplainArgs):
    """explain adjust's options, its Spark and input options aside (named as the click
    command names them), and ``title``: the picture's title (the command as typed)."""

    unit: str
    range_: int
    output_layout: str = "file"

    @classmethod
    def of(cls, kw: Mapping[str, Any], title: str = "") -> ExplainAdjustArgs:
        """The options among the click command's parameters ``kw``."""
        names = {f.name for f in dataclasses.fields(cls)} - {"title"}
        return cls(**{n: kw[n] for n in names}, title=title)


def explain_adjust(args: ExplainAdjustArgs, ses: Session, inp: Inputs) -> None:
    """Run ``evtime explain adjust`` (SPEC §5): the explanation written, and drawn."""
    started = time.monotonic()
    if args.plot:
        from evtime.io import plot

        plot.check_path(args.plot, args.overwrite)  # before Spark starts

    from evtime.engine import adjust as engine
    from evtime.engine import present
    from evtime.engine.scan import apply_in_parts
    from evtime.io.writer import Sink
    from evtime.units import truncated_range

    spec = engine.AdjustSpec(args.unit, args.range_, inp.keys)
    # (without keys: a pass over the times read here, and the search's carry, while Spark
    # starts)
    early = None if spec.keys else inputs.from_footers(lambda f, _: engine.early_explain(spec, f))
    got = inputs.start(inp, ses, meanwhile=early)
    df, lay, files = got.df, got.lay, got.files
    read = inputs.count_read(df, got)  # on the checkpointed input, before any operator
    df = engine.explained_input(df, lay.time_col)
    limits = truncated_range(got.time_range, spec.unit_ns)  # (known: no job to find them)
    own = present.own_columns(lay.schema.names, lay.time_col, ("ref",))
    summary.note_renamed("explain adjust", own)
    sources = [f.shown for f in files]
    with contextlib.ExitStack() as shared:
        frame, step = _adjust_frame(ses.run, df, spec, got, own, sources, read, limits, shared)
        frame = rejected_frame(frame, got, own, file_source(files))
        shown = frame if step is None else apply_in_parts(frame, step)  # (as written)
        sink = Sink(
            "explain",
            ("out", "discard"),
            args.output,
            explain_format(args.fmt, args.output, ses.call.params),
            present.shown_columns(("ref",), own),
            list(present.NS_COLUMNS),
            args.overwrite,
            text_of={"evtime": ("time", spec.unit_ns)},  # (the time truncated to the unit)
            own=present.own_map(own),
        )
        written = inputs.where_written(got, frame, step, ses.verbose, "explained")
        counts = publish.write_and_publish(ses.run, written, [sink], lay, step, shown.schema)
        if args.plot:
            keys = tuple(dict(own)[k] for k in spec.keys)
            plot.plot(shown, read, args.plot, args.title, keys=keys)
    summary.summary("explain adjust", ses, counts, started, read)


def _adjust_frame(run, df, spec, got, own, sources, read, limits, shared):
    """explain adjust's rows in arrival order, to write, and the step the writer runs on
    each part (None: the rows are the explanation), by the path
    :func:`evtime.engine.adjust.choose.choose_explain` picks (a directory the tasks share
    entered on the ``shared`` ExitStack)."""
    from evtime.engine.adjust import choose
    from evtime.io.staging import shared_dir

    facts = choose.Facts(in_driver=run.in_driver, rejected=got.rejected is not None)
    counted = lambda: shared.enter_context(shared_dir())  # noqa: E731 (the kept rows per part)
    ctx = choose.Run(read, got.as_read, limits, counted, got.found_early, got.one_chunk)
    good = lambda: read - inputs.rejected_count(got)  # noqa: E731 (arrivals 1..good: bad rows have none)
    return choose.choose_explain(spec, facts, ctx, sources, own, good).explain(df)
