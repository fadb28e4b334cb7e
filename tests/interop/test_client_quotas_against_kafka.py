"""Client quotas with Kafka's own tool and real clients, on Ebb and on Apache Kafka 4.3.1 alike.

kafka-configs sets, describes and deletes quotas of users, clients, user+client pairs, defaults and
ips, and is refused a bad key, a value that is not a number and a fraction: each call's exit code and
printed lines are compared between the two brokers, played step by step (Kafka applies a change once
its metadata log reaches the broker: before each describe, Kafka's quotas are awaited until they are
Ebb's). Then a librdkafka producer and consumer, each under a byte-rate quota of its client id, run as
fast as they can: on both brokers their throughput after the first windows stays within a tolerance of
the quota (measured here: produced 202,667 B/s on both, consumed 128,000 B/s on both, for 200,000), and
the brokers report throttle times (librdkafka's throttle callback). Both brokers measure
over 3 windows of 1 s (quota.window.num=3), so that the burst a new client is allowed (num - 1 windows
of quota) passes in the test's first seconds.
"""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.messages import AlterClientQuotasRequest as Alter
from protocol.messages import DescribeClientQuotasRequest as Describe
from tests.broker.wire_client import WireClient
from tests.interop.conftest import TARGET
from tests.interop.test_tools_against_kafka import CONFIGS, normalise
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_node import KafkaNode
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(600)

# The consumer's group gets its partitions at once on both (the Kafka node's own default here)
OVERRIDES = {"quota.window.num": "3", "quota.window.size.seconds": "1", "group.initial.rebalance.delay.ms": "0"}
RATE = 200_000  # bytes/s for the held producer and consumer
RUN_S, WARMUP_S = 9.0, 3.0  # throughput is measured from WARMUP_S to RUN_S
# The tolerance around RATE. Over 3 windows Kafka holds a consumer to about 0.64 of its quota (a throttled
# fetch is answered empty and its bytes taken back, the throttle computed with them), Ebb the same.
LOW, HIGH = 0.5, 1.35


@pytest.fixture(scope="module")
def brokers(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("ebb"), OVERRIDES) as ebb, \
            KafkaNode(tmp_path_factory.mktemp("kafka"), f"{TARGET / 'lib'}/*", OVERRIDES) as kafka:
        yield {"ebb": ebb.bootstrap, "kafka": kafka.bootstrap}


def _port(bootstrap: str) -> int:
    return int(bootstrap.rsplit(":", 1)[1])


def _all_quotas(bootstrap: str) -> list:
    with WireClient(_port(bootstrap), timeout=30) as client:
        answer = client.send(Describe(components=[], strict=False), 1)
    return sorted((sorted((p.entity_type, p.entity_name or "") for p in e.entity),
                   sorted((v.key, v.value) for v in e.values)) for e in answer.entries)


_USER = ["--entity-type", "users", "--entity-name", "alice"]
_CLIENT = ["--entity-type", "clients", "--entity-name", "app"]
SESSION = [
    ("users alter", [*_USER, "--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048"]),
    ("users describe", [*_USER, "--describe"]),
    ("users default alter", ["--entity-type", "users", "--entity-default", "--alter", "--add-config",
                             "request_percentage=50"]),
    ("users default describe", ["--entity-type", "users", "--entity-default", "--describe"]),
    ("users describe all", ["--entity-type", "users", "--describe"]),
    ("clients alter", [*_CLIENT, "--alter", "--add-config", "producer_byte_rate=4096,controller_mutation_rate=2.5"]),
    ("clients describe", [*_CLIENT, "--describe"]),
    ("pair alter", [*_USER, *_CLIENT, "--alter", "--add-config", "consumer_byte_rate=8192"]),
    ("pair describe", [*_USER, *_CLIENT, "--describe"]),
    ("clients default alter", ["--entity-type", "clients", "--entity-default", "--alter", "--add-config",
                               "producer_byte_rate=100000"]),
    ("clients describe all", ["--entity-type", "clients", "--describe"]),
    ("bad key", [*_CLIENT, "--alter", "--add-config", "producer_byte_rat=1"]),
    ("not a number", [*_CLIENT, "--alter", "--add-config", "producer_byte_rate=fast"]),
    ("fraction", [*_CLIENT, "--alter", "--add-config", "producer_byte_rate=1.5"]),
    ("ips alter", ["--entity-type", "ips", "--entity-name", "10.0.0.1", "--alter", "--add-config",
                   "connection_creation_rate=10"]),
    ("ips describe", ["--entity-type", "ips", "--entity-name", "10.0.0.1", "--describe"]),
    ("users delete", [*_USER, "--alter", "--delete-config", "producer_byte_rate"]),
    ("users describe after delete", [*_USER, "--describe"]),
    ("clean up", [*_USER, "--alter", "--delete-config", "consumer_byte_rate"]),
    ("clean up pair", [*_USER, *_CLIENT, "--alter", "--delete-config", "consumer_byte_rate"]),
    ("clean up client", [*_CLIENT, "--alter", "--delete-config", "producer_byte_rate,controller_mutation_rate"]),
    ("clean up defaults", ["--entity-type", "users", "--entity-default", "--alter", "--delete-config",
                           "request_percentage"]),
    ("clean up client default", ["--entity-type", "clients", "--entity-default", "--alter", "--delete-config",
                                 "producer_byte_rate"]),
    ("clean up ip", ["--entity-type", "ips", "--entity-name", "10.0.0.1", "--alter", "--delete-config",
                     "connection_creation_rate"]),
    ("nothing left", ["--entity-type", "users", "--describe"]),
]


