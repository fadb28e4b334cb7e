"""A keyed workload for compaction tests (no tests here): updates, tombstones and a key set again after
its tombstone, written by confluent-kafka one batch a round, each round's timestamps 2 s after the
last so that `segment.ms=1000` rolls a segment per round without waiting. Used against Ebb alone and,
in tests/differential, against Kafka beside it."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

ROUNDS = 12
KEYS = 6
RECORDS = ROUNDS * KEYS
# What makes both brokers roll a segment per round and clean every closed one at once.
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01"}


def value_of(round_: int, key: int) -> bytes | None:
    if (round_, key) in ((6, 2), (9, 4)):
        return None  # tombstones; key 4 is written again in round 11
    return b"v%d-%d" % (round_, key)


def written() -> list[tuple[int, bytes, bytes | None]]:
    return [(r * KEYS + k, b"k%d" % k, value_of(r, k)) for r in range(ROUNDS) for k in range(KEYS)]


def after_cleaning(end: int) -> list[tuple[int, bytes, bytes | None]]:
    """Kafka's result of one round over [0, end): the latest record of each key below `end` (tombstones
    kept, inside delete.retention.ms), everything from `end` on."""
    records = written()
    latest = {key: offset for offset, key, _ in records if offset < end}
    return [(o, k, v) for o, k, v in records if o >= end or latest[k] == o]


def produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 50})
    start = int(time.time() * 1000) - 10 * 60 * 1000
    failures: list[KafkaError] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(error)

    for round_ in range(ROUNDS):
        for key in range(KEYS):
            producer.produce(topic, key=b"k%d" % key, value=value_of(round_, key), partition=0,
                             timestamp=start + round_ * 2000, on_delivery=delivered)
        assert producer.flush(30) == 0
    assert not failures, failures


def produce_keyless(bootstrap: str, topic: str) -> KafkaError:
    """The error a producer gets for a record without a key."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "retries": 0})
    errors: list[KafkaError] = []
    producer.produce(topic, value=b"no key", partition=0, on_delivery=lambda error, _m: errors.append(error))
    assert producer.flush(30) == 0
    return errors[0]


def consume(bootstrap: str, topic: str, end: int = RECORDS) -> list[tuple[int, bytes, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    found = []
    deadline = time.monotonic() + 60
    try:
        while (not found or found[-1][0] < end - 1) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            found.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return found
