"""A Produce batch whose transaction is open on its partition already, and ends between the batch's
verification and its append, in a whole (one-node) broker: Kafka 4.3.1 presents its sentinel guard
for such a batch (ReplicaManager keeps no guard for it, UnifiedLog refuses a sentinel once the
producer has no open transaction there), so the batch is refused, INVALID_TXN_STATE at every Produce
version, instead of opening a transaction after its marker that no coordinator will end."""

from __future__ import annotations

import pytest

from broker.app import Broker
from broker.handlers.k00_produce import produce
from broker.request_context import RequestContext
from broker.txn.state_log import TxnState
from protocol.errors import ErrorCode
from protocol.messages import ProduceRequest
from protocol.records import build_batch
from tests.support.polling import until
from tests.unit.fakes import request_of
from tests.unit.whole_broker import one_node_config, whole_broker

_Data = ProduceRequest.TopicProduceData


@pytest.fixture
async def broker(tmp_path):
    async with whole_broker(one_node_config(tmp_path, {"transaction.state.log.num.partitions": "1"}), {"t": 1}) as b:
        yield b


def _send(broker: Broker, producer_id: int, epoch: int, sequence: int, version: int):
    batch = build_batch([(None, b"v", [], 1)], producer_id=producer_id, producer_epoch=epoch,
                        base_sequence=sequence, is_transactional=True)
    request = ProduceRequest(transactional_id="tid", acks=-1, timeout_ms=30_000, topic_data=[_Data(
        name="t", partition_data=[_Data.PartitionProduceData(index=0, records=batch)])])
    return produce(broker, request_of(request, version), RequestContext())


@pytest.mark.parametrize("commit", [True, False])
@pytest.mark.parametrize("version", [3, 11])
async def test_a_batch_whose_open_transaction_ended_after_its_check_is_refused(broker, monkeypatch, version, commit):
    # Its transaction is open on the partition: no coordinator is asked, wherever it is (one path).
    txns = broker.transactions
    await txns.ensure_topic()
    producer_id, epoch = await txns.init_producer_id("tid", 60_000, -1, -1)
    await txns.add_partitions("tid", producer_id, epoch, {("t", 0)})
    first = await _send(broker, producer_id, epoch, 0, version)
    assert first.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    partition = broker.replicas.partition("t", 0)
    assert partition.producers.in_transaction(producer_id, epoch)

    append_records = broker.replicas.append_records
    ended: list[int] = []
    held: list[object] = []

    async def after_the_end(entries, *args, **kwargs):
        if held or entries[0][0] != "t":  # the coordinator's own writes: its state, the marker
            return await append_records(entries, *args, **kwargs)
        held.append(entries)
        # The batch passed its checks; the coordinator ends the transaction before the append (a
        # client that did not wait for this answer, over another connection).
        await txns.end_txn("tid", producer_id, epoch, commit)
        finished = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        await until(lambda: txns.get("tid").state == finished, what="the transaction completed")
        ended.append(partition.log.log_end_offset)
        return await append_records(entries, *args, **kwargs)

    monkeypatch.setattr(broker.replicas, "append_records", after_the_end)
    second = (await _send(broker, producer_id, epoch, 1, version)).responses[0].partition_responses[0]
    assert ended == [2]  # the first batch and the marker
    assert second.error_code == ErrorCode.INVALID_TXN_STATE
    assert partition.log.log_end_offset == 2
    assert partition.producers.first_unstable_offset() is None
    assert not partition.producers.in_transaction(producer_id, epoch)
