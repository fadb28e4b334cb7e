"""The Java Admin (kafka-clients 4.3.1) against Ebb: topics, configs, DeleteRecords, ListOffsets, the cluster.

One JVM runs the `admin` suite of ebb.interop.AdminChecks; each test judges the lines of its steps.
"""

from __future__ import annotations

import pytest

PREFIX = "admin"
TOPIC = f"{PREFIX}-admin"


@pytest.fixture(scope="module")
def steps(java, broker):
    return java.interop(broker.bootstrap, PREFIX, "admin")


def test_create_topics(steps):
    line = steps.ok("create_topics")
    assert line["listed"] is True
    assert line["again"] == f"TopicExistsException: Topic '{TOPIC}' already exists."
    assert line["bad_name"].startswith("InvalidTopicException:")
    assert line["too_many_replicas"].startswith("InvalidReplicationFactorException:")


def test_describe_topics(steps):
    line = steps.ok("describe_topics")
    assert line["name"] == TOPIC and line["internal"] is False
    assert line["topic_id"] != "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO_UUID
    assert sorted(line["partitions"], key=lambda p: p["partition"]) == [
        {"partition": p, "leader": 1, "replicas": [1], "isr": [1]} for p in range(3)]
    assert line["unknown"].startswith("UnknownTopicOrPartitionException:")


def test_describe_configs_lists_every_topic_config_with_its_source(steps):
    entries = steps.ok("describe_configs")["entries"]
    assert entries["retention.ms"] == {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG", "default": False,
                                       "read_only": False, "type": "LONG"}
    assert entries["cleanup.policy"] == {"value": "delete", "source": "DEFAULT_CONFIG", "default": True,
                                         "read_only": False, "type": "LIST"}
    assert entries["max.message.bytes"]["value"] == "1048588" and entries["max.message.bytes"]["type"] == "INT"
    # Ebb's own topic configs are listed like Kafka's
    assert entries["retention.committed.groups"]["type"] == "LIST"
    assert entries["retention.min.timestamp"]["type"] == "LONG"
    assert {"segment.bytes", "segment.ms", "min.insync.replicas", "message.timestamp.type"} <= set(entries)


def test_incremental_alter_configs(steps):
    line = steps.ok("incremental_alter_configs")
    after_set, after_delete = line["after_set"], line["after_delete"]
    assert after_set["retention.ms"]["value"] == "7200000"
    assert after_set["max.message.bytes"] == {"value": "2000000", "source": "DYNAMIC_TOPIC_CONFIG", "default": False,
                                              "read_only": False, "type": "INT"}
    assert after_set["cleanup.policy"]["value"] == "delete,compact"  # APPEND
    assert after_delete["retention.ms"]["value"] == "7200000"  # untouched by the second call
    assert after_delete["max.message.bytes"] == {"value": "1048588", "source": "DEFAULT_CONFIG", "default": True,
                                                 "read_only": False, "type": "INT"}  # DELETE
    assert after_delete["cleanup.policy"]["value"] == "delete"  # SUBTRACT
    invalid = "InvalidConfigurationException: Invalid value soon for configuration retention.ms"
    assert line["invalid"].startswith(invalid), line["invalid"]


def test_list_offsets(steps):
    base = steps.ok("produce")["base"]
    assert steps.ok("produce")["offsets"] == list(range(10))
    line = steps.ok("list_offsets")
    assert line["earliest"] == {"offset": 0, "timestamp": -1}
    assert line["latest"] == {"offset": 10, "timestamp": -1}
    # the first record whose timestamp is at or after the target: record 4 (base + 4000)
    assert line["for_timestamp"] == {"offset": 4, "timestamp": base + 4000}
    assert line["for_timestamp_past_all"] == {"offset": -1, "timestamp": -1}
    # record 6 carries the newest timestamp, though it is not the last
    assert line["max_timestamp"] == {"offset": 6, "timestamp": base + 100_000}
    assert line["empty_partition_latest"] == {"offset": 0, "timestamp": -1}


def test_delete_records_reports_low_watermarks_and_moves_the_start(steps):
    base = steps.ok("produce")["base"]
    line = steps.ok("delete_records")
    assert line["low_watermark"] == 4
    assert line["earliest_after"] == {"offset": 4, "timestamp": -1}
    assert line["to_end_empty_partition"] == 0  # RecordsToDelete.beforeOffset(-1): up to the high watermark
    assert line["past_end"].startswith("OffsetOutOfRangeException:")
    # a timestamp older than every record left names the first record left
    assert line["for_timestamp_below_start"] == {"offset": 4, "timestamp": base + 4000}


def test_describe_cluster(steps, broker):
    line = steps.ok("describe_cluster")
    assert line["nodes"] == [{"id": 1, "host": "127.0.0.1", "port": broker.port}]
    assert line["controller"] == 1
    assert len(line["cluster_id"]) == 22  # a base64 Uuid, as Kafka's


def test_delete_topics(steps):
    line = steps.ok("delete_topics")
    assert line["listed"] is False
    assert line["again"] == f"UnknownTopicOrPartitionException: Topic '{TOPIC}' does not exist."
