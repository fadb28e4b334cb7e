"""The replication throttles (broker/replica/throttle.py): which partitions a throttled-replicas list
throttles on a broker, the rate measured over Kafka's windows, and the leader side in the real Fetch
handler: a follower out of the ISR of a throttled partition gets no records while the quota is
exceeded, an in-sync one always does, and a change of rate or list is in force at the next fetch."""

import uuid
from types import SimpleNamespace

import pytest

from broker.cluster.store import EmbeddedStore
from broker.config import load_config
from broker.dynamic_config import DynamicBrokerConfig
from broker.handlers.k01_fetch import fetch
from broker.log import TopicPartition
from broker.replica.throttle import (
    FOLLOWER_RATE,
    LEADER_RATE,
    LEADER_REPLICAS,
    ReplicationQuota,
    SampledRate,
    throttled_partitions,
)
from broker.request_context import RequestContext
from broker.topic import Topic
from protocol.messages import FetchRequest
from protocol.records import RecordBatch, build_batch
from tests.unit.leading_broker import FOLLOWER, LEADER, leading_broker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("value", "node", "expected"), [
    ("0:1,1:2,2:1", 1, {0, 2}),
    ("0:1,1:2,2:1", 2, {1}),
    ("0:1,1:2", 3, set()),
    ("", 1, set()),
    ("0:1,0:\u00b2", 1, set()),  # not a list of pairs (written to the store unchecked): throttles nothing
])
def test_a_list_throttles_the_partitions_paired_with_this_broker(value, node, expected):
    assert throttled_partitions(value, node) == frozenset(expected)


def test_a_star_throttles_every_partition_of_the_topic():
    configs = {"t": {LEADER_REPLICAS: "*"}}
    quota = ReplicationQuota(LEADER_REPLICAS, 1, configs.get, 11, 1)
    assert quota.is_throttled(TopicPartition("t", 0)) and quota.is_throttled(TopicPartition("t", 7))
    assert not quota.is_throttled(TopicPartition("other", 0))
    configs["t"] = {LEADER_REPLICAS: "3:1"}  # read when asked: a change is in force at once
    assert not quota.is_throttled(TopicPartition("t", 0)) and quota.is_throttled(TopicPartition("t", 3))


def test_the_rate_is_the_kept_windows_over_the_time_since_the_oldest_never_less_than_one_window():
    rate = SampledRate(samples=11, window_s=1)
    assert rate.rate(0.0) == 0
    rate.record(1000, 0.0)
    assert rate.rate(0.0) == 1000  # one window at least: not a burst divided by nothing
    assert rate.rate(0.5) == 1000
    assert rate.rate(4.0) == 250
    rate.record(1000, 4.0)  # a new window
    assert rate.rate(5.0) == 400
    assert rate.rate(11.0) == 1000 / 7  # the first window (began at 0) expired after 11 windows
    assert rate.rate(16.0) == 0


def test_the_quota_is_exceeded_above_the_bound_only_and_unlimited_without_one():
    clock = Clock()
    quota = ReplicationQuota(LEADER_REPLICAS, 1, {}.get, 11, 1, clock)
    quota.record(1_000_000)
    assert not quota.exceeded()  # no rate set: unlimited
    quota.bound = 200_000
    assert quota.exceeded()
    clock.now += 4.9
    assert quota.exceeded()
    clock.now += 0.1  # 1 MB over 5 s: at the bound, not above it
    assert not quota.exceeded()


@pytest.mark.parametrize(("samples", "window_s"), [(11, 1), (3, 2)])
def test_fetching_whenever_the_quota_allows_moves_the_bound_per_second(samples, window_s):
    """A follower fetching 100 KB whenever the quota is not exceeded, for 30 s at 200 KB/s: the bytes
    moved stay within one fetch of what the rate allows."""
    clock = Clock()
    quota = ReplicationQuota(LEADER_REPLICAS, 1, {}.get, samples, window_s, clock)
    quota.bound = 200_000
    moved, start = 0, clock.now
    while clock.now - start < 30:
        if not quota.exceeded():
            quota.record(100_000)
            moved += 100_000
        clock.now += 0.01
    assert 30 * 200_000 - 100_000 <= moved <= 30 * 200_000 + 100_000


