"""What the share coordinator's inter-broker APIs (InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary) share: CLUSTER_ACTION on the
cluster, and one answer per partition asked, grouped by topic id as asked. A request naming no group,
no topic or (but for InitializeShareGroupState) a topic with no partition is answered with no result,
as Kafka's ShareCoordinatorService answers it; a coordinator not active (starting or stopping) answers
COORDINATOR_NOT_AVAILABLE for every partition asked, before those checks for Initialize, Delete and
ReadSummary, after them for Read and Write (Kafka 4.3.1's order)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.handlers import BrokerContext
from broker.request_context import RequestContext
from broker.security.access import allowed_on_cluster
from broker.share.state_log import StateKey
from protocol.enums import Operation
from protocol.errors import ErrorCode


async def answer_each(broker: BrokerContext, connection: RequestContext, body: Any, result: Callable[..., Any],
                      answer: Callable[[StateKey, Any], Awaitable[Any]],
                      refused: Callable[[Any, ErrorCode], Any], *, empty_topics_checked: bool = True,
                      inactive_first: bool = False) -> list[Any]:
    """`answer(key, asked)` each partition asked, or `refused(asked, CLUSTER_AUTHORIZATION_FAILED)`
    them all without CLUSTER_ACTION; `result(topic_id=, partitions=)` per topic. `inactive_first`: the
    coordinator's being inactive is answered before the empty group and topic checks."""
    authorized = allowed_on_cluster(broker, connection, Operation.CLUSTER_ACTION)
    if authorized and inactive_first and not broker.share_coordinator.active:
        return [result(topic_id=topic.topic_id,
                       partitions=[refused(asked, ErrorCode.COORDINATOR_NOT_AVAILABLE) for asked in topic.partitions])
                for topic in body.topics]
    if authorized and (not body.group_id or not body.topics or (
            empty_topics_checked and any(not topic.partitions for topic in body.topics))):
        return []
    results = []
    for topic in body.topics:
        answers = []
        for asked in topic.partitions:
            if authorized:
                answers.append(await answer((body.group_id, topic.topic_id, asked.partition), asked))
            else:
                answers.append(refused(asked, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
        results.append(result(topic_id=topic.topic_id, partitions=answers))
    return results


def message_of(code: ErrorCode) -> str | None:
    return None if code == ErrorCode.NONE else code.name
