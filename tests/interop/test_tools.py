"""Kafka's command-line tools (kafka-tools 4.3.1) run against Ebb as an operator runs them.

Each call is `java -cp <jars> <ToolClass> --bootstrap-server <broker> ...`, what the kafka-*.sh
scripts run. The tests are ordered steps on one topic of one broker: kafka-topics creates it,
records and a group's commits are added (the Interop driver's `fill` and `commit`), then
kafka-get-offsets, kafka-delete-records with KIP-107's JSON file and kafka-consumer-groups act on
them; kafka-configs works on a topic of its own. Exit codes and every deterministic printed line are
checked.
"""

from __future__ import annotations

import datetime
import re
import time

import pytest

TOPICS = "org.apache.kafka.tools.TopicCommand"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

TOPIC = "tools"
GROUP = "tools-group"
# record i of each partition has timestamp BASE + i*1000 (an hour ago: inside retention.ms)
BASE = (int(time.time()) - 3600) * 1000


@pytest.fixture(scope="module")
def tool(java, broker):
    def run(main: str, *args: str, expect: int = 0):
        result = java.tool(broker.bootstrap, main, *args)
        assert result.returncode == expect, f"exit {result.returncode}:\n{result.stdout}\n{result.stderr[-3000:]}"
        return result
    return run


def rows(lines: list[str]) -> list[list[str]]:
    """A table's rows after its header, split on whitespace."""
    header = next(i for i, line in enumerate(lines) if line.startswith(("GROUP", "TOPIC")))
    return [line.split() for line in lines[header + 1:]]


def test_kafka_topics_create(tool):
    created = tool(TOPICS, "--create", "--topic", TOPIC, "--partitions", "2", "--replication-factor", "1",
                   "--config", "retention.ms=7200000")
    assert created.lines == [f"Created topic {TOPIC}."]
    again = tool(TOPICS, "--create", "--topic", TOPIC, "--partitions", "2", expect=1)
    assert f"Error while executing topic command : Topic '{TOPIC}' already exists." in again.stdout + again.stderr


def test_kafka_topics_describe_and_list(tool):
    described = tool(TOPICS, "--describe", "--topic", TOPIC)
    assert re.fullmatch(rf"Topic: {TOPIC}\tTopicId: [\w-]{{22}}\tPartitionCount: 2\tReplicationFactor: 1\t"
                        r"Configs: retention.ms=7200000", described.lines[0]), described.lines[0]
    # Elr/LastKnownElr empty, as Apache Kafka 4.x prints them: the tool asks DescribeTopicPartitions
    # (key 75), which names no eligible leader replicas (it printed N/A when Ebb lacked the API)
    assert described.lines[1:] == [f"\tTopic: {TOPIC}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\t"
                                   "Elr: \tLastKnownElr:" for p in (0, 1)]
    listed = tool(TOPICS, "--list", "--exclude-internal")
    assert listed.lines == [TOPIC]


def test_kafka_configs_on_ebbs_own_topic_configs(tool):
    """kafka-configs (kafka.admin.ConfigCommand, from kafka_2.13) sets, lists and deletes topic configs,
    Ebb's own retention.min.timestamp and retention.committed.groups among them."""
    configs = "kafka.admin.ConfigCommand"
    topic = f"{TOPIC}-configs"
    tool(TOPICS, "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    entity = ("--entity-type", "topics", "--entity-name", topic)
    altered = tool(configs, *entity, "--alter", "--add-config",
                   "retention.min.timestamp=1700000000000,retention.committed.groups=[audit,billing],retention.ms=86400000")
    assert altered.lines == [f"Completed updating config for topic {topic}."]
    assert tool(configs, *entity, "--describe").lines == [
        f"Dynamic configs for topic {topic} are:",
        "  retention.committed.groups=audit,billing sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "retention.committed.groups=audit,billing, DEFAULT_CONFIG:log.retention.committed.groups=}",
        "  retention.min.timestamp=1700000000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "retention.min.timestamp=1700000000000}",
        # Kafka's log.retention.ms has no default of its own (log.retention.hours has): no synonym for it
        "  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}"]
    tool(configs, *entity, "--alter", "--delete-config", "retention.ms,retention.committed.groups")
    every = tool(configs, *entity, "--describe", "--all").lines
    assert every[0] == f"All configs for topic {topic} are:"
    assert "  retention.ms=604800000 sensitive=false synonyms={}" in every
    assert "  retention.min.timestamp=1700000000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:" \
           "retention.min.timestamp=1700000000000}" in every
    assert "  cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}" in every


