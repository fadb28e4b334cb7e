"""Fixtures for the pipeline tests: one real broker process and one local SparkSession for the package.

Spark costs about 10 s to start and a few more for its first Python workers, so the session is
shared by every test here and stopped after the last one. Tests use their own topic names.
They need pyspark (pip install -e '.[pipeline]'), Java 17+ and the connector jars `make test` fetches;
without them they fail rather than disappear.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="package")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("pipeline-broker")) as process:
        yield process


CONNECTOR_JARS = Path(__file__).parent / "spark_kafka" / "target" / "jars"


@pytest.fixture(scope="package")
def spark():
    from pipeline.session import local_session

    # Spark's own Kafka connector too (make test fetches it), for test_spark_kafka.py
    jars = sorted(CONNECTOR_JARS.glob("*.jar"))
    assert jars, f"no Kafka connector jars in {CONNECTOR_JARS}: run make test (or mvn -q package there)"
    session = local_session("ebb-tests", conf={"spark.jars": ",".join(map(str, jars))})
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="package")
def bootstrap(broker) -> str:
    return broker.bootstrap
