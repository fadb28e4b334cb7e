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
    """Where reading starts or ends: "earliest", "latest", per-partition offsets (may hold sentinels), one
    timestamp for every partition, or a timestamp per partition (the *ByTimestamp options)."""

    kind: str  # "earliest" | "latest" | "specific" | "timestamp" | "by_timestamp"
    offsets: OffsetMap | None = None  # offsets ("specific") or timestamps ("by_timestamp")
    timestamp: int | None = None  # "timestamp": ms since the epoch
    option: str = ""  # the option it came from, for messages
    no_match_is_latest: bool = False  # a timestamp after every record: latest, or an error


@dataclass(frozen=True)
class TopicSelection:
    """Which topics a reader covers: one of subscribe, subscribePattern, assign."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()


# Options of Spark's Kafka connector (and Spark's own) that this source does not implement, with why.
_REFUSED = {
    "groupidprefix": "it names a new consumer group for every query run, which no retention setting can "
                     "follow; set kafka.group.id to a group this query alone uses",
    "path": "the ebb source takes no path: name topics with subscribe, subscribePattern or assign "
            "(or the topic option when writing)",
}
_SECURITY_PREFIXES = ("kafka.ssl.", "kafka.sasl.", "kafka.security.")


def check_known(options: Mapping[str, str], known: frozenset[str], what: str) -> None:
    """Refuse every option this source does not understand, naming it: an ignored option is a silent surprise."""
    for name in options:
        lower = name.lower()
        if lower in known:
            continue
        if lower in _REFUSED:
            raise EbbSourceError(f"option '{name}' is not supported: {_REFUSED[lower]}")
        if lower.startswith(_SECURITY_PREFIXES):
            raise EbbSourceError(f"option '{name}' is not supported: the security settings understood are "
                                 f"{', '.join(sorted(k for k in known if k.startswith(_SECURITY_PREFIXES)))}")
        kind = "Kafka client setting" if lower.startswith("kafka.") else "option"
        raise EbbSourceError(f"{kind} '{name}' is not supported by the ebb {what}; it understands "
                             f"{', '.join(sorted(known))}")


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


_DURATION_UNITS = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def duration_s(options: Mapping[str, str], name: str, default: str) -> float:
    """A duration as Spark writes them ("15m", "30s", "500ms", "1h"; a bare number is milliseconds)."""
    raw = options.get(name, default).strip().lower()
    match = re.fullmatch(r"(\d+)\s*([a-z]*)", raw)
    if not match or (match.group(2) and match.group(2) not in _DURATION_UNITS):
        raise EbbSourceError(f"option '{name}' must be a duration like 15m, 30s or 500ms, not {raw!r}")
    return int(match.group(1)) * _DURATION_UNITS[match.group(2) or "ms"]


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


def position_spec(options: Mapping[str, str], which: str, default: str) -> OffsetSpec:
    """The start ("starting") or end ("ending") of a read from the one option that gives it: <which>Offsets,
    <which>OffsetsByTimestamp or <which>Timestamp."""
    names = [f"{which}Offsets", f"{which}OffsetsByTimestamp", f"{which}Timestamp"]
    given = [name for name in names if options.get(name) is not None]
    if len(given) > 1:
        raise EbbSourceError(f"give only one of the options {', '.join(names)} (got {', '.join(given)})")
    if which == "starting":
        strategy = options.get("startingOffsetsByTimestampStrategy", "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise EbbSourceError(
                f"option 'startingOffsetsByTimestampStrategy' must be error or latest, not {strategy!r}")
        latest_if_none = strategy == "latest"
    else:
        latest_if_none = True  # the connector's rule for an end: no record that recent means the latest offset
    if not given or given[0] == names[0]:
        return offset_spec(options, names[0], default)
    raw = options[given[0]].strip()
    if given[0] == names[2]:
        if not raw.isdigit():
            raise EbbSourceError(f"option '{given[0]}' must be a time in milliseconds since the epoch, not {raw!r}")
        return OffsetSpec("timestamp", timestamp=int(raw), option=given[0], no_match_is_latest=latest_if_none)
    example = 'JSON like {"topic":{"0":1700000000000,"1":1700000000000}} (ms since the epoch)'
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        raise EbbSourceError(f"option '{given[0]}' must be {example}; {raw!r} is not JSON: {exc}") from None
    def valid(parts) -> bool:
        return isinstance(parts, dict) and bool(parts) and all(
            p.isdigit() and type(t) is int and t >= 0 for p, t in parts.items())
    if not isinstance(parsed, dict) or not parsed or not all(valid(parts) for parts in parsed.values()):
        raise EbbSourceError(f"option '{given[0]}' must be {example}, not {raw}")
    timestamps = {topic: {int(p): t for p, t in parts.items()} for topic, parts in parsed.items()}
    return OffsetSpec("by_timestamp", timestamps, option=given[0], no_match_is_latest=latest_if_none)


def offset_spec(options: Mapping[str, str], name: str, default: str) -> OffsetSpec:
    raw = options.get(name, default).strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower(), option=name)
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
    return OffsetSpec("specific", offsets, option=name)


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
