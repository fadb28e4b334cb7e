"""Share groups (KIP-932) against Kafka 4.3.1, with share groups enabled on Kafka as tests/franzgo_suite.py
enables them: ShareGroupHeartbeat's join, heartbeat, fencing, unknown members and groups, invalid
requests and leave, a classic or consumer group's id (AlterShareGroupOffsets' too); ShareGroupDescribe
of a share group, a classic group's id, a missing group and an empty id; ListGroups' type filter and
DescribeGroups and DeleteGroups of a share group."""

from __future__ import annotations

import uuid

import pytest

from protocol.messages import (
    AlterShareGroupOffsetsRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeGroupsRequest,
    DescribeShareGroupOffsetsRequest,
    FindCoordinatorRequest,
    IncrementalAlterConfigsRequest,
    InitializeShareGroupStateRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from tests.broker.data_wire import batch, produce_request, values
from tests.broker.wire_client import create_topic
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

KAFKA_SHARE = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
               "share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1",
               "share.coordinator.state.topic.num.partitions": "5", "offsets.topic.replication.factor": "1",
               "group.initial.rebalance.delay.ms": "0"}
# Both give a share group's partitions out only once their states are initialised (InitializeShareGroupState):
# the first answer to a joining member holds no partition, and a later heartbeat bumps the epoch with them.
# Kafka's epochs still run one ahead of Ebb's here (its join answers epoch 2 to a new group's first member;
# why is not established), so epochs are compared in the settled state only.
_Protocol = JoinGroupRequest.JoinGroupRequestProtocol
_Commit = OffsetCommitRequest.OffsetCommitRequestTopic
SETTLING = "Kafka's share group epochs run one ahead of Ebb's (see above)"


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return KAFKA_SHARE


def _beat(peer: Peer, label: str, group: str, member: str, epoch: int, topics: list[str] | None = None,
          rack: str | None = None):
    return peer.ask(label, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                                                      rack_id=rack, subscribed_topic_names=topics), 1)


def _settled(peer: Peer, group: str, member: str, partitions: int) -> int:
    """Heartbeat (unrecorded) until the member holds `partitions` partitions; its epoch then."""
    state = {"epoch": 0, "held": 0}

    def holds() -> bool:
        answer = peer.send(ShareGroupHeartbeatRequest(group_id=group, member_id=member,
                                                      member_epoch=state["epoch"]), 1)
        assert answer.error_code == 0, answer
        state["epoch"] = answer.member_epoch
        if answer.assignment is not None:
            state["held"] = sum(len(t.partitions) for t in answer.assignment.topic_partitions)
        return state["held"] == partitions

    joined = peer.send(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                                  subscribed_topic_names=["shared"]), 1)
    assert joined.error_code == 0, (peer.name, joined)
    state["epoch"] = joined.member_epoch
    if joined.assignment is not None:
        state["held"] = sum(len(t.partitions) for t in joined.assignment.topic_partitions)
    wait_for(holds, timeout_s=30, what=f"{peer.name}: {member} holds {partitions} partitions")
    return state["epoch"]


