"""Partition reassignment (KIP-455) on three broker processes and a real ZooKeeper, one cluster for the
module: a partition moves from two brokers to two others (one of them new to it, the leader leaving)
under an acks=all idempotent producer, losing and duplicating nothing; a reassignment whose new
replica cannot catch up is cancelled and the original replicas stay; a new replica copies from the
leader's log start offset, never a deleted record; a move interrupted by kill -9 of the controller and
of the receiving broker completes after they return; Kafka's kafka-reassign-partitions and `ebb
reassign` / `ebb elect-leaders` drive it with their JSON files; a throttle (`--throttle`, or either
side's rate and replica list set by hand) holds the copy to its rate and, removed, lets it finish at
once. Requests go to brokers that are not the controller, which forward them."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from confluent_kafka import Producer

from protocol.enums import ConfigResourceType
from tests.broker.data_wire import WireClient, batch, delete_records, fetch, produce
from tests.cluster.reassignments import (
    alter_configs,
    live_dir,
    moved,
    not_the_controller,
    ongoing,
    paused,
    produce_each,
    read_all,
    reassign,
    set_configs,
    two_replica_topic,
)
from tests.cluster.three_brokers import (
    NODES,
    E,
    metadata_of,
    partition_state,
    segment_batches,
    start_offset_checkpoint,
    three_brokers,
)
from tests.interop.conftest import java  # noqa: F401 - the fixture that builds and runs Kafka's tools
from tests.support.ebb_cli import ebb
from tests.support.polling import wait_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.alone]
FETCH_MAX = 100_000  # replica.fetch.max.bytes here: the most one fetch moves past a throttle's rate

@pytest.fixture(scope="module")
def cluster(zk_server, tmp_path_factory):
    with three_brokers(f"{zk_server.connect}/reassignment", tmp_path_factory.mktemp("reassignment"),
                       extra={"auto.leader.rebalance.enable": "false",
                              # one 100 KB batch per fetch: the throttle tests see each step
                              "replica.fetch.max.bytes": str(FETCH_MAX)}) as brokers:
        yield brokers


def test_reassignment_under_an_idempotent_producer_loses_and_duplicates_nothing(cluster):
    topic, (leader, staying) = two_replica_topic(cluster, "moving")
    joining = next(n for n in NODES if n not in (leader, staying))
    bootstrap = ",".join(b.bootstrap for b in cluster.values())
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 2, "message.timeout.ms": 60_000})
    failures: list[str] = []
    stop = threading.Event()
    sent = [0]

    def keep_producing() -> None:
        while not stop.is_set():
            producer.produce(topic, value=b"%06d" % sent[0], partition=0,
                             on_delivery=lambda err, msg: err and failures.append(str(err)))
            sent[0] += 1
            producer.poll(0.002)

    writer = threading.Thread(target=keep_producing)
    writer.start()
    # A v12 consumer (it may read a follower) whose resolve the leaving broker keeps on its connection
    consumer = WireClient(cluster[leader].port)
    try:
        wait_for(lambda: sent[0] > 300, what="records flowing")
        for _ in range(2):
            assert fetch(consumer, topic, 0, 0).error_code == E.NONE
        assert reassign(cluster, topic, [staying, joining]) == E.NONE  # the leader leaves
        wait_for(lambda: moved(cluster, topic, [staying, joining]), timeout_s=60, what="the partition moved")
        assert ongoing(cluster, topic) == []
        moved_at = sent[0]
        wait_for(lambda: sent[0] > moved_at + 300, what="records after the move")
    finally:
        stop.set()
        writer.join()
    assert producer.flush(60) == 0
    assert failures == []
    wait_for(lambda: not live_dir(cluster[leader], topic), what="the leaving replica's log deleted")
    with consumer:
        assert fetch(consumer, topic, 0, 0).error_code == E.NOT_LEADER_OR_FOLLOWER
    expected = [b"%06d" % i for i in range(sent[0])]
    assert read_all(cluster[partition_state(cluster[staying], topic).leader_id], topic) == expected


def test_cancelled_reassignment_keeps_the_original_replicas(cluster):
    topic, original = two_replica_topic(cluster, "cancelled")
    joining = next(n for n in NODES if n not in original)
    produce_each(cluster[original[0]], topic, [b"r%d" % i for i in range(20)])
    with paused(cluster, topic, joining):
        assert reassign(cluster, topic, [original[0], joining]) == E.NONE
        [under_way] = ongoing(cluster, topic)
        assert (list(under_way.adding_replicas), list(under_way.removing_replicas)) == ([joining], [original[1]])
        assert sorted(under_way.replicas) == sorted([original[0], joining, original[1]])
        assert reassign(cluster, topic, None) == E.NONE
        assert ongoing(cluster, topic) == []
        assert reassign(cluster, topic, None) == E.NO_REASSIGNMENT_IN_PROGRESS
    wait_for(lambda: moved(cluster, topic, original), what="the original replicas kept")
    wait_for(lambda: not live_dir(cluster[joining], topic), what="what the cancelled replica copied deleted")
    assert read_all(cluster[partition_state(cluster[original[0]], topic).leader_id], topic) == \
        [b"r%d" % i for i in range(20)]


def test_a_joining_replica_starts_at_the_leaders_log_start_offset(cluster):
    topic, (leader, staying) = two_replica_topic(cluster, "trimmed")
    joining = next(n for n in NODES if n not in (leader, staying))
    produce_each(cluster[leader], topic, [b"d%d" % i for i in range(10)])
    with WireClient(cluster[leader].port) as client:
        assert delete_records(client, topic, 0, 6).error_code == E.NONE
    assert reassign(cluster, topic, [leader, staying, joining]) == E.NONE  # a third replica joins
    wait_for(lambda: moved(cluster, topic, [leader, staying, joining]), what="the third replica in sync")
    assert start_offset_checkpoint(cluster[joining], topic) == 6  # durable before it counted in the ISR
    copied = segment_batches(cluster[joining], topic)
    assert copied and all(b"d%d" % i not in b"".join(copied) for i in range(6))  # nothing deleted came back
    with WireClient(cluster[leader].port) as client:
        assert delete_records(client, topic, 0, 8).low_watermark == 8  # all three replicas move on
    wait_for(lambda: start_offset_checkpoint(cluster[joining], topic) == 8, what="the joining replica at 8")


def test_refusals(cluster):
    topic, replicas = two_replica_topic(cluster, "refused")
    assert reassign(cluster, topic, [replicas[0], 99]) == E.INVALID_REPLICA_ASSIGNMENT
    assert reassign(cluster, topic, [replicas[0], replicas[0]]) == E.INVALID_REPLICA_ASSIGNMENT
    assert reassign(cluster, topic, []) == E.INVALID_REPLICA_ASSIGNMENT
    assert reassign(cluster, topic, [replicas[0]], partition=5) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert reassign(cluster, "never-was", [1]) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert reassign(cluster, topic, None) == E.NO_REASSIGNMENT_IN_PROGRESS


REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def plan_file(directory, topic: str, replicas: list[int]):
    """kafka-reassign-partitions' JSON file moving partition 0 of `topic` to `replicas`."""
    plan = directory / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}]}))
    return plan


