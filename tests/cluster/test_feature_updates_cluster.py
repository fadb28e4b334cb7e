"""UpdateFeatures on two Ebb brokers on ZooKeeper, with Kafka's Java transactional producer running:
the request sent to the broker that is not the controller is forwarded, the controller writes
`/feature`, and both brokers follow it without a restart (ApiVersions' level and epoch).

Producers in flight at the change keep the transactions version they began with, as with Kafka (the
producer decides it at each transaction's end from the brokers' ApiVersions; the coordinator ends a
transaction by the EndTxn version it is asked with, and the leaders check markers by their own
version): a version 1 transaction open during an upgrade 1 -> 2 commits, a new producer then runs
version 2; a version 2 transaction open during a downgrade 2 -> 1 commits, and a new producer runs
version 1. A read_committed consumer then finds exactly the committed records.

group.version disabled on the broker that is not the controller turns KIP-848 heartbeats and describes
into UNSUPPORTED_VERSION on both brokers at once; raised again, both serve them."""

from __future__ import annotations

import contextlib
import json
import subprocess
import uuid

import pytest

from protocol.errors import ErrorCode
from protocol.messages import (
    ApiVersionsRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    CreateTopicsRequest,
    UpdateFeaturesRequest,
)
from tests.broker.data_wire import WireClient
from tests.cluster.three_brokers import broker_ids, metadata_of, overrides
from tests.interop.conftest import java  # noqa: F401 - the fixture that builds and runs the Java driver
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(300)

TV = "transaction.version"
TOPIC = "tv-live"
SETTINGS = {"ebb.transaction.version": "1", "default.replication.factor": "2",
            "offsets.topic.replication.factor": "2", "transaction.state.log.replication.factor": "2",
            "transaction.state.log.num.partitions": "2", "transaction.state.log.min.isr": "1"}


@pytest.fixture(scope="module")
def brokers(zk_server, tmp_path_factory):
    connect = f"{zk_server.connect}/features-{uuid.uuid4().hex[:12]}"
    root = tmp_path_factory.mktemp("features-cluster")
    with contextlib.ExitStack() as stack:
        cluster = {n: stack.enter_context(BrokerProcess(root / f"broker-{n}", {**overrides(connect, n), **SETTINGS}))
                   for n in (1, 2)}
        wait_for(lambda: all(len(broker_ids(b)) == 2 for b in cluster.values()), what="both brokers registered")
        _create(cluster[1])
        yield cluster


def _create(broker: BrokerProcess) -> None:
    """Two partitions led by different brokers: markers go both locally and by WriteTxnMarkers."""
    Topic = CreateTopicsRequest.CreatableTopic
    topic = Topic(name=TOPIC, num_partitions=-1, replication_factor=-1, configs=[], assignments=[
        Topic.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2]),
        Topic.CreatableReplicaAssignment(partition_index=1, broker_ids=[2, 1])])
    with WireClient(broker.port) as client:
        [created] = client.request(CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 7).topics
    assert created.error_code == ErrorCode.NONE, created.error_message


def _finalized(broker: BrokerProcess, feature: str = TV) -> tuple[int, int]:
    with WireClient(broker.port) as client:
        answer = client.send(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    return next((f.max_version_level for f in answer.finalized_features if f.name == feature), 0), \
        answer.finalized_features_epoch


def _change(brokers, via: BrokerProcess, level: int, upgrade_type: int, feature: str = TV) -> None:
    epochs = {n: _finalized(b)[1] for n, b in brokers.items()}
    with WireClient(via.port) as client:
        answer = client.send(UpdateFeaturesRequest(timeout_ms=30_000, feature_updates=[
            UpdateFeaturesRequest.FeatureUpdateKey(feature=feature, max_version_level=level,
                                                   upgrade_type=upgrade_type)]), 2)
    assert (answer.error_code, answer.error_message) == (ErrorCode.NONE, None)
    for n, broker in brokers.items():  # followed by each broker, at a newer epoch
        wait_for(lambda b=broker, n=n: (lambda f: f[0] == level and f[1] > epochs[n])(_finalized(b, feature)),
                 what=f"broker {n} following {feature}={level}")


class Steps:
    def __init__(self, process: subprocess.Popen):
        self.process = process

    def __call__(self, command: str) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        assert "error" not in answer, (command, answer)
        return answer


def test_producers_in_flight_keep_their_version_and_new_ones_follow_the_change(brokers, java, tmp_path):  # noqa: F811
    assert {_finalized(b)[0] for b in brokers.values()} == {1}
    controller = metadata_of(brokers[1]).controller_id
    other = brokers[1 if controller == 2 else 2]
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    with open(tmp_path / "java.err", "w") as stderr:
        process = subprocess.Popen(java.command("ebb.interop.TxnSteps", bootstrap, TOPIC, "tv-live-txn"),
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
    step = Steps(process)
    try:
        assert step("open")["v2"] is False
        step("begin a 6")  # a version 1 transaction, open while the level goes up
        _change(brokers, other, 2, 1)  # forwarded to the controller
        assert step("commit")
        assert step("open")["v2"] is True  # a new producer connects and sees level 2
        step("begin b 6")
        assert step("commit")["v2"] is True
        step("begin c 6")  # a version 2 transaction, open while the level goes down
        _change(brokers, brokers[controller], 1, 2)
        step("commit")
        assert step("open")["v2"] is False
        step("begin d 6")
        step("commit")
        step("begin e 4")
        step("abort")
        values = step("read 24")["values"]
        assert values == sorted(f"{label}-{i}" for label in "abcd" for i in range(6)), values
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=60)


def _group_answers(broker: BrokerProcess) -> tuple[int, int]:
    """ConsumerGroupHeartbeat's and ConsumerGroupDescribe's error codes on `broker`."""
    with WireClient(broker.port) as client:
        beat = client.send(ConsumerGroupHeartbeatRequest(
            group_id="gv-live", member_id="gv-live-member-00000001", member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=[TOPIC], topic_partitions=[]), 1)
        described = client.send(ConsumerGroupDescribeRequest(group_ids=["gv-live"]), 1)
    return beat.error_code, described.groups[0].error_code


def test_group_version_changes_reach_every_broker_at_once(brokers):
    assert {_finalized(b, "group.version")[0] for b in brokers.values()} == {1}
    controller = metadata_of(brokers[1]).controller_id
    other = brokers[1 if controller == 2 else 2]
    off = (ErrorCode.UNSUPPORTED_VERSION, ErrorCode.UNSUPPORTED_VERSION)
    assert off not in {_group_answers(b) for b in brokers.values()}
    _change(brokers, other, 0, 2, "group.version")  # forwarded to the controller
    assert {_group_answers(b) for b in brokers.values()} == {off}
    _change(brokers, brokers[controller], 1, 1, "group.version")
    assert all(ErrorCode.UNSUPPORTED_VERSION not in _group_answers(b) for b in brokers.values())
