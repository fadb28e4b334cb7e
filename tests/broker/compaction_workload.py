"""A keyed workload for compaction tests (no tests here): updates, tombstones and a key set again after
its tombstone, written by confluent-kafka one batch a round, each round's timestamps 2 s after the
last so that `segment.ms=1000` rolls a segment per round without waiting. Used against Ebb alone and,
in tests/differential, against Kafka beside it."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

ROUNDS = 12
# What makes both brokers roll a segment per round and clean every closed one at once.
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01"}


def round_records(round_: int) -> list[tuple[bytes, bytes | None]]:
    """k0, k1, k5 updated every round; k2 tombstoned in round 6 and never written again; k3 written in
    rounds 0-3 only; k4 tombstoned in round 9 and written again in round 11; k6 written once."""
    pairs: list[tuple[bytes, bytes | None]] = []
    for key in range(6):
        if (key == 2 and round_ > 6) or (key == 3 and round_ > 3) or (key == 4 and round_ == 10):
            continue
        tombstone = (key, round_) in ((2, 6), (4, 9))
        pairs.append((b"k%d" % key, None if tombstone else b"v%d-%d" % (round_, key)))
    if round_ == 0:
        pairs.append((b"k6", b"once"))
    return pairs


def written() -> list[tuple[int, bytes, bytes | None]]:
    pairs = [pair for round_ in range(ROUNDS) for pair in round_records(round_)]
    return [(offset, key, value) for offset, (key, value) in enumerate(pairs)]


RECORDS = len(written())
ACTIVE_BASE = RECORDS - len(round_records(ROUNDS - 1))  # the last round's batch rolled the active segment


def after_cleaning(end: int) -> list[tuple[int, bytes, bytes | None]]:
    """Kafka's result of one round over [0, end): the latest record of each key below `end` (tombstones
    kept, inside delete.retention.ms), everything from `end` on."""
    records = written()
    latest = {key: offset for offset, key, _ in records if offset < end}
    return [(o, k, v) for o, k, v in records if o >= end or latest[k] == o]


def produce(bootstrap: str, topic: str, start_ms: int | None = None) -> None:
    """The workload; round r's records carry timestamp `start_ms` + 2000 r (default: ten minutes ago)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 50})
    start = int(time.time() * 1000) - 10 * 60 * 1000 if start_ms is None else start_ms
    failures: list[KafkaError] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(error)

    for round_ in range(ROUNDS):
        for key, value in round_records(round_):
            producer.produce(topic, key=key, value=value, partition=0, timestamp=start + round_ * 2000,
                             on_delivery=delivered)
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
