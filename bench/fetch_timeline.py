"""A Fetch's timeline on both sides of the socket, Ebb beside Kafka:
`python -m bench.fetch_timeline [--partitions 1,6] [--records N] [--reads N] [--ebb-override KEY=VALUE]`.

For each broker and partition count: a topic filled by the C producer (bench/rdkafka_load.c) and read
once to warm the page cache, then read --reads times by the C consumer while `perf record` takes the
syscall tracepoints of the broker and of the consumer (read, sendto, sendfile, writev, epoll waits,
recvmsg, sendmsg). Each Fetch cycle is cut at its request's arrival; printed are medians per Fetch:

    first byte   the request read -> the answer's first send call
    send         first -> last send call returned (of it: inside epoll waits for room, and how many)
    to next      the last send call returned -> the next request read (the client's receive and parse)
    cycle        one request read to the next
    client recv  the consumer's first -> last recvmsg of the answer

Tracing slows both brokers: compare shapes, not MB/s. Needs perf and the right to trace (root, or
kernel.perf_event_paranoid <= -1). docs/performance.md ("Findings behind the design": the six-partition
anomaly) used it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SYSCALLS = ("read", "sendto", "sendfile64", "writev", "epoll_wait", "epoll_pwait", "recvmsg", "sendmsg")
SENDS = ("sendto", "sendfile64", "writev")
_LINE = re.compile(r"^\s*(\d+)\s+([\d.]+):\s+syscalls:sys_(enter|exit)_(\w+): (.*)$")
# A Fetch request as read by each broker: Ebb's transport reads the whole frame (a few hundred bytes),
# Kafka reads the 4-byte size first
REQUEST = {"ebb": lambda size: 60 <= size <= 4096, "kafka": lambda size: size == 4}


def _events() -> list[str]:
    return [arg for name in SYSCALLS for kind in ("enter", "exit") for arg in ("-e", f"syscalls:sys_{kind}_{name}")]


def calls(script_text: str) -> list[tuple[float, float, str, int, str]]:
    """(start, end, syscall, result, thread) of each finished call in `perf script -F tid,time,event,trace` text."""
    started: dict[str, tuple[float, str]] = {}
    out = []
    for line in script_text.splitlines():
        found = _LINE.match(line)
        if not found:
            continue
        tid, at, kind, name, rest = found.groups()
        if kind == "enter":
            started[tid] = (float(at), name)
        elif tid in started:
            begun, called = started.pop(tid)
            result = int(rest, 16) if rest.startswith("0x") else int(rest)
            out.append((begun, float(at), called, result if result < 1 << 63 else result - (1 << 64), tid))
    return out


def broker_cycles(traced: list, kind: str) -> list[dict[str, float]]:
    requests = [c for c in traced if c[2] == "read" and REQUEST[kind](c[3])]
    sends = [c for c in traced if c[2] in SENDS and c[3] > 0]
    waits = [c for c in traced if c[2] in ("epoll_wait", "epoll_pwait")]
    cycles = []
    for request, following in zip(requests, requests[1:], strict=False):
        sent = [c for c in sends if request[1] <= c[0] < following[0]]
        if sum(c[3] for c in sent) < 100_000:  # not a Fetch with records
            continue
        inside = [w for w in waits if sent[0][0] <= w[0] < sent[-1][1]]
        cycles.append({"first byte": sent[0][0] - request[1], "send": sent[-1][1] - sent[0][0],
                       "waiting": sum(w[1] - w[0] for w in inside), "waits": len(inside),
                       "to next": following[0] - sent[-1][1], "cycle": following[0] - request[1],
                       "bytes": sum(c[3] for c in sent), "send calls": len(sent)})
    return cycles


def client_receives(traced: list) -> list[float]:
    requests = [c for c in traced if c[2] == "sendmsg" and 60 <= c[3] <= 4096]
    receives = [c for c in traced if c[2] == "recvmsg" and c[3] > 0]
    spans = []
    for request, following in zip(requests, requests[1:], strict=False):
        got = [c for c in receives if request[1] <= c[0] < following[0] and c[4] == request[4]]
        if sum(c[3] for c in got) >= 100_000:
            spans.append(got[-1][1] - got[0][1])
    return spans


def _script(data: Path) -> str:
    return subprocess.run(["perf", "script", "-i", str(data), "-F", "tid,time,event,trace"], capture_output=True,
                          text=True, check=True).stdout


def traced_read(broker, kind: str, topic: str, partitions: int, records: int, work: Path) -> str:
    from bench.goals import RDKAFKA_LOAD

    on_broker, on_client = work / f"{kind}-{partitions}.data", work / f"{kind}-{partitions}.client.data"
    tracer = subprocess.Popen(["perf", "record", "-q", *_events(), "-p", str(broker.pid), "-o", str(on_broker)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)  # perf attached before the first request
    subprocess.run(["perf", "record", "-q", *_events(), "-o", str(on_client), "--", str(RDKAFKA_LOAD), "consume",
                    broker.bootstrap, topic, str(partitions), str(records)], check=True, capture_output=True)
    tracer.send_signal(signal.SIGINT)
    tracer.wait(60)
    cycles = broker_cycles(calls(_script(on_broker)), kind)
    receives = client_receives(calls(_script(on_client)))
    if not cycles:
        return "no Fetch cycles found"

    def ms(key: str) -> float:
        return statistics.median(c[key] for c in cycles) * 1e3

    calls_per_fetch = statistics.median(c["send calls"] for c in cycles)
    return (f"{len(cycles)} fetches of {statistics.median(c['bytes'] for c in cycles) / 1e6:.2f} MB, "
            f"{calls_per_fetch:.0f} send calls; ms: first byte {ms('first byte'):.2f}, "
            f"send {ms('send'):.2f} (waiting {ms('waiting'):.2f} in "
            f"{statistics.median(c['waits'] for c in cycles):.0f} waits), to next {ms('to next'):.2f}, cycle "
            f"{ms('cycle'):.2f}; client recv {statistics.median(receives) * 1e3 if receives else float('nan'):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", default="1,6", help="comma-separated partition counts")
    parser.add_argument("--records", type=int, default=300_000, help="1 KiB records per topic")
    parser.add_argument("--reads", type=int, default=3, help="traced reads per broker and topic")
    parser.add_argument("--ebb-override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-kafka", action="store_true", help="Ebb alone")
    args = parser.parse_args()
    if shutil.which("perf") is None:
        sys.exit("needs perf (Debian: linux-perf)")

    from bench.goals import rdkafka_consume, rdkafka_produce
    from bench.peers import Ebb, Kafka, create_topic, warm_up

    counts = [int(n) for n in args.partitions.split(",")]
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-fetch-timeline-"))
    try:
        brokers = [("ebb", Ebb(root, dict(item.split("=", 1) for item in args.ebb_override)))]
        if not args.no_kafka:
            brokers.append(("kafka", Kafka(root)))
        for _, broker in brokers:
            broker.start()
        try:
            for _, broker in brokers:
                warm_up(broker.bootstrap)
                for n in counts:
                    create_topic(broker.bootstrap, f"timeline-{n}", n)
                    rdkafka_produce(broker.bootstrap, f"timeline-{n}", n, args.records, "1")
                    rdkafka_consume(broker.bootstrap, f"timeline-{n}", n, args.records)  # the page cache warm
            for read in range(args.reads):
                for n in counts:
                    for kind, broker in brokers if read % 2 == 0 else brokers[::-1]:
                        print(f"{kind:<5} {n} partition(s), read {read + 1}: "
                              f"{traced_read(broker, kind, f'timeline-{n}', n, args.records, root)}", flush=True)
        finally:
            for _, broker in brokers:
                broker.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