def test_kafka_configs_on_broker_loggers(tool):
    """kafka-configs --entity-type broker-loggers lists every logger of the broker with its level, sets
    one and gives it back the root's; an unknown logger is refused by the tool, from the list."""
    configs = "kafka.admin.ConfigCommand"
    entity = ("--entity-type", "broker-loggers", "--entity-name", "1")
    assert tool(configs, *entity, "--alter", "--add-config", "topics=DEBUG").lines == \
        ["Completed updating config for broker-logger 1."]
    described = tool(configs, *entity, "--describe").lines
    assert described[0] == "Dynamic configs for broker-logger 1 are:"
    assert {"  root=INFO sensitive=false synonyms={}", "  topics=DEBUG sensitive=false synonyms={}",
            "  store=INFO sensitive=false synonyms={}"} <= set(described)
    refused = tool(configs, *entity, "--alter", "--add-config", "nope=DEBUG", expect=1)
    assert "Invalid broker logger(s): nope" in refused.stderr
    tool(configs, *entity, "--alter", "--delete-config", "topics")
    assert "  topics=INFO sensitive=false synonyms={}" in tool(configs, *entity, "--describe").lines


def test_fill(java, broker):
    """Setup, not a tool: 10 records in each partition, and a group that committed 5 in both."""
    java.run("ebb.interop.Interop", broker.bootstrap, "-", "fill", TOPIC, "2", "10", str(BASE)).check_returncode()
    java.run("ebb.interop.Interop", broker.bootstrap, "-", "commit", GROUP, TOPIC, "0=5", "1=5").check_returncode()


def test_kafka_topics_alter_partitions(tool):
    tool(TOPICS, "--alter", "--topic", TOPIC, "--partitions", "3")
    described = tool(TOPICS, "--describe", "--topic", TOPIC)
    assert "\tPartitionCount: 3\t" in described.lines[0]
    assert len(described.lines) == 4


def test_kafka_get_offsets(tool):
    def offsets(*args: str) -> list[str]:
        return tool(GET_OFFSETS, "--topic", TOPIC, *args).lines

    assert offsets("--time", "latest") == [f"{TOPIC}:0:10", f"{TOPIC}:1:10", f"{TOPIC}:2:0"]
    assert offsets("--time", "-1") == [f"{TOPIC}:0:10", f"{TOPIC}:1:10", f"{TOPIC}:2:0"]
    assert offsets("--time", "earliest") == [f"{TOPIC}:0:0", f"{TOPIC}:1:0", f"{TOPIC}:2:0"]
    # the newest record, 9, in each partition with records
    assert offsets("--time", "max-timestamp") == [f"{TOPIC}:0:9", f"{TOPIC}:1:9"]
    # the first record at or after the time: 5 (BASE + 5000)
    assert offsets("--time", str(BASE + 4500)) == [f"{TOPIC}:0:5", f"{TOPIC}:1:5"]
    assert offsets("--time", str(BASE + 60_000)) == []
    assert tool(GET_OFFSETS, "--topic-partitions", f"{TOPIC}:1", "--time", "-1").lines == [f"{TOPIC}:1:10"]


def test_kafka_delete_records_with_the_kip_107_json_file(tool, tmp_path):
    offsets = tmp_path / "offsets.json"
    offsets.write_text('{"partitions": [{"topic": "tools", "partition": 0, "offset": 4},'
                       ' {"topic": "tools", "partition": 1, "offset": -1}], "version": 1}')
    deleted = tool(DELETE_RECORDS, "--offset-json-file", str(offsets))
    assert deleted.lines[:2] == ["Executing records delete operation", "Records delete operation completed:"]
    assert sorted(deleted.lines[2:]) == [f"partition: {TOPIC}-0\tlow_watermark: 4",
                                         f"partition: {TOPIC}-1\tlow_watermark: 10"]
    assert tool(GET_OFFSETS, "--topic", TOPIC, "--time", "earliest").lines == [
        f"{TOPIC}:0:4", f"{TOPIC}:1:10", f"{TOPIC}:2:0"]

    offsets.write_text('{"partitions": [{"topic": "tools", "partition": 0, "offset": 11}], "version": 1}')
    refused = tool(DELETE_RECORDS, "--offset-json-file", str(offsets))
    assert refused.lines[2:] == [f"partition: {TOPIC}-0\terror: org.apache.kafka.common.errors."
                                 "OffsetOutOfRangeException: The requested offset is not within the range of offsets"
                                 " maintained by the server."]


