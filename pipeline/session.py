"""A local SparkSession with the ebb data source registered, set up as docs/pipeline.md explains.

Python workers must run this interpreter (it has pyarrow and the project installed), and the
JVM flags below cut start-up by a few seconds, which matters for tests and small jobs; a job that runs
long (or a benchmark) asks for `long_running=True` and gets the JVM's full JIT instead, which turns the
Arrow batches from Python into rows about twice as fast once warm.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from . import register

FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def session_settings(app_conf: dict[str, str] | None = None, long_running: bool = False) -> dict[str, str]:
    """The Spark settings local_session applies, `app_conf` last (it wins)."""
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "1g",
        "spark.sql.streaming.stopTimeout": "30s",
        "spark.sql.session.timeZone": "UTC",
        # Int.MaxValue turns off Spark's per-row check of an Arrow batch's byte size on the way to Python
        # (a third of a write task's JVM time: it walks every vector per row); maxRecordsPerBatch still caps it
        "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
        **({} if long_running else {"spark.driver.extraJavaOptions": FAST_JVM}),
        **(app_conf or {}),
    }


def local_session(app_name: str = "ebb", master: str = "local[2]", conf: dict[str, str] | None = None,
                  long_running: bool = False) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in session_settings(conf, long_running).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
