"""Fetch (key 1), versions 4-16.

Topics are named up to v12 and identified by topic id from v13 (librdkafka uses v16 with ids); an
unknown id is UNKNOWN_TOPIC_ID, an unknown name or partition UNKNOWN_TOPIC_OR_PARTITION.

Sessions (KIP-227, broker/fetch_sessions.py): SessionEpoch -1 is sessionless (SessionId 0 in the
answer); epoch 0 is a full fetch asking for a session (the answer's SessionId, or 0 when the cache
has no slot); any other epoch continues a session: its partitions are every cached one with the
request's changes and forgotten topics applied, and the answer carries only the partitions with
something new. A consumer's session partition whose last answer was empty at the end of what it may
read is not looked up or read again while its state is the one that answer came from
(broker/handlers/fetch_quiet.py): it would be left out anyway; a request that will wait reads every
partition, so that all are watched. A SessionId in a full fetch closes that session first. Session
errors come at the top level with SessionId 0 and no partitions: FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
(also, with the session's id, when another request moved the epoch while this one waited),
FETCH_SESSION_TOPIC_ID_ERROR (a session made with topic ids continued below v13, or the reverse).
A consumer without a session (librdkafka) has its partitions' resolve kept on its connection while
nothing it read changed (broker/handlers/fetch_resolve.py).

Per partition, as Kafka's ReplicaManager.readFromLog:
- CurrentLeaderEpoch (v9+) older than ours: FENCED_LEADER_EPOCH; newer: UNKNOWN_LEADER_EPOCH;
- an offset below the log start offset or above the log end offset: OFFSET_OUT_OF_RANGE with
  HighWatermark, LastStableOffset and LogStartOffset all -1;
- consumers read up to the high watermark (READ_UNCOMMITTED) or the last stable offset
  (READ_COMMITTED; it equals the high watermark while no transaction is open), so a fetch at or
  past it returns empty records; followers (ReplicaId >= 0) read up to the log end offset and report
  their log end and start offsets (LastFetchedEpoch gives them a DivergingEpoch when their log
  diverged);
- whole batches are returned; the first batch may start below the fetch offset (clients skip
  what they did not ask for). MaxBytes and PartitionMaxBytes bound the response, except that the
  first batch of the first partition with data is returned even if larger (KIP-74);
- LogStartOffset (v5+) is always the partition's; AbortedTransactions is null for READ_UNCOMMITTED;
  for READ_COMMITTED it lists the aborted transactions (producer id, first offset) that overlap the
  records returned, from the aborted-transaction index (broker/log/txn_index.py), and the records
  end before the last stable offset (Partition.last_stable_offset).

Reading from the closest replica (KIP-392): with replica.selector.class set (Kafka's
RackAwareReplicaSelector), a consumer's Fetch from v11 naming a rack is answered, for each partition
led here that an in-sync follower of that rack can serve from the fetch offset, with that follower as
PreferredReadReplica, the leader's offsets, no records and no aborted transactions, at once
(broker/replica/read_replica.py); a follower serves consumers from v11 up to its high watermark.

Replication throttles (broker/replica/throttle.py): while the leader quota is exceeded, a follower
not in the ISR of a partition in leader.replication.throttled.replicas here gets that partition's
answer without records (offsets and errors as usual), as Kafka's readFromLog does; the bytes sent to
followers for throttled partitions are recorded against the quota.

Long polling: when nothing failed and fewer than MinBytes are available, the request parks in the
fetch purgatory keyed by its partitions for up to MaxWaitMs; appends, high watermark and log start
offset moves wake it, nothing polls. A follower's fetch also completes (or does not park) when the
leader's log start offset moved past the one the follower reported, as far as the follower can move
its own (up to the high watermark and its fetch offset): it learns the new start at once, makes it
durable and fetches again, and the low watermark, and a DeleteRecords waiting for it, follows within
a round trip instead of at the end of MaxWaitMs (issue 19). Record bytes are read from the file
ranges the log returns, from the page cache without blocking or else off the event loop
(broker/log/slices.py), and written to the socket without another copy — or, on plain TCP when
they are all in the page cache, not read at all: the connection sends them from the segment files
with sendfile (broker/file_sender.py), as Kafka does.

Errors: NONE, FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR (top
level), TOPIC_AUTHORIZATION_FAILED (with an authorizer:
READ on the topic, CLUSTER_ACTION for replicas), UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID,
OFFSET_OUT_OF_RANGE, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER,
KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from broker.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, CachedPartition, FetchSession, next_epoch, topic_key
from broker.handlers import BrokerContext, handles
from broker.handlers.cluster_view import alive_brokers
from broker.handlers.fetch_quiet import not_quiet, read_state, remember_quiet
from broker.handlers.fetch_resolve import Wanted, resolve, resolve_consumer
from broker.log import LogError, Offset, ReadBound
from broker.log.file_region import release_slices
from broker.quotas.manager import cap_fetch, fetch_throttle
from broker.replica import PartitionError
from broker.replica.read_replica import preferred_read_replica
from broker.request_context import RequestContext
from broker.security.access import allowed, allowed_on_cluster
from protocol import fastpath, fetch_request
from protocol.enums import ApiKey, IsolationLevel, Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.framing import Request
from protocol.messages import FetchRequest, FetchResponse

API_KEY = ApiKey.FETCH
_TopicResponse = FetchResponse.FetchableTopicResponse
_PartitionData = _TopicResponse.PartitionData
# Errors Kafka gives before its replica manager reads (FetchResponse.partitionResponse): these carry an
# empty AbortedTransactions list, the replica manager's errors a null one.
_REFUSED_BEFORE_READING = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_TOPIC_ID,
                                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})

@handles(API_KEY, "4-16", decode=fetch_request.decode_fetch_request, encode=fastpath.encode_fetch_response)
async def fetch(broker: BrokerContext, request: Request[FetchRequest], connection: RequestContext) -> FetchResponse:
    body = request.body
    version = request.api_version
    replicas = broker.replicas
    asked = body.topics
    session: FetchSession | None = None  # the session this incremental fetch continues
    cached: list[CachedPartition] = []  # its partitions, in the order of `asked`
    wants_session = False
    if version >= 7 and (body.session_id != 0 or body.session_epoch != FINAL_EPOCH):
        sessions = broker.fetch_sessions
        if body.session_epoch in (FINAL_EPOCH, INITIAL_EPOCH):  # a full fetch closes the session it names
            if body.session_id != 0:
                sessions.remove(body.session_id)
            wants_session = body.session_epoch == INITIAL_EPOCH
        else:
            found = sessions.continue_session(body.session_id, body.session_epoch, version >= 13, body.topics,
                                              body.forgotten_topics_data)
            if isinstance(found, ErrorCode):
                return _session_error(found, 0)
            if found is not None:  # None: the request emptied its session and is answered sessionless
                session = found
    replica_id = body.replica_state.replica_id if version >= 15 else body.replica_id
    follower = replica_id >= 0
    quota = broker.quotas.fetch  # a consumer's byte rate (followers are held by the replication throttles)
    if quota.enabled and not follower:
        cap_fetch(quota, connection, request.header.client_id, body)
    committed = body.isolation_level == IsolationLevel.READ_COMMITTED and not follower
    # A replica's fetch needs CLUSTER_ACTION; a consumer's, READ on each topic. (Partials, not closures:
    # no function object made per Fetch.)
    may_read: Callable[[str], bool] = (
        functools.partial(_every_topic, allowed_on_cluster(broker, connection, Operation.CLUSTER_ACTION)) if follower
        else functools.partial(allowed, broker, connection, Operation.READ, ResourceType.TOPIC))
    # KIP-392: from v11 (the consumer's rack id comes along) a consumer may read a follower's log up to
    # the follower's high watermark; older consumers and replicas are served by the leader only.
    leader_only = follower or version < 11
    skipped = False  # session partitions left unread: nothing changed since their last, empty answer
    if session is not None:
        everything = list(session.partitions.values())
        kept = everything if follower else not_quiet(broker, everything, may_read, committed, leader_only)
        skipped = len(kept) < len(everything)
        asked, cached = session.request_topics(kept)
    if session is None and not wants_session and not follower:  # librdkafka's every Fetch
        topics, wanted = resolve_consumer(broker, asked, version, connection, may_read, leader_only)
    else:
        topics, wanted = resolve(broker, asked, version, replica_id, may_read, leader_only)
    awaited = committed and await _load_transactions(wanted)

    # What each read saw is kept only for a consumer's session (fetch_quiet.py): librdkafka has none
    keep_state = not follower and (session is not None or wants_session)

    # plan(recheck): where each partition's read would come from now: (bytes available, any error)
    limits = (body.max_bytes, replica_id if follower else None, leader_only, committed, keep_state)
    plan = functools.partial(_plan, replicas, wanted, *limits)
    rack_aware = not follower and version >= 11 and bool(body.rack_id) and broker.config.rack_aware_reads
    redirected = rack_aware and _redirect(broker, wanted, body.rack_id, connection.listener_name)
    # Each read keeps its segment files pinned (one pin per partition, which the answer's FileRegion
    # takes over) until slices_to_send has them; a re-plan lets the last reads go, and so does any
    # exception or cancellation before then
    try:
        # Nothing else ran since _resolve unless producer state was loaded (an await): no recheck then
        available, failed = plan(awaited)
        if skipped and body.max_wait_ms > 0 and not failed and available < body.min_bytes and not redirected:
            # It will wait: then every partition of the session is watched and read, as before
            assert session is not None
            _release_reads(wanted)
            asked, cached = session.request_topics()
            topics, wanted = resolve(broker, asked, version, replica_id, may_read, leader_only)
            awaited = committed and await _load_transactions(wanted)
            plan = functools.partial(_plan, replicas, wanted, *limits)
            available, failed = plan(awaited)
        if follower:
            _note_follower_fetches(wanted, replica_id)
        if (body.max_wait_ms > 0 and wanted and not failed and available < body.min_bytes and not redirected
                and not (follower and _start_moved(wanted))):
            def enough() -> bool:
                size, error = plan(True)
                return error or size >= body.min_bytes or (follower and _start_moved(wanted))

            keys = [w.partition.topic_partition for w in wanted if w.partition is not None]
            await replicas.fetches.wait(keys, enough, body.max_wait_ms)
            if rack_aware:  # a follower of the consumer's rack may have caught up meanwhile (Kafka asks again too)
                _redirect(broker, wanted, body.rack_id, connection.listener_name)
            plan(True)
        groups = [w.read.slices if w.read is not None else () for w in wanted]
    except BaseException:
        _release_reads(wanted)
        raise
    chunks = await replicas.slices_to_send(groups, connection.file_regions)
    if session is not None and session.epoch != next_epoch(body.session_epoch):  # a duplicate moved it on
        return _session_error(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id)
    # Over its byte rate or its request_percentage, a consumer is answered no data (its session unchanged)
    if not follower and (quota.enabled or connection.request_time is not None):
        client_id = request.header.client_id
        throttle_ms = fetch_throttle(quota, connection, client_id, sum(map(len, chunks)),
                                     broker.quotas.requests.charge_so_far(connection, client_id))
        if throttle_ms:
            return FetchResponse(throttle_time_ms=throttle_ms, error_code=ErrorCode.NONE,
                                 session_id=session.id if session is not None else 0, responses=[])
    throttled = 0
    session_id = 0
    if session is not None:
        if not follower:
            remember_quiet(zip(cached, wanted, strict=True), committed, leader_only)
        # Only the partitions with news are answered (and pay for their answer's offsets)
        kept_chunks: list = list(chunks)
        wanted, topics = _changed_only(session, cached, wanted, kept_chunks, topics)
        chunks = [records for records in kept_chunks if records is not None]
        session_id = session.id
    for w, records in zip(wanted, chunks, strict=True):
        _answer(w, records, committed)
        size = len(records)  # once: a FileRegion's len is a Python call
        if size and w.partition is not None:
            replicas.counters.fetched(w.partition.topic_partition.topic, size, by_follower=follower)
            if follower and replicas.throttles.leader.is_throttled(w.partition.topic_partition):
                throttled += size
    if throttled:  # what throttled partitions sent counts against the leader quota, in sync or not
        replicas.throttles.leader.record(throttled)
    if wants_session:
        partitions, pairs = _session_partitions(asked, wanted, version >= 13)
        if not follower:
            remember_quiet(pairs, committed, leader_only)
        session_id = broker.fetch_sessions.create(follower, version >= 13, partitions)
    return _fetch_response(session_id, topics)


def _fetch_response(session_id: int, topics: list[_TopicResponse]) -> FetchResponse:
    """The answer without Struct.__init__'s copies of the defaults (once per Fetch); every field set."""
    answer = object.__new__(FetchResponse)
    answer.throttle_time_ms = 0
    answer.error_code = ErrorCode.NONE
    answer.session_id = session_id
    answer.responses = topics
    answer.node_endpoints = []
    return answer