def test_kafka_consumer_groups_list_and_describe(tool, broker):
    assert GROUP in tool(CONSUMER_GROUPS, "--list").lines
    described = tool(CONSUMER_GROUPS, "--describe", "--group", GROUP)
    assert described.lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                          "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert sorted(rows(described.lines)) == [[GROUP, TOPIC, "0", "5", "10", "5", "-", "-", "-"],
                                             [GROUP, TOPIC, "1", "5", "10", "5", "-", "-", "-"]]
    state = tool(CONSUMER_GROUPS, "--describe", "--group", GROUP, "--state")
    assert rows(state.lines) == [[GROUP, broker.bootstrap, "(1)", "-", "Empty", "0"]]


def committed(tool) -> dict[int, str]:
    described = tool(CONSUMER_GROUPS, "--describe", "--group", GROUP, "--offsets")
    return {int(row[2]): row[3] for row in rows(described.lines)}


def test_kafka_consumer_groups_reset_offsets(tool):
    reset = (CONSUMER_GROUPS, "--reset-offsets", "--group", GROUP, "--execute", "--topic")
    earliest = tool(*reset, TOPIC, "--to-earliest")
    assert sorted(rows(earliest.lines)) == [[GROUP, TOPIC, "0", "4"], [GROUP, TOPIC, "1", "10"],
                                            [GROUP, TOPIC, "2", "0"]]
    assert committed(tool) == {0: "4", 1: "10", 2: "0"}

    to_offset = tool(*reset, f"{TOPIC}:0", "--to-offset", "7")
    assert rows(to_offset.lines) == [[GROUP, TOPIC, "0", "7"]]
    assert committed(tool) == {0: "7", 1: "10", 2: "0"}

    when = datetime.datetime.fromtimestamp((BASE + 4500) / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    by_time = tool(*reset, TOPIC, "--to-datetime", when + "+00:00")
    # partition 0: record 5 is the first at or after the time; 1 and 2 hold no record at all (deleted,
    # never written), so the tool falls back to their latest offset and says so
    assert sorted(rows(by_time.lines)) == [[GROUP, TOPIC, "0", "5"], [GROUP, TOPIC, "1", "10"],
                                           [GROUP, TOPIC, "2", "0"]]
    assert f"Warn: Partition 1 from topic {TOPIC} is empty. Falling back to latest known offset." in by_time.lines
    assert committed(tool) == {0: "5", 1: "10", 2: "0"}


def test_kafka_consumer_groups_describe_a_live_member(tool, broker):
    """A group with a member connected (confluent-kafka, subscribed): --describe names it in every
    partition's row, --members and --state show it (the same steps against Kafka 4.3.1 print rows of
    the same shape: member id, /127.0.0.1, the client id, range, Stable, 1)."""
    from confluent_kafka import Consumer, TopicPartition

    live = "tools-live"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": live, "client.id": "live-member",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 3:
            assert time.monotonic() < deadline, f"no assignment: {consumer.assignment()}"
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition(TOPIC, p, 10) for p in range(3)], asynchronous=False)
        member_id = consumer.memberid()
        described = rows(tool(CONSUMER_GROUPS, "--describe", "--group", live).lines)
        assert sorted(row[:3] + row[6:] for row in described) == [
            [live, TOPIC, str(p), member_id, "/127.0.0.1", "live-member"] for p in range(3)], described
        assert all(row[3] == "10" for row in described), described
        members = rows(tool(CONSUMER_GROUPS, "--describe", "--group", live, "--members").lines)
        assert members == [[live, member_id, "/127.0.0.1", "live-member", "3"]], members
        state = rows(tool(CONSUMER_GROUPS, "--describe", "--group", live, "--state").lines)
        assert state == [[live, broker.bootstrap, "(1)", "range", "Stable", "1"]], state
    finally:
        consumer.close()


def test_kafka_consumer_groups_delete_offsets_and_group(tool):
    deleted = tool(CONSUMER_GROUPS, "--delete-offsets", "--group", GROUP, "--topic", f"{TOPIC}:1")
    assert deleted.lines[0] == f"Request succeeded for deleting offsets from group {GROUP}."
    assert rows(deleted.lines) == [[TOPIC, "1", "Successful"]]
    assert committed(tool) == {0: "5", 2: "0"}

    gone = tool(CONSUMER_GROUPS, "--delete", "--group", GROUP)
    assert gone.lines == [f"Deletion of requested consumer groups ('{GROUP}') was successful."]
    assert GROUP not in tool(CONSUMER_GROUPS, "--list").lines
    missing = tool(CONSUMER_GROUPS, "--describe", "--group", GROUP)
    assert f"GroupIdNotFoundException: Group {GROUP} not found." in missing.stdout + missing.stderr


def test_kafka_topics_delete(tool):
    tool(TOPICS, "--delete", "--topic", TOPIC)
    assert tool(TOPICS, "--list", "--exclude-internal").lines == [f"{TOPIC}-configs"]
