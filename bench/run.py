"""Time evtime against the floor, the naive Spark job and DuckDB, as whole processes.

    python bench/run.py --rows 1000000 --repeat 3 [--only adjust,floor] [--driver-memory 1g]

Every job runs `--repeat` times, interleaved (round-robin over the jobs), each as its own
process: wall clock, and peak RSS of the whole process tree (driver Python + JVM + Python
workers) by polling with psutil. Prints a table (median, min-max, ratio to the floor median,
peak RSS) and appends it to bench/RESULTS.md. Input files are generated when missing.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.dataset as ds

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import archive  # noqa: E402
import generate  # noqa: E402

from evtime.session import local_heap  # noqa: E402

JOBS = ["adjust", "explain", "merge", "bound", "floor", "naive", "duckdb"]
TARGETS = {  # issue 5, 10M rows, local mode, 2 cores
    "adjust": "≤ 1.0× floor",
    "explain": "≤ 1.5× adjust",
    "merge": "≤ 1.3× floor",
    "bound": "≤ 0.8× floor",
}
CHECK_ROWS = 1000


@dataclass
class Job:
    name: str
    argv: list[str]
    output: Path
    probe: list[str] | None = None  # a command that must succeed, or the job is skipped
    walls: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    status: str = ""  # "" while fine, else "not available" / "failed ..."


def jobs_for(rows: int, data: Path, out: Path, n_sources: int = 3) -> list[Job]:
    src = str(data / f"events-{rows}.parquet")
    sources = [str(p) for p in generate.output_paths(data, rows, n_sources)]
    evtime = shutil.which("evtime") or sys.exit("run.py: no `evtime` on PATH (pip install -e .)")
    py = sys.executable
    o = {
        n: out / f
        for n, f in [
            ("adjust", "adjust.parquet"),
            ("explain", "explain.csv"),
            ("merge", "merge.parquet"),
            ("bound", "bound.csv"),
            ("floor", "floor"),
            ("naive", "naive"),
            ("duckdb", "duckdb.parquet"),
        ]
    }
    adj = ["--unit", "msec", "--range", "999"]
    common = ["--overwrite", "-q"]
    return [
        Job("adjust", [evtime, "adjust", *adj, src, "-o", str(o["adjust"]), *common], o["adjust"]),
        Job(
            "explain",
            [
                evtime,
                "explain",
                "adjust",
                *adj,
                "--format",
                "csv",
                "-o",
                str(o["explain"]),
                *common,
                src,
            ],
            o["explain"],
        ),
        Job(
            "merge",
            [evtime, "merge", *sources, "-o", str(o["merge"]), *common],
            o["merge"],
            probe=[evtime, "merge", "--help"],
        ),
        Job(
            "bound",
            [
                evtime,
                "bound",
                "--window",
                "1s",
                "--agg",
                "count(*)",
                "--agg",
                "avg(value)",
                src,
                "-o",
                str(o["bound"]),
                *common,
            ],
            o["bound"],
            probe=[evtime, "bound", "--help"],
        ),
        Job("floor", [py, str(BENCH / "floor.py"), src, str(o["floor"])], o["floor"]),
        Job("naive", [py, str(BENCH / "naive.py"), src, str(o["naive"])], o["naive"]),
        Job("duckdb", [py, str(BENCH / "duckdb_adjust.py"), src, str(o["duckdb"])], o["duckdb"]),
    ]


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, int, int, str]:
    """(wall seconds, peak tree RSS bytes, return code, stderr tail) of one process."""
    peak = 0
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        done = threading.Event()

        def poll() -> None:
            nonlocal peak
            try:
                ps = psutil.Process(proc.pid)
            except psutil.Error:
                return
            while not done.wait(0.1):
                peak = max(peak, tree_rss(ps))

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        rc = proc.wait()
        wall = time.perf_counter() - start
        done.set()
        poller.join()
        err.seek(0)
        tail = err.read().decode(errors="replace").strip().splitlines()[-3:]
    return wall, peak, rc, " / ".join(tail).replace("|", "/")  # fits a Markdown cell


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def as_ints(table: pa.Table) -> pa.Table:
    """Timestamps of any unit/zone as int64 ns, so evtime's and DuckDB's outputs compare."""
    cols = [
        c.cast(pa.timestamp("ns")).cast(pa.int64()) if pa.types.is_timestamp(c.type) else c
        for c in table.columns
    ]
    return pa.table(cols, names=table.column_names)


def check(adjust: Path, duckdb: Path) -> str:
    """Row count and the first rows of evtime adjust's output against DuckDB's."""
    a, d = ds.dataset(adjust), ds.dataset(duckdb)
    na, nd = a.count_rows(), d.count_rows()
    if na != nd:
        return f"WARNING: adjust wrote {na} rows, DuckDB {nd}"
    ha, hd = as_ints(a.head(CHECK_ROWS)), as_ints(d.head(CHECK_ROWS))
    if ha.column_names != hd.column_names:
        return f"WARNING: adjust columns {ha.column_names}, DuckDB {hd.column_names}"
    if not ha.equals(hd.cast(ha.schema, safe=False)):
        return f"WARNING: adjust's first {CHECK_ROWS} rows differ from DuckDB's"
    return f"check: adjust = DuckDB ({na} rows; first {min(na, CHECK_ROWS)} rows equal)"


def conf_drift() -> str:
    """Warn when bench/floor.py's session settings no longer match evtime's defaults."""
    import floor

    from evtime.session import DEFAULT_CONF, LOCAL_CONF

    ev = {**DEFAULT_CONF, **LOCAL_CONF}
    ev.pop("spark.python.daemon.module")  # (the floor and the naive job start no Python worker)
    diff = sorted(
        k for k in ev.keys() | floor.SESSION_CONF.keys() if ev.get(k) != floor.SESSION_CONF.get(k)
    )
    if not diff:
        return ""
    return f"WARNING: floor/naive session differs from evtime's in: {', '.join(diff)}"


def machine() -> dict[str, str]:
    java = (
        os.path.join(os.environ["JAVA_HOME"], "bin", "java")
        if "JAVA_HOME" in os.environ
        else shutil.which("java") or "java"
    )
    try:
        jv = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
        jv = jv.splitlines()[0] if jv else "?"
    except OSError:
        jv = "not found"
    import duckdb
    import pyspark

    git = ["git", "-C", str(BENCH.parent)]
    try:
        rev = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            [*git, "status", "--porcelain"], capture_output=True, text=True
        ).stdout.strip()
        rev = f"{rev}{' + uncommitted changes' if dirty else ''}"
    except OSError:
        rev = "?"
    return {
        "machine": f"{platform.node()}, {os.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.1f} GiB, {platform.platform()}",
        "versions": f"Python {platform.python_version()}, pyspark {pyspark.__version__}, "
        f"{jv}, duckdb {duckdb.__version__}",
        "evtime": rev,
    }


def fmt_ratio(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "–"


def table(jobs: list[Job]) -> str:
    med = {j.name: statistics.median(j.walls) for j in jobs if j.walls}
    floor = med.get("floor")
    lines = [
        "| job | runs | median s | min–max s | × floor | peak RSS MB | target | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for j in jobs:
        if not j.walls:
            lines.append(
                f"| {j.name} | 0 | – | – | – | – | {TARGETS.get(j.name, '')} | {j.status} |"
            )
            continue
        ratio = fmt_ratio(med[j.name] / floor) if floor else "–"
        if j.name == "explain" and "adjust" in med:
            ratio += f" ({med['explain'] / med['adjust']:.2f}× adjust)"
        lines.append(
            f"| {j.name} | {len(j.walls)} | {med[j.name]:.1f} | {min(j.walls):.1f}–"
            f"{max(j.walls):.1f} | {ratio} | {max(j.rss) / 2**20:.0f} "
            f"| {TARGETS.get(j.name, '')} | {j.status} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(JOBS)}")
    ap.add_argument(
        "--driver-memory",
        help="spark.driver.memory for every Spark job, e.g. 1g (default: evtime's local heap, "
        "a quarter of the machine's memory within 1g-8g)",
    )
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="K=V",
        help="more Spark settings for every Spark job (repeatable)",
    )
    ap.add_argument(
        "--merge-sources", type=int, default=3, help="sources for the merge job (default 3)"
    )
    ap.add_argument("--data", type=Path, default=BENCH / "data")
    ap.add_argument("--note", default="", help="a label for RESULTS.md, e.g. 'smoke run'")
    ap.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or JOBS
    if bad := [n for n in names if n not in JOBS]:
        ap.error(f"unknown job(s) {', '.join(bad)}; jobs: {', '.join(JOBS)}")

    out = args.data / "out"
    out.mkdir(parents=True, exist_ok=True)
    if not (args.data / f"events-{args.rows}.parquet").exists():
        generate.generate(args.rows, args.data)
    if "merge" in names and not all(
        p.exists() for p in generate.output_paths(args.data, args.rows, args.merge_sources)
    ):
        generate.generate(args.rows, args.data, sources=args.merge_sources)

    # every Spark job gets the same heap: --driver-memory, else the one evtime gives big
    # local jobs (evtime.session.local_heap), which the floor and the naive job would not get
    memory = args.driver_memory or f"{local_heap() >> 20}m"
    conf = [*args.conf, f"spark.driver.memory={memory}"]
    env = dict(os.environ)
    env["EVTIME_CONF"] = ",".join(c for c in [env.get("EVTIME_CONF", ""), *conf] if c)
    jobs = [j for j in jobs_for(args.rows, args.data, out, args.merge_sources) if j.name in names]
    for j in jobs:
        if j.probe and subprocess.run(j.probe, env=env, capture_output=True).returncode != 0:
            j.status = "not available"
    # evtime's class archive made before any timed run; the floor and the naive job map
    # it too (the same JVM start-up as evtime's, see bench/archive.py)
    env["BENCH_JAVA_OPTIONS"] = archive.ensure(env)
    notes = [n for n in [conf_drift()] if n]
    for n in notes:
        print(n, file=sys.stderr)

    load_before = os.getloadavg()[0]
    for r in range(args.repeat):
        for j in jobs:
            if j.status:
                continue
            remove(j.output)
            wall, rss, rc, tail = measure(j.argv, env)
            if rc != 0:
                j.status = f"failed (exit {rc}): {tail[-300:]}"
                print(f"[{r + 1}/{args.repeat}] {j.name}: {j.status}", file=sys.stderr)
                continue
            j.walls.append(wall)
            j.rss.append(rss)
            print(
                f"[{r + 1}/{args.repeat}] {j.name}: {wall:.1f} s, {rss / 2**20:.0f} MB",
                file=sys.stderr,
            )
            if r > 0 or j.name not in ("adjust", "duckdb"):
                remove(j.output)
        if r == 0:
            got = {j.name: j for j in jobs if j.walls}
            if "adjust" in got and "duckdb" in got:
                notes.append(check(got["adjust"].output, got["duckdb"].output))
                print(notes[-1], file=sys.stderr)
            for j in jobs:
                remove(j.output)

    result = table(jobs)
    print(result)
    if args.no_record:
        return
    info = machine()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = f"## {stamp}: {args.rows:,} rows, repeat {args.repeat}" + (
        f" — {args.note}" if args.note else ""
    )
    cmd = shlex.join(["python", "bench/run.py", *(argv if argv is not None else sys.argv[1:])])
    block = "\n".join(
        [
            "",
            head,
            "",
            f"* machine: {info['machine']}",
            f"* {info['versions']}",
            f"* evtime: {info['evtime']}",
            f"* load average (1 min) before / after: {load_before:.1f} / {os.getloadavg()[0]:.1f}",
            f"* Spark conf (EVTIME_CONF): {env['EVTIME_CONF'] or '(defaults)'}",
            f"* command: `{cmd}`",
            *[f"* {n}" for n in notes],
            "",
            result,
            "",
        ]
    )
    with open(BENCH / "RESULTS.md", "a") as f:
        f.write(block)
    print(f"appended to {BENCH / 'RESULTS.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
