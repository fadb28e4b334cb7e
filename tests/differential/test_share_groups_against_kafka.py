"""Share groups (KIP-932) against Kafka 4.3.1, with share groups enabled on Kafka as tests/franzgo_suite.py
enables them: ShareGroupHeartbeat's join, heartbeat, fencing, unknown members and groups, invalid
requests and leave, a classic or consumer group's id (AlterShareGroupOffsets' too); ShareGroupDescribe
of a share group, a classic group's id, a missing group and an empty id; ListGroups' type filter and
DescribeGroups and DeleteGroups of a share group; a group's own share.assignment.interval.ms (KIP-1263)
holding its target back, then deleted."""

from __future__ import annotations

import uuid

import pytest

from protocol.enums import IsolationLevel
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterShareGroupOffsetsRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupStateRequest,
    DescribeConfigsRequest,
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
    ShareGroupHeartbeatResponse,
    WriteShareGroupStateRequest,
)
from protocol.records import build_batch, iter_batches
from tests.broker.data_wire import batch, list_offsets_request, produce_request, values
from tests.broker.wire_client import create_topic
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED
from tests.differential.test_transactions_against_kafka import T0, _add, _end, _ready_producer, _wait
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

KAFKA_SHARE = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
               "share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1",
               "share.coordinator.state.topic.num.partitions": "5", "offsets.topic.replication.factor": "1",
               "group.initial.rebalance.delay.ms": "0",
               # a group's share.assignment.interval.ms of an hour, which no slow machine waits out
               "group.share.max.assignment.interval.ms": "3600000"}
# Both give a share group's partitions out only once their states are initialised (InitializeShareGroupState):
# the first answer to a joining member holds no partition, and a later heartbeat bumps the epoch with them.
# Kafka's epochs still run one ahead of Ebb's here (its join answers epoch 2 to a new group's first member;
# why is not established), so epochs are compared in the settled state only.
_Protocol = JoinGroupRequest.JoinGroupRequestProtocol
_Commit = OffsetCommitRequest.OffsetCommitRequestTopic
SETTLING = "Kafka's share group epochs run one ahead of Ebb's (see above)"
COMMITTED = IsolationLevel.READ_COMMITTED


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


def _share_fetch(group: str, member: str, epoch: int, topic_id=None, acks=(), max_records: int = 100,
                 wait_ms: int = 0):
    topic = ShareFetchRequest.FetchTopic
    topics = [] if topic_id is None else [topic(topic_id=topic_id, partitions=[topic.FetchPartition(
        partition_index=0, acknowledgement_batches=[
            topic.FetchPartition.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t])
            for f, last, t in acks])])]
    return ShareFetchRequest(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=wait_ms,
                             min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=500, topics=topics,
                             forgotten_topics_data=[])


def _share_ack(group: str, member: str, epoch: int, topic_id, acks):
    topic = ShareAcknowledgeRequest.AcknowledgeTopic
    return ShareAcknowledgeRequest(group_id=group, member_id=member, share_session_epoch=epoch, topics=[topic(
        topic_id=topic_id, partitions=[topic.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            topic.AcknowledgePartition.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t])
            for f, last, t in acks])])])


def _new_topic(peer: Peer, name: str):
    """A topic of one partition, led: its id."""
    created = create_topic(peer.client, name, 1)
    assert created.error_code == 0
    peer.wait_for_leaders(name, 1)
    return created.topic_id


