"""The example job: its Spark part on the shared session, and its command line as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipeline.jobs import key_counts
from tests.pipeline.helpers import consume_all, create_topic, produce

ROOT = Path(__file__).resolve().parents[2]


def test_key_counts_job(spark, bootstrap):
    create_topic(bootstrap, "job-events", partitions=2)
    create_topic(bootstrap, "job-counts")
    produce(bootstrap, {("job-events", 0): [(b"alice", b"1"), (b"bob", b"2"), (b"alice", b"3")],
                        ("job-events", 1): [(b"alice", b"4"), (None, b"5")]})
    assert key_counts.run(spark, bootstrap, "job-events", "job-counts") == 3
    counts = {r.key: r.value for r in consume_all(bootstrap, "job-counts")}
    assert counts == {b"alice": b"3", b"bob": b"1", None: b"1"}


def test_key_counts_command_line():
    # A full run in a second JVM costs ~20 s; the run itself is checked above, so check the entry point.
    done = subprocess.run([sys.executable, "-m", "pipeline.jobs.key_counts", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--bootstrap" in done.stdout and "--source" in done.stdout and "--target" in done.stdout
    missing = subprocess.run([sys.executable, "-m", "pipeline.jobs.key_counts", "--source", "a"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "--bootstrap" in missing.stderr
