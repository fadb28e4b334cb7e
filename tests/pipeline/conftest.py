"""Fixtures for the pipeline tests: one real broker process and one local SparkSession for the package.

Spark costs about 10 s to start and a few more for its first Python workers, so the session is
shared by every test here and stopped after the last one. Tests use their own topic names.
They need pyspark (pip install -e '.[pipeline]'), Java 17+ and the connector jars `make test` fetches;
without them they fail rather than disappear.
"""

from __future__ import annotations

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.spark_kafka import connector_conf


@pytest.fixture(scope="package")
def broker(tmp_path_factory):
    # Several tests here write records with fixed CreateTimes of November 2023, older than the default
    # retention.ms (7 days). A retention pass (30 s after start-up, then every 5 minutes) rolls and
    # deletes even the active segment when everything in it is that old, as Kafka's does: a pass that
    # fell between a test's produce and its read deleted what it was about to read (CI: test_fast_read,
    # the broker's log shows the pass). No test in this package is about retention by time.
    # Ebb-only: the loop and demo tests keep segments below Kafka's 1 MiB minimum, so that the trim shows.
    with BrokerProcess(tmp_path_factory.mktemp("pipeline-broker"),
                       {"log.retention.ms": "-1", "ebb.testing.small.segments.enable": "true",
                        "log.cleaner.backoff.ms": "200"}) as process:
        yield process


@pytest.fixture(scope="package")
def spark():
    from pipeline.session import local_session

    session = local_session("ebb-tests", conf=connector_conf())  # format("kafka") too, for test_spark_kafka.py
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="package")
def bootstrap(broker) -> str:
    return broker.bootstrap
