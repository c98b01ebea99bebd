"""The naive adjust a Spark user writes first: one window over the whole input.

    python bench/naive.py IN.parquet OUT_DIR

`Window.orderBy(arrival)` without partitionBy (Spark moves every row into one partition and
warns about it) computes the running maximum of the truncated time; rows more than 999 ms
below it are dropped; the rest are sorted by (evtime, arrival) and written. Same result as
`evtime adjust --unit msec --range 999` (as int64 times), same session as bench/floor.py.
"""

from __future__ import annotations

import sys

from floor import UNIT_NS, read_with_arrival, spark_session, truncate
from pyspark.sql import Window
from pyspark.sql import functions as F

RANGE = 999


def main(src: str, out: str) -> None:
    spark = spark_session("bench-naive")
    df = read_with_arrival(spark, src).withColumn("evtime", truncate(F.col("time")))
    upto_here = Window.orderBy("arrival").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    df = df.withColumn("ref", F.max("evtime").over(upto_here))
    kept = df.where(F.col("evtime") >= F.col("ref") - RANGE * UNIT_NS)
    kept.orderBy("evtime", "arrival").drop("arrival", "ref").write.mode("overwrite").parquet(out)
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
