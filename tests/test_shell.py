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
    if command != "adjust":  # (one command draws it: the check above is each command's)
        return
    r = run_cli("explain", command, "--format", "csv", "--plot", "p.svg", "--overwrite", *opts)
    assert r.exit_code == 0, r.stderr
    assert (workdir / "p.svg").read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize(
    "fmt,ext,io_max",  # io_max 0: read and written in Spark tasks, not here
    [("csv", ".gz", "default"), ("csv", ".gz", "0"), ("jsonl", ".zst", "0"),
     ("csv", ".bz2", "default"), ("jsonl", ".xz", "default")],
)  # fmt: skip
def test_text_outputs_are_compressed_by_their_extension(
    run_cli, workdir, monkeypatch, ext, fmt, io_max
):
    import fsspec

    if io_max != "default":
        monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", io_max)
    args = ["adjust", "--unit", "msec", "--range", "0", str(SAMPLES / "tuples.parquet")]
    plain = run_cli(*args, "-o", f"plain.{fmt}", "--discards", f"late.{fmt}")
    packed = run_cli(*args, "-o", f"out.{fmt}{ext}", "--discards", f"late.{fmt}{ext}")
    assert plain.exit_code == 0 and packed.exit_code == 0, packed.stderr
    for name in ("plain", "late"):
        want = (workdir / f"{name}.{fmt}").read_bytes()
        out = "out" if name == "plain" else "late"
        raw = (workdir / f"{out}.{fmt}{ext}").read_bytes()
        assert raw != want  # (compressed, not the text under a compressed name)
        with fsspec.open(str(workdir / f"{out}.{fmt}{ext}"), "rb", compression="infer") as fh:
            assert fh.read() == want


def test_parquet_with_a_compression_extension_is_refused_before_work(run_cli, workdir):
    r = run_cli("adjust", "--unit", "sec", "--range", "1", "-o", "o.parquet.gz",
                str(SAMPLES / "tuples.parquet"))  # fmt: skip
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        "evtime: o.parquet.gz: Parquet is compressed inside the file; name it without .gz"
    )
    assert not (workdir / "o.parquet.gz").exists()


def test_a_fifo_output_is_written_as_a_stream(run_cli, workdir):
    import os
    import threading

    os.mkfifo(workdir / "pipe")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append((workdir / "pipe").read_bytes()))
    reader.start()
    r = run_cli("adjust", "--unit", "msec", "--range", "999", "-o", "pipe",
                str(SAMPLES / "tuples.parquet"))  # fmt: skip
    reader.join(60)
    assert r.exit_code == 0, r.stderr
    plain = run_cli("adjust", "--unit", "msec", "--range", "999", str(SAMPLES / "tuples.parquet"))
    assert got == [plain.stdout.encode()]
    assert sorted(p.name for p in workdir.iterdir()) == ["pipe"]  # (no temporary left)


