"""Accounting (issue 7): on random inputs, every command's summary says read = released +
discarded, and the rows written (output + --discards) are the rows read - also with
--bad-rows discard and bad lines mixed in."""

from __future__ import annotations

import csv
import re
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.examples import spark_settings

SUMMARY = re.compile(r"read (\d+), released (\d+), discarded (\d+)")
BAD_LINES = ["oops", "1,a,2009-03-01T12:00:00Z,extra", "2,b,not-a-time", "3,a,"]

# a row: (seconds after 12:00:00, key) or the index of a bad line
rows = st.lists(
    st.one_of(
        st.tuples(st.integers(0, 30), st.sampled_from("ab")),
        st.integers(0, len(BAD_LINES) - 1),
    ),
    min_size=1,
    max_size=25,
)
SETTINGS = spark_settings(3)


def _csv(path: Path, drawn, with_bad: bool) -> int:
    """Write the rows (bad lines only ``with_bad``); how many rows the file has."""
    lines, n = ["v,k,time"], 0
    for i, r in enumerate(drawn):
        if isinstance(r, int):
            if not with_bad:
                continue
            lines.append(BAD_LINES[r])
        else:
            lines.append(f"{i},{r[1]},2009-03-01T12:00:{r[0]:02d}Z")
        n += 1
    path.write_text("\n".join(lines) + "\n")
    return n


def _count(path: Path) -> int:
    with open(path, newline="") as fh:
        return sum(1 for _ in csv.DictReader(fh))


def _summary(r) -> tuple[int, int, int]:
    assert r.exit_code == 0, r.stderr
    read, released, discarded = map(int, SUMMARY.search(r.stderr).groups())
    assert read == released + discarded, r.stderr
    return read, released, discarded


def _bad_args(with_bad: bool) -> list[str]:
    return ["--bad-rows", "discard"] if with_bad else []


@SETTINGS
@given(drawn=rows, with_bad=st.booleans(), key=st.booleans())
def test_adjust_accounts_for_every_row(run_cli, drawn, with_bad, key):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        n = _csv(d / "in.csv", drawn, with_bad)
        r = run_cli(
            "adjust",
            "--unit",
            "sec",
            "--range",
            "3",
            *(["--key", "k"] if key else []),
            *_bad_args(with_bad),
            d / "in.csv",
            "-o",
            d / "out.csv",
            "--discards",
            d / "late.csv",
        )
        read, released, discarded = _summary(r)
        assert read == n
        assert (_count(d / "out.csv"), _count(d / "late.csv")) == (released, discarded)


@SETTINGS
@given(a=rows, b=rows, with_bad=st.booleans())
def test_merge_accounts_for_every_row(run_cli, a, b, with_bad):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        n = _csv(d / "a.csv", a, with_bad) + _csv(d / "b.csv", b, with_bad)
        r = run_cli(
            "merge",
            "--unit",
            "sec",
            "--range",
            "2",
            *_bad_args(with_bad),
            f"A={d / 'a.csv'}",
            f"B={d / 'b.csv'}",
            "-o",
            d / "out.csv",
            "--discards",
            d / "late.csv",
        )
        read, released, discarded = _summary(r)
        assert read == n
        assert (_count(d / "out.csv"), _count(d / "late.csv")) == (released, discarded)


@SETTINGS
@given(drawn=rows, with_bad=st.booleans())
def test_bound_accounts_for_every_row(run_cli, drawn, with_bad):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        n = _csv(d / "in.csv", drawn, with_bad)
        r = run_cli(
            "bound",
            "--window",
            "5s",
            "--key",
            "k",
            "--agg",
            "count(*) AS n",
            *_bad_args(with_bad),
            d / "in.csv",
            "-o",
            d / "out.csv",
            "--discards",
            d / "late.csv",
        )
        read, released, discarded = _summary(r)
        assert read == n
        with open(d / "out.csv", newline="") as fh:
            in_windows = sum(int(w["n"]) for w in csv.DictReader(fh))
        assert (in_windows, _count(d / "late.csv")) == (released, discarded)
