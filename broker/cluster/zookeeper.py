"""ZooKeeper as the metadata store (kazoo), for brokers that share one cluster's metadata.

kazoo runs its own threads (connection, callbacks) and its blocking calls would stop the event loop,
so every request here goes through a `*_async` method and its IAsyncResult is settled into an
asyncio future with `call_soon_threadsafe`; the few blocking kazoo calls (start, stop) run in an
executor. kazoo's state listener is bridged the same way.

Sessions. Ephemeral nodes belong to the ZooKeeper session that created them: `close()` ends the
session, so a stopped broker's registration goes at once; a killed broker's stays until the server
expires the session (`zookeeper.session.timeout.ms`). When the session expires while the process
runs, kazoo opens a new one and the store calls its session listeners, which re-create what was
ephemeral (the broker's registration).

Requests wait for a lost connection to come back for at most the session timeout, then fail with
StoreUnavailable; a request under way when the connection drops fails the same way and may or may
not have been applied (ZooKeeper's ConnectionLoss).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

import structlog
from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from broker.aio import wait_for
from broker.cluster.store import (
    BadVersion,
    ChildrenCallback,
    DataCallback,
    MetadataStore,
    NodeExists,
    NoNode,
    NotEmpty,
    SessionListener,
    StoreError,
    StoreUnavailable,
    Watch,
    _call_back,
    _check,
)
from broker.log import cold_files

log = structlog.get_logger("zookeeper")

SESSION_FORMAT_VERSION = 1
# kazoo's own default backs off towards an hour between connection attempts; ZooKeeper's Java client
# keeps trying every second or so, which is what a broker waiting for its ensemble wants.
CONNECTION_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}


@dataclass(frozen=True)
class Session:
    """A ZooKeeper session's id and password: whoever holds both can resume (or end) the session."""

    session_id: int
    password: bytes

    def __str__(self) -> str:
        return f"0x{self.session_id:x}"


