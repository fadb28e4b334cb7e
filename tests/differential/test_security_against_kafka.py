"""Kafka as the judge of who may delete: Kafka 4.3.1 and Ebb started with the same security properties
— the client listener speaking SASL_PLAINTEXT with PLAIN users from its JAAS config, Kafka's
StandardAuthorizer (which selects Ebb's ACL authorizer), one super user — answer the same requests of
the same principals the same way: authentication refused and accepted, DeleteRecords without and with
DELETE on the topic (KIP-107 §3), what READ and DESCRIBE allow, ACLs created and deleted by the super
user, DeleteTopics, the cluster operations a user without cluster ACLs is refused (DescribeLogDirs,
ElectLeaders, the reassignment APIs, UpdateFeatures), and who may see transactions (DescribeProducers,
DescribeTransactions, ListTransactions).
"""

from __future__ import annotations

import pytest

from protocol import messages as m
from protocol.records import build_batch
from tests.broker.data_wire import delete_records_request, fetch_request, list_offsets_request, produce_request
from tests.broker.wire_client import WireClient
from tests.differential.runner import Peer, compare
from tests.differential.test_against_kafka import ALLOWED
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{USERS["admin"]}" ' + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
        + ";")
TOPIC, T0 = "guarded", 1_700_000_000_000
# ALLOW (3) of an operation (DELETE 6, READ 3, DESCRIBE 8) on a topic (2), LITERAL (3) or PREFIXED (4)
ACLS = [("User:alice", 6, TOPIC, 3), ("User:alice", 8, TOPIC, 3), ("User:bob", 3, "guar", 4)]


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # Kafka's own broker reaches its controller as ANONYMOUS over the CONTROLLER listener, which
        # clients here never use; Ebb has no such listener.
        "super.users": "User:admin;User:ANONYMOUS",
        # Kafka's Produce checks a transactional partition with its coordinator over an inter-broker
        # client that this listener setup does not authenticate (NETWORK_EXCEPTION): off on both.
        "transaction.partition.verification.enable": "false",
    }


class Principal:
    """One authenticated connection; its answers are recorded in the peer's list."""

    def __init__(self, peer: Peer, user: str):
        self.peer, self.client = peer, WireClient(peer.port, timeout=30)
        assert self.client.send(m.SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        token = b"\x00" + user.encode() + b"\x00" + USERS[user].encode()
        assert self.client.send(m.SaslAuthenticateRequest(auth_bytes=token), 2).error_code == 0, user

    def send(self, body, version: int):
        return self.client.send(body, version)

    def ask(self, label: str, body, version: int):
        return self.peer.record(label, self.client.send(body, version))


def _delete(topic: str, offset: int) -> m.DeleteRecordsRequest:
    return delete_records_request({topic: {0: offset}}, timeout_ms=30_000)


def _metadata(topic: str) -> m.MetadataRequest:
    return m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
                             allow_auto_topic_creation=False, include_topic_authorized_operations=True)


def _list_offsets(timestamp: int) -> m.ListOffsetsRequest:
    return list_offsets_request(TOPIC, 0, timestamp)


def _fetch(offset: int) -> m.FetchRequest:
    return fetch_request(TOPIC, 0, offset, max_bytes=1 << 20)


def _acl_filter(principal: str) -> m.DeleteAclsRequest.DeleteAclsFilter:
    return m.DeleteAclsRequest.DeleteAclsFilter(resource_type_filter=2, resource_name_filter=None,
                                                pattern_type_filter=1, principal_filter=principal, host_filter=None,
                                                operation=1, permission_type=1)


