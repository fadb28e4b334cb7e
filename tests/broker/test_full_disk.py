"""A full log dir is a deletion problem (issue 29): a real broker process on a 64 MiB tmpfs, filled
by an idempotent acks=all librdkafka producer until the broker refuses it at log.dir.min.free.bytes.

Below the threshold the partitions stay online: Metadata, ListOffsets, Fetch, OffsetCommit,
DeleteRecords and DeleteTopics work; the deletions free the space at once (not after the topic's
60 s file.delete.delay.ms), and Produce is accepted again without a restart. A kill -9 while full
and a start on a disk with no byte free both work, and every acknowledged record that was not
deleted is read back, CRC-checked by librdkafka, byte for byte.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from tests.broker.data_wire import WireClient, batch, create_topic, fetch, list_offsets, produce, values
from tests.broker.wire_client import create_topic as wire_create_topic
from tests.broker.wire_client import metadata
from tests.support.broker_process import BrokerProcess, free_port
from tests.support.metrics_scrape import scrape, value
from tests.support.polling import wait_for
from tests.support.small_disk import fill_to_the_last_byte, free_bytes, small_filesystem

MiB = 1 << 20
DISK_SIZE = "64m"
THRESHOLD = 8 * MiB
CHECK_INTERVAL_MS = 200
VALUE_SIZE = 1000
# A deletion must free its space well before the topic's file.delete.delay.ms (60 s, the default).
FREED_WITHIN_S = 10.0

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def small_disk(tmp_path: Path):
    with small_filesystem(tmp_path / "disk", DISK_SIZE) as mount_point:
        yield mount_point


@pytest.fixture
def metrics_port() -> int:
    return free_port()


@pytest.fixture
def broker(tmp_path: Path, small_disk: Path, metrics_port: int):
    process = BrokerProcess(tmp_path / "broker", {
        "ebb.metrics.listener": f"http://127.0.0.1:{metrics_port}",
        "log.dirs": str(small_disk / "logs"),
        "log.dir.min.free.bytes": str(THRESHOLD),
        "log.dir.free.space.check.interval.ms": str(CHECK_INTERVAL_MS),
        "log.segment.bytes": str(MiB),
    })
    with process:
        yield process


def below_min_free(metrics_port: int, disk: Path) -> float | None:
    return value(scrape(f"http://127.0.0.1:{metrics_port}/metrics"), "ebb_log_dir_below_min_free",
                 log_dir=str(disk / "logs"))


def produce_until(bootstrap: str, topic: str, partitions: int, acked: dict, stop, *, message_timeout_ms: int) -> list:
    """Produce 1000-byte incompressible values with an idempotent acks=all librdkafka producer, in
    rounds of 1000, until `stop(failed deliveries)`; `acked` gets (topic, partition, offset) -> value
    for every acknowledged record. Returns the failed deliveries."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": message_timeout_ms, "retry.backoff.ms": 100})
    failures: list = []

    def delivered(error, message) -> None:
        if error is None:
            acked[(message.topic(), message.partition(), message.offset())] = message.value()
        else:
            failures.append(error)

    sequence = 0
    while not stop(failures):
        for _ in range(1000):
            producer.produce(topic, value=b"%08d" % sequence + os.urandom(VALUE_SIZE - 8),
                             partition=sequence % partitions, on_delivery=delivered)
            sequence += 1
            producer.poll(0)
        producer.flush(60)
        assert sequence < 300_000, "never told to stop"
    assert producer.flush(60) == 0
    return failures


def fill(bootstrap: str, topic: str, acked: dict, partitions: int, client: WireClient) -> int:
    """Produce until the broker refuses; returns the failed deliveries (a busy machine may time some
    out before the disk fills: the broker's refusal ends the filling)."""
    return len(produce_until(bootstrap, topic, partitions, acked, lambda failed: failed and refused(client, topic),
                             message_timeout_ms=4000))


def refused(client: WireClient, topic: str) -> bool:
    answer = produce(client, topic, 0, batch([b"x" * VALUE_SIZE]), acks=-1)
    if answer.error_code == ErrorCode.NONE:
        return False
    assert answer.error_code == ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode(answer.error_code).name
    assert "log.dir.min.free.bytes" in (answer.error_message or ""), answer.error_message
    return True


