"""The metadata store behind the controller: a tree of versioned znodes, shaped like ZooKeeper.

It holds bytes; which nodes exist and what they hold is broker/cluster/layout.py's (Kafka's ZooKeeper
layout), so the cluster backend (`ZooKeeperStore`, kazoo, broker/cluster/zookeeper.py) is a second
implementation of `MetadataStore`, not a rewrite.
`EmbeddedStore` serves a single broker: the tree lives in memory and every change is written to one
JSON file, atomically, off the event loop.

Watches (`watch_children`, `watch_data`) call back on the event loop with the latest state; like
ZooKeeper's one-shot watches that are re-armed on every read, changes in quick succession may be
reported once, but the last state is always reported.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

from broker.log import cold_files
from protocol.errors import ErrorCode

log = structlog.get_logger("store")

FORMAT_VERSION = 1


class StoreError(Exception):
    pass


class NoNode(StoreError):
    pass


class NodeExists(StoreError):
    pass


class BadVersion(StoreError):
    pass


class NotEmpty(StoreError):
    """A non-recursive delete of a node that has children."""


class StoreUnavailable(StoreError):
    """The store cannot be reached (ZooKeeper down, session lost). A write that failed this way may or
    may not have been applied, as with ZooKeeper's ConnectionLoss."""


class StoreWriteFailed(StoreUnavailable):
    """The embedded store could not write its file (a full disk): the change was not made, in memory
    either (so a crash cannot differ from what the caller was told); the old file stays whole."""


def store_error_answer(exc: StoreError) -> tuple[ErrorCode, str]:
    """What a request whose metadata change failed in the store answers, for that resource or partition:
    KAFKA_STORAGE_ERROR when the write failed (a full disk), REQUEST_TIMED_OUT when the store could not
    be reached (the change may or may not be made; clients retry), UNKNOWN_SERVER_ERROR otherwise."""
    if isinstance(exc, StoreWriteFailed):
        return ErrorCode.KAFKA_STORAGE_ERROR, f"The metadata could not be written: {exc}"
    if isinstance(exc, StoreUnavailable):
        return ErrorCode.REQUEST_TIMED_OUT, f"The metadata store is unavailable: {exc}"
    return ErrorCode.UNKNOWN_SERVER_ERROR, f"The metadata change failed: {exc}"


ChildrenCallback = Callable[[list[str] | None], None]
DataCallback = Callable[[bytes | None, int | None], None]
SessionListener = Callable[[], Awaitable[None]]


class Watch:
    """A registered watch; `cancel()` stops its callbacks."""

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class Node:
    data: bytes
    version: int = 0
    ephemeral: bool = False


# How to undo one change: each path it touched with the node it held before (None: it was absent).
Undo = list[tuple[str, "Node | None"]]


class MetadataStore(ABC):
    """The subset of ZooKeeper Ebb uses. Versions start at 0 and grow by one on every set."""

    @abstractmethod
    async def get(self, path: str) -> tuple[bytes, int]:
        """Data and version; NoNode if absent."""

    @abstractmethod
    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = True) -> None:
        """NodeExists if present; parents are created when makepath is true."""

    @abstractmethod
    async def create_sequential(self, prefix: str, data: bytes = b"") -> str:
        """Create `prefix` + a 10-digit number that grows with every sequential child of its parent
        (ZooKeeper's PERSISTENT_SEQUENTIAL; parents made as needed); the path created."""

    @abstractmethod
    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        """New version; BadVersion if `version` is given and stale."""

    @abstractmethod
    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        """NoNode if absent."""

    @abstractmethod
    async def children(self, path: str) -> list[str]:
        """Sorted child names; NoNode if absent."""

    async def exists(self, path: str) -> bool:
        try:
            await self.get(path)
        except NoNode:
            return False
        return True

    async def put(self, path: str, data: bytes) -> None:
        """Set the node, or create it (and its parents) if absent. Another writer (a broker creating the
        same topic) may create it between the two: then it is set, as if this put had come second."""
        try:
            await self.set(path, data)
        except NoNode:
            try:
                await self.create(path, data)
            except NodeExists:
                await self.set(path, data)

    async def put_many(self, values: Mapping[str, bytes]) -> None:
        """put for each path; a store that can makes them durable with one write."""
        for path, data in values.items():
            await self.put(path, data)

    async def register(self, path: str, data: bytes) -> None:
        """Create the ephemeral node that announces this process (`/brokers/ids/<id>`). NodeExists, naming
        the owner where the store knows it, when a live session other than ours holds it."""
        try:
            await self.create(path, data, ephemeral=True)
        except NodeExists:
            # Embedded ephemeral nodes are never persisted: one that exists is this process's own.
            await self.set(path, data)

    async def free_registration(self, path: str) -> None:
        """Check, before `register`, that no live session other than ours holds `path` (NodeExists);
        a store that keeps what an earlier run of this broker left frees it."""
        return None  # embedded ephemeral nodes are never persisted

    @abstractmethod
    async def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        """Call `callback(sorted children)` now and after every change of the children of `path`;
        `callback(None)` once if the node goes away, which ends the watch. NoNode if absent now."""

    @abstractmethod
    async def watch_data(self, path: str, callback: DataCallback) -> Watch:
        """Call `callback(data, version)` now and after every change of `path`; `(None, None)` while it
        does not exist. The watch lasts through deletion and re-creation."""

    def add_session_listener(self, listener: SessionListener) -> None:
        """`await listener()` after the store lost its session and opened a new one: ephemeral nodes are
        gone and must be created again. A store without sessions never calls it."""
        return None

    async def close(self) -> None:
        return None


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _check(path: str) -> None:
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise StoreError(f"invalid path {path!r}")


