"""Client quota entities and keys, and AlterClientQuotas' checks, as Kafka 4.3.1's controller makes them
(ClientQuotaControlManager, QuotaConfig).

An entity is a set of (type, name) pairs: user and/or client-id, or ip alone; a None name is the type's
default (`<default>`). Keys: user and client-id entities take producer_byte_rate and consumer_byte_rate
(LONG), request_percentage and controller_mutation_rate (DOUBLE); ip entities take connection_creation_rate
(INT). A value must be above 0, and integral (within 1e-6) and in range for the integral types.
"""

from __future__ import annotations

import asyncio
import decimal
import ipaddress
import math
import socket

from protocol.errors import ErrorCode

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

LONG, INT, DOUBLE = "LONG", "INT", "DOUBLE"
USER_AND_CLIENT_KEYS = {PRODUCER_BYTE_RATE: LONG, CONSUMER_BYTE_RATE: LONG, REQUEST_PERCENTAGE: DOUBLE,
                        CONTROLLER_MUTATION_RATE: DOUBLE}
IP_KEYS = {CONNECTION_CREATION_RATE: INT}
ALL_KEYS = {**USER_AND_CLIENT_KEYS, **IP_KEYS}
_MAX = {INT: 2**31 - 1, LONG: float(2**63 - 1)}
_TOO_LARGE = {INT: "an INT", LONG: "a LONG"}

# An entity as a hashable value: its (type, name) pairs sorted by type.
QuotaEntity = tuple[tuple[str, "str | None"], ...]


def entity_of(pairs: dict[str, str | None]) -> QuotaEntity:
    return tuple(sorted(pairs.items()))


def entity_text(entity: QuotaEntity) -> str:
    """Kafka's ClientQuotaEntity.toString, for messages."""
    return "ClientQuotaEntity(entries=" + "{" + ", ".join(f"{k}={v}" for k, v in entity) + "})"


class QuotaError(Exception):
    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def check_entity(entity: QuotaEntity) -> dict[str, str]:
    """validateEntity and configKeysForEntityType: the keys the entity takes; QuotaError otherwise."""
    if not entity:
        raise QuotaError("Invalid empty client quota entity")
    for kind, name in entity:
        if kind not in ENTITY_TYPES:
            raise QuotaError(f"Unhandled client quota entity type: {kind}")
        if name == "":
            raise QuotaError(f"Empty {kind} not supported")
    kinds = dict(entity)
    if IP in kinds:
        if len(kinds) > 1:
            raise QuotaError("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
        if not await _resolvable(kinds[IP]):
            raise QuotaError(f"{kinds[IP]} is not a valid IP or resolvable host.")
        return IP_KEYS
    return USER_AND_CLIENT_KEYS


async def _resolvable(ip: str | None) -> bool:
    """InetAddress.getByName: an address literal, or a name that resolves (looked up off the event loop)."""
    if ip is None:
        return True
    try:
        ipaddress.ip_address(ip)
        return True
    except ValueError:
        pass
    try:
        await asyncio.get_running_loop().getaddrinfo(ip, None)
        return True
    except (socket.gaierror, UnicodeError, OSError):
        return False


def check_value(keys: dict[str, str], key: str, value: float) -> None:
    """validateQuotaKeyValue."""
    kind = keys.get(key)
    if kind is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if value <= 0.0:  # as Java compares: NaN passes every check below too (Kafka takes it)
        raise QuotaError(f"Quota {key} must be greater than 0")
    if kind == DOUBLE:
        return
    if value > _MAX[kind]:
        raise QuotaError(f"Proposed value for {key} is too large for {_TOO_LARGE[kind]}.")
    if abs(math.fmod(value, 1.0)) > 1e-6:
        raise QuotaError(f"{key} cannot be a fractional value.")


def value_text(key: str, value: float) -> str:
    """How a value is stored (Kafka's ZooKeeper mode: integral types as whole numbers, doubles as Java
    prints them)."""
    if ALL_KEYS.get(key) in (LONG, INT) and math.isfinite(value):
        return str(int(value))
    return java_double(value)


def java_double(value: float) -> str:
    """Java's Double.toString: plain between 10^-3 and 10^7, else d.dddE<n> (shortest digits both ways)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value)) if "e" not in repr(float(value)) else f"{value:f}"
    sign, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    power = len(text) - 1 + exponent
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"
