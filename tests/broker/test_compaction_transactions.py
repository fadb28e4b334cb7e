"""Compaction of transactional data in a real broker process: librdkafka's transactional producer writes
committed and aborted values to a compacted topic, and TxnOffsetCommit commits and aborts to
`__consumer_offsets`; once the cleaner's checkpoint says a round covered them, a read_committed consumer
sees exactly the latest committed value of each key and no aborted one, and the group its committed
offset, before and after a restart."""

from __future__ import annotations

import signal
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.broker.data_wire import WireClient, create_topic
from tests.broker.test_compaction import cleaned_up_to
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for

OVERRIDES = {"log.cleaner.backoff.ms": "50"}
KEYS = [b"k0", b"k1", b"k2", b"k3"]


def _read_committed(bootstrap: str, topic: str, last_key: bytes) -> list[tuple[int, bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    found: list[tuple[int, bytes, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while (not found or found[-1][1] != last_key) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                found.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return found


def test_read_committed_sees_the_latest_committed_value_of_each_key_after_cleaning(tmp_path) -> None:
    topic = "txn-compacted"
    with BrokerProcess(tmp_path, OVERRIDES) as broker:
        with WireClient(broker.port) as client:
            create_topic(client, topic, 1, {"cleanup.policy": "compact", "segment.ms": "1000",
                                            "min.cleanable.dirty.ratio": "0.01"})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "compacted-writer",
                             "linger.ms": 0})
        producer.init_transactions(30)
        start = int(time.time() * 1000)
        for round_ in range(6):  # record timestamps 2 s apart: each round rolls a segment (segment.ms)
            stamp = start + round_ * 2000
            producer.begin_transaction()
            for key in KEYS:
                producer.produce(topic, key=key, value=b"committed-%d" % round_, partition=0, timestamp=stamp)
            producer.commit_transaction(30)
            producer.begin_transaction()
            for key in (KEYS[0], KEYS[1], b"only-aborted"):  # would shadow the commit just made
                producer.produce(topic, key=key, value=b"aborted-%d" % round_, partition=0, timestamp=stamp + 1)
            producer.flush(30)  # on the broker before the abort
            producer.abort_transaction(30)
        delivered: list[int] = []
        producer.begin_transaction()  # rolls the segment holding the last round: the cleaner's bound
        producer.produce(topic, key=b"end", value=b"end", partition=0, timestamp=start + 20_000,
                         on_delivery=lambda _e, m: delivered.append(m.offset()))
        producer.commit_transaction(30)
        end = delivered[0]
        wait_for(lambda: (cleaned_up_to(broker, topic) or 0) >= end, what="a round up to the last transaction")

        expected = {key: b"committed-5" for key in KEYS} | {b"end": b"end"}
        for _ in range(2):  # before and after a restart
            found = _read_committed(broker.bootstrap, topic, b"end")
            assert {key: value for _, key, value in found} == expected
            assert not [value for _, _, value in found if value.startswith(b"aborted")]
            assert len(found) == len(expected)  # one record per key: the older commits were cleaned
            broker.restart()


def test_consumer_offsets_keeps_the_committed_offset_after_txn_commits_aborts_and_cleaning(tmp_path) -> None:
    overrides = {**OVERRIDES, "log.roll.ms": "1", "offsets.topic.num.partitions": "1",
                 "log.cleaner.min.cleanable.ratio": "0.01"}
    with BrokerProcess(tmp_path, overrides) as broker:
        with WireClient(broker.port) as client:
            create_topic(client, "read", 2)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "txn-readers",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("read", 0, 0)])
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "offsets-writer"})
        producer.init_transactions(30)
        for offset in range(1, 31):  # every third one aborted, the last one too
            producer.begin_transaction()
            producer.send_offsets_to_transaction([TopicPartition("read", 0, offset)],
                                                 consumer.consumer_group_metadata(), 30)
            if offset % 3:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        producer.begin_transaction()  # another key after the last abort, so that a round reaches the abort
        producer.send_offsets_to_transaction([TopicPartition("read", 1, 1)], consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        consumer.close()
        # 31 transactions of two offsets each: a round up to the last one has passed the last abort
        wait_for(lambda: (cleaned_up_to(broker, "__consumer_offsets") or 0) >= 60, what="__consumer_offsets cleaned")
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                broker.restart(sig)  # the replay reads the cleaned log
            reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "txn-readers"})
            try:
                assert reader.committed([TopicPartition("read", 0)], timeout=30)[0].offset == 29
            finally:
                reader.close()
