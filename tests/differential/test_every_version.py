"""Every version of every API that both Kafka 4.3.1 and Ebb serve, asked the same question.

Both brokers' ApiVersions answers are read first; for each API in both, one request (or two) is
sent at every version in the overlap of their ranges, against the same small topic, and the answers
are compared as in test_against_kafka.py. The questions are chosen to leave both brokers in the same
state whatever the version (validate-only changes, lookups, errors for groups and members that do
not exist, DeleteRecords to the same offset, produces whose offsets both assign alike), so that a
version is judged on its own layout and defaults rather than on what an earlier request did.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from protocol import messages as m
from protocol.records import build_batch
from tests.broker.data_wire import produce_request
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED, T0, _config_difference, create, topic

pytestmark = pytest.mark.timeout(300)

TOPIC = "sweep"
GROUP = "nobody"  # a group that never exists on either broker


@dataclass
class Target:
    """What a request names on one peer: the topic's id is each broker's own."""

    topic_id: uuid.UUID


Builder = Callable[[Target, int], Iterator[tuple[str, m.ApiMessage]]]
BUILDERS: dict[type, Builder] = {}


def asks(request: type) -> Callable[[Builder], Builder]:
    def register(build: Builder) -> Builder:
        BUILDERS[request] = build
        return build
    return register


@asks(m.ApiVersionsRequest)
def _api_versions(target: Target, v: int):
    yield "", m.ApiVersionsRequest(client_software_name="ebb-judge", client_software_version="1")


@asks(m.MetadataRequest)
def _metadata(target: Target, v: int):
    names = [TOPIC] if v < 4 else [TOPIC, "never-was"]  # below v4 a missing topic is always auto-created
    yield "", m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                                allow_auto_topic_creation=v < 4)


@asks(m.ListOffsetsRequest)
def _list_offsets(target: Target, v: int):
    Topic = m.ListOffsetsRequest.ListOffsetsTopic
    parts = [Topic.ListOffsetsPartition(partition_index=0, timestamp=-2),
             Topic.ListOffsetsPartition(partition_index=1, timestamp=-1)]
    yield "", m.ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=5000,
                                   topics=[Topic(name=TOPIC, partitions=parts)])
    by_time = [Topic.ListOffsetsPartition(partition_index=0, timestamp=T0 + 1)]
    yield " by time", m.ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=5000,
                                           topics=[Topic(name=TOPIC, partitions=by_time)])


@asks(m.FetchRequest)
def _fetch(target: Target, v: int):
    Topic = m.FetchRequest.FetchTopic
    for label, offset in (("", 0), (" past the end", 100)):
        parts = [Topic.FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20) for p in (0, 1)]
        named = (Topic(topic=TOPIC, partitions=parts) if v <= 12
                 else Topic(topic_id=target.topic_id, partitions=parts))
        yield label, m.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[named])


@asks(m.OffsetForLeaderEpochRequest)
def _offset_for_leader_epoch(target: Target, v: int):
    Topic = m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    parts = [Topic.OffsetForLeaderPartition(partition=0, leader_epoch=0),
             Topic.OffsetForLeaderPartition(partition=1, leader_epoch=5)]
    yield "", m.OffsetForLeaderEpochRequest(replica_id=-1 if v >= 3 else -2,
                                            topics=[Topic(topic=TOPIC, partitions=parts)])


@asks(m.ProduceRequest)
def _produce(target: Target, v: int):
    data = build_batch([(b"k", b"v%d" % v, [], T0 + v)])
    yield "", produce_request(TOPIC, 1, data, acks=-1)


@asks(m.DeleteRecordsRequest)
def _delete_records(target: Target, v: int):
    Topic = m.DeleteRecordsRequest.DeleteRecordsTopic
    yield "", m.DeleteRecordsRequest(timeout_ms=30_000, topics=[Topic(name=TOPIC, partitions=[
        Topic.DeleteRecordsPartition(partition_index=0, offset=1)])])


@asks(m.FindCoordinatorRequest)
def _find_coordinator(target: Target, v: int):
    if v <= 3:
        yield "", m.FindCoordinatorRequest(key=GROUP, key_type=0)
    else:
        yield "", m.FindCoordinatorRequest(coordinator_keys=[GROUP, "other"], key_type=0)


@asks(m.ListGroupsRequest)
def _list_groups(target: Target, v: int):
    yield "", m.ListGroupsRequest()
    if v >= 4:
        yield " filtered", m.ListGroupsRequest(states_filter=["Stable"])


@asks(m.DescribeGroupsRequest)
def _describe_groups(target: Target, v: int):
    yield "", m.DescribeGroupsRequest(groups=[GROUP], include_authorized_operations=False)


@asks(m.OffsetFetchRequest)
def _offset_fetch(target: Target, v: int):
    if v <= 7:
        Topic = m.OffsetFetchRequest.OffsetFetchRequestTopic
        yield "", m.OffsetFetchRequest(group_id=GROUP, topics=[Topic(name=TOPIC, partition_indexes=[0, 1])])
    else:
        Group = m.OffsetFetchRequest.OffsetFetchRequestGroup
        named = (Group.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1]) if v <= 9
                 else Group.OffsetFetchRequestTopics(topic_id=target.topic_id, partition_indexes=[0, 1]))
        yield "", m.OffsetFetchRequest(groups=[Group(group_id=GROUP, topics=[named])])


@asks(m.OffsetCommitRequest)
def _offset_commit(target: Target, v: int):
    Topic = m.OffsetCommitRequest.OffsetCommitRequestTopic
    parts = [Topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)]
    named = Topic(name=TOPIC, partitions=parts) if v <= 9 else Topic(topic_id=target.topic_id, partitions=parts)
    yield "", m.OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=3, member_id="ghost",
                                    topics=[named])


@asks(m.HeartbeatRequest)
def _heartbeat(target: Target, v: int):
    yield "", m.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="ghost")


@asks(m.SyncGroupRequest)
def _sync_group(target: Target, v: int):
    named = dict(protocol_type="consumer", protocol_name="range") if v >= 5 else {}
    yield "", m.SyncGroupRequest(group_id=GROUP, generation_id=1, member_id="ghost", assignments=[], **named)


@asks(m.LeaveGroupRequest)
def _leave_group(target: Target, v: int):
    if v <= 2:
        yield "", m.LeaveGroupRequest(group_id=GROUP, member_id="ghost")
    else:
        yield "", m.LeaveGroupRequest(group_id=GROUP, members=[m.LeaveGroupRequest.MemberIdentity(member_id="ghost")])


@asks(m.DeleteGroupsRequest)
def _delete_groups(target: Target, v: int):
    yield "", m.DeleteGroupsRequest(groups_names=[GROUP])


@asks(m.OffsetDeleteRequest)
def _offset_delete(target: Target, v: int):
    Topic = m.OffsetDeleteRequest.OffsetDeleteRequestTopic
    yield "", m.OffsetDeleteRequest(group_id=GROUP, topics=[Topic(name=TOPIC, partitions=[
        Topic.OffsetDeleteRequestPartition(partition_index=0)])])


@asks(m.InitProducerIdRequest)
def _init_producer_id(target: Target, v: int):
    yield "", m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)


@asks(m.AddPartitionsToTxnRequest)
def _add_partitions_to_txn(target: Target, v: int):  # a transactional id neither broker has seen
    if v >= 4:  # the brokers' batched form (KIP-890)
        Txn = m.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction  # noqa: N806
        for verify in (True, False):
            yield f" verify_only={verify}", m.AddPartitionsToTxnRequest(transactions=[Txn(
                transactional_id="never-initialised", producer_id=1, producer_epoch=0, verify_only=verify,
                topics=[Txn.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])])])
        return
    yield "", m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="never-initialised", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])])


@asks(m.AddOffsetsToTxnRequest)
def _add_offsets_to_txn(target: Target, v: int):
    yield "", m.AddOffsetsToTxnRequest(transactional_id="never-initialised", producer_id=1, producer_epoch=0,
                                       group_id=GROUP)


@asks(m.TxnOffsetCommitRequest)
def _txn_offset_commit(target: Target, v: int):
    Topic = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    yield "", m.TxnOffsetCommitRequest(transactional_id="never-initialised", group_id=GROUP, producer_id=1,
                                       producer_epoch=0, topics=[Topic(name=TOPIC, partitions=[
                                           Topic.TxnOffsetCommitRequestPartition(
                                               partition_index=0, committed_offset=1, committed_metadata=None)])])


@asks(m.EndTxnRequest)
def _end_txn(target: Target, v: int):
    yield "", m.EndTxnRequest(transactional_id="never-initialised", producer_id=1, producer_epoch=0, committed=True)


@asks(m.WriteTxnMarkersRequest)
def _write_txn_markers(target: Target, v: int):
    Marker = m.WriteTxnMarkersRequest.WritableTxnMarker  # noqa: N806
    yield "", m.WriteTxnMarkersRequest(markers=[Marker(
        producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0, topics=[
            Marker.WritableTxnMarkerTopic(name="never-was", partition_indexes=[0]),
            Marker.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[7])])])


@asks(m.DescribeProducersRequest)
def _describe_producers(target: Target, v: int):
    yield "", m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(
        name=TOPIC, partition_indexes=[0, 1, 7])])


@asks(m.UpdateFeaturesRequest)
def _update_features(target: Target, v: int):
    # validate-only from v1; at v0 the level asked is the one in force, so nothing changes either way
    Update = m.UpdateFeaturesRequest.FeatureUpdateKey
    for label, level in (("", 2), (" out of range", 3)):
        yield label, m.UpdateFeaturesRequest(timeout_ms=30_000, validate_only=v >= 1, feature_updates=[
            Update(feature="transaction.version", max_version_level=level, upgrade_type=1)])


@asks(m.DescribeTransactionsRequest)
def _describe_transactions(target: Target, v: int):
    yield "", m.DescribeTransactionsRequest(transactional_ids=["never-initialised", ""])


@asks(m.ListTransactionsRequest)
def _list_transactions(target: Target, v: int):
    filters = {"duration_filter": 1000} if v >= 1 else {}
    if v >= 2:
        filters["transactional_id_pattern"] = "never-.*"
    yield "", m.ListTransactionsRequest(state_filters=["Ongoing", "Nope"], producer_id_filters=[], **filters)


@asks(m.CreateTopicsRequest)
def _create_topics(target: Target, v: int):
    yield "", m.CreateTopicsRequest(topics=[topic(f"{TOPIC}-new", 3), topic(TOPIC, 1)], timeout_ms=30_000,
                                    validate_only=True)


@asks(m.CreatePartitionsRequest)
def _create_partitions(target: Target, v: int):
    Topic = m.CreatePartitionsRequest.CreatePartitionsTopic
    yield "", m.CreatePartitionsRequest(topics=[Topic(name=TOPIC, count=4, assignments=None),
                                               Topic(name="never-was", count=2, assignments=None)],
                                        timeout_ms=30_000, validate_only=True)


@asks(m.DeleteTopicsRequest)
def _delete_topics(target: Target, v: int):
    if v <= 5:
        yield "", m.DeleteTopicsRequest(topic_names=["never-was"], timeout_ms=30_000)
    else:
        yield "", m.DeleteTopicsRequest(topics=[m.DeleteTopicsRequest.DeleteTopicState(name="never-was")],
                                        timeout_ms=30_000)


@asks(m.DescribeConfigsRequest)
def _describe_configs(target: Target, v: int):
    Resource = m.DescribeConfigsRequest.DescribeConfigsResource
    yield "", m.DescribeConfigsRequest(resources=[
        Resource(resource_type=2, resource_name=TOPIC, configuration_keys=["retention.ms", "cleanup.policy"]),
        Resource(resource_type=2, resource_name="never-was", configuration_keys=None),
        Resource(resource_type=32, resource_name=GROUP, configuration_keys=None),  # KIP-848's group configs
        Resource(resource_type=32, resource_name="", configuration_keys=None),
        Resource(resource_type=16, resource_name="swept", configuration_keys=None),  # KIP-714's subscriptions
        Resource(resource_type=16, resource_name="", configuration_keys=None)], include_synonyms=True)


@asks(m.AlterConfigsRequest)
def _alter_configs(target: Target, v: int):
    Resource = m.AlterConfigsRequest.AlterConfigsResource
    yield "", m.AlterConfigsRequest(validate_only=True, resources=[
        Resource(resource_type=2, resource_name=TOPIC,
                 configs=[Resource.AlterableConfig(name="retention.ms", value="60000")]),
        Resource(resource_type=2, resource_name="never-was", configs=[]),
        Resource(resource_type=32, resource_name=GROUP,
                 configs=[Resource.AlterableConfig(name="consumer.heartbeat.interval.ms", value="6000")]),
        Resource(resource_type=32, resource_name="", configs=[]),
        Resource(resource_type=16, resource_name="swept",
                 configs=[Resource.AlterableConfig(name="interval.ms", value="99")])])


@asks(m.IncrementalAlterConfigsRequest)
def _incremental_alter_configs(target: Target, v: int):
    Resource = m.IncrementalAlterConfigsRequest.AlterConfigsResource
    yield "", m.IncrementalAlterConfigsRequest(validate_only=True, resources=[
        Resource(resource_type=2, resource_name=TOPIC, configs=[
            Resource.AlterableConfig(name="retention.ms", config_operation=0, value="60000"),
            Resource.AlterableConfig(name="no.such.config", config_operation=0, value="1")]),
        Resource(resource_type=32, resource_name=GROUP, configs=[
            Resource.AlterableConfig(name="consumer.session.timeout.ms", config_operation=0, value="50000")]),
        Resource(resource_type=32, resource_name=f"{GROUP}-too", configs=[
            Resource.AlterableConfig(name="consumer.session.timeout.ms", config_operation=0, value="1")]),
        Resource(resource_type=16, resource_name="swept", configs=[
            Resource.AlterableConfig(name="match", config_operation=0, value="client_id=.*")])])


@asks(m.ListConfigResourcesRequest)
def _list_config_resources(target: Target, v: int):
    if v == 0:  # ListClientMetricsResources as it was: client-metrics resources only
        yield "", m.ListConfigResourcesRequest()
        return
    # The sweep's topics and groups differ in number and order from scenario to scenario: the brokers only.
    yield "", m.ListConfigResourcesRequest(resource_types=[4, 8])
    yield " of a type neither lists", m.ListConfigResourcesRequest(resource_types=[0])


@asks(m.DescribeTopicPartitionsRequest)
def _describe_topic_partitions(target: Target, v: int):
    Topic = m.DescribeTopicPartitionsRequest.TopicRequest
    yield "", m.DescribeTopicPartitionsRequest(topics=[Topic(name=TOPIC), Topic(name="never-was")])
    yield " all topics", m.DescribeTopicPartitionsRequest(topics=[])
    yield " one partition per answer", m.DescribeTopicPartitionsRequest(
        topics=[Topic(name=TOPIC), Topic(name=f"{TOPIC}-other")], response_partition_limit=1)
    yield " from a cursor", m.DescribeTopicPartitionsRequest(
        topics=[Topic(name="a-before"), Topic(name=TOPIC), Topic(name="zz-after")],
        cursor=m.DescribeTopicPartitionsRequest.Cursor(topic_name=TOPIC, partition_index=1))


@asks(m.DescribeClusterRequest)
def _describe_cluster(target: Target, v: int):
    yield "", m.DescribeClusterRequest(include_cluster_authorized_operations=False)


@asks(m.DescribeLogDirsRequest)
def _describe_log_dirs(target: Target, v: int):
    Topic = m.DescribeLogDirsRequest.DescribableLogDirTopic
    # a partition held, one the topic does not have, and a topic neither broker has
    yield "", m.DescribeLogDirsRequest(topics=[Topic(topic=TOPIC, partitions=[0, 1, 7]),
                                               Topic(topic="never-was", partitions=[0])])
    yield " all partitions", m.DescribeLogDirsRequest(topics=None)


@asks(m.ElectLeadersRequest)
def _elect_leaders(target: Target, v: int):
    Topic = m.ElectLeadersRequest.TopicPartitions
    asked = [Topic(topic=TOPIC, partitions=[0, 1, 7]), Topic(topic="never-was", partitions=[0])]
    yield " preferred", m.ElectLeadersRequest(election_type=0, topic_partitions=asked, timeout_ms=10_000)
    yield " preferred, every partition", m.ElectLeadersRequest(election_type=0, topic_partitions=None,
                                                               timeout_ms=10_000)
    if v >= 1:
        yield " unclean", m.ElectLeadersRequest(election_type=1, topic_partitions=asked, timeout_ms=10_000)
        yield " of an unknown type", m.ElectLeadersRequest(election_type=7, topic_partitions=asked,
                                                           timeout_ms=10_000)


@asks(m.AlterPartitionReassignmentsRequest)
def _alter_partition_reassignments(target: Target, v: int):
    Topic = m.AlterPartitionReassignmentsRequest.ReassignableTopic
    Partition = Topic.ReassignablePartition
    # refusals only, so that nothing moves: a cancel with nothing under way, unknown partitions and
    # topics, and targets that are empty, repeat a broker or name one that is not registered
    yield "", m.AlterPartitionReassignmentsRequest(timeout_ms=10_000, topics=[
        Topic(name=TOPIC, partitions=[Partition(partition_index=0, replicas=None),
                                      Partition(partition_index=7, replicas=None),
                                      Partition(partition_index=1, replicas=[]),
                                      Partition(partition_index=1, replicas=[99]),
                                      Partition(partition_index=1, replicas=[99, 99])]),
        Topic(name="never-was", partitions=[Partition(partition_index=0, replicas=None)])])


@asks(m.ListPartitionReassignmentsRequest)
def _list_partition_reassignments(target: Target, v: int):
    Topic = m.ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    yield "", m.ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=None)
    yield " named", m.ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=[
        Topic(name=TOPIC, partition_indexes=[0, 1, 7]), Topic(name="never-was", partition_indexes=[0])])


@asks(m.DescribeAclsRequest)
def _describe_acls(target: Target, v: int):
    yield "", m.DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                    principal_filter=None, host_filter=None, operation=1, permission_type=1)


@asks(m.DescribeClientQuotasRequest)
def _describe_client_quotas(target: Target, v: int):
    yield "", m.DescribeClientQuotasRequest(components=[], strict=False)


@asks(m.AlterClientQuotasRequest)
def _alter_client_quotas(target: Target, v: int):
    entry = m.AlterClientQuotasRequest.EntryData
    yield " validate only", m.AlterClientQuotasRequest(entries=[entry(
        entity=[entry.EntityData(entity_type="client-id", entity_name="sweep")],
        ops=[entry.OpData(key="producer_byte_rate", value=1024.0, remove=False)])], validate_only=True)


@asks(m.DescribeUserScramCredentialsRequest)
def _describe_scram(target: Target, v: int):
    yield "", m.DescribeUserScramCredentialsRequest(users=None)


@asks(m.JoinGroupRequest)  # registered last: the groups it makes are asked about by nothing after it
def _join_group(target: Target, v: int):
    from tests.broker.group_wire import join_request

    # a group of its own per version: below v4 the join completes the group's first rebalance, from v4
    # a member without an id is told MEMBER_ID_REQUIRED with the id to come back with
    yield "", join_request(f"{TOPIC}-join-v{v}", topics=(TOPIC,), rebalance_ms=10_000 if v >= 1 else -1)


# KIP-848 consumer groups: a heartbeat of a member of a group that does not exist, and its description
# (tests/differential/test_consumer_groups_against_kafka.py plays a whole group).
@asks(m.ConsumerGroupHeartbeatRequest)
def _consumer_group_heartbeat(target: Target, v: int):
    yield "", m.ConsumerGroupHeartbeatRequest(group_id=f"{GROUP}-kip848", member_id="ghost", member_epoch=3)


@asks(m.ConsumerGroupDescribeRequest)
def _consumer_group_describe(target: Target, v: int):
    yield "", m.ConsumerGroupDescribeRequest(group_ids=[f"{GROUP}-kip848", ""], include_authorized_operations=True)


# Share groups (KIP-932): errors for a group, member and session that do not exist, and an
# AlterShareGroupOffsets that makes the same empty share group on both (its topic does not exist).
@asks(m.ShareGroupHeartbeatRequest)
def _share_group_heartbeat(target: Target, v: int):
    yield "", m.ShareGroupHeartbeatRequest(group_id=GROUP, member_id="ghost", member_epoch=3)


@asks(m.ShareGroupDescribeRequest)
def _share_group_describe(target: Target, v: int):
    yield "", m.ShareGroupDescribeRequest(group_ids=[GROUP], include_authorized_operations=True)


@asks(m.ShareFetchRequest)
def _share_fetch(target: Target, v: int):
    yield "", m.ShareFetchRequest(group_id=GROUP, member_id="ghost", share_session_epoch=5, max_wait_ms=0,
                                  min_bytes=1, max_records=10, batch_size=10, topics=[])


@asks(m.ShareAcknowledgeRequest)
def _share_acknowledge(target: Target, v: int):
    yield "", m.ShareAcknowledgeRequest(group_id=GROUP, member_id="ghost", share_session_epoch=0, topics=[])


@asks(m.DescribeShareGroupOffsetsRequest)
def _describe_share_group_offsets(target: Target, v: int):
    yield "", m.DescribeShareGroupOffsetsRequest(groups=[
        m.DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id=GROUP, topics=None)])


@asks(m.AlterShareGroupOffsetsRequest)
def _alter_share_group_offsets(target: Target, v: int):
    topic = m.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    yield "", m.AlterShareGroupOffsetsRequest(group_id=f"{TOPIC}-share-v{v}", topics=[topic(
        topic_name="never-was", partitions=[topic.AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                                                          start_offset=0)])])


@asks(m.DeleteShareGroupOffsetsRequest)
def _delete_share_group_offsets(target: Target, v: int):
    yield "", m.DeleteShareGroupOffsetsRequest(group_id=GROUP, topics=[
        m.DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name=TOPIC)])


# The share coordinator's inter-broker APIs, for a group with no state: a read, a summary, a write, a deletion and
# an initialisation (before the state topic exists: nothing is stored; with it, test_share_groups_against_kafka.py).
@asks(m.InitializeShareGroupStateRequest)
def _initialize_share_group_state(target: Target, v: int):
    asked = m.InitializeShareGroupStateRequest.InitializeStateData
    yield "", m.InitializeShareGroupStateRequest(group_id=GROUP, topics=[asked(topic_id=target.topic_id, partitions=[
        asked.PartitionData(partition=0, state_epoch=0, start_offset=0)])])


@asks(m.ReadShareGroupStateSummaryRequest)
def _read_share_group_state_summary(target: Target, v: int):
    asked = m.ReadShareGroupStateSummaryRequest.ReadStateSummaryData
    yield "", m.ReadShareGroupStateSummaryRequest(group_id=GROUP, topics=[asked(
        topic_id=target.topic_id, partitions=[asked.PartitionData(partition=0, leader_epoch=0)])])


@asks(m.ReadShareGroupStateRequest)
def _read_share_group_state(target: Target, v: int):
    asked = m.ReadShareGroupStateRequest.ReadStateData
    yield "", m.ReadShareGroupStateRequest(group_id=GROUP, topics=[asked(topic_id=target.topic_id, partitions=[
        asked.PartitionData(partition=0, leader_epoch=0)])])


@asks(m.WriteShareGroupStateRequest)
def _write_share_group_state(target: Target, v: int):
    asked = m.WriteShareGroupStateRequest.WriteStateData
    yield "", m.WriteShareGroupStateRequest(group_id=GROUP, topics=[asked(topic_id=target.topic_id, partitions=[
        asked.PartitionData(partition=0, state_epoch=0, leader_epoch=0, start_offset=0, state_batches=[])])])


@asks(m.DeleteShareGroupStateRequest)
def _delete_share_group_state(target: Target, v: int):
    asked = m.DeleteShareGroupStateRequest.DeleteStateData
    yield "", m.DeleteShareGroupStateRequest(group_id=GROUP, topics=[asked(topic_id=target.topic_id, partitions=[
        asked.PartitionData(partition=0)])])


# Requests both serve that the sweep leaves to the scenarios of test_against_kafka.py, and why.
NOT_SWEPT = {
    m.SaslHandshakeRequest.api_key: "changes the connection's state (security_apis_on_an_open_broker)",
    m.SaslAuthenticateRequest.api_key: "changes the connection's state (security_apis_on_an_open_broker)",
    m.CreateAclsRequest.api_key: "SECURITY_DISABLED without an authorizer (security_apis_on_an_open_broker)",
    m.DeleteAclsRequest.api_key: "SECURITY_DISABLED without an authorizer (security_apis_on_an_open_broker)",
    m.AlterUserScramCredentialsRequest.api_key: "changes credentials (security_apis_on_an_open_broker)",
}


KRAFT_FEATURES = ("metadata.version", "kraft.version", "share.version", "streams.version",
                  "eligible.leader.replicas.version")


def sweep_allowed(versions: dict[type, range]) -> dict[tuple[str, str], str]:
    """The sweep's own intended differences, per version asked."""
    allowed = {}
    for v in versions.get(m.ApiVersionsRequest, ()):
        allowed[f"ApiVersions v{v}", "api_keys"] = (
            "each broker lists what it serves (the sweep then asks every version both serve)")
        allowed[f"ApiVersions v{v}", "finalized_features_epoch"] = "each cluster's own count of feature changes"
        if v == 3:
            allowed[f"ApiVersions v{v}", "supported_features"] = (
                "v3 lists only ranges starting above 0: Kafka's metadata.version alone, nothing of Ebb's")
        # transaction.version and group.version are compared; the others name KRaft metadata or protocols
        # Ebb does not serve
        for name in KRAFT_FEATURES:
            for path in (f"supported_features[{name}]", f"finalized_features[{name}]"):
                allowed[f"ApiVersions v{v}", path] = (
                    f"{name} is a feature of what Ebb does not serve, so it claims no level of it (broker/features.py)")
    allowed["DescribeTopicPartitions v0 all topics", "topics[__consumer_offsets].partitions"] = (
        "the Kafka node of the tests runs one offsets partition (offsets.topic.num.partitions=1), Ebb its default 50")
    for v in versions.get(m.DescribeLogDirsRequest, ()):
        allowed[f"DescribeLogDirs v{v} all partitions", "results[0].topics[__consumer_offsets].partitions"] = (
            "the Kafka node of the tests runs one offsets partition, Ebb its default 50")
    for v in versions.get(m.InitProducerIdRequest, ()):
        allowed[f"InitProducerId v{v}", "producer_id"] = "each broker hands out its own ids"
    for v in versions.get(m.ConsumerGroupHeartbeatRequest, ()):
        allowed[f"ConsumerGroupHeartbeat v{v}", "error_code"] = (
            "a heartbeat (epoch 3) for a group the coordinator does not know: Kafka answers "
            "GROUP_ID_NOT_FOUND, fatal to the Java consumer; Ebb answers UNKNOWN_MEMBER_ID so that the "
            "member rejoins (docs/features.md)")
    return allowed


