"""The metadata store's layout: every node's path and the encoding of its data, in one place.

Kafka's ZkData is the model, and the paths and JSON are Kafka's ZooKeeper layout, so that the embedded
store (broker/cluster/store.py) and ZooKeeper (broker/cluster/zookeeper.py) hold the same tree and
Kafka's tools can read it. Each node is a class with `path(...)` (or `PATH`), and `encode(...)` and
`decode(data)` where it has data; nobody else spells a path or parses a node's data.

```
/cluster/id                                  ClusterIdZNode
/controller, /controller_epoch               ControllerZNode, ControllerEpochZNode
/brokers/ids/<id>                            BrokerIdZNode (ephemeral registration)
/brokers/topics/<t>                          TopicZNode (topic id, replica assignment)
/brokers/topics/<t>/partitions/<p>/state     PartitionStateZNode
/config/<type>/<name>                        ConfigEntityZNode (topics' and groups' configs, users' SCRAM credentials)
/config/brokers/<id>, /config/brokers/<default>  BrokerConfigZNode (dynamic broker configs, KIP-226)
/config/users/<u>[/clients/<c>], /config/clients/<c>, /config/ips/<ip>  ClientQuotaZNode (client quotas)
/config/changes/config_change_<n>            ConfigChangeZNode (sequential: which entity's configs changed)
/admin/delete_topics/<t>[/<id>]              DeleteTopicsTopicZNode (and each broker's acknowledgement)
/log_dir_event_notification/log_dir_event_<n>  LogDirEventZNode (sequential: a broker's log dir failed or is back)
/latest_producer_id_block                    ProducerIdBlockZNode
/kafka-acl/<type>/<name>                     AclResourceZNode (LITERAL)
/kafka-acl-extended/prefixed/<type>/<prefix> AclResourceZNode (PREFIXED)
/ebb/acl-changes                             AclChangesZNode (Ebb's: bumped after every ACL change)
```
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar
from urllib.parse import quote, unquote

from broker.cluster.partition_state import PartitionState
from broker.cluster.store import BadVersion, MetadataStore, NodeExists, NoNode, NotEmpty
from broker.log.checkpoint import topic_id_from_str, topic_id_to_str
from broker.security.acls import Acl
from protocol.enums import Operation, PatternType, Permission, ResourceType

NO_CONTROLLER = -1  # what the cluster's view holds while /controller is absent or unreadable


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True).encode()


def _in_sequence(children: list[str], prefix: str) -> list[str]:
    """The sequential children named `prefix` + n, in the order they were created."""
    return sorted((c for c in children if c.startswith(prefix)), key=lambda c: c[len(prefix):])


def sanitized(name: str) -> str:
    """A user's or resource's name as one path element: URL-encoded, as Kafka's Sanitizer does. The
    names "." and ".." (which Kafka accepts for groups, subscriptions, users) are ZooKeeper's relative
    path elements, refused as node names: their dots are encoded too. Only these two, so that every
    name stored before keeps its node."""
    quoted = quote(name, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def desanitized(child: str) -> str:
    """The name a child node of `sanitized(name)` stands for."""
    return unquote(child)


class ClusterIdZNode:
    PATH = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _json({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return str(json.loads(data)["id"])


class ControllerZNode:
    """The elected controller (ephemeral)."""

    PATH = "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int) -> bytes:
        return _json({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})

    @staticmethod
    def decode(data: bytes | None) -> int:
        """The controller's broker id; NO_CONTROLLER when there is none or it cannot be read."""
        try:
            return int(json.loads(data)["brokerid"]) if data else NO_CONTROLLER
        except (ValueError, KeyError, TypeError):
            return NO_CONTROLLER


class ControllerEpochZNode:
    PATH = "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    def decode(data: bytes) -> int:
        return int(data or b"0")


class BrokerIdsZNode:
    """A child per alive broker."""

    PATH = "/brokers/ids"


@dataclass(frozen=True)
class BrokerRegistration:
    host: str  # host and port: the inter-broker listener, which the other brokers use
    port: int
    rack: str | None
    endpoints: tuple[str, ...]  # every listener's advertised address, "NAME://host:port"
    security_protocols: dict[str, str]  # listener name -> security protocol
    timestamp: str  # set at start: a new one on a node that stayed is a restart
    # The feature ranges the broker supports (KIP-584: Kafka's ZooKeeper-era "features" field);
    # None: registered by an Ebb from before the field, which serves transaction.version 0-1 only.
    features: dict[str, tuple[int, int]] | None = None


