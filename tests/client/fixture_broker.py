"""A tiny Kafka-protocol server on loopback, for client paths a real broker cannot easily show.

It speaks the real wire format through protocol/ (real sockets, real frames): it advertises whatever
API versions a test asks for, answers Metadata from a small topic map, and records every request it
decodes. Tests swap in handlers for one API to script timeouts, closed connections or errors.

    async with FixtureCluster({1: {21: (0, 2)}}, topics={"t": {0: 1, 1: 1}}) as fixture:
        ... fixture.bootstrap ... fixture.seen(21)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.framing import Request, decode_request, encode_response
from protocol.messages import (
    ApiMessage,
    ApiVersionsResponse,
    DeleteRecordsResponse,
    DescribeConfigsResponse,
    FetchResponse,
    ListOffsetsResponse,
    MetadataResponse,
    ProduceResponse,
)
from protocol.records import assign_offsets, iter_batches
from protocol.wire import I32

CLOSE = object()  # a handler's answer meaning "drop the connection"
Handler = Callable[["FixtureBroker", Request], Awaitable[object]]

# What a Kafka 4.x-like broker would advertise for the APIs the client uses (DeleteRecords without v3).
BASE_VERSIONS: dict[int, tuple[int, int]] = {
    0: (3, 12), 1: (4, 12), 2: (1, 9), 3: (1, 12), 18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2),
    32: (1, 4), 33: (0, 2), 44: (0, 1),
}


@dataclass
class Seen:
    node_id: int
    api_key: int
    api_version: int
    body: ApiMessage | None


class FixtureBroker:
    def __init__(self, cluster: FixtureCluster, node_id: int, api_versions: dict[int, tuple[int, int]]):
        self.cluster = cluster
        self.node_id = node_id
        self.api_versions = api_versions
        self.port = 0
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        tasks: set[asyncio.Task] = set()
        try:
            while True:
                size = I32.unpack(await reader.readexactly(4))[0]
                request = decode_request(await reader.readexactly(size))
                self.cluster.requests.append(Seen(self.node_id, request.api_key, request.api_version, request.body))
                # Each request answered by its own task, so a test can answer out of order.
                task = asyncio.create_task(self._answer(request, writer))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            for task in tasks:
                task.cancel()
            self._writers.discard(writer)
            writer.close()

    async def _answer(self, request: Request, writer: asyncio.StreamWriter) -> None:
        handler = self.cluster.handlers.get(request.api_key) or DEFAULT_HANDLERS[request.api_key]
        answer = await handler(self, request)
        if answer is CLOSE:
            writer.close()
            return
        if answer is None:  # stay silent
            return
        body, version = answer if isinstance(answer, tuple) else (answer, request.api_version)
        writer.write(encode_response(body, version, request.correlation_id))
        await writer.drain()

    def leads(self, topic: str, partition: int) -> bool:
        return self.cluster.topics.get(topic, {}).get(partition) == self.node_id


class FixtureCluster:
    """One or more FixtureBrokers sharing a topic map: {topic: {partition: leader node id}}."""

    def __init__(self, versions_by_node: dict[int, dict[int, tuple[int, int]]] | None = None, *,
                 topics: dict[str, dict[int, int]] | None = None, api_versions_max: int = 4,
                 high_watermark: int = 10):
        versions_by_node = versions_by_node or {1: {}}
        self.brokers = {node: FixtureBroker(self, node, {**BASE_VERSIONS, **extra})
                        for node, extra in versions_by_node.items()}
        self.topics = topics if topics is not None else {"t": {0: 1}}
        self.topic_ids = {name: uuid.uuid4() for name in self.topics}
        self.api_versions_max = api_versions_max  # ApiVersions requests above this get UNSUPPORTED_VERSION
        self.hide_api_versions_range = False  # the UNSUPPORTED_VERSION answer then lists nothing
        self.high_watermark = high_watermark
        self.configs: dict[str, dict[str, tuple[str | None, int]]] = {}  # topic -> name -> (value, source)
        self.logs: dict[tuple[str, int], list[tuple[int, bytes]]] = {}  # (topic, partition) -> [(next offset, batches)]
        self.log_start: dict[tuple[str, int], int] = {}
        self.handlers: dict[int, Handler] = {}
        self.requests: list[Seen] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{next(iter(self.brokers.values())).port}"

    def log_end(self, tp: tuple[str, int]) -> int:
        chunks = self.logs.get(tp)
        return chunks[-1][0] if chunks else 0

    def seen(self, api_key: int) -> list[Seen]:
        return [s for s in self.requests if s.api_key == api_key]

    async def __aenter__(self) -> FixtureCluster:
        for broker in self.brokers.values():
            await broker.start()
        return self

    async def __aexit__(self, *exc) -> None:
        for broker in self.brokers.values():
            await broker.stop()


# -- default handlers ------------------------------------------------------------------------------


async def api_versions(broker: FixtureBroker, request: Request):
    cluster = broker.cluster
    entry = ApiVersionsResponse.ApiVersion
    if request.api_version > cluster.api_versions_max:
        # KIP-511: error in the v0 layout, naming the ApiVersions range we do read.
        keys = [] if cluster.hide_api_versions_range else [entry(api_key=18, min_version=0,
                                                                  max_version=cluster.api_versions_max)]
        return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=keys), 0
    ranges = {**broker.api_versions, 18: (0, cluster.api_versions_max)}
    return ApiVersionsResponse(api_keys=[entry(api_key=k, min_version=lo, max_version=hi)
                                         for k, (lo, hi) in sorted(ranges.items())])


async def metadata(broker: FixtureBroker, request: Request):
    cluster = broker.cluster
    M = MetadataResponse
    wanted = None if request.body.topics is None else [t.name for t in request.body.topics]
    topics = []
    for name in (sorted(cluster.topics) if wanted is None else wanted):
        partitions = cluster.topics.get(name)
        if partitions is None:
            topics.append(M.MetadataResponseTopic(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        topics.append(M.MetadataResponseTopic(name=name, topic_id=cluster.topic_ids.get(name, uuid.uuid4()),
                                              partitions=[
            M.MetadataResponseTopic.MetadataResponsePartition(
                partition_index=p, leader_id=leader, leader_epoch=0, replica_nodes=[leader], isr_nodes=[leader])
            for p, leader in sorted(partitions.items())]))
    brokers = [M.MetadataResponseBroker(node_id=b.node_id, host="127.0.0.1", port=b.port)
               for b in cluster.brokers.values()]
    return M(brokers=brokers, cluster_id="fixture", controller_id=min(cluster.brokers), topics=topics)


async def delete_records(broker: FixtureBroker, request: Request):
    R = DeleteRecordsResponse.DeleteRecordsTopicResult
    topics = []
    for t in request.body.topics:
        results = []
        for p in t.partitions:
            if not broker.leads(t.name, p.partition_index):
                results.append(R.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=-1,
                    error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER))
                continue
            offset = broker.cluster.high_watermark if p.offset == -1 else p.offset
            result = R.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=offset)
            if request.api_version >= 3:  # the field exists from v3 only
                result.leader_log_start_offset = offset
            results.append(result)
        topics.append(R(name=t.name, partitions=results))
    return DeleteRecordsResponse(topics=topics)


async def describe_configs(broker: FixtureBroker, request: Request):
    R = DescribeConfigsResponse.DescribeConfigsResult
    results = []
    for resource in request.body.resources:
        configs = broker.cluster.configs.get(resource.resource_name)
        if configs is None:
            results.append(R(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, resource_type=resource.resource_type,
                             resource_name=resource.resource_name))
            continue
        results.append(R(resource_type=resource.resource_type, resource_name=resource.resource_name, configs=[
            R.DescribeConfigsResourceResult(name=name, value=value, config_source=source)
            for name, (value, source) in sorted(configs.items())]))
    return DescribeConfigsResponse(results=results)


async def produce(broker: FixtureBroker, request: Request):
    """Appends to an in-memory log: offsets are stamped on the batches as a broker would."""
    cluster = broker.cluster
    R = ProduceResponse.TopicProduceResponse
    topics = []
    for t in request.body.topic_data:
        results = []
        for p in t.partition_data:
            tp = (t.name, p.index)
            if not broker.leads(*tp):
                results.append(R.PartitionProduceResponse(index=p.index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                          base_offset=-1))
                continue
            data = bytearray(p.records)
            base = offset = cluster.log_end(tp)
            for batch in list(iter_batches(data)):
                offset = assign_offsets(data, batch.position, offset, 0) + 1
            cluster.logs.setdefault(tp, []).append((offset, bytes(data)))
            results.append(R.PartitionProduceResponse(index=p.index, base_offset=base,
                                                      log_start_offset=cluster.log_start.get(tp, 0)))
        topics.append(R(name=t.name, partition_responses=results))
    if request.body.acks == 0:
        return None
    return ProduceResponse(responses=topics)


async def fetch(broker: FixtureBroker, request: Request):
    """Serves whole stored batches from the one holding fetch_offset; OFFSET_OUT_OF_RANGE outside the log."""
    cluster = broker.cluster
    R = FetchResponse.FetchableTopicResponse
    topics = []
    for t in request.body.topics:
        partitions = []
        for p in t.partitions:
            tp = (t.topic, p.partition)
            end, start = cluster.log_end(tp), cluster.log_start.get(tp, 0)
            if not broker.leads(*tp):
                code, records = ErrorCode.NOT_LEADER_OR_FOLLOWER, None
            elif not start <= p.fetch_offset <= end:
                partitions.append(R.PartitionData(partition_index=p.partition, error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
                                                  high_watermark=-1, log_start_offset=-1))
                continue
            else:
                code = ErrorCode.NONE
                chunks = cluster.logs.get(tp, [])
                records = b"".join(data for next_offset, data in chunks if next_offset > p.fetch_offset)
            partitions.append(R.PartitionData(partition_index=p.partition, error_code=code, high_watermark=end,
                                              last_stable_offset=end, log_start_offset=start, records=records))
        topics.append(R(topic=t.topic, partitions=partitions))
    return FetchResponse(responses=topics)


async def list_offsets(broker: FixtureBroker, request: Request):
    cluster = broker.cluster
    R = ListOffsetsResponse.ListOffsetsTopicResponse
    topics = []
    for t in request.body.topics:
        partitions = []
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            offset = cluster.log_start.get(tp, 0) if p.timestamp == -2 else cluster.log_end(tp)
            partitions.append(R.ListOffsetsPartitionResponse(partition_index=p.partition_index, offset=offset))
        topics.append(R(name=t.name, partitions=partitions))
    return ListOffsetsResponse(topics=topics)


DEFAULT_HANDLERS: dict[int, Handler] = {
    0: produce,
    1: fetch,
    2: list_offsets,
    3: metadata,
    18: api_versions,
    21: delete_records,
    32: describe_configs,
}