def _share_group_configs(peer: Peer, group: str, configs: dict[str, str]) -> None:
    """Set the group's configs once its coordinator answers (it makes __consumer_offsets on the first ask)."""
    res = IncrementalAlterConfigsRequest.AlterConfigsResource
    assert peer.send(IncrementalAlterConfigsRequest(resources=[res(
        resource_type=32, resource_name=group, configs=[res.AlterableConfig(
            name=name, config_operation=0, value=value) for name, value in configs.items()])]), 1
    ).responses[0].error_code == 0
    wait_for(lambda: peer.send(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
             .coordinators[0].error_code == 0, timeout_s=60, what=f"{peer.name} coordinates {group}")


def _first_acquired(peer: Peer, group: str, topic_id):
    """Fetch (unrecorded, epochs 0, 1, ...) until records are acquired, as Kafka initialises the
    share-partition first: that answer and the session's next epoch."""
    epoch = 0

    def acquired():
        nonlocal epoch
        answer = peer.send(_share_fetch(group, "m", epoch, topic_id), 1)
        epoch += 1
        assert answer.error_code == 0, (peer.name, answer)
        return answer if any(p.acquired_records for t in answer.responses for p in t.partitions) else None

    return wait_for(acquired, timeout_s=30, what=f"{peer.name}: {group} acquires records"), epoch


def test_share_fetch_and_acknowledge(ebb_peer, kafka_peer):
    """Records produced, a member fetching from the start (share.auto.offset.reset=earliest), accepting,
    releasing and rejecting, the released records delivered again; and the session errors."""
    topic_ids = {}
    for peer in (ebb_peer, kafka_peer):
        topic_ids[peer.name] = _new_topic(peer, "fetched")
        for i in range(3):
            produced = peer.send(produce_request("fetched", 0, batch([f"r{2 * i}".encode(), f"r{2 * i + 1}".encode()])),
                                 9)
            assert produced.responses[0].partition_responses[0].error_code == 0
        _share_group_configs(peer, "sf", {"share.auto.offset.reset": "earliest"})

    def scenario(peer: Peer) -> None:
        topic_id = topic_ids[peer.name]
        peer.ask("fetch, no session", _share_fetch("sf", "m", 3, topic_id), 1)
        peer.ask("acknowledge opening a session", _share_ack("sf", "m", 0, topic_id, []), 1)
        peer.ask("fetch without a group id", _share_fetch("", "m", 0, topic_id), 1)
        _beat(peer, "join", "sf", "m", 0, ["fetched"])
        first, epoch = _first_acquired(peer, "sf", topic_id)
        peer.record("first records", first)
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
        # a group that never had the share-partition initialized (no member subscribed to its topic): its
        # share coordinator refuses the leader's read, and the leader makes no state (asked twice: again).
        # Kafka reads the state while the fetch waits: without a wait it may answer before the refusal.
        for label, epoch in (("fetch of an uninitialized share-partition", 0), ("and again", 1)):
            peer.ask(label, _share_fetch("sf-none", "u", epoch, topic_id, wait_ms=5000), 1)

    allowed = {**ALLOWED, ("join", "member_epoch"): SETTLING}
    # the batches are the same records, but each broker stamped its own append times (and so CRCs)
    found = compare(scenario, ebb_peer, kafka_peer, allowed, ignore=lambda path: path.endswith(".records"))
    assert not found, "\n".join(found)


_Init = InitializeShareGroupStateRequest.InitializeStateData
_Summary = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
_Read = ReadShareGroupStateRequest.ReadStateData
_Write = WriteShareGroupStateRequest.WriteStateData


def _initialize(group: str, topic_id, *partitions: tuple[int, int, int]) -> InitializeShareGroupStateRequest:
    """(partition, state epoch, start offset) each."""
    return InitializeShareGroupStateRequest(group_id=group, topics=[_Init(topic_id=topic_id, partitions=[
        _Init.PartitionData(partition=p, state_epoch=e, start_offset=o) for p, e, o in partitions])])


def _summary(group: str, topic_id, *partitions: int) -> ReadShareGroupStateSummaryRequest:
    return ReadShareGroupStateSummaryRequest(group_id=group, topics=[_Summary(topic_id=topic_id, partitions=[
        _Summary.PartitionData(partition=p, leader_epoch=0) for p in partitions])])


def _read(group: str, topic_id, partition: int, leader_epoch: int) -> ReadShareGroupStateRequest:
    return ReadShareGroupStateRequest(group_id=group, topics=[_Read(topic_id=topic_id, partitions=[
        _Read.PartitionData(partition=partition, leader_epoch=leader_epoch)])])


def _write(group: str, topic_id, partition: int, start_offset: int, state_epoch: int = 0,
           leader_epoch: int = 0) -> WriteShareGroupStateRequest:
    """A leader's write of `start_offset` and one acknowledged record there."""
    return WriteShareGroupStateRequest(group_id=group, topics=[_Write(topic_id=topic_id, partitions=[
        _Write.PartitionData(partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                             start_offset=start_offset,
                             state_batches=[_Write.PartitionData.StateBatch(
                                 first_offset=start_offset, last_offset=start_offset, delivery_state=2,
                                 delivery_count=1)])])])


def _member_holds(peer: Peer, group: str, member: str, topic: str, partitions: int) -> None:
    """Unrecorded: `member` joins `group` subscribing `topic` and heartbeats until it holds `partitions`
    partitions (their states initialized by the group's coordinator), then leaves."""
    joined = peer.send(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=0,
                                                  subscribed_topic_names=[topic]), 1)
    assert joined.error_code == 0, (peer.name, joined)
    state = {"epoch": joined.member_epoch}

    def holds() -> bool:
        answer = peer.send(ShareGroupHeartbeatRequest(group_id=group, member_id=member,
                                                      member_epoch=state["epoch"]), 1)
        assert answer.error_code == 0, (peer.name, answer)
        state["epoch"] = answer.member_epoch
        return answer.assignment is not None and sum(
            len(t.partitions) for t in answer.assignment.topic_partitions) == partitions

    wait_for(holds, timeout_s=30, what=f"{peer.name}: {member} holds {partitions} partitions")
    left = peer.send(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1), 1)
    assert left.error_code == 0, (peer.name, left)