class EmbeddedStore(MetadataStore):
    """One broker's store: a dict of znodes, persisted to `path` after every change (group-committed).

    Ephemeral nodes are not persisted: like a ZooKeeper session, they end with the process.
    Watches fire from the store's own writes, on the event loop, after the change is persisted.
    A write that fails rolls memory back to what the file holds: that change and every one made
    after it that was not written either (they may build on it) fail with StoreWriteFailed.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._nodes: dict[str, Node] = {"/": Node(b"")}
        self._write_lock = asyncio.Lock()
        self._changes = 0  # changes made in memory
        self._written = 0  # changes on disk
        self._undo: list[tuple[int, Undo]] = []  # changes made in memory and not yet on disk, in order
        self._undone: dict[int, str] = {}  # changes a failed write undid -> why, until their callers hear it
        self._child_watches: dict[str, list[tuple[Watch, ChildrenCallback]]] = {}
        self._data_watches: dict[str, list[tuple[Watch, DataCallback]]] = {}
        self._sequences: dict[str, int] = {}  # parent -> the next sequential child's number

    @classmethod
    async def open(cls, path: Path) -> EmbeddedStore:
        store = cls(path)
        loop = asyncio.get_running_loop()
        raw = await loop.run_in_executor(None, store._read)
        if raw is not None:
            if raw.get("format") != FORMAT_VERSION:
                raise StoreError(f"{path}: unknown metadata format {raw.get('format')!r}")
            for node_path, (data, version) in raw["nodes"].items():
                store._nodes[node_path] = Node(data.encode("utf-8"), version)
        return store

    def _read(self) -> dict | None:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StoreError(f"{self.path}: unreadable metadata ({exc})") from exc

    def _before(self, undo: Undo, path: str) -> None:
        """Remember what `path` holds before a change touches it."""
        node = self._nodes.get(path)
        undo.append((path, None if node is None else Node(node.data, node.version, node.ephemeral)))

    def _undo_change(self, undo: Undo) -> None:
        for path, node in reversed(undo):
            if node is None:
                self._nodes.pop(path, None)
            else:
                self._nodes[path] = node

    async def _persist(self, undo: Undo) -> None:
        """Group commit: return once a write that began after this change has finished. Changes are
        made in memory on the event loop; while one write is under way, every change made meanwhile
        waits for the next, which covers them all with one rewrite of the file. A failed write undoes
        every change not on disk (watchers never heard of them: they are told after the write)."""
        self._changes += 1
        change = self._changes
        self._undo.append((change, undo))
        async with self._write_lock:
            if change in self._undone:
                raise StoreWriteFailed(self._undone.pop(change))
            if self._written >= change:
                return  # a write that began after this change covered it
            covered = self._changes
            nodes = [(p, n.data, n.version) for p, n in self._nodes.items() if not n.ephemeral]
            try:
                await _write_snapshot(self.path, nodes)
            except OSError as exc:
                failure = f"cannot write {self.path.name}: {exc!r}"
                for number, pending in reversed(self._undo):
                    self._undo_change(pending)
                    self._undone[number] = failure
                self._undo.clear()
                log.error("metadata store write failed; the changes not written are undone",
                          changes=len(self._undone), error=repr(exc))
                raise StoreWriteFailed(self._undone.pop(change)) from exc
            self._written = covered
            self._undo = [(number, pending) for number, pending in self._undo if number > covered]

    async def get(self, path: str) -> tuple[bytes, int]:
        node = self._nodes.get(path)
        if node is None:
            raise NoNode(path)
        return node.data, node.version

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = True) -> None:
        _check(path)
        if path in self._nodes:
            raise NodeExists(path)
        parent = _parent(path)
        missing = []
        if parent not in self._nodes:
            if not makepath:
                raise NoNode(parent)
            while parent not in self._nodes:
                missing.append(parent)
                parent = _parent(parent)
        elif self._nodes[parent].ephemeral:
            raise StoreError(f"{parent} is ephemeral and cannot have children")  # as ZooKeeper
        undo: Undo = []
        for p in [*reversed(missing), path]:
            self._before(undo, p)
        for p in reversed(missing):
            self._nodes[p] = Node(b"")
        self._nodes[path] = Node(data, ephemeral=ephemeral)
        if missing or not ephemeral:  # ephemeral nodes are not in the file: registering needs no disk space
            await self._persist(undo)
        self._notify(data_changed=[*missing, path], children_changed=[_parent(p) for p in [*missing, path]])

    async def create_sequential(self, prefix: str, data: bytes = b"") -> str:
        _check(prefix)
        parent = _parent(prefix)
        number = self._sequences.get(parent)
        if number is None:  # after a restart: past every numbered child (ZooKeeper's counter never goes back)
            suffixes = [c[-10:] for c in (self._children(parent) if parent in self._nodes else [])]
            number = max((int(s) + 1 for s in suffixes if len(s) == 10 and s.isdigit()), default=0)
        self._sequences[parent] = number + 1
        path = f"{prefix}{number:010d}"
        await self.create(path, data)
        return path

    async def put_many(self, values: Mapping[str, bytes]) -> None:
        """Every node set or created in memory, then one write of the file: the partition states of a
        10,000-partition CreateTopics cost one fsync, not 10,000 rewrites of the whole store."""
        for path in values:
            _check(path)
        created, changed = [], []
        undo: Undo = []
        for path, data in values.items():
            self._before(undo, path)
            node = self._nodes.get(path)
            if node is not None:
                node.data, node.version = data, node.version + 1
                changed.append(path)
                continue
            parent = path
            while (parent := _parent(parent)) not in self._nodes:
                self._before(undo, parent)
                self._nodes[parent] = Node(b"")
                created.append(parent)
            if self._nodes[parent].ephemeral:
                self._undo_change(undo)  # all or nothing
                raise StoreError(f"{parent} is ephemeral and cannot have children")
            self._nodes[path] = Node(data)
            created.append(path)
        await self._persist(undo)
        self._notify(data_changed=[*created, *changed], children_changed=[_parent(p) for p in created])

    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        node = self._nodes.get(path)
        if node is None:
            raise NoNode(path)
        if version != -1 and version != node.version:
            raise BadVersion(f"{path}: version {node.version}, expected {version}")
        undo: Undo = []
        self._before(undo, path)
        node.data, node.version = data, node.version + 1
        new_version = node.version
        if not node.ephemeral:
            await self._persist(undo)
        self._notify(data_changed=[path])
        return new_version

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        node = self._nodes.get(path)
        if node is None:
            raise NoNode(path)
        if version != -1 and version != node.version:
            raise BadVersion(f"{path}: version {node.version}, expected {version}")
        below = [p for p in self._nodes if p.startswith(path + "/")]
        if below and not recursive:
            raise NotEmpty(f"{path} has children")
        undo: Undo = []
        for p in below + [path]:
            self._before(undo, p)
            del self._nodes[p]
        await self._persist(undo)
        gone = below + [path]
        self._notify(data_changed=gone, children_changed=[_parent(path)], deleted=gone)

    async def children(self, path: str) -> list[str]:
        if path not in self._nodes:
            raise NoNode(path)
        return self._children(path)

    def _children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self._nodes if p.startswith(prefix) and "/" not in p[len(prefix):])

    # --- watches -----------------------------------------------------------------------------------

    async def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        children = await self.children(path)
        watch = Watch()
        self._child_watches.setdefault(path, []).append((watch, callback))
        callback(children)
        return watch

    async def watch_data(self, path: str, callback: DataCallback) -> Watch:
        watch = Watch()
        self._data_watches.setdefault(path, []).append((watch, callback))
        node = self._nodes.get(path)
        callback(*((node.data, node.version) if node is not None else (None, None)))
        return watch

    def _notify(self, *, data_changed=(), children_changed=(), deleted=()) -> None:
        for path in data_changed:
            node = self._nodes.get(path)
            for _watch, callback in self._live(self._data_watches, path):
                _call_back(callback, *((node.data, node.version) if node is not None else (None, None)))
        for path in dict.fromkeys([*children_changed, *deleted]):
            exists = path in self._nodes
            for watch, callback in self._live(self._child_watches, path):
                if not exists:
                    watch.cancel()  # a children watch ends with its node, as kazoo's ChildrenWatch does
                _call_back(callback, self._children(path) if exists else None)

    @staticmethod
    def _live(watches: dict[str, list], path: str) -> list:
        registered = watches.get(path)
        if not registered:
            return []
        registered[:] = [(w, c) for w, c in registered if not w.cancelled]
        if not registered:
            del watches[path]
        return list(registered)


def _call_back(callback, *args) -> None:
    """A watcher's bug must not fail the write that triggered it."""
    try:
        callback(*args)
    except Exception:
        log.exception("watch callback failed", callback=getattr(callback, "__qualname__", repr(callback)))


async def _write_snapshot(path: Path, nodes: list[tuple[str, bytes, int]]) -> None:
    """Encode the whole store and replace its file (broker/log/cold_files.py: tmp, fsync, rename,
    fsync the directory; a crash leaves the old file or the new one)."""
    encoded = {p: [data.decode("utf-8"), version] for p, data, version in nodes}
    content = json.dumps({"format": FORMAT_VERSION, "nodes": encoded}, sort_keys=True).encode()
    await cold_files.write_atomically(path, content, executor=None)
