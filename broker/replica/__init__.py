"""Replicas: leadership, watermarks, idempotent producer state, and the purgatories requests wait in.

manager.ReplicaManager     the partitions hosted here (looked up lazily), their roles, the purgatories,
                           fetchers and ISR changes, producer ids
data_path.DataPath         ReplicaManager's data path part: append, delete records, durable log starts
delayed                    the data path's waits: Kafka's DelayedProduce and DelayedDeleteRecords
outcomes                   the data path's per-partition results (AppendResult, DeleteOutcome), AppendOrigin
partition.Partition        one partition: its log, leader epoch, ISR, high and low watermarks
producer_table             Partition's producer table part: loading, rebuilding and snapshotting it
fetcher.ReplicaFetcher     following a leader: one per leader broker
fetch_session_handler      a follower's side of its fetch session with a leader (KIP-227)
throttle                   replication throttles (Kafka's ReplicationQuotaManager)
producer_recovery          producer state rebuilt from a log at load
producer_state             per-producer epoch and last five batches; snapshot + header scan on load
producer_ids               producer id blocks claimed from the metadata store
read_replica               the preferred read replica a leader names to a consumer (KIP-392)
"""

from broker.replica.manager import ReplicaManager
from broker.replica.outcomes import AppendOrigin, AppendResult, DeleteOutcome
from broker.replica.partition import Partition, PartitionError

__all__ = ["AppendOrigin", "AppendResult", "DeleteOutcome", "Partition", "PartitionError", "ReplicaManager"]