def _share_state_apis(peer: Peer, topic_id) -> None:
    """The share coordinator's InitializeShareGroupState (83) and ReadShareGroupStateSummary (87): a
    first state, its summary at v0 and v1, fencing, a leader epoch read in (84), a read of a state never
    initialized (84: refused), and Kafka's checks."""
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
    for leader_epoch in (0, -1):  # a state never initialized: refused, with or without a leader epoch
        peer.ask(f"read never initialized, leader epoch {leader_epoch}", ReadShareGroupStateRequest(
            group_id="init-none", topics=[_Read(topic_id=topic_id, partitions=[
                _Read.PartitionData(partition=0, leader_epoch=leader_epoch)])]), 0)
    peer.ask("read never initialized, unknown topic", ReadShareGroupStateRequest(group_id="init-none", topics=[
        _Read(topic_id=ghost, partitions=[_Read.PartitionData(partition=0, leader_epoch=0)])]), 0)
    # a write makes no state, even carrying a start offset (only an initialization does), refused before the
    # topic's check
    peer.ask("write never initialized", _write("init-none", topic_id, 0, 5), 1)
    peer.ask("write never initialized, unknown topic", _write("init-none", ghost, 0, 5), 1)
    peer.ask("summary after the read", _summary("init-g", topic_id, 1), 1)
    peer.ask("initialize again", _initialize("init-g", topic_id, (1, 4, 2)), 0)
    peer.ask("summary and errors", _summary("init-g", topic_id, 1, -1, 9), 1)
    peer.ask("summary of an unknown topic", _summary("init-g", ghost, 0), 1)
    peer.ask("summary of a never-seen group", _summary("init-none", topic_id, 0), 1)
    peer.ask("summary without a group", _summary("", topic_id, 0), 1)
    peer.ask("summary of a topic without partitions", _summary("init-g", topic_id), 0)
    # the leader epoch fences first and on its own, then the state epoch; a write keeps the state epoch and an
    # initialization the leader epoch; a deleted state's next initialization takes the epochs asked
    peer.ask("initialize at 5", _initialize("init-e", topic_id, (0, 5, 0)), 0)
    peer.ask("read at leader epoch 3", _read("init-e", topic_id, 0, 3), 0)
    peer.ask("write at a newer state, older leader epoch", _write("init-e", topic_id, 0, 1, 6, 2), 1)
    peer.ask("write at an older state epoch", _write("init-e", topic_id, 0, 1, 4, 3), 1)
    peer.ask("write at a newer state epoch", _write("init-e", topic_id, 0, 1, 6, -1), 1)
    peer.ask("read after the write", _read("init-e", topic_id, 0, -1), 0)
    peer.ask("initialize at 6", _initialize("init-e", topic_id, (0, 6, 2)), 0)
    peer.ask("read at the old leader epoch", _read("init-e", topic_id, 0, 2), 0)
    _Delete = DeleteShareGroupStateRequest.DeleteStateData
    peer.ask("delete", DeleteShareGroupStateRequest(group_id="init-e", topics=[_Delete(topic_id=topic_id, partitions=[
        _Delete.PartitionData(partition=0)])]), 0)
    peer.ask("initialize after the delete at 1", _initialize("init-e", topic_id, (0, 1, -1)), 0)
    peer.ask("initialize after the delete at 2", _initialize("init-e", topic_id, (0, 2, 7)), 0)
    peer.ask("read at leader epoch 0 after the delete", _read("init-e", topic_id, 0, 0), 0)


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
        # initialized at the start offset asked (not written), as Kafka's group coordinator does it
        peer.ask("summary after the alter", _summary("so", topic_ids[peer.name], 0), 1)
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
        # the deleted state is no state to its share coordinator (a leader's read and write refused, the
        # summary none) until the group initializes it again, when a member subscribes
        tid = topic_ids[peer.name]
        for leader_epoch in (0, -1):
            peer.ask(f"read deleted, leader epoch {leader_epoch}", _read("so", tid, 0, leader_epoch), 0)
        peer.ask("write deleted", _write("so", tid, 0, 1), 1)
        peer.ask("summary deleted", _summary("so", tid, 0), 1)
        _member_holds(peer, "so", "again", "admin-shared", 2)
        peer.ask("read initialized again", _read("so", tid, 0, -1), 0)
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

    # Both initialize at the group epoch, which runs one ahead on Kafka (SETTLING): a new group's is already 1
    # at its AlterShareGroupOffsets, where Ebb's is 0.
    allowed = {**ALLOWED, **{(label, "results[0].partitions[0].state_epoch"): SETTLING
                             for label in ("summary after the alter", "read initialized again")}}
    found = compare(scenario, ebb_peer, kafka_peer, allowed)
    assert not found, "\n".join(found)


