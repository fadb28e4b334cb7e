"""DescribeClientQuotas: Ebb has no quotas, so a valid filter matches nothing; bad filters are refused
as Kafka refuses them."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from protocol.messages import DescribeClientQuotasRequest as Request
from tests.broker.wire_client import WireClient
from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("quotas")) as process:
        yield process


def component(kind: str, match_type: int, match: str | None = None):
    return Request.ComponentData(entity_type=kind, match_type=match_type, match=match)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("components", [[], [component("user", 0, "alice")], [component("user", 2)],
                                        [component("user", 1), component("client-id", 2)], [component("ip", 2)]])
def test_valid_filters_match_nothing(broker, version, components):
    with WireClient(broker.port) as client:
        answer = client.send(Request(components=components, strict=False), version=version)
    assert (answer.error_code, answer.error_message, answer.entries) == (ErrorCode.NONE, None, [])


def test_a_custom_entity_type_is_unsupported_version_as_in_kafka(broker):
    with WireClient(broker.port) as client:
        answer = client.send(Request(components=[component("group", 2)], strict=False), version=1)
    assert answer.error_code == ErrorCode.UNSUPPORTED_VERSION and "Custom entity type" in answer.error_message


@pytest.mark.parametrize("components, says", [
    ([component("user", 2), component("user", 0, "bob")], "twice"),
    ([component("user", 5)], "Unknown match type"),
    ([component("user", 0)], "needs a name"),
    ([component("client-id", 1, "x")], "takes no name"),
    ([component("ip", 2), component("user", 2)], "cannot be combined"),
])
def test_invalid_filters_are_invalid_request(broker, components, says):
    with WireClient(broker.port) as client:
        answer = client.send(Request(components=components, strict=True), version=1)
    assert answer.error_code == ErrorCode.INVALID_REQUEST and says in answer.error_message
    assert answer.entries is None
