"""`--command-config`: a Java properties file of client settings, as Kafka's tools take it.

Only what this client can honour is accepted. Security settings (TLS, SASL) are read as Kafka's
client reads them (client/security_settings.py); one it cannot honour is refused rather than ignored:
connecting less securely than the file says would be a surprise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..java_properties import PropertiesError
from ..security_settings import SecuritySettingError, is_security_key, security_settings

# Kafka's client property -> the Cluster keyword it sets. All are integers except client.id.
_SETTINGS = {
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
    "socket.connection.setup.timeout.ms": "connect_timeout_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "retry.backoff.max.ms": "retry_backoff_max_ms",
}


@dataclass
class ClientSettings:
    cluster_options: dict[str, object] = field(default_factory=dict)
    bootstrap_servers: str | None = None
    warnings: list[str] = field(default_factory=list)


def client_settings(props: dict[str, str]) -> ClientSettings:
    """Map client properties to Cluster options (security included); warn about the ones not used."""
    settings = ClientSettings()
    try:
        security = security_settings(props).client_security()
    except SecuritySettingError as exc:
        raise PropertiesError(str(exc)) from None
    if security is not None:
        settings.cluster_options["security"] = security
    for key, value in props.items():
        if is_security_key(key):
            continue
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