class BrokerIdZNode:
    VERSION = 5

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.PATH}/{broker_id}"

    @staticmethod
    def encode(registration: BrokerRegistration) -> bytes:
        return _json({"version": BrokerIdZNode.VERSION, "host": registration.host, "port": registration.port,
                      "rack": registration.rack, "endpoints": list(registration.endpoints),
                      "listener_security_protocol_map": registration.security_protocols,
                      "timestamp": registration.timestamp,
                      **({} if registration.features is None else {"features": {
                          name: {"min_version": low, "max_version": high}
                          for name, (low, high) in sorted(registration.features.items())}})})

    @staticmethod
    def decode(data: bytes) -> BrokerRegistration:
        """ValueError if it cannot be read."""
        try:
            raw = json.loads(data)
            features = raw.get("features")
            return BrokerRegistration(
                host=raw["host"], port=int(raw["port"]), rack=raw.get("rack"),
                endpoints=tuple(str(e) for e in raw.get("endpoints", [])),
                security_protocols=dict(raw.get("listener_security_protocol_map") or {}),
                timestamp=str(raw.get("timestamp")),
                features=None if features is None else {
                    str(name): (int(spec["min_version"]), int(spec["max_version"]))
                    for name, spec in features.items()})
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"unreadable broker registration: {exc!r}") from None


class TopicsZNode:
    """A child per topic."""

    PATH = "/brokers/topics"


@dataclass(frozen=True)
class TopicAssignment:
    topic_id: uuid.UUID
    replicas: dict[int, list[int]]  # partition -> replica broker ids (the first is the preferred leader)
    # A reassignment under way (KIP-455, broker/cluster/reassignment.py): partition -> the replicas
    # still joining, and those that leave once the target has caught up; `replicas` holds both.
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)


class TopicZNode:
    VERSION = 3

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.PATH}/{topic}"

    @staticmethod
    def encode(assignment: TopicAssignment) -> bytes:
        def by_partition(entries: dict[int, list[int]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(entries.items()) if r}

        return _json({"version": TopicZNode.VERSION, "topic_id": topic_id_to_str(assignment.topic_id),
                      "partitions": by_partition(assignment.replicas),
                      "adding_replicas": by_partition(assignment.adding),
                      "removing_replicas": by_partition(assignment.removing)})

    @staticmethod
    def decode(data: bytes) -> TopicAssignment:
        raw = json.loads(data)

        def by_partition(key: str) -> dict[int, list[int]]:
            return {int(p): [int(b) for b in r] for p, r in (raw.get(key) or {}).items() if r}

        return TopicAssignment(topic_id_from_str(raw["topic_id"]), by_partition("partitions"),
                               by_partition("adding_replicas"), by_partition("removing_replicas"))


class PartitionStateZNode:
    """The partition's leader, leader epoch and ISR."""

    VERSION = 1

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicZNode.path(topic)}/partitions/{partition}/state"

    @staticmethod
    def encode(state: PartitionState) -> bytes:
        return _json({"version": PartitionStateZNode.VERSION, "controller_epoch": state.controller_epoch,
                      "leader": state.leader, "leader_epoch": state.leader_epoch, "isr": list(state.isr)})

    @staticmethod
    def decode(data: bytes) -> PartitionState:
        raw = json.loads(data)
        return PartitionState(leader=int(raw["leader"]), leader_epoch=int(raw["leader_epoch"]),
                              isr=tuple(int(r) for r in raw["isr"]),
                              controller_epoch=int(raw.get("controller_epoch", 0)))


class ConfigType:
    TOPIC = "topics"
    USER = "users"
    BROKER = "brokers"
    GROUP = "groups"  # Ebb's place for KIP-848's group configs (Kafka keeps them in KRaft's metadata log)
    CLIENT_METRICS = "client-metrics"  # KIP-714's subscriptions, where Kafka's ZooKeeper mode kept them
    CLIENT = "clients"
    IP = "ips"