def test_share_group_heartbeats_and_errors(ebb_peer, kafka_peer):
    for peer in (ebb_peer, kafka_peer):
        assert create_topic(peer.client, "shared", 3).error_code == 0
        peer.wait_for_leaders("shared", 3)
        for group in ("sg", "sg-bad", "sg-none", "cg", "kg"):  # Kafka makes __consumer_offsets on the first ask
            wait_for(lambda g=group, p=peer: p.send(FindCoordinatorRequest(key_type=0, coordinator_keys=[g]), 4)
                     .coordinators[0].error_code == 0, timeout_s=60, what=f"{peer.name} coordinates {group}")
            # and has loaded its __consumer_offsets partition (COORDINATOR_LOAD_IN_PROGRESS until then)
            wait_for(lambda g=group, p=peer: p.send(ShareGroupDescribeRequest(group_ids=[g]), 1)
                     .groups[0].error_code == 69, timeout_s=60, what=f"{peer.name} loaded {group}")

    def scenario(peer: Peer) -> None:
        _beat(peer, "join without topics", "sg-bad", "m", 0, [])
        _beat(peer, "join without a member id", "sg-bad", "", 0, ["shared"])
        _beat(peer, "blank rack", "sg-bad", "m", 0, ["shared"], rack=" ")
        _beat(peer, "epoch -2", "sg-bad", "m", -2)
        _beat(peer, "unknown group, epoch 3", "sg-none", "m", 3)
        _beat(peer, "leave an unknown group", "sg-none", "m", -1)
        epoch = _settled(peer, "sg", "m1", 3)
        _beat(peer, "heartbeat, settled", "sg", "m1", epoch)
        _beat(peer, "epoch ahead", "sg", "m1", epoch + 5)
        _beat(peer, "unknown member", "sg", "m9", epoch)
        peer.ask("describe", ShareGroupDescribeRequest(group_ids=["sg", ""], include_authorized_operations=True), 1)
        peer.ask("describe a missing group", ShareGroupDescribeRequest(group_ids=["sg-none"]), 1)
        peer.ask("classic join of a share group's id", JoinGroupRequest(
            group_id="sg", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            protocol_type="consumer", protocols=[_Protocol(name="range", metadata=b"")]), 9)
        peer.ask("commit to a share group's id", OffsetCommitRequest(
            group_id="sg", generation_id_or_member_epoch=-1, member_id="", topics=[_Commit(name="shared", partitions=[
                _Commit.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 8)
        peer.ask("list share groups", ListGroupsRequest(types_filter=["share"]), 5)
        peer.ask("describe groups v5", DescribeGroupsRequest(groups=["sg"]), 5)
        peer.ask("describe groups v6", DescribeGroupsRequest(groups=["sg"]), 6)
        peer.ask("delete while a member is in", DeleteGroupsRequest(groups_names=["sg"]), 2)
        _beat(peer, "leave", "sg", "m1", -1)
        _beat(peer, "leave again", "sg", "m1", -1)
        peer.ask("describe empty", ShareGroupDescribeRequest(group_ids=["sg"]), 1)
        peer.ask("list empty", ListGroupsRequest(types_filter=["share"]), 5)
        peer.ask("delete", DeleteGroupsRequest(groups_names=["sg"]), 2)
        peer.ask("describe deleted", ShareGroupDescribeRequest(group_ids=["sg"]), 1)
        peer.ask("classic join", JoinGroupRequest(group_id="cg", session_timeout_ms=10000,
                                                  rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
                                                  protocols=[_Protocol(name="range", metadata=b"")]), 9)
        _beat(peer, "share heartbeat on a classic group's id", "cg", "m", 0, ["shared"])
        peer.ask("share describe of a classic group's id", ShareGroupDescribeRequest(group_ids=["cg"]), 1)
        joined = peer.send(ConsumerGroupHeartbeatRequest(  # a KIP-848 consumer group holds "kg"
            group_id="kg", member_id="kg-member-0000000001", member_epoch=0, rebalance_timeout_ms=10000,
            subscribed_topic_names=["shared"], topic_partitions=[]), 1)
        assert joined.error_code == 0, (peer.name, joined)
        _beat(peer, "share heartbeat on a consumer group's id", "kg", "m", 0, ["shared"])
        alter = AlterShareGroupOffsetsRequest
        peer.ask("alter share offsets of a consumer group's id", alter(group_id="kg", topics=[
            alter.AlterShareGroupOffsetsRequestTopic(topic_name="shared", partitions=[
                alter.AlterShareGroupOffsetsRequestTopic.AlterShareGroupOffsetsRequestPartition(
                    partition_index=0, start_offset=1)])]), 0)

    allowed = {**ALLOWED, ("heartbeat, settled", "member_epoch"): SETTLING,
               ("describe", "groups[1].group_epoch"): SETTLING, ("describe", "groups[1].assignment_epoch"): SETTLING,
               ("describe", "groups[1].members[0].member_epoch"): SETTLING,
               ("describe empty", "groups[0].group_epoch"): SETTLING,
               ("describe empty", "groups[0].assignment_epoch"): SETTLING}
    found = compare(scenario, ebb_peer, kafka_peer, allowed)
    assert not found, "\n".join(found)


def _share_fetch(group: str, member: str, epoch: int, topic_id=None, acks=(), max_records: int = 100):
    topic = ShareFetchRequest.FetchTopic
    topics = [] if topic_id is None else [topic(topic_id=topic_id, partitions=[topic.FetchPartition(
        partition_index=0, acknowledgement_batches=[
            topic.FetchPartition.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t])
            for f, last, t in acks])])]
    return ShareFetchRequest(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=0, min_bytes=1,
                             max_bytes=1 << 20, max_records=max_records, batch_size=500, topics=topics,
                             forgotten_topics_data=[])


def _share_ack(group: str, member: str, epoch: int, topic_id, acks):
    topic = ShareAcknowledgeRequest.AcknowledgeTopic
    return ShareAcknowledgeRequest(group_id=group, member_id=member, share_session_epoch=epoch, topics=[topic(
        topic_id=topic_id, partitions=[topic.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            topic.AcknowledgePartition.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t])
            for f, last, t in acks])])])


