# Ebb broker image: `make docker` builds it, `make cluster` runs ZooKeeper and three brokers with it
# (docker-compose.yml). The broker takes Kafka's property names as `--override key=value` arguments.
FROM python:3.11-slim

WORKDIR /opt/ebb
COPY pyproject.toml README.md ./
COPY protocol protocol
COPY schemas schemas
COPY broker broker
COPY client client
COPY pipeline pipeline
# The broker's own dependencies only: the pipeline's pyspark and the test tools are extras.
RUN pip install --no-cache-dir . && useradd --system --home-dir /var/lib/ebb ebb \
    && mkdir -p /var/lib/ebb && chown ebb /var/lib/ebb
USER ebb
VOLUME /var/lib/ebb
EXPOSE 9092
# Logs are JSON lines when stdout is not a terminal (structlog).
ENTRYPOINT ["ebb", "broker", "--override", "log.dirs=/var/lib/ebb/data"]
