"""Whether the broker authorizes requests, and as whom: authorizer.class.name, super.users and
allow.everyone.if.no.acl.found, checked at start-up (ConfigError naming the property)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker.property_table import ConfigError


@dataclass(frozen=True)
class AuthorizerConfig:
    super_users: frozenset[str]
    allow_everyone_if_no_acl_found: bool


# The class names a Kafka user writes (ZooKeeper mode, KRaft); either selects Ebb's authorizer.
AUTHORIZER_CLASSES = ("kafka.security.authorizer.AclAuthorizer",
                      "org.apache.kafka.metadata.authorizer.StandardAuthorizer")


def authorizer_config(props: Mapping[str, str]) -> AuthorizerConfig | None:
    name = props.get("authorizer.class.name", "").strip()
    if not name:
        for key in ("super.users", "allow.everyone.if.no.acl.found"):
            if props.get(key, "").strip():
                raise ConfigError(f"{key}: has no effect without authorizer.class.name; set both or neither")
        return None
    if name not in AUTHORIZER_CLASSES:
        raise ConfigError(f"authorizer.class.name: {name} is not served; use {' or '.join(AUTHORIZER_CLASSES)}")
    users = frozenset(u.strip() for u in props.get("super.users", "").split(";") if u.strip())
    for user in users:
        if ":" not in user:
            raise ConfigError(f"super.users: {user!r} is not a principal such as User:admin")
    allow = props.get("allow.everyone.if.no.acl.found", "false").strip().lower()
    if allow not in ("true", "false"):
        raise ConfigError(f"allow.everyone.if.no.acl.found: {allow!r} is not true or false")
    return AuthorizerConfig(users, allow == "true")
