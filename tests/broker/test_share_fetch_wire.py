"""ShareFetch (78) and ShareAcknowledge (79) through the wire against a broker process (KIP-932):
share sessions and their epochs, acquisition of new and released records with delivery counts,
accept/release/reject, lock expiry, the delivery count limit, the start offset from
share.auto.offset.reset, releasing on session close, the record bytes sent as stored, and no state made
by a leader for a share-partition its group never initialized."""

from __future__ import annotations

import itertools
import signal
import time
import uuid

import pytest

from protocol.enums import IsolationLevel
from protocol.errors import ErrorCode
from protocol.messages import AlterShareGroupOffsetsRequest as Alter
from protocol.messages import DeleteShareGroupOffsetsRequest as Delete
from protocol.messages import DeleteShareGroupStateRequest as DeleteState
from protocol.messages import (
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    MetadataRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from protocol.messages import DescribeShareGroupOffsetsRequest as Describe
from protocol.messages import InitializeShareGroupStateRequest as InitializeState
from protocol.messages import ReadShareGroupStateRequest as ReadState
from protocol.messages import WriteShareGroupStateRequest as WriteState
from protocol.records import iter_batches
from tests.broker.data_wire import WireClient, batch, create_topic, init_producer_id, produce, values
from tests.broker.group_wire import share_settled
from tests.broker.test_transactions import _add_partitions, _end_txn, _latest, _txn_batch
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for

E = ErrorCode
COMMITTED = IsolationLevel.READ_COMMITTED
ACCEPT, RELEASE, REJECT = 1, 2, 3
# Targets at once (no share.assignment.interval.ms): the SIGKILL test's second member joins at the next epoch.
OVERRIDES = {"group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": "1000",
             "group.share.delivery.count.limit": "3", "group.share.min.delivery.count.limit": "2",
             "group.share.assignment.interval.ms": "0"}
_names = itertools.count()
_Topic = ShareFetchRequest.FetchTopic
_Part = _Topic.FetchPartition
_Batch = _Part.AcknowledgementBatch
_AckTopic = ShareAcknowledgeRequest.AcknowledgeTopic


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("share-fetch"), OVERRIDES) as process:
        yield process


@pytest.fixture
def client(broker):
    with WireClient(broker.port) as c:
        yield c


def setup(client, records: int, reset: str = "earliest", *, initialized: bool = True) -> tuple[str, str, object]:
    """A new topic holding `records` records in batches of 2, and a new group starting where `reset` says
    (its share-partition's state `initialized` by its group coordinator, else left to the test)."""
    n = next(_names)
    topic, group = f"sf-{n}", f"sfg-{n}"
    topic_id = create_topic(client, topic, partitions=1)
    for i in range(0, records, 2):
        assert produce(client, topic, 0, batch([f"v{j}".encode() for j in range(i, min(i + 2, records))])
                       ).error_code == E.NONE
    _set_group_config(client, group, "share.auto.offset.reset", reset)
    if initialized:
        initialize(client, group, topic)
    return group, topic, topic_id


def initialize(client, group: str, topic: str) -> None:
    """Have the group's coordinator initialize the topic's share-partition states, as it does before it
    assigns them (a leader no longer makes a state its share coordinator does not have): a member joins
    (the join asks for the initialization and is answered before it ends, as Kafka's), takes the partitions at a
    later heartbeat once they are initialized, and leaves."""
    member = f"init-{next(_names)}"
    moving = (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE)
    joined = wait_for(lambda: (a := client.send(ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=[topic]), 1)).error_code not in moving
        and a, what=f"{member} joined {group}")  # a new cluster's coordinator may still be loading
    assert joined.error_code == E.NONE, joined
    beat = share_settled(client, group, member, joined.member_epoch)
    assert beat.error_code == E.NONE and beat.assignment is not None, beat
    assert [t.partitions for t in beat.assignment.topic_partitions] == [[0]], beat
    left = client.send(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1), 1)
    assert left.error_code == E.NONE, left


