"""The metadata store behind the controller: a tree of versioned znodes, shaped like ZooKeeper.

Paths follow Kafka's ZooKeeper layout (`/brokers/topics/<t>`, `/config/topics/<t>`,
`/admin/delete_topics/<t>`, `/cluster/id`, ...) so the cluster backend (kazoo) is a second
implementation of `MetadataStore`, not a rewrite. `EmbeddedStore` serves a single broker: the tree
lives in memory and every change is written to one JSON file, atomically, off the event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

FORMAT_VERSION = 1


class StoreError(Exception):
    pass


class NoNode(StoreError):
    pass


class NodeExists(StoreError):
    pass


class BadVersion(StoreError):
    pass


@dataclass
class Node:
    data: bytes
    version: int = 0
    ephemeral: bool = False


class MetadataStore(ABC):
    """The subset of ZooKeeper Ebb uses. Versions start at 0 and grow by one on every set."""

    @abstractmethod
    async def get(self, path: str) -> tuple[bytes, int]:
        """Data and version; NoNode if absent."""

    @abstractmethod
    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = True) -> None:
        """NodeExists if present; parents are created when makepath is true."""

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

    async def get_json(self, path: str):
        data, _ = await self.get(path)
        return json.loads(data)

    async def put_json(self, path: str, value) -> None:
        data = json.dumps(value, sort_keys=True).encode()
        try:
            await self.set(path, data)
        except NoNode:
            await self.create(path, data)

    async def close(self) -> None:
        return None


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _check(path: str) -> None:
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise StoreError(f"invalid path {path!r}")


class EmbeddedStore(MetadataStore):
    """One broker's store: a dict of znodes, persisted to `path` after every change.

    Ephemeral nodes are not persisted: like a ZooKeeper session, they end with the process.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._nodes: dict[str, Node] = {"/": Node(b"")}
        self._lock = asyncio.Lock()

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

    def _snapshot(self) -> bytes:
        nodes = {p: [n.data.decode("utf-8"), n.version] for p, n in self._nodes.items() if not n.ephemeral}
        return json.dumps({"format": FORMAT_VERSION, "nodes": nodes}, sort_keys=True).encode()

    async def _persist(self) -> None:
        data = self._snapshot()
        await asyncio.get_running_loop().run_in_executor(None, _write_atomically, self.path, data)

    async def get(self, path: str) -> tuple[bytes, int]:
        node = self._nodes.get(path)
        if node is None:
            raise NoNode(path)
        return node.data, node.version

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = True) -> None:
        _check(path)
        async with self._lock:
            if path in self._nodes:
                raise NodeExists(path)
            parent = _parent(path)
            if parent not in self._nodes:
                if not makepath:
                    raise NoNode(parent)
                missing = []
                while parent not in self._nodes:
                    missing.append(parent)
                    parent = _parent(parent)
                for p in reversed(missing):
                    self._nodes[p] = Node(b"")
            self._nodes[path] = Node(data, ephemeral=ephemeral)
            await self._persist()

    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        async with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNode(path)
            if version != -1 and version != node.version:
                raise BadVersion(f"{path}: version {node.version}, expected {version}")
            node.data, node.version = data, node.version + 1
            await self._persist()
            return node.version

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        async with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNode(path)
            if version != -1 and version != node.version:
                raise BadVersion(f"{path}: version {node.version}, expected {version}")
            below = [p for p in self._nodes if p.startswith(path + "/")]
            if below and not recursive:
                raise StoreError(f"{path} has children")
            for p in below + [path]:
                del self._nodes[p]
            await self._persist()

    async def children(self, path: str) -> list[str]:
        if path not in self._nodes:
            raise NoNode(path)
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self._nodes if p.startswith(prefix) and "/" not in p[len(prefix):])


def _write_atomically(path: Path, data: bytes) -> None:
    """tmp, fsync, rename, fsync the directory: a crash leaves the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
