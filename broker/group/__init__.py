"""Consumer groups: the classic group protocol, with committed offsets and group metadata stored in
the internal topic `__consumer_offsets`.

coordinator.GroupCoordinator   the broker service: group states, rebalances, sessions (asyncio timers),
                               static members; `broker.groups`
offsets.OffsetManager          OffsetCommit/OffsetFetch/OffsetDelete checks, retention, and the
                               broker-side API: committed_offsets(), min_committed_offset()
offsets_store.OffsetsStore     records written through the partition log, replayed at start-up
records                        Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value formats
group                          one group and its members (Kafka's ClassicGroup)
"""

from broker.group.coordinator import GroupCoordinator, JoinRequest, JoinResult, SyncResult
from broker.group.group import GroupError, GroupState
from broker.group.offsets import MinCommittedOffset, OffsetCommit
from broker.group.offsets_store import OFFSETS_TOPIC, partition_for

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "GroupError", "GroupState", "JoinRequest", "JoinResult",
           "MinCommittedOffset", "OffsetCommit", "SyncResult", "partition_for"]
