"""evtime adjust: timestamp adjustment (SPEC §2)."""

from __future__ import annotations

import click

from evtime.cli import options
from evtime.runner import adjust as runner
from evtime.runner import inputs

EXAMPLES = """
\b
Examples:
  evtime adjust --unit msec --range 999 samples/tuples.parquet
  evtime adjust --unit sec --range 2 --key device -o sorted.parquet 'in/*.csv'
  cat events.csv | evtime adjust --unit msec --range 500 --discards late.csv - | head
"""


@click.command(cls=options.Command, epilog=EXAMPLES)
@options.adjust_options
@options.stack(
    click.option(
        "--as",
        "as_",
        default="evtime",
        show_default=True,
        metavar="NAME",
        help="Name of the adjusted-time column added to every row.",
    ),
    click.option(
        "--emit-bounds",
        is_flag=True,
        help="Needs --bound-marker. The output also carries a bound row (marker column set to "
        "VALUE, time and adjusted time = ref - range*unit, key columns set) wherever a key's "
        "reference time moves, for `evtime bound --bounds markers` downstream.",
    ),
    click.option(
        "--bound-marker",
        metavar="COL=VALUE",
        help="How emitted bound rows are marked (COL is added when the input lacks it).",
    ),
    section="Output",
)
@options.output_options
@options.state_options
@options.flushable_input_options
@options.session_options
def adjust(**kw) -> None:
    """Order rows by event time, holding late ones within a range.

    Truncate times to a unit, hold rows up to a range behind the reference time (the latest
    time seen), discard older ones, and release the rest in time order."""
    ses, inp = options.session(kw), inputs.inputs_of(kw)
    runner.adjust(runner.AdjustArgs.of(kw), ses, inp)
