"""Record data a response sends straight from segment files (sendfile), instead of bytes in memory.

A Fetch answer carries one FileRegion per partition in place of the record bytes: the encoder needs
only its length, and the connection hands the slices to sendfile(2), so the data goes from the page
cache to the socket without passing through Python. The files are pinned from the moment the region
is made (or, for a Fetch, from its log read, whose pins the region takes over) until `release`, so a
segment deleted or parked by the open-file budget meanwhile stays open.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from broker.log.results import FileSlice


class FileRegion:
    __slots__ = ("slices", "length", "_pieces", "_pinned")

    def __init__(self, slices: Sequence[FileSlice], pinned: bool = False) -> None:
        """`pinned`: the caller pinned each slice's file once for this region, which takes those pins
        over (a Fetch's read keeps its pins for the answer: one pin and unpin per partition, not two)."""
        self.slices = tuple(slices)
        # Made once here, in the pinning loop: the page-cache check and the sender both walk them
        pieces: list[tuple[int, int, int]] = []
        length = 0
        self._pinned = False
        taken = 0
        try:
            for piece in self.slices:
                file = piece.file
                fd = file.fd if pinned else file.budget.pin(file)  # the budget's own call: one frame fewer
                taken += 1
                if piece.length:  # sendfile of nothing would read as a file cut short
                    pieces.append((fd, piece.position, piece.length))
                    length += piece.length
        except BaseException:
            for piece in self.slices[:0 if pinned else taken]:
                piece.file.unpin()
            raise
        self.length = length
        self._pieces = pieces
        self._pinned = True

    def __len__(self) -> int:
        return self.length

    def pieces(self) -> list[tuple[int, int, int]]:
        """(descriptor, file position, length) of each slice with bytes, in order."""
        return self._pieces

    def release(self) -> None:
        """Let go of the files; safe to call more than once."""
        if self._pinned:
            self._pinned = False
            for piece in self.slices:
                file = piece.file
                file.budget.unpin(file)


def release_slices(groups: Iterable[Sequence[FileSlice]]) -> None:
    """Let go of the pins a pinned read (PartitionLog.read(pinned=True)) took, one per slice."""
    for group in groups:
        for piece in group:
            file = piece.file
            file.budget.unpin(file)


def release_regions(regions: list[FileRegion]) -> int:
    """Let go of each region not released yet, once its answer is out, and return the bytes they held."""
    sent = 0
    for region in regions:
        region.release()
        sent += region.length
    return sent


try:  # the loop above and the budget's unpin in one call, where it is built (broker/log/_batch_read.c)
    from broker.log._batch_read import release_regions as compiled_release_regions
except ImportError:  # pragma: no cover - the package installed without a C compiler
    compiled_release_regions = None
# What the connection calls once an answer from files is out
release_sent = compiled_release_regions or release_regions


def release_unsent(regions: list[FileRegion]) -> list[OSError]:
    """Let go of the regions of an answer that will not send them, emptying the list first (it serves the
    connection's next request too, and a release failing, a close's EIO, must not leave stale regions
    for it to send); the errors met, for the caller to log."""
    unsent = list(regions)
    regions.clear()
    errors = []
    for region in unsent:
        try:
            region.release()
        except OSError as exc:
            errors.append(exc)
    return errors

