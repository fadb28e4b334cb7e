"""Smoke test of the data path with unmodified clients: kafka-python 3 (idempotent acks=all producer,
consumer with assign(), offsets) and confluent-kafka (idempotent producer, consumer on Fetch v16 with
topic ids, DeleteRecords through the admin client). The full per-client flows live in tests/conformance."""

import time

import pytest

from tests.broker.data_wire import WireClient, create_topic
from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("clients")) as process:
        with WireClient(process.port) as c:
            create_topic(c, "kp", 3)
            create_topic(c, "ck", 3)
        yield process


def test_kafka_python(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    sent = [producer.send("kp", key=b"%d" % i, value=b"kp-%d" % i) for i in range(100)]
    producer.flush(30)
    metadata = [f.get(timeout=30) for f in sent]
    producer.close()
    partitions = [TopicPartition("kp", p) for p in range(3)]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    consumer.assign(partitions)
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 100 and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=500).values():
            got += [m.value for m in messages]
    ends = consumer.end_offsets(partitions)
    starts = consumer.beginning_offsets(partitions)
    consumer.close()
    assert sorted(got) == sorted(b"kp-%d" % i for i in range(100))
    assert sum(ends.values()) == 100 and set(starts.values()) == {0}
    assert {m.partition: 0 for m in metadata} and max(m.offset for m in metadata) == max(ends.values()) - 1


def test_confluent_kafka(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors = []
    for i in range(100):
        producer.produce("ck", key=b"%d" % i, value=b"ck-%d" % i, on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(30) == 0 and not errors
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "smoke", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("ck", p, 0) for p in range(3)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 100 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(message.value())
    assert sorted(got) == sorted(b"ck-%d" % i for i in range(100))
    low, high = consumer.get_watermark_offsets(TopicPartition("ck", 0), timeout=10)
    assert low == 0 and high > 2
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.delete_records([TopicPartition("ck", 0, 2)]).values()
    assert future.result(30).low_watermark == 2
    low, _ = consumer.get_watermark_offsets(TopicPartition("ck", 0), timeout=10, cached=False)
    consumer.close()
    assert low == 2
