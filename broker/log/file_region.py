"""Record data a response sends straight from segment files (sendfile), instead of bytes in memory.

A Fetch answer carries one FileRegion per partition in place of the record bytes: the encoder needs
only its length, and the connection hands the slices to sendfile(2), so the data goes from the page
cache to the socket without passing through Python. The files are pinned from the moment the region
is made until `release`, so a segment deleted or parked by the open-file budget meanwhile stays open.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.log.results import FileSlice


class FileRegion:
    __slots__ = ("slices", "descriptors", "length", "_pinned")

    def __init__(self, slices: Sequence[FileSlice]) -> None:
        self.slices = tuple(slices)
        self.length = sum(s.length for s in self.slices)
        self.descriptors: list[int] = []
        self._pinned = False
        try:
            for piece in self.slices:
                self.descriptors.append(piece.file.pin())
        except BaseException:
            for piece in self.slices[:len(self.descriptors)]:
                piece.file.unpin()
            raise
        self._pinned = True

    def __len__(self) -> int:
        return self.length

    def pieces(self) -> list[tuple[int, int, int]]:
        """(descriptor, file position, length) of each slice, in order."""
        return [(fd, s.position, s.length) for fd, s in zip(self.descriptors, self.slices, strict=True)]

    def release(self) -> None:
        """Let go of the files; safe to call more than once."""
        if self._pinned:
            self._pinned = False
            for piece in self.slices:
                piece.file.unpin()
