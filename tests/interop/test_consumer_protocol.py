"""KIP-848's consumer group protocol (group.protocol=consumer) against Ebb: librdkafka (confluent-kafka)
consumers join through ConsumerGroupHeartbeat, share a topic's partitions, hand partitions over when a
second member joins (revocation before reassignment), commit with their member epoch, and
kafka-consumer-groups (kafka-tools 4.3.1) lists, describes and deletes the group as against Kafka; the
Java consumer (kafka-console-consumer) reads and commits with the consumer protocol. A classic consumer
(the default group.protocol) is unchanged by 68/69 being advertised; with group.version disabled
librdkafka's consumer stops with a fatal error. One broker.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.errors import ErrorCode
from protocol.messages import ConsumerGroupDescribeRequest, UpdateFeaturesRequest
from tests.broker.wire_client import WireClient

TOPIC = "kip848"
GROUP = "kip848-group"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
BROKER_OVERRIDES = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def topic(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        producer.produce(TOPIC, value=str(i).encode(), partition=i % 4)
    assert producer.flush(30) == 0
    return admin


def rows(lines: list[str]) -> list[list[str]]:
    """A table's rows after its header, split on whitespace."""
    return [line.split() for line in lines[1:] if line.strip()]


def _consumer(broker, client_id: str, **extra) -> Consumer:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                         "client.id": client_id, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         **extra})
    consumer.subscribe([TOPIC])
    return consumer


def _poll_until(consumers: list[Consumer], done, limit_s: float = 30) -> list:
    """Poll every consumer in turn until `done(messages)`: each poll waits on the broker, no sleeping."""
    messages: list = []
    deadline = time.monotonic() + limit_s
    while not done(messages) and time.monotonic() < deadline:
        for consumer in consumers:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                messages.append((consumer, message))
    return messages


@pytest.fixture(scope="module")
def tool(java, broker):
    def run(main: str, *args: str, expect: int = 0):
        result = java.tool(broker.bootstrap, main, *args)
        assert result.returncode == expect, f"exit {result.returncode}:\n{result.stdout}\n{result.stderr[-3000:]}"
        return result
    return run


def test_two_members_share_the_topic_and_commit(broker, topic, tool):
    first = _consumer(broker, "first")
    read = _poll_until([first], lambda got: len(got) >= 10)
    assert read, "the first member got no partitions"
    first.commit(asynchronous=False)
    second = _consumer(broker, "second")
    try:
        def balanced(_):
            return len(first.assignment()) == 2 and len(second.assignment()) == 2
        read += _poll_until([first, second], balanced)
        assert {(tp.topic, tp.partition) for tp in first.assignment()}.isdisjoint(
            {(tp.topic, tp.partition) for tp in second.assignment()})
        assert len(first.assignment()) == len(second.assignment()) == 2
        rest = _poll_until([first, second], lambda got: False, limit_s=3)
        total = {m.value() for _, m in read} | {m.value() for _, m in rest}
        assert len(total) == 40
        for consumer in (first, second):
            consumer.commit(asynchronous=False)
        committed = first.committed(first.assignment(), timeout=10)
        assert all(tp.offset == 10 for tp in committed)
        ids = {first.memberid(): "first", second.memberid(): "second"}
        held = {ids[m]: sorted(tp.partition for tp in c.assignment()) for m, c in
                ((first.memberid(), first), (second.memberid(), second))}
        described = rows(tool(CONSUMER_GROUPS, "--describe", "--group", GROUP).lines)
        assert sorted(row[:6] for row in described) == [[GROUP, TOPIC, str(p), "10", "10", "0"] for p in range(4)]
        assert {(int(row[2]), ids[row[6]], row[7], row[8]) for row in described} == {
            (p, name, "/127.0.0.1", name) for name, parts in held.items() for p in parts}
        members = rows(tool(CONSUMER_GROUPS, "--describe", "--group", GROUP, "--members", "--verbose").lines)
        # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT
        assert sorted((row[3], row[4], row[6], row[8]) for row in members) == [
            (name, "2", f"{TOPIC}:{','.join(map(str, held[name]))}", f"{TOPIC}:{','.join(map(str, held[name]))}")
            for name in ("first", "second")]
        assert {row[5] for row in members} == {row[7] for row in members}  # reconciled: epoch = target epoch
        state = rows(tool(CONSUMER_GROUPS, "--describe", "--group", GROUP, "--state").lines)
        assert state == [[GROUP, broker.bootstrap, "(1)", "uniform", "Stable", "2"]], state
        assert [GROUP, "Consumer"] in rows(tool(CONSUMER_GROUPS, "--list", "--type").lines)
    finally:
        second.close()
    first.close()
    gone = tool(CONSUMER_GROUPS, "--delete", "--group", GROUP)
    assert gone.lines == [f"Deletion of requested consumer groups ('{GROUP}') was successful."]
    missing = tool(CONSUMER_GROUPS, "--describe", "--group", GROUP)
    assert f"GroupIdNotFoundException: Group {GROUP} not found." in missing.stdout + missing.stderr


