"""--help reads well for every command (a one-line purpose, options under headings, 2-3
examples), and a column the user names that the input lacks is one line listing the
columns and a close match."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from evtime.cli import main
from tests.conftest import SAMPLES

COMMANDS = [
    ("adjust",),
    ("merge",),
    ("bound",),
    ("explain", "adjust"),
    ("explain", "merge"),
    ("explain", "bound"),
    ("server",),
    ("server", "status"),
    ("server", "stop"),
]
DATA = [c for c in COMMANDS if c[0] != "server"]
READINGS = SAMPLES / "bound" / "readings.csv"


def _run(*args: str) -> tuple[int, str, str]:
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        return code, out.getvalue().decode(), err.getvalue().decode()


@pytest.mark.parametrize("path", [(), *COMMANDS], ids=lambda p: " ".join(p) or "evtime")
def test_help_has_a_one_line_purpose_and_examples(path):
    code, out, _ = _run(*path, "--help")
    assert code == 0
    lines = out.splitlines()
    purpose = lines[2].strip()  # after "Usage: ..." and a blank line
    assert purpose.endswith(".") and len(purpose) <= 78, purpose
    examples = out[out.index("Examples:") :].splitlines()[1:]
    commands = [x for x in examples if x.strip().startswith("evtime")]
    assert len(commands) >= 2 or path[:1] == ("server",) and len(path) == 2, out


@pytest.mark.parametrize("path", DATA, ids=" ".join)
def test_options_are_grouped_under_headings(path):
    code, out, _ = _run(*path, "--help")
    headings = [x[:-1] for x in out.splitlines() if x and not x[0].isspace() and x.endswith(":")]
    assert {"Input", "Output", "Spark", "Other"} <= set(headings), headings
    assert "Operator" in headings or "Windows" in headings, headings
    assert "Options" not in headings
    other = out[out.index("\nOther:") : out.index("Examples:")]
    assert "--help" in other and "--time" not in other  # only --help is left over
    section = {
        "--time": "Input",
        "--key": "Input",
        "--master": "Spark",
        "-q, --quiet": "Spark",
        "-o, --output": "Output",
    }
    for opt, heading in section.items():
        i = out.index(f"  {opt} ")
        before = [h for h in headings if out.rfind(f"\n{h}:", 0, i) >= 0]
        nearest = max(before, key=lambda h: out.rfind(f"\n{h}:", 0, i))
        assert nearest == heading, (opt, nearest)


def test_merge_and_bound_share_the_bound_marker_options():
    from evtime.cli.bound import bound
    from evtime.cli.merge import merge

    def records(cmd: click.Command) -> dict[str, tuple]:
        ctx = click.Context(cmd)
        return {
            p.name: p.get_help_record(ctx)
            for p in cmd.params
            if p.name in ("bound_marker", "strict_bounds", "tick")
        }

    assert records(merge) == records(bound) and len(records(merge)) == 3
    code, out, _ = _run("bound", "--help")
    assert out.index("--bound-marker") < out.index("--strict-bounds") < out.index("--tick")


def test_tick_must_be_positive_in_merge_too():
    code, _, err = _run("merge", "--tick", "0s", READINGS, READINGS)
    assert code == 2 and "--tick must be a positive duration" in err


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["adjust", "--unit", "sec", "--range", "1", "--key", "devise"],
            "--key: no column 'devise'; columns: time, device, temp - did you mean 'device'?",
        ),
        (
            ["explain", "adjust", "--unit", "sec", "--range", "1", "--order-by", "tmp"],
            "--order-by: no column 'tmp'; columns: time, device, temp - did you mean 'temp'?",
        ),
        (
            ["adjust", "--unit", "sec", "--range", "1", "--time", "tme"],
            "no time column 'tme'; columns: time, device, temp - did you mean 'time'?",
        ),
        (
            ["merge", "--arrival", "tim", "--wait", "1s"],
            "--arrival: no column 'tim'; columns: time, device, temp - did you mean 'time'?",
        ),
        (
            ["bound", "--window", "1m", "--agg", "count(*)", "--bound-marker", "devic=x"],
            "--bound-marker: no column 'devic'; columns: time, device, temp"
            " - did you mean 'device'?",
        ),
        (
            ["explain", "merge", "--bound-marker", "dev=bound"],
            "--bound-marker: no column 'dev'; columns: time, device, temp - did you mean 'device'?",
        ),
    ],
)
def test_unknown_columns_list_the_columns_and_a_close_match_before_spark(args, message):
    import sys

    had_spark = "pyspark.sql.session" in sys.modules and _spark_active()
    inputs = [f"a={READINGS}", f"b={READINGS}"] if "merge" in args else [READINGS]
    code, out, err = _run(*args, *inputs)
    assert code == 2 and out == ""
    assert err.strip() == f"evtime: {message}", err
    if not had_spark:
        assert not _spark_active()  # found before any Spark session was built


def _spark_active() -> bool:
    import sys

    session = sys.modules.get("pyspark.sql.session")
    return bool(session and session.SparkSession.getActiveSession())


def test_an_unknown_column_in_agg_is_named_with_a_close_match(run_cli):
    r = run_cli("bound", "--window", "1m", "--agg", "avg(tmp) AS mean", READINGS)
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        "evtime: --agg: no column 'tmp'; columns: time, device, temp - did you mean 'temp'?"
    )
