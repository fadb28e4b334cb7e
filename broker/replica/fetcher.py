"""Following a leader: one `ReplicaFetcher` per leader broker pulls every partition this broker
follows there, as Kafka's ReplicaFetcherThread does.

The loop sends one Fetch at a time: ReplicaId is this broker, and each partition asks from its log end
offset with the epoch of its last batch (LastFetchedEpoch), its current leader epoch and its log start
offset, long-polling up to replica.fetch.wait.max.ms. Per partition in the answer:
- DivergingEpoch: our log and the leader's part ways at that epoch's end offset; truncate there
  and ask again (the leader sends no records with it);
- records: appended as the leader wrote them (offsets and epochs kept), whole batches only. The high
  watermark follows the leader's, capped at our log end. The log start offset follows the leader's,
  made durable before the next Fetch reports it, so the leader's low watermark never counts a start
  that a crash here could undo;
- OFFSET_OUT_OF_RANGE: our log end lies outside the leader's log. Below its start: start empty at
  its start; above its end (a leader elected without our tail): truncate to its end;
- NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION:
  one side's metadata is behind; the partition waits replica.fetch.backoff.ms and tries again, until
  the metadata change moves it to another fetcher or stops it.
A lost connection backs off and reconnects; partitions stay. The fetches run in a fetch session
(KIP-227, fetch_session_handler.py) as Kafka's do: after the first, each names only the partitions
whose position changed, and the answer carries only partitions with news.

Throttling (broker/replica/throttle.py, Kafka's shouldFollowerThrottle): a partition of the
follower.replication.throttled.replicas here that is not caught up (its log end below the leader's
high watermark at the last answer, or no answer yet) is left out of the Fetch while the follower quota
is exceeded (in the session, it is forgotten until it is fetched again); when every ready partition
is left out the fetcher waits replica.fetch.backoff.ms. The bytes appended for throttled partitions
are recorded, caught up or not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import structlog

from broker.aio import wait_for
from broker.log import LogError, TopicPartition
from broker.log.free_space import LowDiskSpaceError
from broker.log.repeated_failure import RepeatedFailure
from broker.replica.fetch_session_handler import FetchSessionHandler
from protocol.enums import IsolationLevel, SpecialTimestamp
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, ListOffsetsRequest
from protocol.records import iter_batches

if TYPE_CHECKING:
    from broker.config import ReplicationConfig
    from broker.replica.partition import Partition
    from broker.replica.throttle import ReplicationQuota
    from client.security import ClientSecurity

log = structlog.get_logger("fetcher")

FETCH_VERSION = 12  # topic names, LastFetchedEpoch/DivergingEpoch, LogStartOffset
LIST_OFFSETS_VERSION = 7
_SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                             ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR})
_RETRY_LATER = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                          ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                          ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REPLICA_NOT_AVAILABLE})


def _last_batch_epoch(plog) -> int:
    """LastFetchedEpoch: the epoch of the last batch in the log (-1 for an empty one). Not the latest
    epoch cache entry: a replica that led notes its epoch before writing anything under it, and a new
    leader that never saw that epoch could not place it."""
    end = plog.log_end_offset
    return plog.epoch_cache.epoch_at(end - 1) if end > plog.log_start_offset else -1


def whole_batches(records: bytes | memoryview | None) -> memoryview:
    """The complete batches at the front of a Fetch answer (a size-limited answer may end in a cut one)."""
    view = memoryview(records or b"")
    end = 0
    for batch in iter_batches(view, allow_partial_tail=True):
        end = batch.position + batch.size
    return view[:end]


_APPLY_FAILED = "follower could not apply the leader's answer"
_START_NOT_KEPT = "follower could not keep the leader's log start offset"


class ReplicaFetcher:
    """Fetches every partition followed on one leader broker."""

    def __init__(self, node_id: int, leader_id: int, endpoint: Callable[[int], tuple[str, int] | None],
                 make_starts_durable: Callable[[Sequence[Partition]], Awaitable[dict[Partition, LogError]]],
                 config: ReplicationConfig, security: ClientSecurity | None = None,
                 throttle: ReplicationQuota | None = None) -> None:
        """`endpoint`: where a broker id listens (None while it is not registered); `make_starts_durable`:
        the replica manager's one way to put moved log start offsets on disk (the ones that failed come
        back); `security`: TLS and SASL for the inter-broker listener; `throttle`: the follower quota."""
        self.node_id = node_id
        self.security = security
        self.endpoint = endpoint
        self.make_starts_durable = make_starts_durable
        self.leader_id = leader_id
        self.config = config
        self.throttle = throttle
        self.partitions: dict[TopicPartition, Partition] = {}
        self._caught_up: set[TopicPartition] = set()  # at the leader's high watermark at the last answer
        self._delayed: dict[TopicPartition, float] = {}  # loop time before which a partition is skipped
        # A follower on a low dir is refused every fetch-backoff: logged once, then summarised.
        self._failing: dict[tuple[str, TopicPartition], RepeatedFailure] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._connection = None
        self._session = FetchSessionHandler()
        self.fetches = 0  # answered Fetch requests, for tests and logs

    # --- membership ------------------------------------------------------------------------------

    def add(self, partition: Partition) -> None:
        self.partitions[partition.topic_partition] = partition
        self._delayed.pop(partition.topic_partition, None)
        self._caught_up.discard(partition.topic_partition)  # a new term: not in sync until an answer says so
        self._changed.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self._delayed.pop(tp, None)
        self._caught_up.discard(tp)
        for key in [key for key in self._failing if key[1] == tp]:
            del self._failing[key]

    def _failed(self, event: str, tp: TopicPartition, error: str) -> None:
        failure = self._failing.get((event, tp))
        if failure is None:
            failure = self._failing[(event, tp)] = RepeatedFailure(log, event)
        failure.failed(partition=str(tp), leader=self.leader_id, error=error)
        self._delay(tp)

    def _succeeded(self, event: str, tp: TopicPartition) -> None:
        failure = self._failing.pop((event, tp), None)
        if failure is not None:
            failure.succeeded(partition=str(tp), leader=self.leader_id)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._disconnect()

    # --- the loop --------------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            ready = self._ready(loop.time())
            if not ready:
                await self._wait_for_work(loop)
                continue
            ready = self._unthrottled(ready)
            if not ready:  # every ready partition held back by the follower quota: try again later
                await self._wait_for_work(loop, self.config.fetch_backoff_ms / 1000)
                continue
            epochs = {tp: p.leader_epoch for tp, p in ready.items()}
            try:
                connection = await self._connect()
                reply = await connection.request(self._fetch_request(ready), version=FETCH_VERSION)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # connection refused or lost, timeout: try again later
                log.info("fetch from leader failed", leader=self.leader_id, error=repr(exc))
                self._session.failed()
                await self._disconnect()
                await asyncio.sleep(self.config.fetch_backoff_ms / 1000)
                continue
            self.fetches += 1
            if not self._session.answered(reply) and reply.error_code in _SESSION_ERRORS:
                # evicted, or the leader restarted: the next fetch is full again, at once (as Kafka)
                log.info("fetch session lost", leader=self.leader_id, error=ErrorCode(reply.error_code).name)
                continue
            if reply.error_code != ErrorCode.NONE:
                log.warning("leader refused the fetch", leader=self.leader_id, error=ErrorCode(reply.error_code).name)
                await asyncio.sleep(self.config.fetch_backoff_ms / 1000)
                continue
            starts_moved: list[Partition] = []
            for topic in reply.responses:
                for answer in topic.partitions:
                    tp = TopicPartition(topic.topic, answer.partition_index)
                    partition = ready.get(tp)
                    if partition is None or self.partitions.get(tp) is not partition \
                            or partition.is_leader or partition.leader_epoch != epochs[tp]:
                        continue  # removed, replaced or in another term since the fetch went out
                    if await self._take(partition, answer):
                        starts_moved.append(partition)
            failed = await self.make_starts_durable(starts_moved) if starts_moved else {}
            for partition in starts_moved:
                tp = partition.topic_partition
                if partition in failed:
                    self._failed(_START_NOT_KEPT, tp, failed[partition].message)
                else:
                    self._succeeded(_START_NOT_KEPT, tp)

    def _ready(self, now: float) -> dict[TopicPartition, Partition]:
        return {tp: p for tp, p in self.partitions.items()
                if self._delayed.get(tp, 0.0) <= now and not p.log.offline}

    def _unthrottled(self, ready: dict[TopicPartition, Partition]) -> dict[TopicPartition, Partition]:
        throttle = self.throttle
        if throttle is None or not throttle.exceeded():
            return ready
        return {tp: p for tp, p in ready.items() if tp in self._caught_up or not throttle.is_throttled(tp)}

    async def _wait_for_work(self, loop, at_most: float | None = None) -> None:
        self._changed.clear()
        upcoming = [t for tp, t in self._delayed.items() if tp in self.partitions]
        if at_most is not None:
            upcoming.append(loop.time() + at_most)
        timeout = max(0.0, min(upcoming) - loop.time()) if upcoming else None
        try:
            await wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            pass

    def _delay(self, tp: TopicPartition) -> None:
        self._delayed[tp] = asyncio.get_running_loop().time() + self.config.fetch_backoff_ms / 1000

    def _fetch_request(self, ready: dict[TopicPartition, Partition]) -> FetchRequest:
        by_topic: dict[str, list] = {}
        for tp, partition in sorted(ready.items()):
            plog = partition.log
            by_topic.setdefault(tp.topic, []).append(FetchRequest.FetchTopic.FetchPartition(
                partition=tp.partition, current_leader_epoch=partition.leader_epoch,
                fetch_offset=plog.log_end_offset, last_fetched_epoch=_last_batch_epoch(plog),
                log_start_offset=plog.log_start_offset, partition_max_bytes=self.config.fetch_max_bytes))
        config = self.config
        request = FetchRequest(
            replica_id=self.node_id, max_wait_ms=config.fetch_wait_max_ms, min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_response_max_bytes, isolation_level=IsolationLevel.READ_UNCOMMITTED, rack_id="")
        self._session.build(by_topic, request)  # the session's fields, and which partitions go
        return request

    # --- one partition's answer ------------------------------------------------------------------

    async def _take(self, partition: Partition, answer) -> bool:
        """_apply, its failures counted into one streak per partition: True when the start moved."""
        tp = partition.topic_partition
        try:
            moved = await self._apply(partition, answer)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failed(_APPLY_FAILED, tp, getattr(exc, "message", repr(exc)))
            return False
        # On a dir still low an answer that needed no append (a reset to the leader's new start after a
        # deletion) shows nothing: the next append is refused until a reading finds room, so the streak
        # ends only once the dir has room.
        space = partition.log.space
        if space is None or not space.low:
            self._succeeded(_APPLY_FAILED, tp)
        return moved

    async def _apply(self, partition: Partition, answer) -> bool:
        """True when the answer moved the partition's log start offset (still to be made durable)."""
        tp = partition.topic_partition
        error = ErrorCode(answer.error_code)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._reset_out_of_range(partition)
            return False
        if error in _RETRY_LATER:
            log.info("leader cannot serve this partition now", partition=str(tp), leader=self.leader_id,
                     error=error.name)
            self._delay(tp)
            return False
        if error != ErrorCode.NONE:
            log.warning("fetch error", partition=str(tp), leader=self.leader_id, error=error.name)
            self._delay(tp)
            return False
        diverging = answer.diverging_epoch
        if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
            await partition.truncate_as_follower(diverging.epoch, diverging.end_offset)
            return False
        records = whole_batches(answer.records)
        if len(records):
            try:
                await partition.append_as_follower(records)
            except LowDiskSpaceError:
                # A full follower still follows the leader's deletions: they may be what frees its disk.
                if partition.follow_leader_offsets(answer.high_watermark, answer.log_start_offset):
                    await self.make_starts_durable([partition])
                raise
            if self.throttle is not None and self.throttle.is_throttled(tp):
                self.throttle.record(len(records))
        if partition.log.log_end_offset >= answer.high_watermark:  # Kafka's lag: 0 is in sync
            self._caught_up.add(tp)
        else:
            self._caught_up.discard(tp)
        return partition.follow_leader_offsets(answer.high_watermark, answer.log_start_offset)

    async def _reset_out_of_range(self, partition: Partition) -> None:
        """Kafka's handleOutOfRangeError: ask the leader for its earliest and latest offsets."""
        tp = partition.topic_partition
        connection = await self._connect()
        earliest = await self._list_offset(connection, partition, SpecialTimestamp.EARLIEST)
        latest = await self._list_offset(connection, partition, SpecialTimestamp.LATEST)
        end = partition.log.log_end_offset
        if end > latest:
            log.warning("follower log ends past the leader's; truncating", partition=str(tp), log_end_offset=end,
                        leader_log_end_offset=latest)
            await partition.truncate_log_to(latest)
        elif end < earliest:
            log.info("follower log ends before the leader's start; starting over there", partition=str(tp),
                     log_end_offset=end, leader_log_start_offset=earliest)
            await partition.restart_log_at(earliest)
            await partition.log.make_start_offset_durable()
        else:
            self._delay(tp)  # in range by now (the leader moved); try again after a pause

    async def _list_offset(self, connection, partition: Partition, timestamp: int) -> int:
        tp = partition.topic_partition
        wanted = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=tp.partition, current_leader_epoch=partition.leader_epoch, timestamp=timestamp)
        reply = await connection.request(ListOffsetsRequest(
            replica_id=self.node_id, isolation_level=IsolationLevel.READ_UNCOMMITTED,
            timeout_ms=self.config.socket_timeout_ms,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=tp.topic, partitions=[wanted])]),
            version=LIST_OFFSETS_VERSION)
        answer = reply.topics[0].partitions[0]
        if answer.error_code != ErrorCode.NONE:
            raise LogError(ErrorCode(answer.error_code),
                           f"{tp}: the leader answered ListOffsets with {ErrorCode(answer.error_code).name}")
        return answer.offset

    # --- the connection --------------------------------------------------------------------------

    async def _connect(self):
        from client.connection import BrokerConnection  # the project's client; imported late (start-up time)

        if self._connection is not None and self._connection.connected:
            return self._connection
        endpoint = self.endpoint(self.leader_id)
        if endpoint is None:
            raise ConnectionError(f"broker {self.leader_id} is not registered")
        host, port = endpoint
        timeout_s = (self.config.socket_timeout_ms + self.config.fetch_wait_max_ms) / 1000
        self._connection = await BrokerConnection(
            host, port, node_id=self.leader_id, client_id=f"ebb-replica-fetcher-{self.node_id}",
            request_timeout_s=timeout_s, connect_timeout_s=self.config.socket_timeout_ms / 1000,
            security=self.security).connect()
        return self._connection

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                await connection.close()
            except Exception:  # already gone
                pass

