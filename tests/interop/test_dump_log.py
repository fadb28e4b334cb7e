"""Kafka's own DumpLogSegments (kafka-dump-log, kafka-tools 4.3.1) reading Ebb's segment files: a topic
created with compression.type=gzip and written by the console producer with lz4 holds gzip batches,
valid to Kafka's reader, with the lines as sent."""

from __future__ import annotations

import subprocess

PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
TOPICS = "org.apache.kafka.tools.TopicCommand"
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
LINES = [f"key-{i}:value {i}" for i in range(20)]


def test_batches_recompressed_to_the_topic_codec_are_what_kafka_reads(java, broker):
    created = java.tool(broker.bootstrap, TOPICS, "--create", "--topic", "dumped", "--partitions", "1",
                        "--config", "compression.type=gzip")
    assert created.returncode == 0, created.stderr[-2000:]
    command = ["java", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
               java.classpath, PRODUCER, "--bootstrap-server", broker.bootstrap, "--topic", "dumped",
               "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
               "--producer-property", "compression.type=lz4", "--producer-property", "linger.ms=50"]
    produced = subprocess.run(command, input="\n".join(LINES) + "\n", capture_output=True, text=True, timeout=120)
    assert produced.returncode == 0, produced.stderr[-2000:]
    segment = broker.data_dir / "logs" / "dumped-0" / "00000000000000000000.log"
    dumped = java.run(DUMP_LOG, "--files", str(segment), "--print-data-log")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    batches = [line for line in dumped.stdout.splitlines() if line.startswith("baseOffset:")]
    assert batches, dumped.stdout[-2000:]
    assert all("compresscodec: gzip" in line and "isvalid: true" in line for line in batches), batches
    records = [line for line in dumped.stdout.splitlines() if line.lstrip().startswith("| offset:")]
    assert [line.split("key: ")[1].split(" payload: ") for line in records] == \
        [line.split(":", 1) for line in LINES]
    assert [int(line.split("offset: ")[1].split()[0]) for line in records] == list(range(len(LINES)))
