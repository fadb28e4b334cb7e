"""Kafka's delete-records offset JSON: what parses, and that each bad input names its problem."""

import pytest

from client.offsets_file import OffsetsFileError, dump_offsets_json, parse_offsets_json
from client.types import TopicPartition


def test_kafka_format():
    text = '{"partitions":[{"topic":"t","partition":0,"offset":3},{"topic":"t","partition":1,"offset":-1}],"version":1}'
    assert parse_offsets_json(text) == {TopicPartition("t", 0): 3, ("t", 1): -1}


def test_version_defaults_to_1_and_round_trips():
    offsets = parse_offsets_json('{"partitions":[{"topic":"a","partition":2,"offset":0}]}')
    assert offsets == {("a", 2): 0}
    assert parse_offsets_json(dump_offsets_json(offsets)) == offsets


@pytest.mark.parametrize(("text", "problem"), [
    ("{", "not valid JSON"),
    ("[]", "top level must be an object"),
    ('{"version":2,"partitions":[]}', "unsupported \"version\" 2"),
    ('{"version":true,"partitions":[]}', "unsupported \"version\""),
    ('{"version":1}', "missing \"partitions\""),
    ('{"partitions":[]}', "nothing to delete"),
    ('{"partitions":[3]}', "partitions[0] must be an object"),
    ('{"partitions":[{"partition":0,"offset":1}]}', "\"topic\" must be a non-empty string"),
    ('{"partitions":[{"topic":"","partition":0,"offset":1}]}', "\"topic\" must be a non-empty string"),
    ('{"partitions":[{"topic":"t","partition":"0","offset":1}]}', "\"partition\" must be an integer"),
    ('{"partitions":[{"topic":"t","partition":0,"offset":1.5}]}', "\"offset\" must be an integer"),
    ('{"partitions":[{"topic":"t","partition":0,"offset":true}]}', "\"offset\" must be an integer"),
    ('{"partitions":[{"topic":"t","partition":0}]}', "\"offset\" must be an integer, not null"),
    ('{"partitions":[{"topic":"t","partition":-1,"offset":1}]}', "partition -1 is negative"),
    ('{"partitions":[{"topic":"t","partition":0,"offset":-2}]}', "offset -2 is negative"),
    ('{"partitions":[{"topic":"t","partition":0,"offset":1},{"topic":"t","partition":0,"offset":2}]}',
     "partitions[1]: t-0 appears more than once"),
])
def test_bad_input_names_the_problem(text, problem):
    with pytest.raises(OffsetsFileError) as info:
        parse_offsets_json(text)
    assert problem in str(info.value)
    assert isinstance(info.value, ValueError)
