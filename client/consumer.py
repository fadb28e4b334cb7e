"""A simple consumer of assigned partitions: Fetch from positions the caller sets, no group, no commits.

    async with Consumer("127.0.0.1:9092") as consumer:
        consumer.assign({("events", 0): EARLIEST})
        records = await consumer.read_to_end()

A fetch position below the log start offset (records deleted underneath us) or past the log end
raises OffsetOutOfRangeError, and no position moves in that round, so the caller can `seek` and go on.
With isolation_level READ_COMMITTED a reader sees committed data only, up to the last stable offset
(client/aborted.py drops aborted batches by their headers, as Kafka's Java consumer does).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import structlog

from protocol.enums import ApiKey, IsolationLevel
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import FetchRequest
from protocol.record_format import Buffer
from protocol.records import iter_batches

from .aborted import BatchFilter
from .admin import EARLIEST, LATEST, Admin
from .cluster import Cluster
from .connection import BrokerConnection
from .errors import MalformedResponseError, OffsetOutOfRangeError, error_for
from .types import TopicPartition

log = structlog.get_logger("ebb.client.consumer")

T = TypeVar("T")


@dataclass(slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_type: int = 0  # 0 CreateTime, 1 LogAppendTime (from the batch attributes)


@dataclass
class PartitionFetch:
    """One partition's share of a Fetch response, its record bytes not decoded yet."""

    data: Buffer | None = None
    source: str = ""  # the broker that answered, for error messages
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    aborted: list[tuple[int, int]] | None = None  # (producer id, first offset), READ_COMMITTED only
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


def decode_partition(tp: TopicPartition, position: int, records: bytes | bytearray | memoryview | None,
                     batches: BatchFilter | None = None) -> tuple[list[ConsumerRecord], int]:
    """Records at or after `position` from a fetched record set, and the position after them.

    A broker returns whole batches, so the first may start below `position` (a log start offset or
    our position inside a batch) and the last may be cut short by the size limit: the first is
    trimmed, the last is left for the next fetch. Control batches (transaction markers) are skipped,
    and so are the batches `batches` (READ_COMMITTED's aborted transactions) drops.
    """
    out: list[ConsumerRecord] = []
    if not records:
        return out, position
    if batches is None:
        batches = BatchFilter()
    for batch in iter_batches(records, allow_partial_tail=True):
        if batches.skip(batch) or batch.next_offset <= position:  # the filter sees every batch, in order
            position = max(position, batch.next_offset)
            continue
        batch.validate()
        timestamp_type = int(batch.timestamp_type)
        for r in batch.records():
            if r.offset >= position:
                out.append(ConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp, r.key, r.value,
                                          r.headers, timestamp_type))
        position = batch.next_offset
    return out, position


