"""A topic change whose client goes away mid-request still completes: store and cache agree."""

import asyncio

from broker.app import Broker
from broker.config import load_config
from broker.topic_placement import TopicError
from protocol.errors import ErrorCode


async def test_cancelled_create_still_completes(tmp_path):
    broker = Broker(load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    await broker.start()
    try:
        task = asyncio.create_task(broker.topics.create("t", 8, 1))
        await asyncio.sleep(0)  # let it start its store writes
        task.cancel()
        await asyncio.sleep(0.5)
        assert broker.topics.get("t") is not None
        assert await broker.store.exists("/brokers/topics/t")
        try:
            await broker.topics.create("t", 1, 1)
        except TopicError as exc:
            assert exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        else:
            raise AssertionError("second create succeeded")
        assert len(broker.logs.logs) >= 8
    finally:
        await broker.stop()


async def test_create_raced_by_another_broker_is_topic_already_exists(tmp_path):
    """Two brokers creating one topic at once (say `__transaction_state` on two FindCoordinators): the one
    whose znode write comes second answers TOPIC_ALREADY_EXISTS, as Kafka's AdminZkClient does, instead of
    failing the request and closing the client's connection."""
    broker = Broker(load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    await broker.start()
    try:
        await broker.store.create("/brokers/topics/raced", b'{"version":3,"partitions":{"0":[0]}}')
        assert broker.topics.get("raced") is None  # the assignment is there, this broker has not seen it yet
        try:
            await broker.topics.create("raced", 1, 1)
        except TopicError as exc:
            assert exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS, exc
        else:
            raise AssertionError("the second create succeeded")
    finally:
        await broker.stop()
