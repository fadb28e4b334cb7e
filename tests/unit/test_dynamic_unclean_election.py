"""unclean.leader.election.enable changed dynamically reaches the controller (broker/dynamic_config.py's
ControllerSettings): it reads the value in force each round and is woken when it changes, so an
offline partition gets an out-of-sync leader at once."""

import uuid

from broker.cluster.controller import Controller
from broker.cluster.layout import PartitionStateZNode
from broker.cluster.partition_state import PartitionState
from broker.cluster.store import EmbeddedStore
from broker.config import load_config
from broker.dynamic_config import ControllerSettings, DynamicBrokerConfig
from broker.topic import Topic
from tests.unit.fakes import TopicsOf


async def test_a_dynamic_unclean_election_setting_wakes_the_controller_which_uses_it(tmp_path):
    config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", "listeners=PLAINTEXT://127.0.0.1:0"])
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    dynamic = DynamicBrokerConfig(store, config)
    await dynamic.load()
    woken: list[bool] = []
    dynamic.unclean_election_listeners.append(lambda: woken.append(True))
    settings = ControllerSettings(config.replication, dynamic)
    await store.put(PartitionStateZNode.path("t", 0), PartitionStateZNode.encode(PartitionState(1, 4, (1,), 1)))
    topics = TopicsOf(Topic("t", uuid.uuid4(), {0: [1, 2]}))
    controller = Controller(store, topics, 2, settings, alive_ids=lambda: [2], controller_id=lambda: 2,
                            state_written=lambda tp, state, version: None)
    controller.active = True

    assert not settings.unclean_leader_election_enable
    assert await controller.reconcile() == 1  # the only in-sync replica is gone: no leader
    assert PartitionStateZNode.decode((await store.get(PartitionStateZNode.path("t", 0)))[0]).leader == -1

    await dynamic.alter("", lambda configs: {**configs, "log.retention.ms": "100000"})
    assert woken == []  # another property: no round for it
    await dynamic.alter("", lambda configs: {**configs, "unclean.leader.election.enable": "true"})
    assert settings.unclean_leader_election_enable and woken == [True]
    assert await controller.reconcile() == 1
    state = PartitionStateZNode.decode((await store.get(PartitionStateZNode.path("t", 0)))[0])
    assert (state.leader, state.isr) == (2, (2,))  # the out-of-sync replica leads

    await dynamic.alter("", lambda configs: {k: v for k, v in configs.items()
                                             if k != "unclean.leader.election.enable"})
    assert not settings.unclean_leader_election_enable and woken == [True, True]
    await store.close()
