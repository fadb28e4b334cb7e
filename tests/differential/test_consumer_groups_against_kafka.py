"""KIP-848 consumer groups against Kafka 4.3.1 (its consumer protocol on, as by default): one scenario of
ConsumerGroupHeartbeat's request checks, joins, the range assignor's target, revocation before
reassignment, fencing and unknown members, ConsumerGroupDescribe, ListGroups' type filter,
DescribeGroups of a consumer group's id, OffsetCommit and OffsetFetch v9 with member epochs,
DeleteGroups, leaving, and a consumer heartbeat on a classic group's id; commits at an older member
epoch (KIP-1251) at OffsetCommit v2-10 and TxnOffsetCommit v5; a classic member's Heartbeat inside a
consumer group after another left; a member's epoch, previous epoch and held-since epochs after it
revokes while the target moved on; a member revoking that leaves a topic; a member changing only its
server assignor; a group's own assignment interval (KIP-1263) holding its target back, then changed."""

from __future__ import annotations

import uuid

import pytest

from protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    IncrementalAlterConfigsRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from tests.broker.wire_client import create_topic
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

_Owned = ConsumerGroupHeartbeatRequest.TopicPartitions
_Protocol = JoinGroupRequest.JoinGroupRequestProtocol
_Commit = OffsetCommitRequest.OffsetCommitRequestTopic
_FetchGroup = OffsetFetchRequest.OffsetFetchRequestGroup
_Alter = IncrementalAlterConfigsRequest.AlterConfigsResource
_Op = _Alter.AlterableConfig
_Described = DescribeConfigsRequest.DescribeConfigsResource


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    # Targets at once (Kafka batches them, one per interval, 1 s by default): the scenarios follow each
    # step's new target; the one on the interval sets its groups' own, up to an hour.
    return {"group.consumer.assignment.interval.ms": "0", "group.consumer.max.assignment.interval.ms": "3600000"}


def _beat(peer: Peer, label: str, group: str, member: str, epoch: int, owned: list[int] | None = None,
          topic_id=None, **fields):
    partitions = None if owned is None else ([] if not owned else [_Owned(topic_id=topic_id, partitions=owned)])
    return peer.ask(label, ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                         topic_partitions=partitions, **fields), 1)