@pytest.fixture
async def leader(tmp_path):
    """Partition t-0 led here (broker 1), broker 2 a follower out of the ISR; ten records of 10 KB."""
    topic = Topic("t", uuid.uuid4(), {0: [LEADER, FOLLOWER]}, configs={LEADER_REPLICAS: f"0:{LEADER}"})
    async with leading_broker(tmp_path, topic) as broker:
        partition = broker.replicas.partition("t", 0)
        for i in range(10):
            data = build_batch([(None, bytes([i]) * 10_000, [], 1)])
            await partition.append_records_as_leader(memoryview(bytearray(data)), RecordBatch(data), required_acks=1)
        yield broker, topic, partition


async def _follower_fetch(broker, offset: int):
    wanted = FetchRequest.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                                    last_fetched_epoch=-1, log_start_offset=0,
                                                    partition_max_bytes=30_000)
    request = FetchRequest(replica_id=FOLLOWER, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="t",
                                                                                          partitions=[wanted])])
    answer = await fetch(broker, SimpleNamespace(body=request, api_version=12), RequestContext())
    return answer.responses[0].partitions[0]


async def test_the_leader_sends_a_throttled_follower_nothing_while_the_quota_is_exceeded(leader):
    broker, topic, partition = leader
    throttles = broker.replicas.throttles
    throttles.set_rates(1000, None)
    first = await _follower_fetch(broker, 0)
    assert 0 < len(first.records) <= 30_000 + 100  # the quota was not exceeded yet
    assert throttles.leader.exceeded()  # what it sent was recorded
    held = await _follower_fetch(broker, 3)
    assert held.error_code == 0 and len(held.records) == 0
    assert (held.high_watermark, held.log_start_offset) == (partition.high_watermark, 0)  # offsets as usual
    partition.isr.add(FOLLOWER)  # an in-sync follower is never held back
    assert len((await _follower_fetch(broker, 3)).records) > 0
    partition.isr.discard(FOLLOWER)
    assert len((await _follower_fetch(broker, 3)).records) == 0
    throttles.set_rates(None, None)  # the rate removed: in force at the next fetch
    assert len((await _follower_fetch(broker, 3)).records) > 0
    throttles.set_rates(1000, None)
    topic.configs = {}  # the partition no longer throttled here
    assert len((await _follower_fetch(broker, 3)).records) > 0
    topic.configs = {LEADER_REPLICAS: f"0:{FOLLOWER}"}  # a pair naming another broker throttles nothing here
    assert len((await _follower_fetch(broker, 3)).records) > 0


async def test_the_rate_in_force_is_this_brokers_then_the_cluster_wide_then_server_properties(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    dynamic = DynamicBrokerConfig(store, load_config(None, ["node.id=1", f"{LEADER_RATE}=300"]))
    await dynamic.load()
    await dynamic.start()
    seen = []
    dynamic.change_listeners.append(lambda: seen.append(dynamic.replication_throttle(LEADER_RATE)))
    try:
        assert (dynamic.replication_throttle(LEADER_RATE), dynamic.replication_throttle(FOLLOWER_RATE)) == (300, None)
        await dynamic.alter("", lambda current: {**current, LEADER_RATE: "200"})
        assert seen[-1] == 200  # the listeners (the replication throttles) hear of it at once
        await dynamic.alter("1", lambda current: {**current, LEADER_RATE: "100"})
        assert seen[-1] == 100
        await dynamic.alter("1", lambda current: {})
        assert seen[-1] == 200
    finally:
        await dynamic.stop()
