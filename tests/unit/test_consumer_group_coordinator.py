"""KIP-848 consumer groups inside a whole (one-node) broker's coordinator: how they meet the classic groups
and the offsets (broker/group/coordinator.py, offsets.py)."""

from __future__ import annotations

import asyncio

import pytest

from broker.group import JoinRequest, OffsetCommit
from broker.group.consumer_groups import ConsumerHeartbeat
from broker.group.group import GroupError
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode
from tests.unit.whole_broker import one_node_config, whole_broker

TIMEOUTS = MemberTimeouts(45_000, 5_000, 0)


@pytest.fixture
async def broker(tmp_path):
    config = one_node_config(tmp_path, {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1",
                                        "group.consumer.migration.policy": "disabled"})
    async with whole_broker(config, {"t": 2}) as b:
        yield b


def _join(group: str, member: str = "m") -> ConsumerHeartbeat:
    return ConsumerHeartbeat(group, member, 0, None, None, 30_000, ["t"], None, None, {}, "unit", "/127.0.0.1")


async def test_empty_groups_change_protocol_whatever_the_migration_policy(broker):
    """Kafka's policy governs the online migration of groups with members only: an empty classic group
    (offsets only, as a restarted coordinator loads one) becomes a consumer group, and back."""
    groups = broker.groups
    errors = await groups.offsets.commit("g", -1, "", None, -1, [OffsetCommit("t", 0, 5, -1, None)], 8)
    assert errors == [ErrorCode.NONE]
    answer = groups.consumer.heartbeat(_join("g"), TIMEOUTS)
    assert answer.member_epoch > 0 and "g" in groups.consumer.groups and "g" not in groups.groups
    groups.consumer.heartbeat(ConsumerHeartbeat("g", "m", -1, None, None, -1, None, None, None, None, "unit",
                                                "/127.0.0.1"), TIMEOUTS)
    joined = await groups.join_group(JoinRequest(
        group_id="g", member_id="", group_instance_id=None, session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
        protocol_type="consumer", protocols=[("range", b"")], client_id="unit", client_host="/127.0.0.1",
        version=3))
    assert joined.error == ErrorCode.NONE and "g" not in groups.consumer.groups
    await groups.leave_group("g", [(joined.member_id, None)])


async def test_heartbeats_read_group_configs_from_a_watch_not_the_store(broker):
    """One store read per group, then a data watch keeps the configs current: a heartbeat costs no
    round trip to ZooKeeper; a store that cannot be read is COORDINATOR_NOT_AVAILABLE, not a dropped
    connection."""
    from types import SimpleNamespace

    from broker.cluster.store import StoreUnavailable
    from broker.handlers.k68_consumer_group_heartbeat import consumer_group_heartbeat
    from protocol.messages import ConsumerGroupHeartbeatRequest

    configs, store = broker.group_configs, broker.store
    reads = []
    real_get, real_watch = store.get, store.watch_data
    store.get = lambda path: reads.append(path) or real_get(path)
    store.watch_data = lambda path, callback: reads.append(path) or real_watch(path, callback)
    try:
        assert await configs.followed("g") == {}
        await configs.alter("g", lambda current: {"consumer.heartbeat.interval.ms": "7000"})
        reads.clear()
        for _ in range(3):
            assert await configs.followed("g") == {"consumer.heartbeat.interval.ms": "7000"}
        assert reads == []
        await configs.alter("g", lambda current: {})
        assert await configs.followed("g") == {}

        async def unreachable(*args):
            raise StoreUnavailable("ZooKeeper is down")
        store.get = store.watch_data = unreachable
        request = SimpleNamespace(api_version=1, header=SimpleNamespace(client_id="unit"), body=(
            ConsumerGroupHeartbeatRequest(group_id="other", member_id="m", member_epoch=0, rebalance_timeout_ms=30_000,
                                          subscribed_topic_names=["t"], topic_partitions=[])))
        connection = SimpleNamespace(client_host="127.0.0.1")
        answer = await consumer_group_heartbeat(broker, request, connection)
        assert answer.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    finally:
        store.get, store.watch_data = real_get, real_watch


async def test_consumer_groups_see_one_topics_object_until_a_topic_changes(broker):
    first = broker._consumer_topics()
    assert broker._consumer_topics() is first and set(first) >= {"t"}
    await broker.topics.create("u", 1, 1)
    second = broker._consumer_topics()
    assert second is not first and "u" in second