def _range_join(topic: str) -> dict:
    """A ConsumerGroupHeartbeat's join fields: the topic by name, the range assignor (deterministic)."""
    return {"rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic], "server_assignor": "range"}


def _describe(peer: Peer, label: str, group_ids: list[str], epochs: dict[str, int],
              subscribed: dict[str, list[str]] | None = None, **fields) -> None:
    """ConsumerGroupDescribe once the group shows the members at `epochs` (and with the topic names of
    `subscribed`, member id -> names) (Kafka describes what its log has committed, a moment behind the
    heartbeats' answers); members in member id order, their topics in name order (Kafka lists them in
    its hash sets' and maps' order)."""
    def settled():
        answer = peer.send(ConsumerGroupDescribeRequest(group_ids=group_ids, **fields), 1)
        members = [m for g in answer.groups for m in g.members]
        shown = {m.member_id: m.member_epoch for m in members}
        names = {m.member_id: sorted(m.subscribed_topic_names) for m in members if m.member_id in (subscribed or {})}
        return answer if shown == epochs and names == (subscribed or {}) else None

    answer = wait_for(settled, timeout_s=10, what=f"{peer.name}: {label} shows {epochs}")
    for group in answer.groups:
        group.members.sort(key=lambda m: m.member_id)
        for member in group.members:
            member.subscribed_topic_names.sort()
            for assignment in (member.assignment, member.target_assignment):
                assignment.topic_partitions.sort(key=lambda t: t.topic_name)
    peer.record(label, answer)


def _topic_and_coordinators(peers, topic: str, partitions: int, groups) -> dict:
    """Each peer's id of a new topic, once its leaders and the groups' coordinators are ready."""
    topic_ids = {}
    for peer in peers:
        answer = create_topic(peer.client, topic, partitions)
        assert answer.error_code == 0
        topic_ids[peer.name] = answer.topic_id
        peer.wait_for_leaders(topic, partitions)
        for group in groups:
            wait_for(lambda g=group, p=peer: p.send(FindCoordinatorRequest(key_type=0, coordinator_keys=[g]), 4)
                     .coordinators[0].error_code == 0, timeout_s=60, what=f"{peer.name} coordinates {group}")
            wait_for(lambda g=group, p=peer: p.send(ConsumerGroupDescribeRequest(group_ids=[g]), 1)
                     .groups[0].error_code == 69, timeout_s=60, what=f"{peer.name} loaded {group}")
    return topic_ids


def test_consumer_group_heartbeats_and_the_group_apis(ebb_peer, kafka_peer):
    topic_ids = _topic_and_coordinators((ebb_peer, kafka_peer), "cgt", 4, ("cg", "cg-bad", "cg-none", "classic"))

    def scenario(peer: Peer) -> None:
        tid = topic_ids[peer.name]
        join = _range_join("cgt")
        _beat(peer, "join without a rebalance timeout", "cg-bad", "m", 0, [], subscribed_topic_names=["cgt"])
        _beat(peer, "join holding partitions", "cg-bad", "m", 0, [1], tid, **join)
        _beat(peer, "join without a subscription", "cg-bad", "m", 0, [], rebalance_timeout_ms=30000)
        _beat(peer, "join with an empty member id", "cg-bad", "", 0, [], **join)
        _beat(peer, "join with an unknown assignor", "cg-bad", "m", 0, [], **{**join, "server_assignor": "sticky"})
        _beat(peer, "join with a lookahead regex", "cg-bad", "m", 0, [], rebalance_timeout_ms=30000,
              subscribed_topic_regex="(?=c)cgt")
        _beat(peer, "epoch -3", "cg-bad", "m", -3)
        _beat(peer, "epoch -2 without an instance id", "cg-bad", "m", -2)
        _beat(peer, "unknown group, epoch 3", "cg-none", "m", 3)
        _beat(peer, "leave an unknown group", "cg-none", "m", -1)
        _beat(peer, "m1 joins", "cg", "m1", 0, [], **join)
        _beat(peer, "m1 heartbeats", "cg", "m1", 2, [0, 1, 2, 3], tid)
        _beat(peer, "epoch ahead", "cg", "m1", 7, [0, 1, 2, 3], tid)
        _beat(peer, "unknown member", "cg", "m9", 2)
        _beat(peer, "m2 joins: its partitions are m1's still", "cg", "m2", 0, [], **join)
        _beat(peer, "m1 is told to revoke", "cg", "m1", 2, [0, 1, 2, 3], tid)
        _describe(peer, "describe while revoking", ["cg"], {"m1": 2, "m2": 3})
        _beat(peer, "m2 waits", "cg", "m2", 3, [], tid)
        _beat(peer, "m1 revoked", "cg", "m1", 2, [0, 1], tid)
        _beat(peer, "m2 gets its partitions", "cg", "m2", 3, [], tid)
        _describe(peer, "describe stable", ["cg", "", "cg-none"], {"m1": 3, "m2": 3},
                  include_authorized_operations=True)
        commit = [_Commit(name="cgt", partitions=[_Commit.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=5)])]
        peer.ask("commit with the epoch", OffsetCommitRequest(group_id="cg", generation_id_or_member_epoch=3,
                                                              member_id="m1", topics=commit), 9)
        peer.ask("commit with an old epoch", OffsetCommitRequest(group_id="cg", generation_id_or_member_epoch=2,
                                                                 member_id="m1", topics=commit), 9)
        peer.ask("commit by an unknown member", OffsetCommitRequest(group_id="cg", generation_id_or_member_epoch=3,
                                                                    member_id="m9", topics=commit), 9)
        peer.ask("commit without a member", OffsetCommitRequest(group_id="cg", generation_id_or_member_epoch=-1,
                                                                member_id="", topics=commit), 9)
        peer.ask("fetch with the epoch", OffsetFetchRequest(groups=[_FetchGroup(
            group_id="cg", member_id="m1", member_epoch=3, topics=None)]), 9)
        peer.ask("fetch with an old epoch", OffsetFetchRequest(groups=[_FetchGroup(
            group_id="cg", member_id="m1", member_epoch=2, topics=None)]), 9)
        peer.ask("list consumer groups", ListGroupsRequest(types_filter=["consumer"]), 5)
        peer.ask("list stable groups", ListGroupsRequest(states_filter=["Stable"]), 5)
        peer.ask("describe groups v6", DescribeGroupsRequest(groups=["cg"]), 6)
        peer.ask("delete while members are in", DeleteGroupsRequest(groups_names=["cg"]), 2)
        _beat(peer, "m1 leaves", "cg", "m1", -1)
        _beat(peer, "m1 leaves again", "cg", "m1", -1)
        _beat(peer, "m2 leaves", "cg", "m2", -1)
        peer.ask("describe empty", ConsumerGroupDescribeRequest(group_ids=["cg"]), 1)
        peer.ask("fetch of the empty group", OffsetFetchRequest(groups=[_FetchGroup(
            group_id="cg", member_id=None, member_epoch=-1, topics=None)]), 9)
        peer.ask("delete", DeleteGroupsRequest(groups_names=["cg"]), 2)
        peer.ask("describe deleted", ConsumerGroupDescribeRequest(group_ids=["cg"]), 1)
        peer.ask("classic join", JoinGroupRequest(group_id="classic", session_timeout_ms=10000,
                                                  rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
                                                  protocols=[_Protocol(name="range", metadata=b"")]), 9)
        _beat(peer, "consumer heartbeat on a classic group's id", "classic", "m", 0, [], **join)
        _describe(peer, "consumer describe of a classic group's id", ["classic"], {"m": 2})

    allowed = {**ALLOWED, ("unknown group, epoch 3", "error_code"):
               "a member heartbeating to a group the coordinator does not know (its records lost or never "
               "written) gets UNKNOWN_MEMBER_ID and rejoins; Kafka's GROUP_ID_NOT_FOUND is fatal to the Java "
               "consumer (docs/features.md)"}
    found = compare(scenario, ebb_peer, kafka_peer, allowed)
    assert not found, "\n".join(found)