def test_share_fetch_and_acknowledge(ebb_peer, kafka_peer):
    """Records produced, a member fetching from the start (share.auto.offset.reset=earliest), accepting,
    releasing and rejecting, the released records delivered again; and the session errors."""
    topic_ids = {}
    for peer in (ebb_peer, kafka_peer):
        answer = create_topic(peer.client, "fetched", 1)
        assert answer.error_code == 0
        topic_ids[peer.name] = answer.topic_id
        peer.wait_for_leaders("fetched", 1)
        for i in range(3):
            produced = peer.send(produce_request("fetched", 0, batch([f"r{2 * i}".encode(), f"r{2 * i + 1}".encode()])),
                                 9)
            assert produced.responses[0].partition_responses[0].error_code == 0
        res = IncrementalAlterConfigsRequest.AlterConfigsResource
        assert peer.send(IncrementalAlterConfigsRequest(resources=[res(
            resource_type=32, resource_name="sf", configs=[res.AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="earliest")])]), 1
        ).responses[0].error_code == 0
        wait_for(lambda p=peer: p.send(FindCoordinatorRequest(key_type=0, coordinator_keys=["sf"]), 4)
                 .coordinators[0].error_code == 0, timeout_s=60, what=f"{peer.name} coordinates sf")

    def scenario(peer: Peer) -> None:
        topic_id = topic_ids[peer.name]
        peer.ask("fetch, no session", _share_fetch("sf", "m", 3, topic_id), 1)
        peer.ask("acknowledge opening a session", _share_ack("sf", "m", 0, topic_id, []), 1)
        peer.ask("fetch without a group id", _share_fetch("", "m", 0, topic_id), 1)
        _beat(peer, "join", "sf", "m", 0, ["fetched"])
        epoch = 0

        def acquired():  # Kafka initialises the share-partition first: fetch until records come
            nonlocal epoch
            answer = peer.send(_share_fetch("sf", "m", epoch, topic_id), 1)
            epoch += 1
            assert answer.error_code == 0, (peer.name, answer)
            return answer if any(p.acquired_records for t in answer.responses for p in t.partitions) else None

        first = peer.record("first records", wait_for(acquired, timeout_s=30, what=f"{peer.name}: records acquired"))
        assert values(first.responses[0].partitions[0]) == [f"r{i}".encode() for i in range(6)]
        peer.ask("fetch again: all held", _share_fetch("sf", "m", epoch, topic_id), 1)
        peer.ask("wrong epoch", _share_fetch("sf", "m", epoch + 7, topic_id), 1)
        peer.ask("acknowledge", _share_ack("sf", "m", epoch + 1, topic_id, [(0, 1, 1), (2, 3, 2), (4, 5, 3)]), 1)
        peer.ask("acknowledge what is not held", _share_ack("sf", "m", epoch + 2, topic_id, [(0, 1, 1)]), 1)
        peer.ask("released ones again", _share_fetch("sf", "m", epoch + 3, topic_id), 1)
        peer.ask("close with an accept", _share_fetch("sf", "m", -1, topic_id, acks=[(2, 3, 1)]), 1)
        peer.ask("after close", _share_fetch("sf", "m", epoch + 4, topic_id), 1)
        # newContext's edge cases: a session opened with acknowledgements, closed naming partitions
        peer.ask("open with acknowledgements", _share_fetch("sf", "m", 0, topic_id, acks=[(0, 1, 1)]), 1)
        peer.ask("open again", _share_fetch("sf", "m", 0, topic_id), 1)
        peer.ask("close naming a partition", _share_fetch("sf", "m", -1, topic_id), 1)
        peer.ask("close naming none", _share_fetch("sf", "m", -1), 1)
        peer.ask("after that close", _share_fetch("sf", "m", 2, topic_id), 1)

    allowed = {**ALLOWED, ("join", "member_epoch"): SETTLING}
    # the batches are the same records, but each broker stamped its own append times (and so CRCs)
    found = compare(scenario, ebb_peer, kafka_peer, allowed, ignore=lambda path: path.endswith(".records"))
    assert not found, "\n".join(found)


