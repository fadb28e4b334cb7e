"""One DeleteRecords request over many partitions: every start offset moves first, then one durable
checkpoint write covers them all (bench/delete_records.py measures it); each partition still gets its
own answer, and every deletion survives a crash."""

import signal

import pytest

from protocol.errors import ErrorCode
from tests.broker.data_wire import WireClient, batch, create_topic, delete_records_request, list_offsets, produce
from tests.support.broker_process import BrokerProcess

PARTITIONS = 60


@pytest.mark.parametrize("version, leader_only", [(2, False), (3, False), (3, True)])
def test_many_partitions_in_one_request_are_durable(tmp_path, version, leader_only):
    with BrokerProcess(tmp_path) as process:
        with WireClient(process.port) as c:
            create_topic(c, "wide", PARTITIONS)
            create_topic(c, "other", 2)
            for p in range(PARTITIONS):
                produce(c, "wide", p, batch([b"a", b"b", b"c", b"d"]))
            produce(c, "other", 0, batch([b"a", b"b"]))
            wanted = {p: 1 + p % 4 for p in range(PARTITIONS)}
            request = delete_records_request({"wide": wanted, "other": {0: 5, 1: 0, 7: 1}}, leader_only=leader_only)
            reply = c.request(request, version)
            results = {(t.name, p.partition_index): p for t in reply.topics for p in t.partitions}
            for p, offset in wanted.items():
                assert (results["wide", p].error_code, results["wide", p].low_watermark) == (ErrorCode.NONE, offset)
            assert results["other", 0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE  # above the high watermark
            assert (results["other", 1].error_code, results["other", 1].low_watermark) == (ErrorCode.NONE, 0)
            assert results["other", 7].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        process.restart(signal.SIGKILL)
        with WireClient(process.port) as c:
            assert {p: list_offsets(c, "wide", p, -2).offset for p in range(PARTITIONS)} == wanted
            assert list_offsets(c, "other", 0, -2).offset == 0
