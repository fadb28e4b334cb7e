"""A rolling upgrade of a consumer group from the classic protocol to KIP-848's and back, with librdkafka
(confluent-kafka) consumers against one Ebb broker, as Kafka 4.3.1 serves it by
group.consumer.migration.policy=bidirectional: two classic members; one restarted with
group.protocol=consumer (the group becomes a consumer group with a classic member inside); the other
restarted the same way; then back: one restarted classic (a classic member in the consumer group), the
last KIP-848 member restarted classic (the group turns classic again). Records produced at each step are
consumed once each, with synchronous commits, across every restart; the group's type is checked at each
step with ListGroups, and kafka-consumer-groups (kafka-tools 4.3.1) describes the mixed group's members.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

TOPIC = "migrating"
GROUP = "migrating-group"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PARTITIONS = 4
BROKER_OVERRIDES = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
                    "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def admin(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    return admin


def _consumer(broker, name: str, protocol: str) -> Consumer:
    config = {"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "client.id": name,
              "auto.offset.reset": "earliest", "enable.auto.commit": False, "group.protocol": protocol}
    if protocol == "classic":  # KIP-848 members take these from the broker
        config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer = Consumer(config)
    consumer.subscribe([TOPIC])
    return consumer


class Run:
    def __init__(self, broker, admin) -> None:
        self.producer = Producer({"bootstrap.servers": broker.bootstrap})
        self.admin = admin
        self.produced: list[str] = []
        self.consumed: list[str] = []
        self.failed_commits: list[str] = []

    def produce(self, step: str, count: int = 40) -> None:
        for i in range(count):
            value = f"{step}-{i}"
            self.producer.produce(TOPIC, value=value.encode(), partition=i % PARTITIONS)
            self.produced.append(value)
        assert self.producer.flush(30) == 0

    def settle(self, consumers: list[Consumer], limit_s: float = 60) -> None:
        """Poll until the members hold every partition between them, each once, for a few polls in a row."""
        quiet, deadline = 0, time.monotonic() + limit_s
        while quiet < 5 and time.monotonic() < deadline:
            for consumer in consumers:
                self._take(consumer, consumer.poll(0.2))
            held = sorted(tp.partition for c in consumers for tp in c.assignment())
            quiet = quiet + 1 if held == list(range(PARTITIONS)) else 0
        assert quiet >= 5, f"the group did not settle: {[[tp.partition for tp in c.assignment()] for c in consumers]}"

    def drain(self, consumers: list[Consumer], limit_s: float = 60) -> None:
        """Poll until every record produced so far is consumed (each poll waits on the broker)."""
        deadline = time.monotonic() + limit_s
        while set(self.consumed) != set(self.produced) and time.monotonic() < deadline:
            for consumer in consumers:
                self._take(consumer, consumer.poll(0.2))
        missing = sorted(set(self.produced) - set(self.consumed))
        assert not missing, f"{len(missing)} records never consumed: {missing[:10]}"

    def _take(self, consumer: Consumer, message) -> None:
        if message is None or message.error() is not None:
            return
        self.consumed.append(message.value().decode())
        try:
            consumer.commit(message=message, asynchronous=False)
        except KafkaException as exc:
            self.failed_commits.append(f"{message.value().decode()}: {exc}")

    def group_type(self) -> ConsumerGroupType:
        listed = self.admin.list_consumer_groups().result(30)
        [found] = [g for g in listed.valid if g.group_id == GROUP]
        return found.type


def test_rolling_upgrade_to_the_consumer_protocol_and_back(broker, admin, java):
    run = Run(broker, admin)
    a, b = _consumer(broker, "a-classic", "classic"), _consumer(broker, "b-classic", "classic")
    members = [a, b]
    steps = [("a", "consumer", ConsumerGroupType.CONSUMER), ("b", "consumer", ConsumerGroupType.CONSUMER),
             ("a", "classic", ConsumerGroupType.CONSUMER), ("b", "classic", ConsumerGroupType.CLASSIC)]
    try:
        run.settle(members)
        run.produce("classic")
        run.drain(members)
        assert run.group_type() == ConsumerGroupType.CLASSIC
        for which, protocol, group_type in steps:
            index = 0 if which == "a" else 1
            members[index].close()  # leaves the group; its commits are in
            members[index] = _consumer(broker, f"{which}-{protocol}", protocol)
            run.settle(members)
            assert run.group_type() == group_type, f"after {which} restarted with {protocol}"
            if (which, protocol) == ("a", "consumer"):  # one member of each protocol
                described = java.tool(broker.bootstrap, CONSUMER_GROUPS, "--describe", "--group", GROUP,
                                      "--members")
                assert described.returncode == 0, described.stderr[-2000:]
                # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS
                shown = [line.split() for line in described.stdout.splitlines() if line.startswith(GROUP)]
                assert sorted((row[3], row[4]) for row in shown) == [("a-consumer", "2"), ("b-classic", "2")]
            run.produce(f"{which}-{protocol}")
            run.drain(members)
    finally:
        for consumer in members:
            consumer.close()
    duplicates = sorted({v for v in run.consumed if run.consumed.count(v) > 1})
    assert not duplicates, f"consumed twice: {duplicates[:10]}; failed commits: {run.failed_commits[:5]}"
    assert sorted(run.consumed) == sorted(run.produced)