class Consumer:
    def __init__(self, bootstrap: str | Sequence[str] | Cluster, *, max_wait_ms: int = 500, min_bytes: int = 1,
                 max_bytes: int = 50 * 2**20, partition_max_bytes: int = 2**20,
                 isolation_level: int = IsolationLevel.READ_UNCOMMITTED, **cluster_options):
        self._owns_cluster = not isinstance(bootstrap, Cluster)
        self.cluster = bootstrap if isinstance(bootstrap, Cluster) else Cluster(bootstrap, **cluster_options)
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.isolation_level = IsolationLevel(isolation_level)  # ValueError for a level Kafka does not define
        self._positions: dict[TopicPartition, int] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}
        self.last_stable_offsets: dict[TopicPartition, int] = {}
        self.log_start_offsets: dict[TopicPartition, int] = {}

    async def start(self) -> Consumer:
        await self.cluster.start()
        return self

    async def close(self) -> None:
        if self._owns_cluster:
            await self.cluster.close()

    async def __aenter__(self) -> Consumer:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- positions --

    def assign(self, positions: Mapping[tuple[str, int], int]) -> None:
        """Consume exactly these partitions, from these offsets (EARLIEST or LATEST are looked up)."""
        for tp, offset in positions.items():
            if offset < 0 and offset not in (EARLIEST, LATEST):
                raise ValueError(f"position {offset} for {TopicPartition(*tp)}: use >= 0, EARLIEST or LATEST")
        self._positions = {TopicPartition(*tp): offset for tp, offset in positions.items()}

    def assignment(self) -> list[TopicPartition]:
        return sorted(self._positions)

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        tp = TopicPartition(*tp)
        if tp not in self._positions:
            raise KeyError(f"{tp} is not assigned")
        self._positions[tp] = offset

    def position(self, tp: tuple[str, int]) -> int:
        return self._positions[TopicPartition(*tp)]

    async def _resolve_positions(self) -> None:
        special = {tp: offset for tp, offset in self._positions.items() if offset < 0}
        if not special:
            return
        results = await Admin(self.cluster).list_offsets(special, isolation_level=self.isolation_level)
        for tp, result in results.items():
            if not result.ok:
                raise error_for(result.error, result.error_message or f"look up the position of {tp}")
            self._positions[tp] = result.offset

    # -- fetching --

    async def fetch(self, partitions: Iterable[tuple[str, int]] | None = None) -> list[ConsumerRecord]:
        """One Fetch round (one request per leader) over the assignment, or over `partitions` of it."""
        fetched = await self.fetch_decoded(decode_partition, partitions)
        return [record for records in fetched.values() for record in records]

    def end_offset(self, tp: tuple[str, int], default: int = -1) -> int:
        """Where reading ends for now, from the last Fetch: the high watermark, or under READ_COMMITTED the
        last stable offset (an open transaction's records wait there); `default` before the first Fetch."""
        ends = self.last_stable_offsets if self.isolation_level == IsolationLevel.READ_COMMITTED \
            else self.high_watermarks
        return ends.get(TopicPartition(*tp), default)

    async def fetch_decoded(self, decode: Callable[[TopicPartition, int, Buffer | None, BatchFilter], tuple[T, int]],
                            partitions: Iterable[tuple[str, int]] | None = None) -> dict[TopicPartition, T]:
        """One Fetch round, each partition's record bytes decoded by `decode(tp, position, data, batches)`,
        which returns what it made of them and the position after them (a reader that builds columns
        instead of ConsumerRecords plugs in here); it must leave out the batches `batches.skip` names."""
        await self._resolve_positions()
        wanted = self.assignment() if partitions is None else [TopicPartition(*tp) for tp in partitions]
        share = {tp: self._positions[tp] for tp in wanted}
        if not share:
            return {}
        fetched = await self.cluster.for_each_leader(
            share, self._fetch_from, _failed, what="Fetch",
            timeout_s=self.max_wait_ms / 1000 + self.cluster.request_timeout_s,
        )
        for tp, part in fetched.items():  # check everything before moving any position
            if part.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                raise OffsetOutOfRangeError(tp.topic, tp.partition, share[tp])
            if part.error:
                raise error_for(part.error, part.error_message or f"fetch {tp}")
        decoded: dict[TopicPartition, tuple[T, int]] = {}
        for tp, part in fetched.items():  # every partition decoded before any position moves
            try:
                decoded[tp] = decode(tp, share[tp], part.data, BatchFilter(part.aborted))
            except ProtocolError as exc:
                raise MalformedResponseError(f"records of {tp} from {part.source}: {exc}") from exc
        for tp, part in fetched.items():
            self._positions[tp] = decoded[tp][1]
            self.high_watermarks[tp] = part.high_watermark
            self.last_stable_offsets[tp] = part.last_stable_offset
            if part.log_start_offset >= 0:
                self.log_start_offsets[tp] = part.log_start_offset
        return {tp: made for tp, (made, _) in decoded.items()}

    async def _fetch_from(self, conn: BrokerConnection,
                          share: dict[TopicPartition, int]) -> dict[TopicPartition, PartitionFetch]:
        Req = FetchRequest
        by_topic: dict[str, list] = {}
        for tp, position in share.items():
            by_topic.setdefault(tp.topic, []).append(Req.FetchTopic.FetchPartition(
                partition=tp.partition, fetch_offset=position, partition_max_bytes=self.partition_max_bytes))
        request = Req(
            replica_id=-1, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes, max_bytes=self.max_bytes,
            isolation_level=self.isolation_level, session_id=0, session_epoch=-1,  # sessionless
            topics=[Req.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        )
        response = await conn.request(request, version=conn.pick_version(ApiKey.FETCH),
                                      timeout_s=self.max_wait_ms / 1000 + conn.request_timeout_s)
        if response.error_code:
            raise error_for(response.error_code, f"Fetch from {conn.address}")
        out = {}
        for t in response.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                code = ErrorCode.from_code(p.error_code)
                if tp not in share:
                    continue  # not asked for: nothing to decode it against
                aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions or ()]
                out[tp] = PartitionFetch(data=p.records, source=str(conn.address), high_watermark=p.high_watermark,
                                         log_start_offset=p.log_start_offset, last_stable_offset=p.last_stable_offset,
                                         aborted=aborted, error=code)
        return out

    async def read_to_end(self, *, timeout_ms: int = 30000) -> list[ConsumerRecord]:
        """Fetch until every assigned partition's position reaches its end_offset (the high watermark, or
        the last stable offset under READ_COMMITTED)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        records: list[ConsumerRecord] = []
        behind = self.assignment()
        while behind:
            if loop.time() > deadline:
                raise error_for(ErrorCode.REQUEST_TIMED_OUT,
                                f"read_to_end: {', '.join(map(str, behind))} not at the end after {timeout_ms} ms")
            records.extend(await self.fetch(behind))
            behind = [tp for tp in behind if self._positions[tp] < self.end_offset(tp, 0)]
        return records

    async def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        """Every record from the positions on, waiting for new ones (long-polls max_wait_ms at a time)."""
        while True:
            for record in await self.fetch():
                yield record


def _failed(code: ErrorCode, message: str | None) -> PartitionFetch:
    return PartitionFetch(error=code, error_message=message)
