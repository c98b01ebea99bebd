"""Writing a run's outputs: every ``(frame, sinks, layout)`` job written under one staging
directory, then all published (:func:`publish_jobs`): no sink is published unless every
one was written.  Where the rows are written (this process or Spark's tasks) follows the
run's context (``RunContext.in_driver``, :func:`evtime.runner.driver.few_rows`); the progress line
stops before data goes to standard output.  Returns the rows seen per route."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evtime.runner.context import RunContext
from evtime.runner.outputs import with_dialect

if TYPE_CHECKING:
    from evtime.engine.scan import KeptInPart


@dataclass(frozen=True)
class Routed:
    """A part step (:class:`evtime.engine.scan.KeptInPart`) whose rows then get their
    route from the step's flag: ``route(batch) -> array``, reading ``reads`` too."""

    step: KeptInPart
    route: Callable
    reads: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.step.columns, *self.reads)

    def __call__(self, part):
        from evtime.columns import ROUTE

        for b in self.step(part):
            route = self.route(b)
            b = b.drop_columns([c for c in (ROUTE, self.step.out) if c in b.schema.names])
            yield b.append_column(ROUTE, route)


def write_and_publish(run: RunContext, df, sinks, lay, step=None, schema=None) -> dict[str, int]:
    """:func:`publish_jobs` of one job.  ``step``: run on each of ``df``'s sorted parts
    (not the bad rows after them) before it is written (an
    :class:`evtime.steps.PartStep`, such as :class:`Routed`); ``schema``: the Spark
    schema of the rows it yields, when it makes columns ``df`` lacks."""
    return publish_jobs(run, [(df, sinks, lay)], step=step, schema=schema)


def publish_jobs(
    run: RunContext, jobs, in_driver: Sequence[bool] | None = None, step=None, schema=None
) -> dict[str, int]:
    """Write every ``(frame, sinks, layout)`` (one Spark job each), then publish them all:
    no sink is published unless every one was written.  Rows seen per route, summed.
    ``in_driver``: per job, whether its rows come to this process to be written (default:
    as the run reads, ``run.in_driver``; see also :func:`evtime.runner.driver.few_rows`);
    ``step``, ``schema``: see :func:`write_and_publish`."""
    from evtime.io import writer
    from evtime.io.staging import shared_dir

    for _, sinks, _ in jobs:
        with_dialect(sinks, run.dialect)
        for s in sinks:
            writer.check_sink(s)
    with shared_dir() as staging:
        staged: dict[str, str] = {}  # sink name -> its output, assembled as its job ran
        try:
            counts = write_jobs(run, jobs, staging, in_driver, step, schema, staged)
            before_stdout(run, jobs)
            for frame, sinks, lay in jobs:
                for s in sinks:
                    if s.name in staged:
                        writer.commit(s, staged[s.name])
                    else:
                        writer.publish(s, staging, lay, schema or frame.schema)
        finally:
            from evtime.io import directory

            for _, sinks, _ in jobs:  # (a directory output's parts, left by a failure)
                directory.abandon(sinks)
            for tmp in staged.values():
                if os.path.exists(tmp):
                    os.unlink(tmp)
    return counts


def write_jobs(
    run: RunContext,
    jobs,
    staging: str,
    in_driver: Sequence[bool] | None = None,
    step=None,
    schema=None,
    staged: dict[str, str] | None = None,
) -> dict[str, int]:
    """Write every ``(frame, sinks, layout)`` under ``staging``: rows seen per route, summed.
    ``in_driver``, ``step``, ``schema``: see :func:`publish_jobs`.  A step with ``ranges``
    (its parts in runs, one per Spark partition, in order) has its one job's file sinks
    assembled while the job runs (:class:`evtime.io.writer.Early`), into the files that
    ``staged`` then names."""
    from evtime.engine.scan import AFTER_PARTS
    from evtime.io import directory, writer

    counts: dict[str, int] = {}
    in_driver = in_driver or [run.in_driver] * len(jobs)
    ranges = getattr(step, "ranges", None)
    for (frame, sinks, lay), here in zip(jobs, in_driver, strict=True):
        early = None
        directory.attach(sinks, lay, schema or frame.schema)  # (-o DIR/: parts written there)
        files = all(not s.to_stdout and s.fmt != "table" and not s.directory for s in sinks)
        files = files and not any(writer.server_side(s, staging) for s in sinks)
        if ranges is not None and not here and len(jobs) == 1 and staged is not None and files:
            early = writer.Early(sinks, staging, lay, schema or frame.schema, ranges)
        try:
            # (the step skips the bad rows' parts, numbered from AFTER_PARTS on)
            seen = writer.write(
                frame, sinks, lay, staging, here, step, AFTER_PARTS, ranges if early else None
            )
            taken = early.finish() if early else {}
        except BaseException:
            if early:
                early.abandon()
            raise
        if early:
            staged.update(early.tmp)
            writer.add_counts(seen, early.seen)
        elif ranges is not None:  # (parts this process makes: after the job, in order)
            for i in range(ranges.n):
                writer.add_counts(seen, writer.made_part(ranges, i, sinks, lay, staging))
        writer.check_parts(seen, sinks, staging, taken)
        writer.add_counts(counts, seen)
    return counts


def before_stdout(run: RunContext, jobs) -> None:
    """The progress line off the terminal before data goes to standard output (which is
    often the same terminal): the data's first line must not start after it."""
    if any(s.to_stdout for _, sinks, _ in jobs for s in sinks):
        run.stop_progress()
