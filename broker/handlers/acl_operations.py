"""Authorized-operation bitfields (KIP-430) for responses that report them.

Ebb has no authorizer, so a caller may do everything a resource type supports. Each bit is
`1 << AclOperation code`; only operations valid for the resource are set, because clients such as
kafka-python turn the bits back into enum members and raise on unknown ones. INT32_MIN means "not
requested".
"""

from __future__ import annotations

NOT_REQUESTED = -(2**31)

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12


def _bits(*operations: int) -> int:
    return sum(1 << op for op in operations)


# Kafka's AclEntry.supportedOperations per resource type.
TOPIC_OPERATIONS = _bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
CLUSTER_OPERATIONS = _bits(CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
                           DESCRIBE)
GROUP_OPERATIONS = _bits(READ, DESCRIBE, DELETE)


def topic_operations(requested: bool) -> int:
    return TOPIC_OPERATIONS if requested else NOT_REQUESTED


def cluster_operations(requested: bool) -> int:
    return CLUSTER_OPERATIONS if requested else NOT_REQUESTED
