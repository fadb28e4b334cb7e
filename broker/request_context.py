"""What a handler may need of the connection a request came on, beyond the request itself.

The server builds one per request; handlers registered with `connection=True` (broker/handlers)
receive it as their third argument. It stays on the broker side: protocol/ parses requests and
knows nothing of SASL sessions or segment files.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.log.file_region import FileRegion
from broker.security.sasl_session import SaslSession


@dataclass(slots=True)
class RequestContext:
    # The connection's SASL session on SASL listeners (SaslHandshake and SaslAuthenticate move it on).
    sasl: SaslSession | None = None
    # Plain TCP connections: a list for the FileRegions an answer sends from segment files (sendfile),
    # released by the connection once sent; None where answers must be bytes (TLS, tests).
    file_regions: list[FileRegion] | None = None