def load_session(path: Path) -> Session | None:
    """The session a previous run of this broker recorded, or None."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("ignoring an unreadable ZooKeeper session file", path=str(path), error=str(exc))
        return None
    if raw.get("version") != SESSION_FORMAT_VERSION:
        log.warning("ignoring a ZooKeeper session file of an unknown version", path=str(path))
        return None
    return Session(int(raw["session_id"]), bytes.fromhex(raw["password"]))


async def save_session(path: Path, session: Session) -> None:
    """Record the session, readable by the owner only: the password lets its holder end the session."""
    data = json.dumps({"version": SESSION_FORMAT_VERSION, "session_id": session.session_id,
                       "password": session.password.hex()}).encode()
    await cold_files.write_atomically(Path(path), data, executor=None, mode=0o600)


def _translate(exc: BaseException, path: str) -> BaseException:
    if isinstance(exc, kz.NoNodeError):
        return NoNode(path)
    if isinstance(exc, kz.NodeExistsError):
        return NodeExists(path)
    if isinstance(exc, kz.BadVersionError):
        return BadVersion(path)
    if isinstance(exc, kz.NotEmptyError):
        return NotEmpty(f"{path} has children")
    if isinstance(exc, kz.NoChildrenForEphemeralsError):
        return StoreError(f"{path}: the parent is ephemeral and cannot have children")
    if isinstance(exc, (kz.ConnectionLoss, kz.SessionExpiredError, kz.ConnectionClosedError,
                        kz.OperationTimeoutError, kz.SessionMovedError)):
        return StoreUnavailable(f"{path}: {type(exc).__name__}")
    if isinstance(exc, kz.KazooException):
        return StoreError(f"{path}: {type(exc).__name__} {exc}".rstrip())
    return exc


class _ZooKeeperWatch(Watch):
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.changed = asyncio.Event()
        self._loop = loop

    def cancel(self) -> None:
        super().cancel()
        self.changed.set()  # let the loop see it and end

    def trigger(self, _event=None) -> None:
        """kazoo's watcher, on kazoo's thread. One function per watch, so kazoo keeps it once per path."""
        try:
            self._loop.call_soon_threadsafe(self.changed.set)
        except RuntimeError:  # the event loop is closed: nobody is watching any more
            pass


class ZooKeeperStore(MetadataStore):
    def __init__(self, connect: str, *, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None,
                 previous_session: Session | None = None) -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.previous_session = previous_session  # this broker's session before a crash, if recorded
        self.session: Session | None = None
        self._loop = asyncio.get_running_loop()
        self._client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                                   connection_retry=dict(CONNECTION_RETRY))
        self._connected = asyncio.Event()
        self._closing = False
        self._listeners: list[SessionListener] = []
        self._tasks: set[asyncio.Task] = set()
        self._listeners_done: asyncio.Task | None = None

    @classmethod
    async def open(cls, connect: str, *, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None,
                   previous_session: Session | None = None) -> ZooKeeperStore:
        """Connect, or StoreUnavailable after `connection_timeout_ms`. A missing chroot is created, as
        Kafka does."""
        store = cls(connect, session_timeout_ms=session_timeout_ms, connection_timeout_ms=connection_timeout_ms,
                    previous_session=previous_session)
        await store._start()
        return store

    async def _start(self) -> None:
        self._client.add_listener(self._on_state_change)
        connected = await self._loop.run_in_executor(None, self._client.start_async)  # starts kazoo's threads
        wait_s = self.connection_timeout_ms / 1000
        if not await self._loop.run_in_executor(None, connected.wait, wait_s):
            self._closing = True
            await self._loop.run_in_executor(None, self._stop_client)
            raise StoreUnavailable(f"could not connect to ZooKeeper at {self.connect} within "
                                   f"{self.connection_timeout_ms} ms (zookeeper.connection.timeout.ms)")
        self.session = Session(*self._client.client_id)
        self._connected.set()
        try:
            if self._client.chroot and not await self.exists("/"):
                await self._loop.run_in_executor(None, self._create_chroot)
        except BaseException:
            await self.close()
            raise
        log.info("connected to ZooKeeper", connect=self.connect, session=str(self.session),
                 session_timeout_ms=self.session_timeout_ms)

    def _create_chroot(self) -> None:
        """Blocking: the chroot path through a client without it (kazoo cannot create a nested chroot)."""
        hosts = self.connect.split("/", 1)[0]
        client = KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000,
                             connection_retry=dict(CONNECTION_RETRY))
        try:
            client.start(timeout=self.connection_timeout_ms / 1000)
            client.ensure_path(self._client.chroot)
            log.info("created the ZooKeeper chroot", chroot=self._client.chroot)
        finally:
            client.stop()
            client.close()

    def _stop_client(self) -> None:
        """Blocking: ends the session, so its ephemeral nodes go at once."""
        try:
            self._client.stop()
        finally:
            self._client.close()

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        await self._loop.run_in_executor(None, self._stop_client)
        log.info("ZooKeeper session closed", session=str(self.session))

    # --- connection state --------------------------------------------------------------------------

    def _on_state_change(self, state: str) -> None:
        """kazoo's state listener, on kazoo's thread: must not block, so hand over to the loop."""
        client_id = self._client.client_id
        try:
            self._loop.call_soon_threadsafe(self._state_changed, state, client_id)
        except RuntimeError:  # the loop is closed
            pass

    def _state_changed(self, state: str, client_id: tuple[int, bytes] | None) -> None:
        if self._closing or self.session is None:  # stopping, or still in _start (which sets the session)
            return
        if state == KazooState.CONNECTED and client_id is not None:
            self._connected.set()
            session = Session(*client_id)
            if session == self.session:
                log.info("reconnected to ZooKeeper", session=str(session))
                return
            log.warning("new ZooKeeper session: the previous one expired and its ephemeral nodes are gone",
                        previous=str(self.session), session=str(session))
            self.session = session
            self._listeners_done = self._spawn(self._run_listeners(self._listeners_done))
        elif state == KazooState.SUSPENDED:
            self._connected.clear()
            log.warning("connection to ZooKeeper lost; reconnecting", session=str(self.session))
        elif state == KazooState.LOST:
            self._connected.clear()
            log.error("ZooKeeper session lost: this broker's ephemeral nodes are gone until a new session",
                      session=str(self.session))

    def add_session_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    async def _run_listeners(self, previous: asyncio.Task | None) -> None:
        if previous is not None:  # one session's listeners after the other's
            await asyncio.gather(previous, return_exceptions=True)
        for listener in self._listeners:
            try:
                await listener()
            except Exception:
                log.exception("session listener failed", listener=getattr(listener, "__qualname__", repr(listener)))

    def _spawn(self, coro) -> asyncio.Task:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- requests ----------------------------------------------------------------------------------

    async def _call(self, path: str, method, *args, **kwargs):
        """One kazoo request as a coroutine: kazoo's exceptions become the store's."""
        if self._closing:
            raise StoreUnavailable(f"{path}: the ZooKeeper store is closed")
        timeout_s = self.session_timeout_ms / 1000
        if not self._connected.is_set():
            try:
                await wait_for(self._connected.wait(), timeout_s)
            except TimeoutError:
                raise StoreUnavailable(f"{path}: no connection to ZooKeeper at {self.connect} "
                                       f"for {self.session_timeout_ms} ms") from None
        future = self._loop.create_future()
        loop = self._loop

        def settle(result) -> None:  # on the loop
            if future.cancelled():
                return
            if result.successful():
                future.set_result(result.value)
            else:
                future.set_exception(_translate(result.exception, path))

        def done(result) -> None:  # on kazoo's thread (or this one, if already done)
            try:
                loop.call_soon_threadsafe(settle, result)
            except RuntimeError:
                pass

        try:
            method(*args, **kwargs).rawlink(done)
        except kz.KazooException as exc:
            raise _translate(exc, path) from exc
        try:
            return await wait_for(future, timeout_s)
        except TimeoutError:
            raise StoreUnavailable(f"{path}: no answer from ZooKeeper within {self.session_timeout_ms} ms") from None

    async def get(self, path: str) -> tuple[bytes, int]:
        data, stat = await self._call(path, self._client.get_async, path)
        return data, stat.version

    async def exists(self, path: str) -> bool:
        return await self._call(path, self._client.exists_async, path) is not None

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = True) -> None:
        _check(path)
        await self._call(path, self._client.create_async, path, data, ephemeral=ephemeral, makepath=makepath)

    async def create_sequential(self, prefix: str, data: bytes = b"") -> str:
        _check(prefix)
        return str(await self._call(prefix, self._client.create_async, prefix, data, sequence=True, makepath=True))

    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        stat = await self._call(path, self._client.set_async, path, data, version)
        return stat.version

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        if not recursive:
            await self._call(path, self._client.delete_async, path, version)
            return
        if version != -1:  # check before touching the children; the final delete checks again
            _, current = await self.get(path)
            if current != version:
                raise BadVersion(f"{path}: version {current}, expected {version}")
        await self._delete_tree(path, version, top=True)

    async def _delete_tree(self, path: str, version: int, top: bool) -> None:
        """Children first (each level at once: kazoo pipelines requests), then the node; a child added
        meanwhile means another round. Not atomic, as Kafka's deleteRecursive is not."""
        for _ in range(10):
            try:
                children = await self.children(path)
            except NoNode:
                if top:
                    raise
                return
            prefix = path.rstrip("/") + "/"
            await asyncio.gather(*(self._delete_tree(prefix + child, -1, top=False) for child in children))
            try:
                await self._call(path, self._client.delete_async, path, version)
                return
            except NotEmpty:
                continue
            except NoNode:
                if top and not children:
                    raise
                return
        raise NotEmpty(f"{path}: children keep appearing; not deleted")

    async def children(self, path: str) -> list[str]:
        return sorted(await self._call(path, self._client.get_children_async, path))

    # --- the broker's registration -----------------------------------------------------------------

    async def register(self, path: str, data: bytes) -> None:
        """Create the ephemeral `path` for this session. A node of this session (a retry after a lost
        connection) is updated; a node of `previous_session` is freed first (`_ours_after_freeing`);
        any other owner is a live broker with the same id: NodeExists."""
        for _ in range(5):
            try:
                await self.create(path, data, ephemeral=True)
                return
            except NodeExists:
                pass
            try:
                _, stat = await self._call(path, self._client.get_async, path)
            except NoNode:
                continue  # its owner went away meanwhile
            if await self._ours_after_freeing(path, stat.ephemeralOwner):
                await self.set(path, data)
                return
        raise NodeExists(f"{path}: could not create it")

    async def free_registration(self, path: str) -> None:
        """Before `register` (start-up's node id check): a node of `previous_session` is freed
        (`_ours_after_freeing`); any other owner is a live broker with the same id: NodeExists."""
        for _ in range(5):
            try:
                _, stat = await self._call(path, self._client.get_async, path)
            except NoNode:
                return
            if await self._ours_after_freeing(path, stat.ephemeralOwner):
                return
        raise NodeExists(f"{path}: could not free it")

    async def _ours_after_freeing(self, path: str, owner: int) -> bool:
        """Whether `path`, held by session `owner`, is this session's. A node of `previous_session` (this
        broker before a crash, held until the server expires it) is deleted by ending that session (False:
        look again); any other owner is a live broker with the same id: NodeExists."""
        assert self.session is not None  # set when the store connected, before any call
        if owner == self.session.session_id:
            return True
        previous = self.previous_session
        if previous is None or owner != previous.session_id:
            holder = f"the live ZooKeeper session 0x{owner:x}" if owner else "a persistent (non-ephemeral) node"
            raise NodeExists(f"{path} is held by {holder}")
        log.info("ending this broker's session from before its restart, which still holds its "
                 "registration", path=path, session=str(previous))
        await self._loop.run_in_executor(None, self._end_session, previous)
        self.previous_session = None
        return False

    def _end_session(self, session: Session) -> None:
        """Blocking: resume `session` with its password and close it, which deletes its ephemeral nodes.
        If it has already expired, the server says so and nothing is lost."""
        client = KazooClient(hosts=self.connect, client_id=(session.session_id, session.password),
                             timeout=self.session_timeout_ms / 1000, connection_retry=dict(CONNECTION_RETRY))
        try:
            client.start(timeout=self.connection_timeout_ms / 1000)
        finally:
            client.stop()
            client.close()

    # --- watches -----------------------------------------------------------------------------------

    async def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        watch = _ZooKeeperWatch(self._loop)
        children = await self._read_children(path, watch)
        callback(children)
        self._spawn(self._follow(watch, callback, children, lambda: self._read_children(path, watch)))
        return watch

    async def watch_data(self, path: str, callback: DataCallback) -> Watch:
        watch = _ZooKeeperWatch(self._loop)
        state = await self._read_data(path, watch)
        callback(*state)
        self._spawn(self._follow(watch, lambda state: callback(*state), state,
                                 lambda: self._read_data(path, watch)))
        return watch

    async def _read_children(self, path: str, watch: _ZooKeeperWatch) -> list[str]:
        return sorted(await self._call(path, self._client.get_children_async, path, watch=watch.trigger))

    async def _read_data(self, path: str, watch: _ZooKeeperWatch) -> tuple[bytes | None, int | None]:
        while True:
            try:
                data, stat = await self._call(path, self._client.get_async, path, watch=watch.trigger)
                return data, stat.version
            except NoNode:
                # A read of a missing node leaves no watch; exists does, and tells us if it just appeared.
                if await self._call(path, self._client.exists_async, path, watch=watch.trigger) is None:
                    return None, None

    async def _follow(self, watch: _ZooKeeperWatch, callback, last, read) -> None:
        """Re-read (re-arming the one-shot ZooKeeper watch) whenever it fires, and report what changed.
        kazoo also fires the watch when the connection drops, which re-arms it after reconnecting."""
        while not watch.cancelled and not self._closing:
            await watch.changed.wait()
            watch.changed.clear()
            if watch.cancelled:
                return
            try:
                state = await read()
            except NoNode:  # a children watch ends with its node
                watch.cancel()
                _call_back(callback, None)
                return
            except StoreUnavailable:
                watch.changed.set()  # try again: _call waits for the connection first
                continue
            if state != last:
                last = state
                _call_back(callback, state)
