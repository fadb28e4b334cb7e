"""One contract, two stores: EmbeddedStore and ZooKeeperStore (a real server) must behave the same for
everything the broker relies on — versions, errors, makepath, recursive delete, children order,
ephemeral nodes and watches."""

from __future__ import annotations

import pytest

from broker.cluster.store import BadVersion, NodeExists, NoNode, NotEmpty, StoreError
from tests.cluster.helpers import eventually


async def test_versions_start_at_zero_and_grow_by_one_per_set(store):
    await store.create("/a", b"one")
    assert await store.get("/a") == (b"one", 0)
    assert await store.set("/a", b"two") == 1
    assert await store.set("/a", b"three", version=1) == 2
    with pytest.raises(BadVersion):
        await store.set("/a", b"stale", version=1)
    assert await store.get("/a") == (b"three", 2)


async def test_missing_nodes_are_no_node(store):
    with pytest.raises(NoNode):
        await store.get("/missing")
    with pytest.raises(NoNode):
        await store.set("/missing", b"x")
    with pytest.raises(NoNode):
        await store.delete("/missing")
    with pytest.raises(NoNode):
        await store.children("/missing")
    assert not await store.exists("/missing")


async def test_create_refuses_an_existing_node_and_makes_parents_on_request(store):
    await store.create("/brokers/topics/t", b"{}")
    assert await store.exists("/brokers") and await store.exists("/brokers/topics")
    assert await store.get("/brokers") == (b"", 0)
    with pytest.raises(NodeExists):
        await store.create("/brokers/topics/t", b"again")
    assert await store.get("/brokers/topics/t") == (b"{}", 0)
    with pytest.raises(NoNode):
        await store.create("/config/topics/t", b"{}", makepath=False)
    assert not await store.exists("/config")


async def test_children_are_sorted_names(store):
    for name in ["b", "a", "c10", "c2"]:
        await store.create(f"/ids/{name}")
    await store.create("/ids/a/deeper")
    assert await store.children("/ids") == ["a", "b", "c10", "c2"]
    assert await store.children("/ids/b") == []
    assert "ids" in await store.children("/")


async def test_delete_checks_version_and_children(store):
    await store.create("/t/partitions/0/state", b"s0")
    await store.create("/t/partitions/1/state", b"s1")
    await store.set("/t", b"assignment")
    with pytest.raises(NotEmpty):
        await store.delete("/t")
    with pytest.raises(BadVersion):
        await store.delete("/t", version=0, recursive=True)
    assert await store.get("/t/partitions/1/state") == (b"s1", 0)  # a refused delete touched nothing
    await store.delete("/t", version=1, recursive=True)
    for path in ["/t", "/t/partitions", "/t/partitions/0", "/t/partitions/0/state"]:
        assert not await store.exists(path)
    await store.create("/leaf", b"x")
    with pytest.raises(BadVersion):
        await store.delete("/leaf", version=3)
    await store.delete("/leaf", version=0)
    assert not await store.exists("/leaf")


async def test_put_creates_then_updates(store):
    await store.put("/config/topics/t", b'{"version": 1, "config": {"retention.ms": "1"}}')
    await store.put("/config/topics/t", b'{"version": 1, "config": {}}')
    assert (await store.get("/config/topics/t"))[0] == b'{"version": 1, "config": {}}'
    assert (await store.get("/config/topics/t"))[1] == 1


async def test_put_sets_a_node_another_writer_created_after_its_set_missed(store, monkeypatch):
    """Two brokers putting one absent node at once (two FindCoordinators creating `__transaction_state`,
    its config node first): the other's create lands between this put's set (NoNode) and its create."""
    create = store.create

    async def other_writer_first(path: str, data: bytes = b"", **options) -> None:
        await create(path, b"other")
        await create(path, data, **options)
    monkeypatch.setattr(store, "create", other_writer_first)
    await store.put("/config/topics/t", b"mine")
    assert await store.get("/config/topics/t") == (b"mine", 1)


async def test_persistent_nodes_outlive_the_session_and_ephemeral_ones_do_not(store_factory):
    first = await store_factory()
    await first.create("/kept", b"k")
    await first.create("/brokers/ids/1", b"me", ephemeral=True)
    with pytest.raises(StoreError):  # ZooKeeper refuses children of an ephemeral node; so does the embedded store
        await first.create("/brokers/ids/1/child", b"")
    assert await first.children("/brokers/ids") == ["1"]
    await first.close()
    second = await store_factory()
    assert await second.get("/kept") == (b"k", 0)
    assert await second.children("/brokers/ids") == []


