"""Share groups (KIP-932) through the wire against a broker process: ShareGroupHeartbeat's joins, epochs,
assignment, leave and session expiry; ShareGroupDescribe; and how ListGroups, DescribeGroups,
DeleteGroups and JoinGroup see a share group (one group id has one type). Kafka's answers for the same
requests are judged in tests/differential/test_share_groups_against_kafka.py."""

from __future__ import annotations

import itertools

import pytest

from protocol.errors import ErrorCode
from protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from tests.broker.data_wire import WireClient, create_topic
from tests.broker.group_wire import commit, join, join_once
from tests.broker.group_wire import share_settled as settled
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for

E = ErrorCode
# Targets at once (no share.assignment.interval.ms): these tests follow each step's new target; the interval
# is tested in test_share_group_assignment_interval.py.
OVERRIDES = {"group.share.assignment.interval.ms": "0",
             "group.share.min.session.timeout.ms": "1000", "group.share.session.timeout.ms": "1500",
             "group.share.min.heartbeat.interval.ms": "500", "group.share.heartbeat.interval.ms": "500",
             "group.initial.rebalance.delay.ms": "0"}
_groups = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("share"), OVERRIDES) as process:
        with WireClient(process.port) as c:
            topics = {"s3": create_topic(c, "s3", partitions=3), "s1": create_topic(c, "s1", partitions=1)}
        process.topic_ids = topics
        yield process


@pytest.fixture
def client(broker):
    with WireClient(broker.port) as c:
        yield c


def new_group() -> str:
    return f"share-{next(_groups)}"


def beat(c, group: str, member: str, epoch: int, topics: list[str] | None = None, rack: str | None = None):
    return c.send(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch, rack_id=rack,
                                             subscribed_topic_names=topics), 1)


def describe(c, *groups: str, ops: bool = False):
    return c.send(ShareGroupDescribeRequest(group_ids=list(groups), include_authorized_operations=ops), 1).groups


def held(answer) -> dict:
    return {t.topic_id: sorted(t.partitions) for t in answer.assignment.topic_partitions}