def _set_group_config(client, group: str, name: str, value: str) -> None:
    res = IncrementalAlterConfigsRequest.AlterConfigsResource
    answer = client.send(IncrementalAlterConfigsRequest(resources=[res(
        resource_type=32, resource_name=group, configs=[res.AlterableConfig(name=name, config_operation=0,
                                                                            value=value)])]), 1)
    assert answer.responses[0].error_code == E.NONE, answer


def fetch(client, group, member, epoch, topic_id=None, acks=(), max_records=100, wait_ms=0, forget=()):
    topics = [] if topic_id is None else [_Topic(topic_id=topic_id, partitions=[_Part(
        partition_index=0, acknowledgement_batches=[_Batch(first_offset=f, last_offset=last, acknowledge_types=[t])
                                                    for f, last, t in acks])])]
    forgotten = [ShareFetchRequest.ForgottenTopic(topic_id=t, partitions=[0]) for t in forget]
    return client.send(ShareFetchRequest(group_id=group, member_id=member, share_session_epoch=epoch,
                                         max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20, max_records=max_records,
                                         batch_size=500, topics=topics, forgotten_topics_data=forgotten), 1)


def ack(client, group, member, epoch, topic_id, acks):
    return client.send(ShareAcknowledgeRequest(group_id=group, member_id=member, share_session_epoch=epoch, topics=[
        _AckTopic(topic_id=topic_id, partitions=[_AckTopic.AcknowledgePartition(
            partition_index=0, acknowledgement_batches=[
                _AckTopic.AcknowledgePartition.AcknowledgementBatch(first_offset=f, last_offset=last,
                                                                    acknowledge_types=[t]) for f, last, t in acks])])]),
        1)


def part(answer):
    """The one partition's answer; None when left out (nothing acquired, no error, no acknowledgement)."""
    if not answer.responses:
        return None
    [topic] = answer.responses
    [p] = topic.partitions
    return p


def ranges(p) -> list[tuple[int, int, int]]:
    return [] if p is None else [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]


def test_fetch_accept_release_and_redelivery(client):
    group, _, topic_id = setup(client, 6)
    first = fetch(client, group, "m1", 0, topic_id)
    assert (first.error_code, first.acquisition_lock_timeout_ms) == (E.NONE, 1000)
    p = part(first)
    assert ranges(p) == [(0, 5, 1)] and values(p) == [f"v{i}".encode() for i in range(6)]
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 0)
    # another member of the group finds nothing while m1 holds everything
    # (a new session's first answer lists the partition asked, with nothing acquired, as Kafka's)
    assert ranges(part(fetch(client, group, "m2", 0, topic_id))) == []
    # accept 0-1, release 2-3, reject 4-5 (in one ShareAcknowledge), then 2-3 come again, delivered twice
    answer = ack(client, group, "m1", 1, topic_id, [(0, 1, ACCEPT), (2, 3, RELEASE), (4, 5, REJECT)])
    assert (answer.error_code, answer.responses[0].partitions[0].error_code) == (E.NONE, E.NONE)
    again = part(fetch(client, group, "m2", 1, topic_id))
    assert ranges(again) == [(2, 3, 2)] and values(again, 2) == [b"v2", b"v3"]
    # m1 may not acknowledge what m2 holds now; m2 accepts through its next fetch
    refused = ack(client, group, "m1", 2, topic_id, [(2, 3, ACCEPT)])
    assert refused.responses[0].partitions[0].error_code == E.INVALID_RECORD_STATE
    done = part(fetch(client, group, "m2", 2, topic_id, acks=[(2, 3, ACCEPT)]))
    assert (done.acknowledge_error_code, done.acquired_records) == (E.NONE, [])


