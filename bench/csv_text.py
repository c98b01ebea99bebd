"""CSV text of 1M rows of explain adjust's columns: Arrow's writer quoting every text value
(the writer before minimal quoting) against evtime.io.csvtext, 3 interleaved rounds.
Run: python bench/csv_text.py"""

from __future__ import annotations

import io
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

from evtime.io import csvtext

N = 1_000_000
BATCH = 1 << 16
REASON = "late: evtime x is below the bound y (reference time - 999 usec)"


def table() -> pa.Table:
    rng = np.random.default_rng(1)
    iso = "2009-03-01T12:15:22.345678901Z"
    return pa.table(
        {
            "arrival": pa.array(np.arange(N)),
            "source": pa.array(["/data/in/part-00001.parquet"] * N),
            "time": pa.array([iso] * N),
            "evtime": pa.array([iso] * N),
            "decision": pa.array(np.where(rng.random(N) < 0.01, "discarded", "released")),
            "bound": pa.array([iso] * N),
            "released_by": pa.array(np.arange(N).astype(str)),
            "output_pos": pa.array(np.arange(N)),
            "reason": pa.array(np.where(rng.random(N) < 0.01, REASON, None)),
            "value": pa.array(rng.random(N)),
        }
    )


def quoted_by_arrow(t: pa.Table) -> bytes:
    out = io.BytesIO()
    opts = pcsv.WriteOptions(include_header=False, quoting_style="needed", batch_size=BATCH)
    pcsv.write_csv(t, out, opts)
    return out.getvalue()


def minimal(t: pa.Table) -> bytes:
    out = io.BytesIO()
    for start in range(0, t.num_rows, BATCH):
        csvtext.write(t.slice(start, BATCH), out)
    return out.getvalue()


if __name__ == "__main__":
    t = table()
    for name, write in [("arrow, every text quoted", quoted_by_arrow), ("csvtext", minimal)] * 3:
        started = time.perf_counter()
        size = len(write(t))
        print(f"{name}: {time.perf_counter() - started:.3f} s, {size} bytes")
