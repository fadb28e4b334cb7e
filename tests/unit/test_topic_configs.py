"""The topic config table: consistent with LogConfig and docs/features.md, Kafka's checks and wording."""

import re
from dataclasses import fields
from pathlib import Path

import pytest

from broker.config import ConfigError, known_broker_properties, load_config, static_layers
from broker.log.config import LogConfig
from broker.topic_configs import (
    EFFECTIVE_CONFIGS,
    TOPIC_CONFIGS,
    InvalidConfig,
    TopicConfigDef,
    describe_topic_configs,
    validate_overrides,
)
from broker.topics import STORED_ONLY_CONFIGS
from protocol.enums import ConfigSource, ConfigType

FEATURES = Path(__file__).parents[2] / "docs" / "features.md"


def test_effective_configs_are_exactly_the_log_config_fields():
    assert EFFECTIVE_CONFIGS == {f.metadata["property"] for f in fields(LogConfig)}
    assert set(STORED_ONLY_CONFIGS) == set(TOPIC_CONFIGS) - EFFECTIVE_CONFIGS


def test_defaults_pass_their_own_checks_and_match_log_config():
    log_config = LogConfig()
    for name, definition in TOPIC_CONFIGS.items():
        if definition.default is not None:
            assert definition.canonical(definition.default) == definition.default, name
        if definition.effective:
            assert LogConfig.from_properties({name: definition.default} if definition.default else {}) == log_config


def test_docs_list_every_config_in_its_section():
    text = FEATURES.read_text()
    effective = text.split("### Effective")[1].split("### Stored only")[0]
    stored = text.split("### Stored only")[1].split("## Known gaps")[0]
    assert set(re.findall(r"^\| `([a-z0-9.]+)` \|", effective, re.M)) == EFFECTIVE_CONFIGS
    assert set(re.findall(r"^\| `([a-z0-9.]+)` \|", stored, re.M)) == set(STORED_ONLY_CONFIGS)


