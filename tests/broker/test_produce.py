"""Produce and InitProducerId against a real broker process: acks, validation in Kafka's order and with
Kafka's codes, LogAppendTime, and idempotent producers (dedupe, sequence and epoch checks, restarts)."""

import signal
import struct

import pytest

from protocol import framing
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest
from protocol.records import Compression, TimestampType, build_batch, iter_batches
from tests.broker.data_wire import (
    WireClient,
    batch,
    create_topic,
    ensure_internal_topic,
    fetch,
    init_producer_id,
    list_offsets,
    produce,
    produce_request,
    records,
    values,
)
from tests.support.broker_process import BrokerProcess

_topics = iter(range(10_000))


def new_topic(client, partitions: int = 1, configs=None) -> str:
    name = f"produce-{next(_topics)}"
    create_topic(client, name, partitions, configs)
    return name


def end_offset(client, topic, partition=0) -> int:
    return list_offsets(client, topic, partition, -1).offset


@pytest.mark.parametrize("version", range(3, 13))
def test_every_served_version_appends(client, version):
    topic = new_topic(client)
    first = produce(client, topic, 0, batch([b"a", b"b"]), version=version)
    second = produce(client, topic, 0, batch([b"c"]), version=version)
    assert (first.error_code, first.base_offset, second.base_offset) == (0, 0, 2)
    assert first.log_append_time_ms == -1
    assert second.log_start_offset == (0 if version >= 5 else -1)
    assert values(fetch(client, topic, 0, 0)) == [b"a", b"b", b"c"]


def test_produce_is_advertised_from_v0_for_librdkafka(client):
    assert client.versions()[0] == (0, 12)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_advertised_but_refused_versions_close_the_connection(broker, version):
    frame = bytearray(framing.encode_request(produce_request("t", 0, batch([b"x"])), 3, 1, "c"))
    frame[6:8] = struct.pack(">h", version)  # Kafka 4 advertises v0-2 but refuses them, as we do
    with WireClient(broker.port) as c:
        c.sock.sendall(frame)
        assert c.sock.recv(1) == b""


def test_acks_minus_one_answers_once_replicated(client):
    topic = new_topic(client)
    reply = produce(client, topic, 0, batch([b"x"]), acks=-1)
    assert (reply.error_code, reply.base_offset) == (0, 0)


def test_acks_minus_one_needs_min_insync_replicas(client):
    """One broker is one in-sync replica: min.insync.replicas=2 refuses acks=-1 (before anything is
    written), while acks=1 needs no quorum."""
    topic = new_topic(client, configs={"min.insync.replicas": "2"})
    assert produce(client, topic, 0, batch([b"x"]), acks=-1).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert list_offsets(client, topic, 0, -1).offset == 0
    assert produce(client, topic, 0, batch([b"x"]), acks=1).error_code == ErrorCode.NONE


def test_acks_zero_sends_no_response_but_appends(client):
    topic = new_topic(client)
    client.submit(produce_request(topic, 0, batch([b"fire", b"forget"]), acks=0), 9)
    # The next answer on the connection is for the next request: nothing came back for acks=0.
    correlation_id = client.submit(ApiVersionsRequest(), 0)
    client.receive(18, 0, correlation_id)
    assert values(fetch(client, topic, 0, 0)) == [b"fire", b"forget"]


def test_failed_acks_zero_produce_closes_the_connection(broker):
    with WireClient(broker.port) as c:
        c.submit(produce_request("no-such-topic", 0, batch([b"lost"]), acks=0), 9)
        assert c.sock.recv(1) == b""  # no response possible, so the broker closes the connection


def test_invalid_acks(client):
    topic = new_topic(client)
    reply = produce(client, topic, 0, batch([b"x"]), acks=2)
    assert reply.error_code == ErrorCode.INVALID_REQUIRED_ACKS and reply.base_offset == -1
    assert end_offset(client, topic) == 0


