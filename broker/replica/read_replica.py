"""Which replica a consumer should read from (KIP-392): the leader's choice of a preferred read replica.

With `replica.selector.class` set to Kafka's RackAwareReplicaSelector (the one selector Ebb has,
broker/config.py), a
leader answering a consumer's Fetch (v11+, which carries the consumer's `client.rack`) names a
follower in the consumer's rack as PreferredReadReplica instead of reading, as Kafka's
ReplicaManager.findPreferredReadReplica does:

- the candidates are the followers in the ISR whose log (as their last fetch reported it) holds the
  fetch offset: log end at or past it, log start at or below it; a broker not registered on the
  consumer's listener has no rack here and is never picked;
- no rack from the consumer, or the leader in the consumer's rack, or no candidate there: the leader
  (no preferred replica in the answer); otherwise the candidate with the highest log end, then the
  one caught up most recently, then the highest broker id (Kafka's ReplicaView comparator).

The follower then serves that consumer up to its own high watermark (broker/handlers/k01_fetch.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from broker.replica.partition import Partition

class ReplicaView(NamedTuple):
    """One replica as the selector sees it (Kafka's ReplicaView)."""

    broker_id: int
    rack: str | None  # None: no rack, or the broker is not reachable on the consumer's listener
    log_end_offset: int
    time_since_caught_up_ms: int


def select_rack_aware(client_rack: str, leader: ReplicaView, followers: Iterable[ReplicaView]) -> int | None:
    """The follower a consumer in `client_rack` should read from; None for the leader."""
    if not client_rack or leader.rack == client_rack:
        return None
    same_rack = [f for f in followers if f.rack == client_rack]
    if not same_rack:
        return None
    best = max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_caught_up_ms, r.broker_id))
    return best.broker_id


def preferred_read_replica(partition: Partition, fetch_offset: int, client_rack: str,
                           racks: Mapping[int, str | None], now_ms: int) -> int | None:
    """For a partition led here: the follower a consumer in `client_rack` fetching at `fetch_offset`
    should be sent to, or None (read from the leader). `racks`: the alive brokers on the consumer's
    listener and their racks."""
    if not client_rack or not partition.is_leader or racks.get(partition.local_id) == client_rack:
        return None  # the common case, a consumer in the leader's rack, looks at no follower
    leader = ReplicaView(partition.local_id, racks.get(partition.local_id), partition.log.log_end_offset, 0)
    isr = partition.isr
    followers = [ReplicaView(state.replica_id, racks.get(state.replica_id), state.log_end_offset,
                             now_ms - state.last_caught_up_ms)
                 for state in partition.followers.values()
                 if state.replica_id in isr and state.log_end_offset >= fetch_offset
                 and state.log_start_offset <= fetch_offset]
    return select_rack_aware(client_rack, leader, followers)
