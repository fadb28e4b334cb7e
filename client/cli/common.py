"""What every `ebb` admin command shares: connection options, input checks, and exit codes.

Exit codes: 0 success; 1 the cluster refused or failed part of the work (per-partition or per-topic
errors, timeouts); 2 bad input, found before anything was changed (arguments, files, unknown topics or
partitions, an unreachable bootstrap server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections.abc import Callable, Coroutine, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from protocol.errors import ErrorCode

from ..admin import Admin
from ..errors import BootstrapError, BrokerUnreachableError, KafkaClientError
from ..java_properties import PropertiesError, parse_properties
from ..types import TopicInfo, TopicPartition
from .output import configure_logging
from .properties import client_settings

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """Input we refuse before touching the cluster (exit code 2). The message names the problem."""


class Failed(Exception):
    """The cluster could not do what was asked (exit code 1)."""


def common_options() -> argparse.ArgumentParser:
    """Options every admin command takes (used as an argparse parent)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
                        help="brokers to bootstrap from (or bootstrap.servers in --command-config)")
    common.add_argument("--command-config", metavar="FILE",
                        help="Java properties file of client settings: client.id, request.timeout.ms, "
                             "socket.connection.setup.timeout.ms, retry.backoff.ms, retry.backoff.max.ms, and "
                             "security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*, ssl.keystore.* "
                             "as Kafka's tools read them (PEM stores; docs/security.md)")
    common.add_argument("--output", choices=("table", "json"), default="table", help="result format (default: table)")
    common.add_argument("-v", "--verbose", action="count", default=0, help="client logs on stderr (-vv: debug)")
    return common


