"""Topics: names, ids, partition assignments and configs, kept in the metadata store.

The store holds the truth (Kafka's ZooKeeper layout); `TopicManager` caches it and keeps the local
logs in step: creating a topic creates its partition logs, deleting one renames them away for
asynchronous removal. Topic-level errors carry the Kafka error code the handlers answer with.
"""

from __future__ import annotations

import base64
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog

from broker.cluster.store import MetadataStore, NoNode
from broker.config import BrokerConfig
from broker.log.common import TopicPartition
from broker.log.config import LogConfig
from broker.log.manager import LogManager
from protocol.errors import ErrorCode

log = structlog.get_logger("topics")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
MAX_TOPIC_NAME = 249
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")

# Kafka topic configs that Ebb stores and lists but whose behaviour is not implemented here; they are
# accepted so tools that set them keep working. docs/features.md lists them.
STORED_ONLY_CONFIGS = {
    "compression.type": "producer",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": "9223372036854775807",
    "min.cleanable.dirty.ratio": "0.5",
    "delete.retention.ms": "86400000",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.after.max.ms": "9223372036854775807",
    "message.downconversion.enable": "true",
    "preallocate": "false",
    "segment.jitter.ms": "0",
    "follower.replication.throttled.replicas": "",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "remote.storage.enable": "false",
}


class TopicError(Exception):
    def __init__(self, error_code: ErrorCode, message: str):
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    replicas: dict[int, list[int]]  # partition -> replica broker ids (the first is the preferred leader)
    configs: dict[str, str] = field(default_factory=dict)  # overrides only; defaults come from the broker
    log_config: LogConfig = field(default_factory=LogConfig)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(self.name, p) for p in sorted(self.replicas)]


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a topic id: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_NAME.match(name):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")


def new_topic_id() -> uuid.UUID:
    while True:
        candidate = uuid.uuid4()
        # Kafka reserves the all-zero id ("none") and ids whose base64 starts with '-' (CLI parsing).
        if candidate.int and not topic_id_to_str(candidate).startswith("-"):
            return candidate


