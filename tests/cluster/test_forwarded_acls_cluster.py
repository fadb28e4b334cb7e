"""Requests only the controller runs (ElectLeaders, Alter/ListPartitionReassignments), sent by a client
to a broker that is not the controller, under an authorizer: the receiving broker checks the client,
the controller trusts the forward only because the forwarding broker's principal holds CLUSTER_ACTION
(as Kafka's controller trusts an Envelope's sender). Clients authenticate on a SASL_PLAINTEXT
listener; the brokers talk PLAINTEXT between them as User:ANONYMOUS, granted CLUSTER_ACTION alone."""

from __future__ import annotations

import uuid

import pytest

from broker.cluster.cluster import Cluster
from protocol.enums import Operation, PatternType, Permission, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    CreateAclsRequest,
    DescribeAclsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from tests.broker.wire_client import WireClient, metadata
from tests.cluster.three_brokers import NODES, three_brokers
from tests.support.broker_process import free_port
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(120)
E = ErrorCode
MARKER = Cluster.FORWARDED_CLIENT_ID
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" '
        'user_mallory="mallory-secret";')
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "mallory": "mallory-secret"}
ElectTopic = ElectLeadersRequest.TopicPartitions
MoveTopic = AlterPartitionReassignmentsRequest.ReassignableTopic


@pytest.fixture(scope="module")
def cluster(zk_server, tmp_path_factory):
    sasl_ports = {n: free_port() for n in NODES}
    shared = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin",  # creates the ACLs; no one else is a super user
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
              "inter.broker.listener.name": "PLAINTEXT",
              "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
    listeners = {n: {"listeners": f"PLAINTEXT://127.0.0.1:{{port}},SASL_PLAINTEXT://127.0.0.1:{sasl_ports[n]}"}
                 for n in NODES}
    connect = f"{zk_server.connect}/forwarded-{uuid.uuid4().hex[:12]}"
    with three_brokers(connect, tmp_path_factory.mktemp("forwarded"), extra=shared, per_node=listeners) as brokers:
        for n, process in brokers.items():
            process.sasl_port = sasl_ports[n]
        with as_user(brokers[1], "admin") as admin:
            made = admin.send(CreateAclsRequest(creations=[
                grant("User:ANONYMOUS", Operation.CLUSTER_ACTION),  # the brokers: what Kafka asks of them
                grant("User:alice", Operation.ALTER), grant("User:alice", Operation.DESCRIBE)]), 3)
        assert [r.error_code for r in made.results] == [E.NONE] * 3
        wait_for(lambda: all(sees_alices_acls(b) for b in brokers.values()), what="every broker holding the ACLs")
        yield brokers


def grant(principal: str, operation: Operation) -> CreateAclsRequest.AclCreation:
    return CreateAclsRequest.AclCreation(resource_type=ResourceType.CLUSTER, resource_name="kafka-cluster",
                                         resource_pattern_type=PatternType.LITERAL, principal=principal, host="*",
                                         operation=operation, permission_type=Permission.ALLOW)


def as_user(broker, user: str, client_id: str = "ebb-test") -> WireClient:
    client = WireClient(broker.sasl_port, client_id=client_id)
    assert client.send(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == E.NONE
    token = b"\x00" + user.encode() + b"\x00" + PASSWORDS[user].encode()
    assert client.send(SaslAuthenticateRequest(auth_bytes=token), 2).error_code == E.NONE
    return client


def sees_alices_acls(broker) -> bool:
    """DescribeAcls needs DESCRIBE on the cluster and is answered where it arrives (never forwarded)."""
    with as_user(broker, "alice") as alice:
        answer = alice.send(DescribeAclsRequest(resource_type_filter=ResourceType.CLUSTER, resource_name_filter=None,
                                                pattern_type_filter=PatternType.ANY, principal_filter=None,
                                                host_filter=None, operation=Operation.ANY,
                                                permission_type=Permission.ANY), 3)
    return answer.error_code == E.NONE and len(answer.resources[0].acls if answer.resources else []) == 3


def controller_and_other(cluster):
    with WireClient(cluster[1].port) as client:
        controller = metadata(client, []).controller_id
    return cluster[controller], next(b for n, b in cluster.items() if n != controller)


def elect(client: WireClient):
    return client.send(ElectLeadersRequest(election_type=0, timeout_ms=10_000, topic_partitions=[
        ElectTopic(topic="never-was", partitions=[0])]), 2)


def move(client: WireClient):
    return client.send(AlterPartitionReassignmentsRequest(timeout_ms=10_000, topics=[MoveTopic(
        name="never-was", partitions=[MoveTopic.ReassignablePartition(partition_index=0, replicas=[1])])]), 0)


def listed(client: WireClient):
    return client.send(ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=None), 0)


def test_a_client_allowed_on_the_cluster_is_served_through_a_broker_that_is_not_the_controller(cluster):
    controller, other = controller_and_other(cluster)
    with as_user(other, "alice") as alice:
        # Per-partition codes only the controller's own run gives: the forward was accepted there.
        elected = elect(alice)
        assert elected.error_code == E.NONE
        assert [p.error_code for p in elected.replica_election_results[0].partition_result] == \
            [E.UNKNOWN_TOPIC_OR_PARTITION]
        moved = move(alice)
        assert moved.error_code == E.NONE
        assert [p.error_code for p in moved.responses[0].partitions] == [E.UNKNOWN_TOPIC_OR_PARTITION]
        assert (listed(alice).error_code, listed(alice).topics) == (E.NONE, [])


@pytest.mark.parametrize("where", ["controller", "other"])
def test_the_forwarded_marker_gives_a_client_without_the_acl_nothing(cluster, where):
    controller, other = controller_and_other(cluster)
    with as_user(controller if where == "controller" else other, "mallory", client_id=MARKER) as mallory:
        elected = elect(mallory)
        assert elected.error_code == E.CLUSTER_AUTHORIZATION_FAILED
        assert elected.replica_election_results[0].partition_result[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
        assert move(mallory).error_code == E.CLUSTER_AUTHORIZATION_FAILED
        assert listed(mallory).error_code == E.CLUSTER_AUTHORIZATION_FAILED


def test_a_broker_principal_is_trusted_only_with_the_marker(cluster):
    controller, _ = controller_and_other(cluster)
    with WireClient(controller.port) as anonymous:  # CLUSTER_ACTION, but neither ALTER nor DESCRIBE
        assert listed(anonymous).error_code == E.CLUSTER_AUTHORIZATION_FAILED
        assert elect(anonymous).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    with WireClient(controller.port, client_id=MARKER) as broker:
        assert listed(broker).error_code == E.NONE
        assert move(broker).responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
