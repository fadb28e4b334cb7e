"""Ebb's KIP-848 consumer group records in `__consumer_offsets` are Kafka 4.3.1's: Kafka's own
DumpLogSegments (`--offsets-decoder`, its generated record classes) decodes what a short session of
heartbeats wrote on Ebb (two members join, one revokes, one leaves) into the group epoch, target
and current assignment (with the epoch each partition was given at), member and tombstone records,
in Kafka's order within each write, the target's record with the time it was computed; and the share
group records (types 10-15) of a share group's heartbeats in the same log (the target's record with the
time it was computed too), record 15 (the share-partitions
initialized) read back after a SIGKILL, and its deleting list as DeleteShareGroupOffsets and DeleteGroups
write it, and a deleted topic leaving it."""

from __future__ import annotations

import json
import signal
import time

from protocol.errors import ErrorCode
from protocol.messages import (
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DeleteTopicsRequest,
    ShareGroupHeartbeatRequest,
)
from tests.broker.data_wire import WireClient, create_topic
from tests.broker.group_wire import share_settled
from tests.broker.test_consumer_group_restart import _beat, _held
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for

DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"


def _decoded(java, logs) -> list[tuple[dict, dict | None]]:
    """(key, payload) of every record, as Kafka's tool prints them (payload None: a tombstone)."""
    found = []
    for segment in sorted(logs.glob("__consumer_offsets-*/*.log")):
        dumped = java.run(DUMP_LOG, "--files", str(segment), "--offsets-decoder")
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        for line in dumped.stdout.splitlines():
            if " key: " in line and " payload: " in line:
                key, payload = line.split(" key: ", 1)[1].split(" payload: ", 1)
                found.append((json.loads(key), None if payload == "<DELETE>" else json.loads(payload)))
    return found


def test_kafkas_dump_log_segments_decodes_ebbs_consumer_group_records(java, tmp_path):
    # Targets at once (no assignment interval): m2's and s2's joins move the targets.
    with BrokerProcess(tmp_path, {"offsets.topic.num.partitions": "1",
                                  "group.consumer.assignment.interval.ms": "0",
                                  "group.share.assignment.interval.ms": "0"}) as process:
        started_ms = time.time_ns() // 1_000_000
        with WireClient(process.port) as c:
            create_topic(c, "t", partitions=4)
            first = _beat(c, "m1", 0, {}, join=True)
            _beat(c, "m2", 0, {}, join=True)
            _beat(c, "m1", 2, _held(first))  # m1 must give two partitions up
            _beat(c, "m2", -1)
            # s1 takes the partitions at a heartbeat after their initialization (Kafka's way)
            assert _share_beat(c, "s", "s1", 0, ["t"]).error_code == 0
            assert share_settled(c, "s", "s1", 1).member_epoch == 2
            for member, epoch, topics in (("s2", 0, ["t"]), ("s2", -1, None)):
                answer = c.request(ShareGroupHeartbeatRequest(group_id="s", member_id=member, member_epoch=epoch,
                                                              rack_id=None, subscribed_topic_names=topics), 1)
                assert answer.error_code == 0, answer
    decoded = _decoded(java, tmp_path / "logs")
    records = [(k, p) for k, p in decoded if k["data"]["groupId"] == "g"]
    kinds = [(k["type"], k["data"].get("memberId"), p is None) for k, p in records]
    # The first write: m1's subscription, the group epoch, its target, the target epoch, its assignment.
    assert kinds[:5] == [("5", "m1", False), ("3", None, False), ("7", "m1", False), ("6", None, False),
                         ("8", "m1", False)]
    # m2 leaving: its current assignment, target and subscription go, then the group epoch moves.
    assert kinds[-4:] == [("8", "m2", True), ("7", "m2", True), ("5", "m2", True), ("3", None, False)]
    payloads = {(k["type"], k["data"].get("memberId")): p for k, p in records if p is not None}
    assert payloads[("3", None)]["data"]["epoch"] == 4 and payloads[("3", None)]["version"] == "0"
    target = payloads[("6", None)]["data"]  # with when it was computed (the tagged AssignmentTimestamp)
    assert target["assignmentEpoch"] == 3 and started_ms <= target["assignmentTimestamp"] <= time.time_ns() // 1_000_000
    member = payloads[("5", "m1")]["data"]
    assert (member["subscribedTopicNames"], member["rebalanceTimeoutMs"], member["instanceId"]) == (["t"], 30000, None)
    current = payloads[("8", "m1")]["data"]
    assert (current["memberEpoch"], current["state"]) == (2, 1)  # unrevoked partitions, at its old epoch
    assert [p["partitions"] for p in current["assignedPartitions"]] == [[0, 1]]
    assert [p["partitions"] for p in current["partitionsPendingRevocation"]] == [[2, 3]]
    # the epoch each partition was given at (KIP-1251's AssignmentEpochs, a tagged field), as Kafka reads it
    assert [p["assignmentEpochs"] for p in current["assignedPartitions"]] == [[2, 2]]
    assert [p["assignmentEpochs"] for p in current["partitionsPendingRevocation"]] == [[2, 2]]
    assert [p["partitions"] for p in payloads[("7", "m1")]["data"]["topicPartitions"]] == [[0, 1]]
    shares = [(k, p) for k, p in decoded if k["data"]["groupId"] == "s"]
    kinds = [(k["type"], k["data"].get("memberId"), p is None) for k, p in shares]
    assert kinds[:5] == [("10", "s1", False), ("11", None, False), ("13", "s1", False), ("12", None, False),
                         ("14", "s1", False)]
    # s2 leaving: its tombstones, then the group epoch; as in Kafka, the target waits for the next heartbeat.
    assert kinds[-4:] == [("14", "s2", True), ("13", "s2", True), ("10", "s2", True), ("11", None, False)]
    payloads = {(k["type"], k["data"].get("memberId")): p["data"] for k, p in shares if p is not None}
    assert payloads[("11", None)]["epoch"] == 4 and payloads[("12", None)]["assignmentEpoch"] == 3
    # when the share target was computed (the tagged AssignmentTimestamp), as Kafka reads it
    assert started_ms <= payloads[("12", None)]["assignmentTimestamp"] <= time.time_ns() // 1_000_000
    assert payloads[("10", "s1")]["subscribedTopicNames"] == ["t"]
    current = payloads[("14", "s1")]
    assert (current["memberEpoch"], current["state"]) == (2, 0)
    assert [p["partitions"] for p in current["assignedPartitions"]] == [[0, 1, 2, 3]]


