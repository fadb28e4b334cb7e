"""Consumer groups served by this broker's coordinator, counted by state (Kafka's NumGroups,
NumGroupsStable, NumGroupsPreparingRebalance, ... as one gauge with a state label)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")


class GroupView(Protocol):
    @property
    def state(self) -> str: ...


class GroupsView(Protocol):
    @property
    def groups(self) -> Mapping[str, GroupView]: ...


class GroupCollector:
    def __init__(self, coordinator: GroupsView) -> None:
        self._coordinator = coordinator

    def collect(self) -> Iterator[Metric]:
        counts = dict.fromkeys(STATES, 0)
        for group in self._coordinator.groups.values():
            state = str(group.state)
            counts[state] = counts.get(state, 0) + 1
        family = GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numgroups",
                                   "Groups served here, by state", labels=["state"])
        for state, count in counts.items():
            family.add_metric([state], count)
        yield family