def test_offset_commit_and_fetch_v10_name_topics_by_id(ebb_peer, kafka_peer):
    """OffsetCommit and OffsetFetch v10 (topics by TopicId): a known id, a partition it lacks, an id
    no topic has and the zero id; fetches by id, of all topics, and v9's by name of what v10 committed."""
    topic_ids = _topic_and_coordinators((ebb_peer, kafka_peer), "oc10", 2, ("oc10-g",))
    unknown = uuid.UUID("5d1f1c2e-8a4b-4c3d-9e0f-123456789abc")

    def scenario(peer: Peer) -> None:
        tid = topic_ids[peer.name]
        Topic, Part = _Commit, _Commit.OffsetCommitRequestPartition

        def commit(topic_id, *partitions):
            return Topic(topic_id=topic_id, partitions=[
                Part(partition_index=p, committed_offset=10 + p, committed_leader_epoch=-1, committed_metadata="m")
                for p in partitions])
        zero = uuid.UUID(int=0)
        answer = peer.ask("v10 commit by id", OffsetCommitRequest(
            group_id="oc10-g", generation_id_or_member_epoch=-1, member_id="",
            topics=[commit(tid, 0, 1, 5), commit(unknown, 0, 1), commit(zero, 0)]), 10)
        # (the runner masks topic ids: each broker's own) each topic is answered by the id it was asked with
        assert [t.topic_id for t in answer.topics] == [tid, unknown, zero], (peer.name, answer)
        Asked = _FetchGroup.OffsetFetchRequestTopics
        answer = peer.ask("v10 fetch by id", OffsetFetchRequest(groups=[_FetchGroup(group_id="oc10-g", topics=[
            Asked(topic_id=unknown, partition_indexes=[0]), Asked(topic_id=tid, partition_indexes=[1, 0, 5]),
            Asked(topic_id=zero, partition_indexes=[0])])]), 10)
        # known ids first, then the unknown ones (Kafka answers those apart from the coordinator's)
        assert [t.topic_id for t in answer.groups[0].topics] == [tid, unknown, zero], (peer.name, answer)
        answer = peer.ask("v10 fetch of all topics", OffsetFetchRequest(groups=[
            _FetchGroup(group_id="oc10-g", topics=None), _FetchGroup(group_id="oc10-none", topics=None)]), 10)
        assert [t.topic_id for t in answer.groups[0].topics] == [tid], (peer.name, answer)
        peer.ask("v10 fetch of an unknown group", OffsetFetchRequest(groups=[_FetchGroup(group_id="oc10-none", topics=[
            Asked(topic_id=tid, partition_indexes=[0])])]), 10)
        peer.ask("v9 fetch by name", OffsetFetchRequest(groups=[_FetchGroup(group_id="oc10-g", topics=[
            Asked(name="oc10", partition_indexes=[0, 1])])]), 9)

    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not found, "\n".join(found)


def _assignable(peers, topic: str, probe_group: str) -> None:
    """Wait until each coordinator assigns the new topic's partitions (Kafka's sees a topic a moment after
    its leaders), probing with a member of a group of its own that then leaves."""
    for peer in peers:
        def assigned(p=peer) -> bool:
            answer = p.send(ConsumerGroupHeartbeatRequest(
                group_id=probe_group, member_id="probe", member_epoch=0, rebalance_timeout_ms=30000,
                subscribed_topic_names=[topic], topic_partitions=[]), 1)
            p.send(ConsumerGroupHeartbeatRequest(group_id=probe_group, member_id="probe", member_epoch=-1), 1)
            return answer.assignment is not None and bool(answer.assignment.topic_partitions)
        wait_for(assigned, timeout_s=30, what=f"{peer.name}'s coordinator sees {topic}")


def _assignable_topic(peers, topic: str, partitions: int, group: str) -> dict:
    """Each peer's id of a new topic whose partitions its coordinator of `group` assigns (probed by a
    group of its own, `group`-probe)."""
    topic_ids = _topic_and_coordinators(peers, topic, partitions, (group, f"{group}-probe"))
    _assignable(peers, topic, f"{group}-probe")
    return topic_ids


def _subscription(topic: str, owned: list[int]) -> bytes:
    """A classic member's JoinGroup metadata: a v1 ConsumerProtocolSubscription to the topic."""
    from protocol.messages import ConsumerProtocolSubscription
    value = ConsumerProtocolSubscription(topics=[topic], user_data=None, owned_partitions=[
        ConsumerProtocolSubscription.TopicPartition(topic=topic, partitions=owned)] if owned else [])
    return b"\x00\x01" + ConsumerProtocolSubscription[1].encode(value)


