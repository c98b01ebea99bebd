"""CSV text of 1M rows of explain adjust's columns: Arrow's writer quoting every text value
(before) against evtime.io.csvtext (minimal quoting). Run: python bench/csv_text.py"""

import time, io, numpy as np, pyarrow as pa, pyarrow.csv as pcsv
from evtime.io import csvtext

n = 1_000_000
rng = np.random.default_rng(1)
t = pa.table(
    {
        "arrival": pa.array(np.arange(n)),
        "source": pa.array(["/data/in/part-00001.parquet"] * n),
        "time": pa.array(["2009-03-01T12:15:22.345678901Z"] * n),
        "evtime": pa.array(["2009-03-01T12:15:22.345000000Z"] * n),
        "decision": pa.array(np.where(rng.random(n) < 0.01, "discarded", "released")),
        "bound": pa.array(["2009-03-01T12:15:21.346000000Z"] * n),
        "released_by": pa.array(np.arange(n).astype(str)),
        "output_pos": pa.array(np.arange(n)),
        "reason": pa.array(
            np.where(
                rng.random(n) < 0.01,
                "late: evtime x is below the bound y (reference time - 999 usec)",
                None,
            )
        ),
        "value": pa.array(rng.random(n)),
    }
)


def old(tb):
    out = io.BytesIO()
    pcsv.write_csv(
        tb, out, pcsv.WriteOptions(include_header=False, quoting_style="needed", batch_size=1 << 16)
    )
    return out


def new(tb):
    out = io.BytesIO()
    for s in range(0, tb.num_rows, 1 << 16):
        csvtext.write(tb.slice(s, 1 << 16), out)
    return out


for name, f in [("old", old), ("new", new)] * 3:
    t0 = time.perf_counter()
    o = f(t)
    dt = time.perf_counter() - t0
    print(name, f"{dt:.3f}s", len(o.getvalue()))
