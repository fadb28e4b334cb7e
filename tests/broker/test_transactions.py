"""Transactions against a real Ebb process: librdkafka's transactional producer (confluent-kafka) and
read_committed consumers, and the wire-level steps (InitProducerId, AddPartitionsToTxn, Produce,
EndTxn) around Fetch and ListOffsets at both isolation levels, across kill -9 and fencing."""

from __future__ import annotations

import signal
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from protocol.enums import IsolationLevel, SpecialTimestamp
from protocol.errors import ErrorCode
from protocol.messages import AddPartitionsToTxnRequest, EndTxnRequest
from protocol.records import build_batch
from tests.broker.data_wire import WireClient, create_topic, fetch, init_producer_id, list_offsets, produce, values

COMMITTED = IsolationLevel.READ_COMMITTED


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


def _consume(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}-{topic}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        extra = consumer.poll(0.5)  # nothing more: no aborted record turns up late
        if extra is not None and extra.error() is None:
            got.append(extra.value())
    finally:
        consumer.close()
    return got


def test_read_committed_consumers_see_committed_transactions_only(client, broker):
    topic = "txn-visibility"
    create_topic(client, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "librdkafka-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, b"committed-%d" % i)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, b"aborted-%d" % i)
    producer.flush(30)  # on the broker before the abort, so there is something to hide
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"last")
    producer.commit_transaction(30)

    committed = [b"committed-0", b"committed-1", b"committed-2", b"last"]
    assert _consume(broker.bootstrap, topic, "read_committed", len(committed)) == committed
    everything = _consume(broker.bootstrap, topic, "read_uncommitted", 7)
    assert everything == committed[:3] + [b"aborted-0", b"aborted-1", b"aborted-2", b"last"]


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(client, broker):
    topic = "txn-fencing"
    create_topic(client, topic)
    old = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "fenced-txn"})
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(topic, b"zombie")
    old.flush(30)
    new = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "fenced-txn"})
    new.init_transactions(30)  # retries CONCURRENT_TRANSACTIONS while the open one is aborted
    with pytest.raises(KafkaException) as fenced:
        old.commit_transaction(30)
    assert fenced.value.args[0].fatal()
    new.begin_transaction()
    new.produce(topic, b"survivor")
    new.commit_transaction(30)
    assert _consume(broker.bootstrap, topic, "read_committed", 1) == [b"survivor"]


def _add_partitions(client: WireClient, transactional_id: str, ids, topic: str, version: int = 3):
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=ids.producer_id,
        v3_and_below_producer_epoch=ids.producer_epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0])])
    result = client.request(request, version).results_by_topic_v3_and_below[0].results_by_partition[0]
    return result.partition_error_code


def _end_txn(client: WireClient, transactional_id: str, ids, commit: bool, version: int = 3) -> int:
    request = EndTxnRequest(transactional_id=transactional_id, producer_id=ids.producer_id,
                            producer_epoch=ids.producer_epoch, committed=commit)
    return client.request(request, version).error_code


def _txn_batch(ids, sequence: int, *values_: bytes) -> bytes:
    return build_batch([(None, v, [], 1) for v in values_], producer_id=ids.producer_id,
                       producer_epoch=ids.producer_epoch, base_sequence=sequence, is_transactional=True)


def _latest(client: WireClient, topic: str, isolation_level: int) -> int:
    return list_offsets(client, topic, 0, SpecialTimestamp.LATEST, isolation_level=isolation_level).offset


def test_an_open_transaction_holds_the_lso_across_kill_9_and_its_abort_is_indexed(broker):
    with WireClient(broker.port) as client:
        topic = "txn-restart"
        create_topic(client, topic)
        ids = init_producer_id(client, transactional_id="wire-txn")
        assert produce(client, topic, 0, build_batch([(None, b"before", [], 1)])).error_code == ErrorCode.NONE
        assert _add_partitions(client, "wire-txn", ids, topic) == ErrorCode.NONE
        assert produce(client, topic, 0, _txn_batch(ids, 0, b"t0", b"t1"), transactional_id="wire-txn").error_code == 0
        assert (_latest(client, topic, 0), _latest(client, topic, COMMITTED)) == (3, 1)
        assert values(fetch(client, topic, 0, 0, isolation_level=COMMITTED)) == [b"before"]
    broker.restart(signal.SIGKILL)
    with WireClient(broker.port) as client:
        assert (_latest(client, topic, 0), _latest(client, topic, COMMITTED)) == (3, 1)
        assert _end_txn(client, "wire-txn", ids, commit=False) == ErrorCode.NONE
        deadline = time.monotonic() + 10  # the marker follows the answer
        while _latest(client, topic, COMMITTED) != 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (_latest(client, topic, 0), _latest(client, topic, COMMITTED)) == (4, 4)
        answer = fetch(client, topic, 0, 0, isolation_level=COMMITTED)
        assert [(a.producer_id, a.first_offset) for a in answer.aborted_transactions] == [(ids.producer_id, 1)]
        assert fetch(client, topic, 0, 0).aborted_transactions is None  # READ_UNCOMMITTED: null
        assert _end_txn(client, "wire-txn", ids, commit=False) == ErrorCode.NONE  # a retry of a finished abort
        assert _end_txn(client, "wire-txn", ids, commit=True) == ErrorCode.INVALID_TXN_STATE
    broker.restart(signal.SIGKILL)
    with WireClient(broker.port) as client:
        answer = fetch(client, topic, 0, 0, isolation_level=COMMITTED)
        assert [(a.producer_id, a.first_offset) for a in answer.aborted_transactions] == [(ids.producer_id, 1)]
        assert _latest(client, topic, COMMITTED) == 4


def test_coordinator_errors_on_the_wire(client):
    topic = "txn-errors"
    create_topic(client, topic)
    ids = init_producer_id(client, transactional_id="errors-txn")
    stranger = type(ids)(producer_id=ids.producer_id + 100, producer_epoch=0)
    assert _add_partitions(client, "never-initialised", ids, topic) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert _add_partitions(client, "errors-txn", stranger, topic) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert _end_txn(client, "errors-txn", ids, commit=True) == ErrorCode.INVALID_TXN_STATE  # nothing open
    newer = init_producer_id(client, transactional_id="errors-txn")  # bumps the epoch: `ids` is fenced
    assert _add_partitions(client, "errors-txn", ids, topic) == ErrorCode.PRODUCER_FENCED
    assert _add_partitions(client, "errors-txn", ids, topic, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _end_txn(client, "errors-txn", ids, commit=False) == ErrorCode.PRODUCER_FENCED
    assert _add_partitions(client, "errors-txn", newer, "no-such-topic") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _end_txn(client, "", newer, commit=True) == ErrorCode.INVALID_REQUEST


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(client):
    topic = "txn-timeout"
    create_topic(client, topic)
    ids = init_producer_id(client, transactional_id="slow-txn", timeout_ms=300)
    assert _add_partitions(client, "slow-txn", ids, topic) == ErrorCode.NONE
    assert produce(client, topic, 0, _txn_batch(ids, 0, b"late"), transactional_id="slow-txn").error_code == 0
    assert _latest(client, topic, COMMITTED) == 0
    deadline = time.monotonic() + 10
    while _latest(client, topic, COMMITTED) != 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _latest(client, topic, COMMITTED) == 2  # aborted: the marker at 1
    assert _end_txn(client, "slow-txn", ids, commit=True) == ErrorCode.PRODUCER_FENCED
    assert fetch(client, topic, 0, 0, isolation_level=COMMITTED).aborted_transactions[0].first_offset == 0