async def test_register_creates_an_ephemeral_node_and_updates_its_own(store):
    await store.register("/brokers/ids/1", b"first")
    await store.register("/brokers/ids/1", b"second")  # our own session's node: updated, not refused
    assert (await store.get("/brokers/ids/1"))[0] == b"second"


async def test_children_watch_reports_changes_and_the_end_of_its_node(store):
    await store.create("/admin/delete_topics")
    seen = []
    watch = await store.watch_children("/admin/delete_topics", seen.append)
    assert seen == [[]]  # the current state, before watch_children returns
    await store.create("/admin/delete_topics/b")
    await store.create("/admin/delete_topics/a")
    await eventually(lambda: seen[-1] == ["a", "b"], what=f"children a, b (seen {seen})")
    await store.set("/admin/delete_topics/a", b"data")  # data of a child is not a children change
    await store.delete("/admin/delete_topics/b")
    await eventually(lambda: seen[-1] == ["a"], what=f"children a (seen {seen})")
    assert all(state is not None for state in seen) and seen.count(["a"]) == 1
    await store.delete("/admin/delete_topics", recursive=True)
    await eventually(lambda: seen[-1] is None, what=f"the end of the watched node (seen {seen})")
    assert watch.cancelled
    with pytest.raises(NoNode):
        await store.watch_children("/admin/delete_topics", seen.append)


async def test_data_watch_follows_a_node_through_deletion_and_recreation(store):
    seen = []
    await store.watch_data("/controller", lambda data, version: seen.append((data, version)))
    assert seen == [(None, None)]
    await store.create("/controller", b"1", ephemeral=True)
    await eventually(lambda: seen[-1] == (b"1", 0), what=f"the created node (seen {seen})")
    await store.set("/controller", b"2")
    await eventually(lambda: seen[-1] == (b"2", 1), what=f"the new data (seen {seen})")
    await store.delete("/controller")
    await eventually(lambda: seen[-1] == (None, None), what=f"the deletion (seen {seen})")
    await store.create("/controller", b"3")
    await eventually(lambda: seen[-1] == (b"3", 0), what=f"the re-created node (seen {seen})")


async def test_a_cancelled_watch_stays_quiet(store):
    await store.create("/w")
    cancelled, live = [], []
    watch = await store.watch_children("/w", cancelled.append)
    await store.watch_children("/w", live.append)
    watch.cancel()
    await store.create("/w/x")
    await eventually(lambda: live[-1] == ["x"], what="the live watch")
    assert cancelled == [[]]


async def test_writes_are_seen_by_a_second_session(store_factory):
    first = await store_factory()
    await first.create("/latest_producer_id_block", b"block-0")
    if store_factory.kind == "embedded":
        await first.close()  # the embedded store has one process: "a second session" is the next run
    second = await store_factory()
    data, version = await second.get("/latest_producer_id_block")
    assert (data, version) == (b"block-0", 0)
    await second.set("/latest_producer_id_block", b"block-1", version=0)
    if store_factory.kind == "zookeeper":
        with pytest.raises(BadVersion):  # compare-and-set across brokers, as producer id blocks need
            await first.set("/latest_producer_id_block", b"lost race", version=0)


async def test_sequential_children_number_up_in_the_order_they_were_made(store_factory):
    """Log dir events (/log_dir_event_notification) rely on it: the controller handles them in order."""
    store = await store_factory()
    made = [await store.create_sequential("/events/event_", b"%d" % n) for n in range(3)]
    assert made[0] == "/events/event_0000000000"
    assert made == sorted(made) and len(set(made)) == 3 and all(len(p) == len("/events/event_") + 10 for p in made)
    assert [(await store.get(path))[0] for path in made] == [b"0", b"1", b"2"]
    assert await store.children("/events") == [p.rsplit("/", 1)[1] for p in made]
    await store.delete(made[2])  # a number is never given out again, even after its node went
    later = await store.create_sequential("/events/event_")
    assert later > made[2]
    if store_factory.kind == "embedded":
        await store.close()
        again = await store_factory()  # the next run goes on past the numbers its file holds
        assert await again.create_sequential("/events/event_") > later
