"""Names and values an older version cannot carry are refused at the request, never accepted and
broken later for everyone (issue 18): flexible versions carry strings past 32,767 bytes, the int16
strings of older versions, and of Kafka's __consumer_offsets records, do not.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
)
from tests.broker.data_wire import WireClient, create_topic, ensure_internal_topic
from tests.broker.group_wire import commit, delete_groups, describe, fetch, join, join_once, list_groups

TOO_LONG = "g" * 200_000  # fine in a compact string, impossible in an int16 one
AT_THE_LIMIT = "c" * 32_767


def test_a_group_id_too_long_for_old_versions_is_refused_and_listing_still_works(broker, client):
    ensure_internal_topic(client)
    create_topic(client, "committed-to")
    reply = join_once(client, TOO_LONG, version=8)
    assert reply.error_code == ErrorCode.INVALID_GROUP_ID
    assert commit(client, TOO_LONG, {("committed-to", 0): 1}, version=8) == {
        ("committed-to", 0): ErrorCode.INVALID_GROUP_ID}
    assert delete_groups(client, TOO_LONG, version=2) == {TOO_LONG: ErrorCode.INVALID_GROUP_ID}
    for version in range(5):
        assert list_groups(client, version=version).error_code == ErrorCode.NONE


def test_an_instance_id_or_protocol_too_long_is_refused(broker, client):
    ensure_internal_topic(client)
    assert join_once(client, "g-instance", version=8, instance_id=TOO_LONG).error_code == ErrorCode.INVALID_REQUEST
    assert join_once(client, "g-protocol", version=8, protocol_type=TOO_LONG).error_code == ErrorCode.INVALID_REQUEST
    assert join_once(client, "g-protocol", version=8,
                     protocols=[(TOO_LONG, b"")]).error_code == ErrorCode.INVALID_REQUEST
    for version in range(5):
        assert list_groups(client, version=version).error_code == ErrorCode.NONE


def test_a_client_id_at_the_limit_still_makes_a_member_id_old_versions_carry(broker):
    with WireClient(broker.port, client_id=AT_THE_LIMIT) as client:
        ensure_internal_topic(client)
        member = join(client, "g-long-client", version=5)
        assert len(member.member_id.encode()) <= 32_767
        assert member.member_id.startswith("ccc")
        (group,) = describe(client, "g-long-client", version=0)
        assert group.error_code == ErrorCode.NONE
        assert [m.client_id for m in group.members] == [AT_THE_LIMIT]


def test_offset_commit_with_the_largest_retention_is_kept(broker, client):
    ensure_internal_topic(client)
    create_topic(client, "retained")
    for version in (2, 3, 4):
        errors = commit(client, f"g-retention-{version}", {("retained", 0): 7}, version=version,
                        retention_ms=2**63 - 1)
        assert errors == {("retained", 0): ErrorCode.NONE}
        error, offsets = fetch(client, f"g-retention-{version}", {"retained": [0]}, version=3)
        assert (error, offsets[("retained", 0)][0]) == (ErrorCode.NONE, 7)


def test_config_values_too_long_for_describe_configs_v1_are_refused(broker, client):
    create_topic(client, "configured")
    Resource = AlterConfigsRequest.AlterConfigsResource
    reply = client.send(AlterConfigsRequest(resources=[Resource(
        resource_type=2, resource_name="configured", configs=[Resource.AlterableConfig(
            name="retention.committed.groups", value=TOO_LONG)])], validate_only=False), 2)
    assert reply.responses[0].error_code == ErrorCode.INVALID_CONFIG
    Topic = CreateTopicsRequest.CreatableTopic
    created = client.send(CreateTopicsRequest(topics=[Topic(
        name="configured-at-birth", num_partitions=1, replication_factor=1,
        configs=[Topic.CreatableTopicConfig(name="retention.committed.groups", value=TOO_LONG)])],
        timeout_ms=5000), 5)
    assert created.topics[0].error_code == ErrorCode.INVALID_CONFIG
    described = client.send(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name="configured", configuration_keys=None)]), 1)
    assert described.results[0].error_code == ErrorCode.NONE


def test_error_messages_quoting_long_names_are_cut_not_fatal(broker, client):
    """Kafka's messages quote the name; one 32,767 bytes long is cut to fit, and the error code arrives."""
    reply = client.send(CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
        name=AT_THE_LIMIT, count=2, assignments=None)], timeout_ms=5000, validate_only=False), 0)
    (result,) = reply.results
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert result.error_message is not None and len(result.error_message.encode()) <= 32_767
