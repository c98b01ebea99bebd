"""Bytes through the driver: `evtime adjust` of N rows to S3 (moto's server on loopback),
as one file (staged locally, or on S3) and as a directory of parts (issue 45).  Not a
test: it measures, prints a table and appends it to bench/RESULTS.md.

    python bench/driver_io.py [--rows 10000000] [--format parquet,csv] [--no-record]

The driver is the `evtime` Python process: it plans the job and, for a single-file output,
assembles the parts the tasks wrote and uploads them.  Its bytes read and written
(``rchar``/``wchar`` of /proc/PID/io: every read and write call, files and pipes; the
process's own, not its children's: Spark's JVM and its Python workers are children) are
sampled every 0.1 s; the last sample before it exits is reported, with the wall time and
the size of what was published.  With a directory output the tasks write the parts straight
to S3: what is left for the driver is the plan, the counts and the manifest.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import generate  # noqa: E402
from run import machine  # noqa: E402


def proc_io(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/io") as fh:
        return {k: int(v) for k, v in (line.split(": ") for line in fh)}


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, dict[str, int], int, str]:
    """(wall seconds, the driver's last /proc/PID/io sample, return code, stderr tail)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    last: dict[str, int] = {}
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.1):
            try:
                last.update(proc_io(proc.pid))
            except (OSError, ValueError):  # (exited: the last sample stays)
                return

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    t.join()
    tail = err.decode(errors="replace").strip().splitlines()[-2:]
    return wall, last, proc.returncode, " / ".join(tail).replace("|", "/")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--format", default="parquet,csv", help="output formats (default both)")
    ap.add_argument("--data", type=Path, default=BENCH / "data")
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args(argv)

    import logging

    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # (a line per S3 request)

    src = args.data / f"events-{args.rows}.parquet"
    if not src.exists():
        generate.main(["--rows", str(args.rows), "--out", str(args.data)])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    os.environ.update({k: env[k] for k in env if k.startswith("AWS_")})
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    rows = []
    try:
        fs = s3fs.S3FileSystem()
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        fs.mkdir(bucket)
        for fmt in args.format.split(","):
            for layout, out, staging in [
                ("one file", f"s3://{bucket}/{fmt}/adjust.{fmt}", None),
                ("one file, staging on S3", f"s3://{bucket}/{fmt}/s3/adjust.{fmt}", "s3"),
                ("directory", f"s3://{bucket}/{fmt}/adjust/", None),
            ]:
                cmd = ["evtime", "adjust", "--unit", "msec", "--range", "999", "-q"]
                cmd += ["--output-format", fmt, "-o", out, str(src)]
                # staging on S3: a single CSV / JSON Lines file is assembled on S3 by copies
                # (UploadPartCopy) of the staged parts; Parquet still through the driver
                run_env = {**env, "EVTIME_STAGING": f"s3://{bucket}/staging/"} if staging else env
                wall, io, rc, tail = measure(cmd, run_env)
                fs.invalidate_cache()
                size = fs.du(out.removeprefix("s3://")) if rc == 0 else 0
                rows.append((fmt, layout, wall, io, rc, tail, size))
                mb = lambda n: f"{n / 1e6:,.1f}"  # noqa: E731
                print(
                    f"{fmt:8} {layout:10} {wall:6.1f} s  read {mb(io.get('rchar', 0))} MB  "
                    f"written {mb(io.get('wchar', 0))} MB  output {mb(size)} MB  rc {rc} {tail}",
                    flush=True,
                )
    finally:
        server.stop()
    m = machine()
    lines = [
        f"## {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: bytes through the driver, "
        f"{args.rows:,} rows to S3 (moto) — bench/driver_io.py",
        "",
        f"* machine: {m['machine']}",
        f"* {m['versions']}",
        f"* evtime: {m['evtime']}",
        f"* load average (1 min) at the end: {os.getloadavg()[0]:.1f}",
        "* command: `evtime adjust --unit msec --range 999 -q --output-format F -o OUT "
        f"{src.name}` (input local, output on moto's S3 server on loopback)",
        "",
        "| format | output | wall s | driver read MB | driver written MB | output MB | exit |",
        "|---|---|---|---|---|---|---|",
    ]
    for fmt, layout, wall, io, rc, tail, size in rows:
        lines.append(
            f"| {fmt} | {layout} | {wall:.1f} | {io.get('rchar', 0) / 1e6:,.1f} | "
            f"{io.get('wchar', 0) / 1e6:,.1f} | {size / 1e6:,.1f} | "
            f"{rc}{' ' + tail if rc else ''} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_record:
        with open(BENCH / "RESULTS.md", "a") as fh:
            fh.write("\n" + text)


if __name__ == "__main__":
    main()
