"""The cluster as the client sees it: bootstrap, Metadata, one connection per broker, and retries.

Operations that address partitions (produce, list offsets, delete records) go through
`for_each_leader`: it groups partitions by leader, sends one request per broker concurrently, and
retries the partitions that failed for leadership reasons after refreshing metadata, until a deadline.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TypeVar

import structlog

from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import MetadataRequest

from .connection import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_REQUEST_TIMEOUT_S, BrokerConnection
from .errors import (
    BootstrapError,
    BrokerConnectionError,
    BrokerUnreachableError,
    KafkaClientError,
    KafkaError,
    error_for,
)
from .security import ClientSecurity
from .types import BrokerInfo, ClusterMetadata, PartitionInfo, PartitionKey, PartitionResult, TopicInfo, TopicPartition

log = structlog.get_logger("ebb.client.cluster")

T = TypeVar("T")
V = TypeVar("V")
R = TypeVar("R", bound=PartitionResult)

# Per-partition errors that mean "ask again, maybe elsewhere": the request was not applied.
LEADERSHIP_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE,
})
_ZERO_UUID = uuid.UUID(int=0)


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """"host:port[,host:port]" (or a list of them) into (host, port) pairs; "[::1]:9092" for IPv6."""
    entries = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            raise BootstrapError(f"empty entry in bootstrap servers {servers!r}")
        if entry.startswith("["):
            host, sep, port_text = entry[1:].partition("]:")
        else:
            host, sep, port_text = entry.rpartition(":")
            if ":" in host:
                raise BootstrapError(f"bootstrap server {entry!r}: write IPv6 addresses as [addr]:port")
        if not sep or not host:
            raise BootstrapError(f"bootstrap server {entry!r} is not host:port")
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise BootstrapError(f"bootstrap server {entry!r} has no valid port (1-65535)")
        out.append((host, int(port_text)))
    return out


def backoff_delay(attempt: int, base_s: float, cap_s: float, jitter: Callable[[], float] = random.random) -> float:
    """Exponential backoff with ±20% jitter, so that clients retrying together drift apart."""
    return min(cap_s, base_s * 2**attempt) * (0.8 + 0.4 * jitter())


class Cluster:
    """Bootstrap, metadata and broker connections, shared by Admin, Producer and Consumer."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = "ebb",
        request_timeout_ms: int = int(DEFAULT_REQUEST_TIMEOUT_S * 1000),
        connect_timeout_ms: int = int(DEFAULT_CONNECT_TIMEOUT_S * 1000),
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        security: ClientSecurity | None = None,
    ):
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.security = security  # TLS and SASL for every connection (client/security_settings.py)
        self.request_timeout_s = request_timeout_ms / 1000
        self.connect_timeout_s = connect_timeout_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.retry_backoff_max_s = retry_backoff_max_ms / 1000
        self.metadata = ClusterMetadata()
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_connection: BrokerConnection | None = None
        self._connect_locks: dict[int, asyncio.Lock] = {}
        self._started = False

    # -- lifecycle --

    async def start(self) -> Cluster:
        """Connect to the first bootstrap server that answers and load the broker list."""
        if self._started:
            return self
        failures = []
        for host, port in self.bootstrap:
            try:
                self._bootstrap_connection = await self._open(host, port, None)
            except BrokerConnectionError as exc:
                failures.append(exc.message)
                continue
            try:
                await self.refresh_metadata([])
            except BaseException:
                await self.close()
                raise
            self._started = True
            return self
        raise BrokerUnreachableError("no bootstrap server reachable: " + "; ".join(failures),
                                     host=self.bootstrap[0][0], port=self.bootstrap[0][1])

    async def close(self) -> None:
        connections = list(self._connections.values())
        if self._bootstrap_connection is not None:
            connections.append(self._bootstrap_connection)
        self._connections.clear()
        self._bootstrap_connection = None
        self._started = False
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    async def __aenter__(self) -> Cluster:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- connections --

    async def _open(self, host: str, port: int, node_id: int | None) -> BrokerConnection:
        conn = BrokerConnection(host, port, node_id=node_id, client_id=self.client_id,
                                request_timeout_s=self.request_timeout_s, connect_timeout_s=self.connect_timeout_s,
                                security=self.security)
        return await conn.connect()

    async def connection(self, node_id: int) -> BrokerConnection:
        """The connection to one broker, opened (or reopened) on demand."""
        conn = self._connections.get(node_id)
        if conn is not None and conn.connected:
            return conn
        lock = self._connect_locks.setdefault(node_id, asyncio.Lock())
        async with lock:  # concurrent callers share one connect
            conn = self._connections.get(node_id)
            if conn is not None and conn.connected:
                return conn
            broker = self.metadata.brokers.get(node_id)
            if broker is None:
                raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"broker {node_id} is not in the metadata")
            conn = await self._open(broker.host, broker.port, node_id)
            self._connections[node_id] = conn
            return conn

    async def any_connection(self) -> BrokerConnection:
        """Any live connection, for requests any broker can answer (Metadata, configs)."""
        for conn in (self._bootstrap_connection, *self._connections.values()):
            if conn is not None and conn.connected:
                return conn
        failures = []
        for node_id in sorted(self.metadata.brokers):
            try:
                return await self.connection(node_id)
            except BrokerConnectionError as exc:
                failures.append(exc.message)
        for host, port in self.bootstrap:
            try:
                self._bootstrap_connection = await self._open(host, port, None)
                return self._bootstrap_connection
            except BrokerConnectionError as exc:
                failures.append(exc.message)
        raise BrokerUnreachableError("no broker reachable: " + "; ".join(failures))

    async def controller_connection(self) -> BrokerConnection:
        """The controller if Metadata named one we know, else any broker (which forwards or says NOT_CONTROLLER)."""
        controller = self.metadata.controller_id
        if controller in self.metadata.brokers:
            return await self.connection(controller)
        return await self.any_connection()

    # -- metadata --

    async def refresh_metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Ask for the brokers and `topics` (None: every topic; []: none) and merge the answer in."""
        conn = await self.any_connection()
        version = conn.pick_version(ApiKey.METADATA)
        names = None if topics is None else sorted(set(topics))
        request = MetadataRequest(
            topics=None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=False,  # a lookup must never create a topic behind the caller's back
        )
        response = await conn.request(request, version=version)
        if response.error_code:
            raise error_for(response.error_code, "Metadata")
        meta = self.metadata
        meta.cluster_id = response.cluster_id
        meta.controller_id = response.controller_id
        meta.brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
        fresh = {t.name: _topic_info(t) for t in response.topics if t.name is not None}
        if names is None:
            meta.topics = fresh
        else:
            meta.topics.update(fresh)
            for name in names:  # a broker may leave out a topic it does not know
                meta.topics.setdefault(name, TopicInfo(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        for node_id in set(self._connections) - set(meta.brokers):
            await self._connections.pop(node_id).close()
        return meta

    async def leader(self, tp: tuple[str, int], *, timeout_s: float | None = None) -> int:
        """Node id leading a partition, refreshing metadata while it has none (up to the deadline).

        An unknown topic or partition raises UnknownTopicOrPartitionError at once.
        """
        tp = TopicPartition(*tp)
        if self._leader_of(tp)[0] is None:
            await self.refresh_metadata([tp.topic])
        _, code, message = self._leader_of(tp)
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:  # retriable by its code, but Metadata just said so
            raise error_for(code, message)

        async def lookup() -> int:
            leader, code, message = self._leader_of(tp)
            if leader is None:
                raise error_for(code, message)
            return leader

        return await self.retry(lookup, what=f"leader of {tp}", timeout_s=timeout_s, topics=[tp.topic])

    def partition_info(self, tp: TopicPartition) -> PartitionInfo | None:
        topic = self.metadata.topics.get(tp[0])
        return topic.partitions.get(tp[1]) if topic is not None else None

    # -- retries --

    def backoff(self, attempt: int) -> float:
        return backoff_delay(attempt, self.retry_backoff_s, self.retry_backoff_max_s)

    async def retry(self, op: Callable[[], Awaitable[T]], *, what: str, timeout_s: float | None = None,
                    topics: Iterable[str] | None = ()) -> T:
        """Run `op` until it succeeds, fails for good, or the deadline passes.

        Retriable errors (connection failures, timeouts, retriable Kafka codes) refresh the metadata
        for `topics` and back off. The deadline is checked between attempts, so one attempt may run past
        it by up to a request timeout.
        """
        loop = asyncio.get_running_loop()
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        deadline = loop.time() + timeout
        topic_list = None if topics is None else list(topics)
        attempt = 0
        while True:
            try:
                return await op()
            except KafkaClientError as exc:
                if not exc.retriable:
                    raise
                delay = self.backoff(attempt)
                attempt += 1
                if loop.time() + delay >= deadline:
                    exc.add_note(f"{what}: gave up after {attempt} attempt(s) in {timeout:g}s")
                    raise
                log.info("retrying", what=what, error=exc.message, attempt=attempt, delay_s=round(delay, 3))
            await asyncio.sleep(delay)
            await self._refresh_quietly(topic_list)

    async def _refresh_quietly(self, topics: list[str] | None) -> None:
        try:
            await self.refresh_metadata(topics)
        except KafkaClientError as exc:
            if not exc.retriable:
                raise
            log.info("metadata_refresh_failed", error=exc.message)

    async def for_each_leader(
        self,
        items: Mapping[PartitionKey, V],
        send: Callable[[BrokerConnection, dict[TopicPartition, V]], Awaitable[Mapping[TopicPartition, R]]],
        failed: Callable[[ErrorCode, str | None], R],
        *,
        what: str,
        timeout_s: float | None = None,
        retry_errors: frozenset[ErrorCode] = LEADERSHIP_ERRORS,
        idempotent: bool = True,
    ) -> dict[TopicPartition, R]:
        """Send `items` to their leaders, one `send` per broker, and collect one result per partition.

        `send` gets a connection and that broker's share and returns a result per partition (results
        carry `.error`). Partitions whose error is in `retry_errors`, or whose broker could not be
        reached, are retried after a metadata refresh until the deadline; then they get their last
        error. When the request is not `idempotent`, a connection lost after sending is not retried:
        the broker may have applied it.
        """
        loop = asyncio.get_running_loop()
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        deadline = loop.time() + timeout
        pending = {TopicPartition(*tp): value for tp, value in items.items()}
        results: dict[TopicPartition, R] = {}
        last_error: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        refresh = any(self._leader_of(tp)[0] is None for tp in pending)  # the cache may just be stale
        attempt = 0
        while pending:
            refreshed = False
            if refresh:
                try:
                    await self.refresh_metadata({tp.topic for tp in pending})
                    refreshed = True
                except KafkaClientError as exc:
                    if not exc.retriable:
                        raise
                    last_error.update(dict.fromkeys(pending, (exc.error_code, exc.message)))
            if refreshed or not refresh:
                await self._dispatch_round(pending, send, failed, results, last_error, retry_errors, idempotent)
            if not pending:
                break
            delay = self.backoff(attempt)
            attempt += 1
            if loop.time() + delay >= deadline:
                for tp in pending:
                    code, message = last_error.get(tp, (ErrorCode.REQUEST_TIMED_OUT, None))
                    results[tp] = failed(code, f"{message or code.name} (gave up after {timeout:g}s)")
                break
            log.info("retrying", what=what, partitions=len(pending), attempt=attempt, delay_s=round(delay, 3))
            await asyncio.sleep(delay)
            refresh = True
        return results

    async def _dispatch_round(self, pending, send, failed, results, last_error, retry_errors, idempotent) -> None:
        by_leader: dict[int, dict[TopicPartition, object]] = {}
        for tp, value in list(pending.items()):
            leader, code, message = self._leader_of(tp)
            if leader is not None:
                by_leader.setdefault(leader, {})[tp] = value
            elif code in LEADERSHIP_ERRORS and code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                last_error[tp] = (code, message)  # no leader yet: wait for one
            else:
                results[tp] = failed(code, message)
                del pending[tp]
        nodes = list(by_leader)
        outcomes = await asyncio.gather(*(self._send_to(node, by_leader[node], send) for node in nodes),
                                        return_exceptions=True)
        for node, outcome in zip(nodes, outcomes, strict=True):
            share = by_leader[node]
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, KafkaClientError):
                    raise outcome
                again = outcome.retriable and (idempotent or not getattr(outcome, "request_sent", True))
                for tp in share:
                    if again:
                        last_error[tp] = (outcome.error_code, outcome.message)
                    else:
                        results[tp] = failed(outcome.error_code, outcome.message)
                        del pending[tp]
                continue
            for tp in share:
                result = outcome.get(tp)
                if result is None:
                    result = failed(ErrorCode.UNKNOWN_SERVER_ERROR, f"broker {node} sent no result for {tp}")
                if result.error in retry_errors:
                    last_error[tp] = (result.error, result.error_message)
                else:
                    results[tp] = result
                    del pending[tp]

    async def _send_to(self, node_id: int, share, send):
        conn = await self.connection(node_id)
        return await send(conn, share)

    def _leader_of(self, tp: TopicPartition) -> tuple[int | None, ErrorCode, str | None]:
        topic = self.metadata.topics.get(tp.topic)
        if topic is None or topic.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {tp.topic!r} does not exist"
        if topic.error:
            return None, topic.error, f"topic {tp.topic!r}: {topic.error.name}"
        partition = topic.partitions.get(tp.partition)
        if partition is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (
                f"topic {tp.topic!r} has no partition {tp.partition} (it has {len(topic.partitions)})")
        if partition.leader < 0 or partition.leader not in self.metadata.brokers:
            return None, ErrorCode.LEADER_NOT_AVAILABLE, f"{tp} has no leader right now"
        return partition.leader, ErrorCode.NONE, None


def _topic_info(topic) -> TopicInfo:
    return TopicInfo(
        name=topic.name,
        error=ErrorCode.from_code(topic.error_code),
        topic_id=None if topic.topic_id in (None, _ZERO_UUID) else topic.topic_id,
        is_internal=topic.is_internal,
        partitions={
            p.partition_index: PartitionInfo(
                partition=p.partition_index, leader=p.leader_id, leader_epoch=p.leader_epoch,
                replicas=list(p.replica_nodes), isr=list(p.isr_nodes), offline_replicas=list(p.offline_replicas),
                error=ErrorCode.from_code(p.error_code),
            )
            for p in topic.partitions
        },
    )
