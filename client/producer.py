"""A simple producer: one record batch per partition per call, sent to the leaders with Produce.

No idempotence and no background batching: each `send` builds its batches, sends one request per
leader broker and returns the base offsets. Retries are limited to errors that guarantee nothing was
appended (not the leader, no leader, not enough replicas) and to failing to connect at all; a request
that may have reached the broker is never resent, so a retry cannot duplicate records.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from protocol.compression import Compression
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import ProduceRequest
from protocol.records import NewRecord, build_batch

from .cluster import LEADERSHIP_ERRORS, Cluster
from .connection import BrokerConnection
from .errors import error_for
from .types import TopicPartition

# What a caller may pass as one record: a value, a (key, value) pair, or a NewRecord.
RecordLike = bytes | tuple[bytes | None, bytes | None] | NewRecord

_NOT_APPENDED = LEADERSHIP_ERRORS | {ErrorCode.NOT_ENOUGH_REPLICAS}


@dataclass
class ProduceResult:
    base_offset: int
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.NONE


def to_new_record(item: RecordLike, timestamp_ms: int) -> NewRecord:
    if isinstance(item, NewRecord):
        if item.timestamp < 0:
            return NewRecord(item.key, item.value, item.headers, timestamp_ms)
        return item
    if isinstance(item, tuple):
        key, value = item
        return NewRecord(key, value, (), timestamp_ms)
    return NewRecord(None, item, (), timestamp_ms)


class Producer:
    """Produce record batches. `acks`: 0 (no answer; offsets are -1), 1 (leader), -1 (all in-sync replicas)."""

    def __init__(self, bootstrap: str | Sequence[str] | Cluster, *, acks: int = -1, timeout_ms: int = 30000,
                 compression: Compression = Compression.NONE, **cluster_options):
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1, 0 or 1, not {acks}")
        self._owns_cluster = not isinstance(bootstrap, Cluster)
        self.cluster = bootstrap if isinstance(bootstrap, Cluster) else Cluster(bootstrap, **cluster_options)
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.compression = Compression(compression)

    async def start(self) -> Producer:
        await self.cluster.start()
        return self

    async def close(self) -> None:
        if self._owns_cluster:
            await self.cluster.close()

    async def __aenter__(self) -> Producer:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def send(self, topic: str, partition: int, records: Iterable[RecordLike], *,
                   timestamp_ms: int | None = None) -> int:
        """Append `records` as one batch; return the offset of the first. Raises the partition's error."""
        tp = TopicPartition(topic, partition)
        result = (await self.send_batches({tp: records}, timestamp_ms=timestamp_ms))[tp]
        if not result.ok:
            raise error_for(result.error, result.error_message or f"produce to {tp}")
        return result.base_offset

    async def send_batches(self, batches: Mapping[tuple[str, int], Iterable[RecordLike]], *,
                           timestamp_ms: int | None = None) -> dict[TopicPartition, ProduceResult]:
        """One batch per partition, one Produce request per leader; a result per partition.

        Records without a timestamp get `timestamp_ms`, or the current time.
        """
        now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        built: dict[TopicPartition, bytes] = {}
        for tp, records in batches.items():
            new = [to_new_record(r, now) for r in records]
            if not new:
                raise ValueError(f"no records for {TopicPartition(*tp)}")
            built[TopicPartition(*tp)] = build_batch(new, compression=self.compression)
        return await self.send_built(built)

    async def send_built(self, built: Mapping[TopicPartition, bytes]) -> dict[TopicPartition, ProduceResult]:
        """Batches built by the caller (one per partition, offsets from 0, no producer id), one Produce
        request per leader; a result per partition."""
        return await self.cluster.for_each_leader(
            built, self._send_to_leader, _failed, what="Produce", retry_errors=_NOT_APPENDED, idempotent=False,
            timeout_s=self.timeout_ms / 1000 + self.cluster.request_timeout_s,
        )

    async def _send_to_leader(self, conn: BrokerConnection,
                              share: dict[TopicPartition, bytes]) -> dict[TopicPartition, ProduceResult]:
        Req = ProduceRequest
        by_topic: dict[str, list] = {}
        for tp, batch in share.items():
            by_topic.setdefault(tp.topic, []).append(Req.TopicProduceData.PartitionProduceData(
                index=tp.partition, records=batch))
        request = Req(acks=self.acks, timeout_ms=self.timeout_ms,
                      topic_data=[Req.TopicProduceData(name=t, partition_data=ps) for t, ps in by_topic.items()])
        version = conn.pick_version(ApiKey.PRODUCE)
        if self.acks == 0:
            await conn.send_only(request, version=version)
            return {tp: ProduceResult(-1) for tp in share}
        response = await conn.request(request, version=version,
                                      timeout_s=self.timeout_ms / 1000 + conn.request_timeout_s)
        results = {}
        for t in response.responses:
            for p in t.partition_responses:
                results[TopicPartition(t.name, p.index)] = ProduceResult(
                    p.base_offset, p.log_append_time_ms, p.log_start_offset, ErrorCode.from_code(p.error_code),
                    p.error_message)
        return results


def _failed(code: ErrorCode, message: str | None) -> ProduceResult:
    return ProduceResult(-1, error=code, error_message=message)
