"""What shell users meet around the result (issue: a good shell citizen): CSV that awk and
cut read, --plot that refuses to replace a picture as -o refuses an output."""

from __future__ import annotations

import csv
import io

import pytest

from tests.conftest import SAMPLES


def test_csv_output_quotes_only_what_needs_quotes(run_cli, workdir):
    names = ["plain", "a,b", 'say "hi"', "two\nlines", " pad ", ""]
    rows = [(n, f"2024-01-01T00:00:0{i}Z") for i, n in enumerate(names)]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([("name", "time"), *rows])
    (workdir / "in.csv").write_text(buf.getvalue())
    r = run_cli("adjust", "--unit", "sec", "--range", "0", "in.csv")
    assert r.exit_code == 0, r.stderr
    want = io.StringIO()
    w = csv.writer(want, lineterminator="\n")
    w.writerow(["name", "time", "evtime"])
    for n, t in rows:
        w.writerow([n, t, t.replace("Z", ".000000000Z")])
    # (an empty text value reads back as null: both are written as nothing)
    assert r.stdout == want.getvalue()
    first = r.stdout.splitlines()[1]
    assert first.split(",")[0] == "plain"  # what awk -F, '$1=="plain"' matches


@pytest.mark.parametrize("command", ["adjust", "merge", "bound"])
def test_plot_refuses_an_existing_picture_without_overwrite(run_cli, workdir, command):
    (workdir / "p.svg").write_text("<svg/>")
    opts = {
        "adjust": ["--unit", "msec", "--range", "999", str(SAMPLES / "tuples.parquet")],
        "merge": [str(SAMPLES / "tuples.parquet")],
        "bound": ["--window", "1s", str(SAMPLES / "tuples.parquet")],
    }[command]
    r = run_cli("explain", command, "--format", "csv", "--plot", "p.svg", *opts)
    assert (
        r.exit_code == 1
        and r.stderr.strip() == "evtime: p.svg exists: use --overwrite to replace it"
    )
    assert (workdir / "p.svg").read_text() == "<svg/>"
    r = run_cli("explain", command, "--format", "csv", "--plot", "p.svg", "--overwrite", *opts)
    assert r.exit_code == 0, r.stderr
    assert (workdir / "p.svg").read_text().lstrip().startswith("<?xml")
