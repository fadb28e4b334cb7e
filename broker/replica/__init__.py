"""Replicas: leadership, watermarks, idempotent producer state, and the purgatories requests wait in.

manager.ReplicaManager     the partitions hosted here (looked up lazily); the data path: append, delete
                           records, the waits in its purgatories; producer ids
partition.Partition        one partition: its log, leader epoch, ISR, high and low watermarks
delayed                    the data path's waits: Kafka's DelayedProduce and DelayedDeleteRecords
outcomes                   the data path's per-partition results (AppendResult, DeleteOutcome), AppendOrigin
fetcher.ReplicaFetcher     following a leader: one per leader broker
fetch_session_handler      a follower's side of its fetch session with a leader (KIP-227)
throttle                   replication throttles (Kafka's ReplicationQuotaManager)
producer_table             a partition's producer table and its rebuild from the log (part of Partition)
producer_recovery          producer state rebuilt from a log at load
producer_state             per-producer epoch and last five batches; snapshot + header scan on load
producer_ids               producer id blocks claimed from the metadata store
"""

from broker.replica.manager import ReplicaManager
from broker.replica.outcomes import AppendOrigin, AppendResult, DeleteOutcome
from broker.replica.partition import Partition, PartitionError

__all__ = ["AppendOrigin", "AppendResult", "DeleteOutcome", "Partition", "PartitionError", "ReplicaManager"]
