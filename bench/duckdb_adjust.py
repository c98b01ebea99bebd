"""`evtime adjust --unit msec --range 999` in DuckDB SQL: the single-machine reference.

    python bench/duckdb_adjust.py IN.parquet OUT.parquet

Arrival is the file's row number; the reference time is a running max over it; rows more
than 999 ms below it are dropped; the rest are ordered by (evtime, arrival) and copied to one
Parquet file (times stay timestamp[ns]; insertion order is preserved, so the file is in order).
"""

from __future__ import annotations

import sys

import duckdb

UNIT_NS = 1_000_000  # msec
RANGE = 999

QUERY = """
COPY (
    WITH a AS (
        SELECT *, epoch_ns("time") AS t
        FROM read_parquet($src, file_row_number = true)
    ), b AS (
        SELECT *, t - ((t % $unit) + $unit) % $unit AS ev FROM a
    ), c AS (
        SELECT *, max(ev) OVER (
            ORDER BY file_row_number ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS ref FROM b
    )
    SELECT * EXCLUDE (file_row_number, t, ev, ref), make_timestamp_ns(ev) AS evtime
    FROM c
    WHERE ev >= ref - $range * $unit
    ORDER BY ev, file_row_number
) TO '{out}' (FORMAT parquet)
"""


def main(src: str, out: str) -> None:
    con = duckdb.connect()
    con.execute(
        QUERY.format(out=out.replace("'", "''")), {"src": src, "unit": UNIT_NS, "range": RANGE}
    )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
