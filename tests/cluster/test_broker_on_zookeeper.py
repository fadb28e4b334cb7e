"""One broker process on a real ZooKeeper (`zookeeper.connect`): its metadata lives in ZooKeeper, it
survives SIGTERM and SIGKILL restarts, it refuses a node.id that a live broker holds (also one taken
while its logs loaded, before it registered), it registers again after its session expires, and it
stops with a clear error when ZooKeeper cannot be reached. Driven over the wire with the project's
codec; znodes checked with a plain kazoo client."""

from __future__ import annotations

import json
import select
import signal
import socket

import pytest
from kazoo.client import KazooClient

from broker.cluster.zookeeper import load_session
from broker.log.checkpoint import CLEAN_SHUTDOWN_FILE
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import DeleteTopicsRequest
from tests.broker.data_wire import WireClient, batch, create_topic, fetch, list_offsets_request, produce, values
from tests.broker.wire_client import metadata
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.held_load import HeldLoad
from tests.support.polling import wait_for
from tests.support.zookeeper import ZooKeeperServer
from tests.support.zookeeper_gate import ZooKeeperGate

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def kazoo(zk_server, chroot):
    """A plain kazoo client inside the test's chroot (made here: the broker would make it too)."""
    root = KazooClient(zk_server.connect)
    root.start(timeout=10)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    client = KazooClient(zk_server.connect + chroot)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def on_zookeeper(connect: str, **extra: str) -> dict[str, str]:
    return {"zookeeper.connect": connect, "zookeeper.session.timeout.ms": "6000", **extra}


def owner(kazoo: KazooClient, path: str) -> int | None:
    stat = kazoo.exists(path)
    return stat.ephemeralOwner if stat is not None else None


def read_all(broker: BrokerProcess, topic: str, partition: int) -> list[bytes]:
    with WireClient(broker.port) as client:
        return values(fetch(client, topic, partition, offset=0))


def test_metadata_lives_in_zookeeper_and_survives_restarts(zk_connect, kazoo, tmp_path):
    with BrokerProcess(tmp_path, on_zookeeper(zk_connect)) as broker:
        with WireClient(broker.port) as client:
            create_topic(client, "events", partitions=2, configs={"retention.ms": "86400000"})
            assert produce(client, "events", 1, batch([b"a", b"b"])).error_code == ErrorCode.NONE
            create_topic(client, "doomed")

        assignment = json.loads(kazoo.get("/brokers/topics/events")[0])
        assert assignment["partitions"] == {"0": [1], "1": [1]}
        state = json.loads(kazoo.get("/brokers/topics/events/partitions/1/state")[0])
        assert (state["leader"], state["isr"]) == (1, [1])
        assert json.loads(kazoo.get("/config/topics/events")[0])["config"] == {"retention.ms": "86400000"}
        cluster_id = json.loads(kazoo.get("/cluster/id")[0])["id"]
        registration = json.loads(kazoo.get("/brokers/ids/1")[0])
        assert (registration["host"], registration["port"]) == ("127.0.0.1", broker.port)
        assert owner(kazoo, "/brokers/ids/1")  # ephemeral
        assert not (broker.data_dir / "logs" / "ebb-metadata.json").exists()

        with WireClient(broker.port) as client:
            reply = client.send(DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=5000), 4)
            assert reply.responses[0].error_code == ErrorCode.NONE
        assert kazoo.exists("/brokers/topics/doomed") is None and kazoo.exists("/config/topics/doomed") is None
        assert kazoo.get_children("/admin/delete_topics") == []

        assert broker.stop(signal.SIGTERM) == 0, broker.log_text()  # -9: not stopped within 20 s, killed
        assert kazoo.exists("/brokers/ids/1") is None  # a clean stop ends the session: unregistered at once
        broker.start()
        assert read_all(broker, "events", 1) == [b"a", b"b"]
        assert kazoo.get_children("/brokers/topics") == ["events"]
        before_kill = owner(kazoo, "/brokers/ids/1")
        assert before_kill

        # SIGKILL leaves the old session (and its registration) on the server for up to 6 s; the
        # restarted broker ends that session, which it recorded in its log dir, at once, and registers
        # once its logs are loaded.
        broker.restart(signal.SIGKILL)
        assert read_all(broker, "events", 1) == [b"a", b"b"]
        assert owner(kazoo, "/brokers/ids/1") not in (None, before_kill)
        assert json.loads(kazoo.get("/cluster/id")[0])["id"] == cluster_id
        with WireClient(broker.port) as client:
            assert produce(client, "events", 1, batch([b"c"])).base_offset == 2
        assert "ending this broker's session from before its restart" in broker.log_text()