def test_a_classic_heartbeat_after_a_member_left(ebb_peer, kafka_peer):
    """Classic members c1 and c2 inside a consumer group with member m (a topic that does not exist: no
    partitions to hand over). c2 leaving moves the group epoch but not the target's: c1's heartbeat is
    answered NONE until m's heartbeat recomputes the target, then REBALANCE_IN_PROGRESS."""
    from protocol.messages import HeartbeatRequest, LeaveGroupRequest, SyncGroupRequest

    _topic_and_coordinators((ebb_peer, kafka_peer), "cl-probe", 1, ("cl",))

    def scenario(peer: Peer) -> None:
        protocols = [_Protocol(name="range", metadata=_subscription("cl-none", []))]

        def join(label: str, member: str):
            return peer.ask(label, JoinGroupRequest(
                group_id="cl", session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id=member,
                protocol_type="consumer", protocols=protocols), 5)

        def sync(label: str, member: str, generation: int) -> None:
            peer.ask(label, SyncGroupRequest(group_id="cl", generation_id=generation, member_id=member,
                                             protocol_type="consumer", protocol_name="range", assignments=[]), 5)

        def heartbeat(label: str, member: str, generation: int) -> None:
            peer.ask(label, HeartbeatRequest(group_id="cl", generation_id=generation, member_id=member), 4)

        m = _beat(peer, "m joins", "cl", "m", 0, [], rebalance_timeout_ms=30000,
                  subscribed_topic_names=["cl-none"], server_assignor="range")
        ids = []
        for name in ("c1", "c2"):
            ids.append(join(f"{name} asks for a member id", "").member_id)
            joined = join(f"{name} joins", ids[-1])
            sync(f"{name} syncs", ids[-1], joined.generation_id)
        c1, c2 = ids
        heartbeat("c1 heartbeat: c2 moved the target", c1, joined.generation_id - 1)
        epoch = join("c1 rejoins", c1).generation_id
        sync("c1 syncs again", c1, epoch)
        _beat(peer, "m catches up", "cl", "m", m.member_epoch, None)
        heartbeat("c1 heartbeat: stable", c1, epoch)
        peer.ask("c2 leaves", LeaveGroupRequest(group_id="cl", members=[
            LeaveGroupRequest.MemberIdentity(member_id=c2)]), 4)
        heartbeat("c1 heartbeat after c2 left: the target has not moved", c1, epoch)
        _beat(peer, "m heartbeats: the target moves", "cl", "m", epoch, None)
        heartbeat("c1 heartbeat once the target moved", c1, epoch)

    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not found, "\n".join(found)


def test_commits_at_an_older_member_epoch(ebb_peer, kafka_peer):
    """KIP-1251: o1 holds partitions 0-3 since epoch 2, keeps 0-1 when o2 joins (epoch 3) and is given 2-3
    again at epoch 4 once o2 leaves. Commits at its older epochs, of partitions held since (taken), given
    later or never held (refused), and at a newer epoch, at every OffsetCommit version both serve (v2-8:
    UNSUPPORTED_VERSION for a KIP-848 member) and by TxnOffsetCommit v5; then what was stored; then o1
    rejoins at epoch 0 and commits at epoch 2 again."""
    from protocol.messages import EndTxnRequest, TxnOffsetCommitRequest
    from tests.differential.test_transactions_against_kafka import _ready_producer

    topic_ids = _assignable_topic((ebb_peer, kafka_peer), "ocg", 4, "oc")

    def scenario(peer: Peer) -> None:
        tid = topic_ids[peer.name]
        join = _range_join("ocg")
        _beat(peer, "o1 joins: all four partitions at epoch 2", "oc", "o1", 0, [], **join)
        _beat(peer, "o2 joins at epoch 3", "oc", "o2", 0, [], **join)
        _beat(peer, "o1 is told to revoke 2-3", "oc", "o1", 2, [0, 1, 2, 3], tid)
        _beat(peer, "o1 revoked: epoch 3, 0-1 held since 2", "oc", "o1", 2, [0, 1], tid)
        _beat(peer, "o2 leaves", "oc", "o2", -1)
        _beat(peer, "o1 is given 2-3 at epoch 4", "oc", "o1", 3, [0, 1], tid)
        _describe(peer, "o1 at epoch 4", ["oc"], {"o1": 4})
        Part = _Commit.OffsetCommitRequestPartition

        def commit(version: int, label: str, epoch: int, partitions: list[int]) -> None:
            named = {"topic_id": tid} if version >= 10 else {"name": "ocg"}
            topic = _Commit(**named, partitions=[Part(partition_index=p, committed_offset=100 * version + p)
                                                 for p in partitions])
            peer.ask(f"v{version} {label}", OffsetCommitRequest(
                group_id="oc", generation_id_or_member_epoch=epoch, member_id="o1", topics=[topic]), version)

        for version in range(2, 11):
            commit(version, "epoch 2, partitions held since 2", 2, [0, 1])
            commit(version, "epoch 3, partitions held since 2", 3, [1])
            commit(version, "epoch 2, one partition given at 4", 2, [0, 2])
            commit(version, "epoch 3, partitions given at 4", 3, [2, 3])
            commit(version, "epoch 4, all", 4, [0, 1, 2, 3])
            commit(version, "epoch 5, newer than the member's", 5, [0])
        ids = _ready_producer(peer, "oc-txn")
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic

        def txn_commit(label: str, epoch: int, partitions: list[int]) -> None:
            peer.ask(f"txn {label}", TxnOffsetCommitRequest(
                transactional_id="oc-txn", group_id="oc", producer_id=ids.producer_id,
                producer_epoch=ids.producer_epoch, generation_id=epoch, member_id="o1", group_instance_id=None,
                topics=[T(name="ocg", partitions=[T.TxnOffsetCommitRequestPartition(
                    partition_index=p, committed_offset=2000 + p, committed_leader_epoch=-1, committed_metadata="")
                    for p in partitions])]), 5)

        txn_commit("epoch 2, partitions held since 2", 2, [0, 1])
        txn_commit("epoch 2, one partition given at 4", 2, [1, 3])
        txn_commit("epoch 5, newer than the member's", 5, [0])
        peer.ask("end the transaction", EndTxnRequest(transactional_id="oc-txn", producer_id=ids.producer_id,
                                                      producer_epoch=ids.producer_epoch, committed=True), 5)
        Asked = _FetchGroup.OffsetFetchRequestTopics

        def stored():
            answer = peer.send(OffsetFetchRequest(require_stable=True, groups=[_FetchGroup(
                group_id="oc", member_id="o1", member_epoch=4,
                topics=[Asked(name="ocg", partition_indexes=[0, 1, 2, 3])])]), 9)
            group = answer.groups[0]
            settled = group.error_code == 0 and all(p.error_code == 0 for t in group.topics for p in t.partitions)
            return answer if settled else None
        answer = wait_for(stored, timeout_s=10, what=f"{peer.name}: the transaction's offsets settled")
        peer.record("what was stored", answer)
        # A member that lost its state rejoins at epoch 0: Kafka keeps it as it was, its partitions held since
        _beat(peer, "o1 rejoins at epoch 0, owning nothing", "oc", "o1", 0, [], **join)
        commit(9, "after the rejoin: epoch 2, partitions held since 2", 2, [0, 1])

    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not found, "\n".join(found)


