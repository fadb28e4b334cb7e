"""Produce's transaction verification as Kafka 4.3.1's ReplicaManager does it, on a whole one-node
broker (this broker is the ids' coordinator): a request whose transactional batches carry more than
one producer (id, epoch) is refused whole, INVALID_PRODUCER_ID_MAPPING for every partition it names;
a batch of a transaction already open on its partition is not checked with the coordinator (the
open-transaction guard stands for it), and the others are checked as the coordinator answers another
leader's AddPartitionsToTxn verify-only request (tests/differential/test_produce_txn_verification_against_kafka.py
holds the same against Kafka)."""

from __future__ import annotations

import pytest

from broker.app import Broker
from broker.handlers import CloseConnection
from broker.handlers.k00_produce import produce
from broker.request_context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import ProduceRequest, ProduceResponse
from protocol.records import build_batch
from tests.unit.fakes import request_of
from tests.unit.whole_broker import one_node_config, whole_broker

_Data = ProduceRequest.TopicProduceData
_Part = _Data.PartitionProduceData


@pytest.fixture
async def broker(tmp_path):
    async with whole_broker(one_node_config(tmp_path, {"transaction.state.log.num.partitions": "1"}), {"t": 3}) as b:
        yield b


def _batch(producer_id: int, epoch: int, sequence: int, transactional: bool = True) -> bytes:
    return build_batch([(None, b"v", [], 1)], producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                       is_transactional=transactional)


async def _send(broker: Broker, version: int, topics: dict[str, dict[int, bytes]], transactional_id: str = "a",
                acks: int = -1) -> ProduceResponse | None:
    request = ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=30_000, topic_data=[
        _Data(name=name, partition_data=[_Part(index=i, records=data) for i, data in parts.items()])
        for name, parts in topics.items()])
    return await produce(broker, request_of(request, version), RequestContext())


def _codes(answer: ProduceResponse | None) -> dict[tuple[str, int], int]:
    assert answer is not None
    return {(t.name, p.index): p.error_code for t in answer.responses for p in t.partition_responses}


async def _producer(broker: Broker, transactional_id: str, partitions: set[tuple[str, int]]) -> tuple[int, int]:
    txns = broker.transactions
    await txns.ensure_topic()
    producer_id, epoch = await txns.init_producer_id(transactional_id, 60_000, -1, -1)
    if partitions:
        await txns.add_partitions(transactional_id, producer_id, epoch, partitions)
    return producer_id, epoch


def _ends(broker: Broker) -> list[int]:
    return [broker.replicas.partition("t", i).log.log_end_offset for i in range(3)]


