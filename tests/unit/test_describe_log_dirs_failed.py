"""DescribeLogDirs of a failed log dir (broker/log/dir_health.py), with a fake broker: Kafka answers an
offline dir KAFKA_STORAGE_ERROR with no topics (ReplicaManager.describeLogDirs)."""

from dataclasses import dataclass, field
from pathlib import Path

from broker.handlers.k35_describe_log_dirs import describe_log_dirs
from broker.log import TopicPartition
from broker.request_context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
from tests.unit.fakes import request_of


class FakeSpace:
    total_bytes, free_bytes = 1000, 500

    async def check(self) -> None:
        pass


@dataclass
class FakeLog:
    """What DescribeLogDirs reads of a PartitionLog."""

    offline: bool
    high_watermark: int = 3
    log_end_offset: int = 3
    size_bytes: int = 70


@dataclass
class FakeHealth:
    failed: bool


@dataclass
class FakeLogs:
    """What DescribeLogDirs reads of the LogManager: its one dir, its logs, its volume and health."""

    health: FakeHealth
    logs: dict[TopicPartition, FakeLog] = field(default_factory=dict)
    log_dir: Path = Path("/data/logs")
    space: FakeSpace = field(default_factory=FakeSpace)


@dataclass
class LogDirBroker:
    logs: FakeLogs
    authorizer: None = None


def _broker(failed_reason: str | None) -> LogDirBroker:
    failed = failed_reason is not None
    return LogDirBroker(FakeLogs(FakeHealth(failed), {TopicPartition("t", 0): FakeLog(offline=failed)}))


async def _describe(broker: LogDirBroker) -> DescribeLogDirsResponse.DescribeLogDirsResult:
    request = request_of(DescribeLogDirsRequest(topics=None), 4)
    answer = await describe_log_dirs(broker, request, RequestContext())
    assert answer.error_code == ErrorCode.NONE
    [result] = answer.results
    return result


async def test_a_healthy_dir_lists_its_partitions():
    result = await _describe(_broker(None))
    assert result.error_code == ErrorCode.NONE and [t.name for t in result.topics] == ["t"]
    assert (result.total_bytes, result.usable_bytes) == (1000, 500)


async def test_a_failed_dir_is_a_storage_error_with_no_topics():
    result = await _describe(_broker("EIO"))
    assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR and result.topics == []
    assert result.log_dir == "/data/logs" and (result.total_bytes, result.usable_bytes) == (-1, -1)
