"""One counter that moves whenever anything a consumer Fetch's partition resolve reads may have changed,
so that a resolve can be cached and trusted while the counter stands still
(broker/handlers/fetch_resolve.py).

What a resolve reads, and who moves the counter when it changes: the topics by name and id and their
partitions (TopicManager), the partitions hosted here (ReplicaManager.partition_of and _forget), a
partition's leader and leader epoch (Partition.make_leader, make_follower), the logs and whether they
are online (LogManager's registrations and deletions, the unloaded partitions, a log or its dir going
offline or coming back) and the ACLs (Authorizer.reload). Quotas and the log's offsets are read by
every request, cached or not.

Process-wide, as the open-file budget is: brokers sharing a process (tests) only invalidate each other's
caches more often, never less.
"""

from __future__ import annotations


class Generation:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def bump(self) -> None:
        self.value += 1


RESOLVE_GENERATION = Generation()
