"""Consumer groups through the wire with our codec (issue 5): FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and
OffsetDelete against a real broker process, every version, with Kafka's error for each edge.

What Kafka does, checked here (GroupMetadataManager / ClassicGroup / OffsetMetadataManager):
- v4+ first joins get MEMBER_ID_REQUIRED; generations start at 1; only the leader sees members;
- a new member makes the others rejoin (their heartbeats answer REBALANCE_IN_PROGRESS), a leaving
  member or one whose session expires does too;
- commits are accepted from members of the current generation, from anyone with generation -1 on an
  Empty group, and create a "simple" group when the group is unknown;
- the records in __consumer_offsets are Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value,
  in partition abs(java hashCode(group)) % partitions;
- committed offsets and group membership survive SIGKILL; a stopping broker answers parked joins.
"""

from __future__ import annotations

import itertools
import signal
import struct

import pytest

from broker.group.offsets_store import partition_for
from protocol.errors import ErrorCode
from protocol.messages import (
    DescribeConfigsRequest,
    FindCoordinatorRequest,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from tests.broker.data_wire import WireClient, create_topic, fetch, list_offsets, records
from tests.broker.group_wire import (
    Member,
    assignment,
    commit,
    delete_groups,
    delete_offsets,
    describe,
    find_coordinator,
    heartbeat,
    join,
    join_once,
    leave,
    list_groups,
    send_join,
    subscription,
    sync,
)
from tests.broker.group_wire import (
    fetch as fetch_offsets,
)
from tests.broker.wire_client import metadata
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for

E = ErrorCode
PARTITIONS = 7  # offsets.topic.num.partitions here (50 in the conformance brokers)
OVERRIDES = {
    "group.initial.rebalance.delay.ms": "50",
    "group.min.session.timeout.ms": "200",
    "group.max.session.timeout.ms": "60000",
    "offsets.topic.num.partitions": str(PARTITIONS),
}
OFFSETS = "__consumer_offsets"
JOIN_GROUP, SYNC_GROUP = 11, 14
_groups = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("groups"), OVERRIDES) as process:
        with WireClient(process.port) as c:
            create_topic(c, "t", partitions=3)
            create_topic(c, "other", partitions=1)
        yield process


@pytest.fixture
def client(broker):
    with WireClient(broker.port) as c:
        yield c


def new_group() -> str:
    return f"group-{next(_groups)}"


def stable(client, group: str, **kwargs) -> Member:
    """A one-member group, joined and synced."""
    member = join(client, group, **kwargs)
    reply = sync(client, member, {member.member_id: assignment({"t": [0, 1, 2]})})
    assert reply.error_code == E.NONE, E(reply.error_code).name
    return member


# --- FindCoordinator ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 7))
def test_find_coordinator_names_this_broker(client, broker, version):
    found = find_coordinator(client, f"any-{version}", version=version)
    assert (found.error_code, found.node_id, found.host, found.port) == (E.NONE, 1, "127.0.0.1", broker.port)


