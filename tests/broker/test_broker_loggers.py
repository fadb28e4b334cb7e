"""BROKER_LOGGER: each logger's level described and changed at runtime, in force on the broker's
output at once; what Kafka refuses, refused the same way."""

import pytest

from protocol.enums import ConfigSource, ConfigType
from protocol.errors import ErrorCode
from tests.broker.test_configs import BROKER_LOGGER, DELETE, SET, SUBTRACT, _configs, _incremental
from tests.broker.wire_client import WireClient, create_topic
from tests.support.polling import wait_for


@pytest.fixture(scope="module")
def client(broker):
    with WireClient(broker.port) as c:
        yield c


def levels(client) -> dict[str, str]:
    return {name: entry.value for name, entry in _configs(client, "1", resource_type=BROKER_LOGGER).items()}


def test_every_logger_with_its_level(client):
    entries = _configs(client, "1", resource_type=BROKER_LOGGER)
    assert {"root", "topics", "produce", "store"} <= set(entries)
    assert {e.value for e in entries.values()} == {"INFO"}
    root = entries["root"]
    assert (root.config_source, root.config_type, root.documentation, root.read_only, root.synonyms) == \
        (ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, ConfigType.UNKNOWN, "", False, [])


def test_a_level_set_and_deleted_is_in_force_at_once(broker, client):
    assert _incremental(client, "1", [("topics", SET, "WARN")], resource_type=BROKER_LOGGER).error_code == 0
    assert levels(client)["topics"] == "WARN" and levels(client)["root"] == "INFO"
    create_topic(client, "quiet")  # "created topic" is INFO: not shown while topics is at WARN
    assert _incremental(client, "1", [("topics", DELETE, None)], resource_type=BROKER_LOGGER).error_code == 0
    assert levels(client)["topics"] == "INFO"
    create_topic(client, "heard")
    wait_for(lambda: created(broker, "heard"), what="the INFO line of the second topic")
    assert not created(broker, "quiet")


def created(broker, topic: str) -> bool:
    """The topics logger's INFO line for the topic is in the broker's output."""
    return any(f'"topic": "{topic}"' in line and '"event": "created topic"' in line
               for line in broker.log_text().splitlines())


@pytest.mark.parametrize("operations, error, message", [
    ([("no.such.logger", SET, "DEBUG")], ErrorCode.INVALID_CONFIG, "Logger no.such.logger does not exist!"),
    ([("topics", SET, "LOUD")], ErrorCode.INVALID_CONFIG, "Cannot set the log level of topics to LOUD as it is "
     "not a supported log level. Valid log levels are OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE, ALL"),
    ([("topics", SUBTRACT, "DEBUG")], ErrorCode.INVALID_REQUEST,
     "SUBTRACT operation is not allowed for the BROKER_LOGGER resource"),
    ([("root", DELETE, None)], ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed"),
    ([("topics", SET, "DEBUG"), ("store", SET, "LOUD")], ErrorCode.INVALID_CONFIG,
     "Cannot set the log level of store to LOUD as it is not a supported log level. Valid log levels are OFF, "
     "FATAL, ERROR, WARN, INFO, DEBUG, TRACE, ALL"),
])
def test_refused_and_nothing_changed(client, operations, error, message):
    result = _incremental(client, "1", operations, resource_type=BROKER_LOGGER)
    assert (result.error_code, result.error_message) == (error, message)
    assert set(levels(client).values()) == {"INFO"}


def test_only_this_broker_by_id(client):
    for name in ("", "2"):
        assert _incremental(client, name, [("topics", SET, "DEBUG")],
                            resource_type=BROKER_LOGGER).error_code == ErrorCode.INVALID_REQUEST
    assert _incremental(client, "1", [("topics", SET, "DEBUG")], resource_type=BROKER_LOGGER,
                        validate_only=True).error_code == 0
    assert levels(client)["topics"] == "INFO"
