"""kafka-console-producer and kafka-console-consumer (kafka-tools 4.3.1) against Ebb, as people try a
broker first: keyed lines in, then read back from the beginning in a consumer group, whose committed
offsets kafka-consumer-groups then shows."""

from __future__ import annotations

import subprocess

PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
LINES = [f"key-{i}:value {i}" for i in range(12)]


def test_console_producer_then_consumer_in_a_group(java, broker):
    created = java.tool(broker.bootstrap, TOPICS, "--create", "--topic", "console", "--partitions", "3")
    assert created.returncode == 0, created.stderr[-2000:]
    command = ["java", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
               java.classpath, PRODUCER, "--bootstrap-server", broker.bootstrap, "--topic", "console",
               "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
               "--producer-property", "acks=all"]
    produced = subprocess.run(command, input="\n".join(LINES) + "\n", capture_output=True, text=True, timeout=120)
    assert produced.returncode == 0, produced.stderr[-2000:]
    consumed = java.run(CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", "console", "--from-beginning",
                        "--group", "console-group", "--max-messages", str(len(LINES)),
                        "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:",
                        "--timeout-ms", "30000")
    assert consumed.returncode == 0, consumed.stderr[-2000:]
    assert sorted(line for line in consumed.stdout.splitlines() if line.strip()) == sorted(LINES)
    described = java.tool(broker.bootstrap, CONSUMER_GROUPS, "--describe", "--group", "console-group")
    assert described.returncode == 0, described.stderr[-2000:]
    rows = [line.split() for line in described.stdout.splitlines() if line.startswith("console-group")]
    assert sorted(int(r[2]) for r in rows) == [0, 1, 2]  # PARTITION
    assert sum(int(r[3]) for r in rows) == len(LINES)  # CURRENT-OFFSET: everything read is committed