@pytest.mark.parametrize("overrides, message", [
    ({"no.such": "1"}, "Unknown topic config name: no.such"),
    ({"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ({"segment.bytes": "2147483648"}, "Not a number of type INT"),
    ({"segment.ms": "0"}, "Value must be at least 1"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "Value must be no less than 0 and no more than 1"),
    ({"compression.type": "brotli"}, "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ({"cleanup.policy": "delete,shred"}, "Invalid value shred"),
    ({"segment.bytes": "1048575"}, "Invalid value 1048575 for configuration segment.bytes: Value must be at least "
                                   "1048576"),
    ({"segment.index.bytes": "3"}, "Value must be at least 4"),
    ({"preallocate": "1"}, "Expected value to be either true or false"),
    ({"compression.gzip.level": "0"}, "Value must be -1 or between 1 and 9"),
    ({"leader.replication.throttled.replicas": "0:x"}, "partitionId:brokerId"),
    ({"follower.replication.throttled.replicas": "0:\u00b2"}, "partitionId:brokerId"),  # digits, but not ASCII
    ({"remote.storage.enable": "true"}, "Tiered storage is not available"),
])
def test_bad_values_are_refused_in_kafkas_words(overrides, message):
    with pytest.raises(InvalidConfig, match=re.escape(message)):
        validate_overrides(overrides)


# What Java's Integer.parseInt / Long.parseLong / Double.parseDouble make of a value Kafka has trimmed
# (String.trim: chars up to ' ' only); each verdict read from a JDK 17 run, X for refused.
JAVA_NUMBERS = [
    ("1_000", "X", "X"), ("+5", "5", "5.0"), ("-5", "-5", "-5.0"), ("007", "7", "7.0"),
    ("\u0661\u0660\u0660\u0660", "1000", "X"),  # Arabic-Indic digits: parseInt takes any script's, parseDouble not
    ("1\u00a0", "X", "X"), ("\x01 1\t", "1", "1.0"), ("+", "X", "X"), ("1.5", "X", "1.5"), ("1d", "X", "1.0"),
    ("1.5F", "X", "1.5"), (".5", "X", "0.5"), ("5.", "X", "5.0"), ("-1.5e3", "X", "-1500.0"), ("1e", "X", "X"),
    ("NaN", "X", "nan"), ("nan", "X", "X"), ("-Infinity", "X", "-inf"), ("inf", "X", "X"), ("NaNd", "X", "X"),
    ("0x1.8p1", "X", "3.0"), ("0X1P0", "X", "1.0"), ("0x1p3f", "X", "8.0"), ("0x1.8", "X", "X"), ("1_0.5", "X", "X"),
]


@pytest.mark.parametrize("text, as_long, as_double", JAVA_NUMBERS)
def test_numbers_are_read_as_javas_parsers_read_them(text, as_long, as_double):
    for kind, verdict in ((ConfigType.LONG, as_long), (ConfigType.INT, as_long), (ConfigType.DOUBLE, as_double)):
        definition = TopicConfigDef("x", kind, None, "")  # no range check
        if verdict == "X":
            with pytest.raises(InvalidConfig, match="Not a number of type"):
                definition.parse(text)
        else:
            assert repr(definition.parse(text)) == verdict


def test_small_segments_only_behind_the_escape_hatch():
    assert validate_overrides({"segment.bytes": "61"}, small_segments=True) == {"segment.bytes": "61"}
    with pytest.raises(InvalidConfig, match="Value must be at least 61"):
        validate_overrides({"segment.bytes": "60"}, small_segments=True)
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        load_config(None, ["log.segment.bytes=1000"])
    assert load_config(None, ["log.segment.bytes=1000", "ebb.testing.small.segments.enable=true"]
                       ).topic_defaults.segment_bytes == 1000


def test_kafka_4_3_accepts_these():
    """Found by the differential sweep (tests/differential/test_config_rules_against_kafka.py)."""
    accepted = {"cleanup.policy": "", "min.cleanable.dirty.ratio": "NaN", "segment.index.bytes": "4"}
    assert validate_overrides(accepted) == accepted


def test_values_are_stored_canonically():
    assert validate_overrides({"cleanup.policy": " delete , compact ", "preallocate": "TRUE",
                               "min.cleanable.dirty.ratio": "1", "retention.ms": " 100 ",
                               "leader.replication.throttled.replicas": "0:1, 1:1"}) == {
        "cleanup.policy": "delete,compact", "preallocate": "true", "min.cleanable.dirty.ratio": "1.0",
        "retention.ms": "100", "leader.replication.throttled.replicas": "0:1,1:1"}


def test_sources_and_synonyms():
    explicit = {"log.retention.hours": "2", "min.insync.replicas": "2"}
    config = load_config(None, [f"{k}={v}" for k, v in explicit.items()])
    overrides = {"segment.ms": "1000"}
    log_config = LogConfig.from_properties(overrides, base=config.topic_defaults)
    layers = static_layers(config.explicit_properties)
    entries = {e.name: e for e in describe_topic_configs(overrides, log_config, layers)}
    assert (entries["segment.ms"].value, entries["segment.ms"].source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    # Kafka 4.3 answers exactly this (tests/differential/test_broker_properties_against_kafka.py): the
    # value in force, but no synonym before log.retention.ms itself, so the source is DEFAULT_CONFIG.
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == ("7200000", ConfigSource.DEFAULT_CONFIG)
    assert entries["retention.ms"].synonyms == ()
    assert (entries["min.insync.replicas"].value, entries["min.insync.replicas"].source) == \
        ("2", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["retention.min.timestamp"].value is None
    assert known_broker_properties(config)["min.insync.replicas"] == "2"


@pytest.mark.parametrize("override, named", [
    ("min.insync.replicas=0", "min.insync.replicas"),
    ("compression.type=brotli", "compression.type"),
    ("log.retention.ms=-5", "log.retention.ms"),
    ("log.roll.hours=0", "log.roll.hours"),
    ("log.segment.bytes=10", "log.segment.bytes"),
])
def test_bad_broker_topic_defaults_stop_start_up(override, named):
    with pytest.raises(ConfigError, match=re.escape(named)):
        load_config(None, [override])
