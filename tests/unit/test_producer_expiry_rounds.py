"""The replica manager's producer-id expiration task (broker/replica/manager.py) runs for the
broker's life: a partition whose expiry fails is logged, and the others and the later rounds go on."""

import asyncio
import uuid

from broker.topic import Topic
from tests.unit.leading_broker import LEADER, leading_broker


async def test_a_failed_expiry_ends_neither_the_round_nor_the_task(tmp_path):
    topic = Topic("t", uuid.uuid4(), {0: [LEADER], 1: [LEADER]})
    async with leading_broker(tmp_path, topic) as broker:
        replicas = broker.replicas
        broken, healthy = (replicas.partition_of(topic, index) for index in (0, 1))
        calls: list[str] = []
        rounds = asyncio.Event()

        def fails() -> int:
            calls.append("broken")
            raise OSError("disk gone")

        def expires() -> int:
            calls.append("healthy")
            if calls.count("healthy") == 2:
                rounds.set()
            return 1

        broken.expire_producers = fails  # type: ignore[method-assign]
        healthy.expire_producers = expires  # type: ignore[method-assign]
        replicas._producer_expiry_check_s = 0
        task = asyncio.ensure_future(replicas._expire_producers_periodically())
        try:
            await asyncio.wait_for(rounds.wait(), 5)  # a second round after the failures
            assert calls.count("broken") >= 2 and not task.done()
        finally:
            task.cancel()