def test_a_second_broker_with_the_same_node_id_refuses_to_start(zk_connect, kazoo, tmp_path):
    with BrokerProcess(tmp_path / "first", on_zookeeper(zk_connect)) as first:
        registered = owner(kazoo, "/brokers/ids/1")
        second = BrokerProcess(tmp_path / "second", on_zookeeper(zk_connect))
        with pytest.raises(RuntimeError, match="broker exited with 2"):
            second.start()
        assert "node.id=1 is already registered by another live broker (NodeExists" in second.log_text()
        assert owner(kazoo, "/brokers/ids/1") == registered  # the first broker keeps its registration
        assert json.loads(kazoo.get("/brokers/ids/1")[0])["port"] == first.port
        with WireClient(first.port) as client:
            create_topic(client, "still-served")


def test_a_broker_loading_its_logs_is_not_registered_and_loses_its_node_id_to_one_that_is(zk_connect, kazoo,
                                                                                           tmp_path):
    """The registration waits for the logs: while the first broker's load is held, a second with the same
    node.id starts and registers; the first, once loaded, finds the id taken and exits as a duplicate does."""
    loading = BrokerProcess(tmp_path / "first", on_zookeeper(zk_connect))
    with HeldLoad(loading.data_dir / "logs") as load:
        try:
            loading.launch()
            wait_for(load.held, what="the first broker loading its logs")
            assert owner(kazoo, "/brokers/ids/1") is None
            with BrokerProcess(tmp_path / "second", on_zookeeper(zk_connect)) as second:
                registered = owner(kazoo, "/brokers/ids/1")
                assert registered
                load.release()
                assert loading.process is not None and loading.process.wait(30) == 2, loading.log_text()
                assert "node.id=1 is already registered by another live broker (NodeExists" in loading.log_text()
                assert owner(kazoo, "/brokers/ids/1") == registered
                with WireClient(second.port) as client:
                    create_topic(client, "served-by-the-second")
        finally:
            loading.stop(signal.SIGKILL)


def test_the_broker_registers_again_when_its_session_expires(zk_server, zk_connect, kazoo, tmp_path):
    with BrokerProcess(tmp_path, on_zookeeper(zk_connect)) as broker:
        session_file = broker.data_dir / "logs" / "zookeeper-session"
        old = load_session(session_file)
        assert owner(kazoo, "/brokers/ids/1") == old.session_id
        # Expire the broker's session as the server would: another client resumes it and closes it.
        thief = KazooClient(zk_server.connect, client_id=(old.session_id, old.password))
        thief.start(timeout=10)
        thief.stop()
        thief.close()
        new_owner = wait_for(lambda: owner(kazoo, "/brokers/ids/1") not in (None, old.session_id) and
                               owner(kazoo, "/brokers/ids/1"), what="the broker's new registration")
        assert wait_for(lambda: load_session(session_file).session_id == new_owner, what="the new session file")
        # the broker logs it once its registration is made, a moment after kazoo can see the node
        wait_for(lambda: "broker registered again after a new ZooKeeper session" in broker.log_text(),
                 what="the re-registration logged")
        with WireClient(broker.port) as client:  # and it serves as before
            # its view of the live brokers follows /brokers/ids by a watch, a moment after the registration
            wait_for(lambda: [b.node_id for b in metadata(client, []).brokers] == [1], what="itself among the brokers")
            create_topic(client, "after-expiry")
        assert kazoo.exists("/brokers/topics/after-expiry") is not None