def served(peer: Peer) -> dict[int, tuple[int, int]]:
    reply = peer.send(m.ApiVersionsRequest(), 0)
    assert reply.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in reply.api_keys}


@pytest.fixture(scope="module")
def both_serve(ebb_peer, kafka_peer) -> dict[int, range]:
    """For each API key both brokers serve: the versions both serve."""
    ours, theirs = served(ebb_peer), served(kafka_peer)
    found = {}
    for key in ours.keys() & theirs.keys():
        low, high = max(ours[key][0], theirs[key][0]), min(ours[key][1], theirs[key][1])
        if low <= high:
            found[key] = range(low, high + 1)
    return found


def prepare(peer: Peer) -> Target:
    """The topic every question names: two partitions, three records in partition 0; a coordinator up."""
    create(peer, "create", topic(TOPIC, 2))
    peer.wait_for_leaders(TOPIC, 2)
    data = build_batch([(b"k%d" % i, b"v%d" % i, [], T0 + i) for i in range(3)])
    deadline = time.monotonic() + 30
    # Kafka's metadata names a leader a moment before that broker serves the partition
    while (error := peer.send(produce_request(TOPIC, 0, data, acks=-1), 9).responses[0]
           .partition_responses[0].error_code) != 0:
        assert error == 6 and time.monotonic() < deadline, f"{peer.name}: produce failed with {error}"
        time.sleep(0.1)
    while peer.send(m.FindCoordinatorRequest(key=GROUP, key_type=0), 3).error_code != 0:  # offsets topic coming up
        assert time.monotonic() < deadline, f"{peer.name}: no coordinator"
        time.sleep(0.2)
    # Kafka answers COORDINATOR_LOAD_IN_PROGRESS until it has a block of producer ids from its controller
    while (error := peer.send(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000),
                              4).error_code) != 0:
        assert error == 14 and time.monotonic() < deadline, f"{peer.name}: InitProducerId failed with {error}"
        time.sleep(0.2)
    reply = peer.send(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)]), 12)
    return Target(reply.topics[0].topic_id)


