"""A TxnOffsetCommit whose transaction ends between its check and its append, in a whole (one-node)
broker: Kafka's group coordinator takes the offsets partition's verification guard before it checks
and presents it at the append, and the marker drops it, so the batch is refused instead of landing
after the marker (pending until some later marker of the producer, an open transaction in
`__consumer_offsets` that no coordinator will close)."""

from __future__ import annotations

import asyncio

import pytest

from broker.app import Broker
from broker.group import OffsetCommit
from broker.group.offsets_store import OFFSETS_TOPIC
from broker.handlers import k28_txn_offset_commit as handler
from broker.txn.state_log import TxnState
from protocol.errors import ErrorCode
from protocol.messages import TxnOffsetCommitRequest
from tests.unit.whole_broker import one_node_config, whole_broker


@pytest.fixture
async def broker(tmp_path):
    config = one_node_config(tmp_path, {"offsets.topic.num.partitions": "1",
                                        "transaction.state.log.num.partitions": "1"})
    async with whole_broker(config, {"t": 1}) as b:
        yield b


async def _ended_meanwhile(broker: Broker, version: int, commit: bool) -> tuple[ErrorCode, int, int]:
    """The answer, and the producer's first transaction in the offsets partition left open with its
    offsets pending (or -1: none)."""
    txns, store = broker.transactions, broker.groups.store
    await store.ensure_topic()
    await txns.ensure_topic()
    producer_id, epoch = await txns.init_producer_id("tid", 60_000, -1, -1)
    offsets_partition = (OFFSETS_TOPIC, store.partition_for("g"))
    if version < 5:  # AddOffsetsToTxn; v5 adds the partition itself
        await txns.add_partitions("tid", producer_id, epoch, {offsets_partition})
    commit_transactional = store.commit_transactional
    ended = asyncio.Event()

    async def after_the_end(*args, **kwargs):
        # The check passed; the transaction ends before the append (a client that did not wait for
        # the answer, over another connection).
        meta = txns.get("tid")
        assert meta is not None and meta.state == TxnState.ONGOING
        if version >= 5:  # transactions version 2: the end bumps the epoch
            await txns.end_txn_v2("tid", producer_id, epoch, commit)
        else:
            await txns.end_txn("tid", producer_id, epoch, commit)
        finished = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        while txns.get("tid").state != finished:  # type: ignore[union-attr]
            await asyncio.sleep(0.005)
        ended.set()
        return await commit_transactional(*args, **kwargs)

    store.commit_transactional = after_the_end  # type: ignore[method-assign]
    body = TxnOffsetCommitRequest(transactional_id="tid", group_id="g", producer_id=producer_id,
                                  producer_epoch=epoch, generation_id=-1, member_id="")
    [code] = await handler._commit(broker, body, version, [OffsetCommit("t", 0, 10, -1, None)])  # type: ignore[arg-type]
    assert ended.is_set()
    partition = broker.replicas.partition(*offsets_partition)
    open_txn = partition.producers.first_unstable_offset()
    return code, -1 if open_txn is None else open_txn, int(store.has_pending("g", "t", 0))


@pytest.mark.parametrize("commit", [True, False])
@pytest.mark.parametrize(("version", "answered"), [
    (3, ErrorCode.INVALID_TXN_STATE), (4, ErrorCode.INVALID_TXN_STATE),
    (5, ErrorCode.INVALID_PRODUCER_EPOCH),  # the marker's bumped epoch refuses it first
])
async def test_an_offset_commit_whose_transaction_ended_after_its_check_is_refused(broker, version, answered, commit):
    assert await _ended_meanwhile(broker, version, commit) == (answered, -1, 0)
