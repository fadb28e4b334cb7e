"""A small blocking Kafka client on our codec, for the data-path tests (Produce, Fetch, ListOffsets,
DeleteRecords, InitProducerId, OffsetForLeaderEpoch) against a real broker process.

    with WireClient(broker.port) as c:
        create_topic(c, "t", partitions=2)
        produce(c, "t", 0, batch([b"a", b"b"]))
        records(fetch(c, "t", 0, offset=0))
"""

from __future__ import annotations

import time
import uuid

from protocol import framing
from protocol.errors import ErrorCode
from protocol.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)
from protocol.records import Compression, build_batch, iter_batches
from tests.broker import wire_client

CREATE_TOPICS = 19


class WireClient(wire_client.WireClient):
    """tests/broker/wire_client.py's client, plus pipelining: `submit` sends without waiting (acks=0,
    parked long polls) and `receive` reads that answer later."""

    def __init__(self, port: int, client_id: str = "ebb-data-test", timeout: float = 30.0):
        super().__init__(port, timeout=timeout, client_id=client_id)
        self._versions: dict[int, tuple[int, int]] | None = None

    def request(self, body, version: int):
        return self.send(body, version)

    def submit(self, body, version: int) -> int:
        self._correlation_id += 1
        self.sock.sendall(framing.encode_request(body, version, self._correlation_id, self.client_id))
        return self._correlation_id

    def receive(self, api_key: int, version: int, correlation_id: int):
        got, body = framing.decode_response(self.read_frame(), api_key, version)
        assert got == correlation_id, f"response {got} for request {correlation_id}"
        return body

    def versions(self) -> dict[int, tuple[int, int]]:
        if self._versions is None:
            reply = self.request(ApiVersionsRequest(), 0)
            self._versions = {k.api_key: (k.min_version, k.max_version) for k in reply.api_keys}
        return self._versions


# --- topics ---------------------------------------------------------------------------------------


def create_topic(client: WireClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                 ) -> uuid.UUID:
    """CreateTopics v7 over the wire; asserts it succeeded."""
    result = wire_client.create_topic(client, name, partitions, configs)
    assert result.error_code == ErrorCode.NONE, (result.error_code, result.error_message)
    return result.topic_id


def ensure_internal_topic(client: WireClient, name: str = "__consumer_offsets") -> str:
    """The internal topic, created through CreateTopics if nothing made it yet (Kafka lets an admin
    create it; the group coordinator normally does)."""
    if list_offsets(client, name, 0, -1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
        result = client.request(CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 7).topics[0]
        assert result.error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS), \
            f"cannot create {name}: {ErrorCode(result.error_code).name} {result.error_message}"
    return name


# --- records --------------------------------------------------------------------------------------


def batch(values, *, keys=None, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
          compression: Compression = Compression.NONE, timestamps=None) -> bytes:
    keys = keys or [None] * len(values)
    now = int(time.time() * 1000)
    timestamps = timestamps or [now + i for i in range(len(values))]
    return build_batch([(k, v, [], t) for k, v, t in zip(keys, values, timestamps, strict=True)],
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                       compression=compression)


def records(partition_data) -> list:
    """Decoded records of a Fetch partition answer (a partial trailing batch is ignored)."""
    found = []
    for b in iter_batches(bytes(partition_data.records or b""), allow_partial_tail=True):
        found.extend(b.records())
    return found


def values(partition_data, from_offset: int = 0) -> list[bytes]:
    return [r.value for r in records(partition_data) if r.offset >= from_offset]


# --- requests -------------------------------------------------------------------------------------


def produce_request(topic: str, partition: int, data, *, acks: int = 1, timeout_ms: int = 10_000,
                    transactional_id: str | None = None, extra=()) -> ProduceRequest:
    parts = [ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=data)]
    parts += [ProduceRequest.TopicProduceData.PartitionProduceData(index=p, records=d) for p, d in extra]
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
                          topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=parts)])


