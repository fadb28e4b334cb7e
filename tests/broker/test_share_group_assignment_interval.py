"""Share groups' assignment interval (KIP-1263) against a broker process, through the wire: the group's own
share.assignment.interval.ms, else the broker's group.share.assignment.interval.ms as changed at runtime,
holds a new target back; record 12's AssignmentTimestamp is read back, so a restart does not compute a
waiting target early. Kafka's answers to the same heartbeats are judged in
tests/differential/test_share_groups_against_kafka.py."""

from __future__ import annotations

import signal

from protocol.errors import ErrorCode
from protocol.messages import ShareGroupDescribeRequest, ShareGroupHeartbeatRequest
from tests.broker.test_configs import BROKER, DELETE, SET, _incremental
from tests.broker.wire_client import WireClient, create_topic
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for

GROUP = 32  # the GROUP config resource
HOUR = "3600000"  # an interval no restart or slow machine waits out (its bound raised from 15 s)


def _beat(c: WireClient, member: str, epoch: int, topics: list[str] | None = None):
    return c.send(ShareGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=epoch,
                                             subscribed_topic_names=topics), 1)


def _epochs(c: WireClient) -> tuple[int, int]:
    [described] = c.send(ShareGroupDescribeRequest(group_ids=["g"]), 1).groups
    return described.group_epoch, described.assignment_epoch


def _initialized_and_waiting(c: WireClient) -> None:
    """m1's heartbeats until one finds its partitions initialized: that moves the group epoch to 2, and the
    target assigning them waits for the interval (m1 stays at the first target's epoch, holding nothing)."""
    def waiting() -> bool:
        answer = _beat(c, "m1", 1)
        assert (answer.error_code, answer.member_epoch) == (ErrorCode.NONE, 1), answer
        return _epochs(c) == (2, 1)
    wait_for(waiting, what="the initialized partitions moving the group epoch")


def _answered(c: WireClient, member: str, epoch: int):
    """The heartbeat's answer once the coordinator has loaded (a restarted one may still be loading)."""
    def answered():
        answer = _beat(c, member, epoch)
        loading = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return None if answer.error_code in loading else answer
    return wait_for(answered, what="a loaded coordinator")


def test_the_group_interval_outlives_a_sigkill_and_follows_config_changes(tmp_path):
    """The group's own hour holds the target back across a SIGKILL; the broker's interval changed to 0 at
    runtime does not override it; once the group's config is deleted, the broker's 0 lets the next
    heartbeat compute the target. server.properties says an hour too, so only the runtime change to 0
    computes it."""
    overrides = {"offsets.topic.num.partitions": "1", "group.share.max.assignment.interval.ms": HOUR,
                 "group.share.assignment.interval.ms": HOUR}
    with BrokerProcess(tmp_path, overrides) as process:
        with WireClient(process.port) as c:
            topic_id = create_topic(c, "t", partitions=2).topic_id
            assert _incremental(c, "g", [("share.assignment.interval.ms", SET, HOUR)],
                                resource_type=GROUP).error_code == ErrorCode.NONE
            first = _beat(c, "m1", 0, ["t"])  # the first target: at once (nothing initialized yet)
            assert (first.error_code, first.member_epoch) == (ErrorCode.NONE, 1)
            _initialized_and_waiting(c)
        process.restart(signal.SIGKILL)
        with WireClient(process.port) as c:
            answer = _answered(c, "m1", 1)
            assert (answer.error_code, answer.member_epoch) == (ErrorCode.NONE, 1)  # still waiting
            assert _incremental(c, "", [("group.share.assignment.interval.ms", SET, "0")],
                                resource_type=BROKER).error_code == ErrorCode.NONE
            assert _beat(c, "m1", 1).member_epoch == 1  # the group's own hour still stands
            assert _incremental(c, "g", [("share.assignment.interval.ms", DELETE, None)],
                                resource_type=GROUP).error_code == ErrorCode.NONE
            # the group's config is followed through a watch: its removal is seen at a heartbeat soon after
            moved = wait_for(lambda: (a := _beat(c, "m1", 1)).member_epoch != 1 and a,
                             what="the target computed under the broker's interval")
            assert (moved.error_code, moved.member_epoch) == (ErrorCode.NONE, 2)
            assert [(t.topic_id, t.partitions) for t in moved.assignment.topic_partitions] == [(topic_id, [0, 1])]


def test_the_brokers_dynamic_interval_paces_share_targets_at_runtime(tmp_path):
    """group.share.assignment.interval.ms changed at runtime (cluster-wide, no group config): an hour holds
    the next target back, 0 lets the next heartbeat compute it. server.properties says 0, so a broker not
    following its dynamic value would compute the target at once."""
    overrides = {"offsets.topic.num.partitions": "1", "group.share.max.assignment.interval.ms": HOUR,
                 "group.share.assignment.interval.ms": "0"}
    with BrokerProcess(tmp_path, overrides) as process, WireClient(process.port) as c:
        create_topic(c, "t", partitions=2)
        assert _incremental(c, "", [("group.share.assignment.interval.ms", SET, HOUR)],
                            resource_type=BROKER).error_code == ErrorCode.NONE
        assert _beat(c, "m1", 0, ["t"]).member_epoch == 1
        _initialized_and_waiting(c)
        assert _incremental(c, "", [("group.share.assignment.interval.ms", SET, "0")],
                            resource_type=BROKER).error_code == ErrorCode.NONE
        moved = _beat(c, "m1", 1)
        assert (moved.error_code, moved.member_epoch, _epochs(c)) == (ErrorCode.NONE, 2, (2, 2))
