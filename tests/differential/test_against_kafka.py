"""Apache Kafka 4.3.1 (one KRaft node from its jars) and Ebb answer the same requests the same way.

Every scenario runs against both; answers are compared field by field after normalising what must
differ (tests/differential/runner.py). `ALLOWED` is the reviewed list of intended differences, each
with its reason; any other difference fails.
"""

from __future__ import annotations

import time

import pytest

from protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    FetchRequest,
    ListOffsetsRequest,
)
from protocol.records import build_batch
from tests.broker.data_wire import produce_request
from tests.differential.runner import Peer, compare
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

# (label, path) or ("*", field name) -> why Ebb answers differently on purpose
ALLOWED: dict[tuple[str, str], str] = {
    ("*", "error_message"): "free text: whether a message is given and its wording are Kafka's own choice",
    ("list offsets max", "topics[dr].partitions[0].offset"):
        "MAX_TIMESTAMP after every record was deleted: Kafka reports the deleted record with the largest "
        "timestamp (offset 9, below its own log start offset 10) from its segment; Ebb reports none (-1), "
        "never an offset a fetch would refuse",
    ("list offsets max", "topics[dr].partitions[0].timestamp"): "the same: no record is left",
    ("list offsets max", "topics[dr].partitions[0].leader_epoch"): "the same: no record is left",
}
# CreateTopics v5+ lists the new topic's configs: what differs there, whatever the topic.
CONFIG_DIFFERENCES = {
    "retention.committed.groups": "Ebb's own topic config (trim what consumer groups committed)",
    "retention.min.timestamp": "Ebb's own topic config (KIP-47's absolute retention floor)",
    "erasure.max.delay.ms": "Ebb's own topic config (physical erasure, docs/storage.md)",
    "min.insync.replicas.config_source":
        "Kafka 4's storage format writes a cluster-wide dynamic min.insync.replicas when eligible leader "
        "replicas are on (DYNAMIC_DEFAULT_BROKER_CONFIG); Ebb's cluster-wide defaults start empty (DEFAULT_CONFIG)",
}


def _config_difference(path: str) -> bool:
    """topics[<name>].configs[<config>]... paths of CreateTopics answers."""
    if ".configs[" not in path:
        return False
    config, _, rest = path.split(".configs[", 1)[1].partition("]")
    return config in CONFIG_DIFFERENCES or f"{config}{rest}" in CONFIG_DIFFERENCES

Topic = CreateTopicsRequest.CreatableTopic
T0 = 1_700_000_000_000  # record timestamps (CreateTime) both brokers keep as sent


def create(peer: Peer, label: str, *topics: Topic, version: int = 7, validate_only: bool = False):
    return peer.ask(label, CreateTopicsRequest(topics=list(topics), timeout_ms=30_000, validate_only=validate_only),
                    version)


def topic(name: str, partitions: int = 1, replication: int = 1, **configs: str) -> Topic:
    return Topic(name=name, num_partitions=partitions, replication_factor=replication,
                 configs=[Topic.CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()])


def delete(peer: Peer, label: str, topics: list[tuple[str, list[tuple[int, int]]]], version: int = 2):
    Req = DeleteRecordsRequest
    body = Req(timeout_ms=30_000, topics=[Req.DeleteRecordsTopic(name=name, partitions=[
        Req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in parts])
        for name, parts in topics])
    return peer.ask(label, body, version)


def list_offsets(peer: Peer, label: str, name: str, timestamp: int, version: int = 7):
    Part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    body = ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=5000, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=[Part(partition_index=0, timestamp=timestamp)])])
    return peer.ask(label, body, version)


def fetch(peer: Peer, label: str, name: str, offset: int, max_bytes: int = 1 << 20, version: int = 12):
    Part = FetchRequest.FetchTopic.FetchPartition
    body = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=name, partitions=[
                            Part(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)])])
    return peer.ask(label, body, version)


