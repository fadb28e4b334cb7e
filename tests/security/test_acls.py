"""Who may delete (KIP-107 §3): DeleteRecords and DeleteTopics need DELETE on the topic once
authorizer.class.name is set. ACLs are made with a real client (confluent-kafka's AdminClient) by a
super user and checked over SASL_PLAINTEXT as three users; the decision rules (DENY wins, implied
operations, prefixed and wildcard patterns, allow.everyone.if.no.acl.found) are also checked alone."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from broker.security import acls as model
from protocol.errors import ErrorCode
from protocol.messages import CreateAclsRequest, DeleteTopicsRequest, SaslAuthenticateRequest, SaslHandshakeRequest
from tests.broker.data_wire import WireClient, batch, delete_records, produce, produce_request
from tests.broker.wire_client import create_topic
from tests.support.broker_process import BrokerProcess, free_port

pytestmark = pytest.mark.timeout(120)
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("acls"))
    process.sasl_port = free_port()
    process.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SASL_PLAINTEXT://127.0.0.1:{process.sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    })
    with process:
        yield process


def as_user(broker, user: str) -> WireClient:
    client = WireClient(broker.sasl_port)
    assert client.request(SaslHandshakeRequest(mechanism="PLAIN"), version=1).error_code == ErrorCode.NONE
    token = f"\x00{user}\x00{USERS[user]}".encode()
    assert client.request(SaslAuthenticateRequest(auth_bytes=token), version=2).error_code == ErrorCode.NONE
    return client


def admin_client(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})


def acl(user: str, topic: str, operation, permission=AclPermissionType.ALLOW,
        pattern=ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, pattern, f"User:{user}", "*", operation, permission)


def create(broker, *bindings: AclBinding) -> None:
    admin = admin_client(broker)  # held until the futures are done
    for future in admin.create_acls(list(bindings)).values():
        future.result(timeout=10)


def delete_error(broker, user: str, topic: str, offset: int = 1) -> int:
    with as_user(broker, user) as client:
        return delete_records(client, topic, 0, offset).error_code


def test_deleting_records_needs_delete_on_the_topic(broker):
    with as_user(broker, "admin") as client:  # a super user needs no ACL
        assert create_topic(client, "ledger").error_code == ErrorCode.NONE
        assert produce(client, "ledger", 0, batch([b"r%d" % i for i in range(10)])).error_code == ErrorCode.NONE
    assert delete_error(broker, "alice", "ledger") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert delete_error(broker, "alice", "no-such-topic") == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # hides existence
    create(broker, acl("alice", "ledger", AclOperation.DESCRIBE))
    assert delete_error(broker, "alice", "ledger") == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # DESCRIBE is not DELETE
    create(broker, acl("alice", "ledger", AclOperation.DELETE))
    assert delete_error(broker, "alice", "ledger", 3) == ErrorCode.NONE
    assert delete_error(broker, "alice", "no-such-topic") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert delete_error(broker, "bob", "ledger", 4) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with WireClient(broker.port) as anonymous:  # the PLAINTEXT listener's clients are User:ANONYMOUS
        assert delete_records(anonymous, "ledger", 0, 4).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_deny_beats_allow_and_patterns_match(broker):
    with as_user(broker, "admin") as client:
        for name in ("audit-a", "audit-b"):
            assert create_topic(client, name).error_code == ErrorCode.NONE
            assert produce(client, name, 0, batch([b"x"] * 5)).error_code == ErrorCode.NONE
    create(broker, acl("bob", "audit-", AclOperation.DELETE, pattern=ResourcePatternType.PREFIXED),
           acl("bob", "audit-b", AclOperation.DELETE, AclPermissionType.DENY))
    assert delete_error(broker, "bob", "audit-a") == ErrorCode.NONE  # the prefixed ALLOW
    assert delete_error(broker, "bob", "audit-b") == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # DENY wins
    create(broker, acl("*", "*", AclOperation.DELETE))  # User:* on every topic
    assert delete_error(broker, "alice", "audit-a", 2) == ErrorCode.NONE
    assert delete_error(broker, "bob", "audit-b") == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # still denied


def test_deleting_topics_needs_delete(broker):
    with as_user(broker, "admin") as client:
        assert create_topic(client, "doomed").error_code == ErrorCode.NONE
    request = DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=5000)
    admin = admin_client(broker)  # take away the User:* DELETE on "*" the test above made
    for future in admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL,
                                                      None, None, AclOperation.ANY, AclPermissionType.ANY)]).values():
        future.result(timeout=10)
    with as_user(broker, "bob") as client:
        answer = client.request(request, version=5)
        assert answer.responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    create(broker, acl("bob", "doomed", AclOperation.DELETE))
    with as_user(broker, "bob") as client:
        assert client.request(request, version=5).responses[0].error_code == ErrorCode.NONE


def test_acl_apis_need_the_cluster_and_list_what_was_made(broker):
    admin = admin_client(broker)
    described = admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
        AclPermissionType.ANY)).result(timeout=10)
    assert sorted((b.name, b.operation) for b in described) == [("ledger", AclOperation.DELETE),
                                                                ("ledger", AclOperation.DESCRIBE)]
    with as_user(broker, "alice") as client:  # not a super user, no ALTER on the cluster
        answer = client.request(CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="ledger", resource_pattern_type=3, principal="User:alice", host="*",
            operation=4, permission_type=3)]), version=3)
        assert answer.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with as_user(broker, "admin") as client:
        bad = client.request(CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=3, resource_name="g", resource_pattern_type=3, principal="alice", host="*",
            operation=4, permission_type=3)]), version=3)  # no principal type; WRITE is no GROUP operation
        assert bad.results[0].error_code == ErrorCode.INVALID_REQUEST


def test_without_an_authorizer_the_acl_apis_are_security_disabled(tmp_path):
    with BrokerProcess(tmp_path) as plain, WireClient(plain.port) as client:
        answer = client.request(CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
            operation=4, permission_type=3)]), version=3)
        assert answer.results[0].error_code == ErrorCode.SECURITY_DISABLED


def _decide(acls, operation, name="orders", principal="User:alice", allow_if_none=False) -> bool:
    return model.decide(acls, frozenset({"User:root"}), allow_if_none, principal, "10.0.0.1", operation,
                        model.ResourceType.TOPIC, name)


def _acl(name, operation, permission=model.Permission.ALLOW, pattern=model.PatternType.LITERAL,
         principal="User:alice", host="*") -> model.Acl:
    return model.Acl(model.ResourceType.TOPIC, name, pattern, principal, host, operation, permission)


def test_the_decision_rules():
    Op, Perm = model.Operation, model.Permission
    assert not _decide([], Op.DELETE)
    assert _decide([], Op.DELETE, allow_if_none=True)  # no ACL names the resource at all
    assert not _decide([_acl("orders", Op.READ, principal="User:bob")], Op.DELETE, allow_if_none=True)
    assert _decide([], Op.DELETE, principal="User:root")  # super user
    assert _decide([_acl("orders", Op.READ)], Op.DESCRIBE)  # READ implies DESCRIBE
    assert not _decide([_acl("orders", Op.DESCRIBE)], Op.READ)
    assert _decide([_acl("orders", Op.ALL)], Op.DELETE)
    assert not _decide([_acl("orders", Op.ALL), _acl("orders", Op.DELETE, Perm.DENY)], Op.DELETE)
    assert _decide([_acl("orders", Op.ALL), _acl("orders", Op.READ, Perm.DENY)], Op.DESCRIBE)  # deny is not implied
    assert _decide([_acl("ord", Op.DELETE, pattern=model.PatternType.PREFIXED)], Op.DELETE)
    assert not _decide([_acl("ord", Op.DELETE)], Op.DELETE)  # a literal "ord" is not "orders"
    assert _decide([_acl("*", Op.DELETE, principal="User:*")], Op.DELETE)
    assert not _decide([_acl("orders", Op.DELETE, host="10.9.9.9")], Op.DELETE)


def test_producing_needs_write_and_reading_needs_read(broker):
    from tests.broker.data_wire import fetch

    with as_user(broker, "admin") as client:
        assert create_topic(client, "events").error_code == ErrorCode.NONE
    with as_user(broker, "alice") as client:
        assert produce(client, "events", 0, batch([b"e"])).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert produce(client, "nowhere", 0, batch([b"e"])).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        twice = client.request(produce_request("events", 0, batch([b"e"]), extra=[(0, batch([b"f"]))]), 9)
        assert [(p.index, p.error_code) for t in twice.responses for p in t.partition_responses] == [
            (0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]  # a partition named twice is answered once, as Kafka
        assert fetch(client, "events", 0, 0).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    create(broker, acl("alice", "events", AclOperation.WRITE))
    with as_user(broker, "alice") as client:
        assert produce(client, "events", 0, batch([b"e"])).error_code == ErrorCode.NONE
        assert fetch(client, "events", 0, 0).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # WRITE is not READ
    create(broker, acl("alice", "events", AclOperation.READ))
    with as_user(broker, "alice") as client:
        answer = fetch(client, "events", 0, 0)
        assert answer.error_code == ErrorCode.NONE and answer.high_watermark == 1


def test_a_transactional_id_without_write_refuses_only_transactional_records(broker):
    """As Kafka's KafkaApis: WRITE on the request's transactional id is asked only when the request holds
    transactional records, and then refuses it whole; plain records under that id are written."""
    from protocol.records import build_batch

    with as_user(broker, "admin") as client:
        assert create_topic(client, "txn-acl").error_code == ErrorCode.NONE
    create(broker, acl("alice", "txn-acl", AclOperation.WRITE))
    transactional = build_batch([(None, b"t", [], 1)], is_transactional=True, producer_id=1, producer_epoch=0,
                                base_sequence=0)
    with as_user(broker, "alice") as client:
        assert produce(client, "txn-acl", 0, batch([b"plain"]), transactional_id="tid").error_code == ErrorCode.NONE
        refused = produce(client, "txn-acl", 0, transactional, transactional_id="tid")
        assert refused.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_quiet_fetch_session_partition_is_authorized_again_each_time(broker):
    """A caught-up consumer's session partition is not read while nothing changed
    (broker/handlers/fetch_quiet.py), but READ is still asked each time: a DENY made meanwhile
    reaches the next incremental answer."""
    from tests.broker.data_wire import fetch_request

    def ask(client, session_id: int, epoch: int, named: bool):
        request = fetch_request("quiet", 0, 1, session_id=session_id, session_epoch=epoch)
        if not named:
            request.topics = []
        return client.request(request, 12)

    with as_user(broker, "admin") as client:
        assert create_topic(client, "quiet").error_code == ErrorCode.NONE
        assert produce(client, "quiet", 0, batch([b"q"])).error_code == ErrorCode.NONE
    create(broker, acl("bob", "quiet", AclOperation.READ))
    with as_user(broker, "bob") as client:
        full = ask(client, 0, 0, True)
        assert full.error_code == ErrorCode.NONE and full.session_id > 0
        assert full.responses[0].partitions[0].error_code == ErrorCode.NONE
        assert ask(client, full.session_id, 1, False).responses == []  # at the end: quiet
        create(broker, acl("bob", "quiet", AclOperation.READ, AclPermissionType.DENY))
        [topic] = ask(client, full.session_id, 2, False).responses
        assert topic.partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_a_removed_read_acl_reaches_a_connections_kept_fetch_resolve(broker):
    """A consumer without a session has its resolve, READ included, kept on its connection
    (broker/handlers/fetch_resolve.py): removing the ACL reaches its next Fetch."""
    from tests.broker.data_wire import fetch

    with as_user(broker, "admin") as client:
        assert create_topic(client, "kept").error_code == ErrorCode.NONE
        assert produce(client, "kept", 0, batch([b"k"])).error_code == ErrorCode.NONE
    create(broker, acl("bob", "kept", AclOperation.READ))
    with as_user(broker, "bob") as client:
        for _ in range(2):  # the second is served from what the first kept
            assert fetch(client, "kept", 0, 0).error_code == ErrorCode.NONE
        admin = admin_client(broker)
        for future in admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "kept", ResourcePatternType.LITERAL,
                                                          "User:bob", None, AclOperation.READ,
                                                          AclPermissionType.ALLOW)]).values():
            assert len(future.result(timeout=10)) == 1
        assert fetch(client, "kept", 0, 0).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_a_deny_literal_prefixed_or_wildcard_reaches_a_connections_kept_fetch_resolve(broker):
    """An added DENY of each pattern reaches the next Fetch of a connection that kept its resolve
    (carol: this test's user alone, since the wildcard DENY stays)."""
    from tests.broker.data_wire import fetch

    topics = ["carol-lit", "carol-pfx", "carol-any"]
    with as_user(broker, "admin") as client:
        for topic in topics:
            assert create_topic(client, topic).error_code == ErrorCode.NONE
            assert produce(client, topic, 0, batch([b"c"])).error_code == ErrorCode.NONE
    create(broker, acl("carol", "carol-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED))
    denials = [acl("carol", "carol-lit", AclOperation.READ, AclPermissionType.DENY),
               acl("carol", "carol-pf", AclOperation.READ, AclPermissionType.DENY, ResourcePatternType.PREFIXED),
               acl("carol", "*", AclOperation.READ, AclPermissionType.DENY)]
    with as_user(broker, "carol") as client:
        for topic, denial in zip(topics, denials, strict=True):
            for _ in range(2):  # the second is served from what the first kept
                assert fetch(client, topic, 0, 0).error_code == ErrorCode.NONE
            create(broker, denial)
            assert fetch(client, topic, 0, 0).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, denial


def test_group_configs_need_describe_configs_and_alter_configs_on_the_group(broker):
    from protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest

    Alter = IncrementalAlterConfigsRequest.AlterConfigsResource

    def describe(client) -> int:
        return client.request(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=32, resource_name="tuned", configuration_keys=None)]), version=4).results[0].error_code

    def alter(client) -> int:
        return client.request(IncrementalAlterConfigsRequest(resources=[Alter(
            resource_type=32, resource_name="tuned", configs=[Alter.AlterableConfig(
                name="consumer.session.timeout.ms", config_operation=0, value="50000")])], validate_only=False),
            version=1).responses[0].error_code

    with as_user(broker, "bob") as client:
        assert (describe(client), alter(client)) == (ErrorCode.GROUP_AUTHORIZATION_FAILED,) * 2
    group_acl = AclBinding(ResourceType.GROUP, "tuned", ResourcePatternType.LITERAL, "User:bob", "*",
                           AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW)
    create(broker, group_acl)
    with as_user(broker, "bob") as client:
        assert (describe(client), alter(client)) == (ErrorCode.NONE, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    create(broker, AclBinding(ResourceType.GROUP, "tuned", ResourcePatternType.LITERAL, "User:bob", "*",
                              AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW))
    with as_user(broker, "bob") as client:
        assert (describe(client), alter(client)) == (ErrorCode.NONE, ErrorCode.NONE)


def test_client_metrics_need_describe_configs_and_alter_configs_on_the_cluster(broker):
    """KIP-714's subscriptions (CLIENT_METRICS configs) are the cluster's, as Kafka checks them."""
    from protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest, ListConfigResourcesRequest

    Alter = IncrementalAlterConfigsRequest.AlterConfigsResource

    def asked(client) -> tuple[int, int, int]:
        described = client.request(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=16, resource_name="subscribed", configuration_keys=None)]), version=4).results[0]
        altered = client.request(IncrementalAlterConfigsRequest(resources=[Alter(
            resource_type=16, resource_name="subscribed", configs=[Alter.AlterableConfig(
                name="metrics", config_operation=0, value="*")])], validate_only=False), version=1).responses[0]
        listed = client.request(ListConfigResourcesRequest(), version=0)
        return described.error_code, altered.error_code, listed.error_code

    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with as_user(broker, "carol") as client:
        assert asked(client) == (denied, denied, denied)
    for operation in (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS):
        create(broker, AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:carol",
                                  "*", operation, AclPermissionType.ALLOW))
        with as_user(broker, "carol") as client:
            expected = (ErrorCode.NONE, denied if operation == AclOperation.DESCRIBE_CONFIGS else ErrorCode.NONE,
                        ErrorCode.NONE)
            assert asked(client) == expected


