"""The `ebb` command's protocol tools, run as a real process."""

import json
import subprocess
import sys
from pathlib import Path

GOLDEN = Path(__file__).parents[1] / "protocol" / "golden"


def ebb(*args):
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True)


def test_apis_lists_delete_records_v3():
    out = ebb("apis")
    assert out.returncode == 0
    assert any(line.split()[:4] == ["21", "DeleteRecords", "versions", "0-3"] for line in out.stdout.splitlines())


def test_decode_a_captured_delete_records_request():
    out = ebb("decode", str(next(GOLDEN.glob("kafka-python/*DeleteRecords*request.bin"))))
    assert out.returncode == 0, out.stderr
    decoded = json.loads(out.stdout)
    assert decoded["header"]["request_api_key"] == 21
    assert decoded["body"] == {"topics": [{"name": "golden-kp", "partitions": [{"partition_index": 0, "offset": 1}]}],
                               "timeout_ms": 7998, "leader_only": False}


def test_decode_reports_bad_input_by_name(tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x00\x15\x00\x02\x00\x00\x00\x01\xff")
    out = ebb("decode", str(bad))
    assert out.returncode == 1 and "INVALID_REQUEST" in out.stderr and "malformed" in out.stderr
    missing = ebb("decode", str(tmp_path / "nope.bin"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    response = ebb("decode", "--response", str(bad))
    assert response.returncode == 2 and "--api-key" in response.stderr
