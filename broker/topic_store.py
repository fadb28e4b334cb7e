"""What the metadata store holds of topics, read back: the topics' names, one topic whole, a topic's configs, and the
deletions marked (`/admin/delete_topics`); TopicManager keeps what they return."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from broker.cluster.layout import (
    ConfigEntityZNode,
    ConfigType,
    DeleteTopicsZNode,
    PartitionStateZNode,
    TopicsZNode,
    TopicZNode,
)
from broker.cluster.store import MetadataStore, NoNode
from broker.log.config import LogConfig
from broker.topic import Topic


async def topic_names(store: MetadataStore) -> list[str]:
    try:
        return await store.children(TopicsZNode.PATH)
    except NoNode:
        return []


async def read_topic(store: MetadataStore, name: str, log_config_for: Callable[[Mapping[str, str]], LogConfig]
                     ) -> Topic:
    """The topic as the store holds it: assignment, configs (its log config derived by `log_config_for`)
    and partition states; NoNode if it is not there."""
    assignment = TopicZNode.decode((await store.get(TopicZNode.path(name)))[0])
    configs = await read_configs(store, name) or {}
    replicas = assignment.replicas
    states = {}
    for partition in replicas:
        try:
            states[partition] = PartitionStateZNode.decode(
                (await store.get(PartitionStateZNode.path(name, partition)))[0])
        except NoNode:
            pass
    return Topic(
        name=name,
        topic_id=assignment.topic_id,
        replicas=replicas,
        configs=dict(configs),
        log_config=log_config_for(configs),
        states=states,
        adding=assignment.adding,
        removing=assignment.removing,
    )


async def read_configs(store: MetadataStore, name: str) -> dict[str, str] | None:
    try:
        return ConfigEntityZNode.decode((await store.get(ConfigEntityZNode.path(ConfigType.TOPIC, name)))[0])
    except NoNode:
        return None


async def pending_deletions(store: MetadataStore) -> list[str]:
    try:
        return await store.children(DeleteTopicsZNode.PATH)
    except NoNode:
        return []