class ConfigEntityTypeZNode:
    """A child per entity of the type that has configs, `sanitized` (`desanitized` gives its name)."""

    @staticmethod
    def path(entity_type: str) -> str:
        return f"/config/{entity_type}"

    @staticmethod
    async def names(store: MetadataStore, entity_type: str) -> list[str]:
        """The entities of the type that have configs, sorted (users with credentials, groups with configs)."""
        try:
            children = await store.children(ConfigEntityTypeZNode.path(entity_type))
        except NoNode:
            return []
        return sorted(desanitized(child) for child in children)


class ConfigEntityZNode:
    """One entity's configs: a topic's overrides, a group's configs, a user's SCRAM credentials."""

    VERSION = 1

    @staticmethod
    def path(entity_type: str, name: str) -> str:
        return f"{ConfigEntityTypeZNode.path(entity_type)}/{sanitized(name)}"

    @staticmethod
    def encode(config: dict[str, str]) -> bytes:
        return _json({"version": ConfigEntityZNode.VERSION, "config": config})

    @staticmethod
    def decode(data: bytes) -> dict[str, str]:
        if not data:  # a parent made on the way to a child (a user's node above its per-client quotas)
            return {}
        return dict(json.loads(data).get("config", {}))

    @staticmethod
    async def read(store: MetadataStore, entity_type: str, name: str) -> dict[str, str]:
        """The entity's configs; none when it has no node."""
        try:
            data, _ = await store.get(ConfigEntityZNode.path(entity_type, name))
        except NoNode:
            return {}
        return ConfigEntityZNode.decode(data)

    @staticmethod
    async def replace(store: MetadataStore, path: str,
                      change: Callable[[dict[str, str]], dict[str, str] | None], *,
                      drop_empty: bool) -> dict[str, str] | None:
        """Compare-and-set of the configs at `path`: `change(a copy of current)` gives what to store
        (None, or the same configs: nothing is written), written only if nobody changed the node
        meanwhile — else `change` is applied again to what is there now, so no update is lost. With
        `drop_empty` an emptied node is deleted. Returns what was written, or None."""
        while True:
            try:
                data, version = await store.get(path)
                current = ConfigEntityZNode.decode(data)
            except NoNode:
                version, current = None, {}
            clean = change(dict(current))
            if clean is None or clean == current:
                return None
            encoded = ConfigEntityZNode.encode(clean)
            try:
                if version is None:
                    await store.create(path, encoded)
                elif clean or not drop_empty:
                    await store.set(path, encoded, version)
                else:
                    try:
                        await store.delete(path, version)
                    except NotEmpty:  # a user with per-client quotas below: its node stays, emptied
                        await store.set(path, encoded, version)
            except (BadVersion, NodeExists, NoNode):
                continue  # changed meanwhile
            return clean


class BrokerConfigZNode:
    """One broker's dynamic configs, or under DEFAULT every broker's; the name is written as it is (Kafka
    does not sanitize broker entities). Data as ConfigEntityZNode's."""

    DEFAULT = "<default>"

    @staticmethod
    def path(entity: str) -> str:
        return f"{ConfigEntityTypeZNode.path(ConfigType.BROKER)}/{entity}"


class ClientQuotaZNode:
    """A client quota entity's configs, where Kafka's ZooKeeper mode kept them (data as ConfigEntityZNode's;
    a user's node also holds its SCRAM credentials). An entity is (user, client-id) or (ip,), each part a
    name, None for the type's default (`<default>`) or absent; users and client ids are `sanitized`."""

    DEFAULT = "<default>"
    USER_CLIENTS = "clients"  # /config/users/<u>/clients/<c>

    @staticmethod
    def _part(name: str | None, sanitize: bool = True) -> str:
        if name is None:
            return ClientQuotaZNode.DEFAULT
        return sanitized(name) if sanitize else name

    @staticmethod
    def path(entity: dict[str, str | None]) -> str:
        """`entity`: entity type ("user", "client-id", "ip") -> name, None for the default."""
        if "ip" in entity:
            return f"/config/{ConfigType.IP}/{ClientQuotaZNode._part(entity['ip'], sanitize=False)}"
        if "user" in entity:
            user = f"/config/{ConfigType.USER}/{ClientQuotaZNode._part(entity['user'])}"
            if "client-id" in entity:
                return f"{user}/{ClientQuotaZNode.USER_CLIENTS}/{ClientQuotaZNode._part(entity['client-id'])}"
            return user
        return f"/config/{ConfigType.CLIENT}/{ClientQuotaZNode._part(entity['client-id'])}"

    @staticmethod
    def name_of(child: str, sanitize: bool = True) -> str | None:
        """The entity name a child node stands for (None: the default)."""
        if child == ClientQuotaZNode.DEFAULT:
            return None
        return desanitized(child) if sanitize else child


