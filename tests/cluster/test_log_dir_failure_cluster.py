"""A leader's log dir fails in a cluster (issue 29): broker 3's log dir is ext4 on a loop device that
an error turns read-only under its open files (tests/support/failing_disk.py). Broker 3 leads the
partition while an idempotent acks=all producer (min.insync.replicas=2) writes through it. Its
append meets EROFS, the dir goes offline, and the broker tells the controller through
/log_dir_event_notification: leadership moves to broker 1 (leader epoch + 1) and broker 3 leaves the
ISR within seconds, and the producer goes on with brokers 1 and 2 without a failed delivery. Once
the disk is mounted again, broker 3's probe reloads its logs, it follows broker 1, catches up and is
back in the ISR; the controller has handled and deleted every event. Every acknowledged record is
read back, CRC-checked by librdkafka."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from broker.cluster.layout import LogDirEventNotificationZNode
from tests.broker.test_full_disk import produce_until, read_back
from tests.cluster.three_brokers import create_assigned, partition_state, three_brokers
from tests.support.failing_disk import failing_disk
from tests.support.polling import wait_for

TOPIC = "moved"
pytestmark = pytest.mark.timeout(300)


def state(cluster) -> tuple[int, list[int]]:
    found = partition_state(cluster[1], TOPIC)
    return found.leader_id, sorted(found.isr_nodes)


def pending_events(zk_connect: str) -> list[str]:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        return client.get_children(LogDirEventNotificationZNode.PATH)
    finally:
        client.stop()
        client.close()


def test_a_leader_whose_log_dir_fails_hands_leadership_over_and_rejoins_when_the_dir_is_back(
        zk_connect, tmp_path: Path):
    with failing_disk(tmp_path / "disk-3") as disk, three_brokers(zk_connect, tmp_path, per_node={3: {
            "log.dirs": str(disk.mount_point / "logs"), "log.dir.min.free.bytes": "0",
            "log.dir.failure.probe.interval.ms": "200"}}) as cluster:
        create_assigned(cluster[1].port, TOPIC, [3, 1, 2], {"min.insync.replicas": "2"})
        wait_for(lambda: state(cluster) == (3, [1, 2, 3]), what="broker 3 leading, three replicas in sync")
        epoch_before = partition_state(cluster[1], TOPIC).leader_epoch

        acked: dict = {}
        stop = threading.Event()
        outcome: dict = {}

        def produce() -> None:
            outcome["failures"] = produce_until(cluster[1].bootstrap, TOPIC, 1, acked,
                                                lambda failed: bool(failed) or stop.is_set(),
                                                message_timeout_ms=60_000)

        producer = threading.Thread(target=produce)
        producer.start()
        try:
            wait_for(lambda: len(acked) >= 2000, timeout_s=60, what="records acknowledged through broker 3")
            disk.fail()
            failed_at = time.monotonic()
            wait_for(lambda: state(cluster)[0] in (1, 2), timeout_s=30, interval_s=0.05,
                     what="leadership off the broker whose dir failed")
            moved_s = time.monotonic() - failed_at
            leader, isr = state(cluster)
            assert 3 not in isr and len(isr) == 2, isr
            assert partition_state(cluster[1], TOPIC).leader_epoch > epoch_before
            print(f"leadership moved {moved_s:.2f} s after the disk failed; ISR {isr}")
            assert moved_s < 15, moved_s
            # acks=all goes on with the two others.
            after_move = len(acked)
            wait_for(lambda: len(acked) >= after_move + 3000, timeout_s=90, what="produce going on with two")
            assert cluster[3].process.poll() is None
            assert "log dir event" in cluster[leader_controller(cluster)].log_text()
        finally:
            stop.set()
            producer.join(120)
        assert outcome.get("failures") == [], outcome.get("failures", ["the producer did not finish"])[:3]

        disk.heal()
        healed_at = time.monotonic()
        wait_for(lambda: 3 in state(cluster)[1], timeout_s=60, what="broker 3 back in the ISR")
        print(f"broker 3 back in the ISR {time.monotonic() - healed_at:.2f} s after the disk was mounted again")
        assert state(cluster)[0] in (1, 2)  # it came back as a follower
        wait_for(lambda: pending_events(zk_connect) == [], timeout_s=10, what="every log dir event handled")
        log3 = cluster[3].log_text()
        assert log3.count("log dir event written for the controller") >= 2  # failed, then recovered

        got = read_back(cluster[1].bootstrap, TOPIC, 1)
        assert {key: got.get(key) for key in acked} == acked


def leader_controller(cluster) -> int:
    """The broker that is the controller (its log says so last)."""
    for node, broker in cluster.items():
        if "became controller" in broker.log_text():
            return node
    raise AssertionError("no controller found in the logs")
