"""A whole one-node broker in the test's own event loop (broker/app.py's Broker, listening on a free
port of 127.0.0.1), for tests that drive its services directly rather than over the wire."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from broker.app import Broker
from broker.config import BrokerConfig, build_config


def one_node_config(tmp_path: Path, settings: Mapping[str, str]) -> BrokerConfig:
    """Node 1 with its logs under `tmp_path`, and `settings` over the defaults."""
    return build_config({"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
                         **settings})


@asynccontextmanager
async def whole_broker(config: BrokerConfig, topics: Mapping[str, int]) -> AsyncIterator[Broker]:
    """The broker started, with `topics` (name: partitions) created; stopped after."""
    broker = Broker(config)
    await broker.start()
    try:
        for name, partitions in topics.items():
            await broker.topics.create(name, partitions, 1)
        yield broker
    finally:
        await broker.stop()
