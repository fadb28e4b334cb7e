"""Replicas: leadership, watermarks, idempotent producer state, and the purgatories requests wait in.

manager.ReplicaManager     the partitions this broker hosts (looked up lazily), purgatories, producer ids
partition.Partition        one partition: its log, leader epoch, ISR, high and low watermarks
producer_state             per-producer epoch and last five batches; snapshot + header scan on load
producer_ids               producer id blocks claimed from the metadata store
"""

from broker.replica.manager import ReplicaManager
from broker.replica.partition import AppendResult, Partition, PartitionError

__all__ = ["AppendResult", "Partition", "PartitionError", "ReplicaManager"]