def test_a_member_joins_gets_every_partition_and_heartbeats(client, broker):
    group = new_group()
    first = beat(client, group, "m1", 0, ["s3"])
    assert (first.error_code, first.member_id, first.member_epoch) == (E.NONE, "m1", 1)
    assert first.heartbeat_interval_ms == 500
    # nothing yet: a share-partition is assigned once its state is initialized, which the join asked for
    assert held(first) == {}
    initialized = settled(client, group, "m1", 1)  # the initialized partitions move the group epoch
    assert (initialized.member_epoch, held(initialized)) == (2, {broker.topic_ids["s3"]: [0, 1, 2]})
    again = beat(client, group, "m1", 2)  # nothing changed: no assignment in the answer
    assert (again.error_code, again.member_epoch, again.assignment) == (E.NONE, 2, None)
    [described] = describe(client, group)
    assert (described.error_code, described.group_state, described.group_epoch, described.assignment_epoch,
            described.assignor_name) == (E.NONE, "Stable", 2, 2, "simple")
    [member] = described.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == ("m1", 2, ["s3"])
    assert [(t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == [("s3", [0, 1, 2])]
    assert member.client_host.startswith("/")


def test_a_second_member_splits_the_partitions_and_the_first_takes_its_part_at_its_next_heartbeat(client, broker):
    group = new_group()
    settled(client, group, "a", beat(client, group, "a", 0, ["s3"]).member_epoch)  # a holds all three at 2
    second = beat(client, group, "b", 0, ["s3"])
    assert second.member_epoch == 3
    first = beat(client, group, "a", 2)
    assert first.member_epoch == 3
    together = sorted(held(first)[broker.topic_ids["s3"]] + held(second)[broker.topic_ids["s3"]])
    assert together == [0, 1, 2] and {len(held(first)[broker.topic_ids["s3"]]),
                                      len(held(second)[broker.topic_ids["s3"]])} == {1, 2}
    # fewer partitions than members: the one partition is shared by both
    group2 = new_group()
    beat(client, group2, "a", 0, ["s1"])
    a = settled(client, group2, "a", 1)  # a joined before the partition was initialized: it takes it now
    assert (a.member_epoch, held(a)) == (2, {broker.topic_ids["s1"]: [0]})
    b = beat(client, group2, "b", 0, ["s1"])
    assert (b.member_epoch, held(b)) == (3, {broker.topic_ids["s1"]: [0]})
    assert beat(client, group2, "a", 2).member_epoch == 3
    [described] = describe(client, group2)
    assert [[t.partitions for t in m.assignment.topic_partitions] for m in described.members] == [[[0]], [[0]]]


def test_epochs_are_checked(client):
    group = new_group()
    beat(client, group, "m", 0, ["s1"])
    assert beat(client, group, "m", 5).error_code == E.FENCED_MEMBER_EPOCH
    assert settled(client, group, "m", 1).member_epoch == 2  # the initialized partition given out
    beat(client, group, "n", 0, ["s1"])  # group epoch 3; m is at 2, n at 3
    assert beat(client, group, "m", 2).member_epoch == 3
    assert beat(client, group, "m", 0, ["s1"]).error_code == E.FENCED_MEMBER_EPOCH  # neither 3 nor previous 2
    assert beat(client, group, "m", 2).error_code == E.NONE  # the previous epoch: its answer may have been lost
    assert beat(client, group, "stranger", 3).error_code == E.UNKNOWN_MEMBER_ID
    assert beat(client, "no-such-share-group", "m", 3).error_code == E.GROUP_ID_NOT_FOUND


def test_bad_requests_are_invalid_request(client):
    group = new_group()
    for member, epoch, topics, rack, message in [
            ("", 0, ["s1"], None, "MemberId can't be empty."),
            ("m", 0, None, None, "SubscribedTopicNames must be set in first request."),
            ("m", 0, [], None, "SubscribedTopicNames must be set in first request."),
            ("m", -2, None, None, "MemberEpoch is invalid."),
            ("m", 0, ["s1"], " ", "RackId can't be empty.")]:
        answer = beat(client, group, member, epoch, topics, rack)
        assert (answer.error_code, answer.error_message) == (E.INVALID_REQUEST, message)
    answer = beat(client, "", "m", 0, ["s1"])
    assert answer.error_code in (E.INVALID_REQUEST, E.INVALID_GROUP_ID)


def test_leaving_and_a_silent_member_expiring(client, broker):
    group = new_group()
    beat(client, group, "stays", 0, ["s3"])
    settled(client, group, "stays", 1)
    beat(client, group, "goes", 0, ["s3"])
    assert len(held(beat(client, group, "stays", 2))[broker.topic_ids["s3"]]) < 3
    left = beat(client, group, "goes", -1)
    assert (left.error_code, left.member_id, left.member_epoch) == (E.NONE, "goes", -1)
    assert beat(client, group, "goes", -1).error_code == E.UNKNOWN_MEMBER_ID
    back = beat(client, group, "stays", 3)
    assert back.member_epoch == 4 and held(back) == {broker.topic_ids["s3"]: [0, 1, 2]}
    # stop heartbeating: the session (1.5 s here) ends and the group is Empty, its epoch moved
    wait_for(lambda: describe(client, group)[0].group_state == "Empty", timeout_s=10)
    [described] = describe(client, group)
    assert (described.members, described.group_epoch) == ([], 5)


def test_a_new_topic_or_more_partitions_reach_the_members(client, broker):
    group = new_group()
    first = beat(client, group, "m", 0, ["later"])
    assert (first.member_epoch, held(first)) == (1, {})
    topic_id = create_topic(client, "later", partitions=2)
    grown = beat(client, group, "m", 1)  # the new topic moves the epoch; its partitions are initialized
    assert (grown.member_epoch, grown.assignment) == (2, None)
    answer = settled(client, group, "m", 2)  # and assigned at a heartbeat after
    assert (answer.member_epoch, held(answer)) == (3, {topic_id: [0, 1]})


def test_other_group_apis_see_share_groups(client):
    group, classic = new_group(), new_group()
    beat(client, group, "m", 0, ["s1"])
    join(client, classic, version=7)
    listed = {g.group_id: g for g in client.send(ListGroupsRequest(), 5).groups}
    assert (listed[group].group_type, listed[group].protocol_type, listed[group].group_state) == \
        ("share", "share", "Stable")
    assert listed[classic].group_type == "classic"
    only_share = client.send(ListGroupsRequest(types_filter=["Share"]), 5).groups
    assert group in {g.group_id for g in only_share} and classic not in {g.group_id for g in only_share}
    assert group in {g.group_id for g in client.send(ListGroupsRequest(states_filter=["stable"]), 5).groups}
    # a classic group's id is no share group, and the other way round
    answer = beat(client, classic, "m", 0, ["s1"])
    assert (answer.error_code, answer.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {classic} is not a share group.")
    [d] = describe(client, classic)
    assert (d.error_code, d.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {classic} is not a share group.")
    [d] = describe(client, "never-was")
    assert (d.error_code, d.error_message) == (E.GROUP_ID_NOT_FOUND, "Group never-was not found.")
    joined = join_once(client, group, version=9)
    assert joined.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert commit(client, group, {("s1", 0): 5}) == {("s1", 0): E.GROUP_ID_NOT_FOUND}
    [old] = client.send(DescribeGroupsRequest(groups=[group]), 6).groups
    assert (old.error_code, old.group_state) == (E.GROUP_ID_NOT_FOUND, "Dead")
    # DeleteGroups: not while it has members, then gone
    [result] = client.send(DeleteGroupsRequest(groups_names=[group]), 2).results
    assert result.error_code == E.NON_EMPTY_GROUP
    beat(client, group, "m", -1)
    [result] = client.send(DeleteGroupsRequest(groups_names=[group]), 2).results
    assert result.error_code == E.NONE
    assert describe(client, group)[0].error_code == E.GROUP_ID_NOT_FOUND
