"""What each SASL listener offers, from Kafka's properties:

    sasl.enabled.mechanisms                              (default GSSAPI, as Kafka; Ebb refuses it)
    listener.name.<listener>.sasl.enabled.mechanisms     (overrides it for one listener)
    listener.name.<listener>.plain.sasl.jaas.config      (PLAIN's users: user_<name>="<password>")
    listener.name.<listener>.scram-sha-512.sasl.jaas.config   (optional; SCRAM users live in the store)
    listener.name.<listener>.oauthbearer.sasl.jaas.config     (OAUTHBEARER's OAuthBearerLoginModule: required, as
                                                               Kafka's validator needs exactly one JAAS entry)
    connections.max.reauth.ms                            (KIP-368's session lifetime; default 0, off)
    listener.name.<listener>.connections.max.reauth.ms   (overrides it for one listener)
    listener.name.<listener>.<mechanism>.connections.max.reauth.ms   (and for one mechanism on it)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.security.listener_security import MAX_REAUTH, SecuritySettingError
from broker.security.oauthbearer import OAUTHBEARER, UnsecuredValidator
from broker.security.plain import plain_users
from broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from client.jaas import JaasError, parse_jaas_config

PLAIN = "PLAIN"
SERVED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
# what this broker's own client side speaks to the others (Ebb has no OAUTHBEARER token source)
INTER_BROKER_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class SaslListener:
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    oauthbearer: UnsecuredValidator | None = None  # set when OAUTHBEARER is enabled
    # connections.max.reauth.ms in force for each mechanism (0 or below: sessions do not expire by it)
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)


def sasl_listeners(props: Mapping[str, str], protocols: Mapping[str, str]) -> dict[str, SaslListener]:
    """SaslListener for every listener whose protocol is SASL_*; SecuritySettingError naming the property
    when a listener's settings cannot be served."""
    if MAX_REAUTH in props:  # read, and so checked, whether or not a SASL listener uses it (as Kafka)
        _long(props, MAX_REAUTH)
    result = {}
    for name, protocol in protocols.items():
        if not protocol.startswith("SASL_"):
            continue
        prefix = f"listener.name.{name.lower()}."
        key = prefix + "sasl.enabled.mechanisms"
        if key not in props:
            key = "sasl.enabled.mechanisms"
        mechanisms = tuple(m.strip().upper() for m in props.get(key, "GSSAPI").split(",") if m.strip())
        if not mechanisms:
            raise SecuritySettingError(f"{key}: listener {name} needs at least one SASL mechanism")
        for mechanism in mechanisms:
            if mechanism not in SERVED_MECHANISMS:
                default = " (Kafka's default when the property is unset)" if mechanism == "GSSAPI" else ""
                raise SecuritySettingError(f"{key}: {mechanism}{default} is not supported; set one or more of "
                                           f"{', '.join(SERVED_MECHANISMS)}")
        users: dict[str, str] = {}
        oauthbearer = None
        for mechanism in mechanisms:
            jaas_key = f"{prefix}{mechanism.lower()}.sasl.jaas.config"
            text = props.get(jaas_key, "").strip()
            if mechanism == PLAIN and not text:
                raise SecuritySettingError(f"{jaas_key}: PLAIN on listener {name} needs a JAAS entry with its users")
            if mechanism == OAUTHBEARER and not text:
                raise SecuritySettingError(f"{jaas_key}: OAUTHBEARER on listener {name} needs an "
                                           f"OAuthBearerLoginModule JAAS entry (its validator's options)")
            if not text:
                continue
            try:
                entry = parse_jaas_config(text)
                if mechanism == PLAIN:
                    users = plain_users(entry)
                elif mechanism == OAUTHBEARER:
                    oauthbearer = UnsecuredValidator.from_jaas(entry)
                elif entry.login_module != SCRAM_LOGIN_MODULE:
                    raise ValueError(f"{mechanism} needs {SCRAM_LOGIN_MODULE}, not {entry.login_module}")
            except (JaasError, ValueError) as exc:
                raise SecuritySettingError(f"{jaas_key}: {exc}") from None
        result[name] = SaslListener(mechanisms, users, oauthbearer, max_reauth_ms(props, name, mechanisms))
    return result


_LONG = re.compile(r"[+-]?\d+")  # Long.parseLong of the trimmed text, as Kafka's LONG config type reads it


def max_reauth_ms(props: Mapping[str, str], listener: str, mechanisms: tuple[str, ...]) -> dict[str, int]:
    """connections.max.reauth.ms per mechanism as Kafka's SaslChannelBuilder finds it: the listener- and
    mechanism-prefixed value, else the listener-prefixed one, else the broker's (default 0)."""
    prefix = f"listener.name.{listener.lower()}."
    keys = [key for key in (prefix + MAX_REAUTH, MAX_REAUTH) if key in props]
    default = _long(props, keys[0]) if keys else 0
    result = {}
    for mechanism in mechanisms:
        key = f"{prefix}{mechanism.lower()}.{MAX_REAUTH}"
        result[mechanism] = _long(props, key) if key in props else default
    return result


def _long(props: Mapping[str, str], key: str) -> int:
    text = props[key].strip()
    if not _LONG.fullmatch(text) or not -2**63 <= int(text) < 2**63:
        raise SecuritySettingError(f"{key}: {props[key]!r} is not a number of type LONG")
    return int(text)