class TopicManager:
    def __init__(self, store: MetadataStore, logs: LogManager | None, config: BrokerConfig):
        self.store = store
        self.logs = logs
        self.config = config
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}

    # --- reading -----------------------------------------------------------------------------------

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[Topic]:
        return [self._topics[name] for name in sorted(self._topics)]

    def log_config_for(self, configs: Mapping[str, str]) -> LogConfig:
        """A topic's effective log config: its overrides on top of the broker-wide defaults."""
        return LogConfig.from_properties({k: v for k, v in configs.items() if k not in STORED_ONLY_CONFIGS},
                                         base=self.config.topic_defaults)

    # --- start-up ----------------------------------------------------------------------------------

    async def load(self) -> dict[str, LogConfig]:
        """Read every topic from the store; returns each topic's log config for the log manager."""
        try:
            names = await self.store.children("/brokers/topics")
        except NoNode:
            names = []
        for name in names:
            self._remember(await self._read_topic(name))
        return {name: topic.log_config for name, topic in self._topics.items()}

    async def reconcile(self) -> None:
        """After the logs are loaded: finish interrupted deletions, drop logs of unknown topics, and
        create any missing partition logs."""
        for name in await self._pending_deletions():
            log.info("finishing topic deletion interrupted by a stop", topic=name)
            await self._delete(name)
        for tp in list(self.logs.logs):
            topic = self._topics.get(tp.topic)
            if topic is None or tp.partition not in topic.replicas:
                log.warning("log of an unknown topic partition scheduled for deletion", partition=str(tp))
                await self.logs.delete_log(tp)
        for topic in self._topics.values():
            await self._ensure_logs(topic)

    async def _read_topic(self, name: str) -> Topic:
        assignment = await self.store.get_json(f"/brokers/topics/{name}")
        try:
            configs = (await self.store.get_json(f"/config/topics/{name}")).get("config", {})
        except NoNode:
            configs = {}
        return Topic(
            name=name,
            topic_id=topic_id_from_str(assignment["topic_id"]),
            replicas={int(p): list(r) for p, r in assignment["partitions"].items()},
            configs=dict(configs),
            log_config=self.log_config_for(configs),
        )

    async def _pending_deletions(self) -> list[str]:
        try:
            return await self.store.children("/admin/delete_topics")
        except NoNode:
            return []

    def _remember(self, topic: Topic) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    async def _ensure_logs(self, topic: Topic) -> None:
        for tp in topic.partitions():
            await self.logs.get_or_create_log(tp, topic_id=topic.topic_id, config=topic.log_config)

    # --- changes -----------------------------------------------------------------------------------

    def validate_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        """Check topic config overrides; returns them with nulls dropped. INVALID_CONFIG names the key."""
        known = {f for f in _log_config_names()} | set(STORED_ONLY_CONFIGS)
        clean: dict[str, str] = {}
        for key, value in configs.items():
            if key not in known:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"unknown topic config {key!r}")
            if value is None:
                continue
            clean[key] = str(value)
        try:
            self.log_config_for(clean)
        except (ValueError, TypeError) as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"invalid topic config: {exc}") from None
        return clean

    async def create(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str | None] | None = None,
                     assignments: Mapping[int, list[int]] | None = None, validate_only: bool = False) -> Topic:
        validate_topic_name(name)
        if name in self._topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if await self.store.exists(f"/admin/delete_topics/{name}"):
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} is being deleted")
        collision = self._collision(name)
        if collision:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"topic {name!r} collides with {collision!r} ('.' and '_' are the same in metric names)")
        broker_ids = [self.config.node_id]
        replicas = self._assign(num_partitions, replication_factor, assignments, broker_ids)
        clean = self.validate_configs(configs or {})
        topic = Topic(name, new_topic_id(), replicas, clean, self.log_config_for(clean))
        if validate_only:
            return topic
        await self.store.put_json(f"/config/topics/{name}", {"version": 1, "config": clean})
        await self.store.create(f"/brokers/topics/{name}", _json_bytes({
            "version": 3, "topic_id": topic_id_to_str(topic.topic_id),
            "partitions": {str(p): r for p, r in replicas.items()}, "adding_replicas": {}, "removing_replicas": {},
        }))
        for partition, partition_replicas in replicas.items():
            await self.store.put_json(f"/brokers/topics/{name}/partitions/{partition}/state", {
                "version": 1, "controller_epoch": 1, "leader": partition_replicas[0], "leader_epoch": 0,
                "isr": partition_replicas,
            })
        self._remember(topic)
        await self._ensure_logs(topic)
        log.info("created topic", topic=name, partitions=len(replicas), topic_id=topic_id_to_str(topic.topic_id))
        return topic

    def _collision(self, name: str) -> str | None:
        if "." not in name and "_" not in name:
            return None
        key = name.replace(".", "_")
        return next((t for t in self._topics if t != name and t.replace(".", "_") == key), None)

    def _assign(self, num_partitions: int, replication_factor: int, assignments: Mapping[int, list[int]] | None,
                broker_ids: list[int]) -> dict[int, list[int]]:
        if assignments:
            if num_partitions not in (-1, len(assignments)) or replication_factor != -1:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 "give either an assignment or partitions and replication factor, not both")
            if sorted(assignments) != list(range(len(assignments))):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1")
            for partition, replicas in assignments.items():
                if not replicas or len(set(replicas)) != len(replicas) or set(replicas) - set(broker_ids):
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"partition {partition}: replicas {replicas} are not distinct live brokers")
            return {p: list(r) for p, r in assignments.items()}
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if replication_factor == -1:
            replication_factor = self.config.default_replication_factor
        if num_partitions <= 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"number of partitions must be positive, got {num_partitions}")
        if replication_factor <= 0:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"replication factor must be positive, got {replication_factor}")
        if replication_factor > len(broker_ids):
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"replication factor {replication_factor} is larger than the {len(broker_ids)} "
                             "available broker(s)")
        return {p: [broker_ids[(p + i) % len(broker_ids)] for i in range(replication_factor)]
                for p in range(num_partitions)}

    async def alter_configs(self, name: str, configs: Mapping[str, str | None], validate_only: bool = False) -> Topic:
        """Replace the topic's overrides with `configs` (already merged by the caller for incremental ops)."""
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        clean = self.validate_configs(configs)
        if validate_only:
            return topic
        await self.store.put_json(f"/config/topics/{name}", {"version": 1, "config": clean})
        topic.configs = clean
        topic.log_config = self.log_config_for(clean)
        for tp in topic.partitions():
            await self.logs.get_or_create_log(tp, topic_id=topic.topic_id, config=topic.log_config)
        log.info("altered topic configs", topic=name, configs=clean)
        return topic

    async def delete(self, name: str) -> None:
        """Mark for deletion (the ZooKeeper way), then delete: a crash in between finishes at start-up."""
        if name not in self._topics:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        if not self.config.delete_topic_enable:
            raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        marker = f"/admin/delete_topics/{name}"
        if not await self.store.exists(marker):
            await self.store.create(marker, _json_bytes({"version": 1, "timestamp": int(time.time() * 1000)}))
        await self._delete(name)

    async def _delete(self, name: str) -> None:
        topic = self._topics.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
            for tp in topic.partitions():
                await self.logs.delete_log(tp)
        for path in (f"/brokers/topics/{name}", f"/config/topics/{name}", f"/admin/delete_topics/{name}"):
            try:
                await self.store.delete(path, recursive=True)
            except NoNode:
                pass
        log.info("deleted topic", topic=name)


def _log_config_names() -> list[str]:
    from dataclasses import fields

    return [f.metadata["property"] for f in fields(LogConfig)]


def _json_bytes(value) -> bytes:
    import json

    return json.dumps(value, sort_keys=True).encode()
