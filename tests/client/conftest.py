"""Shared fixtures for the client tests: a real Ebb broker process for the tests that need one."""

from __future__ import annotations

import pytest

from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def ebb_broker(tmp_path_factory):
    """One broker per test module; tests use their own topic names."""
    with BrokerProcess(tmp_path_factory.mktemp("ebb-broker")) as broker:
        yield broker
