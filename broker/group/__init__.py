"""Consumer groups: the classic group protocol, with committed offsets and group metadata stored in
the internal topic `__consumer_offsets`.

coordinator.GroupCoordinator   the broker service and the handlers' one entry point (`broker.groups`);
                               builds the parts below and lists, describes and deletes groups
registry.GroupRegistry         the groups served and the __consumer_offsets partitions they come from:
                               load, unload, replay, leadership moves
sessions.SessionTimers         member sessions and the join/sync/pending-member timers (asyncio)
phases.RebalancePhases         the rebalance state machine: PreparingRebalance, CompletingRebalance, Stable
rebalance.RebalanceProtocol    JoinGroup, SyncGroup, Heartbeat, LeaveGroup; static members
offsets.OffsetManager          OffsetCommit/OffsetFetch/OffsetDelete checks, retention, and the
                               broker-side API: committed_offsets(), min_committed_offset()
offsets_store.OffsetsStore     records written through the partition log, replayed at start-up
trim.CommittedTrimmer          `retention.committed.groups`: moves log start offsets past what groups committed
cluster_commits                what every group of a cluster committed, asked of every coordinator
tasks                          the coordinator's background tasks, cancelled at stop, failures logged
metadata                       a group as its GroupMetadata record, and back
requests                       JoinRequest, JoinResult, SyncResult
records                        Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value formats
group                          one group and its members (Kafka's ClassicGroup)
member_group                   what KIP-848 and share groups share: their fields, Assignment, the heartbeat
                               answer, the check of a joining member
share_groups.ShareGroups       share groups (KIP-932): ShareGroupHeartbeat's membership, epochs, sessions
share_group                    one share group, its members, and the simple assignor
consumer_groups.ConsumerGroups KIP-848 consumer groups: ConsumerGroupHeartbeat's membership, epochs,
                               reconciliation, sessions and rebalance timeouts; offset commit checks
consumer_group                 one consumer group, its members, and reconciliation (CurrentAssignmentBuilder)
consumer_assignors             the uniform and range server-side assignors
consumer_regex                 subscription regexes, checked and matched on RE2
consumer_records               their __consumer_offsets records (types 3, 5-8), written and replayed
"""

from broker.group.coordinator import GroupCoordinator
from broker.group.group import GroupError, GroupState
from broker.group.offsets import MinCommittedOffset, OffsetCommit
from broker.group.offsets_store import OFFSETS_TOPIC, partition_for
from broker.group.requests import JoinRequest, JoinResult, SyncResult

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "GroupError", "GroupState", "JoinRequest", "JoinResult",
           "MinCommittedOffset", "OffsetCommit", "SyncResult", "partition_for"]
