"""A deleted topic leaves nothing per topic behind in the log manager: a broker that creates and deletes
topics for months (Kafka Streams' and the pipeline's intermediate topics) must not grow with every topic
it ever had (found by `python -m bench.soak`: one LogConfig kept per topic created)."""

from broker.cluster.store import EmbeddedStore
from broker.config import load_config
from broker.dynamic_config import DynamicBrokerConfig
from broker.log import LogManager
from broker.topics import TopicManager


async def test_a_deleted_topic_leaves_no_config_behind(tmp_path):
    config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", "listeners=PLAINTEXT://127.0.0.1:0",
                                "node.id=1"])
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    dynamic = DynamicBrokerConfig(store, config)
    await dynamic.load()
    logs = LogManager(tmp_path / "logs")
    await logs.startup(background_tasks=False)
    topics = TopicManager(store, logs, config, dynamic, brokers=lambda: {1: None})
    try:
        await topics.create("kept", 1, 1, {"retention.ms": "1000"})
        for round_ in range(3):
            await topics.create(f"passing-{round_}", 2, 1, {"retention.ms": "2000"})
            assert logs.config_for(f"passing-{round_}").retention_ms == 2000
            assert await topics.delete(f"passing-{round_}")
        assert set(logs.topic_configs) == {"kept"}
        assert logs.config_for("kept").retention_ms == 1000
    finally:
        await logs.shutdown()
