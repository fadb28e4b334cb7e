"""The Fetch handler builds its per-partition answers without Struct.__init__ (hot path)."""

from broker.handlers.fetch_resolve import partition_data as _partition_data
from protocol.messages import FetchResponse


def test_fetch_partition_answers_are_complete_structs():
    assert _partition_data(3) == FetchResponse.FetchableTopicResponse.PartitionData(
        partition_index=3, high_watermark=-1, aborted_transactions=None, records=b"")


def test_fetch_answers_are_complete_structs():
    from broker.handlers.fetch_resolve import topic_response
    from broker.handlers.k01_fetch import _fetch_response

    topics = [topic_response("t", FetchResponse.FetchableTopicResponse().topic_id, [])]
    assert _fetch_response(7, topics) == FetchResponse(throttle_time_ms=0, error_code=0, session_id=7, responses=[
        FetchResponse.FetchableTopicResponse(topic="t")])
