"""format("ebb") against a secured broker with the Kafka connector's options (kafka.security.protocol,
kafka.sasl.*, kafka.ssl.*): the driver's planning and group commits go through the project's client,
the executors' reads through the project's client too and their writes through librdkafka, and the
careful reader that takes over after a delete through the project's client again — all over SCRAM on
TLS, or TLS with a client certificate. The data is set up and checked over a PLAINTEXT listener of the same broker."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import Consumer
from pyspark.errors import PySparkException

from client.security_settings import security_settings
from tests.pipeline.helpers import create_topic, delete_records, produce, read_batch, rows_by_offset
from tests.pipeline.test_loop import group_offsets
from tests.pipeline.test_stream import run_collecting
from tests.security.certs import CertificateAuthority
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.scram_users import create_scram_user

pytestmark = pytest.mark.timeout(300)
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pipeline-secured")
    ca = CertificateAuthority(directory)
    server = ca.issue("server", server=True, CN="localhost")
    client = ca.issue("spark", server=False, O="Example", CN="spark")
    process = BrokerProcess(directory / "broker")
    process.sasl_ssl_port, process.mtls_port = free_port(), free_port()
    process.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SASL_SSL://127.0.0.1:{process.sasl_ssl_port},"
                     f"MTLS://127.0.0.1:{process.mtls_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.combined),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.location": str(ca.pem.cert),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
    })
    with process:
        create_scram_user(process.bootstrap, "spark", "spark-secret")
        process.scram = {
            "kafka.bootstrap.servers": f"localhost:{process.sasl_ssl_port}", "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": f'{SCRAM} required username="spark" password="spark-secret";',
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(ca.pem.cert)}
        process.mtls = {
            "kafka.bootstrap.servers": f"localhost:{process.mtls_port}", "kafka.security.protocol": "SSL",
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.certificates": ca.pem.cert.read_text(),
            "kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.location": str(client.combined)}
        yield process


@pytest.mark.parametrize("listener", ["scram", "mtls"])
def test_the_executors_librdkafka_settings_connect(secured, listener):
    """The settings the executors' librdkafka writers get, checked alone with a librdkafka client, so
    that a broken mapping shows here by name."""
    options = getattr(secured, listener)
    config = {"bootstrap.servers": options["kafka.bootstrap.servers"], "group.id": "sec-check",
              **security_settings(options, prefix="kafka.").librdkafka()}
    consumer = Consumer(config)
    try:
        brokers = consumer.list_topics(timeout=15).brokers
    finally:
        consumer.close()
    assert [b.port for b in brokers.values()] == [secured.sasl_ssl_port if listener == "scram" else secured.mtls_port]


def test_write_then_read_over_scram_on_tls(spark, secured):
    create_topic(secured.bootstrap, "sec-rw", partitions=2)
    rows = [(f"k{i}", f"v{i}") for i in range(200)]
    (spark.createDataFrame(rows, "key string, value string").write.format("ebb").mode("append")
     .options(**secured.scram, topic="sec-rw").save())

    df = spark.read.format("ebb").options(**secured.scram, subscribe="sec-rw").load()
    assert sorted(bytes(r.value).decode() for r in df.collect()) == sorted(v for _, v in rows)
    plain = read_batch(spark, secured.bootstrap, subscribe="sec-rw")  # what landed, seen over PLAINTEXT
    assert len(plain.collect()) == 200


def test_a_stream_commits_its_group_over_scram_on_tls(spark, secured, tmp_path):
    create_topic(secured.bootstrap, "sec-stream")
    produce(secured.bootstrap, {("sec-stream", 0): [b"a%d" % i for i in range(7)]})
    options = {**secured.scram, "subscribe": "sec-stream", "startingOffsets": "earliest",
               "kafka.group.id": "sec-stage"}
    df = spark.readStream.format("ebb").options(**options).load()
    batches, _ = run_collecting(df, tmp_path / "cp")
    assert [offset for batch in batches for _, offset, _ in batch] == list(range(7))
    assert group_offsets(secured.bootstrap, "sec-stage", "sec-stream", 1) == {0: 7}


def test_a_read_after_a_delete_with_a_client_certificate(spark, secured):
    """The fast reader meets deleted offsets and hands over to the careful reader: both present the
    client certificate the listener requires."""
    create_topic(secured.bootstrap, "sec-lost")
    produce(secured.bootstrap, {("sec-lost", 0): [b"r%d" % i for i in range(10)]})
    delete_records(secured.bootstrap, {("sec-lost", 0): 6})
    starting = '{"sec-lost": {"0": 2}}'
    with pytest.raises(PySparkException, match=re.escape("offsets 2 to 5 were deleted")):
        spark.read.format("ebb").options(**secured.mtls, subscribe="sec-lost", startingOffsets=starting).load() \
            .collect()
    skipped = spark.read.format("ebb").options(**secured.mtls, subscribe="sec-lost", startingOffsets=starting,
                                               failOnDataLoss="false").load()
    assert [o for _, _, o, _, _ in rows_by_offset(skipped)] == list(range(6, 10))


def test_a_wrong_password_fails_the_query(spark, secured):
    wrong = {**secured.scram, "kafka.sasl.jaas.config": f'{SCRAM} required username="spark" password="nope";'}
    with pytest.raises(PySparkException, match="Authentication failed during authentication due to invalid "
                                               "credentials with SASL mechanism SCRAM-SHA-512"):
        spark.read.format("ebb").options(**wrong, subscribe="sec-rw").load().collect()


def test_without_the_certificate_the_listener_requires_nothing_is_read(spark, secured):
    """TLS 1.3 reports a missing client certificate only by closing the connection after the handshake."""
    without_certificate = {k: v for k, v in secured.mtls.items() if not k.startswith("kafka.ssl.keystore")}
    with pytest.raises(PySparkException, match=f"no bootstrap server reachable: connection to "
                                               f"localhost:{secured.mtls_port}"):
        spark.read.format("ebb").options(**without_certificate, subscribe="sec-rw").load().collect()