def test_kafka_reassign_partitions_executes_verifies_and_cancels(cluster, java, tmp_path):  # noqa: F811
    topic, (leader, staying) = two_replica_topic(cluster, "tool")
    joining = next(n for n in NODES if n not in (leader, staying))
    bootstrap = not_the_controller(cluster).bootstrap
    plan = plan_file(tmp_path, topic, [staying, joining])
    executed = java.tool(bootstrap, REASSIGN, "--reassignment-json-file", str(plan), "--execute")
    assert executed.returncode == 0, executed.stdout + executed.stderr
    assert "Successfully started partition reassignment for " + f"{topic}-0" in executed.stdout
    wait_for(lambda: moved(cluster, topic, [staying, joining]), timeout_s=60, what="the tool's move done")
    verified = java.tool(bootstrap, REASSIGN, "--reassignment-json-file", str(plan), "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"Reassignment of partition {topic}-0 is completed." in verified.stdout
    cancelled = java.tool(bootstrap, REASSIGN, "--reassignment-json-file", str(plan), "--cancel")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert "None of the specified partition moves are active." in cancelled.stdout


def test_reassignment_interrupted_by_kill_9_of_the_controller_and_the_receiving_broker_completes(cluster):
    topic, (leader, staying) = two_replica_topic(cluster, "interrupted")
    joining = next(n for n in NODES if n not in (leader, staying))
    produce_each(cluster[leader], topic, [b"k%d" % i for i in range(30)])
    with paused(cluster, topic, joining):  # it cannot catch up before it dies
        assert reassign(cluster, topic, [staying, joining]) == E.NONE
        controller = metadata_of(cluster[staying]).controller_id
        cluster[controller].stop(signal.SIGKILL)
        cluster[joining].stop(signal.SIGKILL)
    try:
        survivor = next(b for n, b in cluster.items() if n not in (controller, joining))
        wait_for(lambda: metadata_of(survivor).controller_id not in (controller, -1), what="a new controller")
        assert len(ongoing(cluster, topic, via=survivor)) == 1  # the new controller read it from ZooKeeper
    finally:
        cluster[controller].start()
        cluster[joining].start()
    wait_for(lambda: moved(cluster, topic, [staying, joining]), timeout_s=60, what="the move completed")
    wait_for(lambda: not live_dir(cluster[leader], topic), what="the leaving replica's log deleted")
    assert read_all(cluster[partition_state(cluster[staying], topic).leader_id], topic) == \
        [b"k%d" % i for i in range(30)]


def test_ebb_reassign_and_ebb_elect_leaders_take_kafkas_json_files(cluster, tmp_path):
    topic, (leader, staying) = two_replica_topic(cluster, "ebb-cli")
    joining = next(n for n in NODES if n not in (leader, staying))
    bootstrap = not_the_controller(cluster).bootstrap
    plan = plan_file(tmp_path, topic, [joining, leader])
    executed = ebb("reassign", "--bootstrap-server", bootstrap, "--reassignment-json-file", plan, "--execute",
                   "--output", "json")
    assert executed.returncode == 0, executed.stderr
    assert json.loads(executed.stdout)["partitions"][0]["state"] == "started"
    wait_for(lambda: ebb("reassign", "--bootstrap-server", bootstrap, "--reassignment-json-file", plan,
                         "--verify").returncode == 0, what="ebb reassign --verify saying completed")
    assert moved(cluster, topic, [joining, leader])
    listed = ebb("reassign", "--bootstrap-server", bootstrap, "--list", "--output", "json")
    assert listed.returncode == 0 and topic not in listed.stdout
    # the leader stayed; the preferred replica is now `joining`: an election moves leadership to it
    partitions = tmp_path / "partitions.json"
    partitions.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0}]}))
    elected = ebb("elect-leaders", "--bootstrap-server", bootstrap, "--election-type", "preferred",
                  "--path-to-json-file", partitions, "--output", "json")
    assert elected.returncode == 0, elected.stdout + elected.stderr
    assert json.loads(elected.stdout)["partitions"] == [
        {"topic": topic, "partition": 0, "result": "elected", "error": None}]
    wait_for(lambda: partition_state(cluster[leader], topic).leader_id == joining, what="the preferred leader")
    again = ebb("elect-leaders", "--bootstrap-server", bootstrap, "--election-type", "PREFERRED",
                "--topic", topic, "--partition", "0")
    assert again.returncode == 0 and "not needed" in again.stdout
    plan.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "replicas": ["x"]}]}))
    refused = ebb("reassign", "--bootstrap-server", bootstrap, "--reassignment-json-file", plan, "--execute")
    assert refused.returncode == 2 and "\"replicas\"" in refused.stderr
    cancelled = ebb("reassign", "--bootstrap-server", bootstrap, "--reassignment-json-file", partitions, "--cancel")
    assert cancelled.returncode == 2  # a file without replicas is not a reassignment plan