async def test_offset_commits_to_a_consumer_group_follow_kafkas_checks(broker):
    """ConsumerGroup.validateOffsetCommit's order: epoch < 0 on an empty group is taken whatever the member
    id; a KIP-848 member must commit with OffsetCommit v9+ (TxnOffsetCommit is not checked)."""
    groups = broker.groups
    commit = [OffsetCommit("t", 0, 5, -1, None)]
    joined = groups.consumer.heartbeat(_join("cg"), TIMEOUTS)
    with pytest.raises(GroupError) as refused:
        await groups.offsets.commit("cg", joined.member_epoch, "m", None, -1, commit, 8)
    assert refused.value.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert await groups.offsets.commit("cg", joined.member_epoch, "m", None, -1, commit, 9) == [ErrorCode.NONE]
    assert await groups.offsets.commit("cg", joined.member_epoch, "m", None, -1, commit, 3,
                                       producer=(1, 0)) == [ErrorCode.NONE]
    with pytest.raises(GroupError) as refused:
        await groups.offsets.commit("cg", -1, "someone", None, -1, commit, 9)
    assert refused.value.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    groups.consumer.heartbeat(ConsumerHeartbeat("cg", "m", -1, None, None, -1, None, None, None, None, "unit",
                                                "/127.0.0.1"), TIMEOUTS)
    assert await groups.offsets.commit("cg", -1, "someone", None, -1, commit, 9) == [ErrorCode.NONE]


async def test_consumer_group_offsets_expire_and_empty_groups_go(broker):
    """Kafka's rules for consumer groups: offsets of topics the group does not subscribe to expire by
    offsets.retention.minutes from their commit, all of them once it is empty; an empty group left
    without offsets is deleted."""
    from broker.group.group import now_ms

    groups = broker.groups
    await broker.topics.create("other", 1, 1)
    leave = ConsumerHeartbeat("cg", "m", -1, None, None, -1, None, None, None, None, "unit", "/127.0.0.1")
    joined = groups.consumer.heartbeat(_join("cg"), TIMEOUTS)
    commits = [OffsetCommit("t", 0, 4, -1, None), OffsetCommit("other", 0, 2, -1, None)]
    assert await groups.offsets.commit("cg", joined.member_epoch, "m", None, -1, commits, 9) == [ErrorCode.NONE] * 2
    later = now_ms() + 8 * 24 * 3_600_000  # past the 7 days' default retention
    assert await groups.offsets.expire(now=now_ms()) == 0
    assert await groups.offsets.expire(now=later) == 1  # "other" only: "t" is subscribed
    assert groups.committed_offsets("t", 0) == {"cg": 4} and groups.committed_offsets("other", 0) == {}
    groups.consumer.heartbeat(leave, TIMEOUTS)
    assert await groups.offsets.expire(now=later) == 1
    assert groups.committed_offsets("t", 0) == {} and "cg" not in groups.consumer.groups
    groups.consumer.heartbeat(_join("bare"), TIMEOUTS)  # never committed
    groups.consumer.heartbeat(leave.__class__(**{**leave.__dict__, "group_id": "bare"}), TIMEOUTS)
    assert await groups.offsets.expire(now=now_ms()) == 0
    assert "bare" not in groups.consumer.groups



async def test_an_offset_committed_while_the_last_ones_expire_keeps_the_empty_group(broker, monkeypatch):
    """Expiry counted the group's offsets before writing the tombstones and dropped the group after them:
    an offset committed meanwhile was left to a group that no longer existed."""
    from broker.group.group import now_ms

    groups, store = broker.groups, broker.groups.offsets.store
    joined = groups.consumer.heartbeat(_join("cg"), TIMEOUTS)
    assert await groups.offsets.commit("cg", joined.member_epoch, "m", None, -1,
                                       [OffsetCommit("t", 0, 4, -1, None)], 9) == [ErrorCode.NONE]
    groups.consumer.heartbeat(ConsumerHeartbeat("cg", "m", -1, None, None, -1, None, None, None, None, "unit",
                                                "/127.0.0.1"), TIMEOUTS)  # empty: every offset may expire
    writing, written = asyncio.Event(), asyncio.Event()
    append = store.append

    async def held_tombstones(group_id, entries, *args, **kwargs):
        if all(value is None for _, value in entries):
            writing.set()
            await written.wait()
        return await append(group_id, entries, *args, **kwargs)

    monkeypatch.setattr(store, "append", held_tombstones)
    expiry = asyncio.create_task(groups.offsets.expire(now=now_ms() + 8 * 24 * 3_600_000))
    await writing.wait()
    assert await groups.offsets.commit("cg", -1, "", None, -1, [OffsetCommit("t", 1, 9, -1, None)], 9) == [
        ErrorCode.NONE]
    written.set()
    assert await expiry == 1
    assert groups.committed_offsets("t", 1) == {"cg": 9} and "cg" in groups.consumer.groups

