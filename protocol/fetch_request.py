"""A hand-written decoder for Fetch requests, the request a consumer sends most.

The generic codec reads through BytesIO with one call per field; a consumer's Fetch is the same few
shapes every time (one or a few topics, each partition a fixed run of ints), so here each partition
is one `struct.unpack_from` over the frame, or, where protocol/_fetch_read.c is built, the whole
request is read in one compiled call that builds the same objects (and gives way to this code for any
frame this code would not read). It builds exactly the FetchRequest the generic codec
builds (tests/protocol/test_fetch_request.py holds the two equal on random requests at every
version), and covers only the common case: a tagged field anywhere (a follower's ReplicaState or
ReplicaDirectoryId, a ClusterId), a version the broker does not serve, or bytes that do not parse
send the frame to the generic codec, which builds the request or raises the error it always raised.
"""

from __future__ import annotations

import struct
import uuid
from typing import cast

from protocol.enums import ApiKey

from . import framing
from .framing import Request
from .messages import FetchRequest, RequestHeader

_Topic = FetchRequest.FetchTopic
_Partition = _Topic.FetchPartition
_ForgottenTopic = FetchRequest.ForgottenTopic
_ReplicaState = FetchRequest.ReplicaState

_LOW, _HIGH = 4, 16  # the versions parsed here; the rest go to the generic codec
_SESSIONS, _LEADER_EPOCH, _RACK, _FLEXIBLE, _TOPIC_IDS, _REPLICA_STATE = 7, 9, 11, 12, 13, 15
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_NO_DIRECTORY = uuid.UUID(int=0)  # also the absent topic id
_NO_HIGH_WATERMARK = 2**63 - 1


def _top_layout(version: int) -> struct.Struct:
    """ReplicaId (to v14), MaxWaitMs, MinBytes, MaxBytes, IsolationLevel, then SessionId and
    SessionEpoch (v7+)."""
    layout = ">iiiib" if version < _REPLICA_STATE else ">iiib"
    return struct.Struct(layout + ("ii" if version >= _SESSIONS else ""))


def _partition_layout(version: int) -> struct.Struct:
    """Partition, CurrentLeaderEpoch (v9+), FetchOffset, LastFetchedEpoch (v12+), LogStartOffset
    (v5+), PartitionMaxBytes."""
    return struct.Struct(">i" + ("i" if version >= _LEADER_EPOCH else "") + "q"
                         + ("i" if version >= _FLEXIBLE else "") + ("q" if version >= 5 else "") + "i")


_TOP = {v: _top_layout(v) for v in range(_LOW, _HIGH + 1)}
_PARTITION = {v: _partition_layout(v) for v in range(_LOW, _HIGH + 1)}


class _Unusual(Exception):
    """What this decoder leaves to the generic codec."""


def decode_fetch_request(frame: bytes | bytearray) -> Request[FetchRequest]:
    """Parse a Fetch request frame (no size prefix), as framing.decode_request does."""
    if _compiled is not None:
        request = _compiled(frame)
        if request is not None:
            return request
    return decode_in_python(frame)


def decode_in_python(frame: bytes | bytearray) -> Request[FetchRequest]:
    """decode_fetch_request without the compiled reader: its reference in the tests."""
    try:
        return _decode(frame)
    except (_Unusual, struct.error, IndexError, UnicodeDecodeError):
        # builds the same request, or raises its error
        return cast(Request[FetchRequest], framing.decode_request(frame))


