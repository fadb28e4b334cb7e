"""What each replica has physically erased (Ebb's DescribeErasure, key 10000), and waiting for it.

    async with Admin("127.0.0.1:9092") as admin:
        found = await describe_erasure(admin.cluster, [("events", 0)])   # per partition, per replica
        took_s = await wait_erased(admin.cluster, {("events", 0): 100}, timeout_s=60)

Each broker answers for its own replica, so every replica's broker named by Metadata is asked; a
replica whose broker Metadata does not list (it is down) is reported so and not waited for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import DescribeErasureRequest

from .cluster import Cluster
from .errors import KafkaClientError, KafkaError
from .types import PartitionKey, TopicPartition

_POLL_S = 0.05


@dataclass(frozen=True)
class ReplicaErasure:
    broker_id: int
    error: ErrorCode
    error_message: str | None = None
    log_start_offset: int = -1
    erased_offset: int = -1  # below it no byte of a record is in this replica's files
    erasable_offset: int = -1  # how far erasure can go for the current start (the batch holding it stays whole)
    max_delay_ms: int = -1  # the topic's erasure.max.delay.ms; -1: off

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.NONE

    def erased_below(self, offset: int) -> bool:
        """Whether the records below `offset` are gone from this replica's files, but for the records
        sharing a batch with the log start offset (a batch is kept whole)."""
        return self.ok and self.log_start_offset >= offset and self.erased_offset >= min(offset, self.erasable_offset)


@dataclass(frozen=True)
class PartitionErasure:
    replicas: list[ReplicaErasure]  # one per replica in Metadata's order

    @property
    def alive(self) -> list[ReplicaErasure]:
        return [r for r in self.replicas if r.error != ErrorCode.BROKER_NOT_AVAILABLE]

    @property
    def erased_offset(self) -> int | None:
        """The smallest erased offset over the alive replicas (None when one of them failed to answer)."""
        alive = self.alive
        if not alive or not all(r.ok for r in alive):
            return None
        return min(r.erased_offset for r in alive)


async def describe_erasure(cluster: Cluster, partitions: Iterable[PartitionKey]
                           ) -> dict[TopicPartition, PartitionErasure]:
    wanted = sorted({TopicPartition(*tp) for tp in partitions})
    meta = await cluster.refresh_metadata(sorted({tp.topic for tp in wanted}))
    per_broker: dict[int, list[TopicPartition]] = {}
    replicas_of: dict[TopicPartition, list[int]] = {}
    for tp in wanted:
        topic = meta.topics.get(tp.topic)
        info = None if topic is None else topic.partitions.get(tp.partition)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} is not in the metadata")
        replicas_of[tp] = list(info.replicas)
        for broker in info.replicas:
            if broker in meta.brokers:
                per_broker.setdefault(broker, []).append(tp)
    answers = dict(zip(per_broker, await asyncio.gather(*(_ask(cluster, b, tps) for b, tps in per_broker.items())),
                       strict=True))
    down = "not in the metadata: the broker is down"
    return {tp: PartitionErasure([answers[b].get(tp, ReplicaErasure(b, ErrorCode.UNKNOWN_SERVER_ERROR))
                                  if b in answers else ReplicaErasure(b, ErrorCode.BROKER_NOT_AVAILABLE, down)
                                  for b in replicas_of[tp]]) for tp in wanted}


async def _ask(cluster: Cluster, broker: int, partitions: list[TopicPartition]
               ) -> dict[TopicPartition, ReplicaErasure]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    request = DescribeErasureRequest(topics=[DescribeErasureRequest.TopicRequest(name=t, partition_indexes=ps)
                                             for t, ps in by_topic.items()])
    try:
        conn = await cluster.connection(broker)
        response = await conn.request(request, version=conn.pick_version(ApiKey.DESCRIBE_ERASURE))
    except KafkaClientError as exc:
        return {tp: ReplicaErasure(broker, exc.error_code, exc.message) for tp in partitions}
    return {TopicPartition(t.name, p.partition_index): ReplicaErasure(
        broker, ErrorCode.from_code(p.error_code), p.error_message, p.log_start_offset, p.erased_offset,
        p.erasable_offset, p.max_delay_ms) for t in response.topics for p in t.partitions}


async def wait_erased(cluster: Cluster, offsets: Mapping[PartitionKey, int], *, timeout_s: float
                      ) -> tuple[float, dict[TopicPartition, PartitionErasure]]:
    """Poll until every alive replica of each partition has erased below its offset (but for the batch
    holding its log start offset, kept whole); returns the seconds it took and the last answers.
    TimeoutError when the deadline passes first."""
    wanted = {TopicPartition(*tp): offset for tp, offset in offsets.items()}
    began = time.monotonic()
    while True:
        found = await describe_erasure(cluster, wanted)
        if all(found[tp].alive and all(r.erased_below(wanted[tp]) for r in found[tp].alive) for tp in wanted):
            return time.monotonic() - began, found
        if time.monotonic() - began > timeout_s:
            raise TimeoutError(f"not erased on every alive replica within {timeout_s:g}s")
        await asyncio.sleep(_POLL_S)
