"""Transaction markers: writing them on a partition's leader, and getting them there.

MarkerWriter is the leader's side (WriteTxnMarkers, and the coordinator's own partitions): a COMMIT
or ABORT control batch per partition through ReplicaManager.append_records (origin COORDINATOR,
acks=-1), carrying the coordinator epoch; whoever listens (the group store, for TxnOffsetCommit's
offsets in `__consumer_offsets`) is told of each marker written, and its offset.

MarkerSender is the coordinator's side (Kafka's TransactionMarkerChannelManager): each round it
groups the partitions still without their marker by leader, writes those led here through the
MarkerWriter and sends one WriteTxnMarkers request to each other leader over the inter-broker
listener (broker/txn/peers.py), all leaders at once; what is not written yet (no leader, leadership moving, a broker
unreachable) is retried by the coordinator in the next round.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

import structlog

from broker.replica import AppendOrigin, ReplicaManager
from protocol.control_records import ControlType, build_marker_batch
from protocol.errors import ErrorCode
from protocol.messages import WriteTxnMarkersRequest
from protocol.records import RecordBatch

if TYPE_CHECKING:
    from broker.txn.peers import PeerConnections

log = structlog.get_logger("transactions")

TopicPartitionKey = tuple[str, int]
MarkerListener = Callable[[str, int, int, bool, int], None]  # (topic, partition, producer id, committed, offset)
WRITE_TXN_MARKERS_VERSION = 2  # v2 adds the TransactionVersion the leader checks the marker by
# A leader serving only v1 (an older Ebb mid-upgrade) is sent v1, its TransactionVersion (ignorable)
# left out, as Kafka's coordinator does: retrying v2 there would never write the marker.
WRITE_TXN_MARKERS_OLDEST = 1
# Written, or not needed any more: a newer producer epoch or coordinator has written there already;
# or never writable there (Kafka 4.3.1 drops the partition from those waiting: its producer's batches
# could not have been written there either).
_SETTLED = frozenset({ErrorCode.NONE, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                      ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class MarkerWriter:
    def __init__(self, replicas: ReplicaManager, timeout_ms: int) -> None:
        self.replicas = replicas
        self.timeout_ms = timeout_ms
        self.listeners: list[MarkerListener] = []

    async def write(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                    partitions: list[TopicPartitionKey], transaction_version: int = 0) -> list[ErrorCode]:
        """One marker on each partition (led here); one error code per partition, in order
        (`transaction_version` 2: the epoch must be above the producer's there)."""
        kind = ControlType.COMMIT if commit else ControlType.ABORT
        entries = []
        for topic, index in partitions:  # a batch each: the log writes its offsets into the bytes
            data = build_marker_batch(kind, producer_id, producer_epoch, coordinator_epoch, _now_ms())
            entries.append((topic, index, memoryview(data), RecordBatch(data)))
        results = await self.replicas.append_records(entries, required_acks=-1, timeout_ms=self.timeout_ms,
                                                     origin=AppendOrigin.COORDINATOR, internal_topics_allowed=True,
                                                     marker_transaction_version=transaction_version)
        codes = []
        for (topic, index), result in zip(partitions, results, strict=True):
            code = ErrorCode(result.error_code)
            if code == ErrorCode.NONE:
                for listener in self.listeners:
                    listener(topic, index, producer_id, commit, result.base_offset)
            codes.append(code)
        return codes


class MarkerWrites(Protocol):
    """Where the markers of partitions led here go (MarkerWriter)."""

    async def write(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                    partitions: list[TopicPartitionKey], transaction_version: int = 0) -> list[ErrorCode]: ...


class LedTopic(Protocol):
    """What the sender reads of a topic (topic.py's Topic): its partitions and their leaders."""

    @property
    def replicas(self) -> Mapping[int, list[int]]: ...
    def leader(self, partition: int) -> int: ...


class LeaderLookup(Protocol):
    """The topics (topics.py's TopicManager), by name."""

    def get(self, name: str) -> LedTopic | None: ...


class MarkerSender:
    def __init__(self, writer: MarkerWrites, topics: LeaderLookup, node_id: int, in_cluster: bool,
                 peers: PeerConnections) -> None:
        self.writer = writer
        self.topics = topics
        self.node_id = node_id
        self.in_cluster = in_cluster
        self._peers = peers

    def _leader(self, tp: TopicPartitionKey) -> int | None:
        """The partition's leader (-1: none now); None when the partition is gone (its topic deleted)."""
        topic = self.topics.get(tp[0])
        if topic is None or tp[1] not in topic.replicas:
            return None
        return topic.leader(tp[1]) if self.in_cluster else self.node_id

    async def send_round(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                         partitions: set[TopicPartitionKey], transaction_version: int = 0) -> set[TopicPartitionKey]:
        """Try every partition once; returns those still without their marker."""
        by_leader: dict[int, list[TopicPartitionKey]] = {}
        remaining: set[TopicPartitionKey] = set()
        for tp in sorted(partitions):
            leader = self._leader(tp)
            if leader is None:
                continue  # deleted: nothing to close there
            if leader < 0:
                remaining.add(tp)
            else:
                by_leader.setdefault(leader, []).append(tp)
        # Each leader is asked at once (its own connection, or this broker's log): one slow or
        # unreachable broker does not hold back the markers of the others in this round.
        answers = await asyncio.gather(*(
            self.writer.write(producer_id, producer_epoch, commit, coordinator_epoch, tps, transaction_version)
            if leader == self.node_id
            else self._send(leader, producer_id, producer_epoch, commit, coordinator_epoch, tps, transaction_version)
            for leader, tps in by_leader.items()))
        for (leader, tps), codes in zip(by_leader.items(), answers, strict=True):
            for tp, code in zip(tps, codes, strict=True):
                if code in _SETTLED:
                    if code != ErrorCode.NONE:
                        log.warning("transaction marker not written: not needed or never writable there",
                                    error=code.name,
                                    partition=f"{tp[0]}-{tp[1]}", producer_id=producer_id)
                elif code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self._leader(tp) is None:
                    pass  # deleted meanwhile
                else:
                    log.info("transaction marker not written yet", partition=f"{tp[0]}-{tp[1]}", leader=leader,
                             error=code.name)
                    remaining.add(tp)
        return remaining

    async def _send(self, broker_id: int, producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int, partitions: list[TopicPartitionKey],
                    transaction_version: int = 0) -> list[ErrorCode]:
        """WriteTxnMarkers to another broker; every partition NETWORK_EXCEPTION if it cannot be asked."""
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=[WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()],
            coordinator_epoch=coordinator_epoch, transaction_version=transaction_version)])
        try:
            answer = await self._peers.request(broker_id, request, WRITE_TXN_MARKERS_VERSION,
                                               oldest=WRITE_TXN_MARKERS_OLDEST)
        except Exception as exc:  # unreachable, closed, timed out: the next round asks again
            log.info("cannot send transaction markers", broker=broker_id, error=repr(exc))
            return [ErrorCode.NETWORK_EXCEPTION] * len(partitions)
        found = {(t.name, p.partition_index): ErrorCode(p.error_code)
                 for m in answer.markers for t in m.topics for p in t.partitions}
        return [found.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in partitions]
