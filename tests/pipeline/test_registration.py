"""format("ebb") without register(): PySpark registers an importable top-level pyspark_* module's
DefaultSource when a session starts. A fresh Spark session in a subprocess, from a directory outside
the project with the project on PYTHONPATH, as an installed package would be."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from pipeline.session import FAST_JVM
from tests.pipeline.helpers import create_topic, produce

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import os, sys
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.extraJavaOptions", sys.argv[2]).getOrCreate())
    rows = (spark.read.format("ebb").option("kafka.bootstrap.servers", sys.argv[1]).option("subscribe", "reg-t")
            .load().selectExpr("cast(value as string) v").collect())
    print("read:", sorted(r.v for r in rows))
    spark.stop()
""")


def test_the_format_is_found_without_register(bootstrap, tmp_path):
    create_topic(bootstrap, "reg-t")
    produce(bootstrap, {("reg-t", 0): [b"a", b"b"]})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    # The JVM flags local_session gives a short session (a start some 8 s quicker here); they change
    # nothing in how PySpark finds data sources.
    done = subprocess.run([sys.executable, "-c", SCRIPT, bootstrap, FAST_JVM], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "read: ['a', 'b']" in done.stdout