def run(args: argparse.Namespace, command: Callable[[argparse.Namespace], Coroutine[Any, Any, int]]) -> int:
    """Run an async command and turn what it raises into one line on stderr and an exit code."""
    configure_logging(args.verbose)
    prog = f"ebb {args.command}" + (f" {args.action}" if getattr(args, "action", None) else "")
    try:
        return asyncio.run(command(args))
    except BadInput as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (Failed, KafkaClientError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        for note in getattr(exc, "__notes__", ()):
            print(f"{prog}: {note}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (`ebb ... | head`): stop quietly, and keep Python's flush at exit
        # from raising again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED


def load_command_config(path: str | None) -> tuple[dict[str, object], str | None]:
    """Cluster options and bootstrap.servers from --command-config; warnings go to stderr."""
    if path is None:
        return {}, None
    try:
        text = Path(path).read_text(encoding="latin-1")  # Java's Properties.load(InputStream) reads ISO-8859-1
    except OSError as exc:
        raise BadInput(f"--command-config {path}: cannot read: {exc.strerror}") from None
    try:
        settings = client_settings(parse_properties(text))
    except PropertiesError as exc:
        raise BadInput(f"--command-config {path}: {exc}") from None
    for warning in settings.warnings:
        print(f"ebb: --command-config {path}: {warning}", file=sys.stderr)
    return settings.cluster_options, settings.bootstrap_servers


@asynccontextmanager
async def connect(args: argparse.Namespace):
    """An Admin connected to the bootstrap servers; an unreachable or malformed bootstrap is bad input."""
    options, from_file = load_command_config(args.command_config)
    bootstrap = args.bootstrap_server or from_file
    if not bootstrap:
        raise BadInput("--bootstrap-server is required (or bootstrap.servers in --command-config)")
    try:
        admin = Admin(bootstrap, **options)
    except BootstrapError as exc:
        raise BadInput(f"--bootstrap-server: {exc.message}") from None
    try:
        await admin.start()
    except BrokerUnreachableError as exc:
        reason = exc.message.removeprefix("no bootstrap server reachable: ")
        raise BadInput(f"cannot reach the bootstrap server {bootstrap}: {reason}") from None
    try:
        yield admin
    finally:
        await admin.close()


async def existing_topics(admin: Admin, names: Iterable[str]) -> dict[str, TopicInfo]:
    """Metadata for topics that must exist; any unknown (or unusable) one is bad input."""
    wanted = sorted(set(names))
    described = await admin.describe_topics(wanted)
    missing = [name for name in wanted if described[name].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    if len(missing) == 1:
        raise BadInput(f"topic {missing[0]!r} does not exist")
    if missing:
        raise BadInput(f"topics {', '.join(map(repr, missing))} do not exist")
    for name in wanted:
        if described[name].error:
            raise BadInput(f"topic {name!r} cannot be used: {described[name].error.name}")
    return described


def check_partitions(topics: dict[str, TopicInfo], partitions: Iterable[tuple[str, int]]) -> None:
    for topic, partition in partitions:
        info = topics[topic]
        if partition not in info.partitions:
            count = len(info.partitions)
            raise BadInput(f"topic {topic!r} has no partition {partition} (it has {count}: 0-{count - 1})")


async def resolve_partitions(admin: Admin, topic: str | None, partition: int | None) -> list[TopicPartition]:
    """`--topic [--partition]` as a validated list of partitions; no topic means every non-internal topic."""
    if partition is not None and partition < 0:
        raise BadInput(f"--partition {partition} is negative")
    if topic is None:
        if partition is not None:
            raise BadInput("--partition needs --topic")
        names = await admin.list_topics()
        topics = await existing_topics(admin, names) if names else {}
    else:
        topics = await existing_topics(admin, [topic])
    if partition is not None:
        assert topic is not None  # --partition without --topic was refused above
        check_partitions(topics, [(topic, partition)])
        return [TopicPartition(topic, partition)]
    return [TopicPartition(name, p) for name, info in sorted(topics.items()) for p in sorted(info.partitions)]


_DIGITS = re.compile(r"[+-]?\d+")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_timestamp(text: str, option: str) -> int:
    """Milliseconds since the epoch, or ISO 8601 with a time zone ("2024-05-01T12:00:00Z", "...+02:00")."""
    value = text.strip()
    if _DIGITS.fullmatch(value):
        ms = int(value)
        if ms < 0:
            raise BadInput(f"{option} {text}: a timestamp must be >= 0 ms since the epoch")
        return ms
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BadInput(f"{option} {text!r}: not a timestamp; use ISO 8601 with a time zone "
                       "(2024-05-01T12:00:00Z) or milliseconds since the epoch") from None
    if moment.tzinfo is None:
        raise BadInput(f"{option} {text!r}: the time has no time zone; add one (Z or +HH:MM) so it is not "
                       "read in the wrong zone")
    ms = (moment - _EPOCH) // timedelta(milliseconds=1)  # exact; sub-millisecond digits round down
    if ms < 0:
        raise BadInput(f"{option} {text}: before the epoch")
    return ms


def parse_key_values(text: str, option: str) -> dict[str, str]:
    """Kafka's `k1=v1,k2=v2` list; a value holding commas goes in brackets: `k=[a,b]` (sets "a,b")."""
    out: dict[str, str] = {}
    for item in split_config_list(text, option):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInput(f"{option}: {item!r} is not key=value")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        if key in out:
            raise BadInput(f"{option}: {key} is given twice")
        out[key] = value
    return out


def split_config_list(text: str, option: str) -> list[str]:
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise BadInput(f"{option}: unbalanced ']' in {text!r}")
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise BadInput(f"{option}: unbalanced '[' in {text!r}")
    items.append("".join(current))
    items = [item.strip() for item in items]
    if any(not item for item in items):
        raise BadInput(f"{option}: empty entry in {text!r}")
    return items


def error_text(code, message: str | None) -> str | None:
    """A per-item error for a table cell or JSON: None when there is none."""
    if not code:
        return None
    if message and message != code.name and not message.startswith(code.name):
        return f"{code.name}: {message}"
    return message or code.name


def read_partition_entries(path: str, flag: str) -> list[dict]:
    """The "partitions" list of a Kafka tool's JSON file (kafka-reassign-partitions',
    kafka-leader-election's): a missing, unreadable or malformed file is bad input."""
    try:
        document = json.loads(Path(path).read_text())
    except OSError as exc:
        raise BadInput(f"{flag} {path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise BadInput(f"{flag} {path}: not JSON: {exc}") from None
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise BadInput(f"{flag} {path}: no \"partitions\" list of objects")
    return entries
