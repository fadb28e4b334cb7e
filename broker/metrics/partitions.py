"""Partition and replica-manager gauges, read at scrape time from the logs and replicas hosted here.

Per partition (labels topic, partition), for every local log: log start offset, log end offset,
size and segments (Kafka's kafka.log:type=Log), Ebb's high watermark and erased offset. For the partitions whose
replica state this broker holds (every one in a cluster; on one broker those used since start-up or
creation): whether it leads them and, where it does, the low watermark (the smallest log start
offset over the alive replicas, what an all-replica DeleteRecords waits for), in-sync and assigned
replica counts and under-replication (kafka.cluster:type=Partition). Broker-wide: Kafka's
ReplicaManager gauges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sized
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric


class LogView(Protocol):
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def segments(self) -> Sized: ...
    @property
    def offline(self) -> bool: ...
    @property
    def erased_offset(self) -> int: ...


class PartitionView(Protocol):
    replicas: list[int]
    isr: set[int]
    producers: Sized  # the producer ids with state in this partition

    @property
    def is_leader(self) -> bool: ...
    def low_watermark(self) -> int: ...


class ReplicasView(Protocol):
    """Replica state, keyed like the logs (anything with `.topic` and `.partition`)."""

    @property
    def partitions(self) -> Mapping[Any, PartitionView]: ...


class LogsView(Protocol):
    @property
    def logs(self) -> Mapping[Any, LogView]: ...
    @property
    def offline_partitions(self) -> Mapping[Any, str]: ...


PARTITIONS_PER_STEP = 1000


def _by_name(items: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
    return sorted(items.items(), key=lambda item: (item[0].topic, item[0].partition))


class PartitionCollector:
    def __init__(self, replicas: ReplicasView, logs: LogsView) -> None:
        self._replicas = replicas
        self._logs = logs

    def collect(self) -> Iterator[Metric | None]:
        # One pass per family, each yielded when done, and None now and then on the way: a pause where
        # the renderer lets the loop serve requests (broker/metrics/http.py).
        logs = [(tp, log) for tp, log in _by_name(self._logs.logs) if not log.offline]
        partitions = _by_name(self._replicas.partitions)
        leaders = [(tp, p) for tp, p in partitions if p.is_leader]
        per_log: tuple[tuple[str, str, Callable[[LogView], int]], ...] = (
            ("kafka_log_log_logstartoffset", "First offset readable in the local replica",
             lambda log: log.log_start_offset),
            ("kafka_log_log_logendoffset", "Offset the next record appended to the local replica gets",
             lambda log: log.log_end_offset),
            ("kafka_log_log_size", "Bytes of the local replica's segments on disk", lambda log: log.size_bytes),
            ("kafka_log_log_numlogsegments", "Segments of the local replica", lambda log: len(log.segments)),
            ("ebb_partition_highwatermark", "High watermark known to the local replica",
             lambda log: log.high_watermark),
            ("ebb_partition_erasedoffset", "Offset below which no byte of a record is left in the local replica's "
             "files (erasure.max.delay.ms)", lambda log: log.erased_offset),
        )
        per_replica: tuple[tuple[str, str, list, Callable[[PartitionView], int]], ...] = (
            ("ebb_partition_leader", "1 where this broker leads the partition, else 0", partitions,
             lambda p: int(p.is_leader)),
            ("ebb_partition_lowwatermark", "Smallest log start offset over the alive replicas (partitions led "
             "here only)", leaders, lambda p: p.low_watermark()),
            ("kafka_cluster_partition_insyncreplicascount", "In-sync replicas (leaders only)", leaders,
             lambda p: len(p.isr)),
            ("kafka_cluster_partition_replicascount", "Assigned replicas (leaders only)", leaders,
             lambda p: len(p.replicas)),
            ("kafka_cluster_partition_underreplicated", "1 where the ISR is smaller than the assignment (leaders "
             "only)", leaders, _under_replicated),
        )
        yield None  # a pause: the lists above took a while
        for name, documentation, read in per_log:
            yield from _family(name, documentation, logs, read)
        for name, documentation, chosen, read_replica in per_replica:
            yield from _family(name, documentation, chosen, read_replica)
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions with a replica here",
                                value=len(self._logs.logs))
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions led here", value=len(leaders))
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions led here whose ISR is smaller than their assignment",
                                value=sum(_under_replicated(p) for _, p in leaders))
        yield GaugeMetricFamily("kafka_server_replicamanager_offlinereplicacount",
                                "Replicas here that are offline (a storage error)",
                                value=len(self._logs.offline_partitions))
        yield GaugeMetricFamily("kafka_server_replicamanager_produceridcount",
                                "Producer ids with state, summed over the partitions here",
                                value=sum(len(p.producers) for _, p in partitions))


def _family(name: str, documentation: str, items: list[tuple[Any, Any]],
            read: Callable[[Any], int]) -> Iterator[Metric | None]:
    """The family, with a pause (None) every PARTITIONS_PER_STEP partitions on the way."""
    family = GaugeMetricFamily(name, documentation, labels=["topic", "partition"])
    for count, (tp, item) in enumerate(items, 1):
        family.add_metric([tp.topic, str(tp.partition)], read(item))
        if count % PARTITIONS_PER_STEP == 0:
            yield None
    yield family


def _under_replicated(partition: PartitionView) -> int:
    return int(len(partition.isr) < len(partition.replicas))
