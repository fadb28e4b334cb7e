"""ListOffsets and OffsetForLeaderEpoch against a real broker process: special timestamps and the
versions that introduced them, timestamp lookups down to the record, isolation levels, duplicates."""

import time

import pytest

from protocol.errors import ErrorCode
from protocol.messages import ListOffsetsRequest
from tests.broker.data_wire import (
    batch,
    create_topic,
    delete_records,
    list_offsets,
    offset_for_leader_epoch,
    produce,
)

T0 = int(time.time() * 1000) - 3_600_000  # recent: retention (7 days) must not delete them


_topics = iter(range(10_000))


def new_topic(client) -> str:
    name = f"offsets-{next(_topics)}"
    create_topic(client, name, 1)
    return name


def filled(client) -> str:
    """Offsets 0-2 at T0+10, +20, +30 (one batch); 3 at T0+5; 4-5 at T0+40, +50 (one batch)."""
    name = new_topic(client)
    produce(client, name, 0, batch([b"a", b"b", b"c"], timestamps=[T0 + 10, T0 + 20, T0 + 30]))
    produce(client, name, 0, batch([b"d"], timestamps=[T0 + 5]))
    produce(client, name, 0, batch([b"e", b"f"], timestamps=[T0 + 40, T0 + 50]))
    return name


def answer(part) -> tuple[int, int, int]:
    return part.error_code, part.offset, part.timestamp


def test_empty_partition(client):
    name = new_topic(client)
    assert answer(list_offsets(client, name, 0, -1)) == (0, 0, -1)
    assert answer(list_offsets(client, name, 0, -2)) == (0, 0, -1)
    assert answer(list_offsets(client, name, 0, -3)) == (0, -1, -1)
    assert answer(list_offsets(client, name, 0, T0)) == (0, -1, -1)


@pytest.mark.parametrize("version", range(1, 11))
def test_latest_and_earliest_in_every_version(client, version):
    name = filled(client)
    assert answer(list_offsets(client, name, 0, -1, version=version)) == (0, 6, -1)
    assert answer(list_offsets(client, name, 0, -2, version=version)) == (0, 0, -1)
    if version >= 4:
        assert list_offsets(client, name, 0, -1, version=version).leader_epoch == 0


@pytest.mark.parametrize("timestamp, expected", [
    (T0, (0, 0, T0 + 10)),
    (T0 + 10, (0, 0, T0 + 10)),
    (T0 + 15, (0, 1, T0 + 20)),      # inside the first batch: the record, not the batch
    (T0 + 30, (0, 2, T0 + 30)),
    (T0 + 31, (0, 4, T0 + 40)),      # offset 3 (T0+5) is earlier in time
    (T0 + 45, (0, 5, T0 + 50)),
    (T0 + 51, (0, -1, -1)),          # after the last record: -1/-1, not an error
], ids=lambda value: f"T0+{value - T0}" if isinstance(value, int) else None)  # ids the same in every xdist worker
def test_by_timestamp(client, timestamp, expected):
    name = filled(client)
    assert answer(list_offsets(client, name, 0, timestamp)) == expected


def test_max_timestamp(client):
    name = filled(client)
    assert answer(list_offsets(client, name, 0, -3, version=7)) == (0, 5, T0 + 50)
    other = new_topic(client)
    produce(client, other, 0, batch([b"a", b"b", b"c"], timestamps=[T0 + 1, T0 + 9, T0 + 2]))
    produce(client, other, 0, batch([b"d"], timestamps=[T0 + 3]))
    assert answer(list_offsets(client, other, 0, -3, version=7)) == (0, 1, T0 + 9)


@pytest.mark.parametrize("timestamp, min_version", [(-3, 7), (-4, 8), (-5, 9)])
def test_special_timestamps_need_their_version(client, timestamp, min_version):
    name = filled(client)
    refused = list_offsets(client, name, 0, timestamp, version=min_version - 1)
    assert refused.error_code == ErrorCode.UNSUPPORTED_VERSION and (refused.offset, refused.timestamp) == (-1, -1)
    assert list_offsets(client, name, 0, timestamp, version=min_version).error_code == ErrorCode.NONE


@pytest.mark.parametrize("timestamp", [-6, -7, -100])
def test_unknown_special_timestamps(client, timestamp):
    name = filled(client)
    assert list_offsets(client, name, 0, timestamp, version=10).error_code == ErrorCode.UNSUPPORTED_VERSION


def test_earliest_local_and_latest_tiered(client):
    name = filled(client)
    assert delete_records(client, name, 0, 2).error_code == 0
    assert answer(list_offsets(client, name, 0, -4, version=8)) == (0, 2, -1)
    tiered = list_offsets(client, name, 0, -5, version=9)
    assert answer(tiered) == (0, -1, -1) and tiered.leader_epoch == -1


def test_after_delete_records(client):
    name = filled(client)
    assert delete_records(client, name, 0, 4).error_code == 0
    assert answer(list_offsets(client, name, 0, -2)) == (0, 4, -1)
    assert answer(list_offsets(client, name, 0, T0)) == (0, 4, T0 + 40)  # searches start at the log start
    assert answer(list_offsets(client, name, 0, -3)) == (0, 5, T0 + 50)


@pytest.mark.parametrize("isolation", [0, 1])
def test_isolation_levels_and_replica_ids(client, isolation):
    name = filled(client)
    assert list_offsets(client, name, 0, -1, isolation_level=isolation).offset == 6
    assert list_offsets(client, name, 0, -1, replica_id=-2).offset == 6  # debugging id: the log end


def test_duplicates_are_invalid_requests(client):
    name = filled(client)
    part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=name, partitions=[part(partition_index=0, timestamp=-1), part(partition_index=0, timestamp=-2)])])
    codes = [p.error_code for p in client.request(request, 7).topics[0].partitions]
    assert codes == [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]


def test_unknown_topic_and_fencing(client):
    assert list_offsets(client, "nope", 0, -1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    name = filled(client)
    assert list_offsets(client, name, 9, -1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert list_offsets(client, name, 0, -1, current_leader_epoch=3).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(client, version):
    empty = new_topic(client)
    assert (offset_for_leader_epoch(client, empty, 0, 0, version=version).leader_epoch,
            offset_for_leader_epoch(client, empty, 0, 0, version=version).end_offset) == (0, 0)
    name = filled(client)
    found = offset_for_leader_epoch(client, name, 0, 0, version=version)
    assert (found.error_code, found.leader_epoch, found.end_offset) == (0, 0, 6)
    later = offset_for_leader_epoch(client, name, 0, 3, version=version)
    assert (later.leader_epoch, later.end_offset) == (-1, -1)  # above every epoch known: as Kafka answers
    assert offset_for_leader_epoch(client, name, 0, 0, current_leader_epoch=2, version=version).error_code == \
        ErrorCode.UNKNOWN_LEADER_EPOCH
    assert offset_for_leader_epoch(client, "nope", 0, 0, version=version).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
