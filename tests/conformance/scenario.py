"""The flow every client runs against the broker, and what it must see.

Each client module (test_<client>.py) walks the same steps, in file order:

    create topic (3 partitions) -> produce 100 records with acks=1 and 100 with acks=all
    -> read them back with a consumer assigned to the partitions (no group)
    -> ListOffsets earliest / latest / by time
    -> DeleteRecords before DELETE_BEFORE on partition DELETE_PARTITION; earliest == DELETE_BEFORE
    -> reading below the log start offset fails the way that client reports it
    -> DescribeConfigs lists every topic config with defaults; alter one; describe again
    -> delete the topic

Records go to explicit partitions with explicit CreateTime timestamps, so every expected offset
is known in advance and does not depend on a client's partitioner or on the clock.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

import pytest

# librdkafka's own log goes through Python logging: pytest shows it with a failing test, and a
# client left over after its broker stopped does not print reconnect errors into later tests.
RDKAFKA_LOG = logging.getLogger("librdkafka")

PARTITIONS = 3
RECORDS_PER_ACKS = 100
ACKS = ("1", "all")
DELETE_PARTITION = 0
DELETE_BEFORE = 10
STEP_MS = 1000  # record j has timestamp base + j * STEP_MS

# A topic config every client alters; the value is far from the default and harmless.
ALTER_KEY = "retention.ms"
ALTER_VALUE = "86400000"

# Topic configs DescribeConfigs must list for a topic with no overrides (kafka-python's
# alter_configs() refuses any key that is not listed). Kafka's log configs, minus tiered storage,
# plus Ebb's absolute-timestamp retention floor.
REQUIRED_TOPIC_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "compression.type",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "index.interval.bytes",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
        "retention.min.timestamp",
    }
)

# Kafka's defaults for a broker started with no log.* overrides.
TOPIC_CONFIG_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "max.message.bytes": "1048588",
    "segment.bytes": "1073741824",
    "min.insync.replicas": "1",
    "message.timestamp.type": "CreateTime",
}

# ConfigSource values (DescribeConfigs v1+).
SOURCE_DYNAMIC_TOPIC = 1
SOURCES_NOT_OVERRIDDEN = {3, 4, 5}  # dynamic default broker, static broker, default


def check_default_topic_configs(values: dict, sources: dict, not_overridden=SOURCES_NOT_OVERRIDDEN) -> None:
    """What DescribeConfigs must say of a topic created without overrides, as each client reports it:
    every required config listed (`values`: name -> value), Kafka's defaults, and no source (`sources`:
    name -> source) saying a topic override."""
    missing = REQUIRED_TOPIC_CONFIGS - values.keys()
    assert not missing, f"DescribeConfigs does not list {sorted(missing)}"
    for name, default in TOPIC_CONFIG_DEFAULTS.items():
        assert values[name] == default, name
    overridden = {name: s for name, s in sources.items() if s not in not_overridden}
    assert overridden == {}, "configs of a topic created without overrides must come from defaults"


@dataclass(frozen=True)
class Record:
    partition: int
    key: bytes
    value: bytes
    timestamp_ms: int
    acks: str


def make_records(base_ts_ms: int) -> list[Record]:
    """200 records: 100 sent with acks=1, then 100 with acks=all, round-robin over the partitions."""
    records = []
    for batch, acks in enumerate(ACKS):
        for i in range(RECORDS_PER_ACKS):
            j = batch * RECORDS_PER_ACKS + i
            records.append(
                Record(
                    partition=i % PARTITIONS,
                    key=f"key-{j:03d}".encode(),
                    value=f"acks{acks}-{i:03d}".encode(),
                    timestamp_ms=base_ts_ms + j * STEP_MS,
                    acks=acks,
                )
            )
    return records


@dataclass
class Flow:
    """State shared by the ordered steps of one client's flow."""

    client: str
    topic: str
    base_ts_ms: int
    records: list[Record]
    done: set[str] = field(default_factory=set)

    def require(self, *steps: str) -> None:
        missing = [s for s in steps if s not in self.done]
        if missing:
            pytest.skip(f"an earlier step of the {self.client} flow did not pass: {', '.join(missing)}")

    def by_acks(self, acks: str) -> list[Record]:
        return [r for r in self.records if r.acks == acks]

    def layout(self) -> dict[int, list[Record]]:
        """Partition -> its records in offset order (record at index i has offset i)."""
        out: dict[int, list[Record]] = {p: [] for p in range(PARTITIONS)}
        for r in self.records:
            out[r.partition].append(r)
        return out

    def latest(self) -> dict[int, int]:
        return {p: len(rs) for p, rs in self.layout().items()}

    def values(self, partition: int, start: int = 0) -> list[bytes]:
        return [r.value for r in self.layout()[partition][start:]]

    # A timestamp between two records in the acks=all half, and one after every record.
    @property
    def mid_ts_ms(self) -> int:
        return self.base_ts_ms + (RECORDS_PER_ACKS + RECORDS_PER_ACKS // 2) * STEP_MS + STEP_MS // 2

    @property
    def future_ts_ms(self) -> int:
        return int(time.time() * 1000) + 86_400_000

    def offset_for_time(self, partition: int, ts_ms: int) -> int | None:
        """Kafka's answer: the first offset whose timestamp is >= ts_ms, None when there is none."""
        for offset, r in enumerate(self.layout()[partition]):
            if r.timestamp_ms >= ts_ms:
                return offset
        return None


def new_flow(client: str) -> Flow:
    # Ten minutes ago, whole seconds: old enough that all 200 timestamps are in the past, young
    # enough for any retention the flow sets.
    base = (int(time.time()) - 600) * 1000
    topic = f"conformance-{client}-{uuid.uuid4().hex[:8]}"
    return Flow(client=client, topic=topic, base_ts_ms=base, records=make_records(base))
