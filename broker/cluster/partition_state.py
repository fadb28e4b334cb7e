"""A partition's state in the cluster: who leads it, at which leader epoch, and which replicas are in
sync (Kafka's LeaderIsrAndControllerEpoch). Written by the controller and by the partition's leader
(ISR changes); its JSON form and its node are broker/cluster/layout.py's."""

from __future__ import annotations

from dataclasses import dataclass

NO_LEADER = -1  # a partition without a leader (offline), as Kafka writes it


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int  # of the controller that wrote it (a leader's ISR change keeps it)

    @classmethod
    def initial(cls, replicas: list[int]) -> PartitionState:
        """A new partition's: the first replica leads at epoch 0, every replica in sync."""
        return cls(leader=replicas[0], leader_epoch=0, isr=tuple(replicas), controller_epoch=1)
