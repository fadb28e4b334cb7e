"""The broker process most modules here talk to: one per module, started with the module's
`broker_overrides` (Kafka property names), and a wire client per test."""

from __future__ import annotations

import pytest

from tests.broker.data_wire import WireClient
from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    return {}


@pytest.fixture(scope="module")
def broker(tmp_path_factory, request, broker_overrides):
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    with BrokerProcess(tmp_path_factory.mktemp(name), broker_overrides) as process:
        yield process


@pytest.fixture
def client(broker):
    with WireClient(broker.port) as c:
        yield c