def test_find_coordinator_batches_keys_from_v4(client, broker):
    reply = client.send(FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b", ""]), 4)
    assert [(c.key, c.error_code, c.node_id, c.port) for c in reply.coordinators] == [
        ("a", E.NONE, 1, broker.port), ("b", E.NONE, 1, broker.port), ("", E.NONE, 1, broker.port)]


@pytest.mark.parametrize("version", [1, 3, 4, 6])
def test_find_coordinator_names_this_broker_for_transaction_keys(client, broker, version):
    found = find_coordinator(client, "my-txn", version=version, key_type=1)
    assert (found.error_code, found.node_id, found.host, found.port) == (E.NONE, 1, "127.0.0.1", broker.port)


@pytest.mark.parametrize("key_type", [2, 9])
def test_find_coordinator_refuses_other_key_types(client, key_type):
    assert find_coordinator(client, "k", version=6, key_type=key_type).error_code == E.INVALID_REQUEST


def test_offsets_topic_is_created_internal_and_compacted(client):
    find_coordinator(client, "creates-the-topic")
    (topic,) = metadata(client, [OFFSETS], version=12).topics
    assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (E.NONE, True, PARTITIONS)
    R = DescribeConfigsRequest.DescribeConfigsResource
    (result,) = client.send(DescribeConfigsRequest(resources=[R(resource_type=2, resource_name=OFFSETS,
                                                                configuration_keys=["cleanup.policy"])]), 4).results
    assert [(c.name, c.value) for c in result.configs] == [("cleanup.policy", "compact")]


# --- __consumer_offsets records -------------------------------------------------------------------


def java_hash(text: str) -> int:
    h = 0
    for ch in text:  # ASCII group ids: one UTF-16 unit each
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _kafka_string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def _last_record(client, group: str, record_type: int):
    """The newest record of `group` of one type in its partition (other groups may share it)."""
    index = partition_for(group, PARTITIONS)
    key_prefix = struct.pack(">h", record_type) + _kafka_string(group)
    found = [r for r in records(fetch(client, OFFSETS, index, 0, max_bytes=10 << 20))
             if r.key is not None and r.key.startswith(key_prefix)]
    assert found, f"no record of {group} in {OFFSETS}-{index}"
    return found[-1]


def test_commit_is_a_kafka_offset_record_in_the_group_partition(client):
    group = "kafka-format-group"
    index = abs(java_hash(group)) % PARTITIONS
    assert partition_for(group, PARTITIONS) == index
    find_coordinator(client, group)
    before = list_offsets(client, OFFSETS, index, -1).offset
    assert commit(client, group, {("t", 1): 42}, metadata="meta", leader_epoch=3) == {("t", 1): E.NONE}
    assert list_offsets(client, OFFSETS, index, -1).offset > before
    record = _last_record(client, group, 1)
    assert record.offset >= before
    # Key: record type 1, then OffsetCommitKey v0 (group, topic, partition) as Kafka writes it.
    assert record.key == struct.pack(">h", 1) + _kafka_string(group) + _kafka_string("t") + struct.pack(">i", 1)
    assert OffsetCommitKey[0].decode(record.key[2:]) == OffsetCommitKey(group=group, topic="t", partition=1)
    # Value: version 3 — offset, leader epoch, metadata, commit timestamp.
    (version,) = struct.unpack(">h", record.value[:2])
    value = OffsetCommitValue[3].decode(record.value[2:])
    assert (version, value.offset, value.leader_epoch, value.metadata) == (3, 42, 3, "meta")
    assert value.commit_timestamp == record.timestamp


def test_explicit_retention_writes_value_version_1(client):
    group = new_group()
    assert commit(client, group, {("t", 0): 1}, version=2, retention_ms=3_600_000) == {("t", 0): E.NONE}
    record = _last_record(client, group, 1)
    assert struct.unpack(">h", record.value[:2]) == (1,)
    value = OffsetCommitValue[1].decode(record.value[2:])
    assert value.expire_timestamp == value.commit_timestamp + 3_600_000


def test_sync_writes_kafka_group_metadata(client):
    group = new_group()
    member = stable(client, group)
    record = _last_record(client, group, 2)
    assert record.key == struct.pack(">h", 2) + _kafka_string(group)
    assert struct.unpack(">h", record.value[:2]) == (3,)
    value = GroupMetadataValue[3].decode(record.value[2:])
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == (
        "consumer", 1, "range", member.member_id)
    (m,) = value.members
    assert (m.member_id, m.client_id, m.client_host, m.session_timeout) == (
        member.member_id, client.client_id, "/127.0.0.1", 10_000)
    assert (m.subscription, m.assignment) == (subscription("t"), assignment({"t": [0, 1, 2]}))


# --- joining ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(4, 10))
def test_first_join_gets_member_id_required(client, version):
    group = new_group()
    first = join_once(client, group, version=version)
    assert first.error_code == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith(client.client_id + "-") and first.generation_id == -1
    second = join_once(client, group, first.member_id, version=version)
    assert (second.error_code, second.member_id, second.generation_id) == (E.NONE, first.member_id, 1)
    assert second.leader == first.member_id and second.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in second.members] == [(first.member_id, subscription("t"))]
    if version >= 7:
        assert second.protocol_type == "consumer"


@pytest.mark.parametrize("version", range(0, 4))
def test_joins_before_v4_are_admitted_at_once(client, version):
    reply = join_once(client, new_group(), version=version)
    assert (reply.error_code, reply.generation_id) == (E.NONE, 1)
    assert reply.leader == reply.member_id and len(reply.members) == 1


@pytest.mark.parametrize("version, protocol_name", [(6, ""), (7, None)])
def test_protocol_name_on_an_error_is_empty_before_v7_and_null_after(client, version, protocol_name):
    reply = join_once(client, new_group(), version=version, session_ms=1)
    assert (reply.error_code, reply.protocol_name) == (E.INVALID_SESSION_TIMEOUT, protocol_name)


def test_a_refused_first_join_leaves_no_group(client):
    group = new_group()
    assert join_once(client, group, protocols=[], version=3).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert group not in {g.group_id for g in list_groups(client).groups}
    assert join_once(client, group, version=4).error_code == E.MEMBER_ID_REQUIRED  # pending: the group stays
    assert group in {g.group_id for g in list_groups(client).groups}


