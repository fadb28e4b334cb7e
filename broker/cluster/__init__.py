"""The cluster: the metadata store, what it holds, and the parts that act on it.

- store.py: `MetadataStore` (ZooKeeper's shape: versioned nodes, watches) and `EmbeddedStore`, a
  single broker's, in one JSON file; zookeeper.py: `ZooKeeperStore` (kazoo), a cluster's.
- layout.py: every node's path and what it holds (Kafka's ZkData); partition_state.py: `PartitionState`
  (leader, leader epoch, ISR).
- cluster.py: this broker's view of a cluster, kept by watches; controller.py: the elected controller
  (leaders and ISRs); deletion.py: topic deletion across brokers.

Nothing here imports broker/topics.py or broker/config.py: the cluster view and the controller hold
the topics, the replicas and their settings through the Protocols they declare.
"""
