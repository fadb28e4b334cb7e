"""What only the ZooKeeper store has: a chroot, sessions (expiry, a crashed broker's leftover
registration, a live duplicate), an unreachable server, and a server restart. Real ZooKeeper; nodes
are checked with a plain kazoo client."""

from __future__ import annotations

import asyncio

import pytest
from kazoo.client import KazooClient

from broker.cluster.store import NodeExists, StoreUnavailable
from broker.cluster.zookeeper import Session, ZooKeeperStore, load_session, save_session
from tests.cluster.helpers import eventually
from tests.support.broker_process import free_port
from tests.support.zookeeper import ZooKeeperServer


@pytest.fixture
def kazoo(zk_server):
    client = KazooClient(zk_server.connect)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


async def expire(connect: str, session: Session) -> None:
    """End `session` from another client, as the server does when it times out."""
    def run():
        client = KazooClient(connect, client_id=(session.session_id, session.password))
        client.start(timeout=10)
        client.stop()
        client.close()

    await asyncio.get_running_loop().run_in_executor(None, run)


async def test_a_missing_nested_chroot_is_created_and_holds_everything(zk_server, chroot, kazoo):
    store = await ZooKeeperStore.open(f"{zk_server.connect}{chroot}/ebb")
    try:
        await store.create("/cluster/id", b"x")
        assert kazoo.get(f"{chroot}/ebb/cluster/id")[0] == b"x"
        assert kazoo.get_children(chroot) == ["ebb"]
    finally:
        await store.close()


async def test_ephemeral_nodes_belong_to_the_session(zk_connect, chroot, kazoo):
    store = await ZooKeeperStore.open(zk_connect)
    await store.create("/brokers/ids/7", b"me", ephemeral=True)
    stat = kazoo.exists(f"{chroot}/brokers/ids/7")
    assert stat.ephemeralOwner == store.session.session_id
    await store.close()
    assert kazoo.exists(f"{chroot}/brokers/ids/7") is None  # closing ended the session at once


async def test_another_live_session_keeps_its_registration(zk_connect):
    live = await ZooKeeperStore.open(zk_connect)
    other = await ZooKeeperStore.open(zk_connect)
    try:
        await live.register("/brokers/ids/1", b"live")
        with pytest.raises(NodeExists, match=f"0x{live.session.session_id:x}"):
            await other.register("/brokers/ids/1", b"duplicate")
        assert (await other.get("/brokers/ids/1"))[0] == b"live"
    finally:
        await other.close()
        await live.close()


async def test_a_restart_ends_its_previous_session_to_take_back_its_registration(zk_connect, tmp_path):
    crashed, restarted = await _crashed_and_restarted(zk_connect, tmp_path)
    try:
        await restarted.register("/brokers/ids/1", b"after")
        assert (await restarted.get("/brokers/ids/1"))[0] == b"after"
        assert await _owner(restarted, "/brokers/ids/1") == restarted.session.session_id
    finally:
        await restarted.close()
        await crashed.close()


async def _crashed_and_restarted(zk_connect: str, tmp_path) -> tuple[ZooKeeperStore, ZooKeeperStore]:
    """A store that registered broker 1 and recorded its session, then one started with that session as
    its previous one. The first is never closed, as after SIGKILL: the server would keep its node for 30 s."""
    crashed = await ZooKeeperStore.open(zk_connect, session_timeout_ms=30000)
    await crashed.register("/brokers/ids/1", b"before the crash")
    await save_session(tmp_path / "session", crashed.session)
    return crashed, await ZooKeeperStore.open(zk_connect, previous_session=load_session(tmp_path / "session"))


async def test_freeing_the_registration_before_it_is_made(zk_connect, tmp_path):
    """A restarted broker frees its node id long before it registers (its logs load in between): the
    node its crashed run left goes at once, a live duplicate's stays and is NodeExists."""
    crashed, restarted = await _crashed_and_restarted(zk_connect, tmp_path)
    live = await ZooKeeperStore.open(zk_connect)
    try:
        await restarted.free_registration("/brokers/ids/1")
        assert not await restarted.exists("/brokers/ids/1")  # not alive while its logs load
        await restarted.free_registration("/brokers/ids/1")  # nothing there: nothing to do
        await live.register("/brokers/ids/1", b"live")  # another broker took the id meanwhile
        held_by_live = f"0x{live.session.session_id:x}"
        for attempt in (lambda: restarted.free_registration("/brokers/ids/1"),
                        lambda: restarted.register("/brokers/ids/1", b"after")):
            with pytest.raises(NodeExists, match=held_by_live):
                await attempt()
        assert await _owner(restarted, "/brokers/ids/1") == live.session.session_id
    finally:
        await live.close()
        await restarted.close()
        await crashed.close()


async def test_a_new_session_after_expiry_runs_the_listeners_and_keeps_watches(zk_server, zk_connect):
    store = await ZooKeeperStore.open(zk_connect, session_timeout_ms=6000)
    try:
        await store.register("/brokers/ids/1", b"registration")
        seen = []
        await store.watch_children("/brokers/ids", seen.append)
        sessions = []

        async def registered_again():
            sessions.append(store.session)
            await store.register("/brokers/ids/1", b"registration")

        store.add_session_listener(registered_again)
        first = store.session
        await expire(zk_server.connect, first)
        await eventually(lambda: sessions, what="the session listener")
        assert sessions == [store.session] and store.session != first
        owner = await eventually(lambda: _owner(store, "/brokers/ids/1"))
        assert owner == store.session.session_id
        # The node went and came back while the client was between sessions: a watch may report that as
        # nothing at all (the latest state is what counts). It is armed again in the new session:
        await store.create("/brokers/ids/2")
        await eventually(lambda: seen[-1] == ["1", "2"], what=f"a change after the new session ({seen})")
    finally:
        await store.close()


async def _owner(store: ZooKeeperStore, path: str) -> int | None:
    stat = await store._call(path, store._client.exists_async, path)
    return stat.ephemeralOwner if stat is not None else None


async def test_no_server_is_store_unavailable_after_the_connection_timeout():
    with pytest.raises(StoreUnavailable, match="zookeeper.connection.timeout.ms"):
        await ZooKeeperStore.open(f"127.0.0.1:{free_port()}", session_timeout_ms=6000, connection_timeout_ms=500)


async def test_requests_wait_for_a_restarted_server_and_the_session_survives(tmp_path):
    with ZooKeeperServer(tmp_path / "zk") as server:
        store = await ZooKeeperStore.open(server.connect, session_timeout_ms=20000)
        try:
            await store.register("/brokers/ids/1", b"me")
            session = store.session
            server.stop()
            await eventually(lambda: not store._connected.is_set(), what="the store to notice")
            pending = asyncio.ensure_future(store.create("/written/while/down", b"w"))
            server.start()
            await asyncio.wait_for(pending, 30)
            assert store.session == session  # the server restored the session: same owner, no re-registration
            assert await store.get("/written/while/down") == (b"w", 0)
            assert await _owner(store, "/brokers/ids/1") == session.session_id
        finally:
            await store.close()
