"""The broker-side API over committed offsets (`broker.groups.committed_offsets`,
`min_committed_offset`), retention, the group partition rule and the `__consumer_offsets` record
formats — on a real Broker object in this process (real logs, no network round trips)."""

from __future__ import annotations

import struct

import pytest

from broker.app import Broker
from broker.config import build_config
from broker.group import JoinRequest, MinCommittedOffset, OffsetCommit
from broker.group import records as group_records
from broker.group.group import now_ms
from broker.group.offsets_store import OFFSETS_TOPIC, java_string_hash, partition_for
from broker.group_configs import MemberTimeouts
from broker.replica import AppendOrigin
from protocol.control_records import ControlType, build_marker_batch
from protocol.errors import ErrorCode
from protocol.messages import GroupMetadataValue, OffsetCommitValue
from protocol.records import RecordBatch
from tests.broker.group_wire import subscription

RETENTION_MS = 10_080 * 60_000  # offsets.retention.minutes default


def _config(log_dir):
    return build_config({
        "node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(log_dir),
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
    })


@pytest.fixture
async def broker(tmp_path):
    b = Broker(_config(tmp_path / "logs"))
    await b.start()
    await b.topics.create("t", 2, 1)
    await b.topics.create("u", 1, 1)
    try:
        yield b
    finally:
        await b.stop()


async def simple_commit(broker, group: str, offsets: dict[tuple[str, int], int], retention_ms: int = -1):
    commits = [OffsetCommit(t, p, o, -1, None) for (t, p), o in offsets.items()]
    errors = await broker.groups.offsets.commit(group, -1, "", None, retention_ms, commits, 8)
    assert set(errors) == {ErrorCode.NONE}


async def live_member(broker, group: str, *topics: str, protocol_type: str = "consumer"):
    """A one-member group, joined (v3: no MEMBER_ID_REQUIRED round) and synced: Stable."""
    metadata = subscription(*topics) if protocol_type == "consumer" else b"opaque"
    result = await broker.groups.join_group(JoinRequest(
        group_id=group, member_id="", group_instance_id=None, session_timeout_ms=30_000,
        rebalance_timeout_ms=30_000, protocol_type=protocol_type, protocols=[("range", metadata)], client_id="unit",
        client_host="/127.0.0.1", version=3))
    assert result.error == ErrorCode.NONE
    synced = await broker.groups.sync_group(group, result.generation_id, result.member_id, None, None, None,
                                            [(result.member_id, b"")])
    assert synced.error == ErrorCode.NONE
    return result


# --- the partition rule ------------------------------------------------------------------------------


def test_java_string_hash_matches_java():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("") == 0
    assert java_string_hash("\u00e9") == 233
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # two UTF-16 units, as Java counts them
    assert java_string_hash("polygenelubricants") == -(2**31)


def test_partition_for_is_kafkas_rule():
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(Integer.MIN_VALUE) is 0
    assert java_string_hash("my-consumer-group-0") == -1322913908  # negative: abs() before the modulo
    assert partition_for("my-consumer-group-0", 50) == 1322913908 % 50


# --- committed offsets and their minimum -------------------------------------------------------------


async def test_min_committed_offset_over_groups(broker):
    groups = broker.groups
    assert groups.min_committed_offset("t", 0) == MinCommittedOffset(None, ())
    assert groups.committed_offsets("t", 0) == {}
    await simple_commit(broker, "a", {("t", 0): 10})
    await simple_commit(broker, "b", {("t", 0): 4, ("t", 1): 7})
    assert groups.committed_offsets("t", 0) == {"a": 10, "b": 4}
    assert groups.min_committed_offset("t", 0) == (4, ())
    assert groups.min_committed_offset("t", 1) == (7, ())
    assert groups.min_committed_offset("u", 0) == (None, ())
    await simple_commit(broker, "b", {("t", 0): 12})  # a later commit replaces the earlier one
    assert groups.min_committed_offset("t", 0) == (10, ())
    offset, active = groups.min_committed_offset("t", 0)
    assert (offset, active) == (10, ())


