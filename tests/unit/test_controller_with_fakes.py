"""The controller needs only the store, the topics and a few lookups (broker/cluster/controller.py):
here a real embedded store and small fakes for the rest drive one reconcile round."""

import uuid

from broker.cluster.controller import Controller
from broker.cluster.layout import PartitionStateZNode
from broker.cluster.partition_state import PartitionState
from broker.cluster.store import EmbeddedStore
from broker.config import ReplicationConfig
from broker.log import TopicPartition
from broker.topic import Topic
from tests.unit.fakes import TopicsOf


def topics(replicas: dict[int, list[int]]) -> TopicsOf:
    return TopicsOf(Topic("t", uuid.uuid4(), replicas))


async def test_a_round_moves_leadership_off_a_dead_broker(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    await store.put(PartitionStateZNode.path("t", 0), PartitionStateZNode.encode(PartitionState(1, 4, (1, 2, 3), 1)))
    await store.put(PartitionStateZNode.path("t", 1), PartitionStateZNode.encode(PartitionState(2, 1, (2, 1), 1)))
    written = []
    controller = Controller(store, topics({0: [1, 2, 3], 1: [2, 1, 3]}), 2, ReplicationConfig(),
                            alive_ids=lambda: [2, 3], controller_id=lambda: 2,
                            state_written=lambda tp, state, version: written.append((tp, state.leader)))
    controller.active = True
    assert await controller.reconcile() == 2
    first = PartitionStateZNode.decode((await store.get(PartitionStateZNode.path("t", 0)))[0])
    assert (first.leader, first.leader_epoch, first.isr, first.controller_epoch) == (2, 5, (2, 3), 0)
    second = PartitionStateZNode.decode((await store.get(PartitionStateZNode.path("t", 1)))[0])
    assert (second.leader, second.isr) == (2, (2,))  # broker 1 leaves the ISR, leadership stays
    assert written == [(TopicPartition("t", 0), 2), (TopicPartition("t", 1), 2)]
    await store.close()


async def test_log_dir_events_take_a_broker_out_of_leadership_and_the_isr_until_its_dir_is_back(tmp_path):
    """/log_dir_event_notification, handled in order and deleted: broker 1's dir failed (Kafka's event 1),
    so it loses leadership and the ISRs though still registered; its recovery (Ebb's event 2) makes it
    usable again (a partition offline for want of it gets it back as leader)."""
    from broker.cluster.layout import LogDirEventNotificationZNode, LogDirEventZNode
    from broker.cluster.log_dir_events import handle_log_dir_events

    store = await EmbeddedStore.open(tmp_path / "meta.json")
    await store.put(PartitionStateZNode.path("t", 0), PartitionStateZNode.encode(PartitionState(1, 4, (1, 2, 3), 1)))
    await store.put(PartitionStateZNode.path("t", 1), PartitionStateZNode.encode(PartitionState(1, 2, (1,), 1)))
    controller = Controller(store, topics({0: [1, 2, 3], 1: [1, 2, 3]}), 2, ReplicationConfig(),
                            alive_ids=lambda: [1, 2, 3], controller_id=lambda: 2,
                            state_written=lambda tp, state, version: None)
    controller.active = True

    def read(index: int) -> PartitionState:
        return PartitionStateZNode.decode(store._nodes[PartitionStateZNode.path("t", index)].data)

    prefix = LogDirEventZNode.path_prefix()
    await store.create_sequential(prefix, LogDirEventZNode.encode(1, LogDirEventZNode.FAILURE))
    assert (await store.get(f"{prefix}0000000000"))[0] == b'{"broker": 1, "event": 1, "version": 1}'
    await store.create_sequential(prefix, b"not json")  # dropped, not retried forever
    assert await handle_log_dir_events(store, controller.dir_failed)
    assert controller.dir_failed == {1} and await store.children(LogDirEventNotificationZNode.PATH) == []
    assert controller.alive_ids() == [2, 3]
    assert await controller.reconcile() == 2
    assert (read(0).leader, read(0).leader_epoch, read(0).isr) == (2, 5, (2, 3))
    assert (read(1).leader, read(1).isr) == (-1, (1,))  # its only in-sync replica's dir is down: offline

    # Failed again, then back: the last event in order wins.
    await store.create_sequential(prefix, LogDirEventZNode.encode(1, LogDirEventZNode.FAILURE))
    await store.create_sequential(prefix, LogDirEventZNode.encode(1, LogDirEventZNode.RECOVERY))
    assert await handle_log_dir_events(store, controller.dir_failed)
    assert controller.dir_failed == set()
    assert await controller.reconcile() == 1
    assert (read(1).leader, read(1).isr) == (1, (1,))
    assert (read(0).leader, read(0).isr) == (2, (2, 3))  # broker 1 rejoins when the leader takes it back

    # A broker that left and returns reports its dir again: its mark does not outlive its registration.
    controller.dir_failed.add(3)
    controller.registered_ids = lambda: [1, 2]
    await controller.reconcile()
    assert controller.dir_failed == set()
    await store.close()


async def test_a_broker_tells_each_new_controller_of_its_dir_while_it_is_down(tmp_path):
    """The broker's side: each announcement writes the dir's state as it is when written; a new
    controller (it starts with no failed dirs) hears of a dir still down, not of a healthy one."""
    import asyncio

    from broker.cluster.layout import LogDirEventNotificationZNode, LogDirEventZNode
    from broker.cluster.log_dir_events import LogDirEvents

    store = await EmbeddedStore.open(tmp_path / "meta.json")
    failed = [True]
    tasks: list[asyncio.Task] = []

    def spawn_until_done(make, what):
        tasks.append(asyncio.ensure_future(make()))
        return tasks[-1]

    events = LogDirEvents(store, 3, dir_failed=lambda: failed[0], keep=lambda watch: None,
                          spawn_until_done=spawn_until_done, wake_controller=lambda: None)
    await events.start()  # failed while starting: told at once

    async def written() -> list[tuple[int, int]]:
        await asyncio.gather(*tasks)
        children = LogDirEventZNode.in_order(await store.children(LogDirEventNotificationZNode.PATH))
        return [LogDirEventZNode.decode((await store.get(LogDirEventZNode.path(c)))[0]) for c in children]

    assert await written() == [(3, LogDirEventZNode.FAILURE)]
    events.controller_changed(2)
    assert await written() == [(3, LogDirEventZNode.FAILURE)] * 2
    failed[0] = False
    events.announce()  # the probe brought it back
    events.controller_changed(1)  # healthy: nothing to tell
    assert await written() == [(3, LogDirEventZNode.FAILURE)] * 2 + [(3, LogDirEventZNode.RECOVERY)]
    await store.close()
