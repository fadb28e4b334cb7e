"""On a compacted topic a producer batch's keys are read once: by the leader's validator when it reads
the records anyway (recompression, timestamps), else by the log's keyless check. Either refuses a
keyless record with INVALID_RECORD."""

import uuid

import pytest

import broker.log.log as log_module
from broker.cluster.partition_state import PartitionState
from broker.log import LogConfig, LogManager, TopicPartition
from broker.log.common import InvalidRecordError
from broker.replica.partition import Partition
from protocol.errors import ErrorCode
from protocol.records import RecordBatch, build_batch
from tests.unit.test_partition_with_a_fake_host import FakeHost

TP = TopicPartition("compacted", 0)


async def compacted_leader(tmp_path, compression_type: str):
    logs = LogManager(tmp_path / "logs")
    await logs.startup(background_tasks=False)
    config = LogConfig(cleanup_policy=("compact",), compression_type=compression_type)
    log_ = await logs.get_or_create_log(TP, config=config)
    partition = Partition(FakeHost(), TP, uuid.uuid4(), [1], log_,
                          PartitionState(leader=1, leader_epoch=1, isr=(1,), controller_epoch=1))
    return logs, partition


def counting_keyless_check(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = log_module.refuse_keyless_records

    def counted(buf, positions, tp):
        calls.append(len(positions))
        return real(buf, positions, tp)
    monkeypatch.setattr(log_module, "refuse_keyless_records", counted)
    return calls


def batch(key: bytes | None) -> tuple[memoryview, RecordBatch]:
    data = build_batch([(key, b"v", [], 1)] * 3)
    return memoryview(bytearray(data)), RecordBatch(data)


@pytest.mark.parametrize("compression_type, log_reads_keys", [("gzip", False), ("producer", True)])
async def test_keys_are_read_by_one_check(tmp_path, monkeypatch, compression_type, log_reads_keys):
    calls = counting_keyless_check(monkeypatch)
    logs, partition = await compacted_leader(tmp_path, compression_type)
    try:
        assert (await partition.append_records_as_leader(*batch(b"k"), 1)).base_offset == 0
        assert bool(calls) is log_reads_keys
        with pytest.raises(InvalidRecordError) as refused:
            await partition.append_records_as_leader(*batch(None), 1)
        assert refused.value.error_code == ErrorCode.INVALID_RECORD
        assert len(refused.value.record_errors) == 3
        assert partition.log.log_end_offset == 3
    finally:
        await logs.shutdown()
