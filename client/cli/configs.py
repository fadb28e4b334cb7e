"""`ebb configs describe|alter` for a topic, a broker or a group, in kafka-configs.sh's terms.

    ebb configs describe --topic T [--all] [--key K ...]
    ebb configs alter --topic T --add-config retention.ms=3600000,cleanup.policy=[compact,delete] \\
        --delete-config segment.bytes
    ebb configs alter --broker-defaults --add-config log.retention.ms=3600000   (every broker, at once)
    ebb configs alter --group G --add-config consumer.session.timeout.ms=50000   (KIP-848's group configs)

`describe` shows the values set on the resource (its overrides) unless --all. `alter` changes only
the named keys (IncrementalAlterConfigs, or AlterConfigs with the current overrides kept).
"""

from __future__ import annotations

import argparse

from protocol.enums import ConfigResourceType, ConfigSource

from ..admin import ConfigEntry
from ..errors import KafkaError
from .common import (
    EXIT_OK,
    BadInput,
    connect,
    existing_topics,
    parse_key_values,
    run,
    split_config_list,
)
from .output import print_json, print_table

_OVERRIDES = {ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG,
              ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
              ConfigSource.GROUP_CONFIG}


def add_parser(sub, common: argparse.ArgumentParser, summary: str) -> None:
    configs = sub.add_parser("configs", help=summary,
                             description="Describe and alter topic, broker and group configs.")
    actions = configs.add_subparsers(dest="action", required=True, metavar="ACTION")

    describe = actions.add_parser("describe", parents=[common], help="show configs (overrides unless --all)")
    _resource_options(describe)
    describe.add_argument("--all", action="store_true", help="every config, defaults included")
    describe.add_argument("--key", action="append", metavar="NAME", help="only this config (repeatable)")
    describe.set_defaults(func=lambda args: run(args, describe_command))

    alter = actions.add_parser("alter", parents=[common], help="set or remove config values")
    _resource_options(alter)
    alter.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V]",
                       help="set values; a value with commas goes in brackets: k=[a,b]")
    alter.add_argument("--delete-config", action="append", default=[], metavar="K[,K]",
                       help="remove overrides, back to the default")
    alter.add_argument("--validate-only", action="store_true", help="check with the broker, change nothing")
    alter.set_defaults(func=lambda args: run(args, alter_command))


def _resource_options(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="a topic's configs")
    which.add_argument("--broker", metavar="ID", help="a broker's configs, by broker id")
    which.add_argument("--broker-defaults", action="store_true",
                       help="the cluster-wide dynamic broker configs (kafka-configs' --entity-default)")
    which.add_argument("--group", help="a group's configs (stored and shown; Ebb's classic groups use none)")


async def _resource(admin, args: argparse.Namespace) -> tuple[ConfigResourceType, str]:
    if args.topic is not None:
        await existing_topics(admin, [args.topic])
        return ConfigResourceType.TOPIC, args.topic
    if args.group is not None:
        if not args.group:
            raise BadInput("--group: a group id is not empty")
        return ConfigResourceType.GROUP, args.group
    if args.broker_defaults:
        return ConfigResourceType.BROKER, ""
    if not args.broker.isdigit():
        raise BadInput(f"--broker {args.broker!r}: a broker id is a number")
    if int(args.broker) not in admin.cluster.metadata.brokers:
        known = ", ".join(map(str, sorted(admin.cluster.metadata.brokers))) or "none"
        raise BadInput(f"broker {args.broker} is not in the cluster (brokers: {known})")
    return ConfigResourceType.BROKER, args.broker


def _source(entry: ConfigEntry) -> str:
    return entry.source.name


async def describe_command(args: argparse.Namespace) -> int:
    async with connect(args) as admin:
        resource_type, name = await _resource(admin, args)
        entries = await admin.describe_configs(name, args.key, resource_type=resource_type)
    if args.key:
        missing = [key for key in args.key if key not in entries]
        if missing:
            raise BadInput(f"no config named {missing[0]!r} for {resource_type.name.lower()} {name!r}")
    shown = [e for _, e in sorted(entries.items()) if args.all or args.key or e.source in _OVERRIDES]
    if args.output == "json":
        print_json({"resource_type": resource_type.name.lower(), "name": name, "configs": [
            {"name": e.name, "value": e.value, "source": _source(e), "read_only": e.read_only,
             "sensitive": e.is_sensitive} for e in shown]})
    else:
        print_table(("NAME", "VALUE", "SOURCE", "READ-ONLY", "SENSITIVE"), [
            (e.name, "<sensitive>" if e.is_sensitive and e.value is None else e.value, _source(e),
             "yes" if e.read_only else "no", "yes" if e.is_sensitive else "no") for e in shown])
    return EXIT_OK


async def alter_command(args: argparse.Namespace) -> int:
    updates: dict[str, str] = {}
    for item in args.add_config:
        for key, value in parse_key_values(item, "--add-config").items():
            if key in updates:
                raise BadInput(f"--add-config: {key} is given twice")
            updates[key] = value
    deletes: list[str] = []
    for item in args.delete_config:
        deletes.extend(split_config_list(item, "--delete-config"))
    if not updates and not deletes:
        raise BadInput("nothing to change: give --add-config and/or --delete-config")
    both = sorted(set(updates) & set(deletes))
    if both:
        raise BadInput(f"{both[0]} is both added and deleted")
    async with connect(args) as admin:
        resource_type, name = await _resource(admin, args)
        try:
            await admin.alter_configs(name, updates, deletes, resource_type=resource_type,
                                      validate_only=args.validate_only)
        except KafkaError as exc:
            if args.output == "json":
                print_json({"resource_type": resource_type.name.lower(), "name": name, "error": exc.message})
            raise
    if args.output == "json":
        print_json({"resource_type": resource_type.name.lower(), "name": name, "set": updates, "deleted": deletes,
                    "validate_only": args.validate_only, "error": None})
    else:
        verb = "would alter" if args.validate_only else "altered"
        changes = [f"set {k}={v}" for k, v in updates.items()] + [f"deleted {k}" for k in deletes]
        print(f"{verb} {resource_type.name.lower()} {name!r}: {'; '.join(changes)}")
    return EXIT_OK