_Init = InitializeShareGroupStateRequest.InitializeStateData
_Summary = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
_Read = ReadShareGroupStateRequest.ReadStateData


def _initialize(group: str, topic_id, *partitions: tuple[int, int, int]) -> InitializeShareGroupStateRequest:
    """(partition, state epoch, start offset) each."""
    return InitializeShareGroupStateRequest(group_id=group, topics=[_Init(topic_id=topic_id, partitions=[
        _Init.PartitionData(partition=p, state_epoch=e, start_offset=o) for p, e, o in partitions])])


def _summary(group: str, topic_id, *partitions: int) -> ReadShareGroupStateSummaryRequest:
    return ReadShareGroupStateSummaryRequest(group_id=group, topics=[_Summary(topic_id=topic_id, partitions=[
        _Summary.PartitionData(partition=p, leader_epoch=0) for p in partitions])])


def _share_state_apis(peer: Peer, topic_id) -> None:
    """The share coordinator's InitializeShareGroupState (83) and ReadShareGroupStateSummary (87): a
    first state, its summary at v0 and v1, fencing, a leader epoch read in (84), and Kafka's checks."""
    ghost = uuid.UUID(int=1)
    peer.ask("initialize", _initialize("init-g", topic_id, (1, 3, 5), (0, 0, -1)), 0)
    for version in (0, 1):
        peer.ask(f"summary v{version}", _summary("init-g", topic_id, 1, 0), version)
    peer.ask("initialize at an older state epoch", _initialize("init-g", topic_id, (1, 2, 7)), 0)
    # (one topic a request: Kafka answers several in its hash map's order)
    peer.ask("initialize errors", _initialize("init-g", topic_id, (-1, 0, 0), (9, 0, 0)), 0)
    peer.ask("initialize an unknown topic", _initialize("init-g", ghost, (0, 0, 0)), 0)
    peer.ask("initialize without a group", _initialize("", topic_id, (1, 0, 0)), 0)
    peer.ask("initialize no topic", InitializeShareGroupStateRequest(group_id="init-g", topics=[]), 0)
    peer.ask("read with a leader epoch", ReadShareGroupStateRequest(group_id="init-g", topics=[_Read(
        topic_id=topic_id, partitions=[_Read.PartitionData(partition=1, leader_epoch=4)])]), 0)
    peer.ask("summary after the read", _summary("init-g", topic_id, 1), 1)
    peer.ask("initialize again", _initialize("init-g", topic_id, (1, 4, 2)), 0)
    peer.ask("summary and errors", _summary("init-g", topic_id, 1, -1, 9), 1)
    peer.ask("summary of an unknown topic", _summary("init-g", ghost, 0), 1)
    peer.ask("summary of a never-seen group", _summary("init-none", topic_id, 0), 1)
    peer.ask("summary without a group", _summary("", topic_id, 0), 1)
    peer.ask("summary of a topic without partitions", _summary("init-g", topic_id), 0)


