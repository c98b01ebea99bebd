"""The floor: the least any Spark job pays for an event-time-ordered Parquet output.

    python bench/floor.py IN.parquet OUT_DIR

Reads the file (ns timestamps as int64), truncates the time to milliseconds, sorts by
(evtime, arrival) and writes Parquet. No bound, no discards: adjust must do all of this and
more. The session has evtime's settings (SESSION_CONF; run.py checks they still match
evtime.session.DEFAULT_CONF) plus EVTIME_CONF=K=V,K=V from the environment.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

UNIT_NS = 1_000_000  # msec

# The same as evtime.session.DEFAULT_CONF + LOCAL_CONF (not imported: the floor must not
# depend on evtime's code, only on its settings).
SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.legacy.parquet.nanosAsLong": "true",
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


def spark_session(app: str) -> SparkSession:
    conf = dict(SESSION_CONF)
    for item in os.environ.get("EVTIME_CONF", "").split(","):
        key, sep, value = item.partition("=")
        if sep:
            conf[key.strip()] = value.strip()
    # evtime's class-data archive, when the benchmark gives it (bench/archive.py)
    if os.environ.get("BENCH_JAVA_OPTIONS"):
        conf["spark.driver.extraJavaOptions"] = os.environ["BENCH_JAVA_OPTIONS"]
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app).master(os.environ.get("EVTIME_MASTER", "local[*]"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_with_arrival(spark: SparkSession, path: str) -> DataFrame:
    """The file with `arrival` (row number in the file: one file, so that is arrival order)."""
    return spark.read.parquet(path).select("*", F.col("_metadata.row_index").alias("arrival"))


def truncate(t: Column) -> Column:
    return t - F.pmod(t, F.lit(UNIT_NS))


def main(src: str, out: str) -> None:
    spark = spark_session("bench-floor")
    df = read_with_arrival(spark, src).withColumn("evtime", truncate(F.col("time")))
    df.orderBy("evtime", "arrival").drop("arrival").write.mode("overwrite").parquet(out)
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
