"""The addresses broker properties name, parsed: listeners (`NAME://host:port`), the metrics endpoint
(`ebb.metrics.listener`) and the ZooKeeper connect string; a bad one is a ConfigError naming the property."""

from __future__ import annotations

import re
from dataclasses import dataclass

from broker.property_table import ConfigError

_LISTENER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://([^:/]*|\[[0-9a-fA-F:]+\]):(\d+)$")


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listener(text: str, key: str) -> Listener:
    match = _LISTENER.match(text)
    if match is None:
        raise ConfigError(f"{key}: {text!r} is not NAME://host:port")
    port = int(match.group(3))
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key}: port {port} out of range")
    return Listener(match.group(1), match.group(2).strip("[]"), port)


def zookeeper_connect(value: str) -> str | None:
    """`host:port[,host:port...][/chroot]`, as Kafka and ZooKeeper take it; empty means no ZooKeeper."""
    value = value.strip()
    if not value:
        return None
    hosts, slash, chroot = value.partition("/")
    if slash and not chroot:
        value = hosts  # a bare "/" is no chroot, as in ZooKeeper's own parser
    elif slash and (chroot.endswith("/") or "//" in chroot):
        raise ConfigError(f"zookeeper.connect: {value!r} has an invalid chroot path")
    for host in hosts.split(","):
        name, _, port = host.strip().rpartition(":")
        if not name or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ConfigError(f"zookeeper.connect: {host.strip()!r} in {value!r} is not host:port")
    return value


def metrics_listener(value: str) -> Listener | None:
    """`http://host:port` (port 0 picks a free one); empty means no metrics endpoint."""
    value = value.strip()
    if not value:
        return None
    listener = parse_listener(value, "ebb.metrics.listener")
    if listener.name.lower() != "http":
        raise ConfigError(f"ebb.metrics.listener: {value!r} must be http://host:port")
    return listener