def assert_refused(client: WireClient, topic: str) -> None:
    assert refused(client, topic), "produce accepted on a dir below its threshold"


def produce_accepted(client: WireClient, topic: str) -> bool:
    return produce(client, topic, 0, batch([b"again"]), acks=-1).error_code == ErrorCode.NONE


def assert_online(client: WireClient, topic: str, partitions: int) -> None:
    """Metadata, ListOffsets and Fetch answer as on a healthy disk."""
    found = metadata(client, [topic]).topics[0]
    assert found.error_code == ErrorCode.NONE
    assert sorted((p.partition_index, p.error_code, p.leader_id) for p in found.partitions) == \
        [(p, ErrorCode.NONE, 1) for p in range(partitions)]
    for p in range(partitions):
        assert list_offsets(client, topic, p, -1).error_code == ErrorCode.NONE
        start = list_offsets(client, topic, p, -2).offset
        answer = fetch(client, topic, p, start)
        assert answer.error_code == ErrorCode.NONE and values(answer), ErrorCode(answer.error_code).name


def read_back(bootstrap: str, topic: str, partitions: int) -> dict:
    """Every record from each partition's log start to its end, through librdkafka with CRC checks."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "full-disk-reader", "check.crcs": True,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    consumer.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
    got: dict = {}
    positions = {p: -1 for p in range(partitions)}

    def done() -> bool:
        for message in consumer.consume(500, timeout=0.5):
            assert message.error() is None, message.error()
            got[(topic, message.partition(), message.offset())] = message.value()
            positions[message.partition()] = message.offset()
        return all(positions[p] + 1 >= ends[p] for p in range(partitions) if ends[p] > 0)

    wait_for(done, timeout_s=120, interval_s=0, what="reading every partition to its end")
    consumer.close()
    return got


def test_deleting_frees_a_full_disk_and_produce_comes_back(broker, small_disk, metrics_port):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    acked: dict = {}
    with WireClient(broker.port) as client:
        create_topic(client, "kept", 2)
        create_topic(client, "doomed", 1)
        assert below_min_free(metrics_port, small_disk) == 0
        assert fill(broker.bootstrap, "doomed", acked, 1, client) > 0
        assert free_bytes(small_disk) < THRESHOLD + 2 * MiB
        assert_refused(client, "kept")
        assert below_min_free(metrics_port, small_disk) == 1
        assert_online(client, "doomed", 1)

        # Committing offsets writes __consumer_offsets, which may use the headroom.
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "committer"})
        consumer.commit(offsets=[TopicPartition("doomed", 0, 5)], asynchronous=False)
        assert consumer.committed([TopicPartition("doomed", 0)], timeout=10)[0].offset == 5
        consumer.close()

        # DeleteTopics frees the whole topic at once, and produce is accepted again, no restart.
        before = free_bytes(small_disk)
        admin.delete_topics(["doomed"], operation_timeout=30)["doomed"].result(30)
        wait_for(lambda: free_bytes(small_disk) > before + 40 * MiB and not topic_dirs(small_disk, "doomed"),
                 timeout_s=FREED_WITHIN_S, what="the deleted topic's space back and its directory gone")
        wait_for(lambda: produce_accepted(client, "kept"), timeout_s=10, what="produce accepted again")
        assert below_min_free(metrics_port, small_disk) == 0

        # Full again through the topic that stays; DeleteRecords to the end of one partition frees it.
        assert fill(broker.bootstrap, "kept", acked, 2, client) > 0
        assert_refused(client, "kept")
        assert_online(client, "kept", 2)
        end = list_offsets(client, "kept", 0, -1).offset
        before = free_bytes(small_disk)
        deleted = admin.delete_records([TopicPartition("kept", 0, end)])
        [result.result(30) for result in deleted.values()]
        assert list_offsets(client, "kept", 0, -2).offset == end
        wait_for(lambda: free_bytes(small_disk) > before + 15 * MiB, timeout_s=FREED_WITHIN_S,
                 what="the deleted records' space back")
        wait_for(lambda: produce_accepted(client, "kept"), timeout_s=10, what="produce accepted again")

    wanted = {key: value for key, value in acked.items() if key[0] == "kept" and key[1] == 1}
    got = read_back(broker.bootstrap, "kept", 2)
    assert {key: got.get(key) for key in wanted} == wanted
    assert not [key for key in got if key[1] == 0 and key[2] < end]


def test_kill_and_start_on_a_full_disk(broker, small_disk):
    ballast = small_disk / "ballast"  # what an operator removes by hand later
    ballast.write_bytes(b"\0" * 16 * MiB)
    acked: dict = {}
    with WireClient(broker.port) as client:
        create_topic(client, "data", 2)
        assert fill(broker.bootstrap, "data", acked, 2, client) > 0
    filler = fill_to_the_last_byte(small_disk)

    broker.restart(signal.SIGKILL)  # an unclean stop, then a start with no byte free
    with WireClient(broker.port) as client:
        wait_for(lambda: list_offsets(client, "data", 0, -1).error_code == ErrorCode.NONE, timeout_s=30,
                 what="the partitions online after the start")
        assert_online(client, "data", 2)
        assert_refused(client, "data")
        filler.unlink()
        assert_refused(client, "data")  # back to just below the threshold
        ballast.unlink()  # space comes back: writes within one check interval, no restart
        wait_for(lambda: produce_accepted(client, "data"), timeout_s=10, what="produce accepted again")

    got = read_back(broker.bootstrap, "data", 2)
    assert {key: got.get(key) for key in acked} == acked
    assert "Traceback" not in broker.log_text()


def delete_topic(client: WireClient, name: str):
    from protocol.messages import DeleteTopicsRequest

    return client.request(DeleteTopicsRequest(topic_names=[name], timeout_ms=10_000), 5).responses[0]


def topic_dirs(disk: Path, topic: str) -> list[str]:
    return sorted(p.name for p in (disk / "logs").iterdir() if p.name.startswith(f"{topic}-"))


def test_admin_changes_on_a_disk_with_no_byte_free_answer_error_codes_and_finish_later(broker, small_disk):
    """With the headroom used up too (another program filled the disk), the metadata store cannot be
    written: CreateTopics and DeleteTopics answer KAFKA_STORAGE_ERROR on a connection that stays open,
    nothing is half done (the topic is whole, its deletion not begun), a kill -9 and a start with no
    byte free change nothing, and once there is room the same requests succeed and last."""
    with WireClient(broker.port) as client:
        # No file.delete.delay.ms: the deletion retried once the filler is gone lands before or after the
        # next free-space reading (every 200 ms), so whether it counts as urgent is up to timing; this test
        # is about the refusals and the retry, the urgent deletion has tests of its own above.
        create_topic(client, "gone", 2, {"file.delete.delay.ms": "0"})
        assert produce(client, "gone", 0, batch([b"a" * VALUE_SIZE] * 50)).error_code == ErrorCode.NONE
        filler = fill_to_the_last_byte(small_disk)

        created = wire_create_topic(client, "fresh", 1)
        assert created.error_code == ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode(created.error_code).name
        deleted = delete_topic(client, "gone")
        assert deleted.error_code == ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode(deleted.error_code).name
        assert "metadata store" in deleted.error_message
        assert metadata(client, ["gone"]).topics[0].error_code == ErrorCode.NONE  # still there, not marked

        # An unclean stop and a start with no byte free: the store holds what the clients were told
        # (the refused mark is in neither memory nor the file), and DeleteTopics is tried again.
        broker.restart(signal.SIGKILL)
    with WireClient(broker.port) as client:
        assert delete_topic(client, "gone").error_code in (ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR)
        filler.unlink()
        deleted = delete_topic(client, "gone")
        assert deleted.error_code in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), deleted.error_message
        wait_for(lambda: topic_dirs(small_disk, "gone") == [], timeout_s=FREED_WITHIN_S, what="the directories gone")
        assert wire_create_topic(client, "fresh", 1).error_code == ErrorCode.NONE
    broker.restart()
    with WireClient(broker.port) as client:
        assert metadata(client, ["gone"]).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert metadata(client, ["fresh"]).topics[0].error_code == ErrorCode.NONE
    assert topic_dirs(small_disk, "gone") == []


def test_acl_and_credential_changes_with_no_byte_free_answer_error_codes(tmp_path, small_disk):
    """The other writers of the metadata store answer a full disk with KAFKA_STORAGE_ERROR too, on a
    connection that stays open, and succeed once there is room."""
    from protocol.messages import AlterUserScramCredentialsRequest as Credentials
    from protocol.messages import CreateAclsRequest, DeleteAclsRequest

    acl = {"resource_type": 2, "resource_name": "ledger", "resource_pattern_type": 3, "principal": "User:alice",
           "host": "*", "operation": 4, "permission_type": 3}
    creation = CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(**acl)])
    deletion = DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=2, resource_name_filter="ledger", pattern_type_filter=3, principal_filter="User:alice",
        host_filter="*", operation=4, permission_type=3)])
    upsert = Credentials(deletions=[], upsertions=[Credentials.ScramCredentialUpsertion(
        name="alice", mechanism=1, iterations=4096, salt=b"salt", salted_password=b"p" * 32)])
    settings = {"log.dirs": str(small_disk / "logs"), "super.users": "User:ANONYMOUS",
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
    with BrokerProcess(tmp_path / "broker", settings) as broker, WireClient(broker.port) as client:
        filler = fill_to_the_last_byte(small_disk)
        assert client.request(creation, 3).results[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert client.request(upsert, 0).results[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        filler.unlink()
        assert client.request(creation, 3).results[0].error_code == ErrorCode.NONE
        assert client.request(upsert, 0).results[0].error_code == ErrorCode.NONE
        filler = fill_to_the_last_byte(small_disk)
        assert client.request(deletion, 3).filter_results[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
        filler.unlink()
        [removed] = client.request(deletion, 3).filter_results
        assert removed.error_code == ErrorCode.NONE and len(removed.matching_acls) == 1
    assert "handler failed" not in broker.log_text()


@contextlib.contextmanager
def unrenamable(directory: Path):
    """The directory bind-mounted onto itself: renaming it fails (EBUSY), a real I/O failure."""
    mounted = subprocess.run(["mount", "--bind", str(directory), str(directory)], capture_output=True, text=True)
    assert mounted.returncode == 0, f"this test needs root to bind-mount: {mounted.stderr.strip()}"
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def test_a_topic_deletion_that_fails_half_way_stays_marked_and_is_finished_later(tmp_path):
    """Partition 1's directory cannot be renamed: DeleteTopics answers KAFKA_STORAGE_ERROR, partition
    0 is gone, the topic stays marked; once the directory can be renamed the broker finishes the
    deletion by itself (no second request), and a start after a kill -9 finishes it too."""
    with BrokerProcess(tmp_path / "broker") as broker, WireClient(broker.port) as client:
        logs = broker.data_dir / "logs"
        for topic in ("stuck", "crashed"):
            create_topic(client, topic, 2, {"file.delete.delay.ms": "0"})
            assert produce(client, topic, 1, batch([b"kept until deleted"])).error_code == ErrorCode.NONE
        with unrenamable(logs / "stuck-1"):
            failed = delete_topic(client, "stuck")
            assert failed.error_code == ErrorCode.KAFKA_STORAGE_ERROR and "stuck-1" in failed.error_message
            wait_for(lambda: topic_dirs(broker.data_dir, "stuck") == ["stuck-1"], what="partition 0 deleted")
        wait_for(lambda: topic_dirs(broker.data_dir, "stuck") == [], timeout_s=60,
                 what="the broker finishing the deletion by itself")
        assert delete_topic(client, "stuck").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with unrenamable(logs / "crashed-1"):
            assert delete_topic(client, "crashed").error_code == ErrorCode.KAFKA_STORAGE_ERROR
            broker.stop(signal.SIGKILL)
    broker.start()
    try:
        with WireClient(broker.port) as client:
            wait_for(lambda: topic_dirs(broker.data_dir, "crashed") == [], what="the start finishing the deletion")
            for topic in ("stuck", "crashed"):
                assert metadata(client, [topic]).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                assert wire_create_topic(client, topic, 1).error_code == ErrorCode.NONE  # the name is free again
    finally:
        broker.stop()  # started again outside the `with`, which stopped only the first process
