"""Does a broker that runs for long hold on to what its clients left behind? `python -m bench.soak
[--minutes N] [--sample-s S]`.

One Ebb broker (its defaults, data on disk, retention checked every second) is driven through rounds
of what a busy cluster's clients do, each with new client connections: create a topic, produce keyed
records with an idempotent producer, read them back in a consumer group that commits and leaves, trim
the topic with DeleteRecords, delete the group and the topic; a transactional producer commits one
transaction and aborts another; a long-lived compacted topic takes updates to the same keys. Every
`--sample-s` seconds the broker's resident memory, open file descriptors and threads are read from
/proc. The report compares the second quarter of the samples with the last (the first is the warm-up):
what grows with the number of rounds (not with the data kept, which retention and deletion bound) is
what an operator would see grow over months.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.peers import Ebb

RECORDS = 2_000
PARTITIONS = 3
COMPACTED = "soak-compacted"


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_kinds(pid: int) -> dict[str, int]:
    """Open descriptors by kind: sockets, pipes and the like by their type, files by their suffix."""
    kinds: dict[str, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if ":" in target and not target.startswith("/"):
            kind = target.split(":", 1)[0]  # socket, pipe, anon_inode
        elif target.endswith(".log"):  # a segment: counted per topic
            directory = Path(target).parent.name
            kind = ("segments of deleted topics (removed after file.delete.delay.ms)"
                    if directory.endswith("-delete") else "segments of " + directory.rsplit("-", 1)[0])
        else:
            kind = Path(target).suffix or target
        kinds[kind] = kinds.get(kind, 0) + 1
    return dict(sorted(kinds.items()))


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def _done(futures: dict) -> None:
    for future in futures.values():
        future.result()


def one_round(bootstrap: str, number: int) -> None:
    topic = f"soak-{number}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _done(admin.create_topics([NewTopic(topic, PARTITIONS, 1)]))
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(topic, key=f"k{i % 100}".encode(), value=os.urandom(200))
        producer.produce(COMPACTED, key=f"k{i % 50}".encode(), value=os.urandom(100))
    assert producer.flush(30) == 0, "records left unsent"

    group = f"soak-group-{number}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < RECORDS and time.monotonic() < deadline:
        for message in consumer.consume(500, 1.0):
            if message.error() is None:
                seen += 1
            elif message.error().code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(message.error())
    assert seen == RECORDS, f"read {seen} of {RECORDS}"
    consumer.commit(asynchronous=False)
    consumer.close()

    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"soak-txn-{number % 7}"})
    transactional.init_transactions(30)
    for commit in (True, False):
        transactional.begin_transaction()
        for i in range(50):
            transactional.produce(topic, key=b"t", value=str(i).encode())
        if not commit:
            # The records reach the log before the abort, so the broker aborts a real transaction (else
            # librdkafka mostly ends it locally), and no AddPartitionsToTxn is still unanswered when
            # abort_transaction starts: librdkafka then sends EndTxn even where the coordinator refused the add
            # (CONCURRENT_TRANSACTIONS, the commit still completing), and the abort of a completed commit is
            # INVALID_TXN_STATE, a fatal error, from Kafka 4.3.1 as from Ebb (confluentinc/librdkafka#4849).
            assert transactional.flush(30) == 0, "transactional records left unsent"
        transactional.commit_transaction(30) if commit else transactional.abort_transaction(30)

    half = [TopicPartition(topic, p, RECORDS // PARTITIONS // 2) for p in range(PARTITIONS)]
    _done(admin.delete_records(half))
    _done(admin.delete_consumer_groups([group]))
    _done(admin.delete_topics([topic]))


def sample(broker: Ebb, started: float, rounds: int) -> dict:
    return {"s": time.monotonic() - started, "rounds": rounds, "rss_mib": broker.rss_mib(),
            "fds": open_fds(broker.pid), "threads": threads(broker.pid), "cpu_s": broker.cpu_seconds()}


def report(samples: list[dict]) -> None:
    """The second quarter of the samples against the last: the first is the warm-up (the internal topics'
    partitions opened as groups and transactional ids land on them, the first producer ids remembered)."""
    quarter = max(1, len(samples) // 4)
    early, last = samples[quarter:2 * quarter] or samples[:quarter], samples[-quarter:]
    rounds = statistics.mean(s["rounds"] for s in last) - statistics.mean(s["rounds"] for s in early)
    print(f"\n{samples[-1]['rounds']} rounds in {samples[-1]['s']:.0f} s; second quarter against last quarter of "
          f"{len(samples)} samples ({rounds:.0f} rounds apart; the first quarter is the warm-up):")
    for key, unit in (("rss_mib", "MiB"), ("fds", "descriptors"), ("threads", "threads")):
        before = statistics.mean(s[key] for s in early)
        after = statistics.mean(s[key] for s in last)
        per_100 = (after - before) / rounds * 100 if rounds else 0.0
        print(f"  {key:8} {before:9.1f} -> {after:9.1f} {unit}  ({per_100:+.2f} per 100 rounds; "
              f"max {max(s[key] for s in samples):.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--sample-s", type=float, default=15.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ebb-soak-") as root:
        overrides = {"log.retention.check.interval.ms": "1000", "log.segment.bytes": "1048576",
                     "log.cleaner.backoff.ms": "1000", "transactional.id.expiration.ms": "60000"}
        with Ebb(Path(root), overrides) as broker:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            _done(admin.create_topics([NewTopic(COMPACTED, 1, 1, config={
                "cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01"})]))
            started = time.monotonic()
            samples = [sample(broker, started, 0)]
            print(f"Ebb pid {broker.pid}, {args.minutes} minutes; run id {uuid.uuid4().hex[:8]}")
            rounds = 0
            next_sample = started + args.sample_s
            while time.monotonic() - started < args.minutes * 60:
                one_round(broker.bootstrap, rounds)
                rounds += 1
                if time.monotonic() >= next_sample:
                    samples.append(sample(broker, started, rounds))
                    s = samples[-1]
                    print(f"{s['s']:7.0f} s  {rounds:6} rounds  rss {s['rss_mib']:7.1f} MiB  fds {s['fds']:5}  "
                          f"threads {s['threads']:3}  cpu {s['cpu_s']:7.1f} s", flush=True)
                    next_sample += args.sample_s
            report(samples)
            print(f"  descriptors at the end by kind: {fd_kinds(broker.pid)}")


if __name__ == "__main__":
    main()
