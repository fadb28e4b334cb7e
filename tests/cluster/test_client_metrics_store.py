"""Client metrics subscriptions in the metadata store (broker/client_metrics_configs.py), on ZooKeeper
and on the embedded store: what one broker sets another reads and lists at once (a describe reads the
store), at the path Kafka's ZooKeeper mode used, `/config/client-metrics/<name>` with the name
sanitized; a refusal writes nothing; the node goes with the subscription's last config. In a cluster of
three, what one broker is told every broker describes and lists at once."""

from __future__ import annotations

import pytest

from broker.client_metrics_configs import ClientMetricsConfigs, ClientMetricsError
from broker.cluster.layout import ConfigEntityZNode, ConfigType
from broker.cluster.store import NoNode
from protocol.enums import ConfigSource
from protocol.errors import ErrorCode
from protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest, ListConfigResourcesRequest
from tests.broker.data_wire import WireClient
from tests.cluster.three_brokers import three_brokers

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


@pytest.mark.parametrize("name", [".", ".."])
async def test_subscriptions_named_dot_and_dot_dot_are_stored(store_factory, name):
    """Relative path elements to ZooKeeper, which refused them as nodes (the handlers raised)."""
    configs = ClientMetricsConfigs(await store_factory())
    await configs.alter(name, lambda current: {**current, "interval.ms": "1000"})
    again = ClientMetricsConfigs(await store_factory())
    assert (await again.get(name), await again.names()) == ({"interval.ms": "1000"}, [name])
    await again.alter(name, lambda current: {})
    assert await again.names() == []


def test_every_broker_of_a_cluster_answers_the_same_after_an_alter(zk_connect, tmp_path):
    """Kafka's brokers answer once its metadata log reaches them; Ebb's read ZooKeeper, so at once."""
    Alter = IncrementalAlterConfigsRequest.AlterConfigsResource
    with three_brokers(zk_connect, tmp_path) as cluster:
        with WireClient(cluster[2].port) as client:
            [altered] = client.request(IncrementalAlterConfigsRequest(validate_only=False, resources=[Alter(
                resource_type=16, resource_name="everywhere", configs=[
                    Alter.AlterableConfig(name="metrics", config_operation=0, value="org.apache.kafka."),
                    Alter.AlterableConfig(name="interval.ms", config_operation=0, value="2000")])]), 1).responses
        assert altered.error_code == ErrorCode.NONE, altered.error_message
        for broker in cluster.values():
            with WireClient(broker.port) as client:
                [described] = client.request(DescribeConfigsRequest(resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(resource_type=16, resource_name="everywhere",
                                                                   configuration_keys=None)]), 4).results
                listed = client.request(ListConfigResourcesRequest(), 0).config_resources
            own = {c.name: c.value for c in described.configs
                   if c.config_source == ConfigSource.CLIENT_METRICS_CONFIG}
            assert own == {"metrics": "org.apache.kafka.", "interval.ms": "2000"}
            assert [r.resource_name for r in listed] == ["everywhere"]
