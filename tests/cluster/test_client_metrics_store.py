"""Client metrics subscriptions in the metadata store (broker/client_metrics_configs.py), on ZooKeeper
and on the embedded store: what one broker sets another reads and lists at once (a describe reads the
store), at the path Kafka's ZooKeeper mode used, `/config/client-metrics/<name>` with the name
sanitized; a refusal writes nothing; the node goes with the subscription's last config."""

from __future__ import annotations

import pytest

from broker.client_metrics_configs import ClientMetricsConfigs, ClientMetricsError
from broker.cluster.layout import ConfigEntityZNode, ConfigType
from broker.cluster.store import NoNode
from protocol.enums import ConfigSource
from protocol.errors import ErrorCode

NAME = "team/a b"


async def test_one_broker_sets_another_reads(store_factory):
    first = ClientMetricsConfigs(await store_factory())
    await first.alter(NAME, lambda current: {**current, "metrics": " a.b , c ", "interval.ms": "1000"})
    second = ClientMetricsConfigs(await store_factory())  # another client (ZooKeeper) or a restart
    entries = {e.name: e for e in await second.describe(NAME)}
    assert (entries["metrics"].value, entries["metrics"].source) == ("a.b,c", ConfigSource.CLIENT_METRICS_CONFIG)
    assert (entries["match"].value, entries["match"].source) == ("", ConfigSource.DEFAULT_CONFIG)
    assert await second.names() == [NAME]
    path = ConfigEntityZNode.path(ConfigType.CLIENT_METRICS, NAME)
    assert path == "/config/client-metrics/team%2Fa%20b"
    data, _ = await second.store.get(path)
    assert ConfigEntityZNode.decode(data) == {"metrics": "a.b,c", "interval.ms": "1000"}
    with pytest.raises(ClientMetricsError) as refused:
        await second.alter(NAME, lambda current: {**current, "interval.ms": "99"})
    assert refused.value.error_code == ErrorCode.INVALID_REQUEST
    await second.alter(NAME, lambda current: {**current, "match": "client_id=x"}, validate_only=True)
    assert await second.get(NAME) == {"metrics": "a.b,c", "interval.ms": "1000"}
    await second.alter(NAME, lambda current: {})
    with pytest.raises(NoNode):
        await second.store.get(path)
    assert await second.names() == []
