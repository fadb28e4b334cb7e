"""CreateTopics (v2-7), DeleteTopics (v1-6) and CreatePartitions (v0-3) over the wire, every error path,
and topics surviving SIGTERM and SIGKILL restarts."""

import signal
import uuid

import pytest

from protocol.errors import ErrorCode
from protocol.messages import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest
from tests.broker.wire_client import WireClient, create_topic, metadata
from tests.support.broker_process import BrokerProcess

ZERO = uuid.UUID(int=0)
CreatableTopic = CreateTopicsRequest.CreatableTopic
Assignment = CreateTopicsRequest.CreatableTopic.CreatableReplicaAssignment
TopicConfig = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig
DeleteState = DeleteTopicsRequest.DeleteTopicState
PartitionsTopic = CreatePartitionsRequest.CreatePartitionsTopic
PartitionsAssignment = CreatePartitionsRequest.CreatePartitionsTopic.CreatePartitionsAssignment


@pytest.fixture(scope="module")
def broker_overrides():
    return {"num.partitions": "3"}


@pytest.fixture(scope="module")
def client(broker):
    with WireClient(broker.port) as c:
        yield c


def _topic(name, partitions=1, rf=1, assignments=(), configs=None):
    return CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf,
                          assignments=[Assignment(partition_index=p, broker_ids=list(b)) for p, b in assignments],
                          configs=[TopicConfig(name=k, value=v) for k, v in (configs or {}).items()])


def _create(client, topics, version=7, validate_only=False):
    return client.send(CreateTopicsRequest(topics=topics, timeout_ms=10_000, validate_only=validate_only),
                       version).topics


def _described(client, name):
    return next(t for t in metadata(client, [name]).topics if t.name == name)


def _exists(client, name) -> bool:
    return _described(client, name).error_code == ErrorCode.NONE


# --- CreateTopics ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topic(client, version):
    name = f"created-v{version}"
    [result] = _create(client, [_topic(name, 2, configs={"retention.ms": "1000"})], version)
    assert (result.name, result.error_code) == (name, ErrorCode.NONE)
    described = _described(client, name)
    assert [p.partition_index for p in described.partitions] == [0, 1]
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (2, 1)
        configs = {c.name: c for c in result.configs}
        assert configs["retention.ms"].value == "1000" and configs["retention.ms"].config_source == 1
        assert configs["segment.bytes"].value == str(1 << 30) and configs["segment.bytes"].config_source == 5
        assert configs["min.insync.replicas"].value == "1"
        assert not any(c.read_only or c.is_sensitive for c in result.configs)
    if version >= 7:
        assert result.topic_id == described.topic_id != ZERO


@pytest.mark.parametrize("version", range(2, 8))
def test_minus_one_takes_the_broker_defaults_in_every_version(client, version):
    name = f"defaults-v{version}"
    [result] = _create(client, [_topic(name, -1, -1)], version)
    assert result.error_code == ErrorCode.NONE
    assert len(_described(client, name).partitions) == 3  # num.partitions=3
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (3, 1)


@pytest.mark.parametrize("version", range(2, 8))
def test_validate_only_creates_nothing(client, version):
    name = f"validated-v{version}"
    [result] = _create(client, [_topic(name, 4, configs={"cleanup.policy": "compact"})], version, validate_only=True)
    assert result.error_code == ErrorCode.NONE
    if version >= 5:
        assert result.num_partitions == 4
        assert {c.name: c.value for c in result.configs}["cleanup.policy"] == "compact"
    assert not _exists(client, name)
    [bad] = _create(client, [_topic(name, 0)], version, validate_only=True)
    assert bad.error_code == ErrorCode.INVALID_PARTITIONS


def test_explicit_assignment(client):
    [result] = _create(client, [_topic("assigned", -1, -1, assignments=[(1, [1]), (0, [1])])])
    assert result.error_code == ErrorCode.NONE and result.num_partitions == 2
    assert [p.replica_nodes for p in _described(client, "assigned").partitions] == [[1], [1]]


