"""The committed-offset trimmer needs only the groups, the topics and the replicas (broker/group/trim.py):
small fakes drive one round on one broker."""

from dataclasses import dataclass, field

from broker.group.offsets import MinCommittedOffset
from broker.group.trim import CommittedTrimmer
from broker.log import StartOffsetReason, TopicPartition
from broker.replica.outcomes import DeleteOutcome
from protocol.errors import ErrorCode

TP = TopicPartition("t", 0)


@dataclass
class FakeLogConfig:
    retention_committed_groups: tuple[str, ...] = ("a", "b")
    delete_enabled: bool = True


@dataclass
class FakeLog:
    config: FakeLogConfig = field(default_factory=FakeLogConfig)


@dataclass
class FakePartition:
    topic_partition: TopicPartition = TP
    log: FakeLog = field(default_factory=FakeLog)
    high_watermark: int = 6
    log_start_offset: int = 0
    is_leader: bool = True


@dataclass
class FakeTopic:
    internal: bool = False


class FakeTopics:
    config_listeners: list = []

    def get(self, name: str) -> FakeTopic | None:
        return FakeTopic() if name == TP.topic else None


class FakeGroups:
    commit_listeners: list = []

    def committed_offsets(self, topic: str, partition: int) -> dict[str, int]:
        return {"a": 7, "b": 5} if (topic, partition) == (TP.topic, TP.partition) else {}

    def min_committed_offset(self, topic: str, partition: int) -> MinCommittedOffset:
        return MinCommittedOffset(5, ("a", "b"))


class FakeReplicas:
    def __init__(self) -> None:
        self.deletions: list[tuple[dict, bool, StartOffsetReason]] = []

    def partition(self, topic: str, index: int) -> FakePartition:
        return FakePartition()

    async def delete_records(self, offsets, timeout_ms: int, leader_only: bool, reason: StartOffsetReason):
        self.deletions.append((dict(offsets), leader_only, reason))
        return {tp: DeleteOutcome(ErrorCode.NONE, offset, offset) for tp, offset in offsets.items()}


async def test_a_round_moves_the_start_to_what_every_named_group_committed():
    replicas = FakeReplicas()
    trimmer = CommittedTrimmer(FakeGroups(), FakeTopics(), replicas, None, interval_s=300)
    assert await trimmer.trim([TP]) == {TP: 5}  # group b is at 5, below the high watermark (6)
    assert replicas.deletions == [({TP: 5}, True, StartOffsetReason.COMMITTED_OFFSETS)]
