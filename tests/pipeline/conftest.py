"""Fixtures for the pipeline tests: one real broker process and one local SparkSession for the package.

Spark costs about 10 s to start and a few more for its first Python workers, so the session is
shared by every test here and stopped after the last one. Tests use their own topic names.
Outside CI, a machine without pyspark (pip install -e '.[pipeline]') or Java 17+ does not collect
these tests; in CI (CI=true) they run and fail loudly instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess

if not os.environ.get("CI") and (importlib.util.find_spec("pyspark") is None or shutil.which("java") is None):
    collect_ignore_glob = ["test_*.py"]


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