def _session_error(error: ErrorCode, session_id: int) -> FetchResponse:
    return FetchResponse(throttle_time_ms=0, error_code=error, session_id=session_id, responses=[])


def _session_partitions(asked: list[FetchRequest.FetchTopic], wanted: list[Wanted], uses_topic_ids: bool
                        ) -> tuple[dict, list[tuple[CachedPartition, Wanted]]]:
    """A new session's partitions: each asked one with what this answer told the fetcher; and each
    with the partition's read."""
    partitions = {}
    pairs = []
    answers = iter(wanted)
    for topic in asked:
        name = topic_key(topic, uses_topic_ids)
        for part in topic.partitions:
            w = next(answers)
            cached = partitions[(name, part.partition)] = CachedPartition(name, part, w.response.high_watermark,
                                                                          w.response.log_start_offset)
            pairs.append((cached, w))
    return partitions, pairs


def _changed_only(session: FetchSession, cached: list[CachedPartition], wanted: list[Wanted], chunks: list,
                  topics: list[_TopicResponse]) -> tuple[list[Wanted], list[_TopicResponse]]:
    """An incremental answer: the partitions with something new (Kafka's IncrementalFetchContext), and
    their topics; the chunks of the others become None."""
    kept = []
    kept_ids = set()
    for i, (part, w) in enumerate(zip(cached, wanted, strict=True)):
        size = w.read.size if w.read is not None else 0
        partition = w.partition
        if w.error != ErrorCode.NONE or partition is None:  # the offsets _answer would give
            changed = part.changed(w.error, -1, -1, w.response, size)
        else:
            changed = part.changed(w.error, partition.high_watermark, partition.log_start_offset, w.response, size)
        if changed:
            kept.append(w)
            kept_ids.add(id(w.response))
            if size:
                session.moved_to_end(part)
        else:
            chunks[i] = None
    answer = []
    for topic in topics:
        partitions = [p for p in topic.partitions if id(p) in kept_ids]
        if partitions:
            topic.partitions = partitions
            answer.append(topic)
    return kept, answer