def test_a_session_that_expires_while_the_logs_load_does_not_register_early(zk_server, zk_connect, kazoo, tmp_path):
    """The new session's listener leaves the registration to start-up, which makes it in the session of
    the moment once the logs are loaded."""
    broker = BrokerProcess(tmp_path, on_zookeeper(zk_connect))
    session_file = broker.data_dir / "logs" / "zookeeper-session"
    with HeldLoad(broker.data_dir / "logs") as load:
        try:
            broker.launch()
            wait_for(load.held, what="the broker loading its logs")
            old = load_session(session_file)
            thief = KazooClient(zk_server.connect, client_id=(old.session_id, old.password))
            thief.start(timeout=10)
            thief.stop()
            thief.close()
            new = wait_for(lambda: (found := load_session(session_file)).session_id != old.session_id and found,
                           what="the broker's new session recorded")
            assert owner(kazoo, "/brokers/ids/1") is None
            load.release()
            broker.wait_started()
            assert owner(kazoo, "/brokers/ids/1") == new.session_id
            assert "broker registered again after a new ZooKeeper session" not in broker.log_text()
        finally:
            load.end(broker)
            broker.stop()


def test_a_registered_broker_holds_connections_until_it_serves_them(zk_server, chroot, kazoo, tmp_path):
    """From its registration on, the broker is alive to the controller and listed by Metadata: a client
    connecting then is held, not refused, and answered once every service has started, as the leader it
    is. The broker is kept registered but not started by holding ZooKeeper's answers from its
    registration's create on (tests/support/zookeeper_gate.py): the node is made, the broker waits."""
    with ZooKeeperGate(zk_server.connect) as gate:
        # a long session: the held broker hears nothing from ZooKeeper meanwhile
        broker = BrokerProcess(tmp_path, on_zookeeper(gate.connect + chroot,
                                                      **{"zookeeper.session.timeout.ms": "30000"}))
        with broker:
            with WireClient(broker.port) as client:
                create_topic(client, "held")
                assert produce(client, "held", 0, batch([b"a", b"b"])).error_code == ErrorCode.NONE
        with HeldLoad(broker.data_dir / "logs") as load:
            try:
                broker.launch()
                wait_for(load.held, what="the broker loading its logs")  # its node id check is answered
                gate.close_after(b"/brokers/ids/1")
                load.release()
                wait_for(gate.closed_on.is_set, what="the broker registering")
                wait_for(lambda: kazoo.exists("/brokers/ids/1") is not None, what="the registration in ZooKeeper")
                with WireClient(broker.port) as client:  # refused when the listeners opened after the services
                    asked = client.submit(list_offsets_request("held", 0, -1), 7)
                    assert select.select([client.sock], [], [], 0.5)[0] == [], "answered by a broker not started"
                    gate.release()
                    [answer] = client.receive(ApiKey.LIST_OFFSETS, 7, asked).topics[0].partitions
                assert (answer.error_code, answer.offset) == (ErrorCode.NONE, 2)
            finally:
                gate.release()
                load.end(broker)
                broker.stop()


