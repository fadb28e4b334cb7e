"""Small typed fakes shared by the unit tests that call handlers and services directly.

A fake here is a real object where one is cheap (a Request is the one protocol/framing.py decodes) and
otherwise a class satisfying the Protocol or constructor type the production code declares, so that
mypy holds it to that type (tests/unit/test_mypy.py checks the tests that use it)."""

from __future__ import annotations

from typing import TypeVar

from broker.topic import Topic
from protocol.framing import Request
from protocol.messages import ApiMessage, RequestHeader

BodyT = TypeVar("BodyT", bound=ApiMessage)


def request_of(body: BodyT, version: int, client_id: str = "c", correlation_id: int = 1) -> Request[BodyT]:
    """`body` as the server hands it to a handler, at `version` (which the body's API must serve)."""
    api_key = body.api_key
    assert api_key is not None and version in body.valid_versions, f"{type(body).__name__} has no v{version}"
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                           client_id=client_id)
    return Request(header, api_key, version, correlation_id, body)


class TopicsOf:
    """The topics as the controller and reassignments read them (their AssignedTopics and
    ReassignableTopics): real Topics held by name; assignment writes are recorded, not applied."""

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
