"""Options no other test ran through the CLI (issue 47, "What no test exercises today"): each
checked against the reference models in tests/model/ or against times computed here by hand."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pyarrow.parquet as pq
import pytest

from tests.model.adjust import adjust as model_adjust
from tests.model.adjust import iso
from tests.model.bound import Event
from tests.model.bound import bound as model_bound
from tests.model.merge import Arrival, merge_output
from tests.model.merge import merge as model_merge
from tests.test_sweep import expected_adjust, expected_bound, expected_merge, sweep_rows

S = 1_000_000_000
T0 = 1_672_531_200 * S  # 2023-01-01T00:00:00Z
# arrival order with late rows; seconds after T0
SECS = [5, 1, 12, 3, 25, 20, 20, 9, 31]
UDAFS = os.path.join(os.path.dirname(__file__), "..", "samples", "bound", "udafs.py")


def _csv(times: list[int]) -> str:
    return "time,v\n" + "".join(f"{iso(t)},{i}\n" for i, t in enumerate(times, 1))


def _jsonl(times: list[int]) -> str:
    return "".join(json.dumps({"time": iso(t), "v": i}) + "\n" for i, t in enumerate(times, 1))


TIMES = [T0 + s * S for s in SECS]


def _adjusted(rows) -> list[str]:
    """Released rows' evtime text in output order, from the adjust model."""
    kept = sorted((r for r in rows if r.decision == "released"), key=lambda r: r.output_pos)
    return [iso(r.evtime) for r in kept]


# ---------------------------------------------------------------- --tz over a DST change


def _berlin(wall: str, fold: int = 0) -> int:
    local = datetime.fromisoformat(wall).replace(tzinfo=ZoneInfo("Europe/Berlin"), fold=fold)
    return int(local.timestamp()) * S


