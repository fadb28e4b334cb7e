"""Leader elections asked for by an operator (ElectLeaders, KIP-460), decided as Kafka's controller
decides them (ReplicationControlManager.electLeader):

- PREFERRED: the first replica of the assignment leads, if it is alive and in the ISR. A partition it
  already leads is ELECTION_NOT_NEEDED; one where it cannot lead is PREFERRED_LEADER_NOT_AVAILABLE.
- UNCLEAN: only for a partition without a leader (one with a leader is ELECTION_NOT_NEEDED): the first
  alive in-sync replica if there is one, otherwise the first alive replica of the assignment, which
  becomes the whole ISR: records the old leader had acknowledged and this replica lacks are lost (the
  documented price of an unclean election). No alive replica: ELIGIBLE_LEADERS_NOT_AVAILABLE.
- A topic or partition that does not exist (or is marked for deletion): UNKNOWN_TOPIC_OR_PARTITION.

Each decision is a function of the partition state that the controller writes conditionally on the
state node's version, like its own elections (Controller.change_partition).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum

from broker.cluster.partition_state import NO_LEADER, PartitionState
from broker.log import TopicPartition
from protocol.enums import ElectionType
from protocol.errors import ErrorCode


class Outcome(Enum):
    ELECTED = ErrorCode.NONE
    NOT_NEEDED = ErrorCode.ELECTION_NOT_NEEDED
    PREFERRED_UNAVAILABLE = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    NONE_ELIGIBLE = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


@dataclass(frozen=True)
class ElectionResult:
    error_code: ErrorCode
    message: str | None = None


Decision = tuple[Outcome, PartitionState | None]


def preferred_election(state: PartitionState, replicas: list[int], alive: set[int]) -> Decision:
    first = replicas[0]
    if state.leader == first and first in alive:  # a dead leader still in the state is no leader (Kafka fences it)
        return Outcome.NOT_NEEDED, None
    if first not in alive or first not in state.isr:
        return Outcome.PREFERRED_UNAVAILABLE, None
    return Outcome.ELECTED, replace(state, leader=first, leader_epoch=state.leader_epoch + 1)


def unclean_election(state: PartitionState, replicas: list[int], alive: set[int]) -> Decision:
    if state.leader != NO_LEADER and state.leader in alive:
        return Outcome.NOT_NEEDED, None
    in_sync = [r for r in replicas if r in alive and r in state.isr]
    if in_sync:
        new_leader, new_isr = in_sync[0], tuple(r for r in state.isr if r in alive)
    else:
        unclean = [r for r in replicas if r in alive]
        if not unclean:
            return Outcome.NONE_ELIGIBLE, None
        new_leader, new_isr = unclean[0], (unclean[0],)
    return Outcome.ELECTED, replace(state, leader=new_leader, leader_epoch=state.leader_epoch + 1, isr=new_isr)


DECISIONS = {ElectionType.PREFERRED: preferred_election, ElectionType.UNCLEAN: unclean_election}

# Writes the state decide(state) returns, conditionally; returns False when the partition has no state.
ChangePartition = Callable[[str, int, Callable[[PartitionState], PartitionState | None]], Awaitable[bool]]


async def elect_leaders(election: ElectionType, asked: Iterable[TopicPartition],
                        assignment: Callable[[TopicPartition], list[int] | None], alive: set[int],
                        change_partition: ChangePartition) -> dict[TopicPartition, ElectionResult]:
    """Hold `election` on each asked partition; `assignment` gives its replicas (None: no such partition)."""
    decide_on = DECISIONS[election]
    results: dict[TopicPartition, ElectionResult] = {}
    for tp in asked:
        replicas = assignment(tp)
        if not replicas:
            results[tp] = ElectionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {tp}")
            continue
        outcome: Outcome | None = None  # stays None when the partition has no state node (being deleted)

        def decide(state: PartitionState, replicas: list[int] = replicas) -> PartitionState | None:
            nonlocal outcome
            outcome, new_state = decide_on(state, replicas, alive)
            return new_state

        written = await change_partition(tp.topic, tp.partition, decide)
        if outcome is None:
            results[tp] = ElectionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {tp}")
            continue
        if outcome is Outcome.ELECTED and not written:  # the state kept changing under the election
            outcome = Outcome.PREFERRED_UNAVAILABLE if election is ElectionType.PREFERRED else Outcome.NONE_ELIGIBLE
        results[tp] = ElectionResult(outcome.value)
    return results