def test_unknown_topic_and_partition_are_not_created(client):
    topic = new_topic(client)
    assert produce(client, "no-such-topic", 0, batch([b"x"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce(client, topic, 5, batch([b"x"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert list_offsets(client, "no-such-topic", 0, -1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _legacy_message_set(magic: int) -> bytes:
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", 0) if magic else b"") + struct.pack(">ii", -1, 1) + b"v"
    message = struct.pack(">I", 0) + body
    return struct.pack(">qi", 0, len(message)) + message


@pytest.mark.parametrize("data, code", [
    (None, ErrorCode.INVALID_RECORD),
    (b"", ErrorCode.INVALID_RECORD),
    (batch([b"a"]) + batch([b"b"]), ErrorCode.INVALID_RECORD),    # exactly one batch per partition
    (batch([b"a"])[:-3], ErrorCode.INVALID_RECORD),               # no complete batch
    (_legacy_message_set(0), ErrorCode.INVALID_RECORD),           # magic 0: INVALID_RECORD for v3+, as Kafka
    (_legacy_message_set(1), ErrorCode.INVALID_RECORD),
    # a transactional batch in a request without a transactional id: refused whole, as Kafka's KafkaApis
    (build_batch([(None, b"t", [], 1)], is_transactional=True, producer_id=1, producer_epoch=0, base_sequence=0),
     ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
], ids=["null", "empty", "two-batches", "partial", "magic0", "magic1", "transactional"])
def test_record_shape_is_checked(client, data, code):
    topic = new_topic(client)
    reply = produce(client, topic, 0, data)
    assert reply.error_code == code and reply.base_offset == -1
    assert reply.error_message
    assert end_offset(client, topic) == 0


def test_a_clients_control_batch_is_refused_by_the_log(client):
    """As Kafka's LogValidator refuses it: INVALID_RECORD with the log start offset and no message (an
    exception Kafka's append path does not name)."""
    topic = new_topic(client)
    reply = produce(client, topic, 0, build_batch([(None, b"c", [], 1)], is_control=True))
    assert (reply.error_code, reply.base_offset, reply.log_start_offset) == (ErrorCode.INVALID_RECORD, -1, 0)
    assert reply.error_message is None
    assert end_offset(client, topic) == 0


def test_corrupt_batch(client):
    topic = new_topic(client)
    data = bytearray(batch([b"payload"]))
    data[-1] ^= 0xFF
    assert produce(client, topic, 0, bytes(data)).error_code == ErrorCode.CORRUPT_MESSAGE
    assert end_offset(client, topic) == 0


def test_message_too_large_for_the_topic(client):
    topic = new_topic(client, configs={"max.message.bytes": "1000"})
    assert produce(client, topic, 0, batch([b"x" * 2000])).error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert produce(client, topic, 0, batch([b"x" * 500])).error_code == ErrorCode.NONE


def test_zstd_needs_v7(client):
    topic = new_topic(client)
    data = batch([b"squeeze me" * 10], compression=Compression.ZSTD)
    assert produce(client, topic, 0, data, version=6).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert produce(client, topic, 0, data, version=7).error_code == ErrorCode.NONE
    assert values(fetch(client, topic, 0, 0)) == [b"squeeze me" * 10]


def test_errors_are_per_partition(client):
    topic = new_topic(client, partitions=2)
    reply = client.request(produce_request(topic, 0, batch([b"ok"]), extra=[(1, b"junk"), (7, batch([b"x"]))]), 9)
    codes = [(r.index, r.error_code) for r in reply.responses[0].partition_responses]
    assert codes == [(0, ErrorCode.NONE), (1, ErrorCode.INVALID_RECORD), (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


def test_a_partition_named_twice_is_answered_once(client):
    """Kafka keys a Produce by partition: the last valid entry is written, a refused entry's answer
    stands over a written one's, and the answer names each partition once
    (tests/differential/test_produce_one_partition_twice_against_kafka.py compares the cases)."""
    topic = new_topic(client, partitions=2)
    reply = client.request(produce_request(topic, 0, batch([b"first"]), extra=[
        (0, batch([b"second"])), (1, batch([b"written"])), (1, b"junk"), (7, b"x"), (7, b"y")]), 9)
    codes = sorted((r.index, r.error_code, r.base_offset) for r in reply.responses[0].partition_responses)
    assert codes == [(0, ErrorCode.NONE, 0), (1, ErrorCode.INVALID_RECORD, -1),
                     (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert values(fetch(client, topic, 0, 0)) == [b"second"]
    assert values(fetch(client, topic, 1, 0)) == [b"written"]  # answered INVALID_RECORD all the same


def test_a_transactional_batch_needs_its_partition_in_an_open_transaction(client):
    topic = new_topic(client)
    # first, so that __transaction_state exists: before it no coordinator can answer (NOT_ENOUGH_REPLICAS)
    ids = init_producer_id(client, transactional_id="txn-not-added")
    txn_batch = build_batch([(None, b"t", [], 1)], is_transactional=True, producer_id=1, producer_epoch=0,
                            base_sequence=0)
    reply = produce(client, topic, 0, txn_batch, transactional_id="txn-never-initialised")
    assert reply.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    txn_batch = build_batch([(None, b"t", [], 1)], is_transactional=True, producer_id=ids.producer_id,
                            producer_epoch=ids.producer_epoch, base_sequence=0)
    assert produce(client, topic, 0, txn_batch, transactional_id="txn-not-added").error_code == \
        ErrorCode.INVALID_TXN_STATE  # the partition was never added to a transaction
    assert produce(client, topic, 0, batch([b"x"]), transactional_id="txn-not-added").error_code == ErrorCode.NONE


def test_internal_topic_is_not_writable_by_clients(client, broker):
    topic = ensure_internal_topic(client)
    before = end_offset(client, topic)
    assert produce(client, topic, 0, batch([b"x"])).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    with WireClient(broker.port, client_id="__admin_client") as admin:  # Kafka's exception, kept
        assert produce(admin, topic, 0, batch([b"x"])).error_code == ErrorCode.NONE
    assert end_offset(client, topic) == before + 1


def test_log_append_time_topic_stamps_the_broker_time(client):
    topic = new_topic(client, configs={"message.timestamp.type": "LogAppendTime"})
    reply = produce(client, topic, 0, batch([b"a", b"b"], timestamps=[5, 6]))
    assert reply.error_code == 0 and reply.log_append_time_ms > 1_600_000_000_000
    fetched = fetch(client, topic, 0, 0)
    (stored,) = iter_batches(bytes(fetched.records))
    assert stored.timestamp_type == TimestampType.LOG_APPEND_TIME and stored.crc_valid()
    assert [r.timestamp for r in records(fetched)] == [reply.log_append_time_ms] * 2


# --- idempotent producers ---------------------------------------------------------------------------


def test_init_producer_id_hands_out_new_ids(client):
    ids = set()
    for version in range(0, 6):
        reply = init_producer_id(client, version=version)
        assert reply.error_code == 0 and reply.producer_epoch == 0
        ids.add(reply.producer_id)
    assert len(ids) == 6


def test_transactional_producers_keep_their_id_and_bump_the_epoch(client):
    first = init_producer_id(client, transactional_id="txn")
    again = init_producer_id(client, transactional_id="txn")
    assert (first.error_code, again.error_code) == (ErrorCode.NONE, ErrorCode.NONE)
    assert again.producer_id == first.producer_id and again.producer_epoch == first.producer_epoch + 1
    assert init_producer_id(client, transactional_id="").error_code == ErrorCode.INVALID_REQUEST


def _idempotent(pid, epoch, seq, *vals):
    return batch(list(vals), producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_retry_is_answered_with_the_original_offset(client):
    topic = new_topic(client)
    pid = init_producer_id(client).producer_id
    first = produce(client, topic, 0, _idempotent(pid, 0, 0, b"a", b"b"), acks=-1)
    second = produce(client, topic, 0, _idempotent(pid, 0, 2, b"c"), acks=-1)
    retry = produce(client, topic, 0, _idempotent(pid, 0, 0, b"a", b"b"), acks=-1)
    assert (first.base_offset, second.base_offset) == (0, 2)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 0)  # not DUPLICATE_SEQUENCE_NUMBER
    assert values(fetch(client, topic, 0, 0)) == [b"a", b"b", b"c"]


def test_sequence_gap_and_epochs(client):
    topic = new_topic(client)
    pid = init_producer_id(client).producer_id
    assert produce(client, topic, 0, _idempotent(pid, 1, 0, b"a")).error_code == 0
    assert produce(client, topic, 0, _idempotent(pid, 1, 5, b"gap")).error_code == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(client, topic, 0, _idempotent(pid, 0, 1, b"old")).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert produce(client, topic, 0, _idempotent(pid, 2, 3, b"new")).error_code == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(client, topic, 0, _idempotent(pid, 2, 0, b"new")).error_code == 0
    assert values(fetch(client, topic, 0, 0)) == [b"a", b"new"]


def test_producer_state_is_per_partition(client):
    topic = new_topic(client, partitions=2)
    pid = init_producer_id(client).producer_id
    assert produce(client, topic, 0, _idempotent(pid, 0, 0, b"a")).base_offset == 0
    assert produce(client, topic, 1, _idempotent(pid, 0, 0, b"a")).base_offset == 0
    assert end_offset(client, topic, 1) == 1


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "crash"])
def test_dedupe_and_producer_ids_survive_a_restart(tmp_path, stop):
    with BrokerProcess(tmp_path) as process:
        with WireClient(process.port) as c:
            create_topic(c, "idem", 1)
            pid = init_producer_id(c).producer_id
            for seq in range(0, 6, 2):  # three batches of two
                assert produce(c, "idem", 0, _idempotent(pid, 0, seq, b"v%d" % seq, b"w%d" % seq)).error_code == 0
        process.restart(stop)
        with WireClient(process.port) as c:
            for seq, offset in ((0, 0), (2, 2), (4, 4)):
                retry = produce(c, "idem", 0, _idempotent(pid, 0, seq, b"v%d" % seq, b"w%d" % seq), acks=-1)
                assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, offset)
            assert produce(c, "idem", 0, _idempotent(pid, 0, 9, b"gap")).error_code == \
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            assert produce(c, "idem", 0, _idempotent(pid, 0, 6, b"next")).base_offset == 6
            assert end_offset(c, "idem") == 7
            assert init_producer_id(c).producer_id > pid
        process.restart(stop)  # state written after the first restart survives the second one too
        with WireClient(process.port) as c:
            assert produce(c, "idem", 0, _idempotent(pid, 0, 6, b"next")).base_offset == 6
            assert end_offset(c, "idem") == 7


def test_producer_state_does_not_outlive_its_topic(client):
    from protocol.messages import DeleteTopicsRequest

    topic = new_topic(client)
    pid = init_producer_id(client).producer_id
    assert produce(client, topic, 0, _idempotent(pid, 0, 0, b"a", b"b")).base_offset == 0
    assert produce(client, topic, 0, _idempotent(pid, 0, 2, b"c")).base_offset == 2
    deleted = client.request(DeleteTopicsRequest(topic_names=[topic], timeout_ms=10_000), 4)
    assert deleted.responses[0].error_code == 0
    create_topic(client, topic, 1)
    again = produce(client, topic, 0, _idempotent(pid, 0, 2, b"c"))  # a new topic: no duplicate to find
    assert (again.error_code, again.base_offset) == (ErrorCode.NONE, 0)
    assert values(fetch(client, topic, 0, 0)) == [b"c"]
