"""What the partition log hands back: append results, read results as file ranges, timestamp lookups."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from broker.log.common import Offset
from broker.log.segment_file import SegmentFile, scan_headers
from protocol.records import BatchHeader


class ReadBound(Enum):
    """How far a read may go: consumers stop at the high watermark, followers at the log end."""

    HIGH_WATERMARK = "high_watermark"
    LOG_END = "log_end"


class AppendInfo(NamedTuple):  # a NamedTuple, not a frozen dataclass: one per append, made in C
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 under CreateTime
    max_timestamp: int
    log_start_offset: int
    batches: int
    size: int


# NamedTuples, not frozen dataclasses (whose __init__ sets each field through object.__setattr__): one of
# each per partition of every fetch, made by one short __new__
class FileSlice(NamedTuple):
    """Bytes [position, position + length) of a segment file: whole batches, ready to send."""

    file: SegmentFile
    position: int
    length: int

    def read(self) -> bytes:
        """Blocking: the bytes themselves (tests, small reads; the server sends from the file)."""
        with self.file.held() as fd:
            return os.pread(fd, self.length, self.position)

    def headers(self, start: int, limit: int) -> tuple[list[BatchHeader], int]:
        """Blocking: the headers of up to `limit` of the slice's batches from `start` (where one of
        them begins), and the position after the last one; no record is read."""
        end = self.position + self.length
        headers: list[BatchHeader] = []
        with self.file.held() as fd:
            for position, header in scan_headers(fd, start, end):
                headers.append(header)
                start = position + header.size
                if len(headers) >= limit:
                    break
        return headers, start


class ReadInfo(NamedTuple):
    slices: tuple[FileSlice, ...]
    next_offset: Offset  # where the reader continues: the first offset not returned
    high_watermark: Offset
    log_start_offset: Offset
    log_end_offset: Offset

    @property
    def size(self) -> int:
        slices = self.slices
        if len(slices) == 1:  # a fetch's usual read: one segment, no generator frame
            return slices[0].length
        return sum(s.length for s in slices)

    def read_bytes(self) -> bytes:
        """Blocking: all slices concatenated."""
        return b"".join(s.read() for s in self.slices)


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    timestamp: int
    offset: Offset
    leader_epoch: int