def _transactions(peer: Peer, topic: str, transactional_id: str) -> None:
    """On `topic`: a plain record, a transaction of two batches aborted, one of one batch committed and
    a last plain record (offsets 0, 1-2 and 3-4 aborted with the marker at 5, 6-7 with the marker at 8,
    9)."""
    ids = _ready_producer(peer, transactional_id)
    pid, epoch = ids.producer_id, ids.producer_epoch
    sequence = 0

    def txn_batch(*values_: bytes) -> bytes:
        nonlocal sequence
        data = build_batch([(None, v, [], T0) for v in values_], producer_id=pid, producer_epoch=epoch,
                           base_sequence=sequence, is_transactional=True)
        sequence += len(values_)
        return data

    def produce(data: bytes, transactional: bool = False) -> None:
        request = produce_request(topic, 0, data, acks=-1, transactional_id=transactional_id if transactional else None)
        _wait(f"{peer.name}: produced to {topic}", lambda: peer.send(request, 9).responses[0]
              .partition_responses[0].error_code == ErrorCode.NONE)

    def end(commit: bool) -> None:
        assert peer.send(_end(transactional_id, pid, epoch, commit), 3).error_code == ErrorCode.NONE
        _wait(f"{peer.name}: the marker", lambda: _latest(peer, topic, COMMITTED) == _latest(peer, topic, 0))

    def add() -> None:  # CONCURRENT_TRANSACTIONS while the last transaction completes: retried
        _wait(f"{peer.name}: partition added", lambda: peer.send(_add(topic, transactional_id, pid, epoch), 3)
              .results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.NONE)

    produce(build_batch([(None, b"plain-0", [], T0)]))
    add()
    produce(txn_batch(b"aborted-1", b"aborted-2"), True)
    produce(txn_batch(b"aborted-3", b"aborted-4"), True)
    end(False)
    add()
    produce(txn_batch(b"committed-6", b"committed-7"), True)
    end(True)
    produce(build_batch([(None, b"plain-9", [], T0)]))