def test_after_revoking_a_member_takes_the_target_epoch(ebb_peer, kafka_peer):
    """r1 holds all six partitions at epoch 2 and is told to revoke; two target bumps come before it has
    (r2 joins at 3, r3 at 4). Once it reports them gone it goes straight to epoch 4, not 3. Later, revoking
    again at epoch 6, its epoch before (4) is forgotten: a heartbeat at 4 is fenced. Partitions given back
    after the revocation (r4 came and went) count as held since the target's epoch (8): a commit of one
    at 7 is stale. The heartbeats' answers and ConsumerGroupDescribe at each step."""
    topic_ids = _assignable_topic((ebb_peer, kafka_peer), "rvt", 6, "rv")

    def scenario(peer: Peer) -> None:
        tid = topic_ids[peer.name]
        join = _range_join("rvt")
        _beat(peer, "r1 joins: all six at epoch 2", "rv", "r1", 0, [], **join)
        _beat(peer, "r2 joins at epoch 3", "rv", "r2", 0, [], **join)
        _beat(peer, "r1 is told to revoke 3-5", "rv", "r1", 2, [0, 1, 2, 3, 4, 5], tid)
        _beat(peer, "r3 joins at epoch 4", "rv", "r3", 0, [], **join)
        _beat(peer, "r1 still holds 3-5", "rv", "r1", 2, [0, 1, 2, 3, 4, 5], tid)
        _describe(peer, "describe while r1 revokes", ["rv"], {"r1": 2, "r2": 3, "r3": 4})
        _beat(peer, "r1 revoked 3-5: now 2 as well, at epoch 2", "rv", "r1", 2, [0, 1, 2], tid)
        _beat(peer, "r1 revoked 2: epoch 4 straight", "rv", "r1", 2, [0, 1], tid)
        _describe(peer, "describe once r1 revoked", ["rv"], {"r1": 4, "r2": 3, "r3": 4})
        _beat(peer, "r2 gets 2-3", "rv", "r2", 3, [], tid)
        _beat(peer, "r3 gets 4-5", "rv", "r3", 4, [], tid)
        _describe(peer, "describe stable", ["rv"], {"r1": 4, "r2": 4, "r3": 4})
        _beat(peer, "r2 leaves", "rv", "r2", -1)
        _beat(peer, "r3 leaves", "rv", "r3", -1)
        _beat(peer, "r1 is given all six at epoch 6", "rv", "r1", 4, [0, 1], tid)
        _beat(peer, "r4 joins at epoch 7", "rv", "r4", 0, [], **join)
        _beat(peer, "r1 is told to revoke 3-5 at epoch 6", "rv", "r1", 6, [0, 1, 2, 3, 4, 5], tid)
        _beat(peer, "r1 at its epoch before, 4", "rv", "r1", 4, [0, 1, 2], tid)
        _beat(peer, "r4 leaves", "rv", "r4", -1)
        _beat(peer, "r1 revoked 3-5: given them back at epoch 8", "rv", "r1", 6, [0, 1, 2], tid)
        _describe(peer, "describe r1 alone", ["rv"], {"r1": 8})
        Part = _Commit.OffsetCommitRequestPartition
        for epoch, partitions in ((7, [0, 1, 2]), (7, [3]), (6, [2]), (5, [2]), (2, [0, 1])):
            topic = _Commit(name="rvt", partitions=[Part(partition_index=p, committed_offset=epoch)
                                                    for p in partitions])
            peer.ask(f"r1 commits {partitions} at epoch {epoch}", OffsetCommitRequest(
                group_id="rv", generation_id_or_member_epoch=epoch, member_id="r1", topics=[topic]), 9)

    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not found, "\n".join(found)


