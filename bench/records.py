"""Record-batch hot path: walk + CRC-check 1 MiB of batches, stamp offsets, decode records.

Run with `python -m bench.records`. Prints microseconds per operation, with kafka-python's equivalent
beside ours where it has one. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

from kafka.record.memory_records import MemoryRecords

from protocol.records import Compression, assign_offsets, build_batch, iter_batches

MIB = 1 << 20
RECORDS_PER_BATCH = 100
VALUE_SIZE = 100


def make_log(compression: Compression = Compression.NONE, per_batch: int = RECORDS_PER_BATCH) -> bytearray:
    """About 1 MiB of batches laid end to end, as a log segment or a fetch response holds them."""
    records = [
        (b"key-%06d" % i, bytes([i % 251]) * VALUE_SIZE, [("trace", b"%08d" % i)], 1_700_000_000_000 + i)
        for i in range(per_batch)
    ]
    buf = bytearray()
    offset = 0
    while len(buf) < MIB:
        buf += build_batch(records, base_offset=offset, compression=compression)
        offset += per_batch
    return buf


def per_op_us(fn: Callable[[], object]) -> float:
    """Best of five runs of as many calls as fill 0.2 s, in microseconds per call."""
    timer = timeit.Timer(fn)
    loops, _ = timer.autorange()
    return min(timer.repeat(repeat=5, number=loops)) / loops * 1e6


def ours_validate(buf: bytearray) -> int:
    count = 0
    for batch in iter_batches(buf):
        batch.validate()
        count += 1
    return count


def kafka_python_validate(buf: bytearray) -> int:
    count = 0
    records = MemoryRecords(buf)
    while records.has_next():
        if not records.next_batch().validate_crc():
            raise AssertionError("bad CRC")
        count += 1
    return count


def ours_assign(buf: bytearray, positions: list[int]) -> None:
    offset = 0
    for position in positions:
        offset = assign_offsets(buf, position, offset, 3) + 1


def ours_decode(buf: bytearray) -> int:
    return sum(1 for batch in iter_batches(buf) for _ in batch.records())


def kafka_python_decode(buf: bytearray) -> int:
    count = 0
    records = MemoryRecords(buf)
    while records.has_next():
        count += sum(1 for _ in records.next_batch())
    return count


def row(label: str, ours: float, theirs: float | None = None) -> None:
    line = f"{label:<56} ebb {ours:10.1f} µs/op"
    if theirs is not None:
        line += f"   kafka-python {theirs:10.1f} µs/op   ratio {theirs / ours:6.1f}x"
    print(line)


def main() -> None:
    buf = make_log()
    batches = list(iter_batches(buf))
    positions = [batch.position for batch in batches]
    n = len(batches)
    assert ours_validate(buf) == kafka_python_validate(buf) == n
    print(f"{len(buf) / MIB:.2f} MiB, {n} batches of {RECORDS_PER_BATCH} records, {len(buf) // n} bytes each")

    row(f"iter_batches + validate (1 MiB, {n} batches)", per_op_us(lambda: ours_validate(buf)),
        per_op_us(lambda: kafka_python_validate(buf)))
    row(f"assign_offsets ({n} batches)", per_op_us(lambda: ours_assign(buf, positions)))
    row("assign_offsets (one batch)", per_op_us(lambda: assign_offsets(buf, 0, 0, 3)))
    row("decode all records (1 MiB, uncompressed)", per_op_us(lambda: ours_decode(buf)),
        per_op_us(lambda: kafka_python_decode(buf)))
    for label, log in (("gzip batches", make_log(Compression.GZIP)), ("1-record batches", make_log(per_batch=1))):
        compare_validate(label, log)


def compare_validate(label: str, log: bytearray) -> None:
    count = sum(1 for _ in iter_batches(log))
    row(f"iter_batches + validate (1 MiB, {count} {label})", per_op_us(lambda: ours_validate(log)),
        per_op_us(lambda: kafka_python_validate(log)))


if __name__ == "__main__":
    main()
