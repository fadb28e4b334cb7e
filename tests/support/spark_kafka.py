"""Where `make test` and `make bench` put Spark's own Kafka connector (tests/pipeline/spark_kafka/pom.xml),
as the Spark setting that loads it."""

from __future__ import annotations

from pathlib import Path

CONNECTOR_JARS = Path(__file__).parents[1] / "pipeline" / "spark_kafka" / "target" / "jars"


def connector_conf() -> dict[str, str]:
    """{"spark.jars": ...} for a session that also runs format("kafka"); FileNotFoundError without the jars."""
    jars = sorted(CONNECTOR_JARS.glob("*.jar"))
    if not jars:
        raise FileNotFoundError(f"no Kafka connector jars in {CONNECTOR_JARS}: run make test (or mvn -q package "
                                f"there)")
    return {"spark.jars": ",".join(map(str, jars))}
