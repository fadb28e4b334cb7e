"""A fresh Apache Kafka node (from the jars tests/interop/java pins) and a fresh Ebb broker per module."""

from __future__ import annotations

import pytest

from tests.differential.runner import TALLY, Peer
from tests.interop.conftest import TARGET, build
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_node import KafkaNode


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    """Broker properties both brokers start with (a module overrides this fixture)."""
    return {}


@pytest.fixture(scope="module")
def kafka_peer(tmp_path_factory, broker_overrides):
    build()  # Maven fetches the jars (cached) unless they are there already
    with KafkaNode(tmp_path_factory.mktemp("kafka"), f"{TARGET / 'lib'}/*", broker_overrides) as kafka:
        peer = Peer("kafka", kafka.port)
        yield peer
        peer.close()


@pytest.fixture(scope="module")
def ebb_peer(tmp_path_factory, broker_overrides):
    with BrokerProcess(tmp_path_factory.mktemp("ebb"), broker_overrides) as broker:
        peer = Peer("ebb", broker.port)
        yield peer
        peer.close()


def pytest_terminal_summary(terminalreporter) -> None:
    if TALLY.pairs:
        terminalreporter.write_line(
            f"Kafka as the judge: {TALLY.scenarios} scenarios, {TALLY.pairs} request/answer pairs: "
            f"{TALLY.equal} equal, {TALLY.allowed} with allowed differences only, {TALLY.differing} differing")
