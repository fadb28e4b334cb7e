"""Client quotas (KIP-13, KIP-55, KIP-546): stored (store.py), judged as Kafka judges alterations
(entities.py), measured and enforced (rate.py, manager.py)."""
