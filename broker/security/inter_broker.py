"""How this broker connects to the others (replica fetchers, the committed-offsets trimmer): over the
inter-broker listener, with its security protocol, as Kafka configures it:

    inter.broker.listener.name (or security.inter.broker.protocol)    which listener
    sasl.mechanism.inter.broker.protocol                                PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    listener.name.<l>.<mechanism>.sasl.jaas.config                      username="..." password="..."
    listener.name.<l>.ssl.truststore.* / ssl.truststore.*               the CAs the other brokers' certificates chain to
    listener.name.<l>.ssl.keystore.*                                    presented when the other broker asks for one
    ssl.endpoint.identification.algorithm                               https (default: check the host name) or empty
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping

from broker.security.listener_security import SecuritySettingError
from broker.security.sasl_config import INTER_BROKER_MECHANISMS
from broker.security.tls import TlsSettingError, load_keystore, load_truststore
from client.jaas import JaasError, parse_jaas_config
from client.security import ClientSecurity


def client_context(props: Mapping[str, str], listener: str, *, verify_hostname: bool | None = None) -> ssl.SSLContext:
    """The TLS context of a connection to another broker's `listener` (blocking: reads files). It checks
    the host name as ssl.endpoint.identification.algorithm says, unless `verify_hostname` says otherwise."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)

    def get(key: str) -> tuple[str, str]:
        prefixed = f"listener.name.{listener.lower()}.{key}"
        return (prefixed, props[prefixed].strip()) if prefixed in props else (key, props.get(key, "").strip())

    try:
        if get("ssl.truststore.location")[1] or get("ssl.truststore.certificates")[1]:
            load_truststore(context, get)
        load_keystore(context, get)  # our certificate, for brokers that ask for client certificates
    except TlsSettingError as exc:
        raise SecuritySettingError(f"inter-broker listener {listener}: {exc}") from None
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", ""):
        raise SecuritySettingError(f"ssl.endpoint.identification.algorithm: {algorithm!r} is not https or empty")
    context.check_hostname = algorithm == "https" if verify_hostname is None else verify_hostname
    return context


def inter_broker_security(props: Mapping[str, str], listener: str, protocol: str) -> ClientSecurity | None:
    """None for PLAINTEXT; else what a connection to another broker's `listener` needs."""
    if protocol == "PLAINTEXT":
        return None
    context = None
    check_hostname = True
    if protocol in ("SSL", "SASL_SSL"):
        context = client_context(props, listener)
        check_hostname = context.check_hostname
    if not protocol.startswith("SASL_"):
        return ClientSecurity(ssl_context=context, check_hostname=check_hostname)
    key = "sasl.mechanism.inter.broker.protocol"
    mechanism = props.get(key, "GSSAPI").strip().upper()
    if mechanism not in INTER_BROKER_MECHANISMS:
        raise SecuritySettingError(f"{key}: {mechanism} is not supported for the inter-broker listener {listener}; "
                                   f"set one of {', '.join(INTER_BROKER_MECHANISMS)}")
    jaas_key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    try:
        options = parse_jaas_config(props.get(jaas_key, "")).options
    except JaasError as exc:
        raise SecuritySettingError(f"{jaas_key}: the inter-broker credentials are needed here ({exc})") from None
    if not options.get("username") or not options.get("password"):
        raise SecuritySettingError(f"{jaas_key}: needs username=\"...\" password=\"...\" for the inter-broker "
                                   f"connections")
    return ClientSecurity(ssl_context=context, check_hostname=check_hostname, sasl_mechanism=mechanism,
                          username=options["username"], password=options["password"])
