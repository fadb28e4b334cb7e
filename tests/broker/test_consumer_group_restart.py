"""KIP-848 consumer groups across broker restarts, through the wire: the coordinator writes the groups'
records to __consumer_offsets before each heartbeat's answer and rebuilds the groups when it loads, so
after a SIGTERM or a SIGKILL the members heartbeat on at their epochs with their assignments (no
UNKNOWN_MEMBER_ID, no rebalance), their commits are checked against their epochs, and a member that left
stays gone; the assignment interval runs on from the last target computed before the restart.
Transactional offsets and the tombstones written around them replay as they stood."""

from __future__ import annotations

import signal

from confluent_kafka import Consumer, Producer, TopicPartition

from protocol.errors import ErrorCode
from protocol.messages import ConsumerGroupHeartbeatRequest
from tests.broker.data_wire import WireClient, create_topic
from tests.broker.group_wire import commit, delete_offsets
from tests.broker.group_wire import fetch as fetch_offsets
from tests.broker.test_configs import BROKER, DELETE, SET, _incremental
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for

_Owned = ConsumerGroupHeartbeatRequest.TopicPartitions
GROUP = 32  # the GROUP config resource


def _beat(c: WireClient, member: str, epoch: int, owned=None, *, join: bool = False):
    request = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30_000 if join else -1, subscribed_topic_names=["t"] if join else None,
        subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=None if owned is None else [
            _Owned(topic_id=t, partitions=sorted(p)) for t, p in owned.items()])
    return c.request(request, 1)


def _held(answer) -> dict:
    return {t.topic_id: set(t.partitions) for t in answer.assignment.topic_partitions}


def _answered(c: WireClient, member: str, epoch: int, owned):
    """The heartbeat's answer once the coordinator has loaded (a restarted one may still be loading)."""
    def answered():
        answer = _beat(c, member, epoch, owned)
        loading = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return None if answer.error_code in loading else answer
    return wait_for(answered, what="a loaded coordinator")


def test_members_keep_epochs_and_assignments_across_sigterm_and_sigkill(tmp_path):
    # Targets at once (no assignment interval): each join and leave below moves the target.
    overrides = {"offsets.topic.num.partitions": "1", "group.consumer.session.timeout.ms": "45000",
                 "group.consumer.assignment.interval.ms": "0"}
    with BrokerProcess(tmp_path, overrides) as process:
        with WireClient(process.port) as c:
            create_topic(c, "t", partitions=4)
            first = _beat(c, "m1", 0, {}, join=True)
            assert (first.error_code, first.member_epoch) == (ErrorCode.NONE, 2)
            everything = _held(first)
            assert _beat(c, "m2", 0, {}, join=True).member_epoch == 3
            kept = _held(_beat(c, "m1", 2, everything))  # m1 gives half up
            assert _beat(c, "m1", 2, kept).member_epoch == 3
            (topic_id,) = everything
            taken = _beat(c, "m2", 3, {})
            assert taken.member_epoch == 3 and _held(taken) == {topic_id: everything[topic_id] - kept[topic_id]}
            assert _beat(c, "m3", 0, {}, join=True).error_code == ErrorCode.NONE
            assert _beat(c, "m3", -1).error_code == ErrorCode.NONE  # left: epoch 5, and stays gone
            assert set(commit(c, "g", {("t", 0): 7}, version=9, generation_id=3, member_id="m1").values()) == {0}
            held = {"m1": kept, "m2": _held(taken)}
            epochs = {"m1": 3, "m2": 3}
        for sig in (signal.SIGTERM, signal.SIGKILL):
            process.restart(sig)
            with WireClient(process.port) as c:
                for member in ("m1", "m2"):
                    answer = _answered(c, member, epochs[member], held[member])
                    assert answer.error_code == ErrorCode.NONE, (sig, member, answer)
                    # The group epoch moved when m3 left: the target is recomputed, with no new
                    # partitions for anyone (same members, same topic), so only the epoch moves on.
                    assert answer.member_epoch == 5, (sig, member, answer)
                    epochs[member] = answer.member_epoch
                    if answer.assignment is not None:
                        assert _held(answer) == held[member]
                gone = _beat(c, "m3", 5, {})
                assert gone.error_code == ErrorCode.UNKNOWN_MEMBER_ID
                # Its commits are a consumer group member's again (not an offsets-only classic group's).
                assert set(commit(c, "g", {("t", 0): 8}, version=9, generation_id=5, member_id="m1").values()) == {0}
                # m1 holds what it kept since epoch 2 (KIP-1251's assignment epochs survive the restart): a
                # commit at 2 is taken for those, not for a partition it gave up, nor at epoch 1.
                kept_p, gone_p = min(kept[topic_id]), min(everything[topic_id] - kept[topic_id])
                assert set(commit(c, "g", {("t", kept_p): 9}, version=9, generation_id=2,
                                  member_id="m1").values()) == {0}
                for p, epoch in ((gone_p, 2), (kept_p, 1)):
                    assert set(commit(c, "g", {("t", p): 10}, version=9, generation_id=epoch,
                                      member_id="m1").values()) == {ErrorCode.STALE_MEMBER_EPOCH}
                stored = fetch_offsets(c, "g", None)[1]
                assert (stored[("t", 0)][0], stored[("t", kept_p)][0]) == (8 if kept_p else 9, 9)


