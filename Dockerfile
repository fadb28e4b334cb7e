# Ebb broker image: `make docker` builds it, `make cluster` runs ZooKeeper and three brokers with it
# (docker-compose.yml). The broker takes Kafka's property names as `--override key=value` arguments.
# The base comes from an ARG so that a machine without a registry can build from a local image
# (`make cluster` builds one with ops/cluster.py when no registry answers):
# docker build --build-arg BASE_IMAGE=my-python:3.11 .
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

WORKDIR /opt/ebb
# The dependencies first, in a layer of their own: a code change reuses it instead of reinstalling
# them (the broker's own only: the pipeline's pyspark and the test tools are extras).
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt && rm /tmp/requirements.txt
COPY protocol protocol
COPY schemas schemas
COPY broker broker
COPY client client
COPY pipeline pipeline
# setup.py is left out: the slim base has no C compiler, so the image reads Produce requests and checks
# their batches in Python (protocol/_produce_read.c and _batch_scan.c are the compiled fast paths of
# those steps: same answers, more CPU per request)
RUN pip install --no-cache-dir --no-deps . && useradd --system --home-dir /var/lib/ebb ebb \
    && mkdir -p /var/lib/ebb && chown ebb /var/lib/ebb
USER ebb
VOLUME /var/lib/ebb
# 9092: Kafka clients; 9404: /metrics when ebb.metrics.listener is set
EXPOSE 9092 9404
# Logs are JSON lines when stdout is not a terminal (structlog).
ENTRYPOINT ["ebb", "broker", "--override", "log.dirs=/var/lib/ebb/data"]