def test_a_share_partition_its_group_never_initialized_is_not_made_by_its_leader(client):
    """Kafka 4.3.1: the share coordinator refuses the leader's read of a state never initialized, and the
    fetch answers the partition UNKNOWN_SERVER_ERROR, again at each fetch, until the group's coordinator
    initializes it (a member subscribing); a member of another group fetching the topic gets the same."""
    group, topic, topic_id = setup(client, 2, initialized=False)
    for epoch in (0, 1):
        refused = part(fetch(client, group, "m", epoch, topic_id))
        assert (refused.error_code, ranges(refused)) == (E.UNKNOWN_SERVER_ERROR, [])
    initialize(client, group, topic)
    assert ranges(part(fetch(client, group, "m", 2, topic_id))) == [(0, 1, 1)]
    other, _, _ = setup(client, 0)  # a group whose member fetches a topic it never subscribed to
    assert part(fetch(client, other, "m", 0, topic_id)).error_code == E.UNKNOWN_SERVER_ERROR


def test_sessions_and_their_epochs(client):
    group, _, topic_id = setup(client, 2)
    assert fetch(client, group, "m", 1, topic_id).error_code == E.SHARE_SESSION_NOT_FOUND
    assert ack(client, group, "m", 0, topic_id, []).error_code == E.INVALID_SHARE_SESSION_EPOCH
    fetch(client, group, "m", 0, topic_id)
    assert fetch(client, group, "m", 5).error_code == E.INVALID_SHARE_SESSION_EPOCH
    # the session remembers its partitions: an epoch-1 fetch naming none still reads it
    assert fetch(client, group, "m", 1).error_code == E.NONE
    # closing releases what the member holds: another member gets it, delivered a second time
    produce(client, _topic_of(client, topic_id), 0, batch([b"late"]))
    late = part(fetch(client, group, "m", 2, topic_id))
    assert ranges(late) == [(2, 2, 1)]
    closed = fetch(client, group, "m", -1, topic_id)
    assert closed.error_code == E.NONE
    assert fetch(client, group, "m", 3).error_code == E.SHARE_SESSION_NOT_FOUND
    assert ranges(part(fetch(client, group, "other", 0, topic_id))) == [(0, 2, 2)]


def _topic_of(client, topic_id) -> str:
    answer = client.send(MetadataRequest(topics=None), 12)
    return next(t.name for t in answer.topics if t.topic_id == topic_id)


def test_locks_expire_and_the_delivery_limit_archives(client):
    group, _, topic_id = setup(client, 2)
    assert ranges(part(fetch(client, group, "m", 0, topic_id))) == [(0, 1, 1)]
    # not acknowledged: the 1 s lock ends, and the records come again (a waiting fetch is woken)
    started = time.monotonic()
    assert ranges(part(fetch(client, group, "m", 1, topic_id, wait_ms=10_000))) == [(0, 1, 2)]
    assert time.monotonic() - started < 9
    p = part(fetch(client, group, "m", 2, topic_id, acks=[(0, 1, RELEASE)]))
    assert ranges(p) == [(0, 1, 3)]
    # delivered 3 times (share.delivery.count.limit here): released once more, they are archived
    p = part(fetch(client, group, "m", 3, topic_id, acks=[(0, 1, RELEASE)]))
    assert (p.acknowledge_error_code, p.acquired_records) == (E.NONE, [])
    # acknowledging what is finished with is no error (Kafka's answer)
    assert part(fetch(client, group, "m", 4, topic_id, acks=[(0, 1, ACCEPT)])).acknowledge_error_code == E.NONE


def test_latest_starts_at_the_end_and_max_records_takes_whole_batches(client):
    group, topic, topic_id = setup(client, 4, reset="latest")
    assert ranges(part(fetch(client, group, "m", 0, topic_id))) == []
    assert part(fetch(client, group, "m", 1, topic_id)) is None  # left out past a session's first answer
    for _ in range(3):
        produce(client, topic, 0, batch([b"a", b"b"]))
    p = part(fetch(client, group, "m", 2, topic_id, max_records=3))
    assert ranges(p) == [(4, 7, 1)]  # two whole batches: the second goes over max_records