def test_consumer_group_describe_hides_a_group_naming_topics_one_may_not_describe(broker):
    """KAFKA-18813: the group is TOPIC_AUTHORIZATION_FAILED, nothing of it shown, until the caller may
    DESCRIBE every topic its members subscribe to or hold."""
    from protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest

    with as_user(broker, "admin") as client:
        assert create_topic(client, "described").error_code == ErrorCode.NONE
        joined = client.request(ConsumerGroupHeartbeatRequest(
            group_id="describing", member_id="m", member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=["described"], topic_partitions=[]), version=1)
        assert joined.error_code == ErrorCode.NONE
    create(broker, AclBinding(ResourceType.GROUP, "describing", ResourcePatternType.LITERAL, "User:bob", "*",
                              AclOperation.DESCRIBE, AclPermissionType.ALLOW))

    def described():
        with as_user(broker, "bob") as client:
            return client.request(ConsumerGroupDescribeRequest(group_ids=["describing"]), version=1).groups[0]

    refused = described()
    assert (refused.error_code, refused.members, refused.group_state) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, [], "")
    create(broker, acl("bob", "described", AclOperation.DESCRIBE))
    shown = described()
    assert shown.error_code == ErrorCode.NONE and [m.member_id for m in shown.members] == ["m"]


def test_metadata_shows_only_what_one_may_describe(broker):
    from protocol.messages import MetadataRequest

    def listed(user: str, names: list[str] | None = None) -> dict[str, int]:
        topics = None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
        with as_user(broker, user) as client:
            answer = client.request(MetadataRequest(topics=topics, allow_auto_topic_creation=True), 12)
        return {t.name: t.error_code for t in answer.topics}

    with as_user(broker, "admin") as client:
        assert create_topic(client, "private").error_code == ErrorCode.NONE
    assert "private" in listed("admin")
    assert "private" not in listed("bob")  # left out of the all-topics answer
    assert listed("bob", ["private", "never-made"]) == {
        "private": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "never-made": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    create(broker, acl("bob", "private", AclOperation.READ))  # READ implies DESCRIBE
    assert listed("bob", ["private"]) == {"private": ErrorCode.NONE}
    assert "private" in listed("bob")


def test_describe_topic_partitions_shows_only_what_one_may_describe(broker):
    from protocol.messages import DescribeTopicPartitionsRequest

    def described(user: str, names: list[str]) -> dict[str, int]:
        topics = [DescribeTopicPartitionsRequest.TopicRequest(name=n) for n in names]
        with as_user(broker, user) as client:
            answer = client.request(DescribeTopicPartitionsRequest(topics=topics), 0)
        return {t.name: t.error_code for t in answer.topics}

    with as_user(broker, "admin") as client:
        assert create_topic(client, "paged").error_code == ErrorCode.NONE
    assert "paged" in described("admin", [])
    assert "paged" not in described("bob", [])  # left out of the all-topics answer
    assert described("bob", ["paged", "never-made"]) == {
        "paged": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "never-made": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    create(broker, acl("bob", "paged", AclOperation.DESCRIBE))
    assert described("bob", ["paged"]) == {"paged": ErrorCode.NONE}


def test_creating_topics_needs_create_and_listing_offsets_describe(broker):
    from protocol.messages import ListOffsetsRequest

    with as_user(broker, "alice") as client:
        assert create_topic(client, "alices-own").error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    create(broker, acl("alice", "alices-", AclOperation.CREATE, pattern=ResourcePatternType.PREFIXED))
    with as_user(broker, "alice") as client:
        assert create_topic(client, "alices-own").error_code == ErrorCode.NONE
        assert create_topic(client, "someone-elses").error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name="alices-own", partitions=[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, timestamp=-1, current_leader_epoch=-1)])])
    with as_user(broker, "bob") as client:
        answer = client.request(request, 7).topics[0].partitions[0]
        assert answer.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with as_user(broker, "admin") as client:
        assert client.request(request, 7).topics[0].partitions[0].error_code == ErrorCode.NONE


