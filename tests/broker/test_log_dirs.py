"""DescribeLogDirs on one broker process: the sizes it reports are the bytes of the partition's segment
files on disk, before and after DeleteRecords frees whole segments, and the volume's usable bytes
move with what the disk really has (what `kafka-log-dirs` shows an operator). Kafka's layout and
codes at every version are judged in tests/differential/test_every_version.py."""

from __future__ import annotations

import os

import pytest

from protocol.messages import DescribeLogDirsRequest
from tests.broker.data_wire import batch, create_topic, delete_records, produce

Topic = DescribeLogDirsRequest.DescribableLogDirTopic


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    # Ebb-only: segments of a few batches, below Kafka's 1 MiB minimum, so DeleteRecords frees whole ones
    return {"ebb.testing.small.segments.enable": "true"}


def describe(client, topics, version: int = 4):
    answer = client.send(DescribeLogDirsRequest(topics=topics), version)
    [result] = answer.results
    return result


def sizes(result) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}


def on_disk(broker, topic: str, partition: int) -> int:
    directory = broker.data_dir / "logs" / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def test_sizes_are_the_segment_files_and_deleting_records_frees_them(broker, client):
    create_topic(client, "measured", partitions=2, configs={"segment.bytes": "400"})
    for i in range(12):
        assert produce(client, "measured", 0, batch([b"%03d" % i * 40])).error_code == 0
    assert produce(client, "measured", 1, batch([b"one"])).error_code == 0

    result = describe(client, [Topic(topic="measured", partitions=[0, 1, 5]), Topic(topic="nowhere", partitions=[0])])
    assert result.error_code == 0
    assert result.log_dir == str((broker.data_dir / "logs").absolute())
    before = sizes(result)
    assert set(before) == {("measured", 0), ("measured", 1)}  # neither a missing partition nor topic
    assert before[("measured", 0)] == on_disk(broker, "measured", 0) > 2 * 400  # several segments
    assert before[("measured", 1)] == on_disk(broker, "measured", 1) > 0
    assert all(p.offset_lag == 0 and not p.is_future_key for t in result.topics for p in t.partitions)
    stat = os.statvfs(broker.data_dir)
    assert result.total_bytes == stat.f_blocks * stat.f_frsize
    assert abs(result.usable_bytes - stat.f_bavail * stat.f_frsize) < 64 << 20  # the disk is shared

    assert delete_records(client, "measured", 0, 11).error_code == 0
    after = sizes(describe(client, [Topic(topic="measured", partitions=[0])]))
    assert after[("measured", 0)] < before[("measured", 0)]  # the segments wholly below 11 are gone
    assert after[("measured", 0)] == on_disk(broker, "measured", 0)


def test_null_topics_lists_every_partition_and_old_versions_have_no_volume_bytes(client):
    create_topic(client, "listed", partitions=3)
    result = describe(client, None, version=1)
    assert {("listed", p) for p in range(3)} <= set(sizes(result))
    assert result.total_bytes == -1 and result.usable_bytes == -1  # v4 added them: the defaults below
