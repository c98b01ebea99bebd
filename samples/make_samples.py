"""Writes the seed 000 tuples A-E as CSV (the seed's notation), Parquet (timestamp[ns]) and
JSON Lines (ISO-8601).  Run from the repository root: python samples/make_samples.py"""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).parent
TUPLES = [  # tuple, time set in records (seed 000), in the order sent from the input adaptor
    ("A", "2009/03/01 12:15:22:345678901", 1235909722345678901),
    ("B", "2009/03/01 12:15:22:123456789", 1235909722123456789),
    ("C", "2009/03/01 12:15:23:123456789", 1235909723123456789),
    ("D", "2009/03/01 12:15:22:890123456", 1235909722890123456),
    ("E", "2009/03/01 12:15:24:123456789", 1235909724123456789),
]


def iso(ns: int) -> str:
    t = pa.scalar(ns, pa.timestamp("ns")).as_py()  # pandas-free: datetime loses ns, so build it
    return f"{t:%Y-%m-%dT%H:%M:%S}.{ns % 1_000_000_000:09d}Z" if t is not None else ""


def main() -> None:
    with open(HERE / "tuples.csv", "w") as f:
        f.write("tuple,time\n")
        f.writelines(f"{name},{text}\n" for name, text, _ in TUPLES)
    table = pa.table(
        {
            "tuple": [t[0] for t in TUPLES],
            "time": pa.array([t[2] for t in TUPLES], pa.timestamp("ns")),
        }
    )
    pq.write_table(table, HERE / "tuples.parquet")
    with open(HERE / "tuples.jsonl", "w") as f:
        f.writelines(json.dumps({"tuple": n, "time": iso(ns)}) + "\n" for n, _, ns in TUPLES)


if __name__ == "__main__":
    main()
