"""One module per API key (`kNN_name.py`); each registers its handler with the versions it serves.

    @handles(21, "0-3")
    async def delete_records(broker, request) -> DeleteRecordsResponse: ...

ApiVersions is answered from this registry, so an API is advertised exactly when a module for it
exists. A handler returns the response body, or None when no response is due (Produce acks=0).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from protocol import messages
from protocol.specs import Versions

HandlerFn = Callable[..., Awaitable[object | None]]


class CloseConnection(Exception):
    """Raised by a handler when Kafka would answer by closing the connection (e.g. an acks=0 produce
    that failed: the client learns of it by reconnecting and refreshing its metadata)."""


@dataclass(frozen=True)
class Handler:
    api_key: int
    versions: Versions
    advertised_min: int  # what ApiVersions says; may be lower than what we parse (Produce, for librdkafka)
    fn: HandlerFn

    @property
    def name(self) -> str:
        return messages.api(self.api_key).name


REGISTRY: dict[int, Handler] = {}


def handles(api_key: int, versions: str, *, advertised_min: int | None = None) -> Callable[[HandlerFn], HandlerFn]:
    served = Versions.parse(versions)
    known = messages.api(api_key).versions
    if not served.is_subset_of(known):
        raise ValueError(f"api {api_key}: versions {served} outside what the codec covers ({known})")

    def register(fn: HandlerFn) -> HandlerFn:
        if api_key in REGISTRY:
            raise ValueError(f"api {api_key} registered twice")
        low = served.low if advertised_min is None else advertised_min
        REGISTRY[api_key] = Handler(api_key, served, low, fn)
        return fn

    return register


def load_handlers() -> dict[int, Handler]:
    """Import every handler module in this package (each registers itself on import)."""
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("k"):
            importlib.import_module(f"{__name__}.{module.name}")
    return REGISTRY