async def test_a_deleted_groups_tombstones_that_fail_are_its_error(broker, monkeypatch):
    """DeleteGroups of an empty share or consumer group whose records' tombstones cannot be written
    answers the coordinator's error for that group (not a dropped connection)."""
    from broker.group.share_groups import ShareHeartbeat

    groups = broker.groups
    await groups.share.heartbeat(ShareHeartbeat("s", "m", 0, None, ["t"], "unit", "/h"), TIMEOUTS)
    await groups.share.heartbeat(ShareHeartbeat("s", "m", -1, None, None, "unit", "/h"), TIMEOUTS)
    groups.consumer.heartbeat(_join("c"), TIMEOUTS)
    await groups.consumer.persist("c", "m")
    groups.consumer.heartbeat(ConsumerHeartbeat("c", "m", -1, None, None, -1, None, None, None, None, "unit",
                                                "/127.0.0.1"), TIMEOUTS)
    await groups.consumer.persist("c", "m")

    async def refused(group_id, entries):
        raise GroupError(ErrorCode.NOT_COORDINATOR, "moved")

    monkeypatch.setattr(groups.share.records, "_append", refused)
    monkeypatch.setattr(groups.consumer.records, "_append", refused)
    assert await groups.delete_groups(["s", "c"]) == {"s": ErrorCode.NOT_COORDINATOR, "c": ErrorCode.NOT_COORDINATOR}
    # Both are still there, as the log still holds them, and a retried deletion goes through.
    assert groups.kind_of("s") == "share" and groups.kind_of("c") == "consumer"
    assert [g.group_id for g in groups.list_groups(set(), set())] == ["c", "s"]
    monkeypatch.undo()
    assert await groups.delete_groups(["s", "c"]) == {"s": ErrorCode.NONE, "c": ErrorCode.NONE}
    assert groups.kind_of("s") is None and groups.kind_of("c") is None
    assert not groups.share.records.written and not groups.consumer.records.written


async def test_one_group_id_has_one_kind_across_classic_consumer_and_share(broker):
    """A KIP-848 consumer group's id is not a share group's (Kafka: GROUP_ID_NOT_FOUND "Group c is not a
    share group." for ShareGroupHeartbeat and for AlterShareGroupOffsets' group), nor a classic group's;
    a share group's id is not a consumer group's."""
    from broker.group.share_groups import ShareHeartbeat

    groups = broker.groups
    groups.consumer.heartbeat(_join("c"), TIMEOUTS)
    await groups.offsets.commit("k", -1, "", None, -1, [OffsetCommit("t", 0, 5, -1, None)], 8)
    for group_id in ("c", "k"):
        with pytest.raises(GroupError) as caught:
            await groups.share.heartbeat(ShareHeartbeat(group_id, "s", 0, None, ["t"], "unit", "/h"), TIMEOUTS)
        assert (caught.value.error_code, caught.value.message) == (
            ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        with pytest.raises(GroupError) as caught:
            await groups.share.ensure(group_id)
        assert caught.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert group_id not in groups.share.groups
    assert groups.kind_of("c") == "consumer" and groups.kind_of("k") == "classic" and groups.kind_of("x") is None
    await groups.share.heartbeat(ShareHeartbeat("s", "m", 0, None, ["t"], "unit", "/h"), TIMEOUTS)
    with pytest.raises(GroupError) as caught:
        groups.consumer.heartbeat(_join("s"), TIMEOUTS)
    assert caught.value.error_code == ErrorCode.GROUP_ID_NOT_FOUND and groups.kind_of("s") == "share"
