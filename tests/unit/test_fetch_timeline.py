"""bench/fetch_timeline.py cuts Fetch cycles out of perf's syscall trace: request read, the answer's send
calls and the waits among them, the gap to the next request, and the client's receive span."""

from __future__ import annotations

import pytest

from bench.fetch_timeline import broker_cycles, calls, client_receives


def _call(tid: int, start: float, end: float, name: str, result: int, fd: int = 7) -> str:
    return (f"{tid} {start:.6f}: syscalls:sys_enter_{name}: fd: {fd:#010x}, buf: 0x1, count: 0x10000\n"
            f"{tid} {end:.6f}: syscalls:sys_exit_{name}: {result:#x}\n")


BROKER = "".join([
    _call(1, 1.000000, 1.000010, "read", 232),           # the Fetch request
    _call(1, 1.000500, 1.000510, "sendto", 72),          # the answer's header: first byte at 1.0005
    _call(1, 1.000520, 1.000700, "sendfile64", 600_000),
    _call(1, 1.000710, 1.000720, "sendfile64", -11 & (2**64 - 1)),  # EAGAIN: not a send
    _call(1, 1.000730, 1.001730, "epoll_pwait", 1),      # a millisecond waiting for room
    _call(1, 1.001740, 1.002000, "sendfile64", 400_000),  # the last byte at 1.002
    _call(1, 1.002100, 1.004000, "epoll_pwait", 1),
    _call(1, 1.004000, 1.004010, "read", 232),           # the next request
    _call(1, 1.004500, 1.004510, "sendto", 40),          # a small answer: not a cycle with records
    _call(1, 1.005000, 1.005010, "read", 232),
])
CLIENT = "".join([
    _call(5, 0.999990, 1.000000, "sendmsg", 232),
    _call(5, 1.000600, 1.000700, "recvmsg", 500_000),
    _call(6, 1.000800, 1.000900, "recvmsg", 900_000),    # another thread's socket: not this answer
    _call(5, 1.001000, 1.002500, "recvmsg", 500_072),
    _call(5, 1.003990, 1.004000, "sendmsg", 232),
])


def test_a_cycle_is_cut_at_each_request():
    (cycle,) = broker_cycles(calls(BROKER), "ebb")
    assert cycle["first byte"] == pytest.approx(0.00049)
    assert cycle["send"] == pytest.approx(0.0015)
    assert (cycle["waits"], cycle["waiting"]) == (1, pytest.approx(0.001))
    assert cycle["to next"] == pytest.approx(0.002)
    assert cycle["cycle"] == pytest.approx(0.00399)  # from the end of its read to the next read
    assert (cycle["bytes"], cycle["send calls"]) == (1_000_072, 3)


def test_kafka_requests_are_its_four_byte_size_reads():
    assert broker_cycles(calls(BROKER), "kafka") == []  # no 4-byte reads here


def test_the_client_span_is_its_fetch_threads_receives():
    assert client_receives(calls(CLIENT)) == [pytest.approx(0.0018)]