AUTHORIZATION_ERRORS = {ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                        ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
# Answered whoever asks, as in Kafka: the handshake and SASL itself, and DescribeCluster (only its
# authorized-operations bitset depends on ACLs).
UNCHECKED = {17: "SaslHandshake", 18: "ApiVersions", 36: "SaslAuthenticate", 60: "DescribeCluster"}


def _error_codes(value) -> set[int]:
    if isinstance(value, dict):
        found = {code for key, code in value.items() if key in ("error_code", "partition_error_code")}
        for item in value.values():
            found |= _error_codes(item)
        return found
    if isinstance(value, list):
        return set().union(*(_error_codes(v) for v in value)) if value else set()
    return set()


def _requests_for_every_api():
    from protocol import messages as m

    P = m.ProduceRequest.TopicProduceData  # noqa: N806
    return {
        0: (m.ProduceRequest(acks=1, timeout_ms=1000, topic_data=[P(name="ledger", partition_data=[
            P.PartitionProduceData(index=0, records=batch([b"x"]))])]), 9),
        1: (m.FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1024, topics=[m.FetchRequest.FetchTopic(
            topic="ledger", partitions=[m.FetchRequest.FetchTopic.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=1024)])]), 12),
        2: (m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
            name="ledger", partitions=[m.ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, timestamp=-1)])]), 7),
        3: (m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="ledger")]), 12),
        8: (m.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
            m.OffsetCommitRequest.OffsetCommitRequestTopic(name="ledger", partitions=[
                m.OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1)])]), 8),
        9: (m.OffsetFetchRequest(group_id="g", topics=None), 7),
        10: (m.FindCoordinatorRequest(key="g", key_type=0), 3),
        11: (m.JoinGroupRequest(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                                protocol_type="consumer", protocols=[]), 7),
        12: (m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m"), 4),
        13: (m.LeaveGroupRequest(group_id="g", members=[]), 4),
        14: (m.SyncGroupRequest(group_id="g", generation_id=1, member_id="m", assignments=[]), 4),
        15: (m.DescribeGroupsRequest(groups=["g"]), 5),
        16: (m.ListGroupsRequest(), 4),
        19: (m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
            name="anon-topic", num_partitions=1, replication_factor=1)], timeout_ms=5000), 7),
        20: (m.DeleteTopicsRequest(topic_names=["ledger"], timeout_ms=5000), 5),
        21: (m.DeleteRecordsRequest(topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(name="ledger", partitions=[
            m.DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=1)])],
            timeout_ms=5000), 2),
        22: (m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4),
        24: (m.AddPartitionsToTxnRequest(v3_and_below_transactional_id="t", v3_and_below_producer_id=1,
                                         v3_and_below_producer_epoch=0, v3_and_below_topics=[
            m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="ledger", partitions=[0])]), 3),
        26: (m.EndTxnRequest(transactional_id="t", producer_id=1, producer_epoch=0, committed=True), 3),
        25: (m.AddOffsetsToTxnRequest(transactional_id="t", producer_id=1, producer_epoch=0, group_id="g"), 3),
        27: (m.WriteTxnMarkersRequest(markers=[m.WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0, topics=[
                m.WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(name="ledger",
                                                                                  partition_indexes=[0])])]), 1),
        28: (m.TxnOffsetCommitRequest(transactional_id="t", group_id="g", producer_id=1, producer_epoch=0, topics=[
            m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="ledger", partitions=[
                m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_metadata=None)])]), 3),
        23: (m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic="ledger", partitions=[
                m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=-1, leader_epoch=0)])]), 4),
        29: (m.DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                   principal_filter=None, host_filter=None, operation=1, permission_type=1), 3),
        30: (m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="ledger", resource_pattern_type=3, principal="User:ANONYMOUS",
            host="*", operation=6, permission_type=3)]), 3),
        31: (m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1)]), 3),
        32: (m.DescribeConfigsRequest(resources=[m.DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name="ledger", configuration_keys=None)]), 4),
        33: (m.AlterConfigsRequest(resources=[m.AlterConfigsRequest.AlterConfigsResource(
            resource_type=2, resource_name="ledger", configs=[])]), 2),
        37: (m.CreatePartitionsRequest(topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(
            name="ledger", count=2, assignments=None)], timeout_ms=5000), 3),
        42: (m.DeleteGroupsRequest(groups_names=["g"]), 2),
        44: (m.IncrementalAlterConfigsRequest(resources=[
            m.IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=2, resource_name="ledger",
                                                                  configs=[])]), 1),
        47: (m.OffsetDeleteRequest(group_id="g", topics=[]), 0),
        48: (m.DescribeClientQuotasRequest(components=[], strict=False), 1),
        49: (m.AlterClientQuotasRequest(entries=[m.AlterClientQuotasRequest.EntryData(
            entity=[m.AlterClientQuotasRequest.EntryData.EntityData(entity_type="user", entity_name="alice")],
            ops=[m.AlterClientQuotasRequest.EntryData.OpData(key="producer_byte_rate", value=1024.0,
                                                             remove=False)])], validate_only=False), 1),
        50: (m.DescribeUserScramCredentialsRequest(users=None), 0),
        51: (m.AlterUserScramCredentialsRequest(deletions=[
            m.AlterUserScramCredentialsRequest.ScramCredentialDeletion(name="alice", mechanism=2)],
            upsertions=[]), 0),
        75: (m.DescribeTopicPartitionsRequest(topics=[m.DescribeTopicPartitionsRequest.TopicRequest(
            name="ledger")]), 0),
        35: (m.DescribeLogDirsRequest(topics=None), 4),
        43: (m.ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=5000), 2),
        45: (m.AlterPartitionReassignmentsRequest(timeout_ms=5000, topics=[
            m.AlterPartitionReassignmentsRequest.ReassignableTopic(name="ledger", partitions=[
                m.AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                    partition_index=0, replicas=None)])]), 0),
        46: (m.ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None), 0),
        57: (m.UpdateFeaturesRequest(timeout_ms=5000, feature_updates=[
            m.UpdateFeaturesRequest.FeatureUpdateKey(feature="transaction.version", max_version_level=2,
                                                     upgrade_type=1)], validate_only=True), 1),
        61: (m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(
            name="ledger", partition_indexes=[0])]), 0),
        65: (m.DescribeTransactionsRequest(transactional_ids=["t"]), 0),
        66: (m.ListTransactionsRequest(state_filters=[], producer_id_filters=[]), 0),
        68: (m.ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=1000,
                                             subscribed_topic_names=["ledger"], topic_partitions=[]), 1),
        69: (m.ConsumerGroupDescribeRequest(group_ids=["g"]), 1),
        74: (m.ListConfigResourcesRequest(resource_types=[32]), 1),
        76: (m.ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0,
                                          subscribed_topic_names=["ledger"]), 1),
        77: (m.ShareGroupDescribeRequest(group_ids=["g"]), 1),
        78: (m.ShareFetchRequest(group_id="g", member_id="m", share_session_epoch=0, max_records=10, topics=[]), 1),
        79: (m.ShareAcknowledgeRequest(group_id="g", member_id="m", share_session_epoch=1, topics=[]), 1),
        83: (m.InitializeShareGroupStateRequest(group_id="g", topics=[
            m.InitializeShareGroupStateRequest.InitializeStateData(topic_id=uuid.UUID(int=1), partitions=[
                m.InitializeShareGroupStateRequest.InitializeStateData.PartitionData(
                    partition=0, state_epoch=0, start_offset=0)])]), 0),
        84: (m.ReadShareGroupStateRequest(group_id="g", topics=[m.ReadShareGroupStateRequest.ReadStateData(
            topic_id=uuid.UUID(int=1), partitions=[m.ReadShareGroupStateRequest.ReadStateData.PartitionData(
                partition=0, leader_epoch=0)])]), 0),
        85: (m.WriteShareGroupStateRequest(group_id="g", topics=[m.WriteShareGroupStateRequest.WriteStateData(
            topic_id=uuid.UUID(int=1), partitions=[m.WriteShareGroupStateRequest.WriteStateData.PartitionData(
                partition=0, state_epoch=0, leader_epoch=0, start_offset=0, state_batches=[])])]), 1),
        86: (m.DeleteShareGroupStateRequest(group_id="g", topics=[m.DeleteShareGroupStateRequest.DeleteStateData(
            topic_id=uuid.UUID(int=1), partitions=[m.DeleteShareGroupStateRequest.DeleteStateData.PartitionData(
                partition=0)])]), 0),
        87: (m.ReadShareGroupStateSummaryRequest(group_id="g", topics=[
            m.ReadShareGroupStateSummaryRequest.ReadStateSummaryData(topic_id=uuid.UUID(int=1), partitions=[
                m.ReadShareGroupStateSummaryRequest.ReadStateSummaryData.PartitionData(partition=0, leader_epoch=0)])]),
             1),
        90: (m.DescribeShareGroupOffsetsRequest(groups=[
            m.DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id="g", topics=None)]), 1),
        91: (m.AlterShareGroupOffsetsRequest(group_id="g", topics=[]), 0),
        92: (m.DeleteShareGroupOffsetsRequest(group_id="g", topics=[]), 0),
        10000: (m.DescribeErasureRequest(topics=[m.DescribeErasureRequest.TopicRequest(
            name="ledger", partition_indexes=[0])]), 0),
    }


