"""Time from DeleteRecords to physically erased on three replicas: `python -m bench.erasure [--quick] [--dir PATH]`.

ZooKeeper (Debian's package, started here) and three Ebb broker processes on loopback, one topic with
replication factor 3, `segment.bytes` at 1 GiB (so every delete lands in the middle of a segment: the
one being written) and `erasure.max.delay.ms=0` (a rewrite starts as soon as a replica's log start
offset moves, so what is timed is the mechanism, not the bound's coalescing delay). Each round
produces `--mb` MiB (100 records of 1 KiB a batch, acks=all), then sends an all-replica DeleteRecords
(v2: answered once every replica's log start offset moved) to the middle of that round's records, and
polls DescribeErasure on the three brokers (a millisecond apart) until each replica's erased offset
reaches its erasable offset (the base offset of the batch holding the new start). The time runs from
sending the DeleteRecords to the last replica's answer saying so; a poll round on three brokers takes
one to two milliseconds, which bounds the resolution. Prints p50/p99 in ms of that, and of the
DeleteRecords answer alone. Kafka has no erasure to compare with.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.peers import percentile
from protocol.errors import ErrorCode
from tests.broker.data_wire import WireClient, batch, delete_records, produce
from tests.cluster.three_brokers import leader_of, new_topic, three_brokers
from tests.support.erasure import GIB, describe_erasure
from tests.support.zookeeper import ZooKeeperServer

RECORD = b"e" * 1024
PER_BATCH = 100


def erased_everywhere(clients: list[WireClient], topic: str, offset: int) -> bool:
    for client in clients:
        _, found = describe_erasure(client, topic)
        if found.error_code != ErrorCode.NONE or found.log_start_offset < offset \
                or found.erased_offset < found.erasable_offset:
            return False
    return True


def measure(brokers, rounds: int, mib: int) -> tuple[list[float], list[float]]:
    topic = new_topic(brokers, prefix="erasure-bench", configs={"segment.bytes": GIB, "erasure.max.delay.ms": "0"})
    leader = leader_of(brokers, topic)
    clients = [WireClient(b.port) for b in brokers.values()]
    took, answered = [], []
    end = 0
    try:
        with WireClient(leader.port, timeout=60) as producer:
            for _ in range(rounds):
                first = end
                for _ in range(mib * 1024 // PER_BATCH):
                    answer = produce(producer, topic, 0, batch([RECORD] * PER_BATCH), acks=-1)
                    assert answer.error_code == ErrorCode.NONE, answer
                    end = answer.base_offset + PER_BATCH
                middle = (first + end) // 2 + PER_BATCH // 2  # inside a batch: that batch stays whole
                began = time.perf_counter()
                deleted = delete_records(producer, topic, 0, middle, timeout_ms=30_000)
                assert deleted.error_code == ErrorCode.NONE, deleted
                answered.append((time.perf_counter() - began) * 1e3)
                while not erased_everywhere(clients, topic, middle):
                    time.sleep(0.001)  # a busy poll would take the CPU the three brokers share
                took.append((time.perf_counter() - began) * 1e3)
    finally:
        for client in clients:
            client.close()
    return took, answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--mb", type=int, default=4, help="MiB produced per round (default 4)")
    parser.add_argument("--dir", help="where the brokers' data goes (default: a temporary directory)")
    args = parser.parse_args()
    rounds = 20 if args.quick else 100
    root = Path(tempfile.mkdtemp(prefix="ebb-bench-erasure-", dir=args.dir))
    print(f"{os.cpu_count()} cpus, Python {sys.version.split()[0]}")
    print(f"DeleteRecords to erased on three replicas, RF=3, segment.bytes=1 GiB, erasure.max.delay.ms=0, "
          f"{args.mb} MiB produced per round ({root})")
    try:
        with ZooKeeperServer(root / "zookeeper") as zk, \
                three_brokers(zk.connect, root / "ebb", {"auto.leader.rebalance.enable": "false"}) as brokers:
            took, answered = measure(brokers, rounds, args.mb)
        print(f"  DeleteRecords answered (every replica's start moved)   p50 {percentile(answered, 0.5):7.1f} ms   "
              f"p99 {percentile(answered, 0.99):7.1f} ms")
        print(f"  erased on the three replicas                          p50 {percentile(took, 0.5):7.1f} ms   "
              f"p99 {percentile(took, 0.99):7.1f} ms   max {max(took):7.1f} ms   ({len(took)} rounds, about "
              f"{args.mb / 2:g} MiB rewritten per replica per round)", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
