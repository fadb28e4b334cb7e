"""A blocking one-connection client for broker tests: our codec on a plain socket.

    with WireClient(broker.port) as client:
        body = client.send(MetadataRequest(topics=None), version=12)

`send` frames the request (encode_request), reads exactly one response frame and decodes it with the
same version; the correlation id must match.
"""

from __future__ import annotations

import socket
import struct

from protocol import framing
from protocol.messages import ApiMessage


class WireClient:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0, client_id: str = "ebb-test"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self._correlation_id = 0

    def send(self, body: ApiMessage, version: int) -> ApiMessage:
        self._correlation_id += 1
        self.sock.sendall(framing.encode_request(body, version, self._correlation_id, self.client_id))
        correlation_id, response = framing.decode_response(self.read_frame(), body.api_key, version)
        assert correlation_id == self._correlation_id, (correlation_id, self._correlation_id)
        return response

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        chunks, remaining = [], n
        while remaining:
            chunk = self.sock.recv(remaining)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def create_topic(client: WireClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                 version: int = 7):
    """CreateTopics for one topic; returns its result (error code checked by the caller)."""
    from protocol.messages import CreateTopicsRequest

    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1,
        configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])
    return client.send(CreateTopicsRequest(topics=[topic], timeout_ms=10_000), version).topics[0]


def metadata(client: WireClient, names: list[str] | None, version: int = 12, allow_auto_topic_creation: bool = False):
    from protocol.messages import MetadataRequest

    topics = None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    return client.send(MetadataRequest(topics=topics, allow_auto_topic_creation=allow_auto_topic_creation), version)