def test_request_errors(client):
    group, _, topic_id = setup(client, 1)
    no_group = fetch(client, "", "m", 0, topic_id)  # Kafka 4.3.1's answer, judged in tests/differential
    assert (no_group.error_code, part(no_group).error_code) == (E.NONE, E.UNKNOWN_SERVER_ERROR)
    assert fetch(client, group, "", 0, topic_id).error_code == E.INVALID_REQUEST
    # a session cannot open with acknowledgements (Kafka's newContext), and is not opened
    assert fetch(client, group, "z", 0, topic_id, acks=[(0, 0, ACCEPT)]).error_code == E.INVALID_REQUEST
    assert fetch(client, group, "z", 1, topic_id).error_code == E.SHARE_SESSION_NOT_FOUND
    p = part(fetch(client, group, "m", 0, uuid.uuid4()))
    assert p.error_code == E.UNKNOWN_TOPIC_ID


def test_offsets_admin_sets_describes_and_deletes_start_offsets(client):
    group, topic, topic_id = setup(client, 6)

    def alter(offset: int):
        asked = Alter.AlterShareGroupOffsetsRequestTopic
        return client.send(Alter(group_id=group, topics=[asked(topic_name=topic, partitions=[
            asked.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=offset)])]), 0)

    def described():
        asked = Describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)
        [g] = client.send(Describe(groups=[asked]), 1).groups
        return [(t.topic_name, p.partition_index, p.start_offset, p.lag) for t in g.topics for p in t.partitions]

    assert alter(4).responses[0].partitions[0].error_code == E.NONE
    assert described() == [(topic, 0, 4, 2)]
    assert ranges(part(fetch(client, group, "m", 0, topic_id))) == [(4, 5, 1)]  # the fetch starts there
    # a member in the group: not Empty, no change
    client.send(ShareGroupHeartbeatRequest(group_id=group, member_id="m", member_epoch=0,
                                           subscribed_topic_names=[topic]), 1)
    assert alter(0).error_code == E.NON_EMPTY_GROUP
    client.send(ShareGroupHeartbeatRequest(group_id=group, member_id="m", member_epoch=-1), 1)
    assert alter(-1).responses[0].partitions[0].error_code == E.INVALID_REQUEST
    deleted = client.send(Delete(group_id=group, topics=[Delete.DeleteShareGroupOffsetsRequestTopic(
        topic_name=topic), Delete.DeleteShareGroupOffsetsRequestTopic(topic_name="no-such-topic")]), 0)
    assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
        (topic, E.NONE), ("no-such-topic", E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert described() == []


def test_a_member_leaving_the_group_releases_what_it_holds(client):
    group, topic, topic_id = setup(client, 2)
    client.send(ShareGroupHeartbeatRequest(group_id=group, member_id="m", member_epoch=0,
                                           subscribed_topic_names=[topic]), 1)
    assert ranges(part(fetch(client, group, "m", 0, topic_id))) == [(0, 1, 1)]
    left = client.send(ShareGroupHeartbeatRequest(group_id=group, member_id="m", member_epoch=-1), 1)
    assert left.error_code == E.NONE
    assert ranges(part(fetch(client, group, "n", 0, topic_id))) == [(0, 1, 2)]  # not after the 1 s lock
    assert fetch(client, group, "m", 1).error_code == E.SHARE_SESSION_NOT_FOUND  # its session ended too


def test_acknowledgements_of_a_partition_are_all_or_none(client):
    """Kafka 4.3.1's SharePartition.acknowledge rolls back the batches before a refused one."""
    group, _, topic_id = setup(client, 4)
    assert ranges(part(fetch(client, group, "m", 0, topic_id))) == [(0, 3, 1)]
    refused = ack(client, group, "m", 1, topic_id, [(0, 1, ACCEPT), (2, 3, ACCEPT), (1, 1, REJECT)])
    assert refused.responses[0].partitions[0].error_code == E.INVALID_RECORD_STATE
    kept = ack(client, group, "m", 2, topic_id, [(0, 3, RELEASE)])  # all four still held
    assert kept.responses[0].partitions[0].error_code == E.NONE
    assert ranges(part(fetch(client, group, "m", 3, topic_id))) == [(0, 3, 2)]


def test_a_closed_connection_ends_its_share_session(broker, client):
    """As Kafka's connection-disconnect listener: the session goes and what its member held is released
    at once (not at the 30 s lock's end), on the broker the member fetched from."""
    group, _, topic_id = setup(client, 2)
    _set_group_config(client, group, "share.record.lock.duration.ms", "30000")
    with WireClient(broker.port) as gone:
        assert ranges(part(fetch(gone, group, "m", 0, topic_id))) == [(0, 1, 1)]
    again = part(fetch(client, group, "n", 0, topic_id, wait_ms=10_000))  # woken by the release
    assert ranges(again) == [(0, 1, 2)]
    assert fetch(client, group, "m", 1).error_code == E.SHARE_SESSION_NOT_FOUND


def test_a_recreated_topic_starts_afresh(client):
    """Share-partitions are the topic id's: a topic deleted and created again under its name is read
    from the reset rule, not from the old topic's start offset."""
    group, topic, topic_id = setup(client, 4)
    assert ranges(part(fetch(client, group, "m", 0, topic_id))) == [(0, 3, 1)]
    assert ack(client, group, "m", 1, topic_id, [(0, 3, ACCEPT)]).responses[0].partitions[0].error_code == E.NONE
    deleted = client.send(DeleteTopicsRequest(topic_names=[topic], timeout_ms=5000), 4)
    assert deleted.responses[0].error_code == E.NONE
    new_id = create_topic(client, topic, partitions=1)
    assert new_id != topic_id
    assert produce(client, topic, 0, batch([b"w0", b"w1"])).error_code == E.NONE
    initialize(client, group, topic)  # the new topic's share-partition
    got = part(fetch(client, group, "m2", 0, new_id))
    assert ranges(got) == [(0, 1, 1)] and values(got) == [b"w0", b"w1"]
    asked = Describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)
    [g] = client.send(Describe(groups=[asked]), 1).groups
    assert [(p.start_offset, p.lag) for t in g.topics for p in t.partitions] == [(0, 2)]


