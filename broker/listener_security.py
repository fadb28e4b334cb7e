"""Which security each listener asks for, and the security settings Ebb does not honour yet.

Ebb serves PLAINTEXT only (issue #15 builds TLS, SASL and ACLs). An operator who asks for more must
not get an open broker that looks secured, so every request for security that Ebb cannot keep stops
start-up with a message naming the property: a listener whose security protocol is not PLAINTEXT, and
any setting that would change who may connect or what they may do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = ("PLAINTEXT",)
# Kafka's default listener.security.protocol.map: each protocol's name is a listener name for itself.
DEFAULT_PROTOCOL_MAP = {name: name for name in SECURITY_PROTOCOLS}

# Properties Ebb knows and takes when they ask for nothing it cannot do.
ACCEPTED = ("listener.security.protocol.map", "inter.broker.listener.name", "security.inter.broker.protocol")

# Settings that secure or restrict clients: refused whatever their value (except an explicit empty one).
_REFUSED_PREFIXES = ("sasl.", "ssl.", "listener.name.", "delegation.token.")
_REFUSED_NAMES = frozenset({
    "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found", "principal.builder.class",
    "connections.max.reauth.ms", "create.topic.policy.class.name", "alter.config.policy.class.name",
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "max.connection.creation.rate", "client.quota.callback.class", "security.providers",
})
_SEE = "Ebb serves PLAINTEXT only for now (docs/security.md)"


class SecuritySettingError(ValueError):
    """A security request Ebb cannot keep; the message names the property."""


def is_security_property(key: str) -> bool:
    return key in ACCEPTED or key in _REFUSED_NAMES or key.startswith(_REFUSED_PREFIXES)


def check(props: Mapping[str, str], listener_names: Iterable[str], advertised_names: Iterable[str]) -> None:
    """Raise SecuritySettingError for the first setting Ebb would not honour."""
    for key in sorted(props):
        if (key in _REFUSED_NAMES or key.startswith(_REFUSED_PREFIXES)) and props[key].strip():
            raise SecuritySettingError(f"{key}: not supported; {_SEE}. Remove it rather than run unsecured")
    protocols = protocol_map(props.get("listener.security.protocol.map", ""))
    names, advertised = list(listener_names), list(advertised_names)
    advertised_first = (advertised or names)[0]
    for key, listed in (("listeners", names), ("advertised.listeners", advertised)):
        for name in listed:
            protocol = protocols.get(name)
            if protocol is None:
                raise SecuritySettingError(
                    f"{key}: listener {name} has no security protocol in listener.security.protocol.map")
            if protocol not in SERVED_PROTOCOLS:
                raise SecuritySettingError(f"{key}: listener {name} uses {protocol}, which Ebb does not serve; {_SEE}")
    inter_broker = props.get("security.inter.broker.protocol", "").strip()
    if inter_broker and inter_broker not in SERVED_PROTOCOLS:
        raise SecuritySettingError(f"security.inter.broker.protocol: {inter_broker} is not served; {_SEE}")
    listener = props.get("inter.broker.listener.name", "").strip()
    if listener and listener != advertised_first:
        # Brokers reach each other at the one endpoint each registers: the first advertised listener.
        raise SecuritySettingError(
            f"inter.broker.listener.name: {listener} is not supported; brokers connect over the first "
            f"advertised listener ({advertised_first})")


def protocol_map(value: str) -> dict[str, str]:
    """`NAME:PROTOCOL,...`; empty means Kafka's default map."""
    if not value.strip():
        return dict(DEFAULT_PROTOCOL_MAP)
    result: dict[str, str] = {}
    for item in value.split(","):
        name, sep, protocol = item.strip().partition(":")
        name, protocol = name.strip(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise SecuritySettingError(
                f"listener.security.protocol.map: {item.strip()!r} is not NAME:PROTOCOL with PROTOCOL one of "
                f"{', '.join(SECURITY_PROTOCOLS)}")
        if name in result:
            raise SecuritySettingError(f"listener.security.protocol.map: listener {name} is mapped twice")
        result[name] = protocol
    return result