def test_protocol_most_members_prefer_is_chosen(broker):
    group = new_group()
    with WireClient(broker.port) as a, WireClient(broker.port) as b:
        first = join_once(a, group)
        a_corr = send_join(a, group, first.member_id, protocols=[("roundrobin", b"a"), ("range", b"a")])
        second = join_once(b, group)
        b_corr = send_join(b, group, second.member_id, protocols=[("range", b"b"), ("roundrobin", b"b"),
                                                                  ("sticky", b"b")])
        a_reply = a.receive(JOIN_GROUP, 7, a_corr)
        b_reply = b.receive(JOIN_GROUP, 7, b_corr)
    # One vote each: a tie between range and roundrobin, broken the same for both; sticky is not common.
    assert a_reply.protocol_name == b_reply.protocol_name in {"range", "roundrobin"}
    leader = a_reply if a_reply.members else b_reply
    chosen = leader.protocol_name
    assert sorted(m.metadata for m in leader.members) == [b"a", b"b"] and chosen != "sticky"


def test_lifecycle_join_sync_heartbeat_commit_fetch_leave(client):
    group = new_group()
    member = stable(client, group)
    assert heartbeat(client, member) == E.NONE
    assert commit(client, group, {("t", 0): 5, ("t", 2): 8}, member=member) == {("t", 0): E.NONE, ("t", 2): E.NONE}
    error, got = fetch_offsets(client, group, {"t": [0, 1, 2]})
    assert error == E.NONE and {k: v[0] for k, v in got.items()} == {("t", 0): 5, ("t", 1): -1, ("t", 2): 8}
    reply = leave(client, group, (member.member_id, None))
    assert (reply.error_code, [m.error_code for m in reply.members]) == (E.NONE, [E.NONE])
    (described,) = describe(client, group)
    assert (described.group_state, described.members, described.protocol_type) == ("Empty", [], "consumer")
    # Offsets stay after the group empties; the generation moved on when it did.
    assert fetch_offsets(client, group, {"t": [0]})[1][("t", 0)][0] == 5
    assert join(client, group).generation_id == 3


def test_a_new_member_rebalances_the_group_and_a_leaving_one_again(broker):
    group = new_group()
    with WireClient(broker.port) as a, WireClient(broker.port) as b:
        first = stable(a, group)
        required = join_once(b, group)
        b_corr = send_join(b, group, required.member_id)
        # The group waits for the old member: it learns through its heartbeat and rejoins.
        assert wait_for(lambda: heartbeat(a, first) == E.REBALANCE_IN_PROGRESS, what="REBALANCE_IN_PROGRESS")
        assert sync(a, first).error_code == E.REBALANCE_IN_PROGRESS
        a_joined = join(a, group, first.member_id)
        b_reply = b.receive(JOIN_GROUP, 7, b_corr)
        assert a_joined.generation_id == b_reply.generation_id == 2
        assert a_joined.leader == b_reply.leader == first.member_id  # the leader rejoined and stays leader
        assert sorted(m.member_id for m in a_joined.members) == sorted([first.member_id, required.member_id])
        assert b_reply.members == []
        b_member = Member(group, b_reply.member_id, 2, b_reply.leader, [], "range")
        b_sync = b.submit(_sync_request(b_member), 5)  # a follower waits for the leader's assignment
        plan = {first.member_id: assignment({"t": [0, 1]}), b_member.member_id: assignment({"t": [2]})}
        a_sync = sync(a, a_joined, plan)
        assert (a_sync.error_code, a_sync.assignment) == (E.NONE, plan[first.member_id])
        b_synced = b.receive(SYNC_GROUP, 5, b_sync)
        assert (b_synced.error_code, b_synced.assignment) == (E.NONE, plan[b_member.member_id])
        (described,) = describe(a, group)
        assert described.group_state == "Stable" and described.protocol_data == "range"
        assert {m.member_id: m.member_assignment for m in described.members} == plan
        # B leaves: A is told to rejoin and gets the group to itself.
        assert [m.error_code for m in leave(b, group, (b_member.member_id, None)).members] == [E.NONE]
        assert wait_for(lambda: heartbeat(a, a_joined) == E.REBALANCE_IN_PROGRESS, what="rebalance after leave")
        alone = join(a, group, first.member_id)
        assert (alone.generation_id, [m.member_id for m in alone.members]) == (3, [first.member_id])


def _sync_request(member: Member):
    return SyncGroupRequest(group_id=member.group_id, generation_id=member.generation_id, member_id=member.member_id,
                            protocol_type="consumer", protocol_name="range", assignments=[])


