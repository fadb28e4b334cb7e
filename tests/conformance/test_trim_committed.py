"""Trimming committed records (`retention.committed.groups`) driven by unmodified clients: their
consumer groups commit as usual and the broker drops what every group has consumed.

librdkafka: a topic created by its AdminClient with the config naming one group; the group reads
and commits everything; the earliest offset moves to the end; a new group starting at the earliest
offset sees only records produced afterwards.
kafka-python: two named groups read at different paces; nothing goes until both have committed,
then the earliest offset follows the slower one.
"""

from __future__ import annotations

import uuid

import pytest

from tests.conformance.scenario import RDKAFKA_LOG
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(90)

RECORDS = 40
WAIT_S = 30.0


def test_librdkafka_group_commits_trim_the_topic(broker):
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"trim-rd-{uuid.uuid4().hex[:8]}", "pipeline"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA_LOG})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={"retention.committed.groups": group})])
    futures[topic].result(timeout=WAIT_S)

    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA_LOG})
    for i in range(RECORDS):
        producer.produce(topic, value=b"old-%d" % i, partition=0)
    assert producer.flush(WAIT_S) == 0

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "logger": RDKAFKA_LOG})
    consumer.subscribe([topic])
    seen = []
    wait_for(lambda: _poll_into(consumer, seen) >= RECORDS, WAIT_S, what="the group reading every record")
    consumer.commit(asynchronous=False)
    partition = confluent_kafka.TopicPartition(topic, 0)
    wait_for(lambda: consumer.get_watermark_offsets(partition, timeout=5, cached=False)[0] == RECORDS,
               WAIT_S, what="the earliest offset moving to what the group committed")
    consumer.close()

    for i in range(3):
        producer.produce(topic, value=b"new-%d" % i, partition=0)
    assert producer.flush(WAIT_S) == 0
    newcomer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": f"late-{uuid.uuid4().hex[:6]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "logger": RDKAFKA_LOG})
    newcomer.subscribe([topic])
    late = []
    wait_for(lambda: _poll_into(newcomer, late) >= 3, WAIT_S, what="a new group reading what is left")
    newcomer.close()
    assert [m.value() for m in late] == [b"new-0", b"new-1", b"new-2"]
    assert [m.offset() for m in late] == [RECORDS, RECORDS + 1, RECORDS + 2]


def _poll_into(consumer, found: list) -> int:
    message = consumer.poll(0.5)
    if message is not None and message.error() is None:
        found.append(message)
    return len(found)


def test_kafka_python_slowest_group_sets_the_start(broker):
    import kafka
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.structs import OffsetAndMetadata, TopicPartition

    topic = f"trim-kp-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.committed.groups": "fast,slow"})])
    admin.close()
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(RECORDS):
        producer.send(topic, value=b"v%d" % i, partition=0)
    producer.flush(WAIT_S)
    producer.close()

    tp = TopicPartition(topic, 0)
    fast = _consumer(kafka, broker, "fast", tp)
    slow = _consumer(kafka, broker, "slow", tp)
    _read(fast, RECORDS)
    fast.commit()
    assert fast.beginning_offsets([tp])[tp] == 0  # the slow group has not committed
    _read(slow, 15)
    slow.commit({tp: OffsetAndMetadata(15, "", -1)})
    wait_for(lambda: fast.beginning_offsets([tp])[tp] == 15, WAIT_S, what="the start following the slow group")
    _read(slow, RECORDS - 15)
    slow.commit()
    wait_for(lambda: fast.beginning_offsets([tp])[tp] == RECORDS, WAIT_S, what="the start at the end")
    fast.close()
    slow.close()


def _consumer(kafka, broker, group: str, tp):
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                                   enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    return consumer


def _read(consumer, count: int) -> None:
    got = [0]

    def more() -> bool:
        batches = consumer.poll(timeout_ms=500, max_records=count - got[0])
        got[0] += sum(len(records) for records in batches.values())
        return got[0] >= count

    wait_for(more, WAIT_S, interval_s=0, what=f"reading {count} records")