def cluster_operations():
    """What needs DESCRIBE (log dirs, reassignments under way) or ALTER (elections, moves) on the cluster."""
    LogDirsTopic = m.DescribeLogDirsRequest.DescribableLogDirTopic
    for version in (1, 4):
        yield f"describe log dirs v{version}", m.DescribeLogDirsRequest(
            topics=[LogDirsTopic(topic=TOPIC, partitions=[0])]), version
    yield "elect leaders", m.ElectLeadersRequest(election_type=0, timeout_ms=10_000, topic_partitions=[
        m.ElectLeadersRequest.TopicPartitions(topic=TOPIC, partitions=[0])]), 2
    Reassignable = m.AlterPartitionReassignmentsRequest.ReassignableTopic
    yield "reassign", m.AlterPartitionReassignmentsRequest(timeout_ms=10_000, topics=[Reassignable(
        name=TOPIC, partitions=[Reassignable.ReassignablePartition(partition_index=0, replicas=None)])]), 0
    Listed = m.ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    yield "list reassignments", m.ListPartitionReassignmentsRequest(
        timeout_ms=10_000, topics=[Listed(name=TOPIC, partition_indexes=[0])]), 0
    Update = m.UpdateFeaturesRequest.FeatureUpdateKey
    for version in (0, 1, 2):  # at v0 (no ValidateOnly) the level in force is asked: nothing changes
        yield f"update features v{version}", m.UpdateFeaturesRequest(timeout_ms=10_000, validate_only=version >= 1,
                                                                     feature_updates=[Update(
            feature="transaction.version", max_version_level=2, upgrade_type=1)]), version


def who_may_delete(peer: Peer) -> None:
    with WireClient(peer.port, timeout=30) as client:
        peer.record("a mechanism not enabled", client.send(m.SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1))
    with WireClient(peer.port, timeout=30) as client:
        peer.record("handshake PLAIN", client.send(m.SaslHandshakeRequest(mechanism="PLAIN"), 1))
        peer.record("a wrong password", client.send(m.SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00wrong"), 2))
    admin, alice, bob = (Principal(peer, user) for user in ("admin", "alice", "bob"))
    Topic = m.CreateTopicsRequest.CreatableTopic
    admin.ask("create as the super user", m.CreateTopicsRequest(topics=[Topic(
        name=TOPIC, num_partitions=1, replication_factor=1, configs=[])], timeout_ms=30_000), 4)
    wait_for(lambda: admin.send(_metadata(TOPIC), 12).topics[0].partitions[0].leader_id >= 0, what="a leader")
    data = build_batch([(b"k%d" % i, b"v%d" % i, [], T0 + i) for i in range(10)])
    admin.ask("produce as the super user", produce_request(TOPIC, 0, data, acks=-1), 9)

    alice.ask("alice without ACLs: delete records", _delete(TOPIC, 4), 2)
    alice.ask("alice without ACLs: delete records of a topic that does not exist", _delete("ghost", 1), 2)
    alice.ask("alice without ACLs: metadata", _metadata(TOPIC), 12)
    alice.ask("alice without ACLs: produce", produce_request(TOPIC, 0, data, acks=-1), 9)
    alice.ask("alice may not create ACLs", m.CreateAclsRequest(creations=[]), 3)
    for question, request, version in cluster_operations():
        alice.ask(f"alice without cluster ACLs: {question}", request, version)

    Creation = m.CreateAclsRequest.AclCreation
    admin.ask("the super user creates ACLs", m.CreateAclsRequest(creations=[Creation(
        resource_type=2, resource_name=name, resource_pattern_type=pattern, principal=principal, host="*",
        operation=operation, permission_type=3) for principal, operation, name, pattern in ACLS]), 3)
    # ACLs reach Kafka's authorizer through its metadata log a moment after CreateAcls answers
    wait_for(lambda: alice.send(_metadata(TOPIC), 12).topics[0].error_code == 0, what="alice's DESCRIBE in force")
    wait_for(lambda: bob.send(_list_offsets(-2), 7).topics[0].partitions[0].error_code == 0, what="bob's READ in force")

    alice.ask("alice with DELETE: delete records", _delete(TOPIC, 4), 2)
    alice.ask("alice with DESCRIBE: metadata and her operations", _metadata(TOPIC), 12)
    alice.ask("alice without READ: fetch", _fetch(4), 12)
    bob.ask("bob with READ (prefixed): delete records", _delete(TOPIC, 6), 2)
    bob.ask("bob with READ: fetch from the new start", _fetch(4), 12)
    bob.ask("bob with READ: earliest", _list_offsets(-2), 7)
    bob.ask("bob with READ: delete topic", m.DeleteTopicsRequest(topic_names=[TOPIC], timeout_ms=30_000), 5)

    admin.ask("the super user deletes alice's ACLs", m.DeleteAclsRequest(filters=[_acl_filter("User:alice")]), 3)
    wait_for(lambda: alice.send(_metadata(TOPIC), 12).topics[0].error_code != 0, what="alice's ACLs gone")
    alice.ask("alice again without ACLs: delete records", _delete(TOPIC, 8), 2)
    admin.ask("the super user deletes the topic", m.DeleteTopicsRequest(topic_names=[TOPIC], timeout_ms=30_000), 5)
    for principal in (admin, alice, bob):
        principal.client.close()


TXN_TOPIC, TXN_ID = "guarded-txn", "guarded-txn-id"


def _open_transaction(admin: Principal) -> None:
    """As the super user: a transaction on TXN_ID left open on TXN_TOPIC's partition 0."""
    def ready() -> bool:  # the coordinator comes up after FindCoordinator made `__transaction_state`
        found = admin.send(m.FindCoordinatorRequest(key_type=1, coordinator_keys=[TXN_ID]), 4)
        return found.coordinators[0].error_code == 0 and admin.send(m.InitProducerIdRequest(
            transactional_id=TXN_ID, transaction_timeout_ms=300_000), 4).error_code == 0
    wait_for(ready, what="a transaction coordinator")
    ids = admin.send(m.InitProducerIdRequest(transactional_id=TXN_ID, transaction_timeout_ms=300_000), 4)
    assert ids.error_code == 0
    admin.send(m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TXN_ID, v3_and_below_producer_id=ids.producer_id,
        v3_and_below_producer_epoch=ids.producer_epoch, v3_and_below_topics=[
            m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TXN_TOPIC, partitions=[0])]), 3)
    batch = build_batch([(None, b"t", [], T0)], producer_id=ids.producer_id, producer_epoch=ids.producer_epoch,
                        base_sequence=0, is_transactional=True)
    reply = admin.send(produce_request(TXN_TOPIC, 0, batch, acks=-1, transactional_id=TXN_ID), 9)
    assert reply.responses[0].partition_responses[0].error_code == 0