def filled(peer: Peer, name: str, records: int = 10, **configs: str) -> None:
    create(peer, f"create {name}", topic(name, **configs))
    peer.wait_for_leaders(name, 1)
    data = build_batch([(b"k%d" % i, b"v%d" % i, [], T0 + i) for i in range(records)])
    peer.ask(f"produce to {name}", produce_request(name, 0, data, acks=-1), 9)


# --- scenarios ------------------------------------------------------------------------------------


def delete_records_edges(peer: Peer) -> None:
    filled(peer, "dr")
    delete(peer, "to 4", [("dr", [(0, 4)])])
    delete(peer, "below the log start: a no-op", [("dr", [(0, 2)])])
    delete(peer, "above the high watermark", [("dr", [(0, 11)])])
    delete(peer, "negative other than -1", [("dr", [(0, -5)])])
    delete(peer, "unknown partition and topic", [("dr", [(7, 1)]), ("nowhere", [(0, 1)])])
    delete(peer, "a partition named twice", [("dr", [(0, 5), (0, 6)])])
    delete(peer, "-1 is the high watermark", [("dr", [(0, -1)])])
    for timestamp, what in ((-2, "earliest"), (-1, "latest"), (T0 + 3, "by time below the start"), (-3, "max")):
        list_offsets(peer, f"list offsets {what}", "dr", timestamp)


def delete_records_on_a_compacted_topic(peer: Peer) -> None:
    filled(peer, "compacted", cleanup_policy="compact")
    delete(peer, "compact only", [("compacted", [(0, 3)])])


def fetch_around_the_log_start(peer: Peer) -> None:
    filled(peer, "fe")
    delete(peer, "to 4", [("fe", [(0, 4)])])
    fetch(peer, "below the log start", "fe", 0)
    fetch(peer, "at the log start (the batch holding it comes whole)", "fe", 4)
    fetch(peer, "at the high watermark", "fe", 10)
    fetch(peer, "past the log end", "fe", 11)
    fetch(peer, "tiny max bytes: the first batch still comes", "fe", 4, max_bytes=10)


def create_topics_validation(peer: Peer) -> None:
    create(peer, "bad character", topic("bad/name"))
    create(peer, "name too long", topic("x" * 250))
    create(peer, "name '.'", topic("."))
    create(peer, "more replicas than brokers", topic("rf3", replication=3))
    create(peer, "zero partitions", topic("p0", partitions=0))
    create(peer, "zero replication factor", topic("rf0", replication=0))
    create(peer, "unknown config", topic("uc", no_such_config="1"))
    create(peer, "bad config value", topic("bv", retention_ms="soon"))
    create(peer, "the same name twice", topic("twice"), topic("twice"))
    create(peer, "defaults by -1", topic("defaults", partitions=-1, replication=-1))
    create(peer, "validate only", topic("check-only", partitions=3), validate_only=True)


def create_partitions_validation(peer: Peer) -> None:
    create(peer, "create cp", topic("cp", partitions=2))
    peer.wait_for_leaders("cp", 2)
    Part = CreatePartitionsRequest.CreatePartitionsTopic
    for count, label in ((1, "fewer"), (2, "as many"), (3, "one more")):
        peer.ask(label, CreatePartitionsRequest(topics=[Part(name="cp", count=count, assignments=None)],
                                                timeout_ms=30_000, validate_only=False), 3)
    peer.ask("unknown topic", CreatePartitionsRequest(topics=[Part(name="nope", count=2, assignments=None)],
                                                      timeout_ms=30_000, validate_only=False), 3)


