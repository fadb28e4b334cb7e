"""Count the records per key of a topic and write the counts to another topic.

    python -m pipeline.jobs.key_counts --bootstrap 127.0.0.1:9092 --source events --target event-counts

Each output record has the input key as its key (null for records without one) and the count as a
decimal string value. A batch job over the records present when it starts; run it again for fresh
counts (the target topic then holds one more record per key: the newest is the current count).
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline.session import local_session


def count_per_key(spark: SparkSession, bootstrap: str, source: str) -> DataFrame:
    records = (spark.read.format("ebb")
               .option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", source)
               .load())
    return records.groupBy("key").agg(F.count("*").cast("string").alias("value"))


def run(spark: SparkSession, bootstrap: str, source: str, target: str) -> int:
    """Write the counts to `target`; return how many keys there were."""
    counts = count_per_key(spark, bootstrap, source).cache()
    (counts.write.format("ebb").mode("append")
     .option("kafka.bootstrap.servers", bootstrap)
     .option("topic", target)
     .save())
    keys = counts.count()
    counts.unpersist()
    return keys


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline.jobs.key_counts", description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="Ebb bootstrap servers, host:port[,host:port]")
    parser.add_argument("--source", required=True, help="topic to count")
    parser.add_argument("--target", required=True, help="topic to write (key, count) records to; must exist")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    args = parser.parse_args(argv)

    spark = local_session("ebb-key-counts", master=args.master)
    try:
        keys = run(spark, args.bootstrap, args.source, args.target)
    finally:
        spark.stop()
    print(f"wrote the counts of {keys} keys from {args.source!r} to {args.target!r}")


if __name__ == "__main__":
    main()
