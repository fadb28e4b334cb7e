"""Controller gauges (Kafka's kafka.controller:type=KafkaController): whether this broker is the
active controller, and, on the active controller only as in Kafka, the partitions without a live
leader, those not led by their preferred replica and the topics waiting to be deleted. Topic and
partition totals are reported everywhere."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric


class ControllerView(Protocol):
    def is_active_controller(self) -> bool: ...
    def offline_partition_count(self) -> int: ...  # partitions whose leader is none or not alive
    def preferred_replica_imbalance_count(self) -> int: ...  # partitions led by another than their first replica
    def topics_to_delete(self) -> int: ...
    def topic_count(self) -> int: ...
    def partition_count(self) -> int: ...


class ControllerCollector:
    def __init__(self, view: ControllerView) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        view = self._view
        active = view.is_active_controller()
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the active controller, 0 elsewhere", value=int(active))
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a live leader (active controller only)",
                                value=view.offline_partition_count() if active else 0)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
                                "Partitions not led by their preferred replica (active controller only)",
                                value=view.preferred_replica_imbalance_count() if active else 0)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_topicstodeletecount",
                                "Topics marked for deletion and not yet deleted (active controller only)",
                                value=view.topics_to_delete() if active else 0)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster",
                                value=view.topic_count())
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_globalpartitioncount",
                                "Partitions in the cluster", value=view.partition_count())