def test_the_assignment_interval_outlives_a_sigkill_and_follows_config_changes(tmp_path):
    """KIP-1263: the group's own consumer.assignment.interval.ms paces its targets; record 6's
    AssignmentTimestamp is read back, so a restart does not compute a waiting target early; once the
    group's config is gone, the broker's group.consumer.assignment.interval.ms, changed at runtime to 0,
    lets the next heartbeat compute it."""
    # an hour's interval (its bound raised from 15 s), so that no restart, however slow, waits it out; the
    # broker's own hour in server.properties too, so only its runtime change to 0 computes the target
    overrides = {"offsets.topic.num.partitions": "1", "group.consumer.max.assignment.interval.ms": "3600000",
                 "group.consumer.assignment.interval.ms": "3600000"}
    with BrokerProcess(tmp_path, overrides) as process:
        with WireClient(process.port) as c:
            create_topic(c, "t", partitions=2)
            assert _incremental(c, "g", [("consumer.assignment.interval.ms", SET, "3600000")],
                                resource_type=GROUP).error_code == ErrorCode.NONE
            assert _beat(c, "m1", 0, {}, join=True).member_epoch == 2  # the first target: at once
            joined = _beat(c, "m2", 0, {}, join=True)  # the group epoch moves to 3, the target waits
            assert (joined.error_code, joined.member_epoch, _held(joined)) == (ErrorCode.NONE, 2, {})
        process.restart(signal.SIGKILL)
        with WireClient(process.port) as c:
            answer = _answered(c, "m2", 2, {})
            assert (answer.error_code, answer.member_epoch) == (ErrorCode.NONE, 2)  # still waiting
            assert _incremental(c, "", [("group.consumer.assignment.interval.ms", SET, "0")],
                                resource_type=BROKER).error_code == ErrorCode.NONE
            assert _beat(c, "m2", 2, {}).member_epoch == 2  # the group's own hour still stands
            assert _incremental(c, "g", [("consumer.assignment.interval.ms", DELETE, None)],
                                resource_type=GROUP).error_code == ErrorCode.NONE
            # the group's config is followed through a watch: its removal is seen at a heartbeat soon after
            moved = wait_for(lambda: (a := _beat(c, "m2", 2, {})).member_epoch == 3 and a,
                             what="the target computed under the broker's interval")
            assert moved.error_code == ErrorCode.NONE


def test_the_brokers_dynamic_assignment_interval_paces_targets_at_runtime(tmp_path):
    """group.consumer.assignment.interval.ms changed at runtime (cluster-wide, no group config): an hour holds
    the next target back, 0 lets the next heartbeat compute it. server.properties says 0, so a broker not
    following its dynamic value would compute the target at once."""
    overrides = {"offsets.topic.num.partitions": "1", "group.consumer.max.assignment.interval.ms": "3600000",
                 "group.consumer.assignment.interval.ms": "0"}
    with BrokerProcess(tmp_path, overrides) as process, WireClient(process.port) as c:
        create_topic(c, "t", partitions=2)
        assert _incremental(c, "", [("group.consumer.assignment.interval.ms", SET, "3600000")],
                            resource_type=BROKER).error_code == ErrorCode.NONE
        assert _beat(c, "m1", 0, {}, join=True).member_epoch == 2  # the first target: at once
        joined = _beat(c, "m2", 0, {}, join=True)  # the group epoch moves to 3, the target waits the hour
        assert (joined.error_code, joined.member_epoch, _held(joined)) == (ErrorCode.NONE, 2, {})
        assert _beat(c, "m2", 2, {}).member_epoch == 2
        assert _incremental(c, "", [("group.consumer.assignment.interval.ms", SET, "0")],
                            resource_type=BROKER).error_code == ErrorCode.NONE
        # in force here once the alter is answered: the next heartbeat computes the target
        moved = _beat(c, "m2", 2, {})
        assert (moved.error_code, moved.member_epoch) == (ErrorCode.NONE, 3)


def _offsets_after_load(port: int, group: str) -> dict:
    """OffsetFetch with require_stable once the (restarted) coordinator answers it."""
    with WireClient(port) as c:
        def loaded():
            error, found = fetch_offsets(c, group, {"t": [0, 1]}, require_stable=True)
            return None if error in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE) \
                else found
        return wait_for(loaded, what="a loaded coordinator")


def test_transactional_offsets_and_tombstones_replay_as_they_stood_across_sigkill(tmp_path):
    """librdkafka's sendOffsetsToTransaction with tombstones around it: an OffsetDelete written between
    the TxnOffsetCommit and its commit marker takes the pending offset (Kafka's OffsetMetadataManager), a
    partition of the same transaction not deleted commits, and a SIGKILL's replay agrees with memory."""
    with BrokerProcess(tmp_path, {"offsets.topic.num.partitions": "1"}) as process:
        with WireClient(process.port) as c:
            create_topic(c, "t", partitions=2)
            assert set(commit(c, "g", {("t", 0): 5, ("t", 1): 5}).values()) == {0}
        metadata = Consumer({"bootstrap.servers": process.bootstrap, "group.id": "g"}).consumer_group_metadata()
        producer = Producer({"bootstrap.servers": process.bootstrap, "transactional.id": "offsets-then-deleted"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("t", 0, 7), TopicPartition("t", 1, 7)], metadata, 30)
        with WireClient(process.port) as c:
            assert delete_offsets(c, "g", {"t": [0]}) == (0, {("t", 0): 0})
        producer.commit_transaction(30)
        expected = {("t", 0): (-1, 0), ("t", 1): (7, 0)}
        stored = _offsets_after_load(process.port, "g")
        assert {tp: (found[0], found[3]) for tp, found in stored.items()} == expected
        process.restart(signal.SIGKILL)
        stored = _offsets_after_load(process.port, "g")
        assert {tp: (found[0], found[3]) for tp, found in stored.items()} == expected