def produce(client: WireClient, topic: str, partition: int, data, *, acks: int = 1, version: int = 9, **kw):
    reply = client.request(produce_request(topic, partition, data, acks=acks, **kw), version)
    return reply.responses[0].partition_responses[0]


def fetch_request(topic: str | uuid.UUID, partition: int, offset: int, *, max_wait_ms: int = 0,
                  min_bytes: int = 1, max_bytes: int = 50 * 1024 * 1024, partition_max_bytes: int = 1024 * 1024,
                  isolation_level: int = 0, session_id: int = 0, session_epoch: int = -1,
                  current_leader_epoch: int = -1, replica_id: int = -1, partitions=None) -> FetchRequest:
    wanted = partitions or [(partition, offset, partition_max_bytes)]
    parts = [FetchRequest.FetchTopic.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=m,
                                                    current_leader_epoch=current_leader_epoch)
             for p, o, m in wanted]
    if isinstance(topic, uuid.UUID):
        fetch_topic = FetchRequest.FetchTopic(topic_id=topic, partitions=parts)
    else:
        fetch_topic = FetchRequest.FetchTopic(topic=topic, partitions=parts)
    return FetchRequest(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                        isolation_level=isolation_level, session_id=session_id, session_epoch=session_epoch,
                        topics=[fetch_topic])


def fetch(client: WireClient, topic, partition: int, offset: int, *, version: int = 12, **kw):
    reply = client.request(fetch_request(topic, partition, offset, **kw), version)
    assert reply.error_code == ErrorCode.NONE
    return reply.responses[0].partitions[0]


def list_offsets_request(topic: str, partition: int, timestamp: int, *, isolation_level: int = 0,
                         replica_id: int = -1, current_leader_epoch: int = -1) -> ListOffsetsRequest:
    part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
        partition_index=partition, timestamp=timestamp, current_leader_epoch=current_leader_epoch)
    return ListOffsetsRequest(replica_id=replica_id, isolation_level=isolation_level, timeout_ms=5000,
                              topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[part])])


def list_offsets(client: WireClient, topic: str, partition: int, timestamp: int, *, version: int = 7, **kw):
    return client.request(list_offsets_request(topic, partition, timestamp, **kw), version).topics[0].partitions[0]


def delete_records_request(offsets: dict[str, dict[int, int]] | list, *, timeout_ms: int = 5000,
                           leader_only: bool = False) -> DeleteRecordsRequest:
    items = offsets.items() if isinstance(offsets, dict) else offsets
    topics = [DeleteRecordsRequest.DeleteRecordsTopic(name=name, partitions=[
        DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=o)
        for p, o in (parts.items() if isinstance(parts, dict) else parts)]) for name, parts in items]
    return DeleteRecordsRequest(topics=topics, timeout_ms=timeout_ms, leader_only=leader_only)


def delete_records(client: WireClient, topic: str, partition: int, offset: int, *, version: int = 2, **kw):
    reply = client.request(delete_records_request({topic: {partition: offset}}, **kw), version)
    return reply.topics[0].partitions[0]


def init_producer_id(client: WireClient, *, version: int = 4, transactional_id: str | None = None,
                     timeout_ms: int = 60_000):
    """With a transactional id, FindCoordinator first, as clients do: it makes `__transaction_state`."""
    if transactional_id:
        found = client.request(FindCoordinatorRequest(key_type=1, key=transactional_id), 3)
        assert found.error_code == ErrorCode.NONE, found
    return client.request(InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms),
                          version)


def offset_for_leader_epoch(client: WireClient, topic: str, partition: int, epoch: int, *, version: int = 4,
                            current_leader_epoch: int = -1):
    part = OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
        partition=partition, leader_epoch=epoch, current_leader_epoch=current_leader_epoch)
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[part])])
    return client.request(request, version).topics[0].partitions[0]