def produce_edges(peer: Peer) -> None:
    create(peer, "create pe", topic("pe", max_message_bytes="1000"))
    peer.wait_for_leaders("pe", 1)
    good = build_batch([(None, b"v%d" % i, [], T0 + i) for i in range(3)])
    peer.ask("acks 1", produce_request("pe", 0, good, acks=1), 9)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF  # the last record byte: the CRC no longer matches
    peer.ask("bad CRC", produce_request("pe", 0, bytes(bad_crc), acks=1), 9)
    peer.ask("larger than max.message.bytes", produce_request(
        "pe", 0, build_batch([(None, b"x" * 2000, [], T0)]), acks=1), 9)
    peer.ask("acks 2 is not a value", produce_request("pe", 0, good, acks=2), 9)
    peer.ask("unknown partition", produce_request("pe", 5, good, acks=1), 9)
    peer.ask("unknown topic", produce_request("no-such-topic", 0, good, acks=1), 9)
    legacy = bytearray(good)
    legacy[16] = 1  # magic byte: a v1 message set where v3+ requests need magic 2
    peer.ask("wrong magic", produce_request("pe", 0, bytes(legacy), acks=1), 9)


def idempotent_producer(peer: Peer) -> None:
    from protocol.messages import InitProducerIdRequest

    create(peer, "create ip", topic("ip"))
    peer.wait_for_leaders("ip", 1)
    deadline = time.monotonic() + 30
    while True:  # Kafka's producer id block comes from its controller, a moment after start
        ids = peer.send(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4)
        if ids.error_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert ids.error_code == 0, f"{peer.name}: InitProducerId answered {ids.error_code}"
    pid, epoch = ids.producer_id, ids.producer_epoch

    now = int(time.time() * 1000)  # Kafka expires producer state by the batches' timestamps

    def batch(sequence: int, count: int = 2) -> bytes:
        return build_batch([(None, b"s%d" % (sequence + i), [], now) for i in range(count)],
                           producer_id=pid, producer_epoch=epoch, base_sequence=sequence)

    peer.ask("sequence 0", produce_request("ip", 0, batch(0), acks=-1), 9)
    peer.ask("the same batch again: a duplicate", produce_request("ip", 0, batch(0), acks=-1), 9)
    peer.ask("a gap in the sequence", produce_request("ip", 0, batch(5), acks=-1), 9)
    peer.ask("the next sequence", produce_request("ip", 0, batch(2), acks=-1), 9)


def list_offsets_versions(peer: Peer) -> None:
    filled(peer, "lo")
    delete(peer, "to 3", [("lo", [(0, 3)])])
    for version in range(1, 10):
        for timestamp, what in ((-2, "earliest"), (-1, "latest"), (T0 + 5, "by time")):
            list_offsets(peer, f"v{version} {what}", "lo", timestamp, version=version)
    list_offsets(peer, "v7 max timestamp", "lo", -3)


def metadata_and_leader_epochs(peer: Peer) -> None:
    from protocol.messages import MetadataRequest, OffsetForLeaderEpochRequest

    filled(peer, "md")
    Wanted = MetadataRequest.MetadataRequestTopic
    peer.ask("metadata v1", MetadataRequest(topics=[Wanted(name="md")]), 1)  # v1-3 always auto-create
    for version in (4, 9, 12):
        peer.ask(f"metadata v{version}", MetadataRequest(
            topics=[Wanted(name="md"), Wanted(name="missing-topic")], allow_auto_topic_creation=False), version)
    Topic_ = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    Part = Topic_.OffsetForLeaderPartition
    for epoch in (0, 5, -1):
        peer.ask(f"end offset of epoch {epoch}", OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            Topic_(topic="md", partitions=[Part(partition=0, current_leader_epoch=-1, leader_epoch=epoch)])]), 4)


def delete_topics(peer: Peer) -> None:
    from protocol.messages import DeleteTopicsRequest

    create(peer, "create gone", topic("gone"))
    peer.wait_for_leaders("gone", 1)
    peer.ask("delete one that exists and one that does not",
             DeleteTopicsRequest(topic_names=["gone", "never-was"], timeout_ms=30_000), 5)


