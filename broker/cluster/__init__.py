"""The cluster: the metadata store, what it holds, and the parts that act on it.

- store.py: `MetadataStore` (ZooKeeper's shape: versioned nodes, watches) and `EmbeddedStore`, a
  single broker's, in one JSON file; zookeeper.py: `ZooKeeperStore` (kazoo), a cluster's.
- layout.py: every node's path and what it holds (Kafka's ZkData); partition_state.py: `PartitionState`
  (leader, leader epoch, ISR).
- cluster.py: this broker's view of a cluster, kept by watches; controller.py: the elected controller
  (leaders and ISRs); deletion.py: topic deletion across brokers; elections.py: elections asked for
  (ElectLeaders); leader_balance.py: automatic preferred leader rebalancing; reassignment.py: moving
  partitions (KIP-455); log_dir_events.py: a broker's failed (or recovered) log dir told to the
  controller.

Nothing here imports broker/topics.py or broker/config.py: the cluster view and the controller hold
the topics, the replicas and their settings through the Protocols they declare.
"""
