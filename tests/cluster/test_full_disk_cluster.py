"""One broker of three with a full disk (issue 29): broker 3's log dir is a 64 MiB tmpfs, the others
have room. An idempotent acks=all producer (min.insync.replicas=2) keeps writing through the leader
while broker 3 falls below log.dir.min.free.bytes and out of the ISR; broker 3 stays up and answers.
A DeleteRecords to the end (all replicas) completes: the full follower follows the leader's log
start offset, which frees its disk, and it catches up and rejoins the ISR. Every acknowledged
record after the deletion is read back, CRC-checked by librdkafka."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.broker.data_wire import WireClient, list_offsets
from tests.broker.test_full_disk import produce_until, read_back
from tests.cluster.three_brokers import create_assigned, partition_state, three_brokers
from tests.support.polling import wait_for
from tests.support.small_disk import free_bytes, small_filesystem

MiB = 1 << 20
THRESHOLD = 8 * MiB
TOPIC = "filled"

pytestmark = [pytest.mark.timeout(420), pytest.mark.alone]


def create_led_by_one(port: int) -> None:
    """Replicas 1, 2, 3 in that order, so broker 1 leads and the full broker 3 follows."""
    create_assigned(port, TOPIC, [1, 2, 3], {"min.insync.replicas": "2", "segment.bytes": str(MiB)})


def produce_while(bootstrap: str, acked: dict, going) -> None:
    """Produce while `going()`; every delivery must succeed."""
    failures = produce_until(bootstrap, TOPIC, 1, acked, lambda failed: bool(failed) or not going(),
                             message_timeout_ms=60_000)
    assert not failures, failures[:3]


def isr(cluster) -> list[int]:
    return sorted(partition_state(cluster[1], TOPIC).isr_nodes)


def test_a_follower_with_a_full_disk_keeps_up_what_it_can_and_frees_itself_by_following_deletions(
        zk_connect, tmp_path: Path):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    with small_filesystem(tmp_path / "disk-3", "64m") as disk, \
            three_brokers(zk_connect, tmp_path, per_node={3: {
                "log.dirs": str(disk / "logs"), "log.dir.min.free.bytes": str(THRESHOLD),
                "log.dir.free.space.check.interval.ms": "200"}}) as cluster:
        create_led_by_one(cluster[1].port)
        wait_for(lambda: isr(cluster) == [1, 2, 3], what="three replicas in sync")
        acked: dict = {}
        bootstrap = cluster[1].bootstrap
        produce_while(bootstrap, acked, lambda: free_bytes(disk) >= THRESHOLD)
        # On until the full follower drops out of the ISR: when the round that filled its disk was applied
        # whole, it is in sync and stays there until a record it refuses (waiting could not drop it).
        produce_while(bootstrap, acked, lambda: isr(cluster) != [1, 2])
        produce_while(bootstrap, acked, lambda: len(acked) <= 70_000)  # acks=all goes on with two
        assert cluster[3].process.poll() is None
        assert partition_state(cluster[3], TOPIC).leader_id == 1  # the full broker is up and answers

        with WireClient(cluster[1].port) as client:
            end = list_offsets(client, TOPIC, 0, -1).offset
        admin = AdminClient({"bootstrap.servers": bootstrap})
        [deleted] = admin.delete_records([TopicPartition(TOPIC, 0, end)], request_timeout=60,
                                         operation_timeout=60).values()
        assert deleted.result(90).low_watermark == end  # every replica, the full one too, moved its start
        wait_for(lambda: free_bytes(disk) > THRESHOLD + 40 * MiB, timeout_s=10, what="the follower's disk freed")
        wait_for(lambda: isr(cluster) == [1, 2, 3], timeout_s=60, what="the freed follower back in the ISR")

        after: dict = {}
        produce_while(bootstrap, after, lambda: len(after) < 5000)
        got = read_back(bootstrap, TOPIC, 1)
        assert {key: got.get(key) for key in after} == after
        assert min(offset for _, _, offset in got) >= end

        # The dir went low once and had room once: freed a segment at a time, it does not take appends
        # again until the threshold plus a margin is free, so it cannot flap back under the threshold.
        text = cluster[3].log_text()
        assert (text.count("log dir below its free space threshold"), text.count("log dir has room again")) == (1, 1)
        # Refused at every fetch backoff while full, yet logged once, then summarised, then its end.
        lines = [line for line in text.splitlines() if "follower could not apply" in line]
        first = [line for line in lines if "(still failing)" not in line and "works again" not in line]
        ends = [json.loads(line) for line in lines if "works again" in line]
        assert len(first) == len(ends) == 1, lines[-6:]
        assert ends[0]["failures"] > 2, ends  # not a line per refusal
