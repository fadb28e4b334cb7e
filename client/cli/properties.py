"""`--command-config`: a Java properties file of client settings, as Kafka's tools take it.

Only what this client can honour is accepted. Security settings (TLS, SASL) are refused rather than
ignored: connecting in plaintext to a cluster the file says is secured would be a surprise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


class PropertiesError(ValueError):
    """A properties file we cannot read or use; the message names the file, line or key."""


@dataclass
class ClientSettings:
    cluster_options: dict[str, object] = field(default_factory=dict)
    bootstrap_servers: str | None = None
    warnings: list[str] = field(default_factory=list)


def parse_properties(text: str) -> dict[str, str]:
    """Java's Properties.load format: `key=value`, `key: value` or `key value`; `#`/`!` comments;
    a line ending in an odd number of backslashes continues on the next; \\t \\n \\r \\f \\uXXXX escapes."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split(line, number)
        out[key] = value
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split(line: str, number: int) -> tuple[str, str]:
    pos = 0
    while pos < len(line):
        ch = line[pos]
        if ch == "\\":
            pos += 2
            continue
        if ch in "=: \t\f":
            break
        pos += 1
    key_raw, rest = line[:pos], line[pos:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key_raw, number), _unescape(rest, number)


def _unescape(text: str, number: int) -> str:
    out = []
    pos = 0
    while pos < len(text):
        ch = text[pos]
        if ch != "\\" or pos + 1 == len(text):
            out.append(ch)
            pos += 1
            continue
        nxt = text[pos + 1]
        if nxt == "u":
            digits = text[pos + 2:pos + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError(f"line {number}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            pos += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        pos += 2
    return "".join(out)


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