@pytest.mark.parametrize("version", [3, 10, 11, 12])
async def test_two_producers_refuse_the_whole_request(broker, version):
    a = await _producer(broker, "a", {("t", 0)})
    b = await _producer(broker, "b", {("t", 1)})
    for second in (b, (a[0], a[1] + 1)):  # another id, or the same id at another epoch
        answer = await _send(broker, version, {
            "t": {0: _batch(*a, 0), 1: _batch(*second, 0), 2: _batch(-1, -1, -1, transactional=False)},
            "no-such-topic": {0: _batch(*a, 0)}})
        assert _codes(answer) == dict.fromkeys([("t", 0), ("t", 1), ("t", 2), ("no-such-topic", 0)],
                                               ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    assert _ends(broker) == [0, 0, 0]
    with pytest.raises(CloseConnection):  # acks=0: no answer can say it
        await _send(broker, version, {"t": {0: _batch(*a, 0), 1: _batch(*b, 0)}}, acks=0)
    assert _ends(broker) == [0, 0, 0]
    # one transactional producer beside an idempotent one is answered partition by partition
    answer = await _send(broker, version, {"t": {0: _batch(*a, 0), 2: _batch(b[0] + 100, 0, 0, transactional=False)}})
    assert _codes(answer) == {("t", 0): ErrorCode.NONE, ("t", 2): ErrorCode.NONE}
    assert _ends(broker) == [1, 0, 1]


@pytest.mark.parametrize("version", [3, 11, 12])
async def test_a_batch_of_a_transaction_open_on_its_partition_is_not_checked_with_the_coordinator(
        broker, monkeypatch, version):
    b = await _producer(broker, "b", {("t", 0)})
    await _producer(broker, "a", set())
    assert _codes(await _send(broker, version, {"t": {0: _batch(*b, 0)}}, transactional_id="b")) == {
        ("t", 0): ErrorCode.NONE}
    verifier = broker.transactions.verifier
    asked: list[list[tuple[str, int]]] = []
    local_check, local_add = verifier._local_check, verifier._local_add

    def counted_check(transactional_id, producer_id, epoch, partitions):
        asked.append(partitions)
        return local_check(transactional_id, producer_id, epoch, partitions)

    async def counted_add(transactional_id, producer_id, epoch, partitions):
        asked.append(partitions)
        return await local_add(transactional_id, producer_id, epoch, partitions)

    monkeypatch.setattr(verifier, "_local_check", counted_check)
    monkeypatch.setattr(verifier, "_local_add", counted_add)
    # b's transaction is open on t-0: its batch needs no coordinator, even under another id (as Kafka)
    assert _codes(await _send(broker, version, {"t": {0: _batch(*b, 1)}}, transactional_id="b")) == {
        ("t", 0): ErrorCode.NONE}
    assert _codes(await _send(broker, version, {"t": {0: _batch(*b, 2)}}, transactional_id="a")) == {
        ("t", 0): ErrorCode.NONE}
    assert asked == []
    # where it is not open, the coordinator answers as for another leader: a's id is not b's producer
    assert _codes(await _send(broker, version, {"t": {1: _batch(*b, 0)}}, transactional_id="a")) == {
        ("t", 1): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    # and an epoch above the open transaction's is fenced by the coordinator, not taken as a bump
    assert _codes(await _send(broker, version, {"t": {0: _batch(b[0], b[1] + 1, 0)}}, transactional_id="b")) == {
        ("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert asked == [[("t", 1)], [("t", 0)]]
    assert _ends(broker) == [3, 0, 0]


@pytest.mark.parametrize("version", [3, 11])
async def test_before_any_coordinator_a_transactional_batch_is_retriable(broker, version):
    """No `__transaction_state` yet: Kafka's leader finds no coordinator to ask (NOT_ENOUGH_REPLICAS)."""
    answer = await _send(broker, version, {"t": {0: _batch(1, 0, 0)}})
    assert _codes(answer) == {("t", 0): ErrorCode.NOT_ENOUGH_REPLICAS}
    assert _ends(broker) == [0, 0, 0]


@pytest.mark.parametrize(("version", "answered"), [
    (3, ErrorCode.INVALID_TXN_STATE), (10, ErrorCode.INVALID_TXN_STATE),
    (11, ErrorCode.TRANSACTION_ABORTABLE), (12, ErrorCode.TRANSACTION_ABORTABLE)])
async def test_the_coordinators_transaction_abortable_is_worded_for_the_version(broker, monkeypatch, version, answered):
    """Kafka 4.3.1's AddPartitionsToTxnManager turns TRANSACTION_ABORTABLE into INVALID_TXN_STATE only for
    the clients that predate it (DEFAULT_ERROR: Produce v10 and below); v11 and the adding v12 get it as is."""
    producer = await _producer(broker, "a", set())
    verifier = broker.transactions.verifier

    def abortable(transactional_id, producer_id, epoch, partitions):
        return dict.fromkeys(partitions, ErrorCode.TRANSACTION_ABORTABLE)

    async def abortable_add(transactional_id, producer_id, epoch, partitions):
        return abortable(transactional_id, producer_id, epoch, partitions)

    monkeypatch.setattr(verifier, "_local_check", abortable)
    monkeypatch.setattr(verifier, "_local_add", abortable_add)
    assert _codes(await _send(broker, version, {"t": {0: _batch(*producer, 0)}})) == {("t", 0): answered}
    assert _ends(broker) == [0, 0, 0]