def test_no_api_serves_a_client_without_its_acl(broker):
    """User:ANONYMOUS (the PLAINTEXT listener) with no ACLs and allow.everyone.if.no.acl.found=false: every
    API Ebb serves answers with an authorization error, or (ListGroups, OffsetFetch of all topics) with
    nothing, except those Kafka also answers for anyone."""
    from broker.handlers import load_handlers

    requests = _requests_for_every_api()
    served = set(load_handlers())
    assert served - set(requests) - set(UNCHECKED) == set(), "a served API has no row in this test"
    with WireClient(broker.port) as client:
        for key, (request, version) in sorted(requests.items()):
            answer = client.request(request, version).to_dict()
            codes = _error_codes(answer)
            if key == 16:  # ListGroups lists only what one may DESCRIBE
                assert answer["groups"] == [], answer
            elif key == 66:  # so does ListTransactions (Kafka answers no error, only the ids one may describe)
                assert answer["transaction_states"] == [] and answer["error_code"] == ErrorCode.NONE, answer
            else:
                assert codes & AUTHORIZATION_ERRORS, (key, answer)


def test_authorized_operations_follow_the_acls(broker):
    from protocol.messages import MetadataRequest

    create(broker, acl("alice", "bits", AclOperation.READ))
    with as_user(broker, "admin") as client:
        assert create_topic(client, "bits").error_code == ErrorCode.NONE
    with as_user(broker, "alice") as client:
        answer = client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="bits")],
                                                include_topic_authorized_operations=True,
                                                include_cluster_authorized_operations=True), 10)
    [topic] = answer.topics
    assert topic.topic_authorized_operations == (1 << 3) | (1 << 8)  # READ, and DESCRIBE which READ implies
    assert answer.cluster_authorized_operations == 0


