"""What a handler may know of the connection a request came on, beyond the request itself.

Every handler receives one as its third argument. It stays on the broker side: protocol/ parses
requests and knows nothing of peers, principals, listeners, SASL sessions or segment files.

The server keeps one per connection rather than making one per request (nothing allocated on the
Produce and Fetch paths): a connection's requests are served one at a time, so what it holds is
always true of the request being served.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.log.file_region import FileRegion
from broker.security.principal import ANONYMOUS
from broker.security.sasl_session import SaslSession
from broker.share.sessions import ShareSession

if TYPE_CHECKING:
    from broker.handlers.fetch_resolve import ResolvedFetch
    from broker.quotas.request_time import LoopTime


@dataclass(slots=True)
class RequestContext:
    # Who the client authenticated as (SASL, TLS client certificate): what the authorizer checks.
    principal: str = ANONYMOUS
    # The peer's address: the authorizer's host, and group members are described with it.
    client_host: str = ""
    # The listener the request came in on: Metadata and the coordinator lookups answer with its endpoints.
    listener_name: str = ""
    # The connection's SASL session on SASL listeners (SaslHandshake and SaslAuthenticate move it on).
    sasl: SaslSession | None = None
    # Plain TCP connections: a list for the FileRegions an answer sends from segment files (sendfile),
    # emptied by the connection once the answer is out; None where answers must be bytes (TLS, tests).
    file_regions: list[FileRegion] | None = None
    # The size of the request being served (what a producer's byte-rate quota counts), set by the server.
    request_bytes: int = 0
    # How long the connection stays muted after this answer (a client quota's throttle, KIP-219); the
    # server mutes and sets it back to 0.
    throttle_ms: int = 0
    # The loop time of the request being served while its client's request_percentage is metered, for the
    # server to charge once the handler is done; a handler deciding its answer on the throttle (a consumer's
    # Fetch) charges it itself, which empties this (RequestQuotas.charge_so_far); the server empties it
    # when the handler ends, however it ends. None otherwise.
    request_time: LoopTime | None = None
    # The share session this connection opened last (KIP-932): it ends, and what its member holds on
    # this broker is released, when the connection closes.
    share_session: ShareSession | None = None
    # The last consumer Fetch's resolve without a session (broker/handlers/fetch_resolve.py): librdkafka
    # asks for the same partitions on every Fetch, so the next one reuses it while nothing changed.
    fetch_resolve: ResolvedFetch | None = None
