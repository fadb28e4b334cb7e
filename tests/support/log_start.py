"""Moving a partition log's start offset the way the broker does: in memory, then durably."""

from __future__ import annotations

from broker.log import Offset, PartitionLog, StartOffsetReason


async def move_start(
    log: PartitionLog, offset: int, reason: StartOffsetReason = StartOffsetReason.CLIENT_RECORD_DELETION
) -> Offset:
    moved = log.move_log_start_offset(offset, reason)
    await log.make_start_offset_durable()
    return moved
