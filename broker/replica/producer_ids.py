"""Producer ids for idempotent producers, never handed out twice, not even across restarts.

Ids come in blocks claimed from the metadata store at Kafka's ZooKeeper path
`/latest_producer_id_block`, as `{"version": 1, "broker": <id>, "block_start": "<first>",
"block_end": "<last>"}` (Kafka's ProducerIdBlockZNode, numbers as strings). A claim is a versioned
set (compare-and-set), so brokers sharing a ZooKeeper store never claim the same block; ids of a
block that a broker had not used when it stopped are simply skipped.
"""

from __future__ import annotations

import asyncio

import structlog

from broker.cluster.layout import ProducerIdBlock, ProducerIdBlockZNode
from broker.cluster.store import BadVersion, MetadataStore, NodeExists, NoNode

log = structlog.get_logger("producer_ids")

BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
MAX_PRODUCER_ID = 2**63 - 1


class ProducerIdsExhausted(Exception):
    pass


class ProducerIdManager:
    def __init__(self, store: MetadataStore, node_id: int, block_size: int = BLOCK_SIZE) -> None:
        self.store = store
        self.node_id = node_id
        self.block_size = block_size
        self._next = 0
        self._last = -1  # the current block is empty until the first claim
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._last:
                await self._claim_block()
            producer_id = self._next
            self._next += 1
            return producer_id

    async def _claim_block(self) -> None:
        for _ in range(100):
            try:
                data, version = await self.store.get(ProducerIdBlockZNode.PATH)
            except NoNode:
                data, version = None, None
            first = 0 if data is None else ProducerIdBlockZNode.decode(data).last + 1
            last = first + self.block_size - 1
            if last > MAX_PRODUCER_ID:
                raise ProducerIdsExhausted("every producer id has been handed out")
            node = ProducerIdBlockZNode.encode(ProducerIdBlock(self.node_id, first, last))
            try:
                if version is None:
                    await self.store.create(ProducerIdBlockZNode.PATH, node)
                else:
                    await self.store.set(ProducerIdBlockZNode.PATH, node, version)
            except (BadVersion, NodeExists, NoNode):
                continue  # another broker claimed a block first
            self._next, self._last = first, last
            log.info("claimed producer id block", first=first, last=last)
            return
        raise ProducerIdsExhausted("could not claim a producer id block (store contention)")
