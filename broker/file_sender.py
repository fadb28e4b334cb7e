"""Writing an answer whose record data stays in segment files: its bytes with send(2), its FileRegions
with sendfile(2), straight into the connection's socket — the page cache's pages go to the socket
without a copy through Python (Kafka's zero-copy Fetch).

The connection's transport owns the socket. This writes beside it only while the transport has
nothing queued, and the connection holds its other answers until this one is out, so bytes never
interleave. It writes through a duplicate of the socket's descriptor: the event loop watches one
descriptor for one owner, and the duplicate, the same socket under another number, is ours to watch
for room when the socket's buffer is full.

That watch is `RoomWatch`'s: each duplicate is registered once, edge-triggered, in one epoll of the
loop's own, which the loop watches as a reader. The loop's add_writer and remove_writer around every
wait for room (a six-partition Fetch meets a full socket about once) would make and close a libuv poll
handle on the duplicate each time: with uvloop eight system calls (epoll_ctl probes, FIONBIO, an
io_uring submit) where the edge needs one epoll_wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import select
import socket
import weakref
from collections.abc import Callable, Sequence
from typing import Final

from broker.log.file_region import FileRegion

Finished = Callable[[OSError | None], None]
_MORE = socket.MSG_MORE
_WRITTEN, _FULL, _FILE_ENDED = 0, 1, 2  # where broker/_file_send.c's pump stopped


class _Waiting(enum.Enum):
    """The socket is full: the answer goes on once the room watch says there is room (an enum's one
    member, so that the type checker narrows by identity)."""
    FOR_ROOM = 0


_WAITING: Final = _Waiting.FOR_ROOM

try:  # _pump's loop and pieces_of in one call each (setup.py builds them with `pip install -e .`)
    from broker._file_send import pieces as _compiled_pieces
    from broker._file_send import pump as _compiled_pump
except ImportError:  # a checkout without a C compiler: the loops below
    _compiled_pump = _compiled_pieces = None


def pieces_of(chunks: Sequence) -> list[memoryview | tuple[int, int, int]]:
    """An answer's chunks as the pieces the pump writes: each FileRegion's (descriptor, position, length)
    pieces with bytes in its place, each non-empty bytes-like chunk as a memoryview."""
    pieces: list[memoryview | tuple[int, int, int]] = []
    for chunk in chunks:
        if type(chunk) is FileRegion:
            pieces += chunk.pieces()  # those with bytes only
        elif len(chunk):
            pieces.append(memoryview(chunk))
    return pieces


class SegmentCutShort(OSError):
    """A segment file ended before the range promised in the answer's header (truncated meanwhile)."""


class RoomWatch:
    """The room waits of one event loop's FileSenders. Each sender's socket is in this epoll for its
    life with EPOLLOUT | EPOLLET: the kernel reports room once per wait (its write-space wake-up comes
    only after a send found the buffer full), so nothing is registered or removed per wait, and a wait
    that begins after the room came finds the edge already queued. The loop watches the epoll's own
    descriptor (readable while an edge is queued) while any sender is registered."""

    __slots__ = ("_loop", "_epoll", "_senders", "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # the loop's entry in _WATCHES must not keep the loop alive
        self._epoll = select.epoll()
        self._senders: dict[int, FileSender] = {}

    @property
    def watched(self) -> int:
        return len(self._senders)

    def add(self, fd: int, sender: FileSender) -> None:
        loop = self._loop()
        assert loop is not None, "senders are made inside their loop"
        # The registration outlives a close of this descriptor while the transport's keeps the socket
        # open: remove() takes it out first, and a failed add leaves none behind.
        self._epoll.register(fd, select.EPOLLOUT | select.EPOLLET)
        if not self._senders:
            try:
                loop.add_reader(self._epoll.fileno(), self._ready)
            except BaseException:
                self._epoll.unregister(fd)
                raise
        self._senders[fd] = sender

    def remove(self, fd: int) -> None:
        """Before the descriptor closes (its number may be reused)."""
        if self._senders.pop(fd, None) is None:
            return
        with contextlib.suppress(OSError):
            self._epoll.unregister(fd)
        loop = self._loop()
        if not self._senders and loop is not None and not loop.is_closed():
            loop.remove_reader(self._epoll.fileno())

    def _ready(self) -> None:
        for fd, _ in self._epoll.poll(0):
            sender = self._senders.get(fd)
            if sender is not None:
                sender.room()


_WATCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RoomWatch] = weakref.WeakKeyDictionary()