def test_member_that_stops_heartbeating_is_removed_and_the_group_rebalances(broker):
    group = new_group()
    with WireClient(broker.port) as a, WireClient(broker.port) as b:
        quiet = stable(a, group, session_ms=300)
        required = join_once(b, group)
        b_corr = send_join(b, group, required.member_id)
        # A never heartbeats or rejoins again: its session runs out and the join completes without it.
        b_reply = b.receive(JOIN_GROUP, 7, b_corr)
        assert (b_reply.error_code, b_reply.generation_id) == (E.NONE, 2)
        assert [m.member_id for m in b_reply.members] == [required.member_id]
        assert heartbeat(a, quiet) == E.UNKNOWN_MEMBER_ID
        b_member = Member(group, b_reply.member_id, 2, b_reply.leader, [], "range")
        assert sync(b, b_member, {b_member.member_id: b"all"}).error_code == E.NONE
        # The same once the group is Stable: a member that goes quiet is removed, the other rejoins.
        with WireClient(broker.port) as c:
            required = join_once(c, group)
            c_corr = send_join(c, group, required.member_id, session_ms=300)
            wait_for(lambda: heartbeat(b, b_member) == E.REBALANCE_IN_PROGRESS, what="rebalance")
            b_member = join(b, group, b_member.member_id)
            c_reply = c.receive(JOIN_GROUP, 7, c_corr)
            assert c_reply.generation_id == b_member.generation_id == 3
            assert sync(b, b_member, {}).error_code == E.NONE
            c_member = Member(group, c_reply.member_id, 3, c_reply.leader, [], "range")
            assert sync(c, c_member).error_code == E.NONE
            # c stops; b keeps heartbeating until told to rejoin.
            wait_for(lambda: heartbeat(b, b_member) == E.REBALANCE_IN_PROGRESS, what="rebalance after expiry")
            alone = join(b, group, b_member.member_id)
            assert [m.member_id for m in alone.members] == [b_member.member_id]
            assert heartbeat(c, c_member) == E.UNKNOWN_MEMBER_ID


def test_pending_member_that_never_rejoins_does_not_block_the_rebalance(broker):
    group = new_group()
    with WireClient(broker.port) as a, WireClient(broker.port) as b:
        member = stable(a, group)
        ghost = join_once(b, group, session_ms=300)  # MEMBER_ID_REQUIRED, and it never comes back
        assert ghost.error_code == E.MEMBER_ID_REQUIRED
        assert heartbeat(a, member) == E.NONE  # a pending member does not start a rebalance
        # The leader rejoining does; the join waits for the pending member until its session ends.
        rejoined = join(a, group, member.member_id)
        assert (rejoined.generation_id, [m.member_id for m in rejoined.members]) == (2, [member.member_id])


def test_pending_member_may_leave(broker):
    group = new_group()
    with WireClient(broker.port) as a, WireClient(broker.port) as b:
        member = stable(a, group)
        ghost = join_once(b, group)
        assert leave(b, group, (ghost.member_id, None)).members[0].error_code == E.NONE
        # As in Kafka, a successful leave of a Stable group rebalances it.
        assert heartbeat(a, member) == E.REBALANCE_IN_PROGRESS


# --- static members ---------------------------------------------------------------------------------


def test_static_member_rejoining_takes_its_place_without_a_rebalance(client):
    group = new_group()
    old = stable(client, group, instance_id="instance-1")
    assert old.member_id.startswith("instance-1-")
    new = join(client, group, instance_id="instance-1", version=7)
    assert new.member_id != old.member_id and new.generation_id == old.generation_id == 1
    assert new.leader == old.member_id and new.members == []  # pre-v9: told the old leader id, acts as follower
    synced = sync(client, new)
    assert (synced.error_code, synced.assignment) == (E.NONE, assignment({"t": [0, 1, 2]}))
    assert heartbeat(client, new) == E.NONE
    assert heartbeat(client, old) == E.FENCED_INSTANCE_ID
    (described,) = describe(client, group, version=4)
    assert [(m.member_id, m.group_instance_id) for m in described.members] == [(new.member_id, "instance-1")]


def test_static_leader_rejoining_at_v9_skips_the_assignment(client):
    group = new_group()
    stable(client, group, instance_id="leader")
    reply = join_once(client, group, instance_id="leader", version=9)
    assert (reply.error_code, reply.generation_id, reply.skip_assignment) == (E.NONE, 1, True)
    assert reply.leader == reply.member_id and [m.group_instance_id for m in reply.members] == ["leader"]