THROTTLE = 200_000  # bytes/s
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
BROKER, TOPIC = ConfigResourceType.BROKER, ConfigResourceType.TOPIC
SLOW = 20_000
WINDOWS_S = 11  # replication.quota.window.num x replication.quota.window.size.seconds (Kafka's defaults)


def allowed(rate: int, seconds: float) -> float:
    """The most a throttle lets through in `seconds`: its rate over the time, plus what a quiet spell
    of up to all its windows banked (the rate is averaged since the oldest window kept, as in Kafka),
    plus one fetch let through before the quota measures itself exceeded."""
    return rate * (seconds + WINDOWS_S) + FETCH_MAX


def fill(broker, topic: str, batches: int) -> int:
    """`batches` batches of 100 KB (incompressible) on partition 0, each acknowledged by every in-sync
    replica; the bytes written."""
    with WireClient(broker.port) as client:
        for _ in range(batches):
            assert produce(client, topic, 0, batch([os.urandom(10_000) for _ in range(10)]),
                           acks=-1).error_code == E.NONE
    return batches * 100_000


def copied(broker, topic: str) -> int:
    """The bytes of the partition's segment files on `broker`."""
    total = 0
    for segment in (broker.data_dir / "logs" / f"{topic}-0").glob("*.log"):
        try:
            total += segment.stat().st_size
        except FileNotFoundError:  # a segment renamed away meanwhile
            pass
    return total