async def _load_transactions(wanted: list[Wanted]) -> bool:
    """A READ_COMMITTED reader needs each partition's open transactions: its producer table, loaded
    once (from its snapshot and the log after it) if nothing has loaded it yet. Whether it awaited."""
    awaited = False
    for w in wanted:
        if w.partition is not None and not w.partition.producers_loaded:
            awaited = True
            try:
                await w.partition.load_producer_state()
            except PartitionError as exc:
                w.error, w.partition = exc.error_code, None
    return awaited


def _release_reads(wanted: list[Wanted]) -> None:
    """Let go of the pins of the partitions' reads (_plan's), which no answer will send."""
    for w in wanted:
        read = w.read
        if read is not None:
            w.read = None
            release_slices((read.slices,))


def _note_follower_fetches(wanted: list[Wanted], replica_id: int) -> None:
    """A follower's position counts (high watermark, ISR, low watermark) only where its fetch read from
    this log: not where it diverges or asked out of range (Kafka's updateFollowerFetchState)."""
    for w in wanted:
        if w.partition is not None and w.error == ErrorCode.NONE and w.read is not None:
            try:
                w.partition.update_follower_state(replica_id, w.fetch_offset, w.follower_log_start_offset)
            except PartitionError as exc:
                release_slices((w.read.slices,))
                w.error, w.read, w.partition = exc.error_code, None, None


