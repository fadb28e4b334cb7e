"""Where a topic's replicas go: Kafka's checks of manual assignments, its rack-aware striping when
brokers have racks (broker/striped_placement.py), and a round robin when none has one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from broker.striped_placement import PlacementRandom, SystemRandom, place_striped
from protocol.errors import CodedError, ErrorCode

# Partitions one CreateTopics or CreatePartitions request may create (Kafka's MAX_PARTITIONS_PER_BATCH).
MAX_PARTITIONS_PER_REQUEST = 10_000
_RANDOM = SystemRandom()
# Takes a change of n partitions from the client's controller mutation quota (broker/quotas/mutations.py),
# raising the refusal when the quota is strict and spent.
Charge = Callable[[int], None]


class TopicError(CodedError):
    """A topic change refused, with Kafka's error code for it and a message that names the problem."""


def assign_replicas(num_partitions: int, replication_factor: int,
                    assignments: Mapping[int, list[int]] | Iterable[tuple[int, list[int]]] | None,
                    brokers: Mapping[int, str | None], default_partitions: int, default_replication_factor: int,
                    rng: PlacementRandom = _RANDOM) -> dict[int, list[int]]:
    """Replica placement as Kafka's ReplicationControlManager.createTopic decides it (-1: the default);
    `brokers`: the alive brokers' ids and racks."""
    broker_ids = list(brokers)
    pairs = list(assignments.items() if isinstance(assignments, Mapping) else assignments or [])
    if pairs:
        if replication_factor != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                             "but replication factor was not set to -1.")
        if num_partitions != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                             "but numPartitions was not set to -1.")
        placed: dict[int, list[int]] = {}
        expected: int | None = None
        for partition, replicas in pairs:
            if partition in placed:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Found multiple manual partition assignments for partition {partition}")
            validate_manual_assignment(list(replicas), expected, broker_ids)
            expected = len(replicas)
            placed[partition] = list(replicas)
        if sorted(placed) != list(range(len(placed))):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "partitions should be a consecutive 0-based integer sequence")
        return dict(sorted(placed.items()))
    if replication_factor < -1 or replication_factor == 0:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Replication factor must be larger than 0, or -1 to use the default value.")
    if num_partitions < -1 or num_partitions == 0:
        raise TopicError(ErrorCode.INVALID_PARTITIONS,
                         "Number of partitions was set to an invalid non-positive value.")
    if num_partitions == -1:
        num_partitions = default_partitions
    if replication_factor == -1:
        replication_factor = default_replication_factor
    return place_replicas(0, num_partitions, replication_factor, brokers, rng)


def grown_partitions(name: str, current: int, count: int, replication_factor: int,
                     assignments: list[list[int]] | None, brokers: Mapping[int, str | None],
                     rng: PlacementRandom = _RANDOM, charge: Charge | None = None) -> dict[int, list[int]]:
    """The replicas of the partitions that grow topic `name` from `current` partitions to `count`
    (CreatePartitions), checked as Kafka checks them; `charge` takes the added partitions from the
    client's mutation quota where Kafka's controller does, before the placement and its checks."""
    broker_ids = list(brokers)
    if count == current:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if count < current:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, f"The topic {name} currently has {current} "
                         f"partition(s); {count} would not be an increase.")
    additional = count - current
    if additional > MAX_PARTITIONS_PER_REQUEST:
        raise TopicError(ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")
    if assignments is not None and len(assignments) != additional:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Attempted to add {additional} additional partition(s), but only "
                         f"{len(assignments)} assignment(s) were specified.")
    if charge is not None:
        charge(additional)
    if assignments is None:
        return place_replicas(current, additional, replication_factor, brokers, rng)
    for replicas in assignments:
        validate_manual_assignment(list(replicas), replication_factor, broker_ids)
    return {current + i: list(r) for i, r in enumerate(assignments)}


def place_replicas(first: int, count: int, replication_factor: int, brokers: Mapping[int, str | None],
                   rng: PlacementRandom = _RANDOM) -> dict[int, list[int]]:
    """Partitions first .. first+count-1 over the brokers (id -> rack): Kafka's striping over racks when
    any broker has one; otherwise round robin by id (partition p starts at the p-th broker), which is
    Kafka's striping without its random offsets and reshuffles: placement stays predictable where racks
    do not matter."""
    broker_ids = sorted(brokers)
    if replication_factor > len(broker_ids):
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Unable to replicate the partition {replication_factor} time(s): The target "
                         f"replication factor of {replication_factor} cannot be reached because only "
                         f"{len(broker_ids)} broker(s) are registered.")
    if any(rack is not None for rack in brokers.values()):
        placed = place_striped(count, replication_factor, brokers, rng)
        return {first + i: replicas for i, replicas in enumerate(placed)}
    return {p: [broker_ids[(p + i) % len(broker_ids)] for i in range(replication_factor)]
            for p in range(first, first + count)}


def validate_manual_assignment(replicas: list[int], replication_factor: int | None, broker_ids: list[int]) -> None:
    """One partition's explicit replica list, checked as Kafka's validateManualPartitionAssignment does."""
    if not replicas:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(replicas):
        if broker_id not in broker_ids:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                             f"broker {broker_id}, but no such broker is registered.")
        if broker_id == previous:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                             f"the broker {broker_id} more than once.")
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes a "
                         f"partition with {len(replicas)} replica(s), but this is not consistent with previous "
                         f"partitions, which have {replication_factor} replica(s).")
