"""Small typed fakes shared by the unit tests that call handlers and services directly.

A fake here is a real object where one is cheap (a Request is the one protocol/framing.py decodes) and
otherwise a class satisfying the Protocol or constructor type the production code declares, so that
mypy holds it to that type (tests/unit/test_mypy.py checks the tests that use it)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TypeVar

from broker.handlers import REGISTRY, load_handlers
from broker.log import TopicPartition
from broker.metrics.requests import RequestMetrics
from broker.quotas.request_time import RequestQuotas
from broker.server import Connection
from broker.topic import Topic
from broker.topics import TopicError
from protocol import framing
from protocol.enums import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import ApiMessage, ApiVersionsRequest, RequestHeader

BodyT = TypeVar("BodyT", bound=ApiMessage)


def request_of(body: BodyT, version: int, client_id: str = "c", correlation_id: int = 1) -> Request[BodyT]:
    """`body` as the server hands it to a handler, at `version` (which the body's API must serve)."""
    api_key = body.api_key
    assert api_key is not None and version in body.valid_versions, f"{type(body).__name__} has no v{version}"
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                           client_id=client_id)
    return Request(header, api_key, version, correlation_id, body)


@dataclass
class FakeReplica:
    """A replica as the coordinators read it (coordinator_partitions.py's LedPartition)."""

    topic_partition: TopicPartition
    is_leader: bool = True
    leader_epoch: int = 3


class TopicsOf:
    """The topics as the controller, reassignments and the transaction coordinator read them (their
    AssignedTopics, ReassignableTopics, TxnTopics): real Topics held by name; assignment writes are
    recorded, not applied; a topic created is assigned to brokers 1..replication_factor."""

    def __init__(self, *topics: Topic) -> None:
        self.topics = {topic.name: topic for topic in topics}
        self.written: list[tuple[str, int, list[int], list[int], list[int]]] = []

    def all(self) -> list[Topic]:
        return list(self.topics.values())

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    async def write_partition_assignment(self, name: str, partition: int, replicas: list[int],
                                         adding: list[int], removing: list[int]) -> None:
        self.written.append((name, partition, list(replicas), list(adding), list(removing)))

    async def create(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str | None] | None = None) -> Topic:
        if name in self.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        replicas = {index: list(range(1, replication_factor + 1)) for index in range(num_partitions)}
        topic = Topic(name, uuid.uuid4(), replicas, {k: v for k, v in (configs or {}).items() if v is not None})
        self.topics[name] = topic
        return topic


class FakeWire:
    """The transport of a connection under test: what it was sent, and whether it was closed."""

    def __init__(self) -> None:
        self.sent: list = []
        self.aborted = False

    def writelines(self, pieces) -> None:
        self.sent += pieces

    def abort(self) -> None:
        self.aborted = True


def connection_of(requests: RequestQuotas, wire: FakeWire | None = None) -> Connection:
    """A plain-TCP connection of a broker whose only quotas are `requests`, its transport `wire`."""
    config = SimpleNamespace(sasl_listeners={}, tls_listeners={}, socket_request_max_bytes=1 << 20)
    broker = SimpleNamespace(config=config, credentials=None, quotas=SimpleNamespace(requests=requests))
    server = SimpleNamespace(broker=broker, request_metrics=RequestMetrics(), connections=set(), stopping=False)
    connection = Connection(server, SimpleNamespace(name="PLAINTEXT"))  # type: ignore[arg-type]
    connection.transport = wire or FakeWire()  # type: ignore[assignment]
    return connection


def frame_served_by(monkeypatch, handler) -> bytearray:
    """An ApiVersions request, served by `handler` (its answer encoded as b"answer")."""
    api_versions = load_handlers()[ApiKey.API_VERSIONS]
    monkeypatch.setitem(REGISTRY, ApiKey.API_VERSIONS, dataclasses.replace(
        api_versions, fn=handler, encode=lambda response, version, correlation_id: [b"answer"]))
    return bytearray(framing.encode_request(ApiVersionsRequest(), 3, 1, "c")[framing.SIZE_BYTES:])
