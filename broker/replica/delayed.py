"""The data path's waits in the purgatories: Kafka's DelayedProduce (acks=-1 until the ISR holds the
batches) and DelayedDeleteRecords (until every low watermark reaches its offset). ReplicaManager
starts them; what ends each wait is the partitions' state (Partition.acks_outcome, low_watermark).
"""

from __future__ import annotations

from broker.log import TopicPartition
from broker.purgatory import Purgatory
from broker.replica.outcomes import AppendResult, DeleteOutcome
from broker.replica.partition import Partition
from protocol.errors import ErrorCode

_ACKS_FAILURES = {  # why an acks=-1 append was not acknowledged
    ErrorCode.REQUEST_TIMED_OUT: "the batch was not replicated to the in-sync replicas in time",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "leadership moved before the batch was replicated",
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "the in-sync replicas fell below min.insync.replicas after the append",
}


async def await_acks(produces: Purgatory, results: list[AppendResult], waiting: list[tuple[int, Partition, int]],
                     outcomes: list[ErrorCode | None], timeout_ms: int) -> None:
    """Kafka's DelayedProduce: done when every partition's acks outcome is known
    (Partition.acks_outcome; `outcomes` as they stand now); those still open at the timeout are
    REQUEST_TIMED_OUT. A failed partition keeps its offsets in the answer, as Kafka's does."""
    if None in outcomes:

        def settled() -> bool:
            for _, partition, required in waiting:
                if partition.acks_outcome(required) is None:
                    return False
            return True

        await produces.wait([p.topic_partition for _, p, _ in waiting], settled, timeout_ms)
        outcomes = [partition.acks_outcome(required) for _, partition, required in waiting]
    for (position, _, _), outcome in zip(waiting, outcomes, strict=True):
        if outcome is not ErrorCode.NONE:
            code = ErrorCode.REQUEST_TIMED_OUT if outcome is None else outcome
            results[position] = results[position]._replace(error_code=code, error_message=_ACKS_FAILURES[code])


async def await_low_watermarks(deletions: Purgatory, outcomes: dict[TopicPartition, DeleteOutcome],
                              pending: list[tuple[TopicPartition, Partition, int]], timeout_ms: int) -> None:
    """Kafka's DelayedDeleteRecords: done when every low watermark reached its offset. TimeoutMs
    <= 0 parks nothing: the answer is what is known now (KAFKA-20560)."""

    def reached() -> bool:
        return all(not p.is_leader or p.low_watermark() >= required for _, p, required in pending)

    if timeout_ms > 0:
        await deletions.wait([p.topic_partition for _, p, _ in pending], reached, timeout_ms)
    for tp, partition, required in pending:
        low = partition.low_watermark()
        if not partition.is_leader:  # the new leader has the start offset
            outcomes[tp] = DeleteOutcome(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)
        elif low >= required:
            outcomes[tp] = DeleteOutcome(ErrorCode.NONE, low, partition.log_start_offset)
        else:  # Kafka keeps the low watermark seen on arrival
            outcomes[tp] = outcomes[tp]._replace(error_code=ErrorCode.REQUEST_TIMED_OUT, leader_log_start_offset=-1)
