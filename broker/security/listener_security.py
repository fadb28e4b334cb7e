"""Which security each listener asks for, and the security settings Ebb does not honour yet.

Ebb serves PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners (TLS with PEM keys, SASL PLAIN and
SCRAM: broker/security/). An operator
who asks for more must not get an open broker that looks secured, so every request for security that
Ebb cannot keep stops start-up with a message naming the property: a listener whose security protocol
Ebb does not serve, and any setting that would change who may connect or what they may do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.security.tls import SERVED_SSL_KEYS

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
# Kafka's default listener.security.protocol.map: each protocol's name is a listener name for itself.
DEFAULT_PROTOCOL_MAP = {name: name for name in SECURITY_PROTOCOLS}

# Properties Ebb knows and takes when they ask for nothing it cannot do.
ACCEPTED = ("listener.security.protocol.map", "inter.broker.listener.name", "security.inter.broker.protocol",
            "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found", "connections.max.reauth.ms")

# Settings that secure or restrict clients: refused whatever their value (except an explicit empty one).
_REFUSED_PREFIXES = ("sasl.", "ssl.", "listener.name.", "delegation.token.")
_REFUSED_NAMES = frozenset({
    "principal.builder.class",
    "create.topic.policy.class.name", "alter.config.policy.class.name",
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "max.connection.creation.rate", "client.quota.callback.class", "security.providers",
})
_SEE = "see docs/security.md for what Ebb serves"


class SecuritySettingError(ValueError):
    """A security request Ebb cannot keep; the message names the property."""


def is_security_property(key: str) -> bool:
    return key in ACCEPTED or key in _REFUSED_NAMES or key.startswith(_REFUSED_PREFIXES)


def check(props: Mapping[str, str], listener_names: Iterable[str], advertised_names: Iterable[str]) -> dict[str, str]:
    """Raise SecuritySettingError for the first setting Ebb would not honour; else each listener's
    security protocol."""
    names, advertised = list(listener_names), list(advertised_names)
    protocols = protocol_map(props.get("listener.security.protocol.map", ""))
    sasl_names = [name for name in names if protocols.get(name, "").startswith("SASL_")]
    tls_names = [name for name in names if protocols.get(name, "") in ("SSL", "SASL_SSL")]
    for key in sorted(props):
        if (key in _REFUSED_NAMES or key.startswith(_REFUSED_PREFIXES)) and props[key].strip() \
                and not is_sasl_property(key, sasl_names) and not is_tls_property(key, tls_names):
            raise SecuritySettingError(f"{key}: not supported; {_SEE}. Remove it rather than run unsecured")
    for key, listed in (("listeners", names), ("advertised.listeners", advertised)):
        for name in listed:
            protocol = protocols.get(name)
            if protocol is None:
                raise SecuritySettingError(
                    f"{key}: listener {name} has no security protocol in listener.security.protocol.map")
            if protocol not in SERVED_PROTOCOLS:
                raise SecuritySettingError(f"{key}: listener {name} uses {protocol}, which Ebb does not serve; {_SEE}")
    if advertised and set(advertised) - set(names):
        raise SecuritySettingError(f"advertised.listeners: {sorted(set(advertised) - set(names))} are not in listeners")
    inter_broker = props.get("security.inter.broker.protocol", "").strip()
    if inter_broker and inter_broker not in SECURITY_PROTOCOLS:
        raise SecuritySettingError(f"security.inter.broker.protocol: {inter_broker} is not a security protocol")
    listener = props.get("inter.broker.listener.name", "").strip()
    if listener and listener not in names:
        raise SecuritySettingError(f"inter.broker.listener.name: {listener} is not one of the listeners {names}")
    inter_broker_listener(props, names)  # names an existing listener
    return {name: protocols[name] for name in names}


def inter_broker_listener(props: Mapping[str, str], names: list[str]) -> str:
    """The listener brokers use to reach each other: inter.broker.listener.name, else the listener named
    after security.inter.broker.protocol (PLAINTEXT by default) if there is one, else the first listener."""
    chosen = props.get("inter.broker.listener.name", "").strip()
    if chosen:
        return chosen
    by_protocol = props.get("security.inter.broker.protocol", "").strip()
    if by_protocol and by_protocol not in names:
        raise SecuritySettingError(f"security.inter.broker.protocol: no listener is named {by_protocol}; "
                                   f"set inter.broker.listener.name to one of {names}")
    return by_protocol or ("PLAINTEXT" if "PLAINTEXT" in names else names[0])


MAX_REAUTH = "connections.max.reauth.ms"
_JAAS_MECHANISMS = ("plain", "scram-sha-256", "scram-sha-512", "oauthbearer")


def is_sasl_property(key: str, sasl_listener_names: Iterable[str]) -> bool:
    """The SASL settings Ebb honours: sasl.enabled.mechanisms (also per SASL listener), a SASL
    listener's JAAS entry per mechanism, listener.name.<listener>.<mechanism>.sasl.jaas.config, and
    KIP-368's session lifetime per SASL listener and per mechanism on it (sasl_config.max_reauth_ms)."""
    if key in ("sasl.enabled.mechanisms", "sasl.server.max.receive.size", "sasl.mechanism.inter.broker.protocol"):
        return True
    for name in sasl_listener_names:
        prefix = f"listener.name.{name.lower()}."
        if key in (prefix + "sasl.enabled.mechanisms", prefix + MAX_REAUTH):
            return True
        if key.startswith(prefix) and key.endswith("." + MAX_REAUTH) and \
                key[len(prefix):-len(MAX_REAUTH) - 1] in _JAAS_MECHANISMS:
            return True
        if key.startswith(prefix) and key.endswith(".sasl.jaas.config") and \
                key[len(prefix):-len(".sasl.jaas.config")] in _JAAS_MECHANISMS:
            return True
    return False


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


def is_tls_property(key: str, tls_listener_names: Iterable[str]) -> bool:
    """The TLS settings Ebb honours (broker/security/tls.py), globally or for one TLS listener; only
    when some listener uses TLS, since otherwise a keystore set by mistake would look like TLS is on."""
    names = list(tls_listener_names)
    if not names:
        return False
    if key in SERVED_SSL_KEYS:
        return True
    return any(key.startswith(f"listener.name.{name.lower()}.") and
               key[len(f"listener.name.{name.lower()}."):] in SERVED_SSL_KEYS for name in names)