@pytest.fixture(scope="module")
def tool_sessions(java, brokers) -> dict[str, dict[str, tuple[int, list[str]]]]:
    answers: dict[str, dict[str, tuple[int, list[str]]]] = {"ebb": {}, "kafka": {}}
    for label, args in SESSION:
        for name in ("ebb", "kafka"):
            bootstrap = brokers[name]
            if name == "kafka" and "describe" in label or label == "nothing left":
                expected = _all_quotas(brokers["ebb"])
                wait_for(lambda b=bootstrap, e=expected: _all_quotas(b) == e, timeout_s=30,
                         what=f"{label}: Kafka's quotas as Ebb's")
            run = java.tool(bootstrap, CONFIGS, *args)
            answers[name][label] = (run.returncode, normalise(run.stdout + run.stderr, bootstrap))
    return answers


@pytest.mark.parametrize("label", [label for label, _ in SESSION])
def test_kafka_configs_prints_what_it_prints_against_kafka(tool_sessions, label):
    ours, theirs = tool_sessions["ebb"][label], tool_sessions["kafka"][label]
    assert ours == theirs, f"{label}:\nEbb:   {ours}\nKafka: {theirs}"


def _set_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    entry = Alter.EntryData(entity=[Alter.EntryData.EntityData(entity_type="client-id", entity_name=client_id)],
                            ops=[Alter.EntryData.OpData(key=key, value=value, remove=False)])
    with WireClient(_port(bootstrap), timeout=30) as client:
        [result] = client.send(Alter(entries=[entry], validate_only=False), 1).entries
    assert result.error_code == 0, result
    wait_for(lambda: [([("client-id", client_id)], [(key, value)])] == [
        (e, v) for e, v in _all_quotas(bootstrap) if e == [("client-id", client_id)]],
        timeout_s=30, what=f"the {key} quota of {client_id} in force")


def _rate(events: list[tuple[float, int]], start: float) -> float:
    """Bytes per second between WARMUP_S and RUN_S after `start`."""
    window = [size for at, size in events if WARMUP_S <= at - start <= RUN_S]
    return sum(window) / (RUN_S - WARMUP_S)


@pytest.mark.parametrize("name", ["ebb", "kafka"])
def test_a_producer_and_a_consumer_are_held_to_their_byte_rates(brokers, name):
    bootstrap = brokers[name]
    topic = "held"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    _set_quota(bootstrap, "held-producer", "producer_byte_rate", RATE)
    _set_quota(bootstrap, "held-consumer", "consumer_byte_rate", RATE)
    payload = os.urandom(1000)

    throttles: list[float] = []
    acked: list[tuple[float, int]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "held-producer", "linger.ms": 5,
                         "batch.size": 16384, "acks": 1, "throttle_cb": lambda e: throttles.append(e.throttle_time)})

    def delivered(error, message) -> None:
        if error is None:
            acked.append((time.monotonic(), len(message.value())))

    start = time.monotonic()
    while time.monotonic() - start < RUN_S:
        if len(producer) < 2000:
            producer.produce(topic, payload, on_delivery=delivered)
            producer.poll(0)
        else:
            producer.poll(0.01)
    producer.purge()
    producer.flush(10)
    produced = _rate(acked, start)
    assert LOW * RATE <= produced <= HIGH * RATE, f"{name}: produced {produced:.0f} B/s against a quota of {RATE}"
    assert throttles and max(throttles) > 0, f"{name}: no throttle time reported to the producer"

    filler = Producer({"bootstrap.servers": bootstrap, "client.id": "filler", "linger.ms": 5})
    for _ in range(int(RATE * RUN_S * 1.5 / len(payload))):
        filler.produce(topic, payload)
        filler.poll(0)
    assert filler.flush(30) == 0

    consumer_throttles: list[float] = []
    consumed: list[tuple[float, int]] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": "held-consumer", "group.id": f"held-{name}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "throttle_cb": lambda e: consumer_throttles.append(e.throttle_time)})
    consumer.subscribe([topic])
    try:
        wait_for(lambda: consumer.poll(0.2) is not None or None, timeout_s=30, what="the consumer's first record")
        start = time.monotonic()
        while time.monotonic() - start < RUN_S:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                consumed.append((time.monotonic(), len(message.value())))
    finally:
        consumer.close()
    read = _rate(consumed, start)
    print(f"{name}: produced {produced:.0f} B/s, consumed {read:.0f} B/s, longest throttles "
          f"{max(throttles):.3f} s and {max(consumer_throttles or [0]):.3f} s")
    assert LOW * RATE <= read <= HIGH * RATE, f"{name}: consumed {read:.0f} B/s against a quota of {RATE}"
    assert consumer_throttles and max(consumer_throttles) > 0, f"{name}: no throttle time reported to the consumer"
