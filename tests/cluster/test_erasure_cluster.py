"""Physical erasure on three replicas (ZooKeeper cluster): each replica rewrites its own segment once
its log start offset moves (followers learn it through Fetch), so after a delete in the middle of a
segment configured at 1 GiB no deleted value is in any file of any replica's partition directory within
`erasure.max.delay.ms`; DescribeErasure answers each replica's offsets from its own broker;
`ebb delete-records --wait-erased` waits for the alive replicas, and a replica that was down erases on
its own once it is back.

Sharing these brokers (a cluster is costly to start): a client quota set through one broker is kept at
Kafka's ZooKeeper path with a change notification, and every other broker describes and enforces it;
removed through another, it stops holding the client back everywhere."""

from __future__ import annotations

import json
import os
import time

import pytest
from kazoo.client import KazooClient

from protocol.errors import ErrorCode
from protocol.messages import AlterClientQuotasRequest as Alter
from protocol.messages import DescribeClientQuotasRequest as Describe
from tests.broker.data_wire import WireClient, batch, delete_records, fetch, produce, produce_request, values
from tests.cluster.reassignments import moved, reassign
from tests.cluster.three_brokers import in_sync, leader_of, new_topic, partition_state, three_brokers
from tests.support.ebb_cli import ebb
from tests.support.erasure import GIB, describe_erasure, partition_dir, produce_values, value, values_on_disk
from tests.support.polling import wait_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.alone]
BOUND_MS = 3000


@pytest.fixture(scope="module")
def cluster(zk_server, tmp_path_factory):
    with three_brokers(f"{zk_server.connect}/erasure", tmp_path_factory.mktemp("erasure"),
                       extra={"auto.leader.rebalance.enable": "false"}) as brokers:
        yield brokers


def dirs(cluster, topic: str):
    return {n: partition_dir(b.data_dir, topic) for n, b in cluster.items()}


def test_a_delete_is_erased_on_every_replica_within_the_bound(cluster) -> None:
    topic = new_topic(cluster, prefix="erased", configs={"segment.bytes": GIB, "erasure.max.delay.ms": str(BOUND_MS)})
    leader = leader_of(cluster, topic)
    with WireClient(leader.port) as client:
        produce_values(client, topic, 300, per_batch=5)
        wait_for(lambda: all(values_on_disk(d, range(300)) == set(range(300)) for d in dirs(cluster, topic).values()),
                 what="every replica holding every value")
        assert delete_records(client, topic, 0, 152).error_code == ErrorCode.NONE  # all replicas' starts moved
        deleted = time.monotonic()
        wait_for(lambda: not any(values_on_disk(d, range(150)) for d in dirs(cluster, topic).values()),
                 timeout_s=BOUND_MS / 1000 * 3, what="the deleted values gone from every replica's files")
        took = time.monotonic() - deleted
        assert took < BOUND_MS / 1000, f"erased on three replicas after {took:.2f}s, bound {BOUND_MS} ms"
        assert values(fetch(client, topic, 0, 152, partition_max_bytes=1 << 22), 152) == \
            [value(i) for i in range(152, 300)]
    for node, directory in dirs(cluster, topic).items():
        assert values_on_disk(directory, range(150, 300)) == set(range(150, 300)), node
        with WireClient(cluster[node].port) as client:
            broker_id, answer = describe_erasure(client, topic)
        assert (broker_id, answer.error_code, answer.log_start_offset, answer.erased_offset,
                answer.erasable_offset, answer.max_delay_ms) == (node, ErrorCode.NONE, 152, 150, 150, BOUND_MS)


def test_wait_erased_waits_for_the_alive_replicas_and_a_returning_one_erases_itself(cluster) -> None:
    topic = new_topic(cluster, prefix="waited", configs={"segment.bytes": GIB, "erasure.max.delay.ms": "1000"})
    leader = leader_of(cluster, topic)
    away = next(b for b in cluster.values() if b is not leader)
    with WireClient(leader.port) as client:
        produce_values(client, topic, 100, per_batch=4)
    wait_for(lambda: values_on_disk(partition_dir(away.data_dir, topic), range(100)) == set(range(100)),
             what="the follower holding every value")
    away.stop()
    wait_for(lambda: not in_sync(leader, topic, 0), what="the ISR without the stopped follower")
    done = ebb("delete-records", "--bootstrap-server", leader.bootstrap, "--topic", topic, "--before-offset", 40,
               "--wait-erased")
    assert done.returncode == 0, done.stderr
    assert "erased on every alive replica" in done.stdout
    alive = [b for b in cluster.values() if b is not away]
    assert not any(values_on_disk(partition_dir(b.data_dir, topic), range(40)) for b in alive)
    assert values_on_disk(partition_dir(away.data_dir, topic), range(40)) == set(range(40))  # it was down
    shown = json.loads(ebb("offsets", "--bootstrap-server", leader.bootstrap, "--topic", topic, "--erased",
                           "--output", "json").stdout)
    replicas = {r["broker"]: r for r in shown["partitions"][0]["replicas"]}
    assert replicas[away_id(cluster, away)]["error"].startswith("BROKER_NOT_AVAILABLE")
    assert all(replicas[n]["erased_offset"] == 40 for n in replicas if n != away_id(cluster, away))
    away.start()
    wait_for(lambda: not values_on_disk(partition_dir(away.data_dir, topic), range(40)), timeout_s=60,
             what="the returning follower erasing on its own")
    wait_for(lambda: in_sync(leader, topic, 0), timeout_s=60, what="the follower back in the ISR")
    with WireClient(away.port) as client:
        _, answer = describe_erasure(client, topic)
    assert (answer.log_start_offset, answer.erased_offset) == (40, 40)


