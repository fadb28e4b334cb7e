"""A Kafka client's security properties, read as Kafka's Java client reads them, for the clients
that take Kafka's names: the CLI's `--command-config` and the Spark data source's `kafka.*` options.

    security.protocol                  PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
    sasl.mechanism                     PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, is not served)
    sasl.jaas.config                   PlainLoginModule or ScramLoginModule required username="..." password="...";
    ssl.truststore.type=PEM            with ssl.truststore.location (a PEM file) or ssl.truststore.certificates
                                       (PEM text); without a truststore the system's CAs are trusted
    ssl.keystore.type=PEM              a client certificate: ssl.keystore.location (key and chain in one PEM
                                       file) or ssl.keystore.certificate.chain with ssl.keystore.key;
                                       ssl.key.password if the key is encrypted
    ssl.endpoint.identification.algorithm    https (default) checks the broker's host name, empty does not

Anything else under sasl.* or ssl.*, a setting the protocol does not use, or a value that cannot be
honoured is an error naming the property: connecting less securely than the settings ask is never an
option. The result holds plain values (Spark pickles it to its executors); `client_security()` makes
what our connections use and `librdkafka()` the same settings in librdkafka's names.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from .jaas import JaasError, parse_jaas_config
from .security import SASL_MECHANISMS, ClientSecurity
from .tls_files import load_cas, load_key_pair

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_KEYS = ("sasl.mechanism", "sasl.jaas.config")
SSL_KEYS = ("ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates", "ssl.keystore.type",
            "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.key.password",
            "ssl.endpoint.identification.algorithm")
KEYS = ("security.protocol", *SASL_KEYS, *SSL_KEYS)
_LOGIN_MODULES = ("org.apache.kafka.common.security.plain.PlainLoginModule",
                  "org.apache.kafka.common.security.scram.ScramLoginModule")


class SecuritySettingError(ValueError):
    """A security property that cannot be honoured; the message names it."""


def is_security_key(key: str) -> bool:
    return key == "security.protocol" or key.startswith(("sasl.", "ssl.", "security."))


@dataclass(frozen=True)
class SecuritySettings:
    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""
    truststore_location: str = ""
    truststore_pem: str = ""
    keystore_location: str = ""
    keystore_chain: str = ""
    keystore_key: str = ""
    key_password: str = ""
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def client_security(self) -> ClientSecurity | None:
        """What a BrokerConnection needs (None for PLAINTEXT). Files are read here, so call it where the
        connection is made."""
        if self.protocol == "PLAINTEXT":
            return None
        context = None
        if self.tls:
            if self.truststore_location or self.truststore_pem:  # these CAs alone, as a Java truststore
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                load_cas(context, location=self.truststore_location, pem=self.truststore_pem)
            else:
                context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
            if self.keystore_location or self.keystore_key:
                load_key_pair(context, location=self.keystore_location, chain=self.keystore_chain,
                              key=self.keystore_key, password=self.key_password)
            context.check_hostname = self.check_hostname
        return ClientSecurity(ssl_context=context, check_hostname=self.check_hostname,
                              sasl_mechanism=self.sasl_mechanism, username=self.username, password=self.password)

    def librdkafka(self) -> dict[str, str]:
        """The same settings for confluent-kafka (librdkafka's property names)."""
        if self.protocol == "PLAINTEXT":
            return {}
        out = {"security.protocol": self.protocol.lower()}
        if self.sasl_mechanism is not None:
            out.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.username,
                        "sasl.password": self.password})
        if self.tls:
            out["ssl.endpoint.identification.algorithm"] = "https" if self.check_hostname else "none"
            if self.truststore_location:
                out["ssl.ca.location"] = self.truststore_location
            elif self.truststore_pem:
                out["ssl.ca.pem"] = self.truststore_pem
            if self.keystore_location:  # one PEM file with both: each loader takes its own blocks
                out["ssl.certificate.location"] = out["ssl.key.location"] = self.keystore_location
            elif self.keystore_key:
                out["ssl.certificate.pem"], out["ssl.key.pem"] = self.keystore_chain, self.keystore_key
            if self.key_password:
                out["ssl.key.password"] = self.key_password
        return out


def security_settings(props: Mapping[str, str], prefix: str = "") -> SecuritySettings:
    """Read the security properties among `props` (keys as given, each after `prefix`, e.g. "kafka.")."""
    values = {key[len(prefix):]: str(value).strip() for key, value in props.items()
              if key.startswith(prefix) and is_security_key(key[len(prefix):])}

    def name(key: str) -> str:
        return prefix + key

    for key in values:
        if key not in KEYS:
            raise SecuritySettingError(f"{name(key)} is not supported; the security settings understood are "
                                       f"{', '.join(name(k) for k in KEYS)}")
    protocol = values.get("security.protocol", "PLAINTEXT").upper() or "PLAINTEXT"
    if protocol not in PROTOCOLS:
        raise SecuritySettingError(f"{name('security.protocol')}={values['security.protocol']}: not one of "
                                   f"{', '.join(PROTOCOLS)}")
    sasl = protocol.startswith("SASL_")
    tls = protocol in ("SSL", "SASL_SSL")
    for keys, used in ((SASL_KEYS, sasl), (SSL_KEYS, tls)):
        unused = [k for k in keys if k in values and not used]
        if unused:
            raise SecuritySettingError(f"{name(unused[0])} is set but {name('security.protocol')} is {protocol}, "
                                       f"which does not use it")
    settings: dict[str, object] = {"protocol": protocol}
    if sasl:
        settings.update(_sasl(values, name))
    if tls:
        settings.update(_tls(values, name))
    return SecuritySettings(**settings)  # type: ignore[arg-type]