def _latest(peer: Peer, topic: str, isolation: int) -> int:
    return peer.send(list_offsets_request(topic, 0, -1, isolation_level=isolation), 7).topics[0].partitions[0].offset


def _acquired_values(answer) -> list[bytes]:
    """What a share consumer takes from a partition's answer: the records of the acquired ranges."""
    part = answer.responses[0].partitions[0]
    wanted = {o for a in part.acquired_records for o in range(a.first_offset, a.last_offset + 1)}
    return [r.value for b in iter_batches(bytes(part.records or b"")) if not b.is_control
            for r in b.records() if r.offset in wanted]


def test_share_fetch_of_transactions(ebb_peer, kafka_peer):
    """A transactional producer's aborted and committed records fetched by two share groups, one under
    share.isolation.level=read_committed (the aborted ones archived, never delivered), one under
    read_uncommitted (everything); acknowledged, fetched again, and the start offsets described."""
    topic_ids = {}
    for peer in (ebb_peer, kafka_peer):
        topic_ids[peer.name] = _new_topic(peer, "txn-shared")
        _transactions(peer, "txn-shared", "stx")
        for group, level in (("stx-rc", "read_committed"), ("stx-ru", "read_uncommitted")):
            _share_group_configs(peer, group, {"share.auto.offset.reset": "earliest", "share.isolation.level": level})
            # and has loaded its __consumer_offsets partition (COORDINATOR_LOAD_IN_PROGRESS until then)
            wait_for(lambda p=peer, g=group: p.send(ShareGroupDescribeRequest(group_ids=[g]), 1)
                     .groups[0].error_code == 69, timeout_s=60, what=f"{peer.name} loaded {group}")
    delivered: dict[tuple[str, str], list[bytes]] = {}
    describe = DescribeShareGroupOffsetsRequest
    topic_ask = describe.DescribeShareGroupOffsetsRequestGroup.DescribeShareGroupOffsetsRequestTopic

    def scenario(peer: Peer) -> None:
        topic_id = topic_ids[peer.name]
        for group in ("stx-rc", "stx-ru"):
            _beat(peer, f"{group}: join", group, "m", 0, ["txn-shared"])
            first, epoch = _first_acquired(peer, group, topic_id)
            peer.record(f"{group}: records", first)
            delivered[(peer.name, group)] = _acquired_values(first)
            ranges = [(a.first_offset, a.last_offset, 1) for a in first.responses[0].partitions[0].acquired_records]
            peer.ask(f"{group}: accept them all", _share_ack(group, "m", epoch, topic_id, ranges), 1)
            peer.ask(f"{group}: nothing left", _share_fetch(group, "m", epoch + 1, topic_id), 1)
            peer.ask(f"{group}: start offset", describe(groups=[describe.DescribeShareGroupOffsetsRequestGroup(
                group_id=group, topics=[topic_ask(topic_name="txn-shared", partitions=[0])])]), 1)

    start = "Kafka answers start offset 0 once every record is acknowledged, plain records too (lag 0 alike)"
    allowed = {**ALLOWED, **{(f"{g}: join", "member_epoch"): SETTLING for g in ("stx-rc", "stx-ru")},
               **{(f"{g}: start offset", "groups[0].topics[0].partitions[0].start_offset"): start
                  for g in ("stx-rc", "stx-ru")}}
    # the batches are the same records, but each broker stamped its own append times (and so CRCs)
    found = compare(scenario, ebb_peer, kafka_peer, allowed, ignore=lambda path: path.endswith(".records"))
    assert not found, "\n".join(found)
    plain, committed = [b"plain-0", b"plain-9"], [b"committed-6", b"committed-7"]
    for name in ("ebb", "kafka"):
        assert delivered[(name, "stx-rc")] == [plain[0], *committed, plain[1]], name
        assert delivered[(name, "stx-ru")] == [plain[0], b"aborted-1", b"aborted-2", b"aborted-3", b"aborted-4",
                                               *committed, plain[1]], name


