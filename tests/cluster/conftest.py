"""Fixtures for the cluster tests: one real ZooKeeper server for the whole package, and the metadata
store under test — EmbeddedStore or ZooKeeperStore, each test in its own chroot.

Outside CI a machine without Java or Debian's `zookeeper` package skips the ZooKeeper tests (`make
test` installs the package); in CI (CI=true) that is an error.
"""

from __future__ import annotations

import uuid

import pytest

from broker.cluster.store import EmbeddedStore
from broker.cluster.zookeeper import ZooKeeperStore
from tests.cluster.three_brokers import restore, three_brokers
from tests.support import zookeeper


@pytest.fixture(scope="package")
def zk_server(tmp_path_factory):
    reason = zookeeper.available()
    if reason is not None:  # `make test` installs it (Debian's zookeeper package)
        pytest.fail(f"no ZooKeeper here: {reason}; `make test` installs it")
    with zookeeper.ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def chroot() -> str:
    """A fresh ZooKeeper namespace per test: tests share the server, never their nodes."""
    return f"/test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_connect(zk_server, chroot) -> str:
    return zk_server.connect + chroot


@pytest.fixture(scope="module")
def module_zk_connect(zk_server, request) -> str:
    """A namespace for a cluster a whole module shares (tests/cluster/three_brokers.py's `restore`)."""
    return f"{zk_server.connect}/{request.module.__name__.rsplit('.', 1)[-1]}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def shared_three_brokers(module_zk_connect, tmp_path_factory, request):
    """Three brokers a whole module's tests share (each test its own topics and groups)."""
    root = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    with three_brokers(module_zk_connect, root) as brokers:
        yield brokers


@pytest.fixture
def restored_three_brokers(shared_three_brokers):
    """The module's three brokers; those a test stopped are started again after it (`restore`), so the
    next test finds three brokers and one controller."""
    yield shared_three_brokers
    restore(shared_three_brokers)


@pytest.fixture(params=["embedded", "zookeeper"])
async def store_factory(request, tmp_path):
    """`await open_store()` opens the store under test; a second call is a second session on the same
    data (a restart for the embedded store, another client for ZooKeeper). All are closed at the end."""
    opened = []
    if request.param == "zookeeper":
        connect = request.getfixturevalue("zk_connect")

        async def open_store():
            opened.append(await ZooKeeperStore.open(connect, session_timeout_ms=6000))
            return opened[-1]
    else:

        async def open_store():
            opened.append(await EmbeddedStore.open(tmp_path / "metadata.json"))
            return opened[-1]

    open_store.kind = request.param
    yield open_store
    for store in opened:
        await store.close()


@pytest.fixture
async def store(store_factory):
    return await store_factory()
