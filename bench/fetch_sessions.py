"""What a fetch session (KIP-227) saves a consumer at the log end, Ebb beside Kafka:
`python -m bench.fetch_sessions [--partitions N] [--fetches N] [--rounds N]`.

A topic of --partitions partitions (default 100) with one record in each, read by a consumer that
has caught up: every Fetch (v12, MaxWaitMs 0, so nothing parks) asks from the log end. Sessionless,
each request names every partition and each answer carries every partition; in a session (Java's
consumer, Ebb's followers), the request names none and the answer is empty, since nothing changed.
Both kinds are sent --fetches times in turn for --rounds rounds to each broker over one connection
(request encoding and decoding in this process are the same for both brokers), and the medians of
the round trip and of the broker's CPU (user + system, /proc) per Fetch are printed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.peers import Ebb, Kafka, create_topic, kafka_version
from protocol.messages import FetchRequest
from tests.broker.data_wire import WireClient, batch, produce
from tests.support.polling import wait_for

VERSION = 12


def _request(topic: str, partitions: int, session_id: int, epoch: int, named: bool) -> FetchRequest:
    Part = FetchRequest.FetchTopic.FetchPartition
    parts = [Part(partition=p, fetch_offset=1, partition_max_bytes=1 << 20) for p in range(partitions)]
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
                        session_id=session_id, session_epoch=epoch,
                        topics=[FetchRequest.FetchTopic(topic=topic, partitions=parts)] if named else [])


def _timed(broker, client: WireClient, requests, check) -> tuple[float, float]:
    """(wall µs, broker CPU µs) per Fetch over `requests` (an iterable of request bodies)."""
    cpu, started = broker.cpu_seconds(), time.perf_counter()
    n = 0
    for body in requests:
        check(client.request(body, VERSION))
        n += 1
    return (time.perf_counter() - started) * 1e6 / n, (broker.cpu_seconds() - cpu) * 1e6 / n


def measure(broker, partitions: int, fetches: int, rounds: int) -> dict[str, list[tuple[float, float]]]:
    topic = f"sessions-{partitions}"
    create_topic(broker.bootstrap, topic, partitions)
    out: dict[str, list[tuple[float, float]]] = {"sessionless": [], "session": []}
    with WireClient(broker.port, timeout=30) as client:
        for p in range(partitions):  # Kafka names a new partition's leader a moment before it serves
            wait_for(lambda p=p: produce(client, topic, p, batch([b"x"])).error_code == 0, timeout_s=30,
                     what=f"{broker.name}: {topic}-{p} taking a record")
        full = client.request(_request(topic, partitions, 0, 0, True), VERSION)
        assert full.error_code == 0 and full.session_id > 0, "no session given"
        session, epoch = full.session_id, 1

        def sessionless(answer) -> None:
            assert answer.error_code == 0 and sum(len(t.partitions) for t in answer.responses) == partitions

        def incremental(answer) -> None:
            assert answer.error_code == 0 and answer.responses == []

        for _ in range(rounds):
            out["sessionless"].append(_timed(broker, client, (_request(topic, partitions, 0, -1, True)
                                                              for _ in range(fetches)), sessionless))
            bodies = []
            for _ in range(fetches):
                bodies.append(_request(topic, partitions, session, epoch, False))
                epoch += 1
            out["session"].append(_timed(broker, client, bodies, incremental))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--fetches", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-sessions-"))
    try:
        results = {}
        with Ebb(root) as ebb, Kafka(root) as kafka:
            for broker in (ebb, kafka):
                results[broker.name] = measure(broker, args.partitions, args.fetches, args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"Ebb and {kafka_version()}: a caught-up consumer of {args.partitions} partitions, Fetch v{VERSION}, "
          f"medians of {args.rounds} rounds of {args.fetches} fetches")
    print(f"  {'broker':<7} {'kind':<12} {'round trip µs':>14} {'broker CPU µs':>14}")
    for name, kinds in results.items():
        for kind, runs in kinds.items():
            print(f"  {name:<7} {kind:<12} {statistics.median(r[0] for r in runs):>14.0f}"
                  f" {statistics.median(r[1] for r in runs):>14.0f}")


if __name__ == "__main__":
    main()
