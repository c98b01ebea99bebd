"""--delimiter, --tsv and --no-header on every command that writes CSV (issue 48): through
the CLI, byte-exact with Python's csv module writing the same rows in the same dialect (the
rows read back from the command's default comma output)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parent.parent / "samples"

# values that need quotes under one delimiter or another: a tab, a quote, ; | , and a line
# break (the row at 11:00 is late: discarded by adjust --range 1, kept by the others)
AWKWARD = (
    "time,note,n\n"
    '2009-03-01T12:00:00Z,"a\tb",1\n'
    '2009-03-01T12:00:02Z,"say ""hi""",2\n'
    "2009-03-01T12:00:01Z,x;y|z,3\n"
    '2009-03-01T11:00:00Z,"two\nlines, here",4\n'
    "2009-03-01T12:00:03Z,,5\n"
)


def _python_csv(rows: list[list[str]], delimiter: str) -> str:
    """Python's csv module (QUOTE_MINIMAL) writing ``rows``, LF line ends."""
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _rows(text: str, delimiter: str = ",") -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))


@pytest.fixture
def awkward(workdir) -> Path:
    p = workdir / "awkward.csv"
    p.write_text(AWKWARD)
    return p


COMMANDS = {
    "adjust": ["adjust", "--unit", "sec", "--range", "1"],
    "explain adjust": ["explain", "adjust", "--unit", "sec", "--range", "1", "--format", "csv"],
    "merge": ["merge"],
    "explain merge": ["explain", "merge", "--format", "csv"],
    "bound": ["bound", "--window", "1s", "--agg", "count(*) AS n", "--agg", "max(note) AS top"],
    "explain bound": ["explain", "bound", "--window", "1s", "--format", "csv"],
    "sweep adjust": ["sweep", "adjust", "--unit", "sec", "--range", "0,1,3600", "--format", "csv"],
}


DIALECTS = [(["--tsv"], "\t", True), (["--delimiter", "|", "--no-header"], "|", False)]


@pytest.mark.parametrize(
    "command,dialect",
    [(c, DIALECTS[i % 2]) for i, c in enumerate(COMMANDS)],
    ids=[f"{c}-{('tsv', 'pipe')[i % 2]}" for i, c in enumerate(COMMANDS)],
)
def test_every_command_writes_the_dialect_as_pythons_csv_does(run_cli, awkward, command, dialect):
    options, delimiter, header = dialect
    args = [*COMMANDS[command], str(awkward), "-q"]
    plain = run_cli(*args)
    assert plain.exit_code == 0, plain.stderr
    rows = _rows(plain.stdout)
    assert len(rows) > 1 and rows[0][0]
    got = run_cli(*args, *options)
    assert got.exit_code == 0, got.stderr
    assert got.stdout == _python_csv(rows if header else rows[1:], delimiter)


def test_the_dialect_reaches_files_and_the_discards(run_cli, awkward, workdir):
    args = ["adjust", "--unit", "sec", "--range", "1", str(awkward), "-q", "--overwrite"]
    plain = run_cli(*args, "-o", "out.csv", "--discards", "late.csv")
    assert plain.exit_code == 0, plain.stderr
    out, late = (_rows((workdir / n).read_text()) for n in ("out.csv", "late.csv"))
    assert any("two\nlines, here" in r for r in late)  # (the line break, quoted)
    got = run_cli(
        *args,
        "--output-format",
        "csv",
        "-o",
        "out.tsv",
        "--discards",
        "late.csv.gz",
        "--delimiter",
        "\\t",
    )
    assert got.exit_code == 0, got.stderr
    import gzip

    assert (workdir / "out.tsv").read_text() == _python_csv(out, "\t")
    assert gzip.decompress((workdir / "late.csv.gz").read_bytes()).decode() == _python_csv(
        late, "\t"
    )
    # a Parquet output and a CSV discards: the CSV one takes it
    mixed = run_cli(*args, "-o", "out.parquet", "--discards", "late2.csv", "--no-header")
    assert mixed.exit_code == 0, mixed.stderr
    assert (workdir / "late2.csv").read_text() == _python_csv(late[1:], ",")


@pytest.mark.parametrize(
    "command,options,says",
    [
        (COMMANDS["adjust"], ["--delimiter", ";;"], "--delimiter ';;': give one ASCII character"),
        (COMMANDS["adjust"], ["--delimiter", '"'], "give one ASCII character"),
        (COMMANDS["adjust"], ["--delimiter", "§"], "give one ASCII character"),
        (COMMANDS["adjust"], ["--tsv", "--delimiter", ";"], "--tsv is --delimiter"),
        (COMMANDS["adjust"], ["--tsv", "-o", "out.parquet"], "-o out.parquet is Parquet"),
        (COMMANDS["merge"], ["--no-header", "--format", "jsonl"], "is JSON Lines"),
        (
            ["explain", "adjust", "--unit", "sec", "--range", "1"],
            ["--tsv", "--format", "table"],
            "--format table is a table for reading",
        ),
        (
            ["sweep", "adjust", "--unit", "sec", "--range", "1"],
            ["--tsv", "-o", "s.parquet"],
            "is Parquet",
        ),
    ],
)
def test_bad_combinations_are_refused_in_one_line(
    run_cli, awkward, workdir, command, options, says
):
    r = run_cli(*command, str(awkward), *options)
    assert r.exit_code == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r.stderr
    assert not list(workdir.glob("*.parquet")) and not list(workdir.glob("out*"))