def room_watch(loop: asyncio.AbstractEventLoop) -> RoomWatch:
    """The loop's one RoomWatch (it goes with the loop)."""
    watch = _WATCHES.get(loop)
    if watch is None:
        watch = _WATCHES[loop] = RoomWatch(loop)
    return watch


class FileSender:
    __slots__ = ("_watch", "_socket", "_fd", "_pieces", "_index", "_done", "_finished")

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        duplicate = os.dup(fd)
        try:
            self._socket = socket.socket(fileno=duplicate)
        except OSError:
            os.close(duplicate)
            raise
        self._socket.setblocking(False)
        self._fd = duplicate  # the pump's, without a call for it
        self._watch = room_watch(loop)
        try:
            self._watch.add(duplicate, self)
        except OSError:
            self._socket.close()
            raise
        self._pieces: list[memoryview | tuple[int, int, int]] = []
        self._index = 0
        self._done = 0  # bytes of the current piece already written
        self._finished: Finished | None = None

    @property
    def busy(self) -> bool:
        """An answer waits for room (its `finished` not called yet)."""
        return self._finished is not None

    def send(self, chunks: Sequence, finished: Finished) -> bool:
        """Write the chunks (bytes-like or FileRegion) in order. True: all are in the socket already, and
        `finished` is never called (a consumer's answer usually fits the socket's buffer). False:
        `finished(None)` once all are in the socket, `finished(error)` if the socket or a file failed; it
        may be called before this returns."""
        assert self._finished is None, "one answer at a time"
        self._pieces = pieces_of(chunks) if _compiled_pieces is None else _compiled_pieces(chunks, FileRegion)
        self._index = self._done = 0
        outcome = self._write()
        if outcome is None:
            self._pieces = []
            return True
        self._finished = finished
        if outcome is not _WAITING:
            self._end(outcome)
        return False

    def room(self) -> None:
        """The socket has room again (RoomWatch): go on, if an answer waits for it (an edge left from an
        earlier answer finds none)."""
        if self._finished is not None:
            outcome = self._write()
            if outcome is not _WAITING:
                self._end(outcome)

    def close(self) -> None:
        """The connection is gone: stop, tell the caller (its regions must be released), free the descriptor."""
        if self._finished is not None:
            self._end(ConnectionResetError("connection closed while sending"))
        self._watch.remove(self._fd)
        self._socket.close()
        self._fd = -1  # the number may be reused: a late write must fail, not reach another file

    def _write(self) -> OSError | _Waiting | None:
        """Write on from where the last write stopped: None once every piece is in the socket, _WAITING
        while the socket is full (the room watch calls again), or the error that ended the answer."""
        if _compiled_pump is None:
            return self._write_in_python()
        try:
            index, done, state = _compiled_pump(self._fd, self._pieces, self._index, self._done)
        except OSError as exc:
            return exc
        if state == _WRITTEN:
            return None
        self._index, self._done = index, done
        if state == _FULL:
            return _WAITING
        return SegmentCutShort(f"a segment file ended {self._pieces[index][2] - done} bytes early")

    def _write_in_python(self) -> OSError | _Waiting | None:
        """What broker/_file_send.c does, where it is not built."""
        # Locals, written back to the slots before any return: this loop runs for every piece of every answer
        pieces, sock, index, done = self._pieces, self._socket, self._index, self._done
        out = self._fd
        last = len(pieces) - 1
        try:
            while index <= last:
                piece = pieces[index]
                if isinstance(piece, tuple):
                    fd, position, length = piece
                    remaining = length - done
                    sent = os.sendfile(out, fd, position + done, remaining)
                    if sent == 0:
                        raise SegmentCutShort(f"a segment file ended {remaining} bytes early")
                else:
                    # MSG_MORE: a small header waits for the record data behind it instead of leaving
                    # as a packet of its own (TCP_NODELAY would send it at once).
                    sent = sock.send(piece[done:] if done else piece, _MORE if index < last else 0)
                    remaining = len(piece) - done
                if sent < remaining:
                    done += sent
                    continue
                index += 1
                done = 0
        except BlockingIOError:
            self._index, self._done = index, done
            return _WAITING
        except OSError as exc:
            self._index, self._done = index, done
            return exc
        self._index, self._done = index, done
        return None

    def _end(self, error: OSError | None) -> None:
        finished, self._finished = self._finished, None
        self._pieces = []
        if finished is not None:
            finished(error)
