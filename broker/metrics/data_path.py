"""Counters of the data path, owned by the ReplicaManager and bumped where the work happens:
bytes and records in and out per topic, records and bytes deleted by cause, ISR shrinks and
expands, DeleteRecords latency by mode. Plain ints updated in place; `collect` exposes them.

Deletion causes: `delete_records` (a client's DeleteRecords), `committed_offsets` (Ebb's
retention.committed.groups trimming), `retention_time`, `retention_size`, `retention_timestamp`
(retention.ms, retention.bytes, retention.min.timestamp), `follower` (a follower moving its start
after its leader's) and `start_offset` (segments wholly below a start offset that moved earlier).
Records deleted are offsets the log start offset moved past; bytes deleted are the sizes of the
segments removed with them (a segment partly below the start stays until wholly below it).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from broker.log.common import StartOffsetReason
from broker.metrics.histogram import Histogram

DELETE_MODES = ("all_replicas", "leader_only")
DELETION_CAUSES = {
    StartOffsetReason.CLIENT_RECORD_DELETION: "delete_records",
    StartOffsetReason.COMMITTED_OFFSETS: "committed_offsets",
    StartOffsetReason.LEADER_OFFSET_INCREMENTED: "follower",
}


class TopicTraffic:
    __slots__ = ("bytes_in", "messages_in", "bytes_out", "replication_bytes_out")

    def __init__(self) -> None:
        self.bytes_in = self.messages_in = self.bytes_out = self.replication_bytes_out = 0


class DataPathCounters:
    def __init__(self) -> None:
        self.topics: dict[str, TopicTraffic] = {}
        self.deleted_records: dict[str, int] = {}
        self.deleted_bytes: dict[str, int] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.delete_latency = {mode: Histogram() for mode in DELETE_MODES}

    def _topic(self, name: str) -> TopicTraffic:
        traffic = self.topics.get(name)
        if traffic is None:
            traffic = self.topics[name] = TopicTraffic()
        return traffic

    def produced(self, topic: str, size: int, records: int) -> None:
        traffic = self._topic(topic)
        traffic.bytes_in += size
        traffic.messages_in += records

    def fetched(self, topic: str, size: int, *, by_follower: bool) -> None:
        traffic = self.topics.get(topic)  # _topic's lookup inline: once per partition of every Fetch
        if traffic is None:
            traffic = self._topic(topic)
        if by_follower:
            traffic.replication_bytes_out += size
        else:
            traffic.bytes_out += size

    def deleted(self, cause: str, records: int, size: int) -> None:
        if records > 0:
            self.deleted_records[cause] = self.deleted_records.get(cause, 0) + records
        if size > 0:
            self.deleted_bytes[cause] = self.deleted_bytes.get(cause, 0) + size

    def isr_changed(self, before: set[int], after: set[int]) -> None:
        if after - before:
            self.isr_expands += 1
        if before - after:
            self.isr_shrinks += 1

    def forget_topic(self, name: str) -> None:
        self.topics.pop(name, None)

    def collect(self) -> Iterator[Metric]:
        families = {
            "bytes_in": CounterMetricFamily("kafka_server_brokertopicmetrics_bytesin",
                                            "Bytes produced by clients, by topic (Kafka's BytesInPerSec)",
                                            labels=["topic"]),
            "messages_in": CounterMetricFamily("kafka_server_brokertopicmetrics_messagesin",
                                               "Records produced by clients, by topic (MessagesInPerSec)",
                                               labels=["topic"]),
            "bytes_out": CounterMetricFamily("kafka_server_brokertopicmetrics_bytesout",
                                             "Record bytes fetched by consumers, by topic (BytesOutPerSec)",
                                             labels=["topic"]),
            "replication_bytes_out": CounterMetricFamily(
                "kafka_server_brokertopicmetrics_replicationbytesout",
                "Record bytes fetched by followers, by topic (ReplicationBytesOutPerSec)", labels=["topic"]),
        }
        for name, traffic in sorted(self.topics.items()):
            for attr, family in families.items():
                family.add_metric([name], getattr(traffic, attr))
        yield from families.values()
        records = CounterMetricFamily("ebb_log_deleted_records", "Records made unreadable by a log start "
                                      "offset move, by cause", labels=["cause"])
        for cause, count in sorted(self.deleted_records.items()):
            records.add_metric([cause], count)
        yield records
        size = CounterMetricFamily("ebb_log_deleted_bytes", "Bytes of segments deleted, by cause", labels=["cause"])
        for cause, count in sorted(self.deleted_bytes.items()):
            size.add_metric([cause], count)
        yield size
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                  "ISR shrinks of partitions led here (IsrShrinksPerSec)", value=self.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                  "ISR expansions of partitions led here (IsrExpandsPerSec)", value=self.isr_expands)
        latency = HistogramMetricFamily("ebb_delete_records_latency_seconds",
                                        "DeleteRecords requests from arrival of the handler to answer, by mode "
                                        "(all_replicas waits for the low watermark; leader_only, KIP-1343 v3, "
                                        "for the leader's durable start)", labels=["mode"])
        for mode, histogram in self.delete_latency.items():
            latency.add_metric([mode], histogram.cumulative(), histogram.sum)
        yield latency
