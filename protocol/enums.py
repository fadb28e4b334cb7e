"""Kafka's enumerations that travel as numbers in messages, defined once for the broker and the client.

The codes are facts of the protocol (Kafka's ApiKeys, ResourceType, PatternType, AclOperation,
AclPermissionType, ConfigResource.Type, DescribeConfigs' ConfigSource and ConfigType, AlterConfigOp,
IsolationLevel, FindCoordinator's key types, ListOffsets' special timestamps). Where an enum lists only
part of Kafka's, the rest is what Ebb refuses: a code outside it is answered as an unknown one.
"""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    """The APIs Ebb speaks (schemas/*.json; tests hold the two equal)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92
    # Ebb's own APIs, from 10000 up (no Kafka key comes near): docs/protocol.md, "Our additions".
    DESCRIBE_ERASURE = 10000


# --- ACLs (CreateAcls, DescribeAcls, DeleteAcls) -------------------------------------------------------


class ResourceType(IntEnum):
    """What an ACL is on. DELEGATION_TOKEN (6) and USER (7) are not served."""

    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(IntEnum):
    ANY = 1  # filters only
    MATCH = 2  # filters only: every pattern that matches a name
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    """Kafka's AclOperation."""

    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(IntEnum):
    """Kafka's AclPermissionType."""

    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


# --- configs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) -----------------------------------


class ConfigResourceType(IntEnum):
    """What a config belongs to (Kafka's ConfigResource.Type)."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    """DescribeConfigs v1+ `ConfigSource` codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    @classmethod
    def of(cls, value: int) -> ConfigSource:
        """The source a broker named; UNKNOWN for a code newer than this list."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConfigType(IntEnum):
    """DescribeConfigs v3+ `ConfigType` codes."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs' ConfigOperation."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


# --- reading --------------------------------------------------------------------------------------------


class IsolationLevel(IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class CoordinatorType(IntEnum):
    """FindCoordinator's KeyType."""

    GROUP = 0
    TRANSACTION = 1
    SHARE = 2


class SpecialTimestamp(IntEnum):
    """ListOffsets' timestamps that name a position instead of a time."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3  # v7+
    EARLIEST_LOCAL = -4  # v8+
    LATEST_TIERED = -5  # v9+


# --- ElectLeaders (KIP-460) ------------------------------------------------------------------------------


class UpgradeType(IntEnum):
    """UpdateFeatures v1+ (KIP-778): how a feature's level may move; any other code is unknown."""
    UPGRADE = 1
    SAFE_DOWNGRADE = 2  # lossless
    UNSAFE_DOWNGRADE = 3  # may lose metadata


class ElectionType(IntEnum):
    PREFERRED = 0  # the first replica of the assignment, if alive and in sync
    UNCLEAN = 1  # any alive replica, for a partition whose in-sync replicas are all gone


# --- share groups (KIP-932: ShareFetch, ShareAcknowledge) ------------------------------------------------


class AcknowledgeType(IntEnum):
    """An AcknowledgementBatch's AcknowledgeTypes."""

    GAP = 0  # an offset the batch did not hold (compacted away)
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # v2+ with IsRenewAck: keep the lock