CREATE_ERRORS = [
    # (topic, expected error)
    (_topic("exists"), ErrorCode.TOPIC_ALREADY_EXISTS),
    (_topic("bad name!"), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (_topic(""), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (_topic(".."), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (_topic("x" * 250), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (_topic("coll_a"), ErrorCode.INVALID_TOPIC_EXCEPTION),  # collides with coll.a ('.' and '_')
    (_topic("p0", 0), ErrorCode.INVALID_PARTITIONS),
    (_topic("p-2", -2), ErrorCode.INVALID_PARTITIONS),
    (_topic("rf0", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
    (_topic("rf-2", 1, -2), ErrorCode.INVALID_REPLICATION_FACTOR),
    (_topic("rf2", 1, 2), ErrorCode.INVALID_REPLICATION_FACTOR),
    (_topic("cfg-unknown", configs={"no.such.config": "1"}), ErrorCode.INVALID_CONFIG),
    (_topic("cfg-type", configs={"retention.ms": "abc"}), ErrorCode.INVALID_CONFIG),
    (_topic("cfg-null", configs={"retention.ms": None}), ErrorCode.INVALID_CONFIG),
    (_topic("cfg-policy", configs={"cleanup.policy": "shred"}), ErrorCode.INVALID_CONFIG),
    (_topic("cfg-range", configs={"min.cleanable.dirty.ratio": "2"}), ErrorCode.INVALID_CONFIG),
    (_topic("cfg-int", configs={"segment.bytes": str(2**31)}), ErrorCode.INVALID_CONFIG),
    (_topic("cfg-small", configs={"segment.bytes": "10"}), ErrorCode.INVALID_CONFIG),
    (_topic("cfg-remote", configs={"remote.storage.enable": "true"}), ErrorCode.INVALID_CONFIG),
    (_topic("cfg-enum", configs={"compression.type": "brotli"}), ErrorCode.INVALID_CONFIG),
    (_topic("cfg-bool", configs={"preallocate": "yes"}), ErrorCode.INVALID_CONFIG),
    (_topic("asg-count", 2, -1, assignments=[(0, [1])]), ErrorCode.INVALID_REQUEST),
    (_topic("asg-rf", -1, 1, assignments=[(0, [1])]), ErrorCode.INVALID_REQUEST),
    (_topic("asg-gap", -1, -1, assignments=[(0, [1]), (2, [1])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (_topic("asg-dup-partition", -1, -1, assignments=[(0, [1]), (0, [1])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (_topic("asg-broker", -1, -1, assignments=[(0, [2])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (_topic("asg-twice", -1, -1, assignments=[(0, [1, 1])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (_topic("asg-empty", -1, -1, assignments=[(0, [])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
]


@pytest.mark.parametrize("version", range(2, 8))
def test_create_errors(client, version):
    for name in ("exists", "coll.a"):
        assert create_topic(client, name).error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
    results = _create(client, [t for t, _ in CREATE_ERRORS], version)
    assert [(r.name, r.error_code) for r in results] == [(t.name, e) for t, e in CREATE_ERRORS]
    for result, (topic, _) in zip(results, CREATE_ERRORS, strict=True):
        assert result.error_message, topic.name
        assert result.topic_id == ZERO
        if topic.name not in ("exists", ""):
            assert not _exists(client, topic.name) or topic.name == "coll_a"


def test_duplicate_names_fail_once_and_are_not_created(client):
    results = _create(client, [_topic("twice"), _topic("once"), _topic("twice")])
    assert [(r.name, r.error_code) for r in results] == [("once", ErrorCode.NONE),
                                                         ("twice", ErrorCode.INVALID_REQUEST)]
    assert not _exists(client, "twice") and _exists(client, "once")


def test_too_many_partitions_in_one_request_is_policy_violation(client):
    results = _create(client, [_topic("huge-a", 6000), _topic("huge-b", 5000)])
    assert {r.error_code for r in results} == {ErrorCode.POLICY_VIOLATION}
    assert not _exists(client, "huge-a")


def test_created_topic_has_its_logs(broker, client):
    assert _create(client, [_topic("with-logs", 2)])[0].error_code == ErrorCode.NONE
    logs = broker.data_dir / "logs"
    assert (logs / "with-logs-0").is_dir() and (logs / "with-logs-1").is_dir()
    assert (logs / "with-logs-0" / "partition.metadata").exists()


# --- DeleteTopics ---------------------------------------------------------------------------------


def _delete_names(client, names, version):
    if version >= 6:
        request = DeleteTopicsRequest(topics=[DeleteState(name=n, topic_id=ZERO) for n in names], timeout_ms=5000)
    else:
        request = DeleteTopicsRequest(topic_names=list(names), timeout_ms=5000)
    return client.send(request, version).responses


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_by_name(broker, client, version):
    name = f"doomed-v{version}"
    created = create_topic(client, name, 2)
    [result] = _delete_names(client, [name], version)
    assert (result.name, result.error_code) == (name, ErrorCode.NONE)
    if version >= 5:
        assert result.error_message is None
    if version >= 6:
        assert result.topic_id == created.topic_id
    assert not _exists(client, name)
    logs = broker.data_dir / "logs"
    assert not (logs / f"{name}-0").exists()  # renamed <topic>-<p>.<uuid>-delete, removed later
    again = create_topic(client, name)
    assert again.error_code == ErrorCode.NONE and again.topic_id != created.topic_id


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_unknown_name(client, version):
    [result] = _delete_names(client, ["never-existed"], version)
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if version >= 5:
        assert result.error_message


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_duplicate_name_fails_once(client, version):
    name = f"dup-delete-v{version}"
    create_topic(client, name)
    results = _delete_names(client, [name, name], version)
    assert [(r.name, r.error_code) for r in results] == [(name, ErrorCode.INVALID_REQUEST)]
    assert _exists(client, name)


@pytest.mark.parametrize("version", range(1, 7))
def test_internal_topics_cannot_be_deleted(client, version):
    assert create_topic(client, "__transaction_state").error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
    [result] = _delete_names(client, ["__transaction_state"], version)
    assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert _exists(client, "__transaction_state")


def test_delete_by_topic_id_v6(client):
    created = create_topic(client, "by-id", 1)
    unknown = uuid.uuid4()
    results = client.send(DeleteTopicsRequest(topics=[DeleteState(name=None, topic_id=created.topic_id),
                                                      DeleteState(name=None, topic_id=unknown)],
                                              timeout_ms=5000), 6).responses
    assert [(r.name, r.topic_id, r.error_code) for r in results] == [
        ("by-id", created.topic_id, ErrorCode.NONE), (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID)]
    assert not _exists(client, "by-id")


def test_delete_v6_invalid_rows(client):
    a = create_topic(client, "v6-a")
    b = create_topic(client, "v6-b")
    c = create_topic(client, "v6-c")
    rows = [
        DeleteState(name=None, topic_id=ZERO),  # neither
        DeleteState(name="v6-a", topic_id=a.topic_id),  # both
        DeleteState(name=None, topic_id=b.topic_id), DeleteState(name=None, topic_id=b.topic_id),  # id twice
        DeleteState(name=None, topic_id=c.topic_id), DeleteState(name="v6-c", topic_id=ZERO),  # name of given id
    ]
    results = client.send(DeleteTopicsRequest(topics=rows, timeout_ms=5000), 6).responses
    assert [(r.name, r.topic_id, r.error_code) for r in results] == [
        (None, ZERO, ErrorCode.INVALID_REQUEST),
        ("v6-a", a.topic_id, ErrorCode.INVALID_REQUEST),
        (None, b.topic_id, ErrorCode.INVALID_REQUEST),
        ("v6-c", c.topic_id, ErrorCode.NONE),
        ("v6-c", c.topic_id, ErrorCode.INVALID_REQUEST),
    ]
    assert all(r.error_message for r in results if r.error_code)
    assert _exists(client, "v6-a") and _exists(client, "v6-b") and not _exists(client, "v6-c")


@pytest.fixture(scope="module")
def no_delete_client(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("no-delete"), {"delete.topic.enable": "false"}) as broker, \
            WireClient(broker.port) as client:
        create_topic(client, "kept")
        yield client


@pytest.mark.parametrize("version, error", [(v, ErrorCode.INVALID_REQUEST) for v in (1, 2)]
                         + [(v, ErrorCode.TOPIC_DELETION_DISABLED) for v in (3, 4, 5, 6)])
def test_delete_disabled(no_delete_client, version, error):
    [result] = _delete_names(no_delete_client, ["kept"], version)
    assert result.error_code == error and result.name == "kept"
    assert _exists(no_delete_client, "kept")


# --- CreatePartitions -----------------------------------------------------------------------------


def _grow(client, version, *topics, validate_only=False):
    return client.send(CreatePartitionsRequest(topics=list(topics), timeout_ms=5000, validate_only=validate_only),
                       version).results


def _assigned(*lists):
    return [PartitionsAssignment(broker_ids=list(b)) for b in lists]


@pytest.mark.parametrize("version", range(4))
def test_create_partitions(broker, client, version):
    name = f"growing-v{version}"
    create_topic(client, name, 1)
    [result] = _grow(client, version, PartitionsTopic(name=name, count=3, assignments=None))
    assert (result.name, result.error_code, result.error_message) == (name, ErrorCode.NONE, None)
    assert [p.partition_index for p in _described(client, name).partitions] == [0, 1, 2]
    assert (broker.data_dir / "logs" / f"{name}-2").is_dir()
    [explicit] = _grow(client, version, PartitionsTopic(name=name, count=4, assignments=_assigned([1])))
    assert explicit.error_code == ErrorCode.NONE and len(_described(client, name).partitions) == 4
    [checked] = _grow(client, version, PartitionsTopic(name=name, count=9, assignments=None), validate_only=True)
    assert checked.error_code == ErrorCode.NONE and len(_described(client, name).partitions) == 4


def test_create_partitions_errors(client):
    create_topic(client, "two", 2)
    create_topic(client, "twin", 1)
    create_topic(client, "__transaction_state")
    cases = [
        (PartitionsTopic(name="two", count=2, assignments=None), ErrorCode.INVALID_PARTITIONS),
        (PartitionsTopic(name="two", count=1, assignments=None), ErrorCode.INVALID_PARTITIONS),
        (PartitionsTopic(name="missing", count=3, assignments=None), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (PartitionsTopic(name="two", count=4, assignments=_assigned([1])), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (PartitionsTopic(name="two", count=3, assignments=_assigned([2])), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (PartitionsTopic(name="two", count=3, assignments=_assigned([1, 1])), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (PartitionsTopic(name="two", count=3, assignments=_assigned([])), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (PartitionsTopic(name="two", count=20_000, assignments=None), ErrorCode.POLICY_VIOLATION),
        (PartitionsTopic(name="__transaction_state", count=5, assignments=None), ErrorCode.INVALID_REQUEST),
    ]
    for version in range(4):
        for topic, error in cases:  # one request each: a topic named twice in one request is itself an error
            [result] = _grow(client, version, topic)
            assert (result.name, result.error_code) == (topic.name, error)
            assert result.error_message
    results = _grow(client, 3, PartitionsTopic(name="twin", count=2, assignments=None),
                    PartitionsTopic(name="twin", count=3, assignments=None))
    assert [(r.name, r.error_code) for r in results] == [("twin", ErrorCode.INVALID_REQUEST)]
    assert len(_described(client, "two").partitions) == 2 and len(_described(client, "twin").partitions) == 1


# --- restarts -------------------------------------------------------------------------------------


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_topics_survive_a_restart(tmp_path, stop):
    with BrokerProcess(tmp_path) as broker:
        with WireClient(broker.port) as client:
            kept = create_topic(client, "kept", 2, configs={"retention.ms": "3600000", "cleanup.policy": "compact"})
            assert _grow(client, 3, PartitionsTopic(name="kept", count=3, assignments=None))[0].error_code == 0
            gone = create_topic(client, "gone")
            assert _delete_names(client, ["gone"], 6)[0].error_code == ErrorCode.NONE
        broker.restart(stop)
        with WireClient(broker.port) as client:
            described = _described(client, "kept")
            assert described.topic_id == kept.topic_id
            assert [p.partition_index for p in described.partitions] == [0, 1, 2]
            assert not _exists(client, "gone")
            recreated = create_topic(client, "gone")
            assert recreated.error_code == ErrorCode.NONE and recreated.topic_id != gone.topic_id
