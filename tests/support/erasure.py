"""What the erasure tests (tests/broker/test_erasure.py, tests/cluster/test_erasure_cluster.py) and
bench/erasure.py share: recognisable values, producing them, finding them in a partition directory's
files, and asking a broker for its replicas' erased offsets (DescribeErasure)."""

from __future__ import annotations

import os
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.messages import DescribeErasureRequest
from tests.broker.data_wire import WireClient, batch, produce

GIB = str(1024 * 1024 * 1024)


def value(i: int) -> bytes:
    return b"private-%06d|" % i + b"p" * 64


def produce_values(client: WireClient, topic: str, records: int, per_batch: int, partition: int = 0) -> None:
    for first in range(0, records, per_batch):
        data = batch([value(i) for i in range(first, min(first + per_batch, records))])
        assert produce(client, topic, partition, data, acks=-1).error_code == ErrorCode.NONE


def partition_dir(data_dir: Path, topic: str, partition: int = 0) -> Path:
    return data_dir / "logs" / f"{topic}-{partition}"


def values_on_disk(directory: Path, wanted: range) -> set[int]:
    """Which of the values numbered in `wanted` occur in any file of `directory` (every file, whatever
    its suffix: `.deleted`, `.cleaned`, `.swap`, indexes), by their bytes."""
    blobs = []
    for name in os.listdir(directory):
        try:
            blobs.append((directory / name).read_bytes())
        except FileNotFoundError:  # removed while listed
            continue
    return {i for i in wanted if any(value(i) in blob for blob in blobs)}


def describe_erasure(client: WireClient, topic: str, partition: int = 0):
    reply = client.request(DescribeErasureRequest(topics=[DescribeErasureRequest.TopicRequest(
        name=topic, partition_indexes=[partition])]), 0)
    return reply.broker_id, reply.topics[0].partitions[0]
