"""A fresh Apache Kafka node (from the jars tests/interop/java pins) and a fresh Ebb broker per module."""

from __future__ import annotations

import concurrent.futures

import pytest

from tests.differential.runner import Peer
from tests.interop.conftest import TARGET, build
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_node import KafkaNode


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    """Broker properties both brokers start with (a module overrides this fixture)."""
    return {}


@pytest.fixture(scope="module")
def kafka_starting(tmp_path_factory, broker_overrides):
    """The module's Kafka node, starting in a thread (kafka_peer waits for it), so that the Ebb broker
    starts meanwhile: ebb_peer asks for it first, and every module here uses both."""
    build()  # Maven fetches the jars (cached) unless they are there already
    kafka = KafkaNode(tmp_path_factory.mktemp("kafka"), f"{TARGET / 'lib'}/*", broker_overrides)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        starting = pool.submit(kafka.start)
        try:
            yield starting
        finally:
            concurrent.futures.wait([starting])  # a failed start fails kafka_peer, and stopped itself
            kafka.stop()


@pytest.fixture(scope="module")
def kafka_peer(kafka_starting):
    peer = Peer("kafka", kafka_starting.result().port)
    yield peer
    peer.close()


@pytest.fixture(scope="module")
def ebb_peer(tmp_path_factory, broker_overrides, kafka_starting):
    with BrokerProcess(tmp_path_factory.mktemp("ebb"), broker_overrides) as broker:
        peer = Peer("ebb", broker.port)
        yield peer
        peer.close()

