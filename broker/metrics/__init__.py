"""Prometheus metrics (docs/operations.md lists every series and its Kafka JMX name).

Hot paths only bump plain counters (requests.py for the network layer, data_path.py for the
replicas, the log's retention deletions included); one collector per source reads them, and the state of
partitions, purgatories, the controller and groups, when Prometheus scrapes `/metrics` (http.py)
on the broker's event loop. service.py wires the collectors to the broker's parts; histogram.py is the
request path's cheap histogram. The collectors: network.py, data_path.py, partitions.py,
purgatories.py, controller.py, groups.py, and fetch_sessions.py, log_cleaner.py, log_dirs.py and
open_files.py (the fetch session cache, the log cleaner, the dir's headroom, the open-segment budget).
"""
