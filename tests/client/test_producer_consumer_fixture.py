"""Producer and Consumer over real sockets against fixture brokers holding an in-memory log."""

import asyncio

import pytest

from client import (
    EARLIEST,
    LATEST,
    Consumer,
    KafkaError,
    OffsetOutOfRangeError,
    Producer,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from client.cluster import Cluster
from protocol.errors import ErrorCode
from protocol.records import NewRecord
from tests.client.fixture_broker import CLOSE, FixtureCluster, produce
from tests.support.broker_process import free_port

PRODUCE, FETCH = 0, 1


async def test_produce_one_request_per_leader_then_consume_everything():
    async with FixtureCluster({1: {}, 2: {}}, topics={"t": {0: 1, 1: 2, 2: 1}}) as fixture:
        async with Cluster(fixture.bootstrap) as cluster:
            producer = Producer(cluster, acks=1)
            first = await producer.send_batches({("t", p): [b"a%d" % p, (b"k", b"b%d" % p)] for p in range(3)})
            assert {tp: r.base_offset for tp, r in first.items()} == {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
            assert sorted(s.node_id for s in fixture.seen(PRODUCE)) == [1, 2]
            assert await producer.send("t", 0, [NewRecord(None, b"c0", [("h", b"1")], 77)]) == 2

            consumer = Consumer(cluster, max_wait_ms=10)
            consumer.assign({("t", p): EARLIEST for p in range(3)})
            records = await consumer.read_to_end()
            by_partition = {p: [(r.offset, r.key, r.value) for r in records if r.partition == p] for p in range(3)}
            assert by_partition[0] == [(0, None, b"a0"), (1, b"k", b"b0"), (2, None, b"c0")]
            assert by_partition[1] == [(0, None, b"a1"), (1, b"k", b"b1")]
            last = [r for r in records if r.partition == 0][-1]
            assert last.headers == [("h", b"1")] and last.timestamp == 77
            assert consumer.position(("t", 0)) == 3 and consumer.high_watermarks[TopicPartition("t", 0)] == 3
            assert {s.node_id for s in fixture.seen(FETCH)} == {1, 2}
            assert all(s.api_version == 12 for s in fixture.seen(FETCH))  # by name, not topic id


async def test_fetch_below_the_log_start_raises_and_moves_nothing():
    async with FixtureCluster(topics={"t": {0: 1, 1: 1}}) as fixture:
        async with Producer(fixture.bootstrap) as producer:
            for p in (0, 1):
                await producer.send("t", p, [b"%d" % i for i in range(6)])
        fixture.log_start[("t", 0)] = 3  # records deleted underneath the consumer
        async with Consumer(fixture.bootstrap, max_wait_ms=10) as consumer:
            consumer.assign({("t", 0): 0, ("t", 1): 0})
            with pytest.raises(OffsetOutOfRangeError) as info:
                await consumer.fetch()
            assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 0, 0)
            assert info.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
            assert consumer.position(("t", 1)) == 0  # the healthy partition did not skip ahead either
            consumer.seek(("t", 0), EARLIEST)
            records = await consumer.read_to_end()
            assert [r.offset for r in records if r.partition == 0] == [3, 4, 5]
            assert [r.offset for r in records if r.partition == 1] == list(range(6))
            consumer.assign({("t", 0): LATEST})
            assert await consumer.fetch() == [] and consumer.position(("t", 0)) == 6


async def test_acks_zero_gets_no_answer():
    async with FixtureCluster() as fixture:
        async with Producer(fixture.bootstrap, acks=0) as producer:
            assert await producer.send("t", 0, [b"x"]) == -1
        async with Consumer(fixture.bootstrap, max_wait_ms=10) as consumer:
            consumer.assign({("t", 0): 0})
            assert [r.value for r in await consumer.read_to_end()] == [b"x"]


async def test_produce_retries_when_nothing_was_appended():
    async with FixtureCluster({1: {}, 2: {}}, topics={"t": {0: 1}}) as fixture:
        async def leader_moves(broker, request):
            fixture.topics["t"][0] = 2
            return await produce(broker, request)

        fixture.handlers[PRODUCE] = leader_moves
        async with Producer(fixture.bootstrap, retry_backoff_ms=10) as producer:
            assert await producer.send("t", 0, [b"x"]) == 0
        assert [s.node_id for s in fixture.seen(PRODUCE)] == [1, 2]
        assert fixture.log_end(("t", 0)) == 1


async def test_produce_is_not_resent_when_the_connection_drops_after_sending():
    async with FixtureCluster() as fixture:
        async def hang_up(broker, request):
            return CLOSE

        fixture.handlers[PRODUCE] = hang_up
        async with Producer(fixture.bootstrap, retry_backoff_ms=10) as producer:
            results = await producer.send_batches({("t", 0): [b"x"]})
        assert results[("t", 0)].error == ErrorCode.NETWORK_EXCEPTION
        assert len(fixture.seen(PRODUCE)) == 1  # it may have been appended: resending could duplicate


async def test_bootstrap_skips_unreachable_servers():
    async with FixtureCluster() as fixture:
        async with Cluster(f"127.0.0.1:{free_port()},{fixture.bootstrap}") as cluster:
            assert list(cluster.metadata.brokers) == [1]
            assert cluster.metadata.cluster_id == "fixture"


async def test_leader_lookup_waits_for_a_leader_and_rejects_unknown_partitions():
    async with FixtureCluster({1: {}, 2: {}}, topics={"t": {0: -1}}) as fixture:
        async with Cluster(fixture.bootstrap, retry_backoff_ms=10) as cluster:
            async def elect_later():
                while len(fixture.seen(3)) < 3:  # a couple of refreshes see no leader
                    await asyncio.sleep(0.01)
                fixture.topics["t"][0] = 2

            election = asyncio.create_task(elect_later())
            assert await cluster.leader(("t", 0), timeout_s=5) == 2
            await election
            with pytest.raises(UnknownTopicOrPartitionError, match="has no partition 3"):
                await cluster.leader(("t", 3))
            with pytest.raises(UnknownTopicOrPartitionError, match="'nope' does not exist"):
                await cluster.leader(("nope", 0))


async def test_retry_gives_up_at_the_deadline_with_the_last_error():
    async with FixtureCluster(topics={"t": {0: -1}}) as fixture:
        async with Cluster(fixture.bootstrap, retry_backoff_ms=10) as cluster:
            with pytest.raises(KafkaError) as info:
                await cluster.leader(("t", 0), timeout_s=0.2)
            assert info.value.error_code == ErrorCode.LEADER_NOT_AVAILABLE
            assert any("gave up after" in note for note in info.value.__notes__)
