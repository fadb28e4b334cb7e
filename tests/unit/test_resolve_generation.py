"""broker/resolve_generation.py's counter moves on an actual change only: a kept Fetch resolve
(broker/handlers/fetch_resolve.py) outlives a probe's retry of a partition that keeps failing, a pop
of a partition that was not unloaded, and a topic refresh that found the topic as it was."""

from broker.log import TopicPartition
from broker.log.unloaded import UnloadedPartitions
from broker.resolve_generation import RESOLVE_GENERATION
from tests.support.topic_manager import embedded_topics

TP = TopicPartition("t", 0)


def test_unloaded_partitions_move_the_counter_only_when_one_comes_or_goes():
    unloaded = UnloadedPartitions()
    start = RESOLVE_GENERATION.value
    assert unloaded.pop(TP) is None
    assert RESOLVE_GENERATION.value == start
    unloaded.failed(TP, OSError("dead disk"), 0, 0, 0, quiet=True)
    assert RESOLVE_GENERATION.value == start + 1
    unloaded.failed(TP, OSError("still dead"), 0, 0, 0, quiet=True)  # the probe's next retry
    assert RESOLVE_GENERATION.value == start + 1
    entry = unloaded.pop(TP)
    assert entry is not None and RESOLVE_GENERATION.value == start + 2
    unloaded.put_back(TP, entry)
    assert RESOLVE_GENERATION.value == start + 3


async def test_a_refresh_that_finds_the_topic_as_it_was_leaves_the_counter(tmp_path):
    async with embedded_topics(tmp_path) as (topics, _):
        await topics.create("t", 2, 1)
        assert await topics.refresh("t") is not None
        start = RESOLVE_GENERATION.value
        assert await topics.refresh("t") is not None
        assert RESOLVE_GENERATION.value == start