def test_share_group_offsets_admin(ebb_peer, kafka_peer):
    """AlterShareGroupOffsets making a group and setting start offsets, DescribeShareGroupOffsets of named
    partitions and of all (v0 and v1's lag), DeleteShareGroupOffsets (of a topic with state, of one without or
missing, of a group that never had state), and their group errors; FindCoordinator's
    share coordinator keys (key type 2: v6 only, keys that parse or not); the share coordinator's
    InitializeShareGroupState and ReadShareGroupStateSummary once its state topic exists."""
    topic_ids = {}
    for peer in (ebb_peer, kafka_peer):
        created = create_topic(peer.client, "admin-shared", 2)
        assert created.error_code == 0
        topic_ids[peer.name] = created.topic_id
        peer.wait_for_leaders("admin-shared", 2)
        for _ in range(2):  # a new partition may refuse at first (NOT_LEADER_OR_FOLLOWER until it leads)
            wait_for(lambda p=peer: p.send(produce_request("admin-shared", 0, batch([b"x", b"y"])), 9)
                     .responses[0].partition_responses[0].error_code == 0, what=f"{peer.name} took the records")
        for group in ("so", "so-none", "so-bare"):
            wait_for(lambda g=group, p=peer: p.send(FindCoordinatorRequest(key_type=0, coordinator_keys=[g]), 4)
                     .coordinators[0].error_code == 0, timeout_s=60, what=f"{peer.name} coordinates {group}")
        # Kafka's coordinator may still be loading the group's partition when this runs first
        wait_for(lambda p=peer: p.send(DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id="so-none", topics=None)]),
            1).groups[0].error_code not in (14, 15, 16), timeout_s=60, what=f"{peer.name} loaded so-none's coordinator")
    alter, describe = AlterShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequest
    topic_ask = describe.DescribeShareGroupOffsetsRequestGroup.DescribeShareGroupOffsetsRequestTopic

    def scenario(peer: Peer) -> None:
        peer.ask("describe a missing group", describe(groups=[describe.DescribeShareGroupOffsetsRequestGroup(
            group_id="so-none", topics=None)]), 1)
        peer.ask("delete offsets of a missing group", DeleteShareGroupOffsetsRequest(group_id="so-none", topics=[
            DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name="admin-shared")]), 0)
        peer.ask("alter makes the group", alter(group_id="so", topics=[alter.AlterShareGroupOffsetsRequestTopic(
            topic_name="admin-shared", partitions=[
                alter.AlterShareGroupOffsetsRequestTopic.AlterShareGroupOffsetsRequestPartition(
                    partition_index=0, start_offset=1)])]), 0)
        for version in (0, 1):
            peer.ask(f"describe named v{version}", describe(groups=[describe.DescribeShareGroupOffsetsRequestGroup(
                group_id="so", topics=[topic_ask(topic_name="admin-shared", partitions=[0, 1])])]), version)
            peer.ask(f"describe all v{version}", describe(groups=[describe.DescribeShareGroupOffsetsRequestGroup(
                group_id="so", topics=None)]), version)
        peer.ask("list", ListGroupsRequest(types_filter=["share"]), 5)
        # the share coordinator of a share-partition's key (the state topic exists now on both)
        key = "so:AAAAAAAAAAAAAAAAAAAAAQ:0"
        peer.ask("share coordinator key v5", FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 5)
        peer.ask("share coordinator keys v6", FindCoordinatorRequest(key_type=2, coordinator_keys=[
            key, "so:with:colons:AAAAAAAAAAAAAAAAAAAAAQ:3", "no-colons", "g:not-an-id:0", "g:AAAAAAAAAAAAAAAAAAAAAQ:x",
            " :AAAAAAAAAAAAAAAAAAAAAQ:0"]), 6)
        peer.ask("delete offsets", DeleteShareGroupOffsetsRequest(group_id="so", topics=[
            DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name="admin-shared")]), 0)
        peer.ask("describe all after", describe(groups=[describe.DescribeShareGroupOffsetsRequestGroup(
            group_id="so", topics=None)]), 1)
        # its state deleted (no longer initialized nor deleting), and a topic that does not exist
        peer.ask("delete offsets again", DeleteShareGroupOffsetsRequest(group_id="so", topics=[
            DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name="admin-shared"),
            DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name="no-such-topic")]), 0)
        peer.ask("delete the group", DeleteGroupsRequest(groups_names=["so"]), 2)
        # a group that never had a share-partition initialized (its only topic does not exist): no topic answered
        joined = peer.send(ShareGroupHeartbeatRequest(group_id="so-bare", member_id="m", member_epoch=0,
                                                      subscribed_topic_names=["no-such-topic"]), 1)
        assert joined.error_code == 0, (peer.name, joined)
        left = peer.send(ShareGroupHeartbeatRequest(group_id="so-bare", member_id="m", member_epoch=-1), 1)
        assert left.error_code == 0, (peer.name, left)
        peer.ask("delete offsets of a group without state", DeleteShareGroupOffsetsRequest(group_id="so-bare", topics=[
            DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name="admin-shared")]), 0)
        peer.ask("delete the group without state", DeleteGroupsRequest(groups_names=["so-bare"]), 2)
        _share_state_apis(peer, topic_ids[peer.name])

    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not found, "\n".join(found)
