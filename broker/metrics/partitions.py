"""Partition and replica-manager gauges, read at scrape time from the replicas hosted here.

Per partition (labels topic, partition): log start offset, log end offset, size and segments of
the local replica (Kafka's kafka.log:type=Log), in-sync and assigned replica counts and
under-replication (kafka.cluster:type=Partition), and Ebb's high watermark and, where this broker
leads, the low watermark (the smallest log start offset over the alive replicas, what an
all-replica DeleteRecords waits for). Broker-wide: Kafka's ReplicaManager gauges.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sized
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric


class LogView(Protocol):
    @property
    def size_bytes(self) -> int: ...
    @property
    def segments(self) -> Sized: ...
    @property
    def offline(self) -> bool: ...


class PartitionView(Protocol):
    replicas: list[int]
    isr: set[int]
    log: LogView
    producers: Sized  # the producer ids with state in this partition

    @property
    def is_leader(self) -> bool: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    def low_watermark(self) -> int: ...


class ReplicasView(Protocol):
    """The partitions hosted here, keyed by anything with `.topic` and `.partition`."""

    @property
    def partitions(self) -> Mapping[object, PartitionView]: ...


class OfflineLogsView(Protocol):
    @property
    def offline_partitions(self) -> Mapping[object, str]: ...


def _gauge(name: str, documentation: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=["topic", "partition"])


class PartitionCollector:
    def __init__(self, replicas: ReplicasView, logs: OfflineLogsView) -> None:
        self._replicas = replicas
        self._logs = logs

    def collect(self) -> Iterator[Metric]:
        start = _gauge("kafka_log_log_logstartoffset", "First offset readable in the local replica")
        end = _gauge("kafka_log_log_logendoffset", "Offset the next record appended to the local replica gets")
        size = _gauge("kafka_log_log_size", "Bytes of the local replica's segments on disk")
        segments = _gauge("kafka_log_log_numlogsegments", "Segments of the local replica")
        high = _gauge("ebb_partition_highwatermark", "High watermark known to the local replica")
        low = _gauge("ebb_partition_lowwatermark", "Smallest log start offset over the alive replicas "
                     "(partitions led here only)")
        leader = _gauge("ebb_partition_leader", "1 where this broker leads the partition, else 0")
        in_sync = _gauge("kafka_cluster_partition_insyncreplicascount", "In-sync replicas (leaders only)")
        assigned = _gauge("kafka_cluster_partition_replicascount", "Assigned replicas (leaders only)")
        under = _gauge("kafka_cluster_partition_underreplicated", "1 where the ISR is smaller than the "
                       "assignment (leaders only)")
        led = under_total = producer_ids = 0
        partitions = self._replicas.partitions
        for tp, partition in sorted(partitions.items(), key=lambda item: (item[0].topic, item[0].partition)):
            labels = [tp.topic, str(tp.partition)]
            producer_ids += len(partition.producers)
            if partition.log.offline:
                continue
            start.add_metric(labels, partition.log_start_offset)
            end.add_metric(labels, partition.log_end_offset)
            size.add_metric(labels, partition.log.size_bytes)
            segments.add_metric(labels, len(partition.log.segments))
            high.add_metric(labels, partition.high_watermark)
            leader.add_metric(labels, 1 if partition.is_leader else 0)
            if partition.is_leader:
                led += 1
                is_under = len(partition.isr) < len(partition.replicas)
                under_total += is_under
                low.add_metric(labels, partition.low_watermark())
                in_sync.add_metric(labels, len(partition.isr))
                assigned.add_metric(labels, len(partition.replicas))
                under.add_metric(labels, int(is_under))
        yield from (start, end, size, segments, high, low, leader, in_sync, assigned, under)
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions with a replica here",
                                value=len(partitions))
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions led here", value=led)
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions led here whose ISR is smaller than their assignment", value=under_total)
        yield GaugeMetricFamily("kafka_server_replicamanager_offlinereplicacount",
                                "Replicas here that are offline (a storage error)",
                                value=len(self._logs.offline_partitions))
        yield GaugeMetricFamily("kafka_server_replicamanager_produceridcount",
                                "Producer ids with state, summed over the partitions here", value=producer_ids)
