"""Admin operations: topics, configs, offsets, and DeleteRecords (with Ebb's leader-only mode).

    async with Admin("127.0.0.1:9092") as admin:
        await admin.create_topic("events", num_partitions=3)
        result = await admin.delete_records({("events", 0): 100}, leader_only=True)

Batch calls return one result per topic or partition, each with an `error` (ErrorCode.NONE on
success), so one bad partition does not hide the others. Single-item conveniences raise instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from protocol.enums import AlterConfigOp, ApiKey, ConfigResourceType, ConfigSource, IsolationLevel, SpecialTimestamp
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListOffsetsRequest,
)

from .cluster import LEADERSHIP_ERRORS, Cluster
from .connection import BrokerConnection
from .delete_records import DeleteRecordsResult, delete_records
from .errors import KafkaError, UnsupportedVersionError, error_for
from .types import PartitionKey, TopicInfo, TopicPartition

log = structlog.get_logger("ebb.client.admin")

# ListOffsets special timestamps, as the client's callers name them.
LATEST = SpecialTimestamp.LATEST
EARLIEST = SpecialTimestamp.EARLIEST
MAX_TIMESTAMP = SpecialTimestamp.MAX_TIMESTAMP  # the record with the highest timestamp (ListOffsets v7+)

Share = dict[TopicPartition, int]  # one broker's part of a per-partition request


@dataclass
class NewTopic:
    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    configs: Mapping[str, str | None] = field(default_factory=dict)
    assignments: Mapping[int, Sequence[int]] | None = None  # partition -> broker ids; overrides the counts


@dataclass
class TopicResult:
    name: str
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.NONE


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: list[tuple[str, str | None, ConfigSource]] = field(default_factory=list)

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


@dataclass
class ListOffsetsResult:
    offset: int
    timestamp: int = -1
    leader_epoch: int = -1
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.NONE


def _failed_offsets(code: ErrorCode, message: str | None) -> ListOffsetsResult:
    return ListOffsetsResult(-1, error=code, error_message=message)


def _dynamic_source(resource_type: ConfigResourceType, name: str) -> ConfigSource:
    if resource_type == ConfigResourceType.TOPIC:
        return ConfigSource.DYNAMIC_TOPIC_CONFIG
    if resource_type == ConfigResourceType.BROKER_LOGGER:
        return ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG
    if resource_type == ConfigResourceType.GROUP:
        return ConfigSource.GROUP_CONFIG
    return ConfigSource.DYNAMIC_BROKER_CONFIG if name else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG


def merge_for_alter_configs(current: Mapping[str, ConfigEntry], resource_type: ConfigResourceType, name: str,
                            updates: Mapping[str, str | None], deletes: Iterable[str]) -> dict[str, str | None]:
    """The full config set for legacy AlterConfigs, which replaces every dynamic value at once.

    To behave like an incremental change we keep the values set dynamically today, then apply ours.
    Sensitive values come back as null and cannot be carried over; they are dropped with a warning.
    """
    source = _dynamic_source(resource_type, name)
    merged: dict[str, str | None] = {}
    for entry in current.values():
        if entry.source != source:
            continue
        if entry.is_sensitive and entry.value is None:
            log.warning("sensitive_config_dropped", resource=name, config=entry.name)
            continue
        merged[entry.name] = entry.value
    for key in deletes:
        merged.pop(key, None)
    merged.update(updates)
    return merged


class Admin:
    """Admin client. Pass a bootstrap string (it then owns a Cluster) or a shared Cluster."""

    def __init__(self, bootstrap: str | Sequence[str] | Cluster, **cluster_options):
        self._owns_cluster = not isinstance(bootstrap, Cluster)
        self.cluster = bootstrap if isinstance(bootstrap, Cluster) else Cluster(bootstrap, **cluster_options)

    async def start(self) -> Admin:
        await self.cluster.start()
        return self

    async def close(self) -> None:
        if self._owns_cluster:
            await self.cluster.close()

    async def __aenter__(self) -> Admin:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _request_timeout(self, broker_wait_ms: int) -> float:
        # The broker may legitimately hold the request for its own timeout; wait for that plus ours.
        return broker_wait_ms / 1000 + self.cluster.request_timeout_s

    # -- topics --

    async def create_topics(self, topics: Iterable[NewTopic], *, timeout_ms: int = 30000,
                            validate_only: bool = False) -> dict[str, TopicResult]:
        pending = {t.name: t for t in topics}
        results: dict[str, TopicResult] = {}

        async def attempt() -> None:
            conn = await self.cluster.controller_connection()
            request = CreateTopicsRequest(topics=[_creatable(t) for t in pending.values()],
                                          timeout_ms=timeout_ms, validate_only=validate_only)
            response = await conn.request(request, version=conn.pick_version(ApiKey.CREATE_TOPICS),
                                          timeout_s=self._request_timeout(timeout_ms))
            retry_code = None
            for r in response.topics:
                code = ErrorCode.from_code(r.error_code)
                if code == ErrorCode.NOT_CONTROLLER:
                    retry_code = code
                    continue
                results[r.name] = TopicResult(r.name, code, r.error_message if code else None, r.num_partitions,
                                              r.replication_factor)
                pending.pop(r.name, None)
            if pending:
                raise error_for(retry_code or ErrorCode.UNKNOWN_SERVER_ERROR,
                                f"CreateTopics: no result for {', '.join(sorted(pending))}")

        if pending:
            await self.cluster.retry(attempt, what="CreateTopics", timeout_s=self._request_timeout(timeout_ms))
        return results

    async def create_topic(self, name: str, num_partitions: int = 1, replication_factor: int = 1,
                           configs: Mapping[str, str | None] | None = None, *, timeout_ms: int = 30000,
                           wait_for_leaders: bool = True) -> TopicResult:
        """Create one topic; raises its error. By default returns once every partition has a leader."""
        result = (await self.create_topics(
            [NewTopic(name, num_partitions, replication_factor, dict(configs or {}))], timeout_ms=timeout_ms))[name]
        if not result.ok:
            raise error_for(result.error, result.error_message or f"create topic {name!r}")
        if wait_for_leaders:
            await self.wait_for_leaders(name, timeout_ms=timeout_ms)
        return result

    async def wait_for_leaders(self, topic: str, *, timeout_ms: int = 30000) -> TopicInfo:
        """Return once Metadata shows `topic` with a leader for each partition (creation propagates)."""

        async def check() -> TopicInfo:
            await self.cluster.refresh_metadata([topic])
            info = self.cluster.metadata.topics[topic]
            if info.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"topic {topic!r} not in metadata yet")
            if info.error:
                raise error_for(info.error, f"topic {topic!r}")
            if not info.partitions or any(p.leader < 0 for p in info.partitions.values()):
                raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"topic {topic!r} has partitions without a leader")
            return info

        return await self.cluster.retry(check, what=f"wait for leaders of {topic!r}", timeout_s=timeout_ms / 1000)

    async def delete_topics(self, names: Iterable[str], *, timeout_ms: int = 30000) -> dict[str, TopicResult]:
        pending = sorted(set(names))
        results: dict[str, TopicResult] = {}

        async def attempt() -> None:
            conn = await self.cluster.controller_connection()
            version = conn.pick_version(ApiKey.DELETE_TOPICS)
            if version >= 6:
                request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in pending],
                                              timeout_ms=timeout_ms)
            else:
                request = DeleteTopicsRequest(topic_names=list(pending), timeout_ms=timeout_ms)
            response = await conn.request(request, version=version, timeout_s=self._request_timeout(timeout_ms))
            retry_code = None
            for r in response.responses:
                code = ErrorCode.from_code(r.error_code)
                if code == ErrorCode.NOT_CONTROLLER:
                    retry_code = code
                    continue
                assert r.name is not None  # asked by name, answered by name
                results[r.name] = TopicResult(r.name, code, r.error_message if code else None)
                if r.name in pending:
                    pending.remove(r.name)
            if pending:
                raise error_for(retry_code or ErrorCode.UNKNOWN_SERVER_ERROR,
                                f"DeleteTopics: no result for {', '.join(pending)}")

        if pending:
            await self.cluster.retry(attempt, what="DeleteTopics", timeout_s=self._request_timeout(timeout_ms))
        for name, result in results.items():
            if result.ok:
                self.cluster.metadata.topics.pop(name, None)
        return results

    async def delete_topic(self, name: str, *, timeout_ms: int = 30000) -> None:
        result = (await self.delete_topics([name], timeout_ms=timeout_ms))[name]
        if not result.ok:
            raise error_for(result.error, result.error_message or f"delete topic {name!r}")

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        meta = await self.cluster.retry(lambda: self.cluster.refresh_metadata(None), what="Metadata", topics=None)
        return sorted(name for name, t in meta.topics.items() if include_internal or not t.is_internal)

    async def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicInfo]:
        """Topic metadata; an unknown topic comes back with error UNKNOWN_TOPIC_OR_PARTITION."""
        wanted = None if names is None else sorted(set(names))
        meta = await self.cluster.retry(lambda: self.cluster.refresh_metadata(wanted), what="Metadata", topics=None)
        if wanted is None:
            return dict(meta.topics)
        return {name: meta.topics[name] for name in wanted}

    # -- configs --

    async def _config_connection(self, resource_type: ConfigResourceType, name: str) -> BrokerConnection:
        # Broker configs are owned by that broker; topic configs can be read anywhere.
        if resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and name.isdigit():
            return await self.cluster.connection(int(name))
        return await self.cluster.any_connection()

    async def describe_configs(self, name: str, keys: Iterable[str] | None = None, *,
                               resource_type: ConfigResourceType = ConfigResourceType.TOPIC,
                               include_synonyms: bool = False) -> dict[str, ConfigEntry]:
        """Configs of one resource (all of them when `keys` is None); raises the resource's error."""
        keys_list = None if keys is None else list(keys)

        async def attempt() -> dict[str, ConfigEntry]:
            conn = await self._config_connection(resource_type, name)
            request = DescribeConfigsRequest(
                resources=[DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=int(resource_type), resource_name=name, configuration_keys=keys_list)],
                include_synonyms=include_synonyms,
            )
            response = await conn.request(request, version=conn.pick_version(ApiKey.DESCRIBE_CONFIGS))
            result = response.results[0]
            if result.error_code:
                raise error_for(result.error_code, result.error_message or f"describe configs of {name!r}")
            return {
                c.name: ConfigEntry(
                    c.name, c.value, ConfigSource.of(c.config_source), c.read_only, c.is_sensitive,
                    [(s.name, s.value, ConfigSource.of(s.source)) for s in c.synonyms],
                )
                for c in result.configs
            }

        return await self.cluster.retry(attempt, what="DescribeConfigs")

    async def alter_configs(self, name: str, updates: Mapping[str, str | None] | None = None,
                            deletes: Iterable[str] = (), *,
                            resource_type: ConfigResourceType = ConfigResourceType.TOPIC,
                            validate_only: bool = False) -> None:
        """Set and remove config values of one resource, leaving the others as they are.

        Uses IncrementalAlterConfigs; against a broker that does not advertise it, falls back to
        AlterConfigs with the current dynamic values merged in (see merge_for_alter_configs).
        """
        to_set = dict(updates or {})
        to_delete = list(deletes)

        async def attempt() -> None:
            conn = await self._config_connection(resource_type, name)
            response: IncrementalAlterConfigsResponse | AlterConfigsResponse
            if ApiKey.INCREMENTAL_ALTER_CONFIGS in conn.api_versions:
                Req = IncrementalAlterConfigsRequest
                configs = [Req.AlterConfigsResource.AlterableConfig(name=k, config_operation=AlterConfigOp.SET, value=v)
                           for k, v in to_set.items()]
                configs += [Req.AlterConfigsResource.AlterableConfig(name=k, config_operation=AlterConfigOp.DELETE)
                            for k in to_delete]
                request = Req(resources=[Req.AlterConfigsResource(
                    resource_type=int(resource_type), resource_name=name, configs=configs)],
                    validate_only=validate_only)
                response = await conn.request(request, version=conn.pick_version(ApiKey.INCREMENTAL_ALTER_CONFIGS))
            elif ApiKey.ALTER_CONFIGS in conn.api_versions:
                current = await self.describe_configs(name, resource_type=resource_type)
                merged = merge_for_alter_configs(current, resource_type, name, to_set, to_delete)
                Old = AlterConfigsRequest
                old_request = Old(resources=[Old.AlterConfigsResource(
                    resource_type=int(resource_type), resource_name=name,
                    configs=[Old.AlterConfigsResource.AlterableConfig(name=k, value=v) for k, v in merged.items()])],
                    validate_only=validate_only)
                response = await conn.request(old_request, version=conn.pick_version(ApiKey.ALTER_CONFIGS))
            else:
                raise UnsupportedVersionError(f"{conn.address} offers neither IncrementalAlterConfigs nor AlterConfigs")
            result = response.responses[0]
            if result.error_code:
                raise error_for(result.error_code, result.error_message or f"alter configs of {name!r}")

        await self.cluster.retry(attempt, what="AlterConfigs")

    # -- offsets --

    async def list_offsets(self, specs: Mapping[PartitionKey, int], *,
                           isolation_level: int = IsolationLevel.READ_UNCOMMITTED,
                           timeout_ms: int | None = None) -> dict[TopicPartition, ListOffsetsResult]:
        """Offset per partition for a timestamp spec: EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3), or a
        time in ms (the first offset whose timestamp is at or after it; offset -1 when there is none)."""
        Req = ListOffsetsRequest

        async def send(conn: BrokerConnection, share: Share) -> dict[TopicPartition, ListOffsetsResult]:
            low = 7 if MAX_TIMESTAMP in share.values() else None
            version = conn.pick_version(ApiKey.LIST_OFFSETS, low=low)
            by_topic: dict[str, list] = {}
            for tp, timestamp in share.items():
                by_topic.setdefault(tp.topic, []).append(
                    Req.ListOffsetsTopic.ListOffsetsPartition(partition_index=tp.partition, timestamp=timestamp))
            request = Req(replica_id=-1, isolation_level=isolation_level, timeout_ms=timeout_ms or 0,
                          topics=[Req.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
            response = await conn.request(request, version=version)
            return {
                TopicPartition(t.name, p.partition_index): ListOffsetsResult(
                    p.offset, p.timestamp, p.leader_epoch, ErrorCode.from_code(p.error_code))
                for t in response.topics for p in t.partitions
            }

        return await self.cluster.for_each_leader(
            specs, send, _failed_offsets, what="ListOffsets",
            retry_errors=LEADERSHIP_ERRORS | {ErrorCode.OFFSET_NOT_AVAILABLE},
            timeout_s=None if timeout_ms is None else timeout_ms / 1000,
        )

    async def earliest_offsets(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        return _offsets_or_raise(await self.list_offsets(dict.fromkeys(partitions, EARLIEST)))

    async def latest_offsets(self, partitions: Iterable[tuple[str, int]], *,
                             isolation_level: int = IsolationLevel.READ_UNCOMMITTED) -> dict[TopicPartition, int]:
        """The high watermarks, or under READ_COMMITTED (1) the last stable offsets."""
        return _offsets_or_raise(await self.list_offsets(dict.fromkeys(partitions, LATEST),
                                                         isolation_level=isolation_level))

    async def offsets_for_times(self, times: Mapping[tuple[str, int], int]) -> dict[TopicPartition, int]:
        """First offset with a timestamp at or after each time (ms); -1 where no record is that recent."""
        if any(t < 0 for t in times.values()):
            raise ValueError("timestamps must be >= 0 (use list_offsets for EARLIEST/LATEST)")
        return _offsets_or_raise(await self.list_offsets(times))

    # -- DeleteRecords --

    async def delete_records(self, offsets: Mapping[PartitionKey, int], *, leader_only: bool = False,
                             timeout_ms: int = 30000) -> DeleteRecordsResult:
        """Delete the records below `offsets[tp]` in each partition (-1: up to the high watermark).

        `leader_only=True` asks for DeleteRecords v3 (KIP-1343): the broker answers once the leader's
        log start offset moved, without waiting for followers. See client/delete_records.py.
        """
        return await delete_records(self.cluster, offsets, leader_only=leader_only, timeout_ms=timeout_ms,
                                    request_timeout_s=self._request_timeout(timeout_ms))


def _creatable(topic: NewTopic) -> CreateTopicsRequest.CreatableTopic:
    Topic = CreateTopicsRequest.CreatableTopic
    configs = [Topic.CreatableTopicConfig(name=k, value=v) for k, v in topic.configs.items()]
    if topic.assignments:
        assignments = [Topic.CreatableReplicaAssignment(partition_index=p, broker_ids=list(ids))
                       for p, ids in sorted(topic.assignments.items())]
        return Topic(name=topic.name, num_partitions=-1, replication_factor=-1, assignments=assignments,
                     configs=configs)
    return Topic(name=topic.name, num_partitions=topic.num_partitions, replication_factor=topic.replication_factor,
                 configs=configs)


def _offsets_or_raise(results: Mapping[TopicPartition, ListOffsetsResult]) -> dict[TopicPartition, int]:
    for tp, result in results.items():
        if not result.ok:
            raise error_for(result.error, result.error_message or f"list offsets of {tp}")
    return {tp: r.offset for tp, r in results.items()}