def test_online_migration_of_a_group_both_ways(ebb_peer, kafka_peer):
    """group.consumer.migration.policy=bidirectional (both brokers' default): a classic group with a member
    upgraded by a consumer heartbeat, its classic member served inside (told to rejoin, revoking, its
    SyncGroup assignment, commits with its epoch and an older one), ConsumerGroupDescribe's member types, and the
    downgrade
    when the consumer member leaves: DescribeGroups and ListGroups at each step."""
    from broker.group.consumer_protocol import encode_assignment
    from protocol.messages import HeartbeatRequest, LeaveGroupRequest, SyncGroupRequest

    topic_ids = _topic_and_coordinators((ebb_peer, kafka_peer), "mgt", 4, ("mig", "mig-probe"))
    _assignable((ebb_peer, kafka_peer), "mgt", "mig-probe")

    def subscription(owned: list[int]) -> bytes:
        return _subscription("mgt", owned)

    def join(peer: Peer, label: str, member: str, owned: list[int]):
        return peer.ask(label, JoinGroupRequest(group_id="mig", session_timeout_ms=30000, rebalance_timeout_ms=30000,
                                                member_id=member, protocol_type="consumer",
                                                protocols=[_Protocol(name="range", metadata=subscription(owned))]), 5)

    def sync(peer: Peer, label: str, member: str, generation: int, assignments=()):
        return peer.ask(label, SyncGroupRequest(group_id="mig", generation_id=generation, member_id=member,
                                                protocol_type="consumer", protocol_name="range",
                                                assignments=list(assignments)), 5)

    def listed(peer: Peer, label: str, state: str) -> None:
        wait_for(lambda: any(g.group_id == "mig" and g.group_state == state for g in peer.send(
            ListGroupsRequest(), 5).groups), timeout_s=10, what=f"{peer.name}: mig {state}")
        answer = peer.send(ListGroupsRequest(), 5)
        answer.groups = [g for g in answer.groups if g.group_id == "mig"]
        peer.record(label, answer)

    def scenario(peer: Peer) -> None:
        tid = topic_ids[peer.name]
        beat = _range_join("mgt")
        first = peer.send(JoinGroupRequest(group_id="mig", session_timeout_ms=30000, rebalance_timeout_ms=30000,
                                           member_id="", protocol_type="consumer",
                                           protocols=[_Protocol(name="range", metadata=subscription([]))]), 5)
        c1 = first.member_id
        joined = join(peer, "classic member joins", c1, [])
        whole = encode_assignment(1, {"mgt": {0, 1, 2, 3}})
        sync(peer, "classic leader syncs", c1, joined.generation_id,
             [SyncGroupRequest.SyncGroupRequestAssignment(member_id=c1, assignment=whole)])
        listed(peer, "a classic group", "Stable")
        _beat(peer, "consumer member upgrades the group", "mig", "m", 0, [], **beat)
        _describe(peer, "describe the mixed group", ["mig"], {c1: 1, "m": 2})
        peer.ask("classic heartbeat: rejoin", HeartbeatRequest(group_id="mig", generation_id=1, member_id=c1), 4)
        sync(peer, "classic sync before rejoining", c1, 1)
        join(peer, "classic rejoin still holding all: revoking", c1, [0, 1, 2, 3])
        sync(peer, "classic sync: what it keeps", c1, 1)
        peer.ask("classic heartbeat: still revoking", HeartbeatRequest(group_id="mig", generation_id=1,
                                                                      member_id=c1), 4)
        rejoined = join(peer, "classic rejoin: revoked", c1, [0, 1])
        sync(peer, "classic sync at the new epoch", c1, rejoined.generation_id)
        _beat(peer, "consumer member gets its partitions", "mig", "m", 2, [], tid)
        commit = [_Commit(name="mgt", partitions=[_Commit.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=3)])]
        peer.ask("classic commit with its epoch", OffsetCommitRequest(
            group_id="mig", generation_id_or_member_epoch=rejoined.generation_id, member_id=c1, topics=commit), 8)
        for version in (2, 8, 9):  # KIP-1251: at the upgrade's generation, for a partition held since
            peer.ask(f"v{version} classic commit at its older generation", OffsetCommitRequest(
                group_id="mig", generation_id_or_member_epoch=1, member_id=c1, topics=commit), version)
        gave_up = [_Commit(name="mgt", partitions=[_Commit.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=4) for p in (1, 2)])]
        peer.ask("classic commit at its older generation of a partition it gave up", OffsetCommitRequest(
            group_id="mig", generation_id_or_member_epoch=1, member_id=c1, topics=gave_up), 8)
        peer.ask("classic commit with a later generation", OffsetCommitRequest(
            group_id="mig", generation_id_or_member_epoch=rejoined.generation_id + 5, member_id=c1,
            topics=commit), 8)
        peer.ask("describe groups of the mixed group", DescribeGroupsRequest(groups=["mig"]), 5)
        listed(peer, "a consumer group", "Stable")
        _beat(peer, "consumer member leaves: downgrade", "mig", "m", -1)
        listed(peer, "a classic group again", "PreparingRebalance")
        peer.ask("classic heartbeat after the downgrade", HeartbeatRequest(
            group_id="mig", generation_id=rejoined.generation_id, member_id=c1), 4)
        peer.ask("classic member leaves", LeaveGroupRequest(group_id="mig", members=[
            LeaveGroupRequest.MemberIdentity(member_id=c1)]), 4)

    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not found, "\n".join(found)