class _SequentialNotifications:
    """Notifications as sequential children `PREFIX` + a 10-digit sequence of the node `PARENT`."""

    PARENT: ClassVar[str]
    PREFIX: ClassVar[str]

    @classmethod
    def path_prefix(cls) -> str:
        """What ZooKeeper's sequential create appends the sequence to."""
        return f"{cls.PARENT}/{cls.PREFIX}"

    @classmethod
    def path(cls, child: str) -> str:
        return f"{cls.PARENT}/{child}"

    @classmethod
    def in_order(cls, children: list[str]) -> list[str]:
        """The notifications among `children`, in the order they were written."""
        return _in_sequence(children, cls.PREFIX)


class ConfigChangesZNode(_SequentialNotifications):
    """Kafka's config change notifications: a sequential child per change, naming the entity whose
    configs changed (`{"version": 2, "entity_path": "users/alice/clients/c1"}`); every broker watches them."""

    PATH = PARENT = "/config/changes"
    PREFIX = "config_change_"
    VERSION = 2

    @staticmethod
    def encode(entity_path: str) -> bytes:
        """`entity_path`: the entity's node below /config/."""
        return _json({"version": ConfigChangesZNode.VERSION, "entity_path": entity_path.removeprefix("/config/")})


class DeleteTopicsZNode:
    """A child per topic marked for deletion (KAFKA-330)."""

    PATH = "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """The mark; its children are the ids of the brokers that dropped their replicas (Ebb's)."""

    VERSION = 1

    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.PATH}/{topic}"

    @staticmethod
    def encode(timestamp_ms: int) -> bytes:
        return _json({"version": DeleteTopicsTopicZNode.VERSION, "timestamp": timestamp_ms})

    @staticmethod
    def acknowledgement_path(topic: str, broker_id: int) -> str:
        return f"{DeleteTopicsTopicZNode.path(topic)}/{broker_id}"

    @staticmethod
    def acknowledged(children: list[str]) -> set[int]:
        return {int(child) for child in children if child.isdigit()}


class LogDirEventNotificationZNode:
    """A sequential child per log dir event a broker reports to the controller, deleted once handled."""

    PATH = "/log_dir_event_notification"


class LogDirEventZNode(_SequentialNotifications):
    """Kafka's LogDirEventNotificationSequenceZNode: `{"version": 1, "broker": N, "event": 1}`.
    Event 1 (a dir failed) is Kafka's; 2 (the dir is healthy again, its replicas reloaded) is Ebb's:
    Kafka brings a failed dir back only by restarting the broker. Kafka's controller reads only the
    broker id, so it would take a 2 for another failure."""

    PARENT = LogDirEventNotificationZNode.PATH
    PREFIX = "log_dir_event_"
    VERSION = 1
    FAILURE = 1
    RECOVERY = 2

    @staticmethod
    def encode(broker_id: int, event: int) -> bytes:
        return _json({"version": LogDirEventZNode.VERSION, "broker": broker_id, "event": event})

    @staticmethod
    def decode(data: bytes) -> tuple[int, int]:
        """(broker id, event); ValueError if unreadable. A missing event is a failure, as Kafka reads it."""
        try:
            raw = json.loads(data)
            return int(raw["broker"]), int(raw.get("event", LogDirEventZNode.FAILURE))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"unreadable log dir event: {data!r}") from exc


def topic_paths(topic: str) -> tuple[str, ...]:
    """The nodes a deleted topic leaves, its deletion mark last: a deletion stopped half way keeps the
    mark, from which it goes on."""
    return (TopicZNode.path(topic), ConfigEntityZNode.path(ConfigType.TOPIC, topic), DeleteTopicsTopicZNode.path(topic))


@dataclass(frozen=True)
class ProducerIdBlock:
    broker: int
    first: int
    last: int


