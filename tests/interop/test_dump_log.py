"""Kafka's own DumpLogSegments (kafka-dump-log, kafka-tools 4.3.1) reading Ebb's segment files: a topic
created with compression.type=gzip and written by the console producer with lz4 holds gzip batches,
valid to Kafka's reader, with the lines as sent; `__transaction_state` of a transactions version 2
producer, decoded by its transaction log decoder."""

from __future__ import annotations

import json
import subprocess
import time

from protocol.messages import EndTxnRequest
from protocol.records import build_batch
from tests.broker.data_wire import WireClient, create_topic, init_producer_id, produce

PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
TOPICS = "org.apache.kafka.tools.TopicCommand"
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
LINES = [f"key-{i}:value {i}" for i in range(20)]


def test_batches_recompressed_to_the_topic_codec_are_what_kafka_reads(java, broker):
    created = java.tool(broker.bootstrap, TOPICS, "--create", "--topic", "dumped", "--partitions", "1",
                        "--config", "compression.type=gzip")
    assert created.returncode == 0, created.stderr[-2000:]
    command = ["java", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
               java.classpath, PRODUCER, "--bootstrap-server", broker.bootstrap, "--topic", "dumped",
               "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
               "--producer-property", "compression.type=lz4", "--producer-property", "linger.ms=50"]
    produced = subprocess.run(command, input="\n".join(LINES) + "\n", capture_output=True, text=True, timeout=120)
    assert produced.returncode == 0, produced.stderr[-2000:]
    segment = broker.data_dir / "logs" / "dumped-0" / "00000000000000000000.log"
    dumped = java.run(DUMP_LOG, "--files", str(segment), "--print-data-log")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    batches = [line for line in dumped.stdout.splitlines() if line.startswith("baseOffset:")]
    assert batches, dumped.stdout[-2000:]
    assert all("compresscodec: gzip" in line and "isvalid: true" in line for line in batches), batches
    records = [line for line in dumped.stdout.splitlines() if line.lstrip().startswith("| offset:")]
    assert [line.split("key: ")[1].split(" payload: ") for line in records] == \
        [line.split(":", 1) for line in LINES]
    assert [int(line.split("offset: ")[1].split()[0]) for line in records] == list(range(len(LINES)))


def test_transactions_version_2_state_records_decode_as_kafkas(java, broker):
    """`__transaction_state` written for a transactions version 2 producer (Produce v12 adding the
    partition, EndTxn v5 bumping the epoch) is value version 1, which Kafka's transaction log decoder
    prints field by field, with the client's transaction version and the bumped epochs."""
    with WireClient(broker.port) as client:
        create_topic(client, "dumped-tv2")
        ids = init_producer_id(client, transactional_id="dump-tv2")
        batch = build_batch([(None, b"v", [], 1)], producer_id=ids.producer_id, producer_epoch=ids.producer_epoch,
                            base_sequence=0, is_transactional=True)
        assert produce(client, "dumped-tv2", 0, batch, version=12, transactional_id="dump-tv2").error_code == 0
        ended = client.request(EndTxnRequest(transactional_id="dump-tv2", producer_id=ids.producer_id,
                                             producer_epoch=ids.producer_epoch, committed=True), 5)
        assert (ended.error_code, ended.producer_epoch) == (0, ids.producer_epoch + 1)
    segments = [s for s in broker.data_dir.glob("logs/__transaction_state-*/00000000000000000000.log")
                if s.stat().st_size]
    assert len(segments) == 1, segments
    values: list[dict] = []
    deadline = time.monotonic() + 30  # CompleteCommit follows the answer, once the marker is written
    while len(values) < 4 and time.monotonic() < deadline:
        dumped = java.run(DUMP_LOG, "--files", str(segments[0]), "--transaction-log-decoder")
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        values = [json.loads(line.split(" payload: ", 1)[1]) for line in dumped.stdout.splitlines()
                  if " payload: " in line]
    states = [(v["version"], v["data"]["transactionStatus"], v["data"]["producerEpoch"]) for v in values]
    epoch = ids.producer_epoch
    assert states == [("1", 0, epoch), ("1", 1, epoch), ("1", 2, epoch + 1), ("1", 4, epoch + 1)], dumped.stdout
    assert [v["data"].get("clientTransactionVersion", 0) for v in values] == [0, 2, 2, 2]  # 0: the default, unprinted
    assert values[1]["data"]["transactionPartitions"] == [{"topic": "dumped-tv2", "partitionIds": [0]}]
    assert values[0]["data"]["transactionPartitions"] is None  # Empty: null, as Kafka writes it