def test_the_java_consumer_reads_and_commits_with_the_consumer_protocol(broker, topic, tool):
    """kafka-console-consumer (the Java KafkaConsumer of kafka-clients 4.3.1) with group.protocol=consumer:
    it joins through ConsumerGroupHeartbeat, reads all 40 records, and its commits at close stick."""
    group = "kip848-java"
    read = tool(CONSOLE_CONSUMER, "--topic", TOPIC, "--group", group, "--from-beginning", "--max-messages", "40",
                "--timeout-ms", "30000", "--command-property", "group.protocol=consumer")
    assert sorted(read.lines, key=int) == [str(i) for i in range(40)]
    described = rows(tool(CONSUMER_GROUPS, "--describe", "--group", group, "--offsets").lines)
    assert sorted(row[:6] for row in described) == [[group, TOPIC, str(p), "10", "10", "0"] for p in range(4)]
    assert [group, "Consumer", "Empty"] in rows(tool(CONSUMER_GROUPS, "--list", "--type", "--state").lines)
    deleted = tool(CONSUMER_GROUPS, "--delete-offsets", "--group", group, "--topic", f"{TOPIC}:1")
    assert deleted.lines[0] == f"Request succeeded for deleting offsets from group {group}."
    assert rows(deleted.lines[1:]) == [[TOPIC, "1", "Successful"]]


def test_a_classic_consumer_is_unchanged(broker, topic, tool):
    """librdkafka's default group.protocol (classic) still joins with JoinGroup beside a KIP-848 group."""
    group = "kip848-classic"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "classic",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    try:
        assert len(_poll_until([consumer], lambda got: len(got) >= 40)) == 40
        state = rows(tool(CONSUMER_GROUPS, "--describe", "--group", group, "--state").lines)
        assert state == [[group, broker.bootstrap, "(1)", "range", "Stable", "1"]], state
        assert [group, "Classic"] in rows(tool(CONSUMER_GROUPS, "--list", "--type").lines)
    finally:
        consumer.close()


def _described(broker, group: str) -> tuple[int, list[tuple[str, int]]]:
    """ConsumerGroupDescribe: the group epoch and its members' (id, epoch)."""
    with WireClient(broker.port) as client:
        (found,) = client.send(ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                               0).groups
    return found.group_epoch, sorted((m.member_id, m.member_epoch) for m in found.members)


def test_members_carry_on_across_a_broker_restart(broker, topic):
    """The group is in __consumer_offsets (docs/features.md): after a restart the coordinator rebuilds it,
    and librdkafka's member heartbeats on with its id and epoch (no rejoin, no rebalance) and goes on
    from where it was."""
    consumer = _consumer(broker, "restarted", **{"group.id": "kip848-restart"})
    rebalances: list[str] = []
    consumer.subscribe([TOPIC], on_assign=lambda c, parts: rebalances.append("assign"),
                       on_revoke=lambda c, parts: rebalances.append("revoke"),
                       on_lost=lambda c, parts: rebalances.append("lost"))
    try:
        assert len(_poll_until([consumer], lambda got: len(got) >= 40)) == 40
        seen = len(rebalances)
        consumer.commit(asynchronous=False)
        before = _described(broker, "kip848-restart")
        assert len(before[1]) == 1
        broker.restart()
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for p in range(4):
            producer.produce(TOPIC, value=f"after-{p}".encode(), partition=p)
        assert producer.flush(30) == 0
        after = _poll_until([consumer], lambda got: len(got) >= 4, limit_s=60)
        assert sorted(m.value() for _, m in after) == [f"after-{p}".encode() for p in range(4)]
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=10)
        assert sorted(tp.offset for tp in committed) == [11, 11, 11, 11]
        assert _described(broker, "kip848-restart") == before  # the same member, at the same epochs
        assert rebalances[seen:] == []  # nothing lost, revoked or assigned again
    finally:
        consumer.close()


def _group_version(broker, level: int, upgrade_type: int) -> None:
    with WireClient(broker.port) as client:
        answer = client.send(UpdateFeaturesRequest(timeout_ms=30_000, feature_updates=[
            UpdateFeaturesRequest.FeatureUpdateKey(feature="group.version", max_version_level=level,
                                                   upgrade_type=upgrade_type)]), 2)
    assert (answer.error_code, answer.error_message) == (ErrorCode.NONE, None)


def test_group_version_0_stops_a_librdkafka_consumer_as_kafka_would(broker, topic):
    """`kafka-features disable --feature group.version`: the heartbeat is answered UNSUPPORTED_VERSION (as
    Kafka 4.3.1 answers it, tests/differential/test_features_against_kafka.py) and librdkafka's consumer
    stops with a fatal error; a classic consumer is not concerned."""
    _group_version(broker, 0, 2)
    consumer = _consumer(broker, "gv0", **{"group.id": "kip848-gv0"})
    try:
        deadline, error = time.monotonic() + 30, None
        while error is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is not None:
                error = message.error()
        assert error is not None and error.code() == KafkaError._FATAL, error
        assert "API version not supported" in error.str() and "ConsumerGroupHeartbeat" in error.str(), error.str()
    finally:
        consumer.close()
        _group_version(broker, 1, 1)
