"""The `ebb` admin commands on the client library: delete-records, topics, configs, offsets, users, acls.

broker/cli.py owns the `ebb` parser and calls `register` to add these subcommands.
"""

from __future__ import annotations

from . import acls, configs, delete_records, offsets, topics, users
from .common import common_options


def register(subparsers) -> None:
    """Add the admin subcommands to `ebb`'s subparsers; each sets `func(args) -> exit code`."""
    common = common_options()
    delete_records.add_parser(subparsers, common)
    topics.add_parser(subparsers, common)
    configs.add_parser(subparsers, common)
    offsets.add_parser(subparsers, common)
    users.add_parser(subparsers, common)
    acls.add_parser(subparsers, common)
