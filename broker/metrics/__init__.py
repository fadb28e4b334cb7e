"""Prometheus metrics (docs/operations.md lists every series and its Kafka JMX name).

Hot paths only bump plain counters (requests.py for the network layer, data_path.py for the
replicas, retention.py for the log manager); one collector per source reads them, and the state of
partitions, purgatories, the controller and groups, when Prometheus scrapes `/metrics` (http.py)
on the broker's event loop. service.py wires the collectors to the broker's parts.
"""
