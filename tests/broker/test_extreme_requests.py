"""Well-formed requests with extreme values, every API version the broker advertises: none may make a
handler raise, an answer unencodable, or the broker worse for the next client.

The corpus (tests/support/extreme_requests.py) is valid on the wire: bounds of every integer type,
strings as long as each version carries, nulls, a few elements per array. A request may be answered
with any error code, or its connection closed where Kafka closes it (acks=0 produce failures); the
broker's log must show no unexpected exception, and afterwards a second connection's group and topic
APIs must still answer. A failure prints the log lines and the requests that caused them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import struct

import pytest

from client import BrokerConnection
from protocol.messages import ListGroupsRequest, MetadataRequest
from tests.support.broker_process import BrokerProcess
from tests.support.extreme_requests import extreme_frames

pytestmark = pytest.mark.timeout(600)

SEED = int(os.environ.get("EBB_EXTREME_SEED", "20261123"))  # another seed explores further
PER_VERSION = 30
WAIT_S = 2.0
# What a handler raising or a response failing to encode leaves in the broker's log.
UNEXPECTED = re.compile(r"handler failed|response encoding failed|Traceback|unhandled|Task exception")


async def _send(port: int, frame: bytes) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(frame)
        await writer.drain()
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), WAIT_S))[0]
        await asyncio.wait_for(reader.readexactly(size), WAIT_S)
        return "answered"
    except TimeoutError:
        return "silent"
    except (asyncio.IncompleteReadError, ConnectionError):
        return "closed"
    finally:
        writer.close()


async def test_extreme_but_well_formed_requests(tmp_path):
    with BrokerProcess(tmp_path, {"num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}) as broker:
        conn = BrokerConnection("127.0.0.1", broker.port)
        await conn.connect()
        try:
            advertised = {key: (low, high) for key, (low, high) in conn.api_versions.items()}
            frames = extreme_frames(advertised, PER_VERSION, SEED)
            outcomes: dict[str, str] = {}
            semaphore = asyncio.Semaphore(64)

            async def one(label: str, frame: bytes) -> None:
                async with semaphore:
                    outcomes[label] = await _send(broker.port, frame)

            await asyncio.gather(*(one(label, frame) for label, frame in frames))
            # The broker still serves the group and topic APIs to a client that did nothing wrong.
            for version in range(0, 5):
                groups = await conn.request(ListGroupsRequest(), version=version)
                assert groups.error_code == 0, f"ListGroups v{version} answered {groups.error_code}"
            await conn.request(MetadataRequest(topics=None), version=12)
        finally:
            await conn.close()
        assert broker.process.poll() is None
        log = broker.log_path.read_text(errors="replace")
    bad = sorted({_summary(line) for line in log.splitlines() if UNEXPECTED.search(line)})
    closed = sorted(label for label, outcome in outcomes.items() if outcome == "closed")
    assert not bad, f"{len(bad)} kinds of unexpected exception:\n" + "\n".join(bad) + \
        f"\nconnections closed by: {closed[:60]}"


def _summary(line: str) -> str:
    """api, version and the exception's last line, from one JSON log line."""
    try:
        entry = json.loads(line)
    except ValueError:
        return line[:300]
    where = [x for x in entry.get("exception", "").splitlines() if x.startswith('  File "/work')][-1:]
    last = entry.get("exception", "").strip().splitlines()[-1:] or [entry.get("event", "")]
    return f"{entry.get('api')} v{entry.get('version')}: {last[0][:200]} {''.join(where).strip()[:160]}"
