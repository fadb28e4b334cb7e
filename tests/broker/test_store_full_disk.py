"""The embedded metadata store on a full disk (issue 29): a change whose write fails is undone in
memory too, so what the broker serves, and what a start after a crash reads, is what the callers
were told — on a real tmpfs filled to its last byte."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.cluster.store import EmbeddedStore, NoNode, StoreWriteFailed
from tests.support.small_disk import fill_to_the_last_byte, small_filesystem

# Every snapshot of the store is larger than the few KiB a filled tmpfs may have left.
BALLAST = b"b" * 32768


async def in_memory(store: EmbeddedStore) -> dict[str, tuple[bytes, int]]:
    """Every persistent node as the store serves it, walked through its API."""
    found: dict[str, tuple[bytes, int]] = {}
    pending = ["/"]
    while pending:
        path = pending.pop()
        for child in await store.children(path):
            if not child:
                continue  # the root is listed among its own children
            child_path = path.rstrip("/") + "/" + child
            found[child_path] = await store.get(child_path)
            pending.append(child_path)
    return found


async def test_a_change_that_cannot_be_written_is_undone(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "disk", "1m") as disk:
        path = disk / "ebb-metadata.json"
        store = await EmbeddedStore.open(path)
        await store.put("/ballast", BALLAST)
        await store.create("/config/topics/kept", b"v0")
        await store.set("/config/topics/kept", b"v1")
        written = await in_memory(store)
        filler = fill_to_the_last_byte(disk)

        with pytest.raises(StoreWriteFailed, match="No space left"):
            await store.create("/admin/delete_topics/kept", b"mark")  # a new parent too
        with pytest.raises(StoreWriteFailed):
            await store.set("/config/topics/kept", b"v2")
        with pytest.raises(StoreWriteFailed):
            await store.delete("/config", recursive=True)
        with pytest.raises(StoreWriteFailed):
            await store.put_many({"/config/topics/kept": b"v3", "/brokers/topics/new/partitions/0": b"p"})
        # Changes made while a failing write runs build on what it undoes: they fail with it.
        results = await asyncio.gather(store.set("/config/topics/kept", b"v4", version=1),
                                       store.create("/brokers/topics/other", b"t"),
                                       store.delete("/ballast"), return_exceptions=True)
        assert [type(result) for result in results] == [StoreWriteFailed] * 3, results
        assert await in_memory(store) == written
        with pytest.raises(NoNode):
            await store.get("/admin/delete_topics/kept")
        assert await store.get("/config/topics/kept") == (b"v1", 1)
        # A crash now: the file holds exactly what memory holds.
        assert await in_memory(await EmbeddedStore.open(path)) == written

        filler.unlink()  # room again: the next change goes through and is all that changed
        assert await store.set("/config/topics/kept", b"v6") == 2
        assert await in_memory(store) == {**written, "/config/topics/kept": (b"v6", 2)}
        assert await in_memory(await EmbeddedStore.open(path)) == await in_memory(store)
