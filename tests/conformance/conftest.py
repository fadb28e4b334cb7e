"""Fixtures for the conformance suite: a real broker process, driven by unmodified Kafka clients.

By default each test module starts its own Ebb broker (`python -m broker`, see
tests/support/broker_process.py) on a free loopback port with a fresh data directory.

EBB_CONFORMANCE_BOOTSTRAP=host:port points the client flows and the bad-input test at a broker that
is already running instead (another build of Ebb, or a peer broker to check the tests themselves).
The restart tests need a process they can signal, so they skip in that mode.

A test marked `@pytest.mark.apis("DeleteRecords", ...)` needs those APIs advertised in ApiVersions:
against Ebb a missing one fails the test (Ebb advertises exactly what it has a handler for, so that
is a regression); against an external broker the test is skipped, naming the API.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from client.probe import api_versions
from tests.support.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP_ENV = "EBB_CONFORMANCE_BOOTSTRAP"

API_KEYS = {
    "Produce": 0,
    "Fetch": 1,
    "ListOffsets": 2,
    "Metadata": 3,
    "ApiVersions": 18,
    "CreateTopics": 19,
    "DeleteTopics": 20,
    "DeleteRecords": 21,
    "InitProducerId": 22,
    "DescribeConfigs": 32,
    "AlterConfigs": 33,
    "IncrementalAlterConfigs": 44,
}


@dataclass
class Broker:
    bootstrap: str
    process: BrokerProcess | None  # None: an external broker named by EBB_CONFORMANCE_BOOTSTRAP

    @property
    def host(self) -> str:
        return self.bootstrap.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])


def external_bootstrap() -> str | None:
    return os.environ.get(BOOTSTRAP_ENV) or None


def advertised_apis(bootstrap: str, timeout_s: float = 5.0) -> dict[int, tuple[int, int]]:
    """{api_key: (min_version, max_version)} as the broker at `bootstrap` advertises them."""
    host, port = bootstrap.rsplit(":", 1)
    return api_versions(host, int(port), timeout_s, client_id="conformance-probe")


_advertised: dict[str, dict[int, tuple[int, int]]] = {}


def pytest_configure(config):
    config.addinivalue_line("markers", "apis(*names): APIs the test needs (missing: fails on Ebb, skips elsewhere)")


@pytest.fixture(autouse=True)
def _require_advertised_apis(request):
    names = sorted({name for marker in request.node.iter_markers("apis") for name in marker.args})
    if not names:
        return
    fixture = "broker_process" if "broker_process" in request.fixturenames else "broker"
    bootstrap = request.getfixturevalue(fixture).bootstrap
    if bootstrap not in _advertised:
        _advertised[bootstrap] = advertised_apis(bootstrap)
    missing = [name for name in names if API_KEYS[name] not in _advertised[bootstrap]]
    if missing and external_bootstrap():
        pytest.skip(f"the broker at {bootstrap} does not advertise {', '.join(missing)}")
    assert not missing, f"Ebb stopped advertising {', '.join(missing)}"


@pytest.fixture(scope="module")
def broker_overrides() -> dict[str, str]:
    """Broker properties a module's broker starts with (a module overrides this fixture)."""
    return {}


@pytest.fixture(scope="module")
def broker(tmp_path_factory, request, broker_overrides):
    """One broker for the whole module: the client flows are ordered steps on one topic."""
    bootstrap = external_bootstrap()
    if bootstrap:
        yield Broker(bootstrap, None)
        return
    process = BrokerProcess(tmp_path_factory.mktemp("broker"), broker_overrides)
    process.start()
    request.node.conformance_broker = process
    try:
        yield Broker(process.bootstrap, process)
    finally:
        process.stop()


@pytest.fixture
def broker_process(tmp_path, request):
    """A broker process of the test's own, to stop and restart (restart tests)."""
    if external_bootstrap():
        pytest.skip(f"restart tests start and signal their own broker; {BOOTSTRAP_ENV} names an external one")
    process = BrokerProcess(tmp_path / "broker")
    request.node.conformance_broker = process
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the tail of the broker's log to a failing test's report."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for node in (item, item.parent):
        process = getattr(node, "conformance_broker", None)
        if process is not None:
            report.sections.append(("broker log (tail)", process.log_text()))
            return