def _redirect(broker: BrokerContext, wanted: list[Wanted], client_rack: str, listener_name: str) -> bool:
    """KIP-392 with the rack-aware selector: each partition led here that a follower in the consumer's
    rack can serve (broker/replica/read_replica.py) is answered with that follower as PreferredReadReplica
    and not read (Kafka's readFromLog); such an answer goes at once. Whether any partition was."""
    racks = {b.node_id: b.rack for b in alive_brokers(broker, listener_name)}
    now_ms = time.time_ns() // 1_000_000
    redirected = False
    for w in wanted:
        if w.partition is None:
            continue
        chosen = preferred_read_replica(w.partition, w.fetch_offset, client_rack, racks, now_ms)
        if chosen is not None:
            w.response.preferred_read_replica = chosen
            redirected = True
    return redirected


def _every_topic(cluster_action_allowed: bool, name: str) -> bool:
    """A follower may read any topic if it may CLUSTER_ACTION."""
    return cluster_action_allowed


def _plan(replicas, wanted: list[Wanted], max_bytes: int, replica_id: int | None, leader_only: bool,
          committed: bool, keep_state: bool, recheck: bool) -> tuple[int, bool]:
    """Kafka's readFromLog: partitions in request order share MaxBytes; the first one that returns
    data may exceed it with its first batch (KIP-74), the others may not. READ_COMMITTED readers
    stop at the last stable offset. `recheck`: the request awaited since _resolve, so a partition may
    have been deleted or lost its leadership meanwhile. `replica_id`: the follower's (None for a
    consumer); while the leader quota is exceeded, a follower out of the ISR of a throttled partition
    reads nothing of it (Kafka's shouldLeaderThrottle), and the wait for MinBytes counts none of it.
    `keep_state`: note each partition's ReadState (a consumer in a session)."""
    limit = max_bytes
    min_one = True
    total = 0
    failed = False
    follower = replica_id is not None
    bound = ReadBound.LOG_END if follower else ReadBound.HIGH_WATERMARK
    quota = replicas.throttles.leader if follower else None
    held = quota if quota is not None and quota.exceeded() else None
    for w in wanted:
        if w.read is not None:  # a re-plan: the last read's pins go
            release_slices((w.read.slices,))
            w.read = None
        if w.partition is None:
            failed = True
            continue
        w.error = ErrorCode.NONE
        if w.response.preferred_read_replica >= 0:  # sent to a follower (_redirect): the leader reads nothing
            continue
        if recheck:
            if not replicas.still_hosted(w.partition):  # deleted while the request waited
                w.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                failed = True
                continue
            if leader_only and not w.partition.is_leader:  # leadership moved while the request waited
                w.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
                failed = True
                continue
        log_ = w.partition.log
        if follower and w.last_fetched_epoch >= 0 and _diverging(w):
            failed = True
            continue
        try:
            read = log_.read(w.fetch_offset, max(0, min(w.max_bytes, limit)), bound=bound, min_one_batch=min_one,
                             max_offset=w.partition.last_stable_offset if committed else None, pinned=True)
        except LogError as exc:
            w.error = exc.error_code
            failed = True
            continue
        if held is not None and replica_id not in w.partition.isr and held.is_throttled(w.partition.topic_partition):
            release_slices((read.slices,))
            read = read._replace(slices=(), next_offset=Offset(w.fetch_offset))
        w.read = read
        if keep_state:
            w.read_state = read_state(w.partition, committed)
        size = read.size
        total += size
        limit = max(0, limit - size)
        if size:
            min_one = False
    return total, failed


