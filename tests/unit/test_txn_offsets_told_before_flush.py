"""A TxnOffsetCommit's batch on an offsets partition whose flush.messages is reached, in a whole
(one-node) broker: the batch is in the log before the flush is awaited, and a tombstone of the same
offset written meanwhile must take the pending offset with it, as a replay of the log does."""

from __future__ import annotations

import asyncio

from broker.group.offsets_store import OFFSETS_TOPIC, CommittedOffset
from tests.unit.whole_broker import one_node_config, whole_broker


async def test_a_tombstone_written_while_the_txn_offset_commits_flush_is_awaited_drops_its_offset(tmp_path):
    """The store learnt the batch's offset only after the flush: the tombstone found its pending
    offset without one and left it, and the commit marker then stored in memory an offset that a
    replay of the log drops."""
    config = one_node_config(tmp_path, {"offsets.topic.num.partitions": "1", "log.flush.interval.messages": "1"})
    async with whole_broker(config, {"t": 1}) as broker:
        store = broker.groups.store
        await store.ensure_topic()
        index = store.partition_for("g")
        log_ = broker.replicas.partition(OFFSETS_TOPIC, index).log
        flushing, go = asyncio.Event(), asyncio.Event()
        flush = log_.flush

        async def first_flush_held():  # the TxnOffsetCommit's; the tombstone's goes through
            if not flushing.is_set():
                flushing.set()
                await go.wait()
            await flush()

        log_.flush = first_flush_held  # type: ignore[method-assign]
        committing = asyncio.ensure_future(
            store.commit_transactional("g", {("t", 0): CommittedOffset(5, -1, "", 1, None)}, 4000, 0))
        await flushing.wait()
        await store.delete("g", [("t", 0)])
        go.set()
        await committing
        store.transaction_completed(index, 4000, True, log_.log_end_offset)  # its commit marker
        assert store.get("g", "t", 0) is None and not store.has_pending("g", "t", 0)
