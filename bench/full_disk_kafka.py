"""A full disk, Kafka beside Ebb: `python -m bench.full_disk_kafka` (as root: it mounts tmpfs).

Each broker gets one log dir on its own 64 MiB tmpfs, which an idempotent acks=all librdkafka
producer fills with 1,000-byte records until deliveries fail. Then, for each: is the broker still
running, does DeleteRecords (to the end of the filled partition) and DeleteTopics answer and free
space, and does the broker start again (after a kill -9) on the disk as the filling left it with
another program taking its last free byte. Kafka 4.3.1 runs from the jars tests/interop/java pins
(one KRaft node in combined mode); Ebb with `log.dir.min.free.bytes=8388608`. docs/storage.md
("A full disk") records a run.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.conftest import TARGET, build
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_node import KafkaNode
from tests.support.small_disk import fill_to_the_last_byte, free_bytes, small_filesystem

MiB = 1 << 20


def fill(bootstrap: str, topic: str) -> tuple[int, int]:
    """Produce until deliveries fail; (acknowledged, failed)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 4000})
    counts = {"acked": 0, "failed": 0}

    def delivered(error, _message) -> None:
        counts["failed" if error else "acked"] += 1

    sent = 0
    while not counts["failed"] and sent < 200_000:
        for _ in range(2000):
            producer.produce(topic, value=os.urandom(1000), on_delivery=delivered)
            producer.poll(0)
        sent += 2000
        producer.flush(30)
    return counts["acked"], counts["failed"]


def attempt(what: str, action) -> None:
    try:
        print(f"  {what}: {action()}")
    except Exception as exc:  # the point is to see how each broker fails
        lines = str(exc).splitlines()
        said = [lines[0], *[line for line in lines[1:] if "ERROR" in line or "Error:" in line][:3]] if lines else []
        print(f"  {what}: FAILED {type(exc).__name__}", *(line[:240] for line in said), sep="\n    ")


def scenario(name: str, disk: Path, bootstrap: str, alive, restart) -> None:
    print(f"{name}:")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("doomed", 1, 1), NewTopic("kept", 1, 1)]).values():
        future.result(30)
    began = time.monotonic()
    acked, failed = fill(bootstrap, "doomed")
    print(f"  filled in {time.monotonic() - began:.1f} s: {acked} records acknowledged, {failed} failed; "
          f"{free_bytes(disk)} bytes free")
    time.sleep(3)
    print(f"  running 3 s later: {alive()}")
    before = free_bytes(disk)
    deleted = admin.delete_records
    attempt("DeleteRecords doomed-0 to its end", lambda: [
        f"low watermark {f.result(15).low_watermark}" for f in deleted([TopicPartition("doomed", 0, acked)]).values()])
    attempt("DeleteTopics doomed", lambda: [f.result(20) for f in admin.delete_topics(
        ["doomed"], operation_timeout=15).values()])
    time.sleep(2)
    print(f"  freed by the deletions: {(free_bytes(disk) - before) / MiB:.1f} MiB")
    fill_to_the_last_byte(disk)
    attempt("kill -9, then start with no byte free", restart)


def main() -> None:
    build()  # the pinned Kafka jars, fetched by Maven once
    with tempfile.TemporaryDirectory(prefix="ebb-full-disk-") as root_name:
        root = Path(root_name)
        with small_filesystem(root / "kafka-disk", "64m") as disk:
            kafka = KafkaNode(root / "kafka", f"{TARGET / 'lib'}/*",
                              {"log.dirs": str(disk / "logs"), "log.segment.bytes": str(MiB)})
            with kafka:
                def restart_kafka() -> str:
                    if kafka.process is not None and kafka.process.poll() is None:
                        kafka.halt(signal.SIGKILL)
                    kafka.relaunch()
                    return "started"

                scenario("Kafka 4.3.1", disk, kafka.bootstrap, lambda: kafka.process.poll() is None, restart_kafka)
        with small_filesystem(root / "ebb-disk", "64m") as disk:
            ebb = BrokerProcess(root / "ebb", {"log.dirs": str(disk / "logs"), "log.segment.bytes": str(MiB),
                                               "log.dir.min.free.bytes": str(8 * MiB)})
            with ebb:
                def restart_ebb() -> str:
                    ebb.restart(signal.SIGKILL)
                    return "started"

                scenario("Ebb", disk, ebb.bootstrap, lambda: ebb.process.poll() is None, restart_ebb)


if __name__ == "__main__":
    main()
