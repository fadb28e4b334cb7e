"""Kafka message specs (JSON data). Python code reads them through protocol.specs."""