def _share_beat(c, group: str, member: str, epoch: int, topics=None):
    return c.request(ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
                                                subscribed_topic_names=topics), 1)


def test_share_partition_metadata_is_written_read_back_after_sigkill_and_tombstoned(java, tmp_path):
    with BrokerProcess(tmp_path, {"offsets.topic.num.partitions": "1"}) as process:
        with WireClient(process.port) as c:
            create_topic(c, "t", partitions=2)
            create_topic(c, "u", partitions=1)
            # the join asks the share coordinator to initialize t-0, t-1 and u-0, answered before it is done;
            # a later heartbeat takes them once initialized
            assert _share_beat(c, "d", "d1", 0, ["t", "u"]).error_code == ErrorCode.NONE
            taken = share_settled(c, "d", "d1", 1)
            assert (taken.error_code, taken.member_epoch) == (ErrorCode.NONE, 2)
            assert taken.assignment is not None and sorted(sorted(t.partitions) for t in
                                                           taken.assignment.topic_partitions) == [[0], [0, 1]]
        process.restart(signal.SIGKILL)
        with WireClient(process.port) as c:
            again = wait_for(lambda: (a := _share_beat(c, "d", "d1", 2)).error_code
                             != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and a, what="the group coordinator loaded")
            # record 15 read back: the partitions stay assigned, nothing asked again
            assert (again.error_code, again.member_epoch, again.assignment) == (ErrorCode.NONE, 2, None)
            assert _share_beat(c, "d", "d1", -1).error_code == ErrorCode.NONE
            [offsets] = c.send(DeleteShareGroupOffsetsRequest(group_id="d", topics=[
                DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name="t")]), 0).responses
            assert (offsets.topic_name, offsets.error_code) == ("t", ErrorCode.NONE)
            [deleted] = c.send(DeleteGroupsRequest(groups_names=["d"]), 2).results
            assert deleted.error_code == ErrorCode.NONE
    records = [(k, p) for k, p in _decoded(java, tmp_path / "logs") if k["data"]["groupId"] == "d"]
    states = [None if p is None else p["data"] for k, p in records if k["type"] == "15"]

    def topics(state, kind: str) -> list:
        return sorted((t["topicName"], t.get("partitions")) for t in state[kind])
    # Initializing with the join, initialized once answered; after the restart nothing is asked or written
    # again (record 15 was read back). DeleteShareGroupOffsets lists t as deleting before its states go and
    # takes it off after; DeleteGroups lists every topic with state as deleting, then tombstones the group.
    assert len(states) == 6 and states[5] is None
    asking, answered, deleting_t, deleted_t, deleting_all = states[:5]
    assert topics(asking, "initializingTopics") == [("t", [0, 1]), ("u", [0])]
    assert asking["initializedTopics"] == [] and asking["deletingTopics"] == []
    assert topics(answered, "initializedTopics") == [("t", [0, 1]), ("u", [0])]
    assert answered["initializingTopics"] == []
    assert topics(deleting_t, "initializedTopics") == [("u", [0])]
    assert topics(deleting_t, "deletingTopics") == [("t", None)]
    assert topics(deleted_t, "initializedTopics") == [("u", [0])] and deleted_t["deletingTopics"] == []
    assert deleting_all["initializedTopics"] == [] and deleting_all["initializingTopics"] == []
    assert topics(deleting_all, "deletingTopics") == [("u", None)]
    tombstones = [k["type"] for k, p in records if p is None]
    assert tombstones.index("12") < tombstones.index("15") < tombstones.index("11")


def test_a_deleted_topic_leaves_record_15(java, tmp_path):
    """Deleting a topic rewrites record 15 of a group holding it without it (Kafka's
    maybeCleanupShareGroupState), at once, in the background; Kafka's tool decodes what is left."""
    with BrokerProcess(tmp_path, {"offsets.topic.num.partitions": "1"}) as process:
        with WireClient(process.port) as c:
            create_topic(c, "v", partitions=1)
            create_topic(c, "w", partitions=1)
            assert _share_beat(c, "e", "e1", 0, ["v", "w"]).error_code == ErrorCode.NONE
            assert share_settled(c, "e", "e1", 1).member_epoch == 2  # v and w initialized
            assert _share_beat(c, "e", "e1", -1).error_code == ErrorCode.NONE
            [gone] = c.send(DeleteTopicsRequest(topic_names=["v"], timeout_ms=5000), 4).responses
            assert gone.error_code == ErrorCode.NONE

            def last_state():
                states = [p for k, p in _decoded(java, tmp_path / "logs")
                          if k["data"]["groupId"] == "e" and k["type"] == "15"]
                return len(states) == 3 and states[-1]
            last = wait_for(last_state, timeout_s=30, what="record 15 written without the deleted topic")
    assert [t["topicName"] for t in last["data"]["initializedTopics"]] == ["w"]
    assert last["data"]["initializingTopics"] == [] and last["data"]["deletingTopics"] == []
