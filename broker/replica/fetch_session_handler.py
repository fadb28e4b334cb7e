"""A follower's side of its fetch session with one leader (KIP-227), as Kafka's FetchSessionHandler.

The first Fetch is full with SessionEpoch 0 and asks for a session. Once the leader gives one, each
Fetch names only the partitions whose parameters (fetch offset, epochs, log start offset, max bytes)
changed since the leader last saw them, forgets the ones no longer fetched, and carries the next
epoch; the leader fetches the others from what it cached and answers only partitions with news. Any
session error, a lost connection, or a leader that gives no session makes the next Fetch full again
(naming the old session, which closes it on the leader).
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, FetchResponse

_Partition = FetchRequest.FetchTopic.FetchPartition
_INITIAL_EPOCH = 0
_INT32_MAX = 2**31 - 1


def _params(p: _Partition) -> tuple[int, int, int, int, int]:
    return p.fetch_offset, p.current_leader_epoch, p.log_start_offset, p.last_fetched_epoch, p.partition_max_bytes


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = _INITIAL_EPOCH  # of the next request; 0: a full one
        self._sent: dict[tuple[str, int], tuple[int, int, int, int, int]] = {}  # what the leader caches
        self._building: dict[tuple[str, int], tuple[int, int, int, int, int]] = {}

    def build(self, wanted: dict[str, list[_Partition]], request: FetchRequest) -> None:
        """Fill `request`'s session fields, topics and forgotten topics from every partition wanted now."""
        now = {(topic, p.partition): _params(p) for topic, parts in wanted.items() for p in parts}
        self._building = now
        request.session_id = self.session_id
        request.session_epoch = self.epoch
        if self.epoch == _INITIAL_EPOCH:
            request.topics = [FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in wanted.items()]
            request.forgotten_topics_data = []
            return
        changed: dict[str, list[_Partition]] = {}
        for topic, parts in wanted.items():
            for p in parts:
                if self._sent.get((topic, p.partition)) != now[(topic, p.partition)]:
                    changed.setdefault(topic, []).append(p)
        gone: dict[str, list[int]] = {}
        for topic, index in self._sent.keys() - now.keys():
            gone.setdefault(topic, []).append(index)
        request.topics = [FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in changed.items()]
        request.forgotten_topics_data = [FetchRequest.ForgottenTopic(topic=t, partitions=sorted(ps))
                                         for t, ps in sorted(gone.items())]

    def answered(self, reply: FetchResponse) -> bool:
        """Take the leader's answer to the request last built; False when it is a session error (the
        next request is full)."""
        if reply.error_code != ErrorCode.NONE:
            if reply.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = 0
            self.failed()
            return False
        if reply.session_id == 0:  # no session given, or the one we had is closed
            self.session_id, self.epoch, self._sent = 0, _INITIAL_EPOCH, {}
            return True
        self.session_id = reply.session_id
        self._sent = self._building
        self.epoch = 1 if self.epoch == _INT32_MAX else self.epoch + 1
        return True

    def failed(self) -> None:
        """The request went unanswered or was refused: start over with a full fetch closing the session."""
        self.epoch = _INITIAL_EPOCH
        self._sent = {}