def test_the_share_coordinator_reads_and_writes_state_as_its_leaders_ask(client):
    """ReadShareGroupState (84), WriteShareGroupState (85) and DeleteShareGroupState (86), as another
    broker leading a share-partition would ask them: the state an acknowledgement wrote, fencing by
    state and leader epoch (a read's newer leader epoch is stored and fences the old leader), and a
    deletion that leaves no state (reads and writes refused) until it is initialized again, still fencing the
    old state's writers."""
    group, _, topic_id = setup(client, 6)
    assert ranges(part(fetch(client, group, "m", 0, topic_id))) == [(0, 5, 1)]
    answer = ack(client, group, "m", 1, topic_id, [(0, 1, ACCEPT), (2, 3, RELEASE)])
    assert answer.responses[0].partitions[0].error_code == E.NONE

    def read(leader_epoch: int = 0):
        asked = ReadState.ReadStateData
        [result] = client.send(ReadState(group_id=group, topics=[asked(topic_id=topic_id, partitions=[
            asked.PartitionData(partition=0, leader_epoch=leader_epoch)])]), 0).results
        [p] = result.partitions
        return p.error_code, p.state_epoch, p.start_offset, [
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches]

    def write(state_epoch: int, leader_epoch: int, start: int) -> int:
        asked = WriteState.WriteStateData
        [result] = client.send(WriteState(group_id=group, topics=[asked(topic_id=topic_id, partitions=[
            asked.PartitionData(partition=0, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start,
                                state_batches=[])])]), 1).results
        return result.partitions[0].error_code

    # the acknowledgement's state: 2-3 released (Available, delivered once), 4-5 acquired: Available when read;
    # its state epoch is the group epoch the group coordinator initialized it at (the initializing member's join)
    s = 1
    assert read() == (E.NONE, s, 2, [(2, 5, 0, 1)])
    assert write(s, 3, 4) == E.NONE  # a newer leader
    assert write(s, 2, 4) == E.FENCED_LEADER_EPOCH  # the old one
    assert write(s + 1, 2, 4) == E.FENCED_LEADER_EPOCH  # checked first and on its own, as Kafka's
    # -1 keeps the start offset; a write keeps the initialization's state epoch, as Kafka's
    assert write(s + 1, 3, -1) == E.NONE and read(3) == (E.NONE, s, 4, [])
    assert write(s - 1, 9, 0) == E.FENCED_STATE_EPOCH
    asked = DeleteState.DeleteStateData
    [deleted] = client.send(DeleteState(group_id=group, topics=[asked(topic_id=topic_id, partitions=[
        asked.PartitionData(partition=0)])]), 0).results
    assert deleted.partitions[0].error_code == E.NONE
    assert read() == (E.INVALID_REQUEST, 0, 0, [])  # no state, as after Kafka's tombstone
    assert write(s + 1, 9, 0) == write(s + 2, 1, 3) == E.INVALID_REQUEST  # nor written without one
    init = InitializeState.InitializeStateData
    [again] = client.send(InitializeState(group_id=group, topics=[init(topic_id=topic_id, partitions=[
        init.PartitionData(partition=0, state_epoch=s + 2, start_offset=3)])]), 0).results
    assert again.partitions[0].error_code == E.NONE  # initialized again: its epochs are the ones asked
    assert write(s, 9, 0) == E.FENCED_STATE_EPOCH  # the leader of before the deletion, at its state epoch
    assert write(s + 2, 1, 3) == E.NONE
    assert read(5) == (E.NONE, s + 2, 3, [])  # a new leader's read: its epoch is stored before the answer
    assert write(s + 2, 4, 6) == E.FENCED_LEADER_EPOCH  # so the old leader's write is fenced
    assert read(4)[0] == E.FENCED_LEADER_EPOCH and read(-1) == (E.NONE, s + 2, 3, [])
    other = uuid.uuid4()  # a state never initialized: refused, as Kafka's share coordinator refuses it
    [refused] = client.send(ReadState(group_id=group, topics=[ReadState.ReadStateData(topic_id=other, partitions=[
        ReadState.ReadStateData.PartitionData(partition=0, leader_epoch=0)])]), 0).results
    assert (refused.partitions[0].error_code, refused.partitions[0].start_offset) == (E.INVALID_REQUEST, 0)