def _share_interval(peer: Peer, group: str, value: str | None):
    """IncrementalAlterConfigs of the group's share.assignment.interval.ms (None: deleted)."""
    res = IncrementalAlterConfigsRequest.AlterConfigsResource
    return peer.send(IncrementalAlterConfigsRequest(resources=[res(
        resource_type=32, resource_name=group, configs=[res.AlterableConfig(
            name="share.assignment.interval.ms", config_operation=0 if value is not None else 1, value=value)])]), 1)


def _interval_in_force(peer: Peer, group: str, value: str | None) -> None:
    """Until the group describes `value` as its own interval (None: none of its own): Kafka applies a group
    config once its metadata reaches the group coordinator."""
    def shown() -> bool:
        [described] = peer.send(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=32, resource_name=group, configuration_keys=["share.assignment.interval.ms"])]), 4).results
        return next((c.value for c in described.configs if c.config_source == 8), None) == value  # GROUP_CONFIG
    wait_for(shown, what=f"{peer.name}: {group}'s interval {value}")


def _relative(answer, base: int):
    """A heartbeat's or ShareGroupDescribe's answer with its epochs counted from `base`: Kafka's share group
    epochs run one ahead of Ebb's (module comment), so a scenario that follows them compares how far each
    moved from the same point instead."""
    if isinstance(answer, ShareGroupHeartbeatResponse):
        if answer.member_epoch > 0:
            answer.member_epoch -= base
        return answer
    for group in answer.groups:
        group.group_epoch -= base
        group.assignment_epoch -= base
        for member in group.members:
            member.member_epoch -= base
    return answer


