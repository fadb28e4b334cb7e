"""The "ebb" data source: Ebb topics as Spark DataFrames, batch and streaming, read and write.

    spark.dataSource.register(EbbDataSource)
    df = (spark.read.format("ebb").option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

The schema and the options follow Spark's Kafka connector (docs/pipeline.md lists them).
Readers and writers parse their options where Spark creates them, so bad options fail before
any task runs; the broker is only contacted in partitions()/offset calls (driver) and read()/write()
(executors).
"""

from __future__ import annotations

import asyncio
import time

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from client import Admin

from .config import ReadConfig, WriteConfig
from .fast_read import read_batches
from .fast_write import write_batches
from .options import EbbSourceError, flag, from_json_offsets, to_json_offsets
from .planning import (
    OffsetRange,
    Offsets,
    connect,
    latest_for_stream,
    latest_now,
    plan_batch,
    quiet_client_logs,
    stream_ranges,
    stream_start,
)
from .progress import GroupProgress
from .transfer import check_topic_exists

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int")
HEADERS = "headers array<struct<key: string, value: binary>>"


class EbbDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "ebb"

    def schema(self) -> str:
        return SCHEMA + (", " + HEADERS if flag(self.options, "includeHeaders", False) else "")

    def reader(self, schema) -> DataSourceReader:
        return EbbBatchReader(ReadConfig.from_options(self.options, streaming=False))

    def streamReader(self, schema) -> DataSourceStreamReader:
        return EbbStreamReader(ReadConfig.from_options(self.options, streaming=True))

    def writer(self, schema, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise EbbSourceError("save mode overwrite is not supported: a topic can only be appended to")
        return EbbBatchWriter(_checked(WriteConfig.from_options(self.options, schema)))

    def streamWriter(self, schema, overwrite: bool) -> DataSourceStreamWriter:
        # overwrite means output mode "complete": like the Kafka sink, each batch appends the whole result
        return EbbStreamWriter(_checked(WriteConfig.from_options(self.options, schema)))


def _checked(config: WriteConfig) -> WriteConfig:
    """Spark creates writers on the driver before any task runs: a missing topic fails here, not after
    the whole computation."""
    if config.topic is not None:
        quiet_client_logs()
        asyncio.run(check_topic_exists(config))
    return config


def _read(config: ReadConfig, partition):
    if isinstance(partition, OffsetRange):  # with nothing to read, Spark may still run one empty partition
        yield from read_batches(config, partition)


class EbbBatchReader(DataSourceReader):
    def __init__(self, config: ReadConfig):
        self.config = config

    def partitions(self) -> list[OffsetRange]:
        quiet_client_logs()
        return asyncio.run(plan_batch(self.config))

    def read(self, partition: OffsetRange):
        return _read(self.config, partition)


class EbbStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {topic: {"partition": offset}}, the JSON of the connector's startingOffsets.

    Spark keeps one instance of this class for the whole query in a long-lived Python process and calls
    the offset methods on it, as often as every few milliseconds when idle; that instance keeps one Admin
    connection on its own event loop. A second instance is pickled to the executors for read() and
    never connects here.
    """

    def __init__(self, config: ReadConfig):
        self.config = config
        self._initial: dict | None = None
        self._available_now: dict | None = None
        self._runner: asyncio.Runner | None = None
        self._admin: Admin | None = None
        self._progress: GroupProgress | None = None
        self._last_batch_at: float | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_runner": None, "_admin": None, "_progress": None}

    def _call(self, operation):
        """Run `operation(admin)` on the kept connection; after a failure the next call reconnects."""
        if self._runner is None:
            quiet_client_logs()
            self._runner = asyncio.Runner()
        try:
            if self._admin is None:
                self._admin = self._runner.run(connect(self.config).start())
            return self._runner.run(operation(self._admin))
        except BaseException:
            self._close_admin()
            raise

    def _close_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            self._runner.run(admin.close())

    def initialOffset(self) -> dict:
        # Spark asks twice for batch 0; with "latest" the two answers could differ, so keep the first.
        if self._initial is None:
            self._initial = to_json_offsets(self._call(lambda admin: stream_start(admin, self.config)))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.config.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # the cap: what is there now; partitions that appear later wait for the next run
        self._available_now = self._call(lambda admin: latest_now(admin, self.config))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_offsets = from_json_offsets(start)
        # `start` ends a batch already in the commit log (pipeline/progress.py): report it to the group
        if self.config.group_id is not None:
            if self._progress is None:
                self._progress = GroupProgress(self.config)
            self._progress.batch_done(self._call, start_offsets)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = self._call(lambda admin: latest_for_stream(admin, self.config, start_offsets, self._available_now,
                                                         max_rows))
        if self._wait_for_more(start_offsets, end):
            return start
        return to_json_offsets(end)

    def _wait_for_more(self, start: Offsets, end: Offsets) -> bool:
        """minOffsetsPerTrigger: hold a small backlog back until it grows or maxTriggerDelay passes since the
        last batch (AvailableNow drains what is there instead, as the connector does)."""
        low = self.config.min_offsets_per_trigger
        now = time.monotonic()
        if self._last_batch_at is None:
            self._last_batch_at = now  # the query's start counts as the last batch
        backlog = sum(offset - start.get(tp, 0) for tp, offset in end.items())
        if backlog <= 0:
            return False
        if low is not None and self._available_now is None and backlog < low \
                and now - self._last_batch_at < self.config.max_trigger_delay_s:
            return True
        self._last_batch_at = now
        return False

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        return stream_ranges(from_json_offsets(start), from_json_offsets(end), self.config.min_partitions)

    def read(self, partition: OffsetRange):
        return _read(self.config, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark calls this a batch late (never for the last one); latestOffset reports progress."""

    def stop(self) -> None:
        # Spark may kill this process instead of calling stop(): nothing here may matter for correctness.
        if self._progress is not None:
            self._progress.close()
        if self._runner is not None:
            self._close_admin()
            self._runner.close()
            self._runner = None


class EbbCommitMessage(WriterCommitMessage):
    def __init__(self, records: int):
        self.records = records


class EbbBatchWriter(DataSourceArrowWriter):
    def __init__(self, config: WriteConfig):
        self.config = config

    def write(self, iterator) -> EbbCommitMessage:
        return EbbCommitMessage(write_batches(self.config, iterator))


class EbbStreamWriter(DataSourceStreamArrowWriter):
    """At least once, as the Kafka sink: tasks produce as they go, so a replayed batch is produced again."""

    def __init__(self, config: WriteConfig):
        self.config = config

    def write(self, iterator) -> EbbCommitMessage:
        return EbbCommitMessage(write_batches(self.config, iterator))

    def commit(self, messages, batchId: int) -> None:
        """The records are on the broker already; nothing to finish."""

    def abort(self, messages, batchId: int) -> None:
        """Produced records cannot be taken back; a failed batch is retried by Spark."""