def _join(c, group: str, member: str, epoch: int, topics: list[str] | None = None):
    return c.send(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
                                             subscribed_topic_names=topics), 1)


def _described(c, group: str):
    [g] = c.send(ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 1).groups
    return g


def test_state_survives_sigkill(broker):
    """Last in the module: the broker is killed and started again on the same directory. The share group's
    membership is in __consumer_offsets (share group records): it comes back as it was described, and its
    members heartbeat on at their epochs; an empty group is still listed."""
    with WireClient(broker.port) as c:
        group, topic, topic_id = setup(c, 6, initialized=False)  # the first join initializes it
        assert _join(c, group, "m", 0, [topic]).member_epoch == 1
        assert share_settled(c, group, "m", 1).member_epoch == 2  # the partition given out once initialized
        assert _join(c, group, "m2", 0, [topic]).member_epoch == 3
        assert _join(c, group, "m", 2).member_epoch == 3
        empty, _, _ = setup(c, 0, initialized=False)
        assert _join(c, empty, "x", 0, [topic]).error_code == E.NONE
        assert _join(c, empty, "x", -1).error_code == E.NONE
        before = _described(c, group)
        assert before.error_code == E.NONE and len(before.members) == 2 and before.group_epoch == 3
        assert ranges(part(fetch(c, group, "m", 0, topic_id))) == [(0, 5, 1)]
        answer = ack(c, group, "m", 1, topic_id, [(0, 1, ACCEPT), (2, 3, RELEASE)])
        assert answer.responses[0].partitions[0].error_code == E.NONE  # written before the answer
    broker.restart(signal.SIGKILL)
    with WireClient(broker.port) as c:
        after = wait_for(lambda: (g := _described(c, group)).error_code != E.COORDINATOR_LOAD_IN_PROGRESS and g,
                         what="the group coordinator loaded")
        assert after == before
        listed = c.send(ListGroupsRequest(states_filter=[], types_filter=["share"]), 5).groups
        assert {(g.group_id, g.group_state) for g in listed} >= {(group, "Stable"), (empty, "Empty")}
        beats = (_join(c, group, "m", 3), _join(c, group, "m2", 3))  # no rejoin, same epochs
        assert [(a.error_code, a.member_epoch, a.assignment) for a in beats] == [(E.NONE, 3, None)] * 2
        asked = Describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)
        [g] = c.send(Describe(groups=[asked]), 1).groups
        assert [(p.start_offset, p.lag) for t in g.topics for p in t.partitions] == [(2, 4)]
        # 2-3 were released once, 4-5 held when the broker died: all come again, delivered a second time
        assert ranges(part(fetch(c, group, "n", 0, topic_id))) == [(2, 5, 2)]


