"""Directory outputs (``-o DIR/``, ``--output-layout parts``): part files in output order
with a manifest written last, read back in order by pyarrow.dataset (issue 45)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from evtime.io.state import InjectedCrash

ROWS = 3000
COMMANDS = {
    "adjust": ["adjust", "--unit", "msec", "--range", "200"],
    "explain": ["explain", "adjust", "--unit", "msec", "--range", "200"],
    "merge": ["merge", "--unit", "msec", "--range", "200"],
    "bound": ["bound", "--window", "100ms", "--key", "k", "--agg", "count(*) AS n"],
}
DISCARDS = {"adjust", "merge", "bound"}  # (explain has no --discards)


def _events(path: Path, n: int, seed: int) -> None:
    """``n`` rows a millisecond apart, every 7th 500 ms late (discarded with --range 200),
    keys a, b, c."""
    lines = ["time,k,v"]
    for i in range(n):
        ms = i * 1 - (500 if (i + seed) % 7 == 0 else 0) + 1000
        lines.append(f"1970-01-01T00:00:{ms // 1000:02d}.{ms % 1000:03d}Z,{'abc'[i % 3]},{i}")
    path.write_text("\n".join(lines) + "\n")


def _inputs(tmp_path_factory, rows: int) -> list[Path]:
    d = tmp_path_factory.mktemp("in")
    files = [d / f"s{i}.csv" for i in range(3)]
    for i, f in enumerate(files):
        _events(f, rows, i)
    return files


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[Path]:
    return _inputs(tmp_path_factory, ROWS)


def _sources(command: str, inputs: list) -> list:
    return list(inputs) if command == "merge" else [inputs[0]]


def _csv_options(names: list[str]):
    return pcsv.ConvertOptions(
        column_types={c: pa.string() for c in names}, strings_can_be_null=False
    )


def _read_file(path, fmt: str, fs=None) -> pa.Table:
    """The single-file output (columns as text for CSV)."""
    with fs.open(path, "rb") if fs else open(path, "rb") as fh:
        if fmt == "parquet":
            return pq.read_table(fh)
        names = fh.readline().decode().rstrip("\n").split(",")
        fh.seek(0)
        return pcsv.read_csv(fh, convert_options=_csv_options(names))


def _read_dir(path: str, fmt: str, names: list[str], fs=None) -> pa.Table:
    """The directory read back with pyarrow.dataset, its files in name order."""
    if fmt == "parquet":
        form = ds.ParquetFileFormat()
    else:
        form = ds.CsvFileFormat(convert_options=_csv_options(names))
    dataset = ds.dataset(path, format=form, filesystem=fs)
    assert dataset.files == sorted(dataset.files)
    return dataset.to_table()


def _manifest(path: str, fs=None) -> dict:
    with fs.open(f"{path}/_SUCCESS", "rb") if fs else open(f"{path}/_SUCCESS", "rb") as fh:
        return json.load(fh)


def _parts(path: str, fs=None) -> list[str]:
    listed = fs.ls(path, detail=False) if fs else os.listdir(path)
    return sorted(os.path.basename(p) for p in listed if "part-" in p)


def _summary(stderr: str) -> str:
    return re.sub(r" \([0-9.]+s\)", "", stderr.strip().splitlines()[-1])


def _same(single: pa.Table, parts: pa.Table) -> None:
    if single.num_rows == 0:
        assert parts.num_rows == 0
        return
    assert parts.column_names == single.column_names
    assert parts.to_pylist() == single.to_pylist()  # the same values in the same order


def _check_dir(path: str, single_path, fmt: str, fs=None, renamed: bool = False) -> pa.Table:
    """``renamed``: the inputs had other names (on S3): their names (explain's and merge's
    ``source``) are not compared."""
    single = _read_file(single_path, fmt, fs)
    parts = _read_dir(path, fmt, single.column_names, fs)
    columns = single.column_names
    if renamed and "source" in single.column_names and parts.num_rows:
        single, parts = single.drop_columns(["source"]), parts.drop_columns(["source"])
    _same(single, parts)
    manifest = _manifest(path, fs)
    names = [p["name"] for p in manifest["parts"]]
    assert names == _parts(path, fs)  # every part listed, in name order
    assert names == [f"part-{i:05d}.{fmt}" for i in range(len(names))]  # dense
    assert manifest["rows"] == single.num_rows == sum(p["rows"] for p in manifest["parts"])
    assert manifest["format"] == fmt
    assert [c["name"] for c in manifest["columns"]] == columns
    assert all(p["rows"] > 0 for p in manifest["parts"])
    return single


@pytest.fixture(scope="module")
def singles(tmp_path_factory) -> dict:
    """The single-file outputs of each command and format, made once (by the first test
    that needs them): (output, discards or None, summary line)."""
    return {"dir": tmp_path_factory.mktemp("single")}


def _single(run_cli, singles: dict, inputs: list, command: str, fmt: str) -> tuple:
    if (command, fmt) not in singles:
        d = singles["dir"]
        out, dis = d / f"{command}.{fmt}", d / f"{command}-discards.{fmt}"
        more = ["--discards", dis] if command in DISCARDS else []
        r = run_cli(*COMMANDS[command], *_sources(command, inputs), "-o", out, *more)
        assert r.exit_code == 0, r.stderr
        singles[command, fmt] = (out, dis if more else None, _summary(r.stderr))
    return singles[command, fmt]


@pytest.mark.parametrize("where", ["local", "distributed"], indirect=True)
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_directory_reads_back_as_the_single_file(
    run_cli, where, tmp_path, inputs, singles, command, fmt, monkeypatch
):
    single, sdis, summary = _single(run_cli, singles, inputs, command, fmt)
    if where == "distributed":  # (bound's few windows too: written by the tasks)
        monkeypatch.setenv("EVTIME_DRIVER_ROWS_MAX", "0")
    out, dis = f"{tmp_path}/out/", f"{tmp_path}/discards.{fmt}/"
    more = ["--discards", dis] if command in DISCARDS else []
    args = [*COMMANDS[command], *_sources(command, inputs)]
    r = run_cli(*args, "-o", out, "--output-format", fmt, *more)
    assert r.exit_code == 0, r.stderr
    assert _summary(r.stderr) == summary  # the same accounting
    rows = _check_dir(out, single, fmt)
    assert rows.num_rows > 20
    if where == "distributed":  # (the Spark tasks wrote them)
        assert len(_parts(out)) > 1
    if command in DISCARDS:
        assert _check_dir(dis, sdis, fmt).num_rows > 0
    assert not os.path.exists(f"{out}/_temporary")


def _tasks_since(tracker, before: set) -> int:
    """The tasks of every Spark job started since ``before`` (job ids), all stages."""
    n = 0
    for job in set(tracker.getJobIdsForGroup()) - before:
        for stage in tracker.getJobInfo(job).stageIds:
            info = tracker.getStageInfo(stage)
            n += info.numTasks if info is not None else 0
    return n


def test_a_task_writes_its_run_of_parts_into_one_file(
    run_cli, spark, tmp_path, inputs, singles, monkeypatch
):
    """A few thousand rows are hundreds of the engine's parts: the run of consecutive parts
    a task writes (adjust's parts are in runs, one per task) is one file (at most a file per
    Spark task, the run making none of its own here), and the directories still read back
    as the single files (--discards: its parts are not in runs, fewer files only where a
    task writes consecutive ones)."""
    single, sdis, _ = _single(run_cli, singles, inputs, "adjust", "csv")
    monkeypatch.setenv("EVTIME_DRIVER_ROWS_MAX", "0")  # (the tasks write the parts)
    monkeypatch.setenv("EVTIME_DRIVER_IO_MAX", "0")
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    out, dis = f"{tmp_path}/out/", f"{tmp_path}/discards.csv/"
    args = [*COMMANDS["adjust"], *_sources("adjust", inputs), "--discards", dis]
    r = run_cli(*args, "-o", out, "--output-format", "csv")
    assert r.exit_code == 0, r.stderr
    tasks = _tasks_since(tracker, before)
    assert _check_dir(out, single, "csv").num_rows > 20
    assert _check_dir(dis, sdis, "csv").num_rows > 0
    assert 1 < len(_parts(out)) <= tasks, (len(_parts(out)), tasks)


def test_output_layout_parts_names_a_directory(run_cli, tmp_path, inputs):
    args = [*COMMANDS["adjust"], inputs[0]]
    r = run_cli(*args, "-o", tmp_path / "single.csv")
    assert r.exit_code == 0, r.stderr
    r = run_cli(*args, "-o", tmp_path / "out.csv", "--output-layout", "parts")
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "out.csv").is_dir()  # (the format from the directory's name)
    _check_dir(str(tmp_path / "out.csv"), tmp_path / "single.csv", "csv")


def test_compressed_csv_parts(run_cli, tmp_path, inputs):
    import gzip

    args = [*COMMANDS["adjust"], inputs[0]]
    r = run_cli(*args, "-o", tmp_path / "single.csv")
    assert r.exit_code == 0, r.stderr
    r = run_cli(*args, "-o", f"{tmp_path}/out.csv.gz/")
    assert r.exit_code == 0, r.stderr
    names = [p["name"] for p in _manifest(f"{tmp_path}/out.csv.gz")["parts"]]
    assert names and all(n.endswith(".csv.gz") for n in names)
    texts = [gzip.decompress((tmp_path / "out.csv.gz" / n).read_bytes()).decode() for n in names]
    header, *_ = (tmp_path / "single.csv").read_text().splitlines()
    assert all(t.splitlines()[0] == header for t in texts)  # every part with its header
    body = [line for t in texts for line in t.splitlines()[1:]]
    assert body == (tmp_path / "single.csv").read_text().splitlines()[1:]


def test_empty_output_is_a_manifest_without_parts(run_cli, tmp_path, inputs):
    # nothing is late with a range this long: the discards are empty
    args = ["adjust", "--unit", "sec", "--range", "9", inputs[0]]
    r = run_cli(*args, "-o", tmp_path / "o.csv", "--discards", f"{tmp_path}/d/")
    assert r.exit_code == 0, r.stderr
    assert _parts(f"{tmp_path}/d") == []
    manifest = _manifest(f"{tmp_path}/d")
    assert manifest["parts"] == [] and manifest["rows"] == 0


def test_existing_directory_needs_overwrite(run_cli, tmp_path, inputs):
    out = f"{tmp_path}/out/"
    big = [*COMMANDS["adjust"], inputs[0]]
    r = run_cli(*big, "-o", out)
    assert r.exit_code == 0, r.stderr
    before = _manifest(out)
    r = run_cli(*big, "-o", out)
    assert r.exit_code != 0
    assert r.stderr.strip() == f"evtime: {out} exists: use --overwrite to replace it"
    assert _manifest(out) == before
    # --overwrite: the earlier parts are gone, however many there were
    small = tmp_path / "small.csv"
    _events(small, 40, 0)
    r = run_cli(*COMMANDS["adjust"], small, "-o", tmp_path / "single.parquet")
    assert r.exit_code == 0, r.stderr
    r = run_cli(*COMMANDS["adjust"], small, "-o", out, "--overwrite")
    assert r.exit_code == 0, r.stderr
    _check_dir(out, tmp_path / "single.parquet", "parquet")


def _a_later_run_clears(run_cli, tmp_path, out: str) -> None:
    """A later run over fewer rows (fewer parts) to the directory ``out`` a killed run left:
    no --overwrite needed, and no part of the killed run is left over."""
    small = tmp_path / "small.csv"
    _events(small, 40, 0)
    r = run_cli(*COMMANDS["adjust"], small, "-o", tmp_path / "single.parquet")
    assert r.exit_code == 0, r.stderr
    r = run_cli(*COMMANDS["adjust"], small, "-o", out)
    assert r.exit_code == 0, r.stderr
    _check_dir(out, tmp_path / "single.parquet", "parquet")


@pytest.mark.parametrize("where", ["distributed"], indirect=True)
def test_killed_midway_leaves_no_manifest_and_a_later_run_clears_its_parts(
    run_cli, where, tmp_path, inputs, monkeypatch
):
    out = f"{tmp_path}/out/"
    monkeypatch.setenv("EVTIME_CRASH_AT", "publishing")  # (the parts renamed, no manifest)
    with pytest.raises(InjectedCrash):
        run_cli(*COMMANDS["adjust"], inputs[0], "-o", out)
    monkeypatch.delenv("EVTIME_CRASH_AT")
    assert len(_parts(out)) > 1
    assert not os.path.exists(f"{out}/_SUCCESS")
    _a_later_run_clears(run_cli, tmp_path, out)


@pytest.mark.cli
def test_hard_kill_leaves_no_manifest_and_a_later_run_clears(cli_env, run_cli, tmp_path, inputs):
    out = f"{tmp_path}/out/"
    env = {
        **cli_env,
        "EVTIME_CRASH_AT": "publishing",
        "EVTIME_CRASH_HARD": "1",
        "EVTIME_DRIVER_IO_MAX": "0",
    }
    args = [
        str(a)
        for a in (*COMMANDS["adjust"], inputs[0], "-o", out, "--discards", f"{tmp_path}/late/")
    ]
    p = subprocess.run(["evtime", *args], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 137, p.stderr
    assert _parts(out) and not os.path.exists(f"{out}/_SUCCESS")
    _a_later_run_clears(run_cli, tmp_path, out)
    assert not os.path.exists(f"{out}/_temporary")  # (the killed run's hidden parts too)


def test_files_evtime_did_not_write_are_refused(run_cli, tmp_path, inputs):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    r = run_cli(*COMMANDS["adjust"], inputs[0], "-o", f"{tmp_path}/out/", "--overwrite")
    assert r.exit_code != 0
    assert "holds files evtime did not write (notes.txt)" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert os.listdir(tmp_path / "out") == ["notes.txt"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["-o", "-", "--output-layout", "parts"], "standard output is one stream"),
        (["--output-layout", "parts"], "standard output is one stream"),
    ],
)
def test_standard_output_stays_one_stream(run_cli, inputs, args, words):
    r = run_cli(*COMMANDS["adjust"], inputs[0], *args)
    assert r.exit_code == 2
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_table_format_is_refused_for_a_directory(run_cli, tmp_path, inputs):
    r = run_cli(*COMMANDS["explain"], inputs[0], "--format", "table", "-o", f"{tmp_path}/x/")
    assert r.exit_code == 2
    assert "--format table" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("args", [["-o", "{d}/o/"], ["-o", "{d}/o", "--output-layout", "parts"]])
def test_state_refuses_directories(run_cli, tmp_path, inputs, args):
    args = [a.format(d=tmp_path) for a in args]
    r = run_cli(*COMMANDS["adjust"], "--state", tmp_path / "st", inputs[0], *args)
    assert r.exit_code == 2
    assert "not supported with --state" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------ S3 (moto)
# every command once, both formats and both ways of reading and writing (here, or by the
# Spark tasks from inputs on S3) each twice: a covering set (the whole matrix runs locally
# above; the S3 cases are slow: every part file is requests to moto's server, ~1 part per
# 3 rows here, so they read smaller inputs than the local cases)
S3_ROWS = 1000  # (bound still gives more than 20 rows)
S3_CASES = [
    ("adjust", "csv", "local"),
    ("explain", "parquet", "local"),
    ("merge", "parquet", "distributed"),
    ("bound", "csv", "distributed"),
]


@pytest.fixture(scope="module")
def s3_inputs(tmp_path_factory) -> list[Path]:
    """Inputs of :data:`S3_ROWS` rows (bound still gives more than 20 rows)."""
    return _inputs(tmp_path_factory, S3_ROWS)


@pytest.fixture(scope="module")
def s3_singles(tmp_path_factory) -> dict:
    """:func:`singles` of :func:`s3_inputs`."""
    return {"dir": tmp_path_factory.mktemp("s3-single")}


@pytest.mark.parametrize(
    "command, fmt, where", S3_CASES, indirect=["where"], ids=["-".join(c) for c in S3_CASES]
)
def test_directory_on_s3(run_cli, where, s3, bucket, s3_inputs, s3_singles, command, fmt):
    """Local inputs (small: read and written in this process, or by the Spark tasks)
    written to S3; and (distributed) inputs on S3 too."""
    inputs, singles = s3_inputs, s3_singles
    single, sdis, summary = _single(run_cli, singles, inputs, command, fmt)
    srcs = _sources(command, inputs)
    if where == "distributed":
        for f in srcs:
            s3.put(str(f), f"{bucket}/in/{f.name}")
        srcs = [f"s3://{bucket}/in/{f.name}" for f in srcs]
    args = [*COMMANDS[command], *srcs]
    base = f"s3://{bucket}/{command}-{fmt}-{where}"
    more = ["--discards", f"{base}/discards/"] if command in DISCARDS else []
    r = run_cli(*args, "-o", f"{base}/out.{fmt}/", *more)
    assert r.exit_code == 0, r.stderr
    counted = re.compile(r"read \d+, released \d+, discarded \d+(, bound rows \d+)?")
    assert counted.search(r.stderr)[0] == counted.search(summary)[0]  # the same accounting
    key = base.removeprefix("s3://")
    with open(single, "rb") as fh:
        s3.pipe(f"{key}/single.{fmt}", fh.read())  # (the same command's, written locally)
    moved = where == "distributed"
    rows = _check_dir(f"{key}/out.{fmt}", f"{key}/single.{fmt}", fmt, s3, moved)
    assert rows.num_rows > 20
    if command in DISCARDS and fmt == "parquet":  # (--discards DIR/: Parquet)
        with open(sdis, "rb") as fh:
            s3.pipe(f"{key}/dis.{fmt}", fh.read())
        _check_dir(f"{key}/discards", f"{key}/dis.{fmt}", fmt, s3, moved)
    assert not s3.exists(f"{key}/out.{fmt}/_temporary")
    # an existing directory output is refused, as files are
    r = run_cli(*args, "-o", f"{base}/out.{fmt}/")
    assert r.exit_code != 0 and "exists: use --overwrite" in r.stderr


def test_publishing_on_s3_takes_no_request_per_part_but_the_copy(s3, bucket, monkeypatch):
    """The parts renamed by server-side copies (sources removed in batches with the
    temporary directory): no listing and no delete per part (fsspec's ``mv`` made two
    listings, a HEAD, a copy and a delete of each part, one part after the other)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication as App

    from evtime.io.directory import Directory

    requests = []  # (method, query) of each request moto's server answered
    real = App.__call__

    def counted(self, environ, start_response):
        requests.append((environ["REQUEST_METHOD"], environ.get("QUERY_STRING", "")))
        return real(self, environ, start_response)

    schema = pa.schema([("v", pa.int64())])
    url = f"s3://{bucket}/pub"
    d = Directory(f"{url}/", url, "out", "csv", "csv", schema, overwrite=False)
    engine_parts = range(3, 3 + 2 * 30, 2)  # (the engine's numbers have gaps)
    for i, p in enumerate(engine_parts):
        s3.pipe(d.temp(p), f"v\n{i}\n".encode())
        d.rows[p] = 1
    monkeypatch.setattr(App, "__call__", counted)
    d.publish()
    monkeypatch.undo()
    s3.invalidate_cache()
    names = [f"part-{i:05d}.csv" for i in range(30)]
    assert _parts(url, s3) == names
    assert [s3.cat(f"{url}/{n}") for n in names] == [f"v\n{i}\n".encode() for i in range(30)]
    assert [p["name"] for p in _manifest(url, s3)["parts"]] == names
    assert not s3.exists(f"{url}/_temporary")
    listings = [q for m, q in requests if m == "GET" and "list-type" in q]
    deletes = [q for m, q in requests if m == "DELETE"]  # (one object each)
    assert len(listings) < 10 and not deletes, requests
    assert len(requests) < 3 * 30, requests  # (a HEAD and the copy per part)
