"""A fresh Apache Kafka node (from the jars tests/interop/java pins) and a fresh Ebb broker per module."""

from __future__ import annotations

import pytest

from tests.differential.runner import Peer
from tests.interop.conftest import TARGET, build
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_node import KafkaNode


@pytest.fixture(scope="module")
def kafka_peer(tmp_path_factory):
    build()  # Maven fetches the jars (cached) unless they are there already
    with KafkaNode(tmp_path_factory.mktemp("kafka"), f"{TARGET / 'lib'}/*") as kafka:
        peer = Peer("kafka", kafka.port)
        yield peer
        peer.close()


@pytest.fixture(scope="module")
def ebb_peer(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("ebb")) as broker:
        peer = Peer("ebb", broker.port)
        yield peer
        peer.close()
