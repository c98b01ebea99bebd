"""Soak the warm server of --reuse-server: many small runs, the server's live heap after a
full GC every few runs.  Flat is a pass (issue 49: it grew ~1.3 MB a run and the server died
of "Java heap space" after ~560 runs).

    python bench/soak_server.py [--runs 300] [--every 20] [--keep]

Uses a server of its own (SPARK_LOCAL_CONNECT_DISCOVERY in a temporary directory), started
by the first run and stopped at the end (--keep: left running).  The live heap is the total
of ``jcmd PID GC.class_histogram`` (which runs a full GC first); the leading classes of the
last histogram are printed.  Exit 1 when the heap grew more than --limit MB per 100 runs
between the first and the last measurement after warm-up (the measurement at run --every).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def live_heap(pid: int) -> tuple[int, list[str]]:
    """(live bytes after a full GC, the histogram's first rows)"""
    out = subprocess.run(
        ["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True, check=True
    ).stdout
    total = re.search(r"^Total\s+\d+\s+(\d+)", out, re.M)
    if total is None:
        raise SystemExit(f"no total in jcmd's histogram:\n{out[-500:]}")
    rows = [line for line in out.splitlines() if re.match(r"\s*\d+:", line)]
    return int(total.group(1)), rows[:12]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--limit", type=float, default=5.0, help="MB per 100 runs (default 5)")
    ap.add_argument("--keep", action="store_true", help="leave the server running")
    ap.add_argument(
        "--skip", default="", help="commands left out, e.g. explain (it failed before 0.2)"
    )
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="evtime-soak-")
    record = os.path.join(work, "server", "connect-local.json")
    os.makedirs(os.path.dirname(record))
    env = {**os.environ, "SPARK_LOCAL_CONNECT_DISCOVERY": record, "EVTIME_REUSE_SERVER": "1"}
    src = os.path.join(work, "in.csv")
    with open(src, "w") as fh:  # a small input with disorder, one bad row, keys
        fh.write("k,time,v\n")
        for i in range(200):
            fh.write(f"k{i % 7},{1_235_909_722_000 + (i * 7919) % 5000},{i}\n")
        fh.write("k1,not-a-time,0\n")
    # each run makes plans and jobs the way cron jobs do: adjust, explain, merge, bound
    common = ["--unit", "msec", "--range", "999", "--time-format", "epoch_ms"]
    common += ["--bad-rows", "discard", src]
    commands = [
        ["adjust", "-q", *common, "-o", os.path.join(work, "o.csv"), "--overwrite"],
        ["explain", "adjust", *common, "--format", "csv"],
        ["bound", "-q", *common, "--window", "1s", "--agg", "count(*) AS n"]
        + ["-o", os.path.join(work, "b.csv"), "--overwrite"],
    ]
    commands = [c for c in commands if c[0] not in args.skip.split(",")]
    pids: list[int] = []  # the server's, in order (a new one: the last died, a run started it)
    points: list[tuple[int, float]] = []
    start = time.monotonic()
    print(f"# {args.runs} runs, heap every {args.every}; server record {record}", flush=True)
    print("runs  live_heap_MB  elapsed_s", flush=True)
    try:
        for n in range(1, args.runs + 1):
            cmd = commands[(n - 1) % len(commands)]
            r = subprocess.run(["evtime", *cmd], env=env, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"run {n} failed ({r.returncode}): {r.stderr.strip()[-400:]}", flush=True)
                return 2
            with open(record) as fh:
                pid = json.load(fh)["pid"]
            if pids[-1:] != [pid]:
                if pids:
                    print(f"# run {n}: a new server, pid {pid} (pid {pids[-1]} ended)", flush=True)
                    points.clear()  # (a new heap: judged from here)
                pids.append(pid)
            if n % args.every == 0 or n == 1:
                live, top = live_heap(pid)
                points.append((n, live / 1e6))
                print(f"{n:5d}  {live / 1e6:12.1f}  {time.monotonic() - start:9.0f}", flush=True)
        print("# leading classes at the end:")
        print("\n".join(top))
    finally:
        if not args.keep and os.path.exists(record):
            subprocess.run(["evtime", "server", "stop"], env=env, capture_output=True)
    warm = [p for p in points if p[0] >= args.every]
    if len(warm) < 2:
        print("too few measurements to judge (raise --runs)")
        return 0
    (n0, h0), (n1, h1) = warm[0], warm[-1]
    per100 = (h1 - h0) / (n1 - n0) * 100
    verdict = "flat: pass" if per100 <= args.limit else "GROWS: fail"
    print(f"# {per100:+.1f} MB per 100 runs from run {n0} to {n1}: {verdict}")
    return 0 if per100 <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
