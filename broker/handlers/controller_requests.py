"""Requests only the controller executes (ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, UpdateFeatures): where they run and what a refusal of the whole request looks like.

On the controller they run here. Any other broker forwards the request as it came, at its version,
to the controller over the inter-broker listener (as Kafka 4's brokers forward to their controller)
and returns its answer; a forwarded request that finds its receiver no longer controller is not
forwarded again. Without a reachable controller the answer is NOT_CONTROLLER, which admin clients
retry. On one broker without ZooKeeper there is no controller: they run here. A metadata store
failure is answered for every partition (broker/cluster/store.py's store_error_answer).

Who may: the receiving broker checks the client's principal (cluster_allowed); the controller then
sees the forwarding broker's principal, not the client's. Kafka wraps the request in an Envelope
(KIP-590) whose sender must hold CLUSTER_ACTION and runs it as the client inside; without an Envelope
the same trust is given here: a request marked forwarded is taken without the client's check only from
a connection whose principal holds CLUSTER_ACTION on the cluster (a broker), so a client that sets the
marker itself is checked as any other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from broker.cluster.store import StoreError, store_error_answer
from broker.security.access import Asker, Guarded, allowed_on_cluster
from protocol.enums import Operation
from protocol.errors import CodedError, ErrorCode
from protocol.framing import Request

Response = TypeVar("Response")


# What routing reads of the broker (handlers' BrokerContext is one), as Protocols.
class ControllerRole(Protocol):
    @property
    def active(self) -> bool: ...


class ControllerRoute(Protocol):
    """The cluster (cluster/cluster.py's Cluster): whether this broker controls, and the way to the one that does."""

    FORWARDED_CLIENT_ID: str

    @property
    def controller(self) -> ControllerRole: ...
    async def forward_to_controller(self, body: Any, version: int, timeout_s: float) -> Any: ...


class RoutedBroker(Protocol):
    @property
    def node_id(self) -> int: ...
    @property
    def cluster(self) -> ControllerRoute | None: ...


class GuardedRoutedBroker(Guarded, RoutedBroker, Protocol):
    pass


def cluster_allowed(broker: GuardedRoutedBroker, request: Request[Any], connection: Asker,
                    operation: Operation) -> bool:
    """`operation` on the cluster for the client, or a forward from a broker (CLUSTER_ACTION) that
    checked the client already."""
    cluster = broker.cluster
    if (cluster is not None and request.header.client_id == cluster.FORWARDED_CLIENT_ID
            and allowed_on_cluster(broker, connection, Operation.CLUSTER_ACTION)):
        return True
    return allowed_on_cluster(broker, connection, operation)


async def on_the_controller(broker: RoutedBroker, request: Request[Any], run: Callable[[], Awaitable[Response]],
                            refuse: Callable[[ErrorCode, str], Response]) -> Response:
    cluster = broker.cluster
    try:
        if cluster is None or cluster.controller.active:
            return await run()  # a controller that loses its role meanwhile raises NOT_CONTROLLER
        if request.header.client_id == cluster.FORWARDED_CLIENT_ID:
            return refuse(ErrorCode.NOT_CONTROLLER, f"broker {broker.node_id} is no longer the controller")
        timeout_s = max(getattr(request.body, "timeout_ms", 30_000), 1000) / 1000
        return await cluster.forward_to_controller(request.body, request.api_version, timeout_s)
    except CodedError as exc:
        return refuse(exc.error_code, exc.message)
    except StoreError as exc:  # ZooKeeper lost, or a full disk: every partition fails, the connection stays
        return refuse(*store_error_answer(exc))