async def test_active_groups_are_those_with_members_consuming_the_topic(broker):
    groups = broker.groups
    await simple_commit(broker, "idle", {("t", 0): 3})
    await live_member(broker, "reading-t", "t")
    await live_member(broker, "reading-u", "u")
    # A group with members that has not committed yet is active: its position is unknown.
    assert groups.min_committed_offset("t", 0) == (3, ("reading-t",))
    assert groups.min_committed_offset("u", 0) == (None, ("reading-u",))
    # A member of a non-consumer protocol counts where it committed.
    connect = await live_member(broker, "connect", protocol_type="connect")
    errors = await groups.offsets.commit("connect", connect.generation_id, connect.member_id, None, -1,
                                         [OffsetCommit("t", 1, 5, -1, None)], 8)
    assert errors == [ErrorCode.NONE]
    assert groups.min_committed_offset("t", 1) == (5, ("connect", "reading-t"))
    assert groups.min_committed_offset("t", 0) == (3, ("reading-t",))
    # Leaving makes a group inactive; its committed offset stays.
    errors = await groups.offsets.commit("reading-t", 1, (member := groups.groups["reading-t"].leader_id), None, -1,
                                         [OffsetCommit("t", 0, 8, -1, None)], 8)
    assert errors == [ErrorCode.NONE]
    assert await groups.leave_group("reading-t", [(member, None)]) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert groups.min_committed_offset("t", 0) == (3, ())
    assert groups.committed_offsets("t", 0) == {"idle": 3, "reading-t": 8}


async def test_deleted_offsets_and_groups_leave_the_minimum(broker):
    groups = broker.groups
    await simple_commit(broker, "low", {("t", 0): 1})
    await simple_commit(broker, "high", {("t", 0): 9})
    assert groups.min_committed_offset("t", 0).offset == 1
    assert await groups.offsets.delete("low", [("t", 0)]) == {("t", 0): ErrorCode.NONE}
    assert groups.min_committed_offset("t", 0).offset == 9
    assert await groups.delete_groups(["high"]) == {"high": ErrorCode.NONE}
    assert groups.min_committed_offset("t", 0) == (None, ())


async def test_committed_offsets_are_replayed_after_a_restart(tmp_path):
    first = Broker(_config(tmp_path / "logs"))
    await first.start()
    try:
        await first.topics.create("t", 2, 1)
        await simple_commit(first, "kept", {("t", 0): 5, ("t", 1): 6})
        await simple_commit(first, "gone", {("t", 0): 1})
        await first.groups.delete_groups(["gone"])
        await live_member(first, "live", "t")
    finally:
        await first.stop()
    again = Broker(_config(tmp_path / "logs"))
    await again.start()
    try:
        assert again.groups.committed_offsets("t", 0) == {"kept": 5}
        assert again.groups.min_committed_offset("t", 1) == (6, ("live",))  # the Stable group came back
    finally:
        await again.stop()


# --- retention ---------------------------------------------------------------------------------------


async def test_simple_group_offsets_expire_after_retention_from_the_commit(broker):
    groups = broker.groups
    await simple_commit(broker, "simple", {("t", 0): 5})
    committed_at = groups.store.get("simple", "t", 0).commit_timestamp
    assert await groups.offsets.expire(now=committed_at + RETENTION_MS - 1) == 0
    assert await groups.offsets.expire(now=committed_at + RETENTION_MS) == 1
    assert groups.committed_offsets("t", 0) == {}
    assert "simple" not in groups.groups  # an empty group left without offsets is deleted


async def test_explicit_retention_time_expires_the_offset_then(broker):
    groups = broker.groups
    await simple_commit(broker, "short", {("t", 0): 5}, retention_ms=1_000)
    committed_at = groups.store.get("short", "t", 0).commit_timestamp
    assert await groups.offsets.expire(now=committed_at + 999) == 0
    assert await groups.offsets.expire(now=committed_at + 1_000) == 1


async def test_stable_consumer_group_keeps_offsets_of_subscribed_topics(broker):
    groups = broker.groups
    member = await live_member(broker, "consumer", "t")
    errors = await groups.offsets.commit("consumer", member.generation_id, member.member_id, None, -1,
                                         [OffsetCommit("t", 0, 4, -1, None), OffsetCommit("u", 0, 2, -1, None)], 8)
    assert errors == [ErrorCode.NONE, ErrorCode.NONE]
    assert await groups.offsets.expire(now=now_ms() + 10 * RETENTION_MS) == 1  # only "u": not subscribed
    assert groups.committed_offsets("t", 0) == {"consumer": 4}
    assert groups.committed_offsets("u", 0) == {}
    # Once the group is empty, retention counts from when it emptied.
    await groups.leave_group("consumer", [(member.member_id, None)])
    emptied_at = groups.groups["consumer"].state_timestamp_ms
    assert await groups.offsets.expire(now=emptied_at + RETENTION_MS - 1) == 0
    assert await groups.offsets.expire(now=emptied_at + RETENTION_MS) == 1
    assert "consumer" not in groups.groups


# --- record formats ------------------------------------------------------------------------------------


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_offset_record_bytes_are_kafkas():
    key = group_records.offset_key("g", "topic", 3)
    assert key == struct.pack(">h", 1) + _string("g") + _string("topic") + struct.pack(">i", 3)
    value = group_records.offset_value(42, 5, "meta", 1_700_000_000_000, None)
    assert value == struct.pack(">hqi", 3, 42, 5) + _string("meta") + struct.pack(">q", 1_700_000_000_000)
    with_expiry = group_records.offset_value(42, 5, "", 1000, 2000)
    assert with_expiry == struct.pack(">hq", 1, 42) + _string("") + struct.pack(">qq", 1000, 2000)
    parsed = group_records.parse_key(key)
    assert (parsed.group, parsed.topic, parsed.partition) == ("g", "topic", 3)


