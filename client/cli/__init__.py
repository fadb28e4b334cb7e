"""The `ebb` admin commands on the client library: delete-records, topics, configs, offsets, users, quotas,
acls, reassign, elect-leaders.

broker/cli.py owns the `ebb` parser and calls `register` to add these subcommands.
"""

from __future__ import annotations

import argparse
from importlib import import_module

# Each command: its module here and its line in `ebb --help`. Only the module of the command being run
# is imported: they pull in the client library (asyncio, the codec, structlog), which `ebb --help` and
# a mistyped command need not wait for.
COMMANDS = {
    "delete-records": ("delete_records", "delete records below an offset or a time (DeleteRecords)"),
    "topics": ("topics", "create, list, describe and delete topics"),
    "configs": ("configs", "describe and alter topic and broker configs"),
    "offsets": ("offsets", "earliest, latest or by-time offsets per partition"),
    "users": ("users", "create, list and delete SCRAM users"),
    "quotas": ("quotas", "set, list and delete client quotas (users, client ids, ips)"),
    "acls": ("acls", "add, list and remove ACLs (kafka-acls' flags)"),
    "reassign": ("reassign", "move partitions between brokers (kafka-reassign-partitions' JSON file)"),
    "elect-leaders": ("elect_leaders", "elect preferred or unclean leaders (kafka-leader-election's options)"),
}


def register(subparsers: argparse._SubParsersAction, chosen: str | None) -> None:
    """Add the admin subcommands to `ebb`'s subparsers. The `chosen` one gets its whole parser, whose
    `func(args)` returns the exit code; the others are listed by name and summary only."""
    for name, (module_name, summary) in COMMANDS.items():
        if name == chosen:
            from .common import common_options

            import_module(f".{module_name}", __name__).add_parser(subparsers, common_options(), summary)
        else:
            subparsers.add_parser(name, help=summary)
