"""Which configs are secrets: Kafka's PASSWORD-typed ones (described null and sensitive, hidden in logs),
under a listener's prefix too, and, as Ebb always did, any whose name says "password"."""

from __future__ import annotations

# Kafka 4.3.1's ConfigDef.Type.PASSWORD keys (SslConfigs, SaslConfigs, BrokerSecurityConfigs,
# DelegationTokenManagerConfigs, PasswordEncoderConfigs).
PASSWORD_CONFIGS = frozenset({
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates", "sasl.jaas.config",
    "sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.assertion.private.key.passphrase",
    "password.encoder.secret", "password.encoder.old.secret", "delegation.token.secret.key",
})


def is_password(key: str) -> bool:
    """`key` (or the config under its `listener.name.<l>.` / `<mechanism>.` prefix) is a secret."""
    return "password" in key or any(key == name or key.endswith("." + name) for name in PASSWORD_CONFIGS)
