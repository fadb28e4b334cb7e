"""One module per API key (`kNN_name.py`); each registers its handler with the versions it serves.

    @handles(ApiKey.DELETE_RECORDS, "0-3")
    async def delete_records(broker: BrokerContext, request: Request[DeleteRecordsRequest],
                             connection: RequestContext) -> DeleteRecordsResponse: ...

Every handler is given the broker's services, the request, and what the server knows of the
connection it came on (broker/request_context.py: the principal and peer the authorizer checks,
the listener, the SASL session, where an answer may be sent from files).

ApiVersions is answered from this registry, so an API is advertised exactly when a module for it
exists. A handler returns the response body, or None when no response is due (Produce acks=0).
The registration also says how its frames are read and written: the generic codec unless the API
has a fast path (Produce keeps its records as raw buffers, Fetch sends record data without copying),
and what to answer a version above the range instead of closing (ApiVersions, as Kafka does).

What several handlers share: context.py (BrokerContext, the services a handler may use),
cluster_view.py (brokers, leaders and partitions as the describing APIs tell them),
controller_requests.py (requests only the controller runs: run here or forwarded),
config_resources.py (the config APIs' resource checks and the broker's entries), acl_requests.py
(the ACL APIs' entries and filters), acl_operations.py (KIP-430's authorized-operation bits),
offset_commits.py (OffsetCommit's and TxnOffsetCommit's per-partition checks) and topic_checks.py
(the per-topic checks of DescribeProducers and DescribeErasure).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from broker.handlers.context import BrokerContext
from broker.request_context import RequestContext
from protocol import framing, messages
from protocol.messages import ApiMessage
from protocol.specs import Versions

# A handler names its own request class (Request[DeleteRecordsRequest]); the registry keys it by API.
HandlerFn = Callable[[BrokerContext, framing.Request[Any], RequestContext], Coroutine[Any, Any, ApiMessage | None]]
_Fn = TypeVar("_Fn", bound=HandlerFn)
Decoder = Callable[[bytearray], framing.Request[Any]]
Encoder = Callable[[Any, int, int], list]  # (response, version, correlation id) -> frame chunks


def encode_frame(response: ApiMessage, version: int, correlation_id: int) -> list:
    return [framing.encode_response(response, version, correlation_id)]


class CloseConnection(Exception):
    """Raised by a handler when Kafka would answer by closing the connection (e.g. an acks=0 produce
    that failed: the client learns of it by reconnecting and refreshing its metadata)."""


@dataclass(frozen=True)
class Handler:
    api_key: int
    versions: Versions
    advertised_min: int  # what ApiVersions says; may be lower than what we parse (Produce, for librdkafka)
    fn: HandlerFn
    decode: Decoder = framing.decode_request
    encode: Encoder = encode_frame
    reply_to_newer: Callable[[], ApiMessage] | None = None  # a v0 answer for versions above the range
    # Made once from the above, as they are read for every request: the API's name (metrics and logs call
    # it so) and `versions` as a set, whose `in` runs in C
    name: str = field(init=False)
    accepts: frozenset[int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", messages.api(self.api_key).name)  # (frozen)
        object.__setattr__(self, "accepts", frozenset(self.versions))


REGISTRY: dict[int, Handler] = {}


def handles(api_key: int, versions: str, *, advertised_min: int | None = None, decode: Decoder | None = None,
            encode: Encoder | None = None, reply_to_newer: Callable[[], ApiMessage] | None = None
            ) -> Callable[[_Fn], _Fn]:
    served = Versions.parse(versions)
    known = messages.api(api_key).versions
    if not served.is_subset_of(known):
        raise ValueError(f"api {api_key}: versions {served} outside what the codec covers ({known})")

    def register(fn: _Fn) -> _Fn:
        if api_key in REGISTRY:
            raise ValueError(f"api {api_key} registered twice")
        low = served.low if advertised_min is None else advertised_min
        REGISTRY[api_key] = Handler(api_key, served, low, fn, decode or framing.decode_request,
                                    encode or encode_frame, reply_to_newer)
        return fn

    return register


def load_handlers() -> dict[int, Handler]:
    """Import every handler module in this package (each registers itself on import)."""
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("k"):
            importlib.import_module(f"{__name__}.{module.name}")
    return REGISTRY
