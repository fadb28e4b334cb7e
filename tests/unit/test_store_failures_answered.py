"""A metadata store failure during a config change or a controller request (ZooKeeper lost, a full disk
under the embedded store; broker/cluster/store.py) is answered per resource or partition: the client's
connection is not closed by an escaping exception."""

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from broker.cluster.partition_state import PartitionState
from broker.cluster.reassignment import Reassignments
from broker.cluster.store import (
    ChildrenCallback,
    DataCallback,
    MetadataStore,
    NoNode,
    StoreUnavailable,
    StoreWriteFailed,
    Watch,
)
from broker.handlers.config_resources import alter_each
from broker.handlers.controller_requests import on_the_controller
from broker.handlers.k45_alter_partition_reassignments import alter_partition_reassignments
from broker.request_context import RequestContext
from broker.topic import Topic
from protocol.errors import ErrorCode
from protocol.messages import AlterConfigsRequest, AlterConfigsResponse, AlterPartitionReassignmentsRequest
from tests.unit.fakes import TopicsOf, request_of

_Resource = AlterConfigsRequest.AlterConfigsResource
_Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
_Partition = _Topic.ReassignablePartition


class FailingStore(MetadataStore):
    """An empty store whose reads raise `error` while `fail` is set (nothing is marked); the tests here
    only read it, so a write is a failure of the test."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.fail = True

    async def get(self, path: str) -> tuple[bytes, int]:
        if self.fail:
            raise self.error
        raise NoNode(path)

    async def children(self, path: str) -> list[str]:
        await self.get(path)
        return []

    async def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        raise AssertionError(f"unexpected watch of {path}")

    async def watch_data(self, path: str, callback: DataCallback) -> Watch:
        raise AssertionError(f"unexpected watch of {path}")

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = True) -> None:
        raise AssertionError(f"unexpected write of {path}")

    async def create_sequential(self, prefix: str, data: bytes = b"") -> str:
        raise AssertionError(f"unexpected write of {prefix}")

    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        raise AssertionError(f"unexpected write of {path}")

    async def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        raise AssertionError(f"unexpected delete of {path}")


class DiskFillingTopics(TopicsOf):
    """The topics; the store's disk is full once an assignment is written."""

    def __init__(self, store: FailingStore, *topics: Topic) -> None:
        super().__init__(*topics)
        self.store = store

    async def write_partition_assignment(self, name: str, partition: int, replicas: list[int],
                                         adding: list[int], removing: list[int]) -> None:
        await super().write_partition_assignment(name, partition, replicas, adding, removing)
        self.store.fail = True  # the next partition's check finds the disk full


async def _no_state_change(name: str, partition: int,
                           change: Callable[[PartitionState], PartitionState | None]) -> bool:
    raise AssertionError("a reassignment being recorded changes no partition state")


@dataclass
class ActiveController:
    reassignments: Reassignments
    active: bool = True

    def require_active(self) -> None:
        pass


@dataclass
class ControllerCluster:
    """A cluster this broker controls: nothing is forwarded."""

    controller: ActiveController
    FORWARDED_CLIENT_ID = "ebb-forwarded"

    async def forward_to_controller(self, body: Any, version: int, timeout_s: float) -> Any:
        raise AssertionError("the controller forwarded a request")


@dataclass
class ControllerBroker:
    """What the controller requests read of the broker: the cluster (None: no ZooKeeper), no ACLs."""

    cluster: ControllerCluster | None = None
    authorizer: None = None
    node_id: int = 1
    topics: TopicsOf = field(default_factory=TopicsOf)


async def test_alter_configs_answers_a_store_failure_per_resource():
    store = FailingStore(StoreWriteFailed("meta.json: No space left on device"))

    async def alter(resource):
        if resource.resource_name == "full":
            await store.exists("/config/topics/full")
        elif resource.resource_name == "lost":
            raise StoreUnavailable("ConnectionLoss")

    resources = [_Resource(resource_type=2, resource_name=name, configs=[]) for name in ("full", "lost", "fine")]
    results = await alter_each(resources, alter, AlterConfigsResponse.AlterConfigsResourceResponse,
                               structlog.get_logger("test"))
    assert [r.error_code for r in results] == [ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REQUEST_TIMED_OUT,
                                               ErrorCode.NONE]
    assert "No space left" in results[0].error_message


async def test_a_controller_request_answers_a_store_failure_for_every_partition():
    async def run() -> ErrorCode:
        raise StoreUnavailable("ConnectionLoss")

    request = request_of(AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[]), 0)
    assert await on_the_controller(ControllerBroker(), request, run,
                                   lambda code, message: code) == ErrorCode.REQUEST_TIMED_OUT


async def test_a_reassignment_answers_a_store_failure_for_its_partition_only():
    store = FailingStore(StoreWriteFailed("meta.json: No space left on device"))
    topic = Topic("t", uuid.uuid4(), {0: [1], 1: [1]})
    topics = DiskFillingTopics(store, topic)
    reassignments = Reassignments(store, topics, alive_ids=lambda: [1, 2],
                                  change_partition=_no_state_change, wake=lambda: None)
    broker = ControllerBroker(ControllerCluster(ActiveController(reassignments)))
    body = AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[_Topic(name="t", partitions=[
        _Partition(partition_index=0, replicas=[2]), _Partition(partition_index=1, replicas=[2])])])
    store.fail = False
    answer = await alter_partition_reassignments(broker, request_of(body, 0), RequestContext())
    assert answer.error_code == ErrorCode.NONE
    assert [p.error_code for p in answer.responses[0].partitions] == [ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR]
    assert [(name, partition) for name, partition, *_ in topics.written] == [("t", 0)]
