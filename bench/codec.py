"""Codec benchmark: ours vs kafka-python 3 on the same messages, in one run.

Decode a Produce request carrying 1 MiB of record batches; encode a Fetch response carrying 1 MiB.
Prints µs per message (median of repeats) and the ratio ours / kafka-python. Not a test.
"""

from __future__ import annotations

import os
import statistics
import time

from kafka.protocol.api_message import ApiMessage as KafkaPythonApiMessage
from kafka.protocol.consumer.fetch import FetchResponse as KpFetchResponse
from kafka.protocol.producer.produce import ProduceRequest as KpProduceRequest

from protocol import fastpath, framing
from protocol.messages import FetchResponse, ProduceRequest

MIB = 1 << 20
PARTITIONS = 4
REPEATS = 7
LOOPS = 50


def _records(size: int) -> bytes:
    # The codec never looks inside records; a realistic size is what matters for copies.
    return os.urandom(size)


def produce_request() -> ProduceRequest:
    per_partition = MIB // PARTITIONS
    return ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
        name="bench", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=_records(per_partition))
            for i in range(PARTITIONS)
        ])])


def fetch_response() -> FetchResponse:
    per_partition = MIB // PARTITIONS
    topic = FetchResponse.FetchableTopicResponse
    return FetchResponse(responses=[topic(topic="bench", partitions=[
        topic.PartitionData(partition_index=i, high_watermark=1000, last_stable_offset=1000,
                            log_start_offset=0, records=_records(per_partition))
        for i in range(PARTITIONS)])])


def _time(fn) -> float:
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(LOOPS):
            fn()
        samples.append((time.perf_counter() - start) / LOOPS * 1e6)
    return statistics.median(samples)


def main() -> None:
    version_produce, version_fetch = 9, 12
    request = produce_request()
    request_bytes = ProduceRequest[version_produce].encode(request)
    frame = framing.encode_request(request, version_produce, 1, "bench")[4:]
    kp_request = KafkaPythonApiMessage.decode.__func__(KpProduceRequest, request_bytes, version=version_produce)

    response = fetch_response()
    kp_response = KafkaPythonApiMessage.decode.__func__(
        KpFetchResponse, FetchResponse[version_fetch].encode(response), version=version_fetch)

    kp_request._header = kp_response._header = None  # the raw decode leaves the header slot unset
    assert bytes(kp_request.encode(version=version_produce)) == request_bytes
    rows = [
        ("decode Produce v9, 1 MiB (construct path)",
         _time(lambda: ProduceRequest[version_produce].decode(request_bytes)),
         _time(lambda: KafkaPythonApiMessage.decode.__func__(
             KpProduceRequest, request_bytes, version=version_produce))),
        ("decode Produce v9 frame, 1 MiB (fast path)",
         _time(lambda: fastpath.decode_produce_request(frame)),
         _time(lambda: KafkaPythonApiMessage.decode.__func__(
             KpProduceRequest, request_bytes, version=version_produce))),
        ("encode Fetch v12, 1 MiB (construct path)",
         _time(lambda: FetchResponse[version_fetch].encode(response)),
         _time(lambda: kp_response.encode(version=version_fetch))),
        ("encode Fetch v12 frame, 1 MiB (fast path, chunks)",
         _time(lambda: fastpath.encode_fetch_response(response, version_fetch, 1)),
         _time(lambda: kp_response.encode(version=version_fetch))),
    ]
    print(f"{'message':52} {'ours µs':>10} {'kafka-python µs':>16} {'ratio':>7}")
    for label, ours, theirs in rows:
        print(f"{label:52} {ours:10.1f} {theirs:16.1f} {ours / theirs:7.2f}")


if __name__ == "__main__":
    main()