def test_a_member_revoking_that_leaves_a_topic(ebb_peer, kafka_peer):
    """s1 holds both partitions of topics sca and scb at epoch 2; s2 joins (epoch 3) and s1 is told to
    revoke sca-1 and scb-1. Still holding all four, s1 drops scb from its subscription (epoch 4): it is told
    at that heartbeat to give up scb-0 as well, keeping epoch 2. s2 waits; s1 revokes sca-1 and scb-1 but
    still holds scb-0 (it stays revoking), then gives up scb-0: epoch 4; s2 gets the other three. The
    heartbeats' answers, ConsumerGroupDescribe at each step and commits at s1's epochs."""
    peers = (ebb_peer, kafka_peer)
    ids_a = _topic_and_coordinators(peers, "sca", 2, ("sc", "sc-probe"))
    ids_b = _topic_and_coordinators(peers, "scb", 2, ())
    for topic in ("sca", "scb"):
        _assignable(peers, topic, "sc-probe")

    def scenario(peer: Peer) -> None:
        a, b = ids_a[peer.name], ids_b[peer.name]

        def beat(label: str, member: str, epoch: int, owned: dict | None, **fields) -> None:
            partitions = None if owned is None else [_Owned(topic_id=t, partitions=p) for t, p in owned.items() if p]
            answer = peer.send(ConsumerGroupHeartbeatRequest(group_id="sc", member_id=member, member_epoch=epoch,
                                                             topic_partitions=partitions, **fields), 1)
            if answer.assignment is not None:  # in topic order (Kafka lists them in its hash map's order)
                answer.assignment.topic_partitions.sort(key=lambda t: [a, b].index(t.topic_id))
            peer.record(label, answer)

        join = {"rebalance_timeout_ms": 30000, "subscribed_topic_names": ["sca", "scb"], "server_assignor": "range"}
        held = {a: [0, 1], b: [0, 1]}
        beat("s1 joins: all four at epoch 2", "s1", 0, {}, **join)
        beat("s2 joins at epoch 3", "s2", 0, {}, **join)
        beat("s1 is told to revoke sca-1 and scb-1", "s1", 2, held)
        _describe(peer, "describe while s1 revokes", ["sc"], {"s1": 2, "s2": 3})
        beat("s1 leaves scb holding all four: scb-0 to revoke too", "s1", 2, held, subscribed_topic_names=["sca"])
        _describe(peer, "describe once s1 left scb", ["sc"], {"s1": 2, "s2": 3}, {"s1": ["sca"]})
        beat("s2 waits at epoch 4", "s2", 3, {})
        beat("s1 revoked sca-1 and scb-1, holds scb-0", "s1", 2, {a: [0], b: [0]})
        _describe(peer, "describe while s1 holds scb-0", ["sc"], {"s1": 2, "s2": 4})
        beat("s1 revoked scb-0: epoch 4", "s1", 2, {a: [0]})
        beat("s2 gets sca-1, scb-0 and scb-1", "s2", 4, {})
        _describe(peer, "describe stable", ["sc"], {"s1": 4, "s2": 4})
        Part = _Commit.OffsetCommitRequestPartition
        for label, epoch, topic, partition in (("sca-0 at epoch 2", 2, "sca", 0), ("scb-0 at epoch 2", 2, "scb", 0),
                                               ("sca-0 at epoch 4", 4, "sca", 0)):
            peer.ask(f"s1 commits {label}", OffsetCommitRequest(
                group_id="sc", generation_id_or_member_epoch=epoch, member_id="s1",
                topics=[_Commit(name=topic, partitions=[Part(partition_index=partition, committed_offset=1)])]), 9)
        beat("s1 leaves", "s1", -1, None)
        beat("s2 leaves", "s2", -1, None)

    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not found, "\n".join(found)


def test_a_server_assignor_change_alone_moves_no_epoch(ebb_peer, kafka_peer):
    """a1 joins with the range assignor (epoch 2, both partitions), then names the uniform one at a heartbeat:
    not a subscription change, so the group epoch and a1's stay at 2; ConsumerGroupDescribe shows the
    assignor now asked for."""
    topic_ids = _topic_and_coordinators((ebb_peer, kafka_peer), "sat", 2, ("sa",))

    def scenario(peer: Peer) -> None:
        tid = topic_ids[peer.name]
        _beat(peer, "a1 joins with range: epoch 2", "sa", "a1", 0, [], **_range_join("sat"))
        _beat(peer, "a1 holds both", "sa", "a1", 2, [0, 1], tid)
        _beat(peer, "a1 asks for uniform: epoch 2 still", "sa", "a1", 2, [0, 1], tid, server_assignor="uniform")
        _describe(peer, "describe after the assignor change", ["sa"], {"a1": 2})
        _beat(peer, "a1 leaves", "sa", "a1", -1)

    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not found, "\n".join(found)


