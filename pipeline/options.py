"""Options of the Ebb data source, read the way Spark's Kafka connector reads its own.

Everything here is pure: it parses the string options Spark hands over (keys case-insensitive,
values always str) and raises EbbSourceError with a message naming the option and the problem.
No sockets, so a reader or writer can check its options where Spark creates it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from client import BootstrapError, TopicPartition, parse_bootstrap

EARLIEST = -2  # the offset sentinels of the Kafka connector's JSON offsets
LATEST = -1

OffsetMap = dict[str, dict[int, int]]  # {topic: {partition: offset}}


class EbbSourceError(ValueError):
    """Bad options or a state the source refuses to read or write through."""


@dataclass(frozen=True)
class OffsetSpec:
    """startingOffsets/endingOffsets: "earliest", "latest", or per-partition offsets (may hold sentinels)."""

    kind: str  # "earliest" | "latest" | "specific"
    offsets: OffsetMap | None = None


@dataclass(frozen=True)
class TopicSelection:
    """Which topics a reader covers: one of subscribe, subscribePattern, assign."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()


def bootstrap_servers(options: Mapping[str, str]) -> str:
    servers = options.get("kafka.bootstrap.servers") or options.get("bootstrap.servers")
    if not servers or not servers.strip():
        raise EbbSourceError("option 'kafka.bootstrap.servers' is required (host:port[,host:port])")
    try:
        parse_bootstrap(servers)
    except BootstrapError as exc:
        raise EbbSourceError(f"option 'kafka.bootstrap.servers': {exc}") from None
    return servers


def flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise EbbSourceError(f"option '{name}' must be true or false, not {raw!r}")


def positive_int(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise EbbSourceError(f"option '{name}' must be a positive integer, not {raw!r}")
    return value


def topic_selection(options: Mapping[str, str]) -> TopicSelection:
    given = [name for name in ("subscribe", "subscribePattern", "assign") if options.get(name) is not None]
    if len(given) != 1:
        what = "none" if not given else ", ".join(given)
        raise EbbSourceError(f"give exactly one of the options subscribe, subscribePattern, assign (got {what})")
    raw = options[given[0]]
    if given[0] == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if not topics:
            raise EbbSourceError("option 'subscribe' names no topic: give a comma-separated list of topics")
        return TopicSelection(topics=topics)
    if given[0] == "subscribePattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise EbbSourceError(f"option 'subscribePattern' is not a valid regular expression: {exc}") from None
        return TopicSelection(pattern=raw)
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise EbbSourceError(f"option 'assign' is not JSON like {{\"topic\":[0,1]}}: {exc}") from None
    if not isinstance(parsed, dict) or not parsed or not all(
            isinstance(ps, list) and all(type(p) is int and p >= 0 for p in ps) for ps in parsed.values()):
        raise EbbSourceError(f"option 'assign' must be JSON like {{\"topic\":[0,1]}}, not {raw}")
    return TopicSelection(assigned=tuple(sorted({(t, p) for t, ps in parsed.items() for p in ps})))


def offset_spec(options: Mapping[str, str], name: str, default: str) -> OffsetSpec:
    raw = options.get(name, default).strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower())
    example = '"earliest", "latest" or JSON like {"topic":{"0":23,"1":-2}} (-2 earliest, -1 latest)'
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise EbbSourceError(f"option '{name}' must be {example}; {raw!r} is not JSON: {exc}") from None
    offsets: OffsetMap = {}
    if not isinstance(parsed, dict) or not parsed:
        raise EbbSourceError(f"option '{name}' must be {example}, not {raw}")
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict) or not partitions:
            raise EbbSourceError(f"option '{name}': topic {topic!r} needs an object of partition: offset, "
                                 f"not {json.dumps(partitions)}")
        for partition, offset in partitions.items():
            if not partition.isdigit() or type(offset) is not int or offset < EARLIEST:
                raise EbbSourceError(f"option '{name}': {topic!r} partition {partition!r} offset {offset!r}: "
                                     "partitions are numbers >= 0, offsets are >= 0, -1 (latest) or -2 (earliest)")
            offsets.setdefault(topic, {})[int(partition)] = offset
    return OffsetSpec("specific", offsets)


def to_json_offsets(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """{(topic, partition): offset} as the canonical JSON-able dict: topics sorted, partitions by number.

    Spark compares streaming offsets as JSON text, so the same offsets must always come out in the same
    order, or every trigger looks like new data.
    """
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return out


def from_json_offsets(offsets: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}
