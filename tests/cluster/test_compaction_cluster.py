"""Compaction with replicas: each replica cleans its own log, and a follower that was down while the
leader cleaned catches up by fetching across the leader's gaps (offsets kept, nothing reassigned),
rejoins the ISR, and ends with the same records as the leader."""

from __future__ import annotations

import pytest

from protocol.records import iter_batches
from tests.broker import compaction_workload as workload
from tests.broker.test_compaction import cleaned_up_to
from tests.cluster.three_brokers import in_sync, leader_of, new_topic, segment_batches, three_brokers
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(240)


def records_on_disk(broker, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for raw in segment_batches(broker, topic)
            for b in iter_batches(raw) for r in b.records()]


def test_a_follower_catches_up_across_the_leaders_gaps(zk_connect, tmp_path) -> None:
    with three_brokers(zk_connect, tmp_path, {"log.cleaner.backoff.ms": "50"}) as cluster:
        topic = new_topic(cluster, prefix="compacted", configs=workload.TOPIC_CONFIGS)
        leader = leader_of(cluster, topic)
        away, other = [b for b in cluster.values() if b is not leader]
        away.stop()
        wait_for(lambda: not in_sync(leader, topic, 0) and leader_of(cluster, topic, via=leader) is leader,
                 what="the ISR without the stopped follower")
        workload.produce(leader.bootstrap, topic)
        expected = workload.after_cleaning(workload.ACTIVE_BASE)
        for replica in (leader, other):
            wait_for(lambda r=replica: cleaned_up_to(r, topic) == workload.ACTIVE_BASE, what="a replica's round")
            assert records_on_disk(replica, topic) == expected
        away.start()  # its log is empty: it fetches from 0, inside the leader's first gap
        wait_for(lambda: in_sync(leader, topic, 0), timeout_s=60, what="the follower back in the ISR")
        wait_for(lambda: records_on_disk(away, topic) == expected, what="the follower holding what the leader holds")
        assert workload.consume(leader.bootstrap, topic) == expected