def _sasl(values: Mapping[str, str], name) -> dict[str, object]:
    mechanism = values.get("sasl.mechanism", "").upper()
    if mechanism not in SASL_MECHANISMS:
        given = f"={values['sasl.mechanism']}" if values.get("sasl.mechanism") else " is not set (Kafka's default " \
                                                                                     "is GSSAPI)"
        raise SecuritySettingError(f"{name('sasl.mechanism')}{given}: Ebb's client speaks "
                                   f"{', '.join(SASL_MECHANISMS)}")
    jaas_key = name("sasl.jaas.config")
    if not values.get("sasl.jaas.config"):
        raise SecuritySettingError(f"{jaas_key} is needed for SASL: {_LOGIN_MODULES[0]} required "
                                   f"username=\"...\" password=\"...\";")
    try:
        entry = parse_jaas_config(values["sasl.jaas.config"])
    except JaasError as exc:
        raise SecuritySettingError(f"{jaas_key}: {exc}") from None
    if entry.login_module not in _LOGIN_MODULES:
        raise SecuritySettingError(f"{jaas_key}: login module {entry.login_module} is not supported; use "
                                   f"{' or '.join(_LOGIN_MODULES)}")
    unknown = sorted(set(entry.options) - {"username", "password"})
    if unknown:
        raise SecuritySettingError(f"{jaas_key}: option {unknown[0]} is not supported (only username and password)")
    if not entry.options.get("username") or "password" not in entry.options:
        raise SecuritySettingError(f"{jaas_key}: needs username=\"...\" and password=\"...\"")
    return {"sasl_mechanism": mechanism, "username": entry.options["username"],
            "password": entry.options["password"]}


def _tls(values: Mapping[str, str], name) -> dict[str, object]:
    for store, parts in (("truststore", ("location", "certificates")),
                         ("keystore", ("location", "certificate.chain", "key"))):
        given = [f"ssl.{store}.{part}" for part in parts if values.get(f"ssl.{store}.{part}")]
        kind = values.get(f"ssl.{store}.type", "")
        if kind and kind.upper() != "PEM":
            raise SecuritySettingError(f"{name(f'ssl.{store}.type')}={kind}: Ebb's client reads PEM only")
        if given and kind.upper() != "PEM":
            raise SecuritySettingError(f"{name(given[0])} needs {name(f'ssl.{store}.type')}=PEM (Kafka's default "
                                       f"is JKS, which Ebb's client does not read)")
    if values.get("ssl.truststore.location") and values.get("ssl.truststore.certificates"):
        raise SecuritySettingError(f"{name('ssl.truststore.location')} and {name('ssl.truststore.certificates')}: "
                                   f"set one, not both")
    chain, key = values.get("ssl.keystore.certificate.chain", ""), values.get("ssl.keystore.key", "")
    if values.get("ssl.keystore.location") and (chain or key):
        raise SecuritySettingError(f"{name('ssl.keystore.location')} and {name('ssl.keystore.key')}: set one, "
                                   f"not both")
    if bool(chain) != bool(key):
        raise SecuritySettingError(f"{name('ssl.keystore.certificate.chain')} and {name('ssl.keystore.key')} go "
                                   f"together")
    algorithm = values.get("ssl.endpoint.identification.algorithm", "https").lower()
    if algorithm not in ("https", ""):
        raise SecuritySettingError(f"{name('ssl.endpoint.identification.algorithm')}={algorithm}: https or empty")
    found = {"truststore_location": values.get("ssl.truststore.location", ""),
             "truststore_pem": values.get("ssl.truststore.certificates", ""),
             "keystore_location": values.get("ssl.keystore.location", ""), "keystore_chain": chain,
             "keystore_key": key, "key_password": values.get("ssl.key.password", ""),
             "check_hostname": algorithm == "https"}
    _check_loadable(found, name)
    return found


def _check_loadable(found: Mapping[str, object], name) -> None:
    """Read the PEM material now, so that a bad path or file is named here, not at the first connection."""
    scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    trust_location, trust_pem = str(found["truststore_location"]), str(found["truststore_pem"])
    key_location, key = str(found["keystore_location"]), str(found["keystore_key"])
    try:
        if trust_location or trust_pem:
            load_cas(scratch, location=trust_location, pem=trust_pem)
    except (OSError, ssl.SSLError) as exc:
        key_named = "ssl.truststore.location" if trust_location else "ssl.truststore.certificates"
        raise SecuritySettingError(f"{name(key_named)}: cannot load the CAs ({exc})") from None
    try:
        if key_location or key:
            load_key_pair(scratch, location=key_location, chain=str(found["keystore_chain"]), key=key,
                          password=str(found["key_password"]))
    except (OSError, ssl.SSLError) as exc:
        key_named = "ssl.keystore.location" if key_location else "ssl.keystore.key"
        raise SecuritySettingError(f"{name(key_named)}: cannot load the key and certificate ({exc})") from None