@pytest.fixture(scope="module")
def versions(both_serve) -> dict[type, range]:
    """What the sweep asks: the versions both serve that the codec can also write (Kafka, and Ebb after
    it, advertise Produce from v0 for old clients' sake but refuse v0-2)."""
    found = {}
    for request in BUILDERS:
        if request.api_key in both_serve:
            span = both_serve[request.api_key]
            low, high = max(span.start, request.valid_versions.low), min(span.stop - 1, request.valid_versions.high)
            found[request] = range(low, high + 1)
    return found


def every_version(versions: dict[type, range], peer: Peer) -> None:
    target = prepare(peer)
    for request, span in versions.items():
        for v in span:
            for label, body in BUILDERS[request](target, v):
                peer.ask(f"{request.__name__[:-len('Request')]} v{v}{label}", body, v)


def test_every_api_both_serve_is_asked(both_serve, versions):
    """An API Ebb adds that Kafka serves too must join the sweep (or say here why not)."""
    asked = {request.api_key for request in versions}
    assert not both_serve.keys() - asked - NOT_SWEPT.keys(), sorted(both_serve.keys() - asked - NOT_SWEPT.keys())
    assert sum(len(span) for span in versions.values()) >= 150


def test_same_answers_at_every_version(versions, ebb_peer, kafka_peer):
    allowed = {**ALLOWED, **sweep_allowed(versions)}
    found = compare(lambda peer: every_version(versions, peer), ebb_peer, kafka_peer, allowed,
                    ignore=_config_difference)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
