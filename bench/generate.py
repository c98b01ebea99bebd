"""Write a deterministic out-of-order event file (or N source files) as Parquet.

    python bench/generate.py --rows 1000000 --out bench/data/              # events-1000000.parquet
    python bench/generate.py --rows 1000000 --sources 3 --out bench/data/  # ...-s1of3.parquet ...

The model: events happen on an arrival clock (Poisson, 1 ms apart on average); each row's
event time is its arrival time minus a delay: exponential jitter (mean --jitter-ms) for 99%
of rows, uniform up to --tail-ms for a 1% tail. File order is arrival order. Columns:
`time` timestamp[ns] (naive, UTC), `key` string 'k0'..'k99', `value` float64.

With --sources N every row goes to one of N producers at random; source k (1..N) has its
own, smaller jitter (mean k * jitter_ms / 10), so each source is mostly ascending, and the
same 1% tail. The rows are generated in blocks of 1M and written as they come (row groups
of 1M rows), so 50M rows never sit in memory at once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

BLOCK = 1_000_000
MS = 1_000_000  # ns
T0 = 1_704_067_200 * 1_000_000_000  # 2024-01-01T00:00:00Z in ns
KEYS = pa.array([f"k{i}" for i in range(100)], pa.string())
SCHEMA = pa.schema([("time", pa.timestamp("ns")), ("key", pa.string()), ("value", pa.float64())])


def output_paths(out: Path, rows: int, sources: int) -> list[Path]:
    if sources == 1:
        return [out / f"events-{rows}.parquet"]
    return [out / f"events-{rows}-s{k}of{sources}.parquet" for k in range(1, sources + 1)]


def block(
    rng: np.random.Generator, n: int, clock: int, sources: int, jitter_ms: float, tail_ms: float
) -> tuple[pa.Table, np.ndarray, int]:
    """n rows starting after arrival clock `clock`: (table, source of each row, new clock)."""
    arrival = clock + np.cumsum(rng.exponential(MS, n).astype(np.int64) + 1)
    source = rng.integers(0, sources, n) if sources > 1 else np.zeros(n, np.int64)
    scale = jitter_ms * MS * ((source + 1) / 10 if sources > 1 else 1.0)
    delay = rng.exponential(1.0, n) * scale
    tail = rng.random(n) < 0.01
    delay[tail] = rng.uniform(0, tail_ms * MS, int(tail.sum()))
    time = arrival - delay.astype(np.int64)
    key = KEYS.take(pa.array(rng.integers(0, len(KEYS), n)))
    value = rng.normal(100.0, 15.0, n).round(3)
    table = pa.table([pa.array(time, pa.timestamp("ns")), key, pa.array(value)], schema=SCHEMA)
    return table, source, int(arrival[-1])


def generate(
    rows: int,
    out: Path,
    sources: int = 1,
    seed: int = 42,
    jitter_ms: float = 2.0,
    tail_ms: float = 2000.0,
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = output_paths(out, rows, sources)
    tmp = [p.with_suffix(".parquet.tmp") for p in paths]
    writers = [pq.ParquetWriter(t, SCHEMA, compression="snappy") for t in tmp]
    pending = [SCHEMA.empty_table() for _ in paths]  # per file, written in BLOCK-row groups
    clock = T0
    try:
        for b, start in enumerate(range(0, rows, BLOCK)):
            rng = np.random.default_rng([seed, b])
            n = min(BLOCK, rows - start)
            table, source, clock = block(rng, n, clock, sources, jitter_ms, tail_ms)
            for k, writer in enumerate(writers):
                part = table.filter(pa.array(source == k)) if sources > 1 else table
                pending[k] = pa.concat_tables([pending[k], part])
                while len(pending[k]) >= BLOCK:
                    writer.write_table(pending[k].slice(0, BLOCK), row_group_size=BLOCK)
                    pending[k] = pending[k].slice(BLOCK)
        for k, writer in enumerate(writers):
            if len(pending[k]):
                writer.write_table(pending[k], row_group_size=BLOCK)
    finally:
        for writer in writers:
            writer.close()
    for t, p in zip(tmp, paths, strict=True):
        t.replace(p)
    return paths


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, required=True, help="total rows (over all sources)")
    ap.add_argument("--sources", type=int, default=1, help="split into N producer files")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--jitter-ms", type=float, default=2.0, help="mean exponential delay")
    ap.add_argument("--tail-ms", type=float, default=2000.0, help="1%% of rows: delay up to this")
    args = ap.parse_args(argv)
    if args.rows < 1 or args.sources < 1:
        ap.error("--rows and --sources must be >= 1")
    paths = generate(args.rows, args.out, args.sources, args.seed, args.jitter_ms, args.tail_ms)
    for path in paths:
        meta = pq.read_metadata(path)
        print(
            f"{path}: {meta.num_rows} rows, {meta.num_row_groups} row groups, "
            f"{path.stat().st_size / 2**20:.1f} MiB",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
