"""AlterClientQuotas (key 49), versions 0-1 (KIP-546).

Sets or removes quotas of user, client-id and ip entities (and their defaults, a null name), judged as
Kafka 4.3.1's controller judges them, each entity on its own (broker/quotas/store.py); with
validate_only nothing is written. Stored where Kafka's ZooKeeper mode kept them and announced to every
broker of the cluster, which enforce producer_byte_rate and consumer_byte_rate (broker/quotas/manager.py).

Errors, per entity: NONE; INVALID_REQUEST (an empty entity, an unknown entity type, an empty name, ip with
user or client-id, an ip that is neither an address nor a name that resolves, a key the entity does not
take, a value not above 0, fractional or too large for an integral key, a key or an entity named twice);
CLUSTER_AUTHORIZATION_FAILED for all (with an authorizer: ALTER_CONFIGS on the cluster).
"""

from __future__ import annotations

from broker.handlers import BrokerContext, handles
from broker.quotas.entities import QuotaEntity, entity_of
from broker.request_context import RequestContext
from broker.security.access import allowed_on_cluster
from protocol.enums import ApiKey, Operation
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import AlterClientQuotasRequest, AlterClientQuotasResponse

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
_Entry = AlterClientQuotasResponse.EntryData
_Entity = _Entry.EntityData


def _entity(entry: AlterClientQuotasRequest.EntryData) -> QuotaEntity:
    # Kafka reads the parts into a map: a type named twice keeps its last name
    return entity_of({part.entity_type: part.entity_name for part in entry.entity})


def _answer(entity: QuotaEntity, code: int, message: str | None) -> _Entry:
    return _Entry(error_code=code, error_message=message,
                  entity=[_Entity(entity_type=kind, entity_name=name) for kind, name in entity])


@handles(API_KEY, "0-1")
async def alter_client_quotas(broker: BrokerContext, request: Request[AlterClientQuotasRequest],
                              connection: RequestContext) -> AlterClientQuotasResponse:
    body = request.body
    if not allowed_on_cluster(broker, connection, Operation.ALTER_CONFIGS):
        entities = dict.fromkeys(_entity(entry) for entry in body.entries)
        return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
            _answer(entity, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER_CONFIGS on the cluster is needed")
            for entity in entities])
    alterations = [(_entity(entry), [(op.key, None if op.remove else op.value) for op in entry.ops])
                   for entry in body.entries]
    results = await broker.client_quotas.alter(alterations, body.validate_only)
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        _answer(entity, code, message) for entity, code, message in results])
