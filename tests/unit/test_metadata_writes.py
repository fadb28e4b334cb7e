"""Metadata writes that do not queue behind each other: the embedded store group-commits concurrent
changes into one rewrite of its file, and a change to one topic does not wait for another topic's."""

import asyncio
import json

from broker.app import Broker
from broker.cluster import store as store_module
from broker.cluster.store import EmbeddedStore
from broker.config import load_config
from broker.topic_placement import TopicError
from protocol.errors import ErrorCode


async def test_concurrent_changes_share_file_writes(tmp_path, monkeypatch):
    writes = []
    real_write = store_module._write_snapshot

    async def counting_write(path, nodes):  # a spy: the real write still happens
        writes.append(len(nodes))
        await real_write(path, nodes)

    monkeypatch.setattr(store_module, "_write_snapshot", counting_write)
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    await asyncio.gather(*(store.put(f"/n/{i}", json.dumps({"i": i}).encode()) for i in range(200)))
    versions = await asyncio.gather(*(store.set("/n/7", str(k).encode()) for k in range(50)))
    assert sorted(versions) == list(range(1, 51))  # each set saw its own version
    assert len(writes) < 20, f"{len(writes)} rewrites of the store for 250 concurrent changes"
    on_disk = json.loads((tmp_path / "meta.json").read_text())["nodes"]
    assert on_disk["/n/199"] == ['{"i": 199}', 0]
    assert on_disk["/n/7"][1] == 50
    reopened = await EmbeddedStore.open(tmp_path / "meta.json")
    assert await reopened.get("/n/0") == (b'{"i": 0}', 0)


async def test_a_small_create_does_not_wait_for_a_big_change_to_another_topic(tmp_path):
    broker = Broker(load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    await broker.start()
    try:
        await broker.topics.create("big", 1, 1)
        growing = asyncio.create_task(broker.topics.add_partitions("big", 3000))
        await asyncio.sleep(0)  # the big change holds its topic's lock now
        await broker.topics.create("small", 1, 1)
        assert not growing.done(), "the small create waited for the 3,000-partition change"
        await growing
        assert len(broker.topics.get("big").replicas) == 3000
    finally:
        await broker.stop()


async def test_colliding_names_are_still_checked_one_at_a_time(tmp_path):
    broker = Broker(load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    await broker.start()
    try:
        results = await asyncio.gather(broker.topics.create("a.b", 1, 1), broker.topics.create("a_b", 1, 1),
                                       return_exceptions=True)
        errors = [r for r in results if isinstance(r, TopicError)]
        assert len(errors) == 1 and errors[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert len(broker.topics._locks) == 0  # locks go when unused
    finally:
        await broker.stop()


async def test_create_partitions_keeps_a_reassignment_it_has_not_seen_and_retries_a_lost_race(tmp_path):
    """The topic's node is written back conditionally on its version: a reassignment's state written
    there by the controller (not yet in this broker's cache) survives, and a write that lands between
    this broker's read and its write makes it read again instead of overwriting it."""
    from broker.cluster.layout import TopicAssignment, TopicZNode

    broker = Broker(load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    await broker.start()
    try:
        topic = await broker.topics.create("moving", 1, 1)
        store, path = broker.store, TopicZNode.path("moving")
        node_id = broker.config.node_id
        moving = TopicAssignment(topic.topic_id, {0: [node_id, 9]}, adding={0: [9]}, removing={})
        await store.set(path, TopicZNode.encode(moving))  # the controller's write; the cache has not seen it
        grown = await broker.topics.add_partitions("moving", 2)
        stored = TopicZNode.decode((await store.get(path))[0])
        assert stored.replicas == {0: [node_id, 9], 1: [node_id]} and stored.adding == {0: [9]}
        assert grown.replicas == stored.replicas and grown.adding == {0: [9]}

        # Another growth between the read and the write: the first write fails on the version, the
        # second is decided on what that writer left (3 partitions, not a second partition 1).
        raced_topic = await broker.topics.create("raced", 1, 1)
        raced_path, real_get, raced = TopicZNode.path("raced"), store.get, []

        async def get_then_race(node_path):
            found = await real_get(node_path)
            if node_path == raced_path and not raced:
                raced.append(True)
                other = TopicAssignment(raced_topic.topic_id, {0: [node_id], 1: [node_id]})
                await store.set(raced_path, TopicZNode.encode(other))
            return found

        store.get = get_then_race
        await broker.topics.add_partitions("raced", 3)
        store.get = real_get
        stored = TopicZNode.decode((await store.get(raced_path))[0])
        assert raced and stored.replicas == {0: [node_id], 1: [node_id], 2: [node_id]}
    finally:
        await broker.stop()
