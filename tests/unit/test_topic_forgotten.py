"""A deleted topic leaves nothing per topic behind in the log manager: a broker that creates and deletes
topics for months (Kafka Streams' and the pipeline's intermediate topics) must not grow with every topic
it ever had (found by `python -m bench.soak`: one LogConfig kept per topic created)."""

from tests.support.topic_manager import embedded_topics


async def test_a_deleted_topic_leaves_no_config_behind(tmp_path):
    async with embedded_topics(tmp_path) as (topics, logs):
        await topics.create("kept", 1, 1, {"retention.ms": "1000"})
        for round_ in range(3):
            await topics.create(f"passing-{round_}", 2, 1, {"retention.ms": "2000"})
            assert logs.config_for(f"passing-{round_}").retention_ms == 2000
            assert await topics.delete(f"passing-{round_}")
        assert set(logs.topic_configs) == {"kept"}
        assert logs.config_for("kept").retention_ms == 1000