def classic_group(peer: Peer) -> None:
    from protocol.messages import FindCoordinatorRequest, HeartbeatRequest, LeaveGroupRequest, SyncGroupRequest
    from tests.broker.group_wire import assignment, join_request

    filled(peer, "gt")
    wait_for(lambda: peer.send(FindCoordinatorRequest(key="g1", key_type=0), 3).error_code == 0,
             timeout_s=30, interval_s=0.2, what=f"{peer.name}: a coordinator for g1")  # the offsets topic coming up
    peer.ask("find coordinator", FindCoordinatorRequest(key="g1", key_type=0), 3)
    first = peer.ask("join without a member id", join_request("g1", topics=("gt",)), 7)
    joined = peer.ask("join with the member id", join_request("g1", first.member_id, topics=("gt",)), 7)
    member, generation = joined.member_id, joined.generation_id
    peer.ask("sync as the leader", SyncGroupRequest(
        group_id="g1", generation_id=generation, member_id=member, group_instance_id=None, protocol_type="consumer",
        protocol_name="range", assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=member, assignment=assignment({"gt": [0]}))]), 5)
    peer.ask("heartbeat", HeartbeatRequest(group_id="g1", generation_id=generation, member_id=member,
                                           group_instance_id=None), 4)
    peer.ask("heartbeat of an old generation", HeartbeatRequest(
        group_id="g1", generation_id=generation - 1, member_id=member, group_instance_id=None), 4)
    peer.ask("commit", _commit("g1", generation, member, 4), 8)
    peer.ask("commit with a wrong generation", _commit("g1", generation + 5, member, 5), 8)
    peer.ask("fetch the commit", _offset_fetch("g1", "gt"), 8)
    peer.ask("describe while stable", _describe("g1"), 5)
    peer.ask("leave", LeaveGroupRequest(group_id="g1", members=[LeaveGroupRequest.MemberIdentity(
        member_id=member, group_instance_id=None)]), 4)
    peer.ask("describe once empty", _describe("g1"), 5)
    peer.ask("a commit without a group generation (simple consumer)", _commit("simple", -1, "", 7), 8)
    peer.ask("fetch of a group that never was", _offset_fetch("never", "gt"), 8)


def _commit(group: str, generation: int, member: str, offset: int):
    from protocol.messages import OffsetCommitRequest

    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                               group_instance_id=None, retention_time_ms=-1, topics=[T(name="gt", partitions=[
                                   T.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                  committed_leader_epoch=-1, committed_metadata="")])])


def _offset_fetch(group: str, topic_name: str):
    from protocol.messages import OffsetFetchRequest

    G = OffsetFetchRequest.OffsetFetchRequestGroup
    return OffsetFetchRequest(groups=[G(group_id=group, topics=[G.OffsetFetchRequestTopics(
        name=topic_name, partition_indexes=[0])])], require_stable=False)


def _describe(group: str):
    from protocol.messages import DescribeGroupsRequest

    return DescribeGroupsRequest(groups=[group], include_authorized_operations=False)


def describe_and_alter_topic_configs(peer: Peer) -> None:
    from protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest

    create(peer, "create cf", topic("cf", retention_ms="3600000"))
    peer.wait_for_leaders("cf", 1)
    Resource = DescribeConfigsRequest.DescribeConfigsResource
    for version, synonyms in ((1, False), (4, True)):
        peer.ask(f"describe v{version}", DescribeConfigsRequest(
            resources=[Resource(resource_type=2, resource_name="cf", configuration_keys=None)],
            include_synonyms=synonyms, include_documentation=False), version)
    peer.ask("describe two keys", DescribeConfigsRequest(resources=[Resource(
        resource_type=2, resource_name="cf", configuration_keys=["retention.ms", "cleanup.policy"])]), 4)
    peer.ask("describe an unknown topic", DescribeConfigsRequest(resources=[Resource(
        resource_type=2, resource_name="nope", configuration_keys=None)]), 4)
    Alter = IncrementalAlterConfigsRequest.AlterConfigsResource
    Op = Alter.AlterableConfig
    for label, ops in (("set and delete", [Op(name="retention.bytes", config_operation=0, value="1000"),
                                          Op(name="retention.ms", config_operation=1, value=None)]),
                       ("a bad value", [Op(name="retention.ms", config_operation=0, value="soon")]),
                       ("an unknown config", [Op(name="no.such.config", config_operation=0, value="1")]),
                       ("append to a list", [Op(name="cleanup.policy", config_operation=2, value="compact")])):
        peer.ask(label, IncrementalAlterConfigsRequest(resources=[Alter(
            resource_type=2, resource_name="cf", configs=ops)], validate_only=False), 1)
    # Kafka's broker answers from its metadata cache, which takes the controller's change a moment later
    policy = Resource(resource_type=2, resource_name="cf", configuration_keys=["cleanup.policy"])

    def altered() -> bool:
        answer = peer.send(DescribeConfigsRequest(resources=[policy]), 4)
        return any(c.value == "delete,compact" for c in answer.results[0].configs)

    wait_for(altered, timeout_s=30, what="the appended cleanup.policy described")
    peer.ask("describe after", DescribeConfigsRequest(resources=[Resource(
        resource_type=2, resource_name="cf", configuration_keys=["retention.ms", "retention.bytes", "cleanup.policy"])],
        include_synonyms=True), 4)