def _decode(frame: bytes | bytearray) -> Request[FetchRequest]:
    api_key, version, correlation_id, n = _HEADER.unpack_from(frame, 0)
    if api_key != ApiKey.FETCH or not _LOW <= version <= _HIGH or n < -1:
        raise _Unusual
    pos = 10
    if n < 0:
        client_id = ""
    else:
        client_id = _text(frame, pos, n)
        pos += n
    flexible = version >= _FLEXIBLE
    if flexible:
        pos = _no_tags(frame, pos)
    header = RequestHeader.__new__(RequestHeader)
    header.request_api_key = api_key
    header.request_api_version = version
    header.correlation_id = correlation_id
    header.client_id = client_id

    body = FetchRequest.__new__(FetchRequest)
    layout = _TOP[version]
    fields = layout.unpack_from(frame, pos)
    pos += layout.size
    if version < _REPLICA_STATE:
        body.replica_id = fields[0]
        fields = fields[1:]
    else:
        body.replica_id = -1
    body.replica_state = _ReplicaState.__new__(_ReplicaState)
    body.replica_state.replica_id = body.replica_state.replica_epoch = -1
    if version >= _SESSIONS:
        body.max_wait_ms, body.min_bytes, body.max_bytes, body.isolation_level, body.session_id, \
            body.session_epoch = fields
    else:
        body.max_wait_ms, body.min_bytes, body.max_bytes, body.isolation_level = fields
        body.session_id, body.session_epoch = 0, -1
    body.cluster_id = None

    partition_layout = _PARTITION[version]
    topics = []
    count, pos = _count(frame, pos, flexible)
    for _ in range(count):
        topic = _Topic.__new__(_Topic)
        topic.topic, topic.topic_id, pos = _name_or_id(frame, pos, version, flexible)
        partitions = []
        n, pos = _count(frame, pos, flexible)
        for _ in range(n):
            p = _Partition.__new__(_Partition)
            values = partition_layout.unpack_from(frame, pos)
            pos += partition_layout.size
            if version >= _FLEXIBLE:
                p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch, p.log_start_offset, \
                    p.partition_max_bytes = values
                pos = _no_tags(frame, pos)
            elif version >= _LEADER_EPOCH:
                p.partition, p.current_leader_epoch, p.fetch_offset, p.log_start_offset, \
                    p.partition_max_bytes = values
                p.last_fetched_epoch = -1
            elif version >= 5:
                p.partition, p.fetch_offset, p.log_start_offset, p.partition_max_bytes = values
                p.current_leader_epoch = p.last_fetched_epoch = -1
            else:
                p.partition, p.fetch_offset, p.partition_max_bytes = values
                p.current_leader_epoch = p.last_fetched_epoch = p.log_start_offset = -1
            p.replica_directory_id = _NO_DIRECTORY
            p.high_watermark = _NO_HIGH_WATERMARK
            partitions.append(p)
        topic.partitions = partitions
        if flexible:
            pos = _no_tags(frame, pos)
        topics.append(topic)
    body.topics = topics

    forgotten = []
    if version >= _SESSIONS:
        count, pos = _count(frame, pos, flexible)
        for _ in range(count):
            gone = _ForgottenTopic.__new__(_ForgottenTopic)
            gone.topic, gone.topic_id, pos = _name_or_id(frame, pos, version, flexible)
            n, pos = _count(frame, pos, flexible)
            if pos + 4 * n > len(frame):
                raise _Unusual
            gone.partitions = list(struct.unpack_from(f">{n}i", frame, pos))
            pos += 4 * n
            if flexible:
                pos = _no_tags(frame, pos)
            forgotten.append(gone)
    body.forgotten_topics_data = forgotten
    if version >= _RACK:
        body.rack_id, pos = _string(frame, pos, flexible)
    else:
        body.rack_id = ""
    if flexible:
        _no_tags(frame, pos)
    return Request(header, api_key, version, correlation_id, body)  # trailing bytes ignored, as decode_request


_IDS: dict[bytes, uuid.UUID] = {}  # a consumer names the same few topic ids in every request


def _uuid(frame: bytes | bytearray, pos: int) -> uuid.UUID:
    raw = bytes(frame[pos:pos + 16])
    found = _IDS.get(raw)
    if found is None:
        if len(raw) < 16:
            raise _Unusual
        if len(_IDS) >= 4096:  # bounded: ids of deleted topics, or a client naming random ones
            _IDS.clear()
        found = _IDS[raw] = uuid.UUID(bytes=raw)
    return found


def _name_or_id(frame: bytes | bytearray, pos: int, version: int, flexible: bool) -> tuple[str, uuid.UUID, int]:
    """A topic's name (to v12) or id (v13+), the other left at its default."""
    if version >= _TOPIC_IDS:
        return "", _uuid(frame, pos), pos + 16
    name, pos = _string(frame, pos, flexible)
    return name, _NO_DIRECTORY, pos


def _text(frame: bytes | bytearray, pos: int, n: int) -> str:
    if pos + n > len(frame):
        raise _Unusual
    return str(frame[pos:pos + n], "utf-8")


def _string(frame: bytes | bytearray, pos: int, compact: bool) -> tuple[str, int]:
    """A non-nullable string; null, or a length past one byte's varint, is left to the generic codec."""
    if compact:
        n = frame[pos] - 1
        pos += 1
        if n > 126:
            raise _Unusual
    else:
        n = _I16.unpack_from(frame, pos)[0]
        pos += 2
    if n < 0:
        raise _Unusual
    return _text(frame, pos, n), pos + n


def _count(frame: bytes | bytearray, pos: int, compact: bool) -> tuple[int, int]:
    """An array's length; a null one (not allowed here), or one of 127 or more in a compact
    array, goes to the generic codec."""
    if compact:
        n = frame[pos] - 1
        if n > 126:
            raise _Unusual
        return n if n >= 0 else _null(), pos + 1
    n = _I32.unpack_from(frame, pos)[0]
    return n if n >= 0 else _null(), pos + 4


def _null() -> int:
    raise _Unusual


try:  # _decode in C (setup.py builds it with `pip install -e .`): the same frames, the same objects
    from ._fetch_read import configure as _configure
    from ._fetch_read import decode as _compiled
    _configure(Request, RequestHeader, FetchRequest, _ReplicaState, _Topic, _Partition, _ForgottenTopic,
               _NO_DIRECTORY, _NO_HIGH_WATERMARK, lambda raw: _uuid(raw, 0), _IDS)
except ImportError:  # a checkout without a C compiler: the Python decoder alone
    _compiled = None


def _no_tags(frame: bytes | bytearray, pos: int) -> int:
    """An empty tagged-field section; any tagged field at all goes to the generic codec."""
    if frame[pos] != 0:
        raise _Unusual
    return pos + 1
