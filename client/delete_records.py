"""DeleteRecords from the client side (KIP-107, and KIP-1343's leader-only mode), as the KIP's admin API has it.

    result = await admin.delete_records({("events", 0): 100}, leader_only=True)
    for tp, deleted in result.partition_results().items():
        print(tp, deleted.low_watermark, deleted.leader_log_start_offset, deleted.error)

Each partition's `DeletedRecords` carries the low watermark (the smallest log start offset over the
alive replicas) and the leader's own log start offset, which only v3 reports: -1 from older brokers.
Leader-only needs v3; a broker without it fails those partitions with UNSUPPORTED_VERSION and is never
sent a weaker request (no silent downgrade). Without leader-only, older brokers get v2 or lower.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import DeleteRecordsRequest

from .cluster import Cluster
from .connection import BrokerConnection
from .types import PartitionKey, TopicPartition
from .versions import broker_max

LEADER_ONLY_MIN_VERSION = 3  # DeleteRecords v3: LeaderOnly in the request, LeaderLogStartOffset in the answer


@dataclass
class DeletedRecords:
    """One partition's outcome. `leader_log_start_offset` is -1 when unknown (a broker below v3, or an error)."""

    low_watermark: int
    leader_log_start_offset: int = -1
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.NONE


class DeleteRecordsResult:
    """What `Admin.delete_records` returns: one `DeletedRecords` per partition asked for."""

    def __init__(self, results: Mapping[TopicPartition, DeletedRecords]):
        self._results = dict(results)

    def partition_results(self) -> dict[TopicPartition, DeletedRecords]:
        return dict(self._results)

    def low_watermarks(self) -> dict[TopicPartition, DeletedRecords]:
        """Deprecated name of `partition_results()`: the results carry more than the low watermark."""
        warnings.warn("DeleteRecordsResult.low_watermarks() is deprecated; use partition_results()",
                      DeprecationWarning, stacklevel=2)
        return self.partition_results()

    def failed(self) -> dict[TopicPartition, DeletedRecords]:
        return {tp: r for tp, r in self._results.items() if not r.ok}

    def __repr__(self) -> str:
        return f"DeleteRecordsResult({self._results!r})"


def failed_delete(code: ErrorCode, message: str | None) -> DeletedRecords:
    return DeletedRecords(-1, -1, code, message)


async def delete_records(cluster: Cluster, offsets: Mapping[PartitionKey, int], *, leader_only: bool,
                         timeout_ms: int, request_timeout_s: float) -> DeleteRecordsResult:
    """One DeleteRecords per leader broker; see the module docstring."""
    for tp, offset in offsets.items():
        if offset < -1:
            raise ValueError(f"offset {offset} for {TopicPartition(*tp)}: use >= 0, or -1 for the high watermark")
    Req = DeleteRecordsRequest

    async def send(conn: BrokerConnection, share: dict[TopicPartition, int]) -> dict[TopicPartition, DeletedRecords]:
        if leader_only:
            top = broker_max(ApiKey.DELETE_RECORDS, conn.api_versions)
            if top is None or top < LEADER_ONLY_MIN_VERSION:
                offered = "does not offer DeleteRecords" if top is None else f"offers DeleteRecords up to v{top}"
                message = f"broker {conn.address} {offered}; leader-only needs v{LEADER_ONLY_MIN_VERSION}"
                return {tp: failed_delete(ErrorCode.UNSUPPORTED_VERSION, message) for tp in share}
            version = conn.pick_version(ApiKey.DELETE_RECORDS, low=LEADER_ONLY_MIN_VERSION)
        else:
            version = conn.pick_version(ApiKey.DELETE_RECORDS)
        by_topic: dict[str, list] = {}
        for tp, offset in share.items():
            by_topic.setdefault(tp.topic, []).append(
                Req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=tp.partition, offset=offset))
        request = Req(topics=[Req.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                      timeout_ms=timeout_ms, leader_only=leader_only)
        response = await conn.request(request, version=version, timeout_s=request_timeout_s)
        return {
            TopicPartition(t.name, p.partition_index): DeletedRecords(
                p.low_watermark,
                p.leader_log_start_offset if version >= LEADER_ONLY_MIN_VERSION else -1,
                ErrorCode.from_code(p.error_code),
            )
            for t in response.topics for p in t.partitions
        }

    results = await cluster.for_each_leader(offsets, send, failed_delete, what="DeleteRecords",
                                            timeout_s=request_timeout_s)
    return DeleteRecordsResult(results)
