"""Three brokers that talk to each other only over SASL_SSL: each has a PLAINTEXT listener for the
test's clients and an INTERNAL listener (SASL_SSL, SCRAM-SHA-512, certificates from the test's own CA)
that the others replicate from, with the ACL authorizer on and 3 s SASL sessions (KIP-368). Replication,
acks=all, an all-replica DeleteRecords and a transaction's markers (WriteTxnMarkers) work through it, and the followers'
fetches are authenticated as the broker user. And over an SSL inter-broker listener that asks for client
certificates, every broker's key material is rotated at runtime to another CA's (keystores, then
truststores trusting that CA alone): replication started afterwards works, so the brokers' own new
connections to each other present and trust the rotated material."""

from __future__ import annotations

import pytest

from tests.broker.data_wire import WireClient, batch, delete_records, produce
from tests.broker.test_configs import BROKER, SET, _incremental
from tests.cluster.test_transactions_cluster import producer, read_committed, spread_topic, stable_everywhere, write
from tests.cluster.three_brokers import (
    NODES,
    E,
    leader_of,
    new_topic,
    segment_batches,
    start_offset_checkpoint,
    three_brokers,
)
from tests.security.certs import CertificateAuthority
from tests.support.broker_process import free_port
from tests.support.polling import wait_for
from tests.support.scram_users import create_scram_user

pytestmark = pytest.mark.timeout(180)
BROKER_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
               'password="broker-secret";')


def secure_settings(directory) -> tuple[dict[str, str], dict[int, dict[str, str]]]:
    """Settings for every broker, and each broker's two listeners ("{port}": its PLAINTEXT client port)."""
    ca = CertificateAuthority(directory)
    server = ca.issue("server", server=True, CN="localhost")
    shared = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": BROKER_JAAS,
        # KIP-368: 3 s sessions, which the brokers' own connections retire before (client/connection.py)
        "listener.name.internal.scram-sha-512.connections.max.reauth.ms": "3000",
        "ssl.keystore.location": str(server.combined),
        "ssl.truststore.location": str(ca.pem.cert),
        # With the authorizer on, followers fetch as User:broker (a super user: CLUSTER_ACTION); the test's
        # own clients come in on the PLAINTEXT listener as User:ANONYMOUS, made a super user here too.
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker;User:ANONYMOUS",
    }
    listeners = {n: {"listeners": f"PLAINTEXT://127.0.0.1:{{port}},INTERNAL://127.0.0.1:{free_port()}"}
                 for n in NODES}
    return shared, listeners


def test_replication_and_deletion_over_sasl_ssl(zk_connect, tmp_path):
    shared, listeners = secure_settings(tmp_path)
    with three_brokers(zk_connect, tmp_path, extra=shared, per_node=listeners) as cluster:
        # The brokers' own user; until it exists their fetches from each other fail authentication.
        create_scram_user(cluster[1].bootstrap, "broker", "broker-secret")
        topic = new_topic(cluster, prefix="secure")  # waits for three replicas in sync: fetched over SASL_SSL
        leader = leader_of(cluster, topic)
        with WireClient(leader.port) as client:
            reply = produce(client, topic, 0, batch([b"r%d" % i for i in range(10)]), acks=-1)
            assert (reply.error_code, reply.base_offset) == (E.NONE, 0)
            deleted = delete_records(client, topic, 0, 6, timeout_ms=10_000)
        assert (deleted.error_code, deleted.low_watermark) == (E.NONE, 6)
        wait_for(lambda: all(start_offset_checkpoint(b, topic) == 6 for b in cluster.values()),
                 what="every replica's log-start-offset-checkpoint at 6")
        assert '"principal": "User:broker", "mechanism": "SCRAM-SHA-512"' in leader.log_text()

        # A transaction over three leaders: the coordinator's markers for the partitions led elsewhere
        # travel as WriteTxnMarkers over SASL_SSL as User:broker (CLUSTER_ACTION as a super user).
        spread = spread_topic(cluster)
        made = producer(cluster, "secure-txn")
        made.begin_transaction()
        write(made, spread, "secure")
        made.commit_transaction(60)
        wait_for(lambda: stable_everywhere(cluster, spread), timeout_s=30, what="the LSO at the HW everywhere")
        assert read_committed(cluster, spread) == [b"secure-0", b"secure-1", b"secure-2"]
        # the brokers outlived several sessions of their connections to each other, none closed as expired
        assert all("SASL session expired" not in b.log_path.read_text() for b in cluster.values())


def test_replication_after_the_inter_broker_key_material_is_rotated(zk_connect, tmp_path):
    authorities = []
    for name in ("old", "new"):
        (tmp_path / name).mkdir()
        authorities.append(CertificateAuthority(tmp_path / name, name=f"Ebb {name} CA"))
    old_ca, new_ca = authorities
    both = tmp_path / "both-cas.pem"
    both.write_text(old_ca.pem.cert.read_text() + new_ca.pem.cert.read_text())
    old = old_ca.issue("server", server=True, O="Ebb tests", CN="localhost")
    new = new_ca.issue("server", server=True, O="Ebb tests", CN="localhost")
    shared = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
              "inter.broker.listener.name": "INTERNAL", "listener.name.internal.ssl.client.auth": "required",
              "ssl.keystore.type": "PEM", "ssl.keystore.location": str(old.combined),
              "ssl.truststore.type": "PEM", "ssl.truststore.location": str(both)}
    listeners = {n: {"listeners": f"PLAINTEXT://127.0.0.1:{{port}},INTERNAL://127.0.0.1:{free_port()}"}
                 for n in NODES}
    with three_brokers(zk_connect, tmp_path, extra=shared, per_node=listeners) as cluster:
        # As an operator rotates a CA: every broker's certificate first, then every truststore.
        for key, value in (("ssl.keystore.location", new.combined), ("ssl.truststore.location", new_ca.pem.cert)):
            for n, broker in cluster.items():
                with WireClient(broker.port) as admin:
                    result = _incremental(admin, str(n), [(f"listener.name.internal.{key}", SET, str(value))],
                                          resource_type=BROKER)
                assert result.error_code == E.NONE, result.error_message
        # The brokers' first connections to each other: they only work with the new material on both ends.
        topic = new_topic(cluster, prefix="rotated")
        with WireClient(leader_of(cluster, topic).port) as client:
            reply = produce(client, topic, 0, batch([b"after rotation"]), acks=-1)
        assert reply.error_code == E.NONE
        wait_for(lambda: all(len(segment_batches(b, topic)) == 1 for b in cluster.values()),
                 what="the record replicated to every broker over the rotated INTERNAL listener")