def _start_moved(wanted: list[Wanted]) -> bool:
    """The leader's log start offset is past what a follower reported, by as much as the follower can
    follow now (its start never passes its high watermark, which never passes its fetch offset)."""
    for w in wanted:
        partition = w.partition
        if partition is None or w.follower_log_start_offset < 0:
            continue
        reachable = min(partition.log_start_offset, partition.high_watermark, w.fetch_offset)
        if reachable > w.follower_log_start_offset:
            return True
    return False


def _diverging(w: Wanted) -> bool:
    """A follower whose last fetched epoch ends below its fetch offset here must truncate first."""
    partition = w.partition
    assert partition is not None  # _plan asks only about partitions it found
    cache = partition.log.epoch_cache
    epoch, end_offset = cache.end_offset_for(w.last_fetched_epoch, partition.log.log_end_offset)
    if epoch < 0 <= cache.latest_epoch < w.last_fetched_epoch:
        # An epoch above any here has no end; (-1, -1) would read as "no divergence" on the wire, so
        # point the follower at the end of our latest epoch instead.
        epoch, end_offset = cache.latest_epoch, partition.log.log_end_offset
    if epoch < w.last_fetched_epoch or end_offset < w.fetch_offset:
        w.response.diverging_epoch = _PartitionData.EpochEndOffset(epoch=epoch, end_offset=end_offset)
        w.error = ErrorCode.NONE
        w.read = None
        return True
    return False


def _answer(w: Wanted, records, committed: bool) -> None:
    response = w.response
    response.records = records
    response.error_code = w.error
    if w.error != ErrorCode.NONE or w.partition is None:
        # Kafka's createLogReadResult(e): no offsets on any partition-level error.
        response.high_watermark = response.last_stable_offset = response.log_start_offset = -1
        if w.error in _REFUSED_BEFORE_READING:  # Kafka's request handler answers these with an empty list
            response.aborted_transactions = []
        return
    partition = w.partition
    log_ = partition.log  # the log's own properties: one call each instead of two
    response.high_watermark = log_.high_watermark
    response.last_stable_offset = partition.last_stable_offset  # every isolation level is told it
    response.log_start_offset = log_.log_start_offset
    if committed and w.response.preferred_read_replica < 0:  # a redirected answer has none, as Kafka's
        read = w.read
        aborted = partition.aborted_transactions(w.fetch_offset, read.next_offset) if read and read.slices else ()
        response.aborted_transactions = [_PartitionData.AbortedTransaction(producer_id=a.producer_id,
                                                                           first_offset=a.first_offset)
                                         for a in aborted] if aborted else []
