"""The broker (docs/architecture.md maps it; each package's docstring lists its modules).

Packages: handlers/ (one module per API), log/ (partition logs on disk), replica/ (leadership,
watermarks, the data path), cluster/ (the metadata store and the controller), group/ (consumer
groups), txn/ (transactions), security/ (TLS, SASL, ACLs), metrics/ (Prometheus).

The process: __main__.py and cli.py (`python -m broker`, `ebb broker`), app.py (builds the services
in order, starts them, stops them in reverse), server.py (one connection per socket; its requests
served one at a time), request_context.py (what a handler knows of a request's connection),
file_sender.py (answers sent from segment files with sendfile), purgatory.py (requests waiting on a
partition), fetch_sessions.py (KIP-227's sessions), log_output.py (structlog and logger levels),
allocator.py (freed memory kept in the process), aio.py (small asyncio helpers).

Settings: config.py (BrokerConfig), property_table.py (how a typed property is declared and parsed),
endpoints.py (listener, metrics and ZooKeeper addresses), dynamic_config.py (what changes at runtime,
KIP-226), topic_configs.py (the topic config table), group_configs.py (KIP-848's group configs),
client_metrics_configs.py (KIP-714's client metrics subscriptions).

Topics: topics.py (TopicManager), topic.py (one topic, its name rules), topic_store.py (topics read
back from the store), topic_placement.py (where replicas go), deletion_retries.py (deletions that
failed part way), coordinator_partitions.py (the internal topics' partitions that make this broker a
coordinator).
"""
