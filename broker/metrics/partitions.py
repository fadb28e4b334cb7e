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


class PartitionCollector:
    def __init__(self, replicas: ReplicasView, logs: OfflineLogsView) -> None:
        self._replicas = replicas
        self._logs = logs

    def collect(self) -> Iterator[Metric]:
        # One pass over the partitions per family, each family yielded when done: whoever renders the
        # scrape can let the loop run between them (broker/metrics/http.py).
        partitions = sorted(self._replicas.partitions.items(), key=lambda item: (item[0].topic, item[0].partition))
        online = [(tp, p) for tp, p in partitions if not p.log.offline]
        leaders = [(tp, p) for tp, p in online if p.is_leader]
        every_replica = (
            ("kafka_log_log_logstartoffset", "First offset readable in the local replica",
             lambda p: p.log_start_offset),
            ("kafka_log_log_logendoffset", "Offset the next record appended to the local replica gets",
             lambda p: p.log_end_offset),
            ("kafka_log_log_size", "Bytes of the local replica's segments on disk", lambda p: p.log.size_bytes),
            ("kafka_log_log_numlogsegments", "Segments of the local replica", lambda p: len(p.log.segments)),
            ("ebb_partition_highwatermark", "High watermark known to the local replica", lambda p: p.high_watermark),
            ("ebb_partition_leader", "1 where this broker leads the partition, else 0", lambda p: int(p.is_leader)),
        )
        leaders_only = (
            ("ebb_partition_lowwatermark", "Smallest log start offset over the alive replicas (partitions led "
             "here only)", lambda p: p.low_watermark()),
            ("kafka_cluster_partition_insyncreplicascount", "In-sync replicas (leaders only)", lambda p: len(p.isr)),
            ("kafka_cluster_partition_replicascount", "Assigned replicas (leaders only)", lambda p: len(p.replicas)),
            ("kafka_cluster_partition_underreplicated", "1 where the ISR is smaller than the assignment (leaders "
             "only)", _under_replicated),
        )
        for chosen, families in ((online, every_replica), (leaders, leaders_only)):
            for name, documentation, read in families:
                family = GaugeMetricFamily(name, documentation, labels=["topic", "partition"])
                for tp, partition in chosen:
                    family.add_metric([tp.topic, str(tp.partition)], read(partition))
                yield family
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions with a replica here",
                                value=len(partitions))
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


def _under_replicated(partition: PartitionView) -> int:
    return int(len(partition.isr) < len(partition.replicas))