def clear_throttles(cluster, topic: str) -> None:
    for node, broker in cluster.items():
        if broker.process.poll() is None:
            alter_configs(broker, BROKER, str(node), dict.fromkeys(RATES))
    alter_configs(not_the_controller(cluster), TOPIC, topic, dict.fromkeys(LISTS))


def test_kafka_reassign_partitions_throttle_holds_the_move_to_its_rate_and_verify_removes_it(
        cluster, java, tmp_path):  # noqa: F811
    topic, (leader, staying) = two_replica_topic(cluster, "throttled")
    joining = next(n for n in NODES if n not in (leader, staying))
    size = fill(cluster[leader], topic, 40)
    bootstrap = not_the_controller(cluster).bootstrap
    plan = plan_file(tmp_path, topic, [staying, joining])
    try:
        executed = java.tool(bootstrap, REASSIGN, "--reassignment-json-file", str(plan), "--execute",
                             "--throttle", str(THROTTLE))
        started = time.monotonic()
        assert executed.returncode == 0, executed.stdout + executed.stderr
        assert f"The inter-broker throttle limit was set to {THROTTLE} B/s" in executed.stdout
        for node in NODES:  # every broker of the move, old and new replicas, has both rates
            assert set_configs(cluster[node], BROKER, str(node)) == dict.fromkeys(RATES, str(THROTTLE))
        assert {k: v for k, v in set_configs(cluster[leader], TOPIC, topic).items() if k in LISTS} == {
            LISTS[0]: ",".join(sorted(f"0:{n}" for n in (leader, staying))), LISTS[1]: f"0:{joining}"}
        verified = java.tool(bootstrap, REASSIGN, "--reassignment-json-file", str(plan), "--verify")
        assert f"Reassignment of partition {topic}-0 is still in progress." in verified.stdout, verified.stdout
        wait_for(lambda: moved(cluster, topic, [staying, joining]), timeout_s=120, what="the throttled move done")
        took = time.monotonic() - started
    except BaseException:
        clear_throttles(cluster, topic)
        raise
    assert size <= allowed(THROTTLE, took), f"{size} bytes moved in {took:.1f} s"
    verified = java.tool(bootstrap, REASSIGN, "--reassignment-json-file", str(plan), "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"Reassignment of partition {topic}-0 is completed." in verified.stdout
    assert "Clearing broker-level throttles on brokers 1,2,3" in verified.stdout
    assert f"Clearing topic-level throttles on topic {topic}" in verified.stdout
    for node in NODES:
        assert set_configs(cluster[node], BROKER, str(node)) == {}
    assert set_configs(cluster[staying], TOPIC, topic) == {}


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_throttled_move_finishes_at_once_when_its_rate_is_removed(cluster, side):
    """One side throttled by hand (the topic's replica list and that broker's rate), 20 KB/s for 3 MB:
    the copy crawls at that rate; the rate deleted, the move completes within seconds, without a restart."""
    topic, (leader, staying) = two_replica_topic(cluster, f"crawling-{side}")
    joining = next(n for n in NODES if n not in (leader, staying))
    throttled = leader if side == "leader" else joining
    size = fill(cluster[leader], topic, 30)
    throttled_list = {f"{side}.replication.throttled.replicas": f"0:{throttled}"}
    alter_configs(not_the_controller(cluster), TOPIC, topic, throttled_list)
    wait_for(lambda: all(set_configs(b, TOPIC, topic) == throttled_list for b in cluster.values()),
             what="every broker knowing the throttled replicas")
    try:
        alter_configs(cluster[throttled], BROKER, str(throttled), {f"{side}.replication.throttled.rate": str(SLOW)})
        assert reassign(cluster, topic, [leader, staying, joining]) == E.NONE
        started = time.monotonic()
        wait_for(lambda: copied(cluster[joining], topic) >= 4 * FETCH_MAX, timeout_s=60, what="four batches copied")
        took = time.monotonic() - started
        now_copied = copied(cluster[joining], topic)  # (+ the batches' headers, which FETCH_MAX leaves out)
        assert now_copied <= allowed(SLOW, took) + 5_000 and now_copied < size and len(ongoing(cluster, topic)) == 1
        released = time.monotonic()
        alter_configs(cluster[throttled], BROKER, str(throttled), {f"{side}.replication.throttled.rate": None})
        wait_for(lambda: moved(cluster, topic, [leader, staying, joining]), timeout_s=30, what="the move done")
        assert time.monotonic() - released < 15
    finally:
        clear_throttles(cluster, topic)


def test_delete_records_during_a_reassignment(cluster):
    """A move held back by a follower throttle (so that it is under way for seconds) meets an
    all-replica DeleteRecords past what the joining replica has copied: the DeleteRecords completes
    once the joining replica has the new start offset (it starts over there, never copying a deleted
    record), and once the move is done and it leads, it serves nothing below that offset."""
    topic, (leader, staying) = two_replica_topic(cluster, "deleting")
    joining = next(n for n in NODES if n not in (leader, staying))
    with WireClient(cluster[leader].port) as client:
        for i in range(20):  # batch i holds offsets 10i..10i+9, each value marked with i
            values = [b"m%03d-" % i + os.urandom(10_000) for _ in range(10)]
            assert produce(client, topic, 0, batch(values), acks=-1).error_code == E.NONE
    throttled_list = {LISTS[1]: f"0:{joining}"}
    alter_configs(not_the_controller(cluster), TOPIC, topic, throttled_list)
    wait_for(lambda: all(set_configs(b, TOPIC, topic) == throttled_list for b in cluster.values()),
             what="every broker knowing the throttled replicas")
    try:
        alter_configs(cluster[joining], BROKER, str(joining), {RATES[1]: str(SLOW)})
        assert reassign(cluster, topic, [joining, staying]) == E.NONE  # the leader leaves; joining will lead
        wait_for(lambda: copied(cluster[joining], topic) >= FETCH_MAX, what="the first batch copied")
        with WireClient(cluster[leader].port, timeout=90) as client:
            deleted = delete_records(client, topic, 0, 150, timeout_ms=60_000)
        assert (deleted.error_code, deleted.low_watermark) == (E.NONE, 150)
        assert start_offset_checkpoint(cluster[joining], topic) == 150  # durable before it counted
        assert len(ongoing(cluster, topic)) == 1  # still moving: the DeleteRecords did not wait for the move
        alter_configs(cluster[joining], BROKER, str(joining), {RATES[1]: None})
        wait_for(lambda: moved(cluster, topic, [joining, staying]), timeout_s=60, what="the move done")
    finally:
        clear_throttles(cluster, topic)
    copied_batches = b"".join(segment_batches(cluster[joining], topic))
    assert all(b"m%03d-" % i not in copied_batches for i in range(15))  # the first batch's files went too
    wait_for(lambda: partition_state(cluster[staying], topic).leader_id == joining, what="the new replica leading")
    with WireClient(cluster[joining].port) as client:
        assert fetch(client, topic, 0, 149).error_code == E.OFFSET_OUT_OF_RANGE
    served = read_all(cluster[joining], topic, start=150)
    assert len(served) == 50 and served[0].startswith(b"m015-")
