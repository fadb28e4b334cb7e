"""TLS for SSL and SASL_SSL listeners with the standard `ssl` module, configured by Kafka's properties
(each may be set per listener as listener.name.<listener>.ssl.*, which wins over ssl.*):

    ssl.keystore.type=PEM           (PEM only)
    ssl.keystore.location           a PEM file holding the private key and the certificate chain, or
    ssl.keystore.certificate.chain  and ssl.keystore.key: the same as inline PEM text
    ssl.key.password                the private key's password, if it is encrypted
    ssl.truststore.type=PEM, ssl.truststore.location or ssl.truststore.certificates
                                    the CAs client certificates must chain to
    ssl.client.auth                 none (default), requested, required
    ssl.enabled.protocols           TLSv1.2,TLSv1.3 (default); ssl.protocol is accepted as TLSv1.2/TLSv1.3
    ssl.allow.dn.changes, ssl.allow.san.changes
                                    false (default): key material rotated at runtime keeps the subject,
                                    and the subject alternative names (broker/security/dynamic_tls.py)

A client certificate's subject becomes the principal, "User:CN=...,OU=...", in RFC 2253 order as Kafka
(Java's X500Principal) writes it.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from client.tls_files import load_cas, load_key_pair

SERVED_SSL_KEYS = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.protocol", "ssl.endpoint.identification.algorithm",
    "ssl.allow.dn.changes", "ssl.allow.san.changes",
)
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# Java's short names for RDN attribute types (X500Principal.RFC2253); others are written by OID.
_SHORT_NAMES = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
                "localityName": "L", "stateOrProvinceName": "ST", "streetAddress": "STREET",
                "domainComponent": "DC", "userId": "UID"}


class TlsSettingError(ValueError):
    """A TLS setting that cannot be served; the message names the property."""


@dataclass(frozen=True)
class TlsListener:
    context: ssl.SSLContext
    client_auth: str  # none, requested, required
    allow_dn_changes: bool = False  # may rotated key material change the certificate's subject
    allow_san_changes: bool = False  # ... or its subject alternative names


def tls_listener(props: Mapping[str, str], listener: str) -> TlsListener:
    def get(key: str) -> tuple[str, str]:
        prefixed = f"listener.name.{listener.lower()}.{key}"
        if prefixed in props:
            return prefixed, props[prefixed].strip()
        return key, props.get(key, "").strip()

    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        name, value = get(key)
        if value and value.upper() != "PEM":
            raise TlsSettingError(f"{name}: {value} is not supported; Ebb reads PEM keystores and truststores")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_keystore(context, get)
    name, protocols = get("ssl.enabled.protocols")
    wanted = [p.strip() for p in (protocols or "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    unknown = [p for p in wanted if p not in _VERSIONS]
    if unknown or not wanted:
        raise TlsSettingError(f"{name}: {', '.join(unknown) or 'nothing'} — Ebb serves TLSv1.2 and TLSv1.3")
    context.minimum_version = min(_VERSIONS[p] for p in wanted)
    context.maximum_version = max(_VERSIONS[p] for p in wanted)
    name, protocol = get("ssl.protocol")
    if protocol and protocol not in ("TLS", *_VERSIONS):
        raise TlsSettingError(f"{name}: {protocol} is not supported; use TLSv1.2 or TLSv1.3")
    name, auth = get("ssl.client.auth")
    auth = (auth or "none").lower()
    if auth not in ("none", "requested", "required"):
        raise TlsSettingError(f"{name}: {auth!r} is not none, requested or required")
    if auth != "none":
        load_truststore(context, get)
        context.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
    allow = []
    for key in ("ssl.allow.dn.changes", "ssl.allow.san.changes"):
        name, value = get(key)
        if value.lower() not in ("", "true", "false"):
            raise TlsSettingError(f"{name}: {value!r} is not true or false")
        allow.append(value.lower() == "true")
    return TlsListener(context, auth, *allow)


def load_keystore(context: ssl.SSLContext, get) -> None:
    location_key, location = get("ssl.keystore.location")
    chain_key, chain = get("ssl.keystore.certificate.chain")
    key_key, key = get("ssl.keystore.key")
    _, password = get("ssl.key.password")
    if not location and not (chain and key):
        raise TlsSettingError(f"{location_key}: a TLS listener needs its certificate and key "
                              f"({location_key}, or {chain_key} with {key_key})")
    try:
        load_key_pair(context, location=location, chain=chain, key=key, password=password)
    except (OSError, ssl.SSLError) as exc:
        raise TlsSettingError(f"{location_key if location else chain_key}: cannot load the certificate and key "
                              f"({exc})") from None


def load_truststore(context: ssl.SSLContext, get) -> None:
    location_key, location = get("ssl.truststore.location")
    inline_key, inline = get("ssl.truststore.certificates")
    if not location and not inline:
        raise TlsSettingError(f"ssl.client.auth: checking client certificates needs {location_key} "
                              f"or {inline_key}")
    try:
        load_cas(context, location=location, pem=inline)
    except (OSError, ssl.SSLError) as exc:
        raise TlsSettingError(f"{location_key if location else inline_key}: cannot load the CAs ({exc})") from None


def principal_of(certificate: dict | None) -> str | None:
    """"User:<subject DN>" for a verified peer certificate (SSLObject.getpeercert()), None without one."""
    if not certificate or "subject" not in certificate:
        return None
    rdns = []
    for rdn in reversed(certificate["subject"]):  # RFC 2253 writes the most specific part first
        rdns.append("+".join(f"{_SHORT_NAMES.get(kind, kind)}={_escape(value)}" for kind, value in rdn))
    return "User:" + ",".join(rdns)


def _escape(value: str) -> str:
    out = []
    for i, char in enumerate(value):
        if char in ',+"\\<>;' or (char == "#" and i == 0) or (char == " " and i in (0, len(value) - 1)):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)
