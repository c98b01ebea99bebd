"""The explain table fits the terminal's width (COLUMNS), cut cells ending in an ellipsis;
piped, it is written at full width (issue 48)."""

from __future__ import annotations

import csv
import io

import pyarrow as pa
import pytest

from evtime.io.table import print_table
from tests.terminal import on_a_terminal

NAMES = ["arrival", "source", "time", "decision", "released_by", "reason", "note"]
REASON = "late: evtime 2009-03-01T12:15:22.345678901Z is below the bound " + "x" * 150
ROWS = [
    ["1", "samples/tuples.csv", "2009-03-01T12:15:22.345678901Z", "released", "1", "", "a"],
    ["2", "samples/tuples.csv", "2009-03-01T12:15:21.000000000Z", "discarded", "", REASON, "b"],
]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _parts(tmp_path) -> list[str]:
    p = tmp_path / "part-0"
    with open(p, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(ROWS)
    return [str(p)]


def _schema() -> pa.Schema:
    return pa.schema([(n, pa.string()) for n in NAMES])


def test_on_a_terminal_the_table_fits_columns(tmp_path, monkeypatch):
    for columns in (80, 120):
        monkeypatch.setenv("COLUMNS", str(columns))
        out = Terminal()
        print_table(_parts(tmp_path), _schema(), out)
        lines = out.getvalue().splitlines()
        assert len(lines) == 4
        assert max(len(x) for x in lines) <= columns, lines
        assert lines[3].split()[0] == "2" and "discarded" in lines[3]  # (short cells whole)
        assert "…" in lines[3] and REASON not in lines[3]
        assert "late: " in lines[3]  # (the reason's start)


def test_piped_the_table_is_full_width(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    print_table(_parts(tmp_path), _schema(), out)
    lines = out.getvalue().splitlines()
    assert REASON in lines[3] and "…" not in out.getvalue()
    assert ROWS[0][2] in lines[2]


@pytest.mark.cli
def test_explain_on_a_terminal_fits_it_and_csv_options_print_csv(tmp_path, cli_env):
    from tests.conftest import SAMPLES

    args = [
        "explain",
        "adjust",
        "--unit",
        "usec",
        "--range",
        "999",
        "-q",
        str(SAMPLES / "tuples.csv"),
        "--time-format",
        "yyyy/MM/dd HH:mm:ss:SSSSSSSSS",
    ]
    env = dict(cli_env, COLUMNS="120", TERM="xterm")
    shown = on_a_terminal(args, env, tmp_path).replace("\r\n", "\n").splitlines()
    assert shown[0].split()[:2] == ["arrival", "source"] and len(shown) == 7, shown
    assert max(len(x) for x in shown) <= 120 and any("…" in x for x in shown), shown
    tsv = on_a_terminal([*args, "--tsv"], env, tmp_path).replace("\r\n", "\n").splitlines()
    assert tsv[0].startswith("arrival\tsource\ttime\t") and len(tsv) == 6, tsv