def away_id(cluster, broker) -> int:
    return next(n for n, b in cluster.items() if b is broker)


def every_dir(broker, topic: str) -> list:
    """The partition's directories on `broker`: its live one and any renamed for deletion (`-delete`)."""
    logs = broker.data_dir / "logs"
    return [logs / name for name in os.listdir(logs) if name == f"{topic}-0" or name.startswith(f"{topic}-0.")]


def deleted_bytes_anywhere(cluster, topic: str, below: int) -> bool:
    found = False
    for broker in cluster.values():
        for directory in every_dir(broker, topic):
            try:
                found = found or bool(values_on_disk(directory, range(below)))
            except FileNotFoundError:  # removed while looked at
                continue
    return found


def test_a_replica_moved_away_right_after_a_delete_keeps_none_of_it_and_one_moving_in_reports_its_start(cluster):
    bound_ms = 6000  # its rewrite would start 3 s after the delete: the move comes first
    topic = new_topic(cluster, prefix="moved", configs={"segment.bytes": GIB, "erasure.max.delay.ms": str(bound_ms)})
    leader = leader_of(cluster, topic)
    replicas = list(partition_state(leader, topic).replica_nodes)
    leaving = next(n for n in replicas if cluster[n] is not leader)
    staying = [n for n in replicas if n != leaving]
    with WireClient(leader.port) as client:
        produce_values(client, topic, 100, per_batch=4)
        wait_for(lambda: all(values_on_disk(d, range(100)) == set(range(100)) for d in dirs(cluster, topic).values()),
                 what="every replica holding every value")
        assert delete_records(client, topic, 0, 40).error_code == ErrorCode.NONE
    deleted = time.monotonic()
    assert reassign(cluster, topic, staying) == ErrorCode.NONE
    wait_for(lambda: moved(cluster, topic, staying), what="the partition off the leaving replica")
    # the leaving replica's directory (renamed for deletion) must not keep the deleted values past the bound
    wait_for(lambda: not deleted_bytes_anywhere(cluster, topic, 40), timeout_s=bound_ms / 1000 * 3,
             what="the deleted values gone from every directory of the partition on every broker")
    took = time.monotonic() - deleted
    assert took < bound_ms / 1000, f"erased everywhere after {took:.2f}s, bound {bound_ms} ms"

    assert reassign(cluster, topic, replicas) == ErrorCode.NONE  # it moves back in: a new replica from 40
    wait_for(lambda: moved(cluster, topic, replicas), what="the replica back in sync")
    assert not values_on_disk(partition_dir(cluster[leaving].data_dir, topic), range(40))
    with WireClient(cluster[leaving].port) as client:
        _, answer = describe_erasure(client, topic)
    assert (answer.error_code, answer.log_start_offset, answer.erased_offset) == (ErrorCode.NONE, 40, 40)
    done = ebb("delete-records", "--bootstrap-server", leader.bootstrap, "--topic", topic, "--before-offset", 40,
               "--wait-erased")
    assert done.returncode == 0, done.stderr


def _quotas(broker, client_id: str) -> dict:
    with WireClient(broker.port) as client:
        answer = client.request(Describe(components=[Describe.ComponentData(
            entity_type="client-id", match_type=0, match=client_id)], strict=True), 1)
    return {v.key: v.value for e in answer.entries for v in e.values}


def _set_quota(broker, client_id: str, value: float | None) -> None:
    entry = Alter.EntryData(entity=[Alter.EntryData.EntityData(entity_type="client-id", entity_name=client_id)],
                            ops=[Alter.EntryData.OpData(key="producer_byte_rate", value=value or 0.0,
                                                        remove=value is None)])
    with WireClient(broker.port) as client:
        [result] = client.request(Alter(entries=[entry], validate_only=False), 1).entries
    assert result.error_code == ErrorCode.NONE, result.error_message


def test_a_client_quota_set_through_one_broker_holds_on_every_broker(cluster, zk_server):
    topic = new_topic(cluster, partitions=1, prefix="quota")
    leader = leader_of(cluster, topic)
    others = [b for b in cluster.values() if b is not leader]
    _set_quota(others[0], "held", 1000)
    zk = KazooClient(f"{zk_server.connect}/erasure")
    zk.start(timeout=10)
    try:
        data, _ = zk.get("/config/clients/held")
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1000"}}
        changes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "clients/held"} in changes
    finally:
        zk.stop()
        zk.close()
    for broker in cluster.values():
        wait_for(lambda b=broker: _quotas(b, "held") == {"producer_byte_rate": 1000.0},
                 what=f"broker {broker.port}: the quota in force")
    with WireClient(leader.port, client_id="held") as client:  # 20 KB over at least 10 s: 2000 B/s, twice the quota
        answer = client.request(produce_request(topic, 0, batch([b"x" * 20_000])), 9)
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        # (O - 1000) / 1000 * 10 s, O the request's size (20 KB and its framing) over the 10 s
        assert 10_000 < answer.throttle_time_ms < 10_500, answer.throttle_time_ms
    _set_quota(others[1], "held", None)
    wait_for(lambda: _quotas(leader, "held") == {}, what="the quota removed on the leader")
    with WireClient(leader.port, client_id="held") as client:
        assert produce(client, topic, 0, batch([b"x" * 20_000])).error_code == ErrorCode.NONE
        answer = client.request(produce_request(topic, 0, batch([b"x" * 20_000])), 9)
        assert answer.throttle_time_ms == 0

