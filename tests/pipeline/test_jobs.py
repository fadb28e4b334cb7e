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


def test_demo_pipeline(spark, broker, bootstrap, tmp_path):
    from pipeline.jobs import demo

    lines: list[str] = []
    result = demo.run(spark, bootstrap, broker.data_dir / "logs", tmp_path, records=3000, rounds=2,
                      segment_bytes=32768, report=lines.append)
    assert (result.total_records, result.total_amount) == (result.source_records, result.source_amount) == (
        3000, result.source_amount)
    last = result.samples[-1].bytes_by_topic
    # the source keeps everything; each intermediate topic keeps at most its active segment
    assert last[demo.SOURCE] > 300_000
    bound = demo.PARTITIONS * 32768
    assert last[demo.PARSED] <= bound and last[demo.ENRICHED] <= bound, last
    assert len(lines) == 1 + 2 * 4 and "round 2: stage 3" in lines[-1]
    demo.draw(result, tmp_path / "demo.png")
    assert (tmp_path / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_command_line():
    done = subprocess.run([sys.executable, "-m", "pipeline.jobs.demo", "--bootstrap", "127.0.0.1:1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--bootstrap and --log-dir go together" in done.stderr
