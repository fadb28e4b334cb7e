"""The loop for Spark's own Kafka connector (format("kafka")), which commits no offsets to Kafka: a
StreamingQueryListener that commits each finished micro-batch's end offsets to a consumer group, so
that the broker's `retention.committed.groups` trims behind the query as it does behind
format("ebb") with kafka.group.id. It takes format("ebb") sources too, whose own commit of a batch
waits for the next trigger: the listener commits as soon as the batch is done, so a query stopped
right after a batch leaves nothing uncommitted.

    spark.streams.addListener(GroupCommitListener("stage2", {"kafka.bootstrap.servers": "broker:9092"},
                                                  query_name="stage2"))

Spark reports a batch's progress after the batch is in the query's commit log (the last batch of an
AvailableNow run too), so a committed offset is never ahead of what the query has durably processed.
The checkpoint stays the source of truth for restarts; the group only reports progress. Sources
other than the Kafka connector's, and queries not named `query_name` when it is given, are left
alone. A failed commit is logged and the next batch's commit covers it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import structlog
from pyspark.sql.streaming import StreamingQueryListener

from client import Admin, TopicPartition

from .config import security_options
from .groups import commit_offsets
from .options import EbbSourceError, bootstrap_servers

log = structlog.get_logger("pipeline.connector_commits")
# How a query's progress describes the Kafka connector's source, and any Python data source's (ebb's)
SOURCES = ("KafkaV2[", "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream")


def source_offsets(progress) -> dict[TopicPartition, int]:
    """The end offsets of the Kafka connector's and ebb's sources in one progress report: both write
    them as {"topic": {"partition": offset}}; a Python source whose offsets look otherwise is not ours."""
    out: dict[TopicPartition, int] = {}
    for source in progress.sources:
        if not source.description.startswith(SOURCES) or not source.endOffset:
            continue
        offsets = json.loads(source.endOffset)
        if not _topic_offsets(offsets):
            continue
        for topic, partitions in offsets.items():
            for partition, offset in partitions.items():
                out[TopicPartition(topic, int(partition))] = offset
    return out


def _topic_offsets(offsets) -> bool:
    return isinstance(offsets, dict) and all(
        isinstance(parts, dict) and all(p.isdigit() and type(o) is int and o >= 0 for p, o in parts.items())
        for parts in offsets.values())


class GroupCommitListener(StreamingQueryListener):
    def __init__(self, group_id: str, options: Mapping[str, str], *, query_name: str | None = None):
        """`options`: the Kafka options the query reads with (kafka.bootstrap.servers and any
        kafka.security.protocol/kafka.sasl.*/kafka.ssl.*); others are not looked at."""
        if not group_id or not group_id.strip():
            raise EbbSourceError("GroupCommitListener needs a group id")
        self.group_id = group_id
        self.query_name = query_name
        self.bootstrap = bootstrap_servers(options)
        self.security = security_options(options)
        self.committed: dict[TopicPartition, int] = {}  # the last offsets this listener committed
        # One connection for every batch (TLS and SASL are not redone per batch), dropped on a failure
        # and when a query ends; Spark calls a listener for one event at a time.
        self._runner: asyncio.Runner | None = None
        self._admin: Admin | None = None

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        self._disconnect()

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        if self.query_name is not None and progress.name != self.query_name:
            return
        offsets = source_offsets(progress)
        if not offsets or all(self.committed.get(tp) == o for tp, o in offsets.items()):
            return
        try:
            self._commit(offsets)
            self.committed.update(offsets)
        except Exception as exc:  # the listener bus must go on; the next batch commits again
            log.warning("group commit failed", group_id=self.group_id, batch=progress.batchId, error=str(exc))
            self._disconnect()

    def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if self._runner is None or self._admin is None:
            self._runner = asyncio.Runner()
            self._admin = Admin(self.bootstrap, client_id="ebb-spark-commits",
                                security=self.security.client_security())
            self._runner.run(self._admin.start())
        self._runner.run(commit_offsets(self._admin, self.group_id, offsets))

    def _disconnect(self) -> None:
        runner, admin, self._runner, self._admin = self._runner, self._admin, None, None
        if runner is not None:
            try:
                if admin is not None:
                    runner.run(admin.close())
            finally:
                runner.close()