def _describe_producers() -> m.DescribeProducersRequest:
    return m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(
        name=TXN_TOPIC, partition_indexes=[0])])


def who_may_describe_transactions(peer: Peer) -> None:
    """DescribeProducers needs READ on the topic; DescribeTransactions and ListTransactions DESCRIBE on
    the transactional id, and DescribeTransactions lists only the topics one may DESCRIBE."""
    admin, alice, bob = (Principal(peer, user) for user in ("admin", "alice", "bob"))
    Topic = m.CreateTopicsRequest.CreatableTopic
    admin.send(m.CreateTopicsRequest(topics=[Topic(name=TXN_TOPIC, num_partitions=1, replication_factor=1,
                                                   configs=[])], timeout_ms=30_000), 4)
    wait_for(lambda: admin.send(_metadata(TXN_TOPIC), 12).topics[0].partitions[0].leader_id >= 0, what="a leader")
    _open_transaction(admin)
    for who, name in ((admin, "the super user"), (alice, "alice without ACLs"), (bob, "bob with READ (prefixed)")):
        answer = who.send(_describe_producers(), 0)
        for partition in answer.topics[0].partitions:  # each broker's own producer id and clock
            for producer in partition.active_producers:
                producer.producer_id, producer.last_timestamp = -1, -1
        peer.record(f"{name}: describe producers", answer)
    alice.ask("alice without ACLs: describe transactions", m.DescribeTransactionsRequest(transactional_ids=[TXN_ID]), 0)
    alice.ask("alice without ACLs: list transactions", m.ListTransactionsRequest(), 1)

    Creation = m.CreateAclsRequest.AclCreation
    admin.ask("DESCRIBE on the transactional id for alice", m.CreateAclsRequest(creations=[Creation(
        resource_type=5, resource_name=TXN_ID, resource_pattern_type=3, principal="User:alice", host="*",
        operation=8, permission_type=3)]), 3)
    wait_for(lambda: alice.send(m.ListTransactionsRequest(), 1).transaction_states, what="alice's ACL in force")
    for who, name in ((alice, "alice with DESCRIBE on the id only"), (admin, "the super user")):
        answer = who.send(m.DescribeTransactionsRequest(transactional_ids=[TXN_ID, "never-was"]), 0)
        for state in answer.transaction_states:
            state.producer_id, state.transaction_start_time_ms = -1, -1
        peer.record(f"{name}: describe transactions", answer)
        listed = who.send(m.ListTransactionsRequest(state_filters=["Ongoing"]), 1)
        for state in listed.transaction_states:
            state.producer_id = -1
        peer.record(f"{name}: list transactions", listed)
    Txn = m.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction  # noqa: N806
    verify = m.AddPartitionsToTxnRequest(transactions=[Txn(  # the brokers' form: CLUSTER_ACTION only
        transactional_id="never-was", producer_id=1, producer_epoch=0, verify_only=True,
        topics=[Txn.AddPartitionsToTxnTopic(name=TXN_TOPIC, partitions=[0])])])
    for version in (4, 5):
        alice.ask(f"alice without CLUSTER_ACTION: add partitions v{version}, verify only", verify, version)
        admin.ask(f"the super user: add partitions v{version}, verify only", verify, version)
    admin.ask("the super user deletes alice's ACL", m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=5, resource_name_filter=TXN_ID, pattern_type_filter=3, principal_filter="User:alice",
        host_filter=None, operation=8, permission_type=3)]), 3)
    for principal in (admin, alice, bob):
        principal.client.close()


