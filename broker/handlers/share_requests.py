"""What ShareFetch (k78) and ShareAcknowledge (k79) share: the request's checks, its share session,
finding a session partition, and applying acknowledgement batches (broker/share/)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from broker.group import GroupError
from broker.handlers import BrokerContext
from broker.replica import Partition, PartitionError
from broker.request_context import RequestContext
from broker.security.access import allowed
from broker.share.manager import ShareSettings, ShareStateError
from broker.share.partition import ShareError
from broker.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from protocol.enums import Operation, ResourceType
from protocol.errors import ErrorCode

Key = tuple[uuid.UUID, int]


@dataclass
class Outcome:
    """One partition's answer as it is built."""

    error: ErrorCode = ErrorCode.NONE
    acknowledge_error: ErrorCode = ErrorCode.NONE
    acknowledge_message: str | None = None
    partition: Partition | None = None


@dataclass
class ShareRequest:
    group_id: str
    member_id: str
    session: ShareSession
    settings: ShareSettings
    final: bool  # ShareSessionEpoch -1: the session ends with this request
    opened: bool  # ShareSessionEpoch 0: a new session (its first answer lists every partition asked)
    outcomes: dict[Key, Outcome] = field(default_factory=dict)


async def begin(broker: BrokerContext, connection: RequestContext, group_id: str | None, member_id: str | None,
                epoch: int, *, fetch: bool, acknowledging: bool = False) -> ShareRequest:
    """The request-level checks (Kafka's order: group id, member id, READ on the group, the session);
    ShareError for the answer's top level (an empty message stands for none)."""
    if not group_id:
        raise ShareError(ErrorCode.INVALID_GROUP_ID, "the group id is empty")
    if not member_id:
        raise ShareError(ErrorCode.INVALID_REQUEST, "the member id is empty")
    if not allowed(broker, connection, Operation.READ, ResourceType.GROUP, group_id):
        raise ShareError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "")
    if epoch == INITIAL_EPOCH and fetch and acknowledging:  # Kafka's newContext: nothing to acknowledge yet
        raise ShareError(ErrorCode.INVALID_REQUEST, "")
    session = broker.shares.sessions.open_or_continue(group_id, member_id, epoch, fetch=fetch)
    if epoch == INITIAL_EPOCH:  # the session ends with the connection that opened it (as Kafka's)
        connection.share_session = session
    settings = ShareSettings.of(await broker.group_configs.get(group_id), broker.group_configs.broker)
    if epoch == FINAL_EPOCH:
        broker.shares.sessions.close(session)
    return ShareRequest(group_id, member_id, session, settings, final=epoch == FINAL_EPOCH,
                        opened=epoch == INITIAL_EPOCH)


def resolve(broker: BrokerContext, connection: RequestContext, request: ShareRequest, key: Key) -> Outcome:
    """A partition of the request or session: the topic by id, READ on it, this broker its leader."""
    outcome = request.outcomes.get(key)
    if outcome is not None:
        return outcome
    outcome = request.outcomes[key] = Outcome()
    topic = broker.topics.by_id(key[0])
    if topic is None:
        outcome.error = ErrorCode.UNKNOWN_TOPIC_ID
        return outcome
    if not allowed(broker, connection, Operation.READ, ResourceType.TOPIC, topic.name):
        outcome.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return outcome
    try:
        partition = broker.replicas.partition_of(topic, key[1])
        partition.check_leader()
    except PartitionError as exc:
        outcome.error = exc.error_code
        return outcome
    outcome.partition = partition
    return outcome


async def acknowledge(broker: BrokerContext, request: ShareRequest, outcome: Outcome, batches, *,
                      renew: bool) -> None:
    """Apply one partition's AcknowledgementBatches, all or none (Kafka rolls back the batches before a
    refused one); the refusal is the partition's answer. The state is stored with the share coordinator
    before the answer: what was acknowledged survives a restart or a leader move."""
    if outcome.error != ErrorCode.NONE or outcome.partition is None:
        outcome.acknowledge_error = outcome.error
        return
    if not batches:
        return
    share = broker.shares.share_partition(request.group_id, outcome.partition)
    applied = False
    try:
        if share is None:
            raise ShareError(ErrorCode.INVALID_RECORD_STATE, "nothing was acquired from this partition")
        share.acknowledge_all(request.member_id, [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                                                  for b in batches], request.settings.limits, renew_allowed=renew)
        applied = True
    except ShareError as exc:
        outcome.acknowledge_error, outcome.acknowledge_message = exc.error_code, exc.message
    if applied:
        try:
            await broker.shares.persist(request.group_id, outcome.partition, share)
        except ShareStateError as exc:  # applied in memory, not on disk: the client hears it (as Kafka maps it)
            outcome.acknowledge_error, outcome.acknowledge_message = exc.error_code, None


def end_if_final(broker: BrokerContext, connection: RequestContext, request: ShareRequest) -> None:
    """A request with epoch -1 closed the session: the member's records still acquired go back."""
    if not request.final:
        return
    partitions = []
    for key in request.session.partitions:
        outcome = resolve(broker, connection, request, key)
        if outcome.partition is not None:
            partitions.append(outcome.partition)
    broker.shares.end_session(request.group_id, request.member_id, partitions, request.settings.limits.delivery_limit)


async def empty_share_group(broker: BrokerContext, connection: RequestContext, group_id: str, operation: Operation,
                      *, create: bool) -> None:
    """AlterShareGroupOffsets' and DeleteShareGroupOffsets' group checks (ShareError for the top level):
    the id, the ACL, served here, a share group (made Empty when `create`) with no member."""
    if not group_id:
        raise ShareError(ErrorCode.INVALID_GROUP_ID, "")
    if not allowed(broker, connection, operation, ResourceType.GROUP, group_id):
        raise ShareError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "")
    try:
        broker.groups.registry.check_served(group_id)
        group = await broker.groups.share.ensure(group_id) if create else broker.groups.share.existing(group_id)
    except GroupError as exc:
        raise ShareError(exc.error_code, exc.message) from exc
    if group.members:
        raise ShareError(ErrorCode.NON_EMPTY_GROUP, f"Share group {group_id} is not empty.")


def topic_refusal(broker: BrokerContext, connection: RequestContext, name: str, operation: Operation
                  ) -> ErrorCode | None:
    """Why a topic named in an admin request is refused (its ACL, then its existence), or None."""
    if not allowed(broker, connection, operation, ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if broker.topics.get(name) is None else None


def leader_of(outcome: Outcome) -> tuple[int, int]:
    partition = outcome.partition
    if partition is None:
        return -1, -1
    return partition.leader_id if partition.leader_id is not None else -1, partition.leader_epoch
