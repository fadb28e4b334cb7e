"""Broker configuration: Kafka names and defaults, and start-up errors that name the property."""

import subprocess
import sys

import pytest

from broker.config import ConfigError, load_config, parse_properties


def test_defaults_are_kafkas():
    config = load_config()
    assert str(config.listeners[0]) == "PLAINTEXT://127.0.0.1:9092"
    assert config.advertised_listener == config.listeners[0]
    assert config.num_partitions == 1 and config.auto_create_topics_enable
    assert config.message_max_bytes == 1048588 and config.socket_request_max_bytes == 104857600
    assert config.topic_defaults.retention_ms == 7 * 24 * 3600 * 1000
    assert config.topic_defaults.cleanup_policy == ("delete",)


def test_properties_file_and_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# comment\nlog.retention.hours=2\nnum.partitions : 3\n! also a comment\n")
    config = load_config(path, ["num.partitions=5", "log.retention.min.timestamp=1700000000000"])
    assert config.num_partitions == 5
    assert config.topic_defaults.retention_ms == 2 * 3600 * 1000
    assert config.topic_defaults.retention_min_timestamp == 1700000000000


@pytest.mark.parametrize("override, named", [
    ("node.id=abc", "node.id"),
    ("listeners=localhost:9092", "listeners"),
    ("auto.create.topics.enable=maybe", "auto.create.topics.enable"),
    ("num.partitions=0", "num.partitions"),
    ("log.dirs=a,b", "log.dirs"),
    ("log.cleanup.policy=shred", "cleanup.policy"),
    ("advertised.listeners=PLAINTEXT://0.0.0.0:9092", "advertised.listeners"),
    ("novalue", "novalue"),
])
def test_bad_settings_name_the_property(override, named):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert named in str(info.value)


def test_unparseable_properties_line():
    with pytest.raises(ConfigError, match="line 2"):
        parse_properties("a=1\n=oops\n")


def test_broker_refuses_to_start_with_a_bad_setting(tmp_path):
    out = subprocess.run([sys.executable, "-m", "broker", "--override", "message.max.bytes=lots",
                          "--override", f"log.dirs={tmp_path}"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "message.max.bytes" in out.stderr and "not an integer" in out.stderr