def test_a_group_assignment_interval_holds_the_share_target_back(ebb_peer, kafka_peer):
    """KIP-1263 for share groups at ShareGroupHeartbeat v1 (the one version both serve), over two topics of
    one partition each (the simple assignor shares it, so no hash order picks who keeps what): the group's
    own share.assignment.interval.ms, 0 while p1 settles holding sia-0, is set to an hour
    (IncrementalAlterConfigs, awaited until in force); p2 joining within it gets the old target's epoch
    and nothing (the group epoch moved, the assignment epoch not); p1 subscribing to sib too is answered
    with what it holds (sib-0 is initialized meanwhile, but the target giving it out waits), leaving sia
    gives it up at once, coming back takes the old target again. Once the group's interval is deleted (the
    broker's 1 s is in force, long passed since the last target), p2's next heartbeat computes the new
    target: both members share sia-0. Epochs are compared as counted from p1's settled one (_relative)."""
    peers = (ebb_peer, kafka_peer)
    ids = {}
    for peer in peers:
        ids[peer.name] = {name: create_topic(peer.client, name, 1).topic_id for name in ("sia", "sib")}
        for name in ("sia", "sib"):
            peer.wait_for_leaders(name, 1)
        assert _share_interval(peer, "si", "0").responses[0].error_code == 0
        _interval_in_force(peer, "si", "0")
        # Kafka makes __consumer_offsets on the first FindCoordinator, then loads the group's partition
        wait_for(lambda p=peer: p.send(FindCoordinatorRequest(key_type=0, coordinator_keys=["si"]), 4)
                 .coordinators[0].error_code == 0, timeout_s=60, what=f"{peer.name} coordinates si")
        wait_for(lambda p=peer: p.send(ShareGroupDescribeRequest(group_ids=["si"]), 1).groups[0].error_code == 69,
                 timeout_s=60, what=f"{peer.name} loaded si")

    def scenario(peer: Peer) -> None:
        a, b = ids[peer.name]["sia"], ids[peer.name]["sib"]

        def send(member: str, epoch: int, topics: list[str] | None = None):
            answer = peer.send(ShareGroupHeartbeatRequest(group_id="si", member_id=member, member_epoch=epoch,
                                                          subscribed_topic_names=topics), 1)
            assert answer.error_code == 0, (peer.name, answer)
            if answer.assignment is not None:  # in topic order (Kafka lists them in its hash map's order)
                answer.assignment.topic_partitions.sort(key=lambda t: [a, b].index(t.topic_id))
            return answer

        def holds_sia() -> int | None:
            """p1's heartbeats (unrecorded) until it holds sia-0: its epoch then."""
            answer = send("p1", state["epoch"])
            state["epoch"] = answer.member_epoch
            if answer.assignment is not None:
                state["held"] = [(t.topic_id, t.partitions) for t in answer.assignment.topic_partitions]
            return answer.member_epoch if state["held"] == [(a, [0])] else None

        state = {"epoch": send("p1", 0, ["sia"]).member_epoch, "held": []}
        base = wait_for(holds_sia, timeout_s=30, what=f"{peer.name}: p1 holds sia-0")

        def beat(label: str, member: str, epoch: int, topics: list[str] | None = None):
            peer.record(label, _relative(send(member, epoch, topics), base))

        def describe(label: str, epochs: dict[str, int]) -> None:
            def settled():
                answer = peer.send(ShareGroupDescribeRequest(group_ids=["si"]), 1)
                return answer if {m.member_id: m.member_epoch for m in answer.groups[0].members} == epochs else None

            answer = wait_for(settled, timeout_s=10, what=f"{peer.name}: {label} shows {epochs}")
            for member in answer.groups[0].members:
                member.subscribed_topic_names.sort()
                member.assignment.topic_partitions.sort(key=lambda t: t.topic_name)
            answer.groups[0].members.sort(key=lambda m: m.member_id)
            peer.record(label, _relative(answer, base))

        describe("p1 settled holding sia-0", {"p1": base})
        peer.record("the group's interval set to an hour", _share_interval(peer, "si", "3600000"))
        _interval_in_force(peer, "si", "3600000")
        beat("p2 joins within the interval: the old target's epoch, nothing", "p2", 0, ["sia"])
        describe("describe while the target waits", {"p1": base, "p2": base})
        beat("p1 within the interval: unchanged", "p1", base)
        beat("p1 subscribes to sib too: what it holds", "p1", base, ["sia", "sib"])
        beat("p1 leaves sia: gives it up at once", "p1", base, ["sib"])
        beat("p1 takes sia again: the old target", "p1", base, ["sia"])
        beat("p1 sends the same subscription: answered with it", "p1", base, ["sia"])
        peer.record("the group's interval deleted", _share_interval(peer, "si", None))
        _interval_in_force(peer, "si", None)
        moved = wait_for(lambda: (r := send("p2", base)).member_epoch != base and r,
                         what=f"{peer.name}: si's next target")
        epoch = moved.member_epoch
        peer.record("p2 computes the next target: shares sia-0", _relative(moved, base))
        beat("p1 takes its part", "p1", base)
        describe("describe once both took it", {"p1": epoch, "p2": epoch})
        beat("p1 leaves", "p1", -1)
        beat("p2 leaves", "p2", -1)

    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED)
    assert not found, "\n".join(found)