@pytest.mark.parametrize("taken", ["kafka", "metrics"])
def test_a_listener_port_in_use_stops_start_up_before_the_registration(zk_connect, kazoo, tmp_path, taken):
    """The listeners, the metrics endpoint's too, are bound before the broker registers: a port taken by
    another process stops start-up with the logs closed cleanly and without the broker having been alive
    to the controller at all."""
    metrics_port = free_port()
    broker = BrokerProcess(tmp_path, on_zookeeper(zk_connect, **{"ebb.metrics.listener":
                                                                 f"http://127.0.0.1:{metrics_port}"}))
    with broker, WireClient(broker.port) as client:
        create_topic(client, "kept")
    # Each child created or deleted moves the parent's cversion: a registration however brief shows (a
    # watch, being one-shot, can miss a create and delete that come together).
    children_changes = kazoo.exists("/brokers/ids").cversion
    with socket.create_server(("127.0.0.1", broker.port if taken == "kafka" else metrics_port)):
        with pytest.raises(RuntimeError, match="broker exited with 1"):
            broker.start()
    log_text = broker.log_text()
    assert "cannot start" in log_text and "address already in use" in log_text, log_text
    assert "start-up failed: stopping what had started" in log_text
    assert (broker.data_dir / "logs" / CLEAN_SHUTDOWN_FILE).exists(), log_text
    assert kazoo.exists("/brokers/ids").cversion == children_changes


async def test_a_failed_start_ends_the_registration_before_the_logs_close(zk_connect, kazoo, tmp_path, monkeypatch):
    """A start that fails once the broker is registered (here the Cluster's start) ends the registration
    before the logs' shutdown, which takes seconds with many partitions: the controller does not count on
    the broker meanwhile."""
    from broker.app import Broker
    from broker.cluster.cluster import Cluster
    from broker.config import load_config
    from broker.log.manager import LogManager

    async def failing_start(self) -> None:
        assert kazoo.exists("/brokers/ids/1") is not None, "the broker was not registered before its services"
        raise RuntimeError("the Cluster failed to start")

    registered_at_logs_shutdown = []
    real_shutdown = LogManager.shutdown

    async def probed_shutdown(self) -> None:
        registered_at_logs_shutdown.append(kazoo.exists("/brokers/ids/1") is not None)
        await real_shutdown(self)

    monkeypatch.setattr(Cluster, "start", failing_start)
    monkeypatch.setattr(LogManager, "shutdown", probed_shutdown)
    settings = {"log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:0", "node.id": "1",
                **on_zookeeper(zk_connect)}
    broker = Broker(load_config(None, [f"{key}={value}" for key, value in settings.items()]))
    with pytest.raises(RuntimeError, match="the Cluster failed to start"):
        await broker.start()
    assert registered_at_logs_shutdown == [False]
    assert (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()


def test_unreachable_zookeeper_stops_start_up_with_a_clear_error(tmp_path):
    broker = BrokerProcess(tmp_path, {"zookeeper.connect": f"127.0.0.1:{free_port()}",
                                      "zookeeper.connection.timeout.ms": "1000"})
    with pytest.raises(RuntimeError, match="broker exited with 1"):
        broker.start()
    assert "could not connect to ZooKeeper at 127.0.0.1:" in broker.log_text()
    assert "zookeeper.connection.timeout.ms" in broker.log_text()


def test_zookeeper_lost_while_the_logs_load_stops_start_up_with_the_logs_closed_cleanly(tmp_path):
    """ZooKeeper goes away while the logs load (its own server here, so that stopping it leaves the other
    tests theirs): the registration after the load fails and start-up stops, and the logs it had loaded
    and recovered are closed cleanly, so the next start does not recover them all again."""
    server = ZooKeeperServer(tmp_path / "zookeeper").start()
    try:
        broker = BrokerProcess(tmp_path / "broker", on_zookeeper(server.connect + "/lost"))
        with broker:
            with WireClient(broker.port) as client:
                create_topic(client, "kept")
                assert produce(client, "kept", 0, batch([b"x"])).error_code == ErrorCode.NONE
        marker = broker.data_dir / "logs" / CLEAN_SHUTDOWN_FILE
        with HeldLoad(broker.data_dir / "logs") as load:
            try:
                broker.launch()
                wait_for(load.held, what="the broker loading its logs")
                server.stop()
                load.release()
                assert broker.process is not None and broker.process.wait(60) == 1, broker.log_text()
            finally:
                load.end(broker)
                broker.stop(signal.SIGKILL)
        assert "start-up failed: stopping what had started" in broker.log_text()
        assert marker.exists(), broker.log_text()
    finally:
        server.stop()