def _data_values(p) -> list[bytes]:
    """The values a share consumer hands over: the data records of the acquired ranges."""
    wanted = {o for a in p.acquired_records for o in range(a.first_offset, a.last_offset + 1)}
    return [r.value for b in iter_batches(bytes(p.records or b"")) if not b.is_control for r in b.records()
            if r.offset in wanted]


def test_read_committed_share_fetches_archive_aborted_transactions(client):
    """A transactional producer writes and aborts, writes and commits, between plain records (0; 1-2 and
    3 aborted, marker 4; 5-6 committed, marker 7; 8): under read_committed the aborted records are
    acquired and archived, never sent; under read_uncommitted everything is delivered."""
    n = next(_names)
    topic, transactional_id = f"sf-{n}", f"sft-{n}"
    topic_id = create_topic(client, topic, partitions=1)
    ids = init_producer_id(client, transactional_id=transactional_id)
    assert produce(client, topic, 0, batch([b"plain-0"])).error_code == E.NONE
    sequence = 0
    for commit, batches in ((False, [[b"aborted-1", b"aborted-2"], [b"aborted-3"]]),
                            (True, [[b"committed-5", b"committed-6"]])):
        wait_for(lambda: _add_partitions(client, transactional_id, ids, topic) == E.NONE, what="partition added")
        for values_ in batches:
            assert produce(client, topic, 0, _txn_batch(ids, sequence, *values_),
                           transactional_id=transactional_id).error_code == E.NONE
            sequence += len(values_)
        assert _end_txn(client, transactional_id, ids, commit) == E.NONE
        wait_for(lambda: _latest(client, topic, COMMITTED) == _latest(client, topic, 0), what="the marker")
    assert produce(client, topic, 0, batch([b"plain-8"])).error_code == E.NONE
    delivered = {}
    for level in ("read_committed", "read_uncommitted"):
        group = f"sfg-{n}-{level}"
        _set_group_config(client, group, "share.auto.offset.reset", "earliest")
        _set_group_config(client, group, "share.isolation.level", level)
        initialize(client, group, topic)
        p = part(fetch(client, group, "m", 0, topic_id))
        delivered[level] = (ranges(p), _data_values(p))
        if level == "read_committed":
            sent = values(p)
        # accepting every acquired offset (the markers' too, as a consumer's gaps) finishes the partition
        assert ack(client, group, "m", 1, topic_id, [(f, last, ACCEPT) for f, last, _ in ranges(p)]
                   ).responses[0].partitions[0].error_code == E.NONE
        asked = Describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)
        [g] = client.send(Describe(groups=[asked]), 1).groups
        assert [(p.start_offset, p.lag) for t in g.topics for p in t.partitions] == [(9, 0)]
    assert delivered["read_committed"] == ([(0, 0, 1), (4, 8, 1)], [b"plain-0", b"committed-5", b"committed-6",
                                                                     b"plain-8"])
    assert delivered["read_uncommitted"] == ([(0, 8, 1)], [b"plain-0", b"aborted-1", b"aborted-2", b"aborted-3",
                                                           b"committed-5", b"committed-6", b"plain-8"])
    assert not any(v.startswith(b"aborted") for v in sent)  # not even their bytes went out
