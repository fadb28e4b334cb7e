"""`ebb users`: SCRAM users (KIP-554's AlterUserScramCredentials and DescribeUserScramCredentials).

    ebb users set alice --mechanism SCRAM-SHA-512 --iterations 8192 < password.txt
    ebb users list
    ebb users delete alice --mechanism SCRAM-SHA-512

The password is read from stdin (its first line), never from the command line, and salted here: the
broker receives only the salted form and keeps only derived keys.
"""

from __future__ import annotations

import argparse
import sys

from ..scram_users import (
    DEFAULT_ITERATIONS,
    MECHANISMS,
    delete_scram_credential,
    describe_scram_users,
    set_scram_password,
)
from .common import EXIT_OK, BadInput, connect, run
from .output import print_json, print_table


def add_parser(sub, common: argparse.ArgumentParser, summary: str) -> None:
    users = sub.add_parser("users", help=summary,
                           description="SCRAM-SHA-256/512 credentials for SASL listeners (docs/security.md).")
    actions = users.add_subparsers(dest="action", required=True, metavar="ACTION")
    setting = actions.add_parser("set", parents=[common], help="create or replace a user's SCRAM credential "
                                                               "(password on stdin)")
    setting.add_argument("user")
    setting.add_argument("--mechanism", choices=sorted(MECHANISMS), default="SCRAM-SHA-512")
    setting.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                         help=f"PBKDF2 iterations, 4096-16384 (default {DEFAULT_ITERATIONS})")
    setting.set_defaults(func=lambda args: run(args, set_command))
    listing = actions.add_parser("list", parents=[common], help="users with their mechanisms and iterations")
    listing.add_argument("users", nargs="*", help="only these users (an unknown one is an error)")
    listing.set_defaults(func=lambda args: run(args, list_command))
    deleting = actions.add_parser("delete", parents=[common], help="remove a user's SCRAM credential")
    deleting.add_argument("user")
    deleting.add_argument("--mechanism", choices=sorted(MECHANISMS), default="SCRAM-SHA-512")
    deleting.set_defaults(func=lambda args: run(args, delete_command))


async def set_command(args: argparse.Namespace) -> int:
    password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise BadInput("ebb users set: no password on stdin")
    if not args.user:
        raise BadInput("ebb users set: the user name is empty")
    async with connect(args) as admin:
        await set_scram_password(admin, args.user, args.mechanism, password, iterations=args.iterations)
    print(f"{args.mechanism} credential of {args.user} set ({args.iterations} iterations)")
    return EXIT_OK


async def delete_command(args: argparse.Namespace) -> int:
    async with connect(args) as admin:
        await delete_scram_credential(admin, args.user, args.mechanism)
    print(f"{args.mechanism} credential of {args.user} deleted")
    return EXIT_OK


async def list_command(args: argparse.Namespace) -> int:
    async with connect(args) as admin:
        found = await describe_scram_users(admin, args.users or None)
    if args.output == "json":
        print_json({"users": [{"user": user, "credentials": [{"mechanism": m, "iterations": i}
                                                            for m, i in sorted(creds.items())]}
                              for user, creds in sorted(found.items())]})
    else:
        print_table(("USER", "MECHANISM", "ITERATIONS"),
                    [(user, m, i) for user, creds in sorted(found.items()) for m, i in sorted(creds.items())])
    return EXIT_OK