def test_a_group_assignment_interval_holds_the_target_back(ebb_peer, kafka_peer):
    """KIP-1263 at both ConsumerGroupHeartbeat versions, one group each, whose own
    consumer.assignment.interval.ms is an hour (set beforehand: Kafka applies a group config once its
    metadata reaches the coordinator): p1 joins and gets all of pca and pcb at epoch 2; p2 joins within the
    interval and gets the old target's epoch and nothing (the group epoch is 3, Assigning); p1, at the
    target's epoch, leaves pcb holding all four and is told to revoke it at once, then takes the old target
    without pcb. The group's interval is then deleted (the broker's 0 is in force) for one group and set to
    1 s for the other; p2's next heartbeats, once the change is in force and the interval has passed,
    compute the target of epoch 4; the members reconcile to it."""
    peers = (ebb_peer, kafka_peer)
    groups = [f"pc{v}" for v in (0, 1)]
    ids_a = _topic_and_coordinators(peers, "pca", 2, (*groups, "pc-probe"))
    ids_b = _topic_and_coordinators(peers, "pcb", 2, ())
    for topic in ("pca", "pcb"):
        _assignable(peers, topic, "pc-probe")
    interval = "consumer.assignment.interval.ms"

    def alter(peer: Peer, group: str, op: int, value: str | None):
        return peer.send(IncrementalAlterConfigsRequest(resources=[_Alter(resource_type=32, resource_name=group,
                                                                          configs=[_Op(name=interval,
                                                                                       config_operation=op,
                                                                                       value=value)])]), 1)

    def in_force(peer: Peer, group: str) -> str | None:
        [described] = peer.send(DescribeConfigsRequest(resources=[_Described(
            resource_type=32, resource_name=group, configuration_keys=[interval])]), 4).results
        return next((c.value for c in described.configs if c.config_source == 8), None)  # GROUP_CONFIG

    for peer in peers:
        for group in groups:
            assert alter(peer, group, 0, "3600000").responses[0].error_code == 0
            wait_for(lambda p=peer, g=group: in_force(p, g) == "3600000", what=f"{peer.name}: {group}'s interval")

    def paced(peer: Peer, version: int, group: str) -> None:
        a, b = ids_a[peer.name], ids_b[peer.name]

        def beat(member: str, epoch: int, owned: dict | None, **fields):
            partitions = None if owned is None else [_Owned(topic_id=t, partitions=p) for t, p in owned.items() if p]
            answer = peer.send(ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member, member_epoch=epoch, topic_partitions=partitions, **fields),
                version)
            if answer.assignment is not None:  # in topic order (Kafka lists them in its hash map's order)
                answer.assignment.topic_partitions.sort(key=lambda t: [a, b].index(t.topic_id))
            return answer

        def asked(label: str, member: str, epoch: int, owned: dict | None, **fields) -> None:
            peer.record(f"v{version}: {label}", beat(member, epoch, owned, **fields))

        join = {"rebalance_timeout_ms": 30000, "subscribed_topic_names": ["pca", "pcb"], "server_assignor": "range"}
        held = {a: [0, 1], b: [0, 1]}
        asked("p1 joins: all four at epoch 2", "p1", 0, {}, **join)
        asked("p2 joins within the interval: epoch 2, nothing", "p2", 0, {}, **join)
        _describe(peer, f"v{version}: describe while the target waits", [group], {"p1": 2, "p2": 2})
        asked("p1 within the interval: unchanged", "p1", 2, held)
        asked("p1 leaves pcb holding all four: pcb to revoke", "p1", 2, held, subscribed_topic_names=["pca"])
        asked("p1 revoked pcb: the old target without it", "p1", 2, {a: [0, 1]})
        _describe(peer, f"v{version}: describe once p1 left pcb", [group], {"p1": 2, "p2": 2}, {"p1": ["pca"]})
        if version == 0:  # the broker's interval (0) takes over
            peer.record("v0: the group's interval deleted", alter(peer, group, 1, None))
        else:
            peer.record("v1: the group's interval set to 1 s", alter(peer, group, 0, "1000"))
        moved = wait_for(lambda: (r := beat("p2", 2, {})).member_epoch != 2 and r,
                         what=f"{peer.name}: {group}'s next target")
        peer.record(f"v{version}: p2 computes the target of epoch 4, gets pcb", moved)
        asked("p1 is told to revoke pca-1", "p1", 2, {a: [0, 1]})
        asked("p1 revoked pca-1: epoch 4", "p1", 2, {a: [0]})
        asked("p2 gets pca-1", "p2", 4, {b: [0, 1]})
        _describe(peer, f"v{version}: describe stable", [group], {"p1": 4, "p2": 4})
        asked("p1 leaves", "p1", -1, None)
        asked("p2 leaves", "p2", -1, None)

    def scenario(peer: Peer) -> None:
        for version, group in enumerate(groups):
            paced(peer, version, group)

    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not found, "\n".join(found)
