"""One counter that moves whenever anything a consumer Fetch's partition resolve reads may have changed,
so that a resolve can be cached and trusted while the counter stands still
(broker/handlers/fetch_resolve.py).

What a resolve reads, and who moves the counter when it changes: the topics by name and id, their
partitions and replicas, a reassignment's joining and leaving ones included (TopicManager: creation,
deletion, growth, a refresh that found a change), the partitions hosted here (ReplicaManager.partition_of
and _forget: a reassignment that drops this broker forgets its Partition and deletes its log), a
partition's leader and leader epoch (Partition.make_leader, make_follower), the logs and whether they
are online (LogManager's registrations and deletions, a partition entering or leaving the unloaded
ones, a log or its dir going offline or coming back) and the ACLs (Authorizer.reload, the one that
installs). Each moves it on an actual change only, so that an idle retry (a probe reloading a partition
that keeps failing, a refresh that found the topic as it was) does not throw every connection's kept
resolve away. Quotas and the log's offsets are read by every request, cached or not. Under the tests
every reuse of a kept resolve is checked against a full one (fetch_resolve.py), so a change that
forgets to move the counter fails the test that makes it.

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
