"""`--command-config`: a Java properties file of client settings, as Kafka's tools take it.

Only what this client can honour is accepted. Security settings (TLS, SASL) are refused rather than
ignored: connecting in plaintext to a cluster the file says is secured would be a surprise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..java_properties import PropertiesError

# Kafka's client property -> the Cluster keyword it sets. All are integers except client.id.
_SETTINGS = {
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
    "socket.connection.setup.timeout.ms": "connect_timeout_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "retry.backoff.max.ms": "retry_backoff_max_ms",
}
_SECURITY_PREFIXES = ("ssl.", "sasl.")
_SECURITY_KEYS = {"security.protocol", "security.providers"}


@dataclass
class ClientSettings:
    cluster_options: dict[str, object] = field(default_factory=dict)
    bootstrap_servers: str | None = None
    warnings: list[str] = field(default_factory=list)


def client_settings(props: dict[str, str]) -> ClientSettings:
    """Map client properties to Cluster options; refuse security settings, warn about the rest."""
    settings = ClientSettings()
    for key, value in props.items():
        if key in _SECURITY_KEYS or key.startswith(_SECURITY_PREFIXES):
            if key == "security.protocol" and value.strip().upper() == "PLAINTEXT":
                continue
            raise PropertiesError(
                f"{key}={value}: security settings are not supported; ebb's client connects with PLAINTEXT only"
                " (no TLS, no SASL)")
        if key == "bootstrap.servers":
            settings.bootstrap_servers = value
            continue
        option = _SETTINGS.get(key)
        if option is None:
            settings.warnings.append(f"{key} is not used by ebb's client; ignored")
            continue
        if option == "client_id":
            settings.cluster_options[option] = value
            continue
        try:
            number = int(value.strip())
        except ValueError:
            raise PropertiesError(f"{key}={value}: must be an integer number of milliseconds") from None
        if number <= 0:
            raise PropertiesError(f"{key}={value}: must be > 0")
        settings.cluster_options[option] = number
    return settings
