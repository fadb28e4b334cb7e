"""DescribeLogDirs of a failed log dir (broker/log/dir_health.py), with a fake broker: Kafka answers an
offline dir KAFKA_STORAGE_ERROR with no topics (ReplicaManager.describeLogDirs)."""

from pathlib import Path
from types import SimpleNamespace

from broker.handlers.k35_describe_log_dirs import describe_log_dirs
from broker.log import TopicPartition
from broker.request_context import RequestContext
from protocol.errors import ErrorCode
from protocol.messages import DescribeLogDirsRequest


class FakeSpace:
    total_bytes, free_bytes = 1000, 500

    async def check(self) -> None:
        pass


def _broker(failed_reason: str | None) -> SimpleNamespace:
    log = SimpleNamespace(offline=failed_reason is not None, high_watermark=3, log_end_offset=3, size_bytes=70)
    logs = SimpleNamespace(logs={TopicPartition("t", 0): log}, log_dir=Path("/data/logs"), space=FakeSpace(),
                           health=SimpleNamespace(failed=failed_reason is not None))
    return SimpleNamespace(authorizer=None, logs=logs)


async def _describe(broker: SimpleNamespace):
    request = SimpleNamespace(body=DescribeLogDirsRequest(topics=None))
    answer = await describe_log_dirs(broker, request, RequestContext())  # type: ignore[arg-type]
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