GROUP = "guarded-group"
# On groups (3): READ (3) literal for alice, DESCRIBE_CONFIGS (10) literal and DELETE (6) prefixed for bob
GROUP_ACLS = [("User:alice", 3, GROUP, 3), ("User:bob", 10, GROUP, 3), ("User:bob", 6, "guarded", 4)]


def who_may_describe_groups(peer: Peer) -> None:
    """DescribeGroups needs DESCRIBE on the group (READ implies it); with IncludeAuthorizedOperations
    each answer carries the bits of the group operations the caller may perform."""
    admin, alice, bob = (Principal(peer, user) for user in ("admin", "alice", "bob"))
    describe = m.DescribeGroupsRequest(groups=[GROUP, "other-group"], include_authorized_operations=True)
    # Kafka makes `__consumer_offsets` at the first FindCoordinator; groups are described once it has a leader
    wait_for(lambda: admin.send(m.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]), 4)
             .coordinators[0].error_code == 0 and all(g.error_code == 0 for g in admin.send(describe, 5).groups),
             what="a group coordinator")
    for version in (3, 5):
        alice.ask(f"alice without ACLs: describe groups v{version}", describe, version)
        admin.ask(f"the super user: describe groups v{version}", describe, version)
    Creation = m.CreateAclsRequest.AclCreation
    admin.ask("ACLs on the group", m.CreateAclsRequest(creations=[Creation(
        resource_type=3, resource_name=name, resource_pattern_type=pattern, principal=principal, host="*",
        operation=operation, permission_type=3) for principal, operation, name, pattern in GROUP_ACLS]), 3)
    wait_for(lambda: any(g.group_id == GROUP and g.error_code == 0 for g in alice.send(describe, 5).groups),
             what="alice's READ in force")
    wait_for(lambda: bob.send(m.DeleteGroupsRequest(groups_names=["guarded-none"]), 2).results[0].error_code != 30,
             what="bob's DELETE in force")
    for who, name in ((alice, "alice with READ"), (bob, "bob with DESCRIBE_CONFIGS and DELETE"),
                      (admin, "the super user")):
        who.ask(f"{name}: describe groups", describe, 5)
    Filter = m.DeleteAclsRequest.DeleteAclsFilter  # noqa: N806
    admin.ask("the super user deletes the group ACLs", m.DeleteAclsRequest(filters=[Filter(
        resource_type_filter=3, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)]), 3)
    for principal in (admin, alice, bob):
        principal.client.close()


def test_who_may_describe_groups_as_kafka_decides(ebb_peer, kafka_peer):
    found = compare(who_may_describe_groups, ebb_peer, kafka_peer, ALLOWED)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


def test_who_may_describe_transactions_as_kafka_decides(ebb_peer, kafka_peer):
    found = compare(who_may_describe_transactions, ebb_peer, kafka_peer, ALLOWED)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)


def test_who_may_delete_as_kafka_decides(ebb_peer, kafka_peer):
    found = compare(who_may_delete, ebb_peer, kafka_peer, ALLOWED)
    assert not found, f"{len(found)} unexplained differences:\n" + "\n".join(found)
