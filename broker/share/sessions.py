"""Share sessions (KIP-932's share session cache): per (group, member), the partitions a share
consumer fetches from and the epoch its next request must carry.

ShareSessionEpoch 0 opens a session (replacing the member's previous one), -1 ends it after that
request (its records still acquired go back to the others), and any other epoch must be the one the
session expects (INVALID_SHARE_SESSION_EPOCH) of a session that exists (SHARE_SESSION_NOT_FOUND); each
request moves the expected epoch on by one. A ShareAcknowledge cannot open a session. A session also
ends when the connection that opened it closes (RequestContext.share_session; Kafka 4.3.1's
connection-disconnect listener), or when its member leaves the group. At most
`max_sessions` are held (SHARE_SESSION_LIMIT_REACHED beyond: Kafka's group.share.max.share.sessions,
2000 by default).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from broker.share.partition import ShareError
from protocol.errors import ErrorCode

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
SessionPartition = tuple[uuid.UUID, int]  # (topic id, partition)


@dataclass(eq=False)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # what the next request must carry
    partitions: dict[SessionPartition, None] = field(default_factory=dict)  # in the order they came


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._max = max_sessions

    def open_or_continue(self, group_id: str, member_id: str, epoch: int, *, fetch: bool) -> ShareSession:
        """The session this request belongs to (a new one for epoch 0), its epoch moved on."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if not fetch:
                raise ShareError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                 "a ShareAcknowledge cannot open a share session")
            if key not in self.sessions and len(self.sessions) >= self._max:
                raise ShareError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                 f"the broker holds {self._max} share sessions already")
            opened = self.sessions[key] = ShareSession(group_id, member_id)
            return opened
        found = self.sessions.get(key)
        if found is None:
            raise ShareError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for member {member_id}")
        session = found
        if epoch == FINAL_EPOCH:
            return session
        if epoch != session.epoch:
            raise ShareError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             f"share session epoch {epoch}, expected {session.epoch}")
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        return session

    def close(self, session: ShareSession) -> None:
        if self.sessions.get((session.group_id, session.member_id)) is session:
            del self.sessions[(session.group_id, session.member_id)]
