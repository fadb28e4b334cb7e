"""`ebb acls`: ACLs with kafka-acls' main flags (CreateAcls, DescribeAcls, DeleteAcls).

    ebb acls --add --allow-principal User:alice --operation Delete --topic orders
    ebb acls --add --deny-principal User:bob --operation All --topic orders- --resource-pattern-type prefixed
    ebb acls --list [--topic orders]
    ebb acls --remove --allow-principal User:alice --operation Delete --topic orders

--add needs a principal, an operation and a resource; --remove and --list take what they are given as a
filter (anything left out matches anything).
"""

from __future__ import annotations

import argparse

from ..acls import (
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSIONS,
    RESOURCE_TYPES,
    AclSpec,
    create_acls,
    delete_acls,
    describe_acls,
    name_of,
)
from .common import EXIT_OK, BadInput, connect, run
from .output import print_json, print_table

CLUSTER_NAME = "kafka-cluster"


def add_parser(sub, common: argparse.ArgumentParser, summary: str) -> None:
    p = sub.add_parser("acls", parents=[common], help=summary,
                       description="ACLs for brokers with authorizer.class.name set (docs/security.md).")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    action.add_argument("--list", action="store_true")
    p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
    p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    p.add_argument("--operation", action="append", default=[], metavar="OPERATION",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                        "AlterConfigs, IdempotentWrite, All")
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", default=None, choices=sorted(PATTERN_TYPES),
                   help="literal (default for --add), prefixed; for --list/--remove also any and match")
    p.set_defaults(func=lambda args: run(args, acls_command))


def _code(table: dict[str, int], text: str, flag: str) -> int:
    code = table.get(text.replace("-", "").replace("_", "").lower())
    if code is None:
        raise BadInput(f"{flag} {text!r}: not one of {', '.join(sorted(table))}")
    return code


def _resources(args) -> list[tuple[int, str | None]]:
    found = [(RESOURCE_TYPES["topic"], t) for t in args.topic] + [(RESOURCE_TYPES["group"], g) for g in args.group]
    if args.cluster:
        found.append((RESOURCE_TYPES["cluster"], CLUSTER_NAME))
    return found


def _specs(args, *, for_add: bool) -> list[AclSpec]:
    resources = _resources(args)
    operations = [_code(OPERATIONS, op, "--operation") for op in args.operation]
    pattern = _code(PATTERN_TYPES, args.resource_pattern_type or ("literal" if for_add else "any"),
                    "--resource-pattern-type")
    grants = [(p, PERMISSIONS["allow"], args.allow_host) for p in args.allow_principal] + \
             [(p, PERMISSIONS["deny"], args.deny_host) for p in args.deny_principal]
    if for_add:
        if not resources or not operations or not grants:
            raise BadInput("--add needs a resource (--topic, --group or --cluster), an --operation and an "
                           "--allow-principal or --deny-principal")
        if pattern not in (PATTERN_TYPES["literal"], PATTERN_TYPES["prefixed"]):
            raise BadInput("--add takes --resource-pattern-type literal or prefixed")
    specs = []
    for kind, name in resources or [(RESOURCE_TYPES["any"], None)]:
        for principal, permission, hosts in grants or [(None, PERMISSIONS["any"], [])]:
            for host in hosts or (["*"] if for_add else [None]):
                for operation in operations or [OPERATIONS["any"]]:
                    specs.append(AclSpec(kind, name, pattern, principal, host, operation, permission))
    return specs


async def acls_command(args: argparse.Namespace) -> int:
    async with connect(args) as admin:
        if args.add:
            await create_acls(admin, _specs(args, for_add=True))
            found = await describe_acls(admin, AclSpec(RESOURCE_TYPES["any"], None, PATTERN_TYPES["any"], None,
                                                       None, OPERATIONS["any"], PERMISSIONS["any"]))
        elif args.remove:
            found = await delete_acls(admin, _specs(args, for_add=False))
        else:
            found = []
            for spec in _specs(args, for_add=False):
                found += await describe_acls(admin, spec)
    rows = [(name_of(RESOURCE_TYPES, a.resource_type), a.name, name_of(PATTERN_TYPES, a.pattern), a.principal,
             a.host, name_of(OPERATIONS, a.operation), name_of(PERMISSIONS, a.permission)) for a in found]
    if args.output == "json":
        print_json({"acls": [dict(zip(("resource_type", "name", "pattern", "principal", "host", "operation",
                                       "permission"), row, strict=True)) for row in rows]})
    else:
        print_table(("RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"), rows)
    return EXIT_OK
