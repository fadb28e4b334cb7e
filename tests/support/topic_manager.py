"""A TopicManager on an embedded store and a log dir under `tmp_path`, for unit tests of topic changes:

    async with embedded_topics(tmp_path) as (topics, logs):
        await topics.create("t", 2, 1)
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from broker.cluster.store import EmbeddedStore
from broker.config import BrokerConfig, load_config
from broker.dynamic_config import DynamicBrokerConfig
from broker.log import LogManager
from broker.topics import TopicManager


def broker_config(tmp_path: Path) -> BrokerConfig:
    return load_config(None, [f"log.dirs={tmp_path / 'logs'}", "listeners=PLAINTEXT://127.0.0.1:0", "node.id=1"])


@contextlib.asynccontextmanager
async def embedded_topics(tmp_path: Path, *, controlled_deletion: bool = False
                          ) -> AsyncIterator[tuple[TopicManager, LogManager]]:
    """`controlled_deletion`: a cluster broker's deletion (marked, left to the controller)."""
    config = broker_config(tmp_path)
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    dynamic = DynamicBrokerConfig(store, config)
    await dynamic.load()
    logs = LogManager(tmp_path / "logs")
    await logs.startup(background_tasks=False)
    try:
        yield TopicManager(store, logs, config, dynamic, brokers=lambda: {1: None},
                           controlled_deletion=controlled_deletion), logs
    finally:
        await logs.shutdown()