@pytest.mark.parametrize("version", range(0, 5))
def test_offset_values_of_every_version_are_read(version):
    value = OffsetCommitValue(offset=7, leader_epoch=2 if version >= 3 else -1, metadata="m", commit_timestamp=99,
                              expire_timestamp=120 if version == 1 else -1)
    parsed = group_records.parse_offset_value(struct.pack(">h", version) + OffsetCommitValue[version].encode(value))
    assert parsed == value


def test_newer_flexible_values_are_read_as_v4():
    value = OffsetCommitValue(offset=7, leader_epoch=2, metadata="m", commit_timestamp=99)
    assert group_records.parse_offset_value(struct.pack(">h", 5) + OffsetCommitValue[4].encode(value)) == value


def test_group_records_round_trip_and_key_of_kafka():
    assert group_records.group_key("grp") == struct.pack(">h", 2) + _string("grp")
    value = GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range", leader="m1",
                               current_state_timestamp=5, members=[GroupMetadataValue.MemberMetadata(
                                   member_id="m1", group_instance_id="i", client_id="c", client_host="/h",
                                   rebalance_timeout=100, session_timeout=200, subscription=b"s", assignment=b"a")])
    encoded = group_records.group_value(value)
    assert encoded[:2] == struct.pack(">h", 3)
    assert group_records.parse_group_value(encoded) == value


def test_other_record_types_are_unknown():
    with pytest.raises(group_records.UnknownRecord):
        group_records.parse_key(struct.pack(">h", 3) + _string("consumer-group-metadata"))


async def test_kip848_consumer_groups_count_for_trimming_and_commit_with_their_epoch(broker):
    """A KIP-848 group with a member subscribed to the topic is active until it commits, and its commit
    (with the member's epoch) counts in the minimum like a classic group's."""
    from broker.group import GroupError
    from broker.group.consumer_groups import ConsumerHeartbeat

    joined = broker.groups.consumer.heartbeat(ConsumerHeartbeat(
        "kip848", "m", 0, None, None, 30_000, ["t"], None, None, {}, "unit", "/127.0.0.1"),
        MemberTimeouts(45_000, 5_000, 0))
    assert broker.groups.min_committed_offset("t", 0) == (None, ("kip848",))
    commits = [OffsetCommit("t", 0, 6, -1, None)]
    stale = broker.groups.offsets.commit("kip848", joined.member_epoch - 1, "m", None, -1, commits, 9)
    with pytest.raises(GroupError) as refused:
        await stale
    assert refused.value.error_code == ErrorCode.STALE_MEMBER_EPOCH
    assert await broker.groups.offsets.commit("kip848", joined.member_epoch, "m", None, -1, commits, 9) == [
        ErrorCode.NONE]
    # As Kafka: a partition whose metadata is too large is not judged by the epoch, only refused for that
    too_large = [OffsetCommit("t", 0, 6, -1, "x" * (broker.groups.offsets.metadata_max_bytes + 1))]
    assert await broker.groups.offsets.commit("kip848", joined.member_epoch - 1, "m", None, -1, too_large, 9) == [
        ErrorCode.OFFSET_METADATA_TOO_LARGE]
    assert broker.groups.min_committed_offset("t", 0) == (6, ("kip848",))
    assert broker.groups.offsets.fetch("kip848", [("t", [0])], "m", joined.member_epoch)[0][1][0][1].offset == 6
    # OffsetDelete: a topic the members subscribe to stays; another goes
    await simple_commit_as_member(broker, joined.member_epoch, {("u", 0): 2})
    deleted = await broker.groups.offsets.delete("kip848", [("t", 0), ("u", 0)])
    assert deleted == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): ErrorCode.NONE}
    assert broker.groups.offsets.fetch("kip848", [("u", [0])], "m", joined.member_epoch)[0][1][0][1] is None


async def simple_commit_as_member(broker, epoch: int, offsets: dict[tuple[str, int], int]) -> None:
    commits = [OffsetCommit(t, p, o, -1, None) for (t, p), o in offsets.items()]
    assert set(await broker.groups.offsets.commit("kip848", epoch, "m", None, -1, commits, 9)) == {ErrorCode.NONE}


# --- tombstones and TxnOffsetCommit's pending offsets (Kafka's OffsetMetadataManager) ---------------

PRODUCER = 4000


