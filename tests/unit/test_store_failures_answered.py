"""A metadata store failure during a config change or a controller request (ZooKeeper lost, a full disk
under the embedded store; broker/cluster/store.py) is answered per resource or partition: the client's
connection is not closed by an escaping exception."""

import uuid
from types import SimpleNamespace

import structlog

from broker.cluster.reassignment import Reassignments
from broker.cluster.store import StoreUnavailable, StoreWriteFailed
from broker.handlers.config_resources import alter_each
from broker.handlers.controller_requests import on_the_controller
from broker.handlers.k45_alter_partition_reassignments import alter_partition_reassignments
from broker.request_context import RequestContext
from broker.topic import Topic
from protocol.errors import ErrorCode
from protocol.messages import AlterConfigsRequest, AlterConfigsResponse, AlterPartitionReassignmentsRequest

_Resource = AlterConfigsRequest.AlterConfigsResource
_Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
_Partition = _Topic.ReassignablePartition


class FailingStore:
    """A store whose every call raises `error`; `fail` False lets calls through (nothing is marked)."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.fail = True

    async def exists(self, path: str) -> bool:
        if self.fail:
            raise self.error
        return False


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
    broker = SimpleNamespace(cluster=None)

    async def run():
        raise StoreUnavailable("ConnectionLoss")

    assert await on_the_controller(broker, SimpleNamespace(), run, lambda code, message: code) \
        == ErrorCode.REQUEST_TIMED_OUT  # type: ignore[arg-type]


async def test_a_reassignment_answers_a_store_failure_for_its_partition_only():
    store = FailingStore(StoreWriteFailed("meta.json: No space left on device"))
    topic = Topic("t", uuid.uuid4(), {0: [1], 1: [1]})
    written = []

    async def write(name, partition, replicas, adding, removing):
        written.append((name, partition))
        store.fail = True  # the next partition's check finds the disk full

    topics = SimpleNamespace(get=lambda name: topic if name == "t" else None, all=lambda: [topic],
                             write_partition_assignment=write)
    reassignments = Reassignments(store, topics, alive_ids=lambda: [1, 2],  # type: ignore[arg-type]
                                  change_partition=None, wake=lambda: None)  # type: ignore[arg-type]
    controller = SimpleNamespace(active=True, require_active=lambda: None, reassignments=reassignments)
    broker = SimpleNamespace(authorizer=None, cluster=SimpleNamespace(controller=controller))
    body = AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[_Topic(name="t", partitions=[
        _Partition(partition_index=0, replicas=[2]), _Partition(partition_index=1, replicas=[2])])])
    store.fail = False
    request = SimpleNamespace(body=body, api_version=0)
    answer = await alter_partition_reassignments(broker, request, RequestContext())  # type: ignore[arg-type]
    assert answer.error_code == ErrorCode.NONE
    assert [p.error_code for p in answer.responses[0].partitions] == [ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR]
    assert written == [("t", 0)]
