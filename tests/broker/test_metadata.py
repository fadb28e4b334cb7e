"""Metadata (v0-13) and DescribeCluster (v0-2) against a real broker process, over the wire."""

import uuid

import pytest

from broker.handlers.acl_operations import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from protocol.errors import ErrorCode
from protocol.messages import DescribeClusterRequest, MetadataRequest
from tests.broker.wire_client import WireClient, create_topic, metadata
from tests.support.broker_process import BrokerProcess

INT32_MIN = -(2**31)
ZERO = uuid.UUID(int=0)
ALL_VERSIONS = list(range(14))


@pytest.fixture(scope="module")
def broker_overrides():
    return {"num.partitions": "2"}


@pytest.fixture(scope="module")
def client(broker):
    with WireClient(broker.port) as c:
        assert create_topic(c, "meta-three", 3).error_code == ErrorCode.NONE
        yield c


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory):
    """auto.create.topics.enable=false, and a default replication factor one broker cannot meet."""
    overrides = {"auto.create.topics.enable": "false", "default.replication.factor": "2"}
    with BrokerProcess(tmp_path_factory.mktemp("metadata-strict"), overrides) as process:
        yield process


def _request(names, version, allow=True, ids=None):
    topics = None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    for topic_id in ids or []:
        topics.append(MetadataRequest.MetadataRequestTopic(name=None, topic_id=topic_id))
    # AllowAutoTopicCreation exists from v4; older versions must leave its default (true)
    return MetadataRequest(topics=topics, allow_auto_topic_creation=allow if version >= 4 else True)


def _topic(response, name):
    return next(t for t in response.topics if t.name == name)


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_all_topics_describe_this_broker_and_every_partition(broker, client, version):
    response = client.send(_request([] if version == 0 else None, version), version)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", broker.port)]
    if version >= 1:
        assert response.controller_id == 1
    if version >= 2:
        assert response.cluster_id and len(response.cluster_id) == 22
    topic = _topic(response, "meta-three")
    assert topic.error_code == ErrorCode.NONE and not topic.is_internal
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2]
    for partition in topic.partitions:
        assert (partition.error_code, partition.leader_id) == (ErrorCode.NONE, 1)
        assert partition.replica_nodes == [1] and partition.isr_nodes == [1]
        if version >= 5:
            assert partition.offline_replicas == []
        if version >= 7:
            assert partition.leader_epoch == 0
    if version >= 8:
        assert topic.topic_authorized_operations == INT32_MIN
    if 8 <= version <= 10:
        assert response.cluster_authorized_operations == INT32_MIN
    if version >= 10:
        assert topic.topic_id != ZERO
    if version >= 13:
        assert response.error_code == ErrorCode.NONE


@pytest.mark.parametrize("version", range(1, 14))
def test_empty_list_means_no_topics(client, version):
    response = client.send(_request([], version), version)
    assert response.topics == [] and len(response.brokers) == 1


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_named_topic(client, version):
    response = client.send(_request(["meta-three", "meta-three"], version, allow=False), version)
    assert [t.name for t in response.topics] == ["meta-three"]  # asked twice, answered once
    assert len(response.topics[0].partitions) == 3


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_missing_topic_is_auto_created_with_the_broker_defaults(client, version):
    name = f"auto-created-v{version}"
    response = client.send(_request([name], version, allow=True), version)
    topic = _topic(response, name)
    assert topic.error_code == ErrorCode.NONE
    assert [p.partition_index for p in topic.partitions] == [0, 1]  # num.partitions=2
    assert all(p.leader_id == 1 for p in topic.partitions)
    again = client.send(_request([name], version, allow=False), version)
    assert _topic(again, name).error_code == ErrorCode.NONE
    if version >= 10:
        assert _topic(again, name).topic_id == topic.topic_id != ZERO


