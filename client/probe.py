"""Whether a broker serves: an ApiVersions v0 request on a plain blocking socket, its answer read.

For whatever waits on a broker it started (tests, benchmarks, the pipeline demo): a port that accepts
is not enough, since Ebb binds its listeners before its services start and holds the connections
that arrive until then (broker/app.py). v0 is answered by every Kafka broker, whatever it supports.
"""

from __future__ import annotations

import socket
import struct

from protocol import framing
from protocol.enums import ApiKey
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse

_CORRELATION_ID = 1


def api_versions(host: str, port: int, timeout_s: float = 5.0, client_id: str = "probe") -> dict[int, tuple[int, int]]:
    """The APIs the broker advertises, {api_key: (min_version, max_version)}. OSError when it cannot be
    reached or does not answer within `timeout_s`; ConnectionError when it closes before answering."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(framing.encode_request(ApiVersionsRequest(), 0, _CORRELATION_ID, client_id))
        size = struct.unpack(">i", _read(sock, 4))[0]
        correlation_id, answer = framing.decode_response(_read(sock, size), ApiKey.API_VERSIONS, 0)
    if not isinstance(answer, ApiVersionsResponse) or correlation_id != _CORRELATION_ID \
            or answer.error_code != ErrorCode.NONE:
        raise ConnectionError(f"{host}:{port} answered ApiVersions with correlation id {correlation_id}, "
                              f"error {getattr(answer, 'error_code', None)}")
    return {item.api_key: (item.min_version, item.max_version) for item in answer.api_keys}


def answers(host: str, port: int, timeout_s: float = 2.0) -> bool:
    """Whether the broker on host:port answers ApiVersions within `timeout_s`."""
    try:
        api_versions(host, port, timeout_s)
    except (OSError, ProtocolError, struct.error):  # refused, reset, timed out, closed; not Kafka's answer
        return False
    return True


def _read(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection before answering ApiVersions")
        data += chunk
    return bytes(data)
