"""Three brokers that talk to each other only over SASL_SSL: each has a PLAINTEXT listener for the
test's clients and an INTERNAL listener (SASL_SSL, SCRAM-SHA-512, certificates from the test's own CA)
that the others replicate from, with the ACL authorizer on. Replication, acks=all, an all-replica
DeleteRecords and a transaction's markers (WriteTxnMarkers) work through it, and the followers'
fetches are authenticated as the broker user."""

from __future__ import annotations

import pytest

from tests.broker.data_wire import WireClient, batch, delete_records, produce
from tests.cluster.test_transactions_cluster import producer, read_committed, spread_topic, stable_everywhere, write
from tests.cluster.three_brokers import NODES, E, leader_of, new_topic, start_offset_checkpoint, three_brokers
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
