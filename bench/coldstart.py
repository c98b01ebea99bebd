"""Cold start of the sample job: interleaved A/B runs of JVM/Spark settings (see RESULTS.md).

python bench/coldstart.py [--repeat 3] [--variants A,B,C,D,S,T,U] [--baseline DIR] [--warm]
Each round runs every variant once, in turn, so load changes hit all variants alike; the
1-minute load average is recorded with every run.  Wall time is the whole `evtime` process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import archive

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = ["adjust", "--unit", "msec", "--range", "999", os.path.join(ROOT, "samples/tuples.parquet")]
FAST_JIT = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# A-D spell their settings out: evtime's own start-up choices (fast JVM options for small
# inputs, the class-data archive) are off for them
OFF = {"EVTIME_FAST_START": "0", "EVTIME_CLASS_CACHE": "0"}
VARIANTS = {
    "A": ("defaults", []),
    "B": ("driver JVM: " + FAST_JIT, [f"spark.driver.extraJavaOptions={FAST_JIT}"]),
    "C": ("shuffle partitions 1", ["spark.sql.shuffle.partitions=1"]),
    "D": ("B + C", [f"spark.driver.extraJavaOptions={FAST_JIT}", "spark.sql.shuffle.partitions=1"]),
}
# As shipped (evtime's own start-up choices), and with one of them off: environment
# settings.  The class-data archive lives in a directory of the benchmark's own, written
# by one run before the rounds (bench/archive.py).
CACHE = os.path.join(tempfile.gettempdir(), "evtime-bench-cache")
SHIPPED = {"EVTIME_CACHE_DIR": CACHE, "EVTIME_CLASS_CACHE": "1", "EVTIME_FAST_START": "1"}
ENV_VARIANTS = {
    "S": ("as shipped (class archive, fast JVM options, driver-side I/O)", SHIPPED),
    "U": (
        "as shipped, no class archive (EVTIME_CLASS_CACHE=0)",
        {**SHIPPED, "EVTIME_CLASS_CACHE": "0"},
    ),
    "T": (
        "as shipped, driver-side I/O off (EVTIME_DRIVER_IO_MAX=0)",
        {**SHIPPED, "EVTIME_DRIVER_IO_MAX": "0"},
    ),
}
for _n, (_label, _env) in ENV_VARIANTS.items():
    VARIANTS[_n] = (_label, [])


def load() -> float:
    return os.getloadavg()[0]


def run(confs: list[str], extra: list[str] | None = None, env: dict | None = None) -> float:
    args = [sys.executable, "-m", "evtime", *JOB[:1], *(extra or [])]
    for c in confs:
        args += ["--conf", c]
    args += JOB[1:]
    # output to files, not pipes: the time is the evtime process's, as `time` and cron see it
    # (a JVM still shutting down after evtime exited would otherwise hold the pipes)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile("w+") as err:
        t = time.monotonic()
        # (not in the source tree: `python -m` would import the evtime found there first)
        code = subprocess.run(
            args, stdout=out, stderr=err, env=env or os.environ, cwd=tempfile.gettempdir()
        ).returncode
        took = time.monotonic() - t
        err.seek(0)
        text = err.read()
    if code != 0 or "read 5, released 5" not in text:
        raise SystemExit(f"run failed: {args}\n{text[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--variants", default="U,S")
    ap.add_argument("--warm", action="store_true", help="also time --reuse-server runs")
    ap.add_argument("--warm-repeat", type=int, default=3)
    ap.add_argument(
        "--baseline",
        help="a checkout of an earlier evtime (e.g. a git worktree): variant O runs it as shipped",
    )
    a = ap.parse_args()
    names = a.variants.split(",")
    if a.baseline:
        base = dict(os.environ, PYTHONPATH=os.path.abspath(a.baseline), **SHIPPED)
        ENV_VARIANTS["O"] = (f"evtime at {a.baseline}, as shipped", base)
        VARIANTS["O"] = (ENV_VARIANTS["O"][0], [])
        names.append("O")
    if {"S", "T", "O"} & set(names):
        archive.ensure(dict(os.environ, **SHIPPED))
    times: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for r in range(a.repeat):
        for n in names:
            before = load()
            env = dict(os.environ, **(ENV_VARIANTS[n][1] if n in ENV_VARIANTS else OFF))
            took = run(VARIANTS[n][1], env=env)
            times[n].append((took, before))
            print(
                json.dumps({"round": r, "variant": n, "secs": round(took, 2), "load1": before}),
                flush=True,
            )
    for n in names:
        secs = [s for s, _ in times[n]]
        if not secs:
            continue
        loads = [f"{ld:.1f}" for _, ld in times[n]]
        print(
            f"| {n} | {VARIANTS[n][0]} | {len(secs)} | {statistics.median(secs):.1f} | "
            f"{min(secs):.1f}–{max(secs):.1f} | {', '.join(loads)} |",
            flush=True,
        )
    if a.warm:
        state = tempfile.mkdtemp(prefix="evtime-bench-warm-")
        env = dict(
            os.environ, **SHIPPED, SPARK_LOCAL_CONNECT_DISCOVERY=os.path.join(state, "d.json")
        )
        try:
            t = time.monotonic()
            first = run([], ["--reuse-server"], env)
            print(f"# warm server: first run (starts it) {first:.1f}s", flush=True)
            kinds = {
                "warm": ("--reuse-server, server running", env),
                "warm-T": ("the same, driver-side I/O off", dict(env, EVTIME_DRIVER_IO_MAX="0")),
            }
            warm: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
            for _ in range(a.warm_repeat):  # interleaved
                for k, (_, kenv) in kinds.items():
                    before = load()
                    warm[k].append((run([], ["--reuse-server"], kenv), before))
                    took = round(warm[k][-1][0], 2)
                    print(json.dumps({"variant": k, "secs": took, "load1": before}), flush=True)
            for k, (label, _) in kinds.items():
                secs = [s for s, _ in warm[k]]
                print(
                    f"| {k} | {label} | {len(secs)} | "
                    f"{statistics.median(secs):.1f} | {min(secs):.1f}–{max(secs):.1f} | "
                    f"{', '.join(f'{ld:.1f}' for _, ld in warm[k])} |",
                    flush=True,
                )
        finally:
            subprocess.run([sys.executable, "-m", "evtime", "server", "stop"], env=env)
            shutil.rmtree(state, ignore_errors=True)
            del t


if __name__ == "__main__":
    main()