async def txn_commit(broker, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """TxnOffsetCommit's offsets, pending until `end_txn` (the transaction's checks are the handler's)."""
    commits = [OffsetCommit(t, p, o, -1, None) for (t, p), o in offsets.items()]
    errors = await broker.groups.offsets.commit(group, -1, "", None, -1, commits, 3, producer=(PRODUCER, 0))
    assert set(errors) == {ErrorCode.NONE}


async def end_txn(broker, group: str, commit: bool) -> None:
    """The transaction's marker on the group's offsets partition, written as the coordinator writes it."""
    index = broker.groups.store.partition_for(group)
    assert await broker.transactions.markers.write(PRODUCER, 0, commit, 0, [(OFFSETS_TOPIC, index)]) == \
        [ErrorCode.NONE]


def offset_state(broker, group: str) -> tuple[int | None, bool]:
    committed = broker.groups.store.get(group, "t", 0)
    return None if committed is None else committed.offset, broker.groups.store.has_pending(group, "t", 0)


async def _in_memory_and_replayed(tmp_path, steps) -> list[tuple[int | None, bool]]:
    """The state of g's t-0 after `steps`, then after a restart (the replay of the same log)."""
    first = Broker(_config(tmp_path / "logs"))
    await first.start()
    try:
        await first.topics.create("t", 1, 1)
        await steps(first)
        states = [offset_state(first, "g")]
    finally:
        await first.stop()
    again = Broker(_config(tmp_path / "logs"))
    await again.start()
    try:
        return [*states, offset_state(again, "g")]
    finally:
        await again.stop()


async def test_a_tombstone_takes_the_pending_offsets_written_before_it(tmp_path):
    """OffsetDelete after a TxnOffsetCommit, then its commit marker: the marker stored the offset the
    delete had been asked to remove (in memory and replayed alike); Kafka's tombstone drops the pending one."""
    async def steps(broker):
        await simple_commit(broker, "g", {("t", 0): 5})
        await txn_commit(broker, "g", {("t", 0): 7})
        assert await broker.groups.offsets.delete("g", [("t", 0)]) == {("t", 0): ErrorCode.NONE}
        await end_txn(broker, "g", commit=True)

    assert await _in_memory_and_replayed(tmp_path, steps) == [(None, False)] * 2


async def test_offset_delete_and_delete_groups_tombstone_a_partition_with_only_a_pending_offset(tmp_path):
    async def steps(broker):
        await txn_commit(broker, "g", {("t", 0): 7})
        assert await broker.groups.offsets.delete("g", [("t", 0)]) == {("t", 0): ErrorCode.NONE}
        await end_txn(broker, "g", commit=True)
        assert offset_state(broker, "g") == (None, False)
        await txn_commit(broker, "g", {("t", 0): 8})
        assert await broker.groups.delete_groups(["g"]) == {"g": ErrorCode.NONE}
        await end_txn(broker, "g", commit=True)

    assert await _in_memory_and_replayed(tmp_path, steps) == [(None, False)] * 2


async def test_retention_leaves_an_offset_with_a_pending_one_and_its_group(broker):
    groups = broker.groups
    await simple_commit(broker, "simple", {("t", 0): 5})
    await txn_commit(broker, "simple", {("t", 0): 7})
    committed_at = groups.store.get("simple", "t", 0).commit_timestamp
    assert await groups.offsets.expire(now=committed_at + RETENTION_MS) == 0
    assert offset_state(broker, "simple") == (5, True) and "simple" in groups.groups
    await end_txn(broker, "simple", commit=True)
    assert offset_state(broker, "simple") == (7, False)


async def test_an_unloaded_offsets_partition_forgets_its_pending_offsets(broker):
    """Leadership of the group's offsets partition moves away (a cluster): the groups and committed
    offsets were dropped but the pending ones stayed, so when the partition came back its load held
    them on top of what the replay found (a batch the other leader truncated: pending for good, its
    partition UNSTABLE_OFFSET_COMMIT and never expired)."""
    registry, store = broker.groups.registry, broker.groups.store
    await simple_commit(broker, "g", {("t", 0): 5})
    await txn_commit(broker, "g", {("t", 0): 7})
    index = store.partition_for("g")
    registry._unload(index)
    assert offset_state(broker, "g") == (None, False)
    # ... its marker written while another broker led it; then back here and loaded from the log
    partition = broker.replicas.partition(OFFSETS_TOPIC, index)
    await partition.append_records_as_leader(*_marker(commit=False), -1, AppendOrigin.COORDINATOR)
    await registry._load(index, partition)
    assert offset_state(broker, "g") == (5, False)


def _marker(commit: bool):
    data = build_marker_batch(ControlType.COMMIT if commit else ControlType.ABORT, PRODUCER, 0, 0, 1)
    return memoryview(bytearray(data)), RecordBatch(data)
