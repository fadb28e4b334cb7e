"""The metadata store's layout (broker/cluster/layout.py) reads and writes the nodes as Kafka's
ZooKeeper layout has them."""

import json
import uuid

import pytest

from broker.cluster.layout import (
    NO_CONTROLLER,
    AclResourceZNode,
    BrokerIdZNode,
    BrokerRegistration,
    ConfigEntityZNode,
    ConfigType,
    ControllerEpochZNode,
    ControllerZNode,
    PartitionStateZNode,
    TopicAssignment,
    TopicZNode,
    desanitized,
    topic_paths,
)
from broker.cluster.partition_state import PartitionState
from broker.security.acls import Acl
from protocol.enums import Operation, PatternType, Permission, ResourceType


def test_partition_state_is_kafkas_json():
    written_by_kafka = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2,1]}'
    state = PartitionStateZNode.decode(written_by_kafka)
    assert state == PartitionState(leader=2, leader_epoch=7, isr=(2, 1), controller_epoch=3)
    assert json.loads(PartitionStateZNode.encode(state)) == json.loads(written_by_kafka)
    assert PartitionStateZNode.path("t", 4) == "/brokers/topics/t/partitions/4/state"


def test_a_new_partition_is_led_by_its_first_replica():
    assert PartitionState.initial([3, 1, 2]) == PartitionState(leader=3, leader_epoch=0, isr=(3, 1, 2),
                                                               controller_epoch=1)


def test_topic_nodes_are_kafkas():
    topic_id = uuid.UUID("8d4f7f6e-1b2c-4d3e-9f00-112233445566")
    node = json.loads(TopicZNode.encode(TopicAssignment(topic_id, {1: [2, 3], 0: [1, 2]})))
    assert node == {"version": 3, "topic_id": "jU9_bhssTT6fABEiM0RVZg", "partitions": {"0": [1, 2], "1": [2, 3]},
                    "adding_replicas": {}, "removing_replicas": {}}
    one = TopicAssignment(topic_id, {0: [1]})
    assert TopicZNode.decode(TopicZNode.encode(one)) == one
    assert topic_paths("t") == ("/brokers/topics/t", "/config/topics/t", "/admin/delete_topics/t")
    assert ConfigEntityZNode.decode(b'{"version":1,"config":{"retention.ms":"1"}}') == {"retention.ms": "1"}


def test_a_reassignment_is_kept_in_the_topic_node_as_kafka_kept_it():
    topic_id = uuid.uuid4()
    moving = TopicAssignment(topic_id, {0: [2, 3, 1], 1: [1, 2]}, adding={0: [3]}, removing={0: [1]})
    node = json.loads(TopicZNode.encode(moving))
    assert (node["partitions"], node["adding_replicas"], node["removing_replicas"]) == (
        {"0": [2, 3, 1], "1": [1, 2]}, {"0": [3]}, {"0": [1]})
    assert TopicZNode.decode(TopicZNode.encode(moving)) == moving


def test_user_names_are_url_encoded_as_kafkas_sanitizer_does():
    path = ConfigEntityZNode.path(ConfigType.USER, "alice@example.com/x y")
    assert path == "/config/users/alice%40example.com%2Fx%20y"
    assert desanitized(path.rsplit("/", 1)[1]) == "alice@example.com/x y"


def test_the_names_dot_and_dot_dot_get_nodes_zookeeper_takes_and_other_names_keep_theirs():
    """ZooKeeper refuses "." and ".." as path elements (relative paths); Kafka accepts them as names."""
    for name, child in ((".", "%2E"), ("..", "%2E%2E"), ("...", "..."), ("a.b", "a.b"), (".a", ".a")):
        path = ConfigEntityZNode.path(ConfigType.GROUP, name)
        assert path == f"/config/groups/{child}"
        assert desanitized(path.rsplit("/", 1)[1]) == name


def test_broker_and_controller_nodes():
    registration = BrokerRegistration("h", 9092, None, ("PLAINTEXT://h:9092",), {"PLAINTEXT": "PLAINTEXT"}, "17")
    node = json.loads(BrokerIdZNode.encode(registration))
    assert (node["version"], node["listener_security_protocol_map"]) == (5, {"PLAINTEXT": "PLAINTEXT"})
    assert BrokerIdZNode.decode(BrokerIdZNode.encode(registration)) == registration
    with pytest.raises(ValueError):
        BrokerIdZNode.decode(b'{"version": 5}')
    # the supported features, as Kafka's ZooKeeper-era brokers registered them; absent: an older Ebb
    advertising = BrokerRegistration("h", 9092, None, (), {}, "17", {"transaction.version": (0, 2)})
    assert json.loads(BrokerIdZNode.encode(advertising))["features"] == {
        "transaction.version": {"min_version": 0, "max_version": 2}}
    assert BrokerIdZNode.decode(BrokerIdZNode.encode(advertising)) == advertising
    assert "features" not in json.loads(BrokerIdZNode.encode(registration)) and registration.features is None
    assert ControllerZNode.decode(b'{"version":1,"brokerid":3,"timestamp":"1"}') == 3
    assert ControllerZNode.decode(None) == ControllerZNode.decode(b"junk") == NO_CONTROLLER
    assert ControllerEpochZNode.decode(ControllerEpochZNode.encode(12)) == 12


def test_acl_nodes_are_kafkas():
    acl = Acl(ResourceType.TOPIC, "a/b", PatternType.PREFIXED, "User:alice", "*", Operation.READ, Permission.ALLOW)
    assert AclResourceZNode.path(PatternType.PREFIXED, ResourceType.TOPIC, "a/b") == \
        "/kafka-acl-extended/prefixed/Topic/a%2Fb"
    assert json.loads(AclResourceZNode.encode([acl])) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    assert AclResourceZNode.decode(AclResourceZNode.encode([acl]), PatternType.PREFIXED, ResourceType.TOPIC,
                                   "a/b") == [acl]
