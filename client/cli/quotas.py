"""`ebb quotas set|list|delete`: client quotas of users, client ids, their pairs and defaults, and ips
(KIP-546), in kafka-configs.sh's terms.

    ebb quotas set --user alice --add producer_byte_rate=1048576,consumer_byte_rate=2097152
    ebb quotas set --client-default --add producer_byte_rate=524288
    ebb quotas set --user alice --client billing --add consumer_byte_rate=65536
    ebb quotas list [--user alice | --user-default] [--client C | --client-default] [--ip A]
    ebb quotas delete --user alice --key producer_byte_rate
"""

from __future__ import annotations

import argparse

from ..quotas import Entity, alter_client_quotas, describe_client_quotas
from .common import EXIT_OK, BadInput, connect, parse_key_values, run
from .output import print_json, print_table

DEFAULT_NAME = "<default>"


def add_parser(sub, common: argparse.ArgumentParser, summary: str) -> None:
    quotas = sub.add_parser("quotas", help=summary, description="Set, list and delete client quotas.")
    actions = quotas.add_subparsers(dest="action", required=True, metavar="ACTION")
    entity = argparse.ArgumentParser(add_help=False)
    entity.add_argument("--user", help="a user (the principal's name)")
    entity.add_argument("--user-default", action="store_true", help="the default of users")
    entity.add_argument("--client", help="a client id")
    entity.add_argument("--client-default", action="store_true", help="the default of client ids")
    entity.add_argument("--ip", help="a client address (connection_creation_rate)")
    entity.add_argument("--ip-default", action="store_true", help="the default of addresses")
    setting = actions.add_parser("set", parents=[common, entity], help="set quotas of one entity")
    setting.add_argument("--add", required=True, help="key=value,... e.g. producer_byte_rate=1048576")
    setting.set_defaults(func=lambda args: run(args, set_command))
    deleting = actions.add_parser("delete", parents=[common, entity], help="remove quotas of one entity")
    deleting.add_argument("--key", action="append", required=True, help="a quota to remove (repeatable)")
    deleting.set_defaults(func=lambda args: run(args, delete_command))
    listing = actions.add_parser("list", parents=[common, entity],
                                 help="the quotas of the entities that have every type named (all without one)")
    listing.set_defaults(func=lambda args: run(args, list_command))


def _entity(args: argparse.Namespace) -> Entity:
    entity: Entity = {}
    for kind, name, default in (("user", args.user, args.user_default), ("client-id", args.client,
                                args.client_default), ("ip", args.ip, args.ip_default)):
        if name is not None and default:
            raise BadInput(f"ebb quotas: name a {kind} or its default, not both")
        if name is not None or default:
            entity[kind] = name
    return entity


async def set_command(args: argparse.Namespace) -> int:
    entity = _entity(args)
    if not entity:
        raise BadInput("ebb quotas set: name a user, a client, both, or an ip (or their defaults)")
    changes: dict[str, float | None] = {}
    for key, text in parse_key_values(args.add, "--add").items():
        try:
            changes[key] = float(text)
        except ValueError:
            raise BadInput(f"ebb quotas set: {key}={text} is not a number") from None
    async with connect(args) as admin:
        await alter_client_quotas(admin, entity, changes)
    print(f"quotas of {_text(entity)} set")
    return EXIT_OK


async def delete_command(args: argparse.Namespace) -> int:
    entity = _entity(args)
    if not entity:
        raise BadInput("ebb quotas delete: name a user, a client, both, or an ip (or their defaults)")
    async with connect(args) as admin:
        await alter_client_quotas(admin, entity, dict.fromkeys(args.key))
    print(f"quotas of {_text(entity)} deleted: {', '.join(args.key)}")
    return EXIT_OK


async def list_command(args: argparse.Namespace) -> int:
    async with connect(args) as admin:
        found = await describe_client_quotas(admin, _entity(args))
    if args.output == "json":
        print_json({"quotas": [{"entity": entity, "quotas": values} for entity, values in found]})
    else:
        rows = [(_text(entity), key, _number(value))
                for entity, values in found for key, value in sorted(values.items())]
        print_table(("ENTITY", "QUOTA", "VALUE"), rows)
    return EXIT_OK


def _text(entity: Entity) -> str:
    return ", ".join(f"{kind} {DEFAULT_NAME if name is None else name}" for kind, name in entity.items())


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)
