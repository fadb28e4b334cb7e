"""Kafka's enums, defined once in protocol/enums.py: held against the specs and against kafka-python's
own definitions (an oracle nobody here wrote)."""

from enum import IntEnum

import kafka.admin._acls as kafka_acls
import kafka.admin._configs as kafka_configs
import pytest

from client.acls import OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES, name_of
from protocol.enums import (
    AlterConfigOp,
    ApiKey,
    ConfigResourceType,
    ConfigSource,
    ConfigType,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from protocol.messages import APIS


def test_api_keys_are_the_specs():
    spelled = {key.value: "".join(word.capitalize() for word in key.name.split("_")) for key in ApiKey}
    assert spelled == {key: api.name for key, api in APIS.items()}


@pytest.mark.parametrize("ours, theirs", [
    (ResourceType, kafka_acls.ResourceType),
    (PatternType, kafka_acls.ACLResourcePatternType),
    (Operation, kafka_acls.ACLOperation),
    (Permission, kafka_acls.ACLPermissionType),
    (ConfigResourceType, kafka_configs.ConfigResourceType),
    (ConfigType, kafka_configs.ConfigType),
    (AlterConfigOp, kafka_configs.AlterConfigOp),
])
def test_codes_match_kafka_python(ours: type[IntEnum], theirs: type[IntEnum]):
    assert {m.name: m.value for m in ours}.items() <= {m.name: m.value for m in theirs}.items()


def test_config_sources_match_kafka_python_by_code():
    # kafka-python spells 7 and 8 DYNAMIC_CLIENT_METRICS_CONFIG and DYNAMIC_GROUP_CONFIG; Kafka does not.
    assert [m.value for m in ConfigSource] == [m.value for m in kafka_configs.ConfigSourceType]
    assert ConfigSource.of(8) is ConfigSource.GROUP_CONFIG and ConfigSource.of(99) is ConfigSource.UNKNOWN


def test_the_acl_commands_words_name_the_codes():
    assert RESOURCE_TYPES["transactional-id"] == ResourceType.TRANSACTIONAL_ID == 5
    assert OPERATIONS["describeconfigs"] == Operation.DESCRIBE_CONFIGS == 10
    assert (PATTERN_TYPES["prefixed"], PERMISSIONS["deny"]) == (4, 2)
    assert name_of(OPERATIONS, 12) == "idempotentwrite" and name_of(OPERATIONS, 99) == "99"