def test_static_member_leaves_by_instance_id(client):
    group = new_group()
    stable(client, group, instance_id="admin-removed")
    reply = leave(client, group, ("", "admin-removed"), ("", "unknown-instance"))
    assert [m.error_code for m in reply.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert describe(client, group)[0].group_state == "Empty"


# --- the error table --------------------------------------------------------------------------------


def _ghost(group: str) -> Member:
    return Member(group, "nobody", 1, "nobody", [], "range")


def _static_replaced(c, g):
    old = stable(c, g, instance_id="i")
    join(c, g, instance_id="i")
    return old


def _sync_protocol_mismatch(c, g):
    member = stable(c, g)
    return sync(c, member, protocol_name="roundrobin").error_code


CASES = [
    ("join-session-below-min", lambda c, g: join_once(c, g, session_ms=199).error_code, E.INVALID_SESSION_TIMEOUT),
    ("join-session-above-max", lambda c, g: join_once(c, g, session_ms=60_001).error_code,
     E.INVALID_SESSION_TIMEOUT),
    ("join-empty-group-id", lambda c, g: join_once(c, "").error_code, E.INVALID_GROUP_ID),
    ("join-unknown-member-of-unknown-group", lambda c, g: join_once(c, g, "nobody").error_code, E.UNKNOWN_MEMBER_ID),
    ("join-unknown-member", lambda c, g: (stable(c, g), join_once(c, g, "nobody").error_code)[1],
     E.UNKNOWN_MEMBER_ID),
    ("join-other-protocol-type", lambda c, g: (stable(c, g), join_once(c, g, protocol_type="connect").error_code)[1],
     E.INCONSISTENT_GROUP_PROTOCOL),
    ("join-no-common-protocol",
     lambda c, g: (stable(c, g), join_once(c, g, protocols=[("roundrobin", b"")]).error_code)[1],
     E.INCONSISTENT_GROUP_PROTOCOL),
    ("join-no-protocols", lambda c, g: join_once(c, g, protocols=[], version=3).error_code,
     E.INCONSISTENT_GROUP_PROTOCOL),
    ("join-member-id-required", lambda c, g: join_once(c, g, version=4).error_code, E.MEMBER_ID_REQUIRED),
    ("join-static-fenced", lambda c, g: (stable(c, g, instance_id="i"),
                                         join_once(c, g, "other", instance_id="i").error_code)[1],
     E.FENCED_INSTANCE_ID),
    ("sync-unknown-group", lambda c, g: sync(c, _ghost(g)).error_code, E.UNKNOWN_MEMBER_ID),
    ("sync-unknown-member", lambda c, g: (stable(c, g), sync(c, _ghost(g)).error_code)[1], E.UNKNOWN_MEMBER_ID),
    ("sync-wrong-generation", lambda c, g: sync(c, stable(c, g), generation_id=7).error_code, E.ILLEGAL_GENERATION),
    ("sync-protocol-mismatch-v5", _sync_protocol_mismatch, E.INCONSISTENT_GROUP_PROTOCOL),
    ("sync-empty-group-id", lambda c, g: sync(c, _ghost("")).error_code, E.INVALID_GROUP_ID),
    ("sync-static-fenced", lambda c, g: sync(c, _static_replaced(c, g)).error_code, E.FENCED_INSTANCE_ID),
    ("heartbeat-unknown-group", lambda c, g: heartbeat(c, _ghost(g)), E.UNKNOWN_MEMBER_ID),
    ("heartbeat-unknown-member", lambda c, g: (stable(c, g), heartbeat(c, _ghost(g)))[1], E.UNKNOWN_MEMBER_ID),
    ("heartbeat-wrong-generation", lambda c, g: heartbeat(c, stable(c, g), generation_id=2), E.ILLEGAL_GENERATION),
    ("heartbeat-empty-group-id", lambda c, g: heartbeat(c, _ghost("")), E.INVALID_GROUP_ID),
    ("heartbeat-static-fenced", lambda c, g: heartbeat(c, _static_replaced(c, g)), E.FENCED_INSTANCE_ID),
    ("heartbeat-empty-group", lambda c, g: _heartbeat_after_leave(c, g), E.UNKNOWN_MEMBER_ID),
    ("commit-unknown-group-v8", lambda c, g: commit(c, g, {("t", 0): 1}, generation_id=1, member_id="x")[("t", 0)],
     E.ILLEGAL_GENERATION),
    ("commit-unknown-group-v9", lambda c, g: commit(c, g, {("t", 0): 1}, generation_id=1, member_id="x",
                                                   version=9)[("t", 0)], E.GROUP_ID_NOT_FOUND),
    ("commit-unknown-member", lambda c, g: commit(c, g, {("t", 0): 1}, member=(stable(c, g), _ghost(g))[1])[("t", 0)],
     E.UNKNOWN_MEMBER_ID),
    ("commit-wrong-generation", lambda c, g: commit(c, g, {("t", 0): 1}, member=stable(c, g),
                                                   generation_id=5)[("t", 0)], E.ILLEGAL_GENERATION),
    ("commit-without-member-to-active-group", lambda c, g: (stable(c, g), commit(c, g, {("t", 0): 1}))[1][("t", 0)],
     E.UNKNOWN_MEMBER_ID),
    ("commit-while-completing-rebalance", lambda c, g: commit(c, g, {("t", 0): 1}, member=join(c, g))[("t", 0)],
     E.REBALANCE_IN_PROGRESS),
    ("commit-static-fenced", lambda c, g: commit(c, g, {("t", 0): 1}, member=_static_replaced(c, g))[("t", 0)],
     E.FENCED_INSTANCE_ID),
    ("commit-unknown-topic", lambda c, g: commit(c, g, {("no-such-topic", 0): 1})[("no-such-topic", 0)],
     E.UNKNOWN_TOPIC_OR_PARTITION),
    ("commit-unknown-partition", lambda c, g: commit(c, g, {("t", 3): 1})[("t", 3)], E.UNKNOWN_TOPIC_OR_PARTITION),
    ("commit-metadata-too-large", lambda c, g: commit(c, g, {("t", 0): 1}, metadata="x" * 4097)[("t", 0)],
     E.OFFSET_METADATA_TOO_LARGE),
    ("leave-unknown-group-v0", lambda c, g: leave(c, g, ("x", None), version=0).error_code, E.UNKNOWN_MEMBER_ID),
    ("leave-unknown-group-v3", lambda c, g: leave(c, g, ("x", None), version=3).members[0].error_code,
     E.UNKNOWN_MEMBER_ID),
    ("leave-unknown-member-v2", lambda c, g: (stable(c, g), leave(c, g, ("x", None), version=2).error_code)[1],
     E.UNKNOWN_MEMBER_ID),
    ("leave-static-fenced", lambda c, g: leave(c, g, ("wrong", (stable(c, g, instance_id="i"), "i")[1]))
     .members[0].error_code, E.FENCED_INSTANCE_ID),
    ("leave-empty-group-id", lambda c, g: leave(c, "", ("x", None)).error_code, E.INVALID_GROUP_ID),
    ("delete-group-with-members", lambda c, g: (stable(c, g), delete_groups(c, g))[1][g], E.NON_EMPTY_GROUP),
    ("delete-unknown-group", lambda c, g: delete_groups(c, g)[g], E.GROUP_ID_NOT_FOUND),
    ("offset-delete-unknown-group", lambda c, g: delete_offsets(c, g, {"t": [0]})[0], E.GROUP_ID_NOT_FOUND),
    ("offset-delete-subscribed-topic", lambda c, g: (stable(c, g), delete_offsets(c, g, {"t": [0]}))[1][1][("t", 0)],
     E.GROUP_SUBSCRIBED_TO_TOPIC),
    ("offset-delete-unknown-topic", lambda c, g: (commit(c, g, {("t", 0): 1}),
                                                  delete_offsets(c, g, {"nope": [0]}))[1][1][("nope", 0)],
     E.UNKNOWN_TOPIC_OR_PARTITION),
    ("describe-unknown-group-v6", lambda c, g: describe(c, g, version=6)[0].error_code, E.GROUP_ID_NOT_FOUND),
    ("describe-unknown-group-v5", lambda c, g: describe(c, g, version=5)[0].error_code, E.NONE),
]


def _heartbeat_after_leave(c, g):
    member = stable(c, g)
    leave(c, g, (member.member_id, None))
    return heartbeat(c, member, generation_id=2)  # the generation an empty group moved to


@pytest.mark.parametrize("case, expected", [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_errors(client, case, expected):
    assert E(case(client, new_group())) == expected


# --- offsets ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch_in_both_layouts(client, version):
    group = new_group()
    assert set(commit(client, group, {("t", 0): 7, ("t", 2): 9}, metadata="meta", leader_epoch=4).values()) == {0}
    epoch = 4 if version >= 5 else -1  # CommittedLeaderEpoch exists from v5
    error, got = fetch_offsets(client, group, {"t": [0, 1, 2], "other": [0]}, version=version)
    assert error == E.NONE and got == {("t", 0): (7, epoch, "meta", 0), ("t", 1): (-1, -1, "", 0),
                                       ("t", 2): (9, epoch, "meta", 0), ("other", 0): (-1, -1, "", 0)}
    if version >= 2:  # null topics: every committed partition
        error, got = fetch_offsets(client, group, None, version=version, require_stable=version >= 7)
        assert error == E.NONE and got == {("t", 0): (7, epoch, "meta", 0), ("t", 2): (9, epoch, "meta", 0)}
    error, got = fetch_offsets(client, new_group(), {"t": [0]}, version=version)  # unknown group
    assert (error, got) == (E.NONE, {("t", 0): (-1, -1, "", 0)})


def test_offset_fetch_several_groups_in_one_request(client):
    first, second, unknown = new_group(), new_group(), new_group()
    commit(client, first, {("t", 0): 1})
    commit(client, second, {("t", 1): 2})
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    reply = client.send(OffsetFetchRequest(groups=[
        G(group_id=first, topics=None), G(group_id=second, topics=[G.OffsetFetchRequestTopics(
            name="t", partition_indexes=[1])]), G(group_id=unknown, topics=None)], require_stable=True), 9)
    answers = {g.group_id: [(t.name, p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions]
               for g in reply.groups}
    assert answers == {first: [("t", 0, 1)], second: [("t", 1, 2)], unknown: []}


def test_admin_commit_resets_an_empty_consumer_group(client):
    group = new_group()
    member = stable(client, group)
    commit(client, group, {("t", 0): 50}, member=member)
    leave(client, group, (member.member_id, None))
    assert commit(client, group, {("t", 0): 10}) == {("t", 0): E.NONE}  # generation -1, no member
    assert fetch_offsets(client, group, {"t": [0]})[1][("t", 0)][0] == 10


def test_offset_delete_removes_offsets_of_an_empty_group(client):
    group = new_group()
    commit(client, group, {("t", 0): 3, ("t", 1): 4})
    assert delete_offsets(client, group, {"t": [0, 2]}) == (E.NONE, {("t", 0): E.NONE, ("t", 2): E.NONE})
    assert fetch_offsets(client, group, None)[1] == {("t", 1): (4, -1, "", 0)}


def test_offset_delete_on_a_consumer_group_keeps_subscribed_topics(client):
    group = new_group()
    member = stable(client, group)  # subscribes to "t" only
    commit(client, group, {("t", 0): 3, ("other", 0): 4}, member=member)
    assert delete_offsets(client, group, {"t": [0], "other": [0]}) == (
        E.NONE, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): E.NONE})
    assert fetch_offsets(client, group, None)[1] == {("t", 0): (3, -1, "", 0)}


def test_offset_delete_on_a_non_consumer_group_with_members_is_refused(client):
    group = new_group()
    member = join(client, group, protocol_type="connect", protocols=[("v1", b"x")])
    sync(client, member, {}, protocol_name="v1")
    assert delete_offsets(client, group, {"t": [0]}) == (E.NON_EMPTY_GROUP, {})


# --- listing, describing, deleting ------------------------------------------------------------------


def test_list_groups_with_state_and_type_filters(client):
    idle, busy = new_group(), new_group()
    commit(client, idle, {("t", 0): 1})
    stable(client, busy)
    listed = {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in list_groups(client).groups}
    assert listed[idle] == ("", "Empty", "classic") and listed[busy] == ("consumer", "Stable", "classic")
    for version in range(0, 4):
        assert {idle, busy} <= {g.group_id for g in list_groups(client, version=version).groups}
    stable_only = {g.group_id for g in list_groups(client, version=4, states=["Stable"]).groups}
    assert busy in stable_only and idle not in stable_only
    empty_only = {g.group_id for g in list_groups(client, version=4, states=["empty"]).groups}  # case-insensitive
    assert idle in empty_only and busy not in empty_only
    assert {idle, busy} <= {g.group_id for g in list_groups(client, types=["classic"]).groups}
    assert list_groups(client, types=["consumer"]).groups == []


@pytest.mark.parametrize("version", range(0, 7))
def test_describe_group_in_every_version(client, version):
    group = new_group()
    member = stable(client, group)
    (described,) = describe(client, group, version=version, include_operations=version >= 3)
    assert (described.error_code, described.group_state, described.protocol_type, described.protocol_data) == (
        E.NONE, "Stable", "consumer", "range")
    (m,) = described.members
    assert (m.member_id, m.client_id, m.client_host) == (member.member_id, client.client_id, "/127.0.0.1")
    assert (m.member_metadata, m.member_assignment) == (subscription("t"), assignment({"t": [0, 1, 2]}))
    if version >= 3:  # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (Kafka 4.3's AclEntry for groups)
        assert described.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
        (plain,) = describe(client, group, version=version)
        assert plain.authorized_operations == -(2**31)


def test_describe_shows_no_assignment_while_rebalancing(broker):
    group = new_group()
    with WireClient(broker.port) as a:
        member = join(a, group)  # CompletingRebalance until the leader syncs
        (described,) = describe(a, group)
        assert (described.group_state, described.protocol_data) == ("CompletingRebalance", "")
        assert [(m.member_id, m.member_metadata, m.member_assignment) for m in described.members] == [
            (member.member_id, b"", b"")]


def test_delete_groups_removes_the_group_and_its_offsets(client):
    group, other = new_group(), new_group()
    member = stable(client, group)
    commit(client, group, {("t", 0): 11}, member=member)
    leave(client, group, (member.member_id, None))
    commit(client, other, {("t", 0): 12})
    assert delete_groups(client, group, other, version=0) == {group: E.NONE, other: E.NONE}
    assert fetch_offsets(client, group, {"t": [0]})[1][("t", 0)][0] == -1
    assert not {group, other} & {g.group_id for g in list_groups(client).groups}
    assert delete_groups(client, group) == {group: E.GROUP_ID_NOT_FOUND}
    assert describe(client, group, version=6)[0].error_code == E.GROUP_ID_NOT_FOUND


# --- restarts ---------------------------------------------------------------------------------------


def test_commits_and_groups_survive_sigkill(tmp_path):
    with BrokerProcess(tmp_path, OVERRIDES) as process:
        with WireClient(process.port) as c:
            create_topic(c, "t", partitions=3)
            member = stable(c, "consumers", session_ms=30_000)
            assert set(commit(c, "consumers", {("t", 0): 10, ("t", 1): 20}, member=member).values()) == {0}
            assert set(commit(c, "consumers", {("t", 0): 15}, member=member).values()) == {0}  # the newest wins
            assert set(commit(c, "simple", {("t", 2): 30}).values()) == {0}
            commit(c, "deleted", {("t", 2): 1})
            assert delete_groups(c, "deleted") == {"deleted": E.NONE}
        process.restart(signal.SIGKILL)
        with WireClient(process.port) as c:
            assert fetch_offsets(c, "consumers", None)[1] == {("t", 0): (15, -1, "", 0), ("t", 1): (20, -1, "", 0)}
            assert fetch_offsets(c, "simple", None)[1] == {("t", 2): (30, -1, "", 0)}
            assert fetch_offsets(c, "deleted", None)[1] == {}
            # The Stable group came back with its member and generation: it heartbeats on, no rebalance.
            assert heartbeat(c, member) == E.NONE
            (described,) = describe(c, "consumers")
            assert (described.group_state, [m.member_id for m in described.members]) == (
                "Stable", [member.member_id])
            assert sync(c, member).assignment == assignment({"t": [0, 1, 2]})
            listed = {g.group_id: g.group_state for g in list_groups(c).groups}
            assert listed == {"consumers": "Stable", "simple": "Empty"}


def test_a_stopping_broker_answers_parked_joins(tmp_path):
    with BrokerProcess(tmp_path, OVERRIDES) as process:
        with WireClient(process.port) as a, WireClient(process.port) as b:
            create_topic(a, "t", partitions=1)
            member = stable(a, "g")
            required = join_once(b, "g")
            corr = send_join(b, "g", required.member_id, rebalance_ms=60_000)  # parked: A never rejoins
            wait_for(lambda: heartbeat(a, member) == E.REBALANCE_IN_PROGRESS, what="rebalance")
            process.process.send_signal(signal.SIGTERM)
            reply = b.receive(JOIN_GROUP, 7, corr)
            assert reply.error_code == E.NOT_COORDINATOR
        assert process.process.wait(30) == 0


def test_a_client_leaving_during_the_first_lookup_does_not_break_the_offsets_topic(tmp_path):
    """The first FindCoordinator creates __consumer_offsets (50 partitions here); a client that
    disconnects meanwhile must not leave it half made (it used to: every later lookup failed)."""
    with BrokerProcess(tmp_path, {"group.initial.rebalance.delay.ms": "0"}) as process:
        with WireClient(process.port) as quitter:
            quitter.submit(FindCoordinatorRequest(key="g", key_type=0), 3)
        with WireClient(process.port) as c:
            found = find_coordinator(c, "g")
            assert (found.error_code, found.node_id) == (E.NONE, 1)
            (topic,) = metadata(c, [OFFSETS], version=12).topics
            assert (topic.error_code, len(topic.partitions)) == (E.NONE, 50)
            assert commit(c, "g", {("__consumer_offsets", 0): 1}) == {("__consumer_offsets", 0): E.NONE}