def test_tz_fall_back_hour_takes_the_earliest_instant(run_cli, workdir):
    """2023-10-29 02:30 happens twice in Berlin (CEST, then CET): a naive time there is the
    first (earliest) instant, as the man page says; the hour after the change is CET."""
    walls = ["2023-10-29T01:59:00", "2023-10-29T02:30:00", "2023-10-29T03:10:00",
             "2023-10-29T02:30:00", "2023-10-29T02:00:00"]  # fmt: skip
    (workdir / "in.csv").write_text("time,v\n" + "".join(f"{w},{i}\n" for i, w in enumerate(walls)))
    r = run_cli("adjust", "--unit", "min", "--range", "200", "--tz", "Europe/Berlin",
                "--format", "jsonl", "in.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    utc = [_berlin(w, fold=0) for w in walls]
    # 02:30 earliest is 00:30Z, not 01:30Z (the second occurrence)
    assert utc[1] == int(datetime(2023, 10, 29, 0, 30, tzinfo=UTC).timestamp()) * S
    want = _adjusted(model_adjust([((), t) for t in utc], 60 * S, 200))
    assert [row["evtime"] for row in r.jsonl()] == want
    assert [row["time"] for row in r.jsonl()][:1] == ["2023-10-29T01:59:00"]  # kept as read


def test_tz_spring_forward_gap_is_a_bad_row(run_cli, workdir):
    """2023-03-26 02:30 does not exist in Berlin: a bad row (line 3, column time)."""
    (workdir / "in.csv").write_text("time\n2023-03-26T01:30:00\n2023-03-26T02:30:00\n")
    r = run_cli("adjust", "--unit", "sec", "--range", "1", "--tz", "Europe/Berlin", "in.csv")
    assert r.exit_code != 0 and r.exception is None
    assert "in.csv" in r.stderr and "3" in r.stderr and "time" in r.stderr
    r = run_cli("adjust", "--unit", "sec", "--range", "1", "--tz", "Europe/Berlin",
                "--bad-rows", "discard", "in.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert [row["evtime"] for row in r.csv()] == [iso(_berlin("2023-03-26T01:30:00"))]


# ---------------------------------------------------------------- --input-format everywhere


def _per_command():
    """(argv after the command, check(result)) for every command, from the models."""
    arr = [((), t) for t in TIMES]
    adj = model_adjust(arr, S, 3)
    one = [[Arrival(0, t) for t in TIMES]]
    mrows = model_merge(one)
    wins, brows = model_bound([Event((), t) for t in TIMES], size=10 * S)

    def adjust_ok(r):
        assert [row["evtime"] for row in r.csv()] == _adjusted(adj)

    def explain_adjust_ok(r):
        assert [row["decision"] for row in r.csv()] == [x.decision for x in adj]

    def merge_ok(r):
        assert [row["v"] for row in r.csv()] == [str(j + 1) for _, j, _ in merge_output(one)]

    def explain_merge_ok(r):
        assert [row["decision"] for row in r.csv()] == [x.decision for x in mrows]

    def bound_ok(r):
        assert [(row["window_start"], row["rows"]) for row in r.csv()] == [
            (iso(w.start), str(w.rows)) for w in wins
        ]

    def explain_bound_ok(r):
        assert [row["decision"] for row in r.csv()] == [x.decision for x in brows]

    def sweep_adjust_ok(r):
        assert sweep_rows(r) == [expected_adjust(arr, S, 3)]

    def sweep_bound_ok(r):
        assert sweep_rows(r) == [expected_bound([Event((), t) for t in TIMES], "window", "10s",
                                          size=10 * S)]  # fmt: skip

    return {
        "adjust": (["adjust", "--unit", "sec", "--range", "3"], adjust_ok),
        "explain adjust": (
            ["explain", "adjust", "--unit", "sec", "--range", "3"],
            explain_adjust_ok,
        ),
        "merge": (["merge"], merge_ok),
        "explain merge": (["explain", "merge"], explain_merge_ok),
        "bound": (["bound", "--window", "10s", "--agg", "count(*)"], bound_ok),
        "explain bound": (["explain", "bound", "--window", "10s"], explain_bound_ok),
        "sweep adjust": (["sweep", "adjust", "--unit", "sec", "--range", "3"], sweep_adjust_ok),
        "sweep bound": (["sweep", "bound", "--window", "10s"], sweep_bound_ok),
    }


@pytest.mark.parametrize("command", list(_per_command()))
def test_input_format_wins_over_a_misleading_extension(run_cli, workdir, command):
    """JSON Lines in a file named .csv, read with --input-format jsonl, on every command."""
    (workdir / "events.csv").write_text(_jsonl(TIMES))
    args, check = _per_command()[command]
    r = run_cli(*args, "--input-format", "jsonl", "--format", "csv", "events.csv")
    assert r.exit_code == 0, r.stderr
    check(r)


def test_sweep_merge_input_format(run_cli, workdir):
    (workdir / "a.parquet").write_text("time,recv\n" + "".join(
        f"{iso(t)},{iso(t + 2 * S)}\n" for t in TIMES))  # fmt: skip
    r = run_cli("sweep", "merge", "--arrival", "recv", "--wait", "0s,3s", "--format", "csv",
                "--input-format", "csv", "a.parquet")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    src = [[Arrival(0, t, arrival_time=t + 2 * S) for t in TIMES]]
    assert sweep_rows(r) == [expected_merge(src, "0s", 0), expected_merge(src, "3s", 3 * S)]


# ---------------------------------------------------------------- compressed inputs


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor().compress(data)


CODECS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "zst": _zstd}


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_compressed_inputs(run_cli, workdir, fmt):
    """One input per codec, in one run: each read whole and in order."""
    names, times = [], []
    for k, (codec, compress) in enumerate(CODECS.items()):
        shifted = [t + k * 100 * S for t in TIMES]  # each file its own later stretch
        text = (_csv(shifted) if fmt == "csv" else _jsonl(shifted)).encode()
        names.append(f"in-{codec}.{fmt}.{codec}")
        (workdir / names[-1]).write_bytes(compress(text))
        times += shifted
    r = run_cli("adjust", "--unit", "sec", "--range", "3", "--format", "csv", *names)
    assert r.exit_code == 0, r.stderr
    want = _adjusted(model_adjust([((), t) for t in times], S, 3))
    assert [row["evtime"] for row in r.csv()] == want


# ---------------------------------------------------------------- merge --as / --source-as,
# --output-format for adjust and merge


def test_merge_as_source_as_and_output_format_parquet(run_cli, workdir):
    a, b = TIMES[:5], [t + 500_000_000 for t in TIMES[3:]]
    (workdir / "a.csv").write_text(_csv(a))
    (workdir / "b.csv").write_text(_csv(b))
    r = run_cli("merge", "--as", "when", "--source-as", "from", "--output-format", "parquet",
                "-o", "merged.out", "left=a.csv", "right=b.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    table = pq.read_table(workdir / "merged.out")
    assert table.column_names == ["time", "v", "from", "when"]
    want = merge_output([[Arrival(0, t) for t in a], [Arrival(1, t) for t in b]])
    names = ["left", "right"]
    assert table.column("from").to_pylist() == [names[s] for s, _, _ in want]
    # (a CSV column passes through as the text it was)
    assert table.column("v").to_pylist() == [str(j + 1) for _, j, _ in want]
    when = table.column("when").cast("int64").to_pylist()
    assert when == [ev for _, _, ev in want]


def test_adjust_output_format_jsonl_with_any_name(run_cli, workdir):
    (workdir / "in.csv").write_text(_csv(TIMES))
    r = run_cli("adjust", "--unit", "sec", "--range", "3", "--output-format", "jsonl",
                "-o", "out.parquet", "in.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    lines = (workdir / "out.parquet").read_text().splitlines()
    got = [json.loads(line)["evtime"] for line in lines]
    assert got == _adjusted(model_adjust([((), t) for t in TIMES], S, 3))


# ---------------------------------------------------------------- explain bound options


def test_explain_bound_udaf_cti_late_adjust_offset(run_cli, workdir):
    (workdir / "in.csv").write_text(_csv(TIMES))
    r = run_cli("explain", "bound", "--window", "10s", "--offset", "3s", "--bounds", "cti",
                "--cti-every", "2", "--cti-delay", "1s", "--late", "adjust",
                "--udaf", f"m={UDAFS}:SlidingMean", "--agg", "m(v) AS mean",
                "--format", "csv", "in.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    _, rows = model_bound([Event((), t) for t in TIMES], size=10 * S, offset=3 * S,
                          bounds="cti", cti_every=2, cti_delay=S, late="adjust")  # fmt: skip
    got = [(x["decision"], x["evtime"], x["bound"], x["windows"]) for x in r.csv()]
    want = [
        (b.decision, iso(b.evtime), iso(b.bound),
         " ".join(f"[{iso(s)},{iso(e)})" for s, e in b.windows))
        for b in rows
    ]  # fmt: skip
    assert got == want
    assert "adjusted" in {x[0] for x in want}  # the case is exercised


def test_bound_udaf_with_offset_values(run_cli, workdir):
    """The user aggregate's values themselves, per window shifted by --offset."""
    (workdir / "in.csv").write_text(_csv(TIMES))
    r = run_cli("bound", "--window", "10s", "--offset", "-4s", "--udaf",
                f"m={UDAFS}:SlidingMean", "--agg", "m(v) AS mean", "in.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    wins, _ = model_bound([Event((), t, value=i) for i, t in enumerate(TIMES, 1)],
                          size=10 * S, offset=-4 * S)  # fmt: skip
    got = [(x["window_start"], float(x["mean"])) for x in r.csv()]
    assert got == [(iso(w.start), sum(w.values) / len(w.values)) for w in wins]


# ---------------------------------------------------------------- sweep options


def test_sweep_bound_slide_offset_inclusive_agg_udaf(run_cli, workdir):
    (workdir / "in.csv").write_text(_csv(TIMES))
    r = run_cli("sweep", "bound", "--window", "10s,20s", "--slide", "5s", "--offset", "1s",
                "--window-end", "inclusive", "--agg", "count(*)",
                "--udaf", f"m={UDAFS}:SlidingMean", "--agg", "m(v)",
                "--format", "csv", "in.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    events = [Event((), t) for t in TIMES]
    assert sweep_rows(r) == [
        expected_bound(events, "window", f"{n}s", size=n * S, slide=5 * S, offset=S,
                       inclusive_end=True)
        for n in (10, 20)
    ]  # fmt: skip


def test_sweep_merge_unit_range(run_cli, workdir):
    a = [(T0 + s * 1_300_000_000, T0 + (s + 2) * S) for s in (3, 1, 5, 2, 9)]
    b = [(T0 + s * 1_100_000_000, T0 + (s + 1) * S) for s in (2, 6, 4, 8)]
    for name, rows in (("a", a), ("b", b)):
        (workdir / f"{name}.csv").write_text(
            "time,recv\n" + "".join(f"{iso(t)},{iso(x)}\n" for t, x in rows)
        )
    r = run_cli("sweep", "merge", "--arrival", "recv", "--wait", "0s,2s", "--unit", "sec",
                "--range", "1", "--format", "csv", "a.csv", "b.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    src = [[Arrival(i, t, arrival_time=x) for t, x in rows] for i, rows in enumerate((a, b))]
    assert sweep_rows(r) == [
        expected_merge(src, text, w, unit_ns=S, range_n=1) for text, w in (("0s", 0), ("2s", 2 * S))
    ]


def test_sweep_output_and_overwrite(run_cli, workdir):
    (workdir / "in.csv").write_text(_csv(TIMES))
    (workdir / "out.csv").write_text("old\n")
    args = ["sweep", "adjust", "--unit", "sec", "--range", "0,4", "-o", "out.csv", "in.csv"]
    r = run_cli(*args)
    assert r.exit_code != 0 and r.exception is None
    assert "out.csv" in r.stderr
    assert (workdir / "out.csv").read_text() == "old\n"  # left as it was
    r = run_cli(*args, "--overwrite")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    got = sweep_rows((workdir / "out.csv").read_text())
    arr = [((), t) for t in TIMES]
    assert got == [expected_adjust(arr, S, 0), expected_adjust(arr, S, 4)]


# ---------------------------------------------------------------- --plot x.pdf


def test_plot_pdf(run_cli, workdir):
    (workdir / "in.csv").write_text(_csv(TIMES))
    r = run_cli("explain", "adjust", "--unit", "sec", "--range", "3", "--plot", "why.pdf",
                "--format", "csv", "in.csv")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    data = (workdir / "why.pdf").read_bytes()
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    assert b"/Type /Page" in data or b"/Type/Page" in data
    assert not [p for p in os.listdir(workdir) if p not in ("in.csv", "why.pdf")]


# ---------------------------------------------------------------- under spark-submit


@pytest.mark.cli
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("spark-submit") is None, reason="no spark-submit on PATH")
def test_under_spark_submit(tmp_path, cli_env):
    """spark-submit starts the driver (its master kept) and evtime gives the model's output.
    spark-submit's Python runner sends the app's stderr to its own stdout, so the output
    goes to -o (as README says)."""
    (tmp_path / "in.csv").write_text(_csv(TIMES))
    (tmp_path / "run.py").write_text("from evtime.cli import entry\n\nentry()\n")
    env = dict(cli_env, EVTIME_CLASS_CACHE="0", PYSPARK_PYTHON=sys.executable)
    p = subprocess.run(
        ["spark-submit", "--master", "local[1]", "run.py", "adjust", "--unit", "sec",
         "--range", "3", "-o", "out.csv", "in.csv"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"evtime adjust: read {len(TIMES)}, released" in p.stdout + p.stderr
    rows = (tmp_path / "out.csv").read_text().splitlines()
    assert rows[0] == "time,v,evtime"
    got = [line.rsplit(",", 1)[1] for line in rows[1:]]
    assert got == _adjusted(model_adjust([((), t) for t in TIMES], S, 3))
