"""DescribeLogDirs (key 35), versions 1-5 (Kafka 4 removed v0).

What `kafka-log-dirs --describe` prints: per log directory of this broker (Ebb has exactly one), the
partitions it holds among those asked (null Topics: all of them), each with the bytes of its segment
files and its offset lag, and from v4 the size and the free bytes of the volume. As Kafka's
ReplicaManager.describeLogDirs answers:
- a topic is listed only with partitions that were asked and are held here; a topic left without
  any is not listed, nor is a partition this broker holds no replica of;
- OffsetLag is how far the log end is below the partition's high watermark, never negative (0 on a
  leader, whose high watermark never passes its log end); -1 for a log that is offline after an I/O
  error (Kafka's "lag not available");
- IsFutureKey is always false: Ebb has one log dir, so no log is ever being moved to another
  (AlterReplicaLogDirs is not served);
- TotalBytes and UsableBytes (v4+) are a fresh reading of the volume (statvfs: blocks and blocks
  available to an unprivileged user, as Java's FileStore reports them), taken off the event loop;
  the reading also updates the dir's free-space state (log.dir.min.free.bytes);
- IsCordoned (v5) is false: Ebb has no cordoned log dirs (no placement to refuse);
- a failed dir (an I/O error took it offline, broker/log/dir_health.py) is answered
  KAFKA_STORAGE_ERROR with no topics and -1 bytes, as Kafka answers for an offline dir.
With an authorizer the caller needs DESCRIBE on the cluster; without it the answer has no results
and, from v3, CLUSTER_AUTHORIZATION_FAILED at the top (v1-v2 cannot carry it: just no results, as
in Kafka).

Errors: NONE, CLUSTER_AUTHORIZATION_FAILED (top level, v3+), KAFKA_STORAGE_ERROR (the dir's).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from broker.handlers import handles
from broker.log import TopicPartition
from broker.request_context import RequestContext
from broker.security.access import Guarded, allowed_on_cluster
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import DescribeLogDirsRequest, DescribeLogDirsResponse

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
LAG_NOT_AVAILABLE = -1  # Kafka's DescribeLogDirsResponse.INVALID_OFFSET_LAG
_Result = DescribeLogDirsResponse.DescribeLogDirsResult
_Topic = _Result.DescribeLogDirsTopic
_Partition = _Topic.DescribeLogDirsPartition


# What is read here of the broker (its BrokerContext is one): the LogManager's one dir, as Protocols
# so that tests can hand in a failed dir.
class DescribedLog(Protocol):
    """A partition's log (log/log.py's PartitionLog)."""

    @property
    def offline(self) -> bool: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...


class DirFailure(Protocol):
    @property
    def failed(self) -> bool: ...


class DirSpace(Protocol):
    total_bytes: int
    free_bytes: int

    async def check(self) -> None: ...


class DescribedDir(Protocol):
    """The LogManager: its dir, the logs in it, its health and its volume."""

    @property
    def log_dir(self) -> Path: ...
    @property
    def logs(self) -> Mapping[TopicPartition, DescribedLog]: ...
    @property
    def health(self) -> DirFailure: ...
    @property
    def space(self) -> DirSpace: ...


class LogDirBroker(Guarded, Protocol):
    @property
    def logs(self) -> DescribedDir: ...


@handles(API_KEY, "1-5")
async def describe_log_dirs(broker: LogDirBroker, request: Request[DescribeLogDirsRequest],
                            connection: RequestContext) -> DescribeLogDirsResponse:
    if not allowed_on_cluster(broker, connection, Operation.DESCRIBE):
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                       results=[])
    if broker.logs.health.failed:  # as Kafka answers for an offline dir: the error, no topics, no volume
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[_Result(
            error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(broker.logs.log_dir.absolute()), topics=[],
            total_bytes=-1, usable_bytes=-1, is_cordoned=False)])
    held = broker.logs.logs
    asked = None if request.body.topics is None else {
        TopicPartition(topic.topic, index) for topic in request.body.topics for index in topic.partitions}
    by_topic: dict[str, list[_Partition]] = {}
    for tp, log in sorted(held.items()):
        if asked is None or tp in asked:
            by_topic.setdefault(tp.topic, []).append(_describe(tp, log))
    space = broker.logs.space
    await space.check()
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[_Result(
        error_code=ErrorCode.NONE,
        log_dir=str(broker.logs.log_dir.absolute()),
        topics=[_Topic(name=name, partitions=partitions) for name, partitions in by_topic.items()],
        total_bytes=space.total_bytes if space.free_bytes >= 0 else -1,
        usable_bytes=space.free_bytes,
        is_cordoned=False)])


def _describe(tp: TopicPartition, log: DescribedLog) -> _Partition:
    lag = LAG_NOT_AVAILABLE if log.offline else max(log.high_watermark - log.log_end_offset, 0)
    return _Partition(partition_index=tp.partition, partition_size=log.size_bytes, offset_lag=lag,
                      is_future_key=False)
