"""The cleaner's two walks over one batch's records, in one compiled call a batch
(protocol/_record_spans.c) where it is built and the records are sound, else in Python (the reference
the compiled ones are tested equal to; a malformed record raises ProtocolError here): no record is
decoded beyond its key.

- map_batch puts each keyed record's offset in the key map (the dirty section's map);
- retain says which records a batch keeps (Kafka's shouldRetainRecord) and returns their bytes as they
  are, back to back, for protocol/records.py's with_records.
"""

from __future__ import annotations

from typing import NamedTuple

from broker.log.offset_map import NO_OFFSET, KeyOffsetMap, digest, map_key
from protocol.record_format import Buffer, record_spans, record_spans_in_python

try:  # setup.py builds it with `pip install -e .`
    from protocol._record_spans import map_keys as _compiled_map_keys
    from protocol._record_spans import retain as _compiled_retain
except ImportError:  # a checkout without a C compiler
    _compiled_map_keys = _compiled_retain = None


class Retained(NamedTuple):
    kept: int  # how many records stay
    keyless_dropped: int
    tombstone_kept: bool
    max_timestamp_delta: int | None  # of the records kept; None when none is
    section: bytes | None  # the kept records' bytes back to back; None unless some but not all stay


def map_batch(key_map: KeyOffsetMap, body: Buffer, count: int, base_offset: int, start: int) -> bool:
    """Map the keyed records at or past `start`; True when the map filled up before the batch's end
    (the round then cleans up to the map's latest offset)."""
    if _compiled_map_keys is not None:
        done = _compiled_map_keys(body, count, base_offset, start, key_map.offsets, key_map.capacity, digest)
        if done is not None:
            last, full = done
            key_map.cover_up_to(last)
            return bool(full)
    return map_batch_in_python(key_map, body, count, base_offset, start)


def map_batch_in_python(key_map: KeyOffsetMap, body: Buffer, count: int, base_offset: int, start: int) -> bool:
    spans = record_spans_in_python(bytes(body), count)  # raises before anything is mapped
    for _, _, delta, _, key, _ in spans:
        if key is not None and base_offset + delta >= start:
            if key_map.full:
                return True
            key_map.put(key, base_offset + delta)
    return False


def retain(body: Buffer, count: int, base_offset: int, key_map: KeyOffsetMap, tombstones_stay: bool) -> Retained:
    """Which records stay: those past the map's latest offset (not mapped), none without a key, else
    those at or past their key's latest offset, tombstones only while `tombstones_stay`."""
    if _compiled_retain is not None:
        retained = _compiled_retain(body, count, base_offset, key_map.offsets, key_map.latest_offset,
                                    tombstones_stay, digest)
        if retained is not None:
            return Retained(*retained)
    return retain_in_python(body, count, base_offset, key_map, tombstones_stay)


def kept_offsets(body: Buffer, count: int, base_offset: int, key_map: KeyOffsetMap, tombstones_stay: bool
                 ) -> set[int]:
    """The offsets of the records `retain` keeps (for a batch rebuilt record by record)."""
    return {base_offset + span[2] for span, keep in _decided(body, count, base_offset, key_map, tombstones_stay)
            if keep}


def retain_in_python(body: Buffer, count: int, base_offset: int, key_map: KeyOffsetMap,
                     tombstones_stay: bool) -> Retained:
    decided = _decided(body, count, base_offset, key_map, tombstones_stay, compiled=False)
    kept = [span for span, keep in decided if keep]
    keyless = sum(1 for span, keep in decided if span[4] is None and not keep
                  and base_offset + span[2] <= key_map.latest_offset)
    section = None
    if 0 < len(kept) < len(decided):
        data = bytes(body)
        section = b"".join(data[span[0]:span[1]] for span in kept)
    return Retained(len(kept), keyless, any(span[5] for span in kept),
                    max((span[3] for span in kept), default=None), section)


def _decided(body: Buffer, count: int, base_offset: int, key_map: KeyOffsetMap, tombstones_stay: bool,
             compiled: bool = True) -> list[tuple[tuple, bool]]:
    data = bytes(body)
    spans = record_spans(data, count) if compiled else record_spans_in_python(data, count)
    latest, offsets = key_map.latest_offset, key_map.offsets
    decided = []
    for span in spans:
        offset, key, value_is_null = base_offset + span[2], span[4], span[5]
        if offset > latest:
            keep = True
        elif key is None:
            keep = False
        else:
            keep = offset >= offsets.get(map_key(key), NO_OFFSET) and (not value_is_null or tombstones_stay)
        decided.append((span, keep))
    return decided
