"""Client quotas through KIP-546's APIs (AlterClientQuotas, DescribeClientQuotas).

An entity is a dict of entity type ("user", "client-id", "ip") to a name, None for the type's default.

    async with Admin("127.0.0.1:9092") as admin:
        await alter_client_quotas(admin, {"user": "alice"}, {"producer_byte_rate": 1048576.0})
        await alter_client_quotas(admin, {"user": "alice"}, {"producer_byte_rate": None})  # removed
        print(await describe_client_quotas(admin, {"user": "alice"}))
"""

from __future__ import annotations

from protocol.enums import ApiKey
from protocol.messages import AlterClientQuotasRequest, DescribeClientQuotasRequest

from .admin import Admin
from .errors import error_for

EXACT, DEFAULT, ANY = 0, 1, 2
Entity = dict[str, "str | None"]


async def alter_client_quotas(admin: Admin, entity: Entity, changes: dict[str, float | None], *,
                              validate_only: bool = False) -> None:
    """Set each key to its value, or remove it (None); the broker's refusal raised as its KafkaError."""
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(validate_only=validate_only, entries=[entry(
        entity=[entry.EntityData(entity_type=kind, entity_name=name) for kind, name in entity.items()],
        ops=[entry.OpData(key=key, value=0.0 if value is None else value, remove=value is None)
             for key, value in changes.items()])])
    conn = await admin.cluster.any_connection()
    response = await conn.request(request, version=conn.pick_version(ApiKey.ALTER_CLIENT_QUOTAS))
    for result in response.entries:
        if result.error_code:
            raise error_for(result.error_code, result.error_message or "AlterClientQuotas")


async def describe_client_quotas(admin: Admin, match: Entity | None = None, *, any_of: tuple[str, ...] = (),
                                 strict: bool = False) -> list[tuple[Entity, dict[str, float]]]:
    """The entities matching: `match` names types exactly (None: the default), `any_of` types with any
    name; with `strict` no other type. Sorted by entity."""
    component = DescribeClientQuotasRequest.ComponentData
    components = [component(entity_type=kind, match_type=DEFAULT if name is None else EXACT, match=name)
                  for kind, name in (match or {}).items()]
    components += [component(entity_type=kind, match_type=ANY, match=None) for kind in any_of]
    conn = await admin.cluster.any_connection()
    response = await conn.request(DescribeClientQuotasRequest(components=components, strict=strict),
                                  version=conn.pick_version(ApiKey.DESCRIBE_CLIENT_QUOTAS))
    if response.error_code:
        raise error_for(response.error_code, response.error_message or "DescribeClientQuotas")
    found = [({part.entity_type: part.entity_name for part in entry.entity},
              {value.key: value.value for value in entry.values}) for entry in response.entries or []]
    return sorted(found, key=lambda item: sorted((k, v or "") for k, v in item[0].items()))