@pytest.mark.cli
def test_dev_stdout_is_standard_output(script_runner, cli_env, tmp_path):
    r = script_runner.run(
        ["evtime", "adjust", "-q", "--unit", "msec", "--range", "999", "-o", "/dev/stdout",
         str(SAMPLES / "tuples.parquet")],
        env=cli_env, cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert [line.split(",")[0] for line in r.stdout.splitlines()] == ["tuple", *"BADCE"]


def _screen(raw: str) -> list[str]:
    """The lines a terminal shows for ``raw``: carriage returns go back to the line's start,
    ESC[K erases to its end."""
    shown = []
    for line in raw.replace("\r\n", "\n").split("\n"):
        buf: list[str] = []
        col = 0
        i = 0
        while i < len(line):
            if line.startswith("\x1b[K", i):
                del buf[col:]
                i += 3
                continue
            ch = line[i]
            if ch == "\r":
                col = 0
            else:
                buf[col : col + 1] = [ch]
                col += 1
            i += 1
        shown.append("".join(buf))
    return shown


@pytest.mark.cli
def test_progress_line_is_cleared_before_data_on_the_same_terminal(tmp_path, cli_env):
    """stdout and stderr on one terminal (a pty): what the terminal shows is the data's
    lines and the summary, no progress text left in front of the header."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.terminal import on_a_terminal

    n = 400_000
    t0 = 1_700_000_000_000_000_000
    times = pa.array([t0 + ((i * 7919) % n) * 1000 for i in range(n)], pa.int64())
    pq.write_table(pa.table({"v": range(n), "time": times.cast(pa.timestamp("ns"))}),
                   tmp_path / "in.parquet", row_group_size=50_000)  # fmt: skip
    env = dict(cli_env, EVTIME_DRIVER_IO_MAX="0", TERM="xterm")
    args = ["adjust", "--unit", "usec", "--range", "999999999", "in.parquet"]
    raw = on_a_terminal(args, env, tmp_path, stderr_too=True)
    assert "tasks, " in raw, "no progress line was shown: the test shows nothing"
    lines = [line for line in _screen(raw) if line]
    assert lines[0] == "v,time,evtime", lines[:2]
    assert len(lines) == n + 2 and lines[-1].startswith("evtime adjust: read 400000")
    assert not any("tasks, " in line for line in lines)


@pytest.mark.parametrize("name", ["tuples.parquet", "tuples.jsonl", "tuples.csv"])
def test_standard_input_is_read_in_the_format_its_bytes_show(run_cli, workdir, name):
    extra = ["--time-format", "yyyy/MM/dd HH:mm:ss:SSSSSSSSS"] if name.endswith("csv") else []
    args = ["adjust", "--unit", "msec", "--range", "999", *extra]
    piped = run_cli(*args, "-", input=(SAMPLES / name).read_bytes())
    named = run_cli(*args, str(SAMPLES / name))
    assert piped.exit_code == 0, piped.stderr
    assert [r["tuple"] for r in piped.csv()] == list("BADCE")
    assert piped.stdout == named.stdout


def test_a_file_after_standard_input_keeps_its_own_format(run_cli, workdir):
    r = run_cli("merge", "-", str(SAMPLES / "tuples.jsonl"),
                input=(SAMPLES / "tuples.parquet").read_bytes())  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert [(row["tuple"], row["source"]) for row in r.csv()][:2] == [
        ("A", "-"),
        ("A", str(SAMPLES / "tuples.jsonl")),
    ]


def test_a_row_held_for_one_arrival_is_held_1_arrival(run_cli, workdir):
    (workdir / "a.csv").write_text("id,time\na1,2024-01-01T00:00:01Z\n")
    (workdir / "b.csv").write_text("id,time\nb1,2024-01-01T00:00:02Z\n")
    r = run_cli("explain", "merge", "--format", "csv", "a.csv", "b.csv")
    assert r.exit_code == 0, r.stderr
    first = r.csv()[0]
    assert (first["id"], first["released_by"]) == ("a1", "2")
    assert first["reason"].split(":")[0].split(" (")[0] == "held 1 arrival", first["reason"]


@pytest.mark.parametrize(
    "args",
    [
        ["adjust", "--format", "jsonl"],  # (adjust, merge, bound: --output-format)
        ["explain", "adjust", "--output-format", "jsonl"],  # (explain, sweep: --format)
    ],
)
def test_format_and_output_format_are_one_option_everywhere(run_cli, workdir, args):
    r = run_cli(*args, "--unit", "msec", "--range", "999", str(SAMPLES / "tuples.parquet"))
    assert r.exit_code == 0, r.stderr
    assert [row["tuple"] for row in r.jsonl()] == (
        list("BADCE") if args[0] == "adjust" else list("ABCDE")
    )


@pytest.mark.parametrize(
    "option",
    [
        ["--master", "spark://203.0.113.7:7077"],
        ["--remote", "sc://203.0.113.7:15002/;token=SECRET"],
    ],
)
def test_a_cluster_without_shared_staging_is_refused_before_spark(
    run_cli, workdir, monkeypatch, option
):
    monkeypatch.delenv("EVTIME_STAGING", raising=False)
    r = run_cli("adjust", "--unit", "sec", "--range", "1", *option, str(SAMPLES / "tuples.parquet"))
    given = option[1].split("/;")[0]
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        f"evtime: {option[0]} {given}: Spark's tasks run on other machines, which cannot see "
        "this machine's disk: set --staging (or EVTIME_STAGING) to a URL that this machine and "
        "every executor reach (s3://BUCKET/tmp, hdfs://..., or a shared directory), or write "
        "-o to an object store"
    )


def test_loopback_and_local_masters_need_no_shared_staging():
    from evtime.session import SessionOptions

    for opts in [
        SessionOptions(),
        SessionOptions(master="local[2]"),
        SessionOptions(master="local-cluster[2,1,1024]"),
        SessionOptions(remote="sc://localhost:15002"),
        SessionOptions(remote="sc://127.0.0.1:15002/;token=x"),
    ]:
        assert opts.elsewhere() is None, opts
    assert SessionOptions(master="yarn").elsewhere() == "--master yarn"