def test_ebb_acls_adds_lists_and_removes(tmp_path):
    """`ebb acls` with kafka-acls' flags, against a broker whose PLAINTEXT clients are the super user."""
    import json
    import subprocess
    import sys

    settings = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}
    with BrokerProcess(tmp_path, settings) as plain:
        def ebb(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "broker.cli", "acls", *args, "--bootstrap-server",
                                   plain.bootstrap, "--output", "json"], capture_output=True, text=True, timeout=30)

        added = ebb("--add", "--allow-principal", "User:alice", "--operation", "Delete", "--operation", "Read",
                    "--topic", "orders")
        assert added.returncode == 0, added.stderr
        denied = ebb("--add", "--deny-principal", "User:bob", "--operation", "All", "--topic", "orders-",
                     "--resource-pattern-type", "prefixed")
        assert denied.returncode == 0, denied.stderr
        listed = json.loads(ebb("--list", "--topic", "orders").stdout)["acls"]
        assert sorted((a["principal"], a["operation"], a["permission"]) for a in listed) == [
            ("User:alice", "delete", "allow"), ("User:alice", "read", "allow")]
        everything = json.loads(ebb("--list").stdout)["acls"]
        assert {(a["name"], a["pattern"]) for a in everything} == {("orders", "literal"), ("orders-", "prefixed")}
        removed = json.loads(ebb("--remove", "--allow-principal", "User:alice", "--topic", "orders").stdout)["acls"]
        assert len(removed) == 2
        assert {a["name"] for a in json.loads(ebb("--list").stdout)["acls"]} == {"orders-"}
        bad = ebb("--add", "--topic", "orders")
        assert bad.returncode == 2 and "--add needs" in bad.stderr
