"""`evtime bound` / `explain bound` command lines: usage errors are one line on stderr,
exit status 2, and come before Spark starts (no session fixture here)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from evtime.cli import main
from tests.conftest import SAMPLES

TRADES = str(SAMPLES / "bound" / "trades.csv")


def _run(*args: str):
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        return code, out.getvalue().decode(), err.getvalue().decode()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--window", "0s", "--agg", "count(*)"], "--window must be a positive duration"),
        (["--window", "1x", "--agg", "count(*)"], "bad duration '1x'"),
        (["--window", "1h"], "Missing option '--agg'"),
        (["--window", "1h", "--agg", "count(*)", "--bounds", "cti"], "needs --cti-every"),
        (["--window", "1h", "--agg", "count(*)", "--bounds", "markers"], "needs --bound-marker"),
        (["--window", "1h", "--agg", "count(*)", "--bound-marker", "kind"], "COL=VALUE"),
        (["--window", "1h", "--agg", "count(*)", "--strict-bounds"], "--bounds markers"),
        (["--window", "1h", "--agg", "count(*)", "--cti-every", "2"], "need --bounds cti"),
        (["--window", "1h", "--agg", "count(*)", "--unit", "sec"], "go together"),
        (
            [
                "--window",
                "1h",
                "--agg",
                "count(*)",
                "--bounds",
                "cti",
                "--cti-every",
                "1",
                "--unit",
                "sec",
                "--range",
                "1",
            ],
            "use them with --bounds rows",
        ),  # fmt: skip
        (["--window", "1h", "--slide", "1ns", "--agg", "count(*)"], "use a larger --slide"),
        (
            ["--window", "1h", "--agg", "count(*)", "--tick", "0ns"],
            "--tick must be a positive duration",
        ),
        (["--window", "1h", "--agg", "m(v)", "--udaf", "m=nope"], "NAME=module:Class"),
        (["--window", "1h", "--agg", "m(v)", "--udaf", "m=no_such_mod:C"], "cannot import"),
        (
            ["--window", "1h", "--agg", "m(v) * 2", "--udaf", f"m={SAMPLES}/bound/udafs.py:Spread"],
            "used alone",
        ),
        (
            ["--window", "1h", "--agg", "m(v)", "--udaf", f"m={SAMPLES}/bound/udafs.py:Nope"],
            "has no class 'Nope'",
        ),
    ],
)
def test_usage_errors(args, message):
    code, out, err = _run("bound", *args, TRADES)
    assert code == 2, err
    assert message in err and out == ""
    assert len([x for x in err.splitlines() if x.strip()]) <= 3  # usage hint + one line


def test_explain_accepts_the_same_options_without_agg():
    code, _, err = _run("explain", "bound", "--window", "0s", TRADES)
    assert code == 2 and "--window must be a positive duration" in err


def test_negative_durations_are_values_not_options():
    code, _, err = _run(
        "bound", "--window", "1h", "--agg", "count(*)", "--cti-delay", "-1ns", TRADES
    )
    assert code == 2 and "need --bounds cti" in err  # '-1ns' was read as the delay


def test_help_lists_every_option():
    code, out, _ = _run("bound", "--help")
    assert code == 0
    for opt in (
        "--window", "--slide", "--offset", "--window-end", "--agg", "--udaf", "--bounds",
        "--bound-marker", "--strict-bounds", "--tick", "--cti-every", "--cti-delay", "--late",
        "--unit", "--range", "--key", "--discards", "--output",
    ):  # fmt: skip
        assert opt in out, opt


def test_adjust_emit_bounds_needs_a_marker():
    code, _, err = _run("adjust", "--unit", "sec", "--range", "1", "--emit-bounds", TRADES)
    assert code == 2 and "--emit-bounds needs --bound-marker COL=VALUE" in err