class ProducerIdBlockZNode:
    """The last block of producer ids handed out, claimed by compare-and-set."""

    PATH = "/latest_producer_id_block"
    VERSION = 1

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        return _json({"version": ProducerIdBlockZNode.VERSION, "broker": block.broker,
                      "block_start": str(block.first), "block_end": str(block.last)})

    @staticmethod
    def decode(data: bytes) -> ProducerIdBlock:
        raw = json.loads(data)
        return ProducerIdBlock(int(raw["broker"]), int(raw["block_start"]), int(raw["block_end"]))


class FeatureZNode:
    """The cluster's finalized feature levels (Kafka's ZooKeeper-era FeatureZNode path and JSON shape):
    {"version": 2, "status": 1, "features": {name: {"min_version_level": l, "max_version_level": l}}}.
    Its data version is the FinalizedFeaturesEpoch ApiVersions reports."""

    PATH = "/feature"
    VERSION = 2
    ENABLED = 1

    @staticmethod
    def encode(levels: dict[str, int]) -> bytes:
        return _json({"version": FeatureZNode.VERSION, "status": FeatureZNode.ENABLED,
                      "features": {name: {"min_version_level": level, "max_version_level": level}
                                   for name, level in levels.items()}})

    @staticmethod
    def decode(data: bytes) -> dict[str, int]:
        raw = json.loads(data)
        return {name: int(spec["max_version_level"]) for name, spec in (raw.get("features") or {}).items()}


_ACL_ROOTS = {PatternType.LITERAL: "/kafka-acl", PatternType.PREFIXED: "/kafka-acl-extended/prefixed"}
_ACL_RESOURCE_TYPES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
                       ResourceType.TRANSACTIONAL_ID: "TransactionalId"}
_ACL_OPERATIONS = {Operation.ALL: "All", Operation.READ: "Read", Operation.WRITE: "Write",
                   Operation.CREATE: "Create", Operation.DELETE: "Delete", Operation.ALTER: "Alter",
                   Operation.DESCRIBE: "Describe", Operation.CLUSTER_ACTION: "ClusterAction",
                   Operation.DESCRIBE_CONFIGS: "DescribeConfigs", Operation.ALTER_CONFIGS: "AlterConfigs",
                   Operation.IDEMPOTENT_WRITE: "IdempotentWrite"}
_ACL_OPERATION_OF = {name: operation for operation, name in _ACL_OPERATIONS.items()}


class AclResourceTypeZNode:
    """A child per resource of one type and pattern type that has ACLs, `sanitized`."""

    @staticmethod
    def kinds() -> list[tuple[PatternType, ResourceType]]:
        return [(pattern, resource_type) for pattern in _ACL_ROOTS for resource_type in _ACL_RESOURCE_TYPES]

    @staticmethod
    def path(pattern: PatternType, resource_type: ResourceType) -> str:
        return f"{_ACL_ROOTS[pattern]}/{_ACL_RESOURCE_TYPES[resource_type]}"


class AclResourceZNode:
    """The ACLs of one resource (or prefix)."""

    VERSION = 1

    @staticmethod
    def path(pattern: PatternType, resource_type: ResourceType, name: str) -> str:
        return f"{AclResourceTypeZNode.path(pattern, resource_type)}/{sanitized(name)}"

    @staticmethod
    def encode(acls: Iterable[Acl]) -> bytes:
        return _json({"version": AclResourceZNode.VERSION, "acls": [
            {"principal": acl.principal, "permissionType": "Allow" if acl.permission == Permission.ALLOW else "Deny",
             "operation": _ACL_OPERATIONS[acl.operation], "host": acl.host} for acl in sorted(acls, key=repr)]})

    @staticmethod
    def decode(data: bytes, pattern: PatternType, resource_type: ResourceType, name: str) -> list[Acl]:
        return [Acl(resource_type, name, pattern, e["principal"], e["host"], _ACL_OPERATION_OF[e["operation"]],
                    Permission.ALLOW if e["permissionType"] == "Allow" else Permission.DENY)
                for e in json.loads(data).get("acls", [])]


class AclChangesZNode:
    """Ebb's: a counter bumped after every change of the ACLs, which every broker watches to reload them."""

    PATH = "/ebb/acl-changes"

    @staticmethod
    def encode(changes: int) -> bytes:
        return str(changes).encode()

    @staticmethod
    def decode(data: bytes) -> int:
        return int(data or b"0")
