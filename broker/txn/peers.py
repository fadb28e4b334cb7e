"""The transaction coordinator's and the partition leaders' connections to the other brokers.

One owner for both directions of inter-broker transaction traffic: the coordinator's MarkerSender
(WriteTxnMarkers to partition leaders) and the leaders' TxnVerifier (AddPartitionsToTxn v4,
verify-only, to the coordinator; KIP-890 part 1) ask through the same pool, one connection per
broker, over the inter-broker listener with its security.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from client.security import ClientSecurity

log = structlog.get_logger("transactions")
# After a failed connect the broker is not tried again for this long (Kafka's reconnect.backoff.max.ms):
# marker rounds every 100 ms must not each wait out a connect timeout to a dead broker.
CONNECT_BACKOFF_S = 1.0


class PeerConnections:
    def __init__(self, node_id: int, endpoint: Callable[[int], tuple[str, int] | None],
                 security: ClientSecurity | None, timeout_ms: int) -> None:
        self.node_id = node_id
        self._endpoint = endpoint
        self._security = security
        self._timeout_s = timeout_ms / 1000
        self._connections: dict[int, Any] = {}  # broker id -> BrokerConnection
        # Callers run side by side: one connect at a time per broker, none while it just failed.
        self._connecting: dict[int, asyncio.Lock] = {}
        self._failed: dict[int, tuple[float, str]] = {}  # broker id -> (monotonic time of its last failed connect, why)

    async def request(self, broker_id: int, request: Any, version: int, *, oldest: int | None = None) -> Any:
        """The answer of `broker_id`; raises (and drops the connection) when it cannot be asked.
        `oldest`: any version from it up to `version` will do, the highest the broker serves (as
        Kafka's NetworkClient picks from the broker's ApiVersions: an older Ebb mid-upgrade)."""
        try:
            connection = await self._connect(broker_id)
            if oldest is not None:
                version = connection.pick_version(request.api_key, low=oldest, high=version)
            return await connection.request(request, version=version)
        except Exception:
            await self._disconnect(broker_id)
            raise

    async def _connect(self, broker_id: int):
        connection = self._connections.get(broker_id)
        if connection is not None and connection.connected:
            return connection  # no lock on the way of a connected broker
        async with self._connecting.setdefault(broker_id, asyncio.Lock()):
            failed = self._failed.get(broker_id)
            if failed is not None and time.monotonic() - failed[0] < CONNECT_BACKOFF_S:
                raise ConnectionError(f"broker {broker_id} could not be reached just now: {failed[1]}")
            try:
                return await self._connect_once(broker_id)
            except Exception as exc:
                self._failed[broker_id] = (time.monotonic(), repr(exc))
                raise

    async def _connect_once(self, broker_id: int):
        from client.connection import BrokerConnection  # the project's client; imported late (start-up time)

        connection = self._connections.get(broker_id)
        if connection is not None and connection.connected:
            return connection
        endpoint = self._endpoint(broker_id)
        if endpoint is None:
            raise ConnectionError(f"broker {broker_id} is not registered")
        connection = await BrokerConnection(
            endpoint[0], endpoint[1], node_id=broker_id, client_id=f"ebb-txn-{self.node_id}",
            request_timeout_s=self._timeout_s + 5, connect_timeout_s=self._timeout_s,
            security=self._security).connect()
        self._connections[broker_id] = connection
        self._failed.pop(broker_id, None)
        return connection

    async def _disconnect(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            try:
                await connection.close()
            except Exception:  # already gone
                pass

    async def close(self) -> None:
        for broker_id in list(self._connections):
            await self._disconnect(broker_id)