def security_apis_on_an_open_broker(peer: Peer) -> None:
    """No authorizer, a PLAINTEXT listener: what the SASL, ACL, SCRAM and quota APIs answer, the SASL and
    ACL-changing ones at every version both serve (test_every_version.py leaves them to this scenario)."""
    from protocol import messages as m

    for v in (0, 1):
        peer.ask(f"sasl handshake on plaintext v{v}", m.SaslHandshakeRequest(mechanism="PLAIN"), v)
    for v in (0, 1, 2):
        peer.ask(f"sasl authenticate on plaintext v{v}", m.SaslAuthenticateRequest(auth_bytes=b"\x00a\x00b"), v)
    acl_filter = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                      host_filter=None, operation=1, permission_type=1)
    peer.ask("describe acls", m.DescribeAclsRequest(**acl_filter), 3)
    for v in (1, 2, 3):
        peer.ask(f"create acls v{v}", m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*", operation=6,
            permission_type=3)]), v)
        peer.ask(f"delete acls v{v}", m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(
            **acl_filter)]), v)
    Component = m.DescribeClientQuotasRequest.ComponentData
    peer.ask("quotas, any user", m.DescribeClientQuotasRequest(components=[
        Component(entity_type="user", match_type=2, match=None)], strict=False), 1)
    peer.ask("quotas, unknown entity type", m.DescribeClientQuotasRequest(components=[
        Component(entity_type="group", match_type=2, match=None)], strict=False), 1)
    peer.ask("scram users, all", m.DescribeUserScramCredentialsRequest(users=None), 0)
    peer.ask("scram users, unknown", m.DescribeUserScramCredentialsRequest(users=[
        m.DescribeUserScramCredentialsRequest.UserName(name="nobody")]), 0)
    Alter = m.AlterUserScramCredentialsRequest
    peer.ask("scram alter errors", Alter(deletions=[Alter.ScramCredentialDeletion(name="ghost", mechanism=1)],
                                         upsertions=[Alter.ScramCredentialUpsertion(
                                             name="weak", mechanism=2, iterations=100, salt=b"s",
                                             salted_password=b"p")]), 0)


SCENARIOS = [delete_records_edges, delete_records_on_a_compacted_topic, fetch_around_the_log_start,
             create_topics_validation, create_partitions_validation, produce_edges, idempotent_producer,
             list_offsets_versions, metadata_and_leader_epochs, delete_topics, classic_group,
             describe_and_alter_topic_configs, security_apis_on_an_open_broker]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_same_answers_as_kafka(scenario, ebb_peer, kafka_peer):
    started = time.monotonic()
    found = compare(scenario, ebb_peer, kafka_peer, ALLOWED, ignore=_config_difference)
    assert not found, f"{len(found)} unexplained differences ({time.monotonic() - started:.1f}s):\n" + "\n".join(found)