@pytest.mark.parametrize("version", range(4, 14))
def test_no_auto_creation_when_the_request_forbids_it(client, version):
    name = f"not-created-v{version}"
    response = client.send(_request([name], version, allow=False), version)
    topic = _topic(response, name)
    assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and topic.partitions == []
    assert all(t.name != name for t in metadata(client, None).topics)


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_no_auto_creation_when_the_broker_forbids_it(strict_broker, version):
    with WireClient(strict_broker.port) as client:
        response = client.send(_request(["wanted"], version, allow=True), version)
    assert _topic(response, "wanted").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("allow", [True, False])
@pytest.mark.parametrize("name", ["bad name!", "a" * 250, "..", "x/y"])
def test_invalid_names_are_invalid_topic_exception(client, name, allow):
    response = client.send(_request([name], 12, allow=allow), 12)
    assert _topic(response, name).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_internal_topics_are_not_auto_created(client):
    response = client.send(_request(["__transaction_state"], 12, allow=True), 12)
    topic = _topic(response, "__transaction_state")
    assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and topic.is_internal


def test_auto_creation_failure_is_reported(tmp_path):
    with BrokerProcess(tmp_path, {"default.replication.factor": "2"}) as broker, WireClient(broker.port) as client:
        response = client.send(_request(["needs-two-brokers"], 12, allow=True), 12)
    assert _topic(response, "needs-two-brokers").error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_topic_ids_look_up_topics_v12(client):
    known = _topic(metadata(client, ["meta-three"], version=12), "meta-three").topic_id
    unknown = uuid.uuid4()
    for version in (12, 13):
        response = client.send(_request([], version, ids=[known, unknown]), version)
        by_id = {t.topic_id: t for t in response.topics}
        assert by_id[known].name == "meta-three" and by_id[known].error_code == ErrorCode.NONE
        assert by_id[unknown].name is None and by_id[unknown].error_code == ErrorCode.UNKNOWN_TOPIC_ID


@pytest.mark.parametrize("version", [10, 11])
def test_topic_ids_before_v12_are_invalid_request(client, version):
    response = client.send(_request(["meta-three"], version, ids=[uuid.uuid4()]), version)
    assert response.brokers == []
    assert {t.error_code for t in response.topics} == {ErrorCode.INVALID_REQUEST}


@pytest.mark.parametrize("version", range(8, 14))
def test_authorized_operations_when_requested(client, version):
    request = _request(["meta-three"], version, allow=False)
    request.include_topic_authorized_operations = True
    if version <= 10:
        request.include_cluster_authorized_operations = True
    response = client.send(request, version)
    assert response.topics[0].topic_authorized_operations == TOPIC_OPERATIONS
    if version <= 10:
        assert response.cluster_authorized_operations == CLUSTER_OPERATIONS


def test_authorized_operation_bits_are_valid_acl_operations():
    from kafka.admin import ACLOperation

    for bits in (TOPIC_OPERATIONS, CLUSTER_OPERATIONS):
        for op in range(32):
            if bits & (1 << op):
                ACLOperation(op)  # raises on an unknown bit, as kafka-python does


# --- DescribeCluster -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("include_ops", [False, True])
def test_describe_cluster(broker, client, version, include_ops):
    response = client.send(DescribeClusterRequest(include_cluster_authorized_operations=include_ops), version)
    assert response.error_code == ErrorCode.NONE
    assert response.cluster_id == client.send(_request([], 12), 12).cluster_id
    assert response.controller_id == 1
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", broker.port)]
    assert response.cluster_authorized_operations == (CLUSTER_OPERATIONS if include_ops else INT32_MIN)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("endpoint_type, error", [
    (2, ErrorCode.MISMATCHED_ENDPOINT_TYPE), (0, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
    (7, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE)])
def test_describe_cluster_endpoint_types(client, version, endpoint_type, error):
    response = client.send(DescribeClusterRequest(endpoint_type=endpoint_type), version)
    assert response.error_code == error and response.error_message and response.brokers == []


# --- a real client ---------------------------------------------------------------------------------


def test_kafka_python_admin_describes_the_cluster_and_topics(broker, client):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == 1 and len(cluster["brokers"]) == 1
        assert "meta-three" in admin.list_topics()
        [described] = admin.describe_topics(["meta-three"])
        assert described["error_code"] == 0 and len(described["partitions"]) == 3
    finally:
        admin.close()
