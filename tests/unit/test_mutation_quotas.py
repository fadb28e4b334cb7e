"""controller_mutation_rate's arithmetic against Kafka 4.3.1's, worked by hand from its TokenBucket,
Strict- and PermissiveControllerMutationQuota and ControllerMutationQuotaManager.throttleTimeMs
(controller.quota.window.num 11, controller.quota.window.size.seconds 1: a burst of 11 x the quota),
and where the topic changes charge it."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from broker.handlers.k20_delete_topics import delete_topics
from broker.quotas.enforced import ClientQuotas
from broker.quotas.mutations import MutationQuotas, ThrottlingQuotaExceeded
from broker.quotas.rate import TokenBucket
from broker.quotas.store import Quotas
from broker.request_context import RequestContext
from broker.topic_placement import TopicError, grown_partitions
from protocol.errors import ErrorCode
from protocol.messages import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest
from tests.support.topic_manager import broker_config, embedded_topics
from tests.unit.fakes import request_of


def _quotas(client_id: str = "c", rate: float = 2.0) -> Quotas:
    return {(("client-id", client_id),): {"controller_mutation_rate": rate}}


def _manager(quotas: Quotas | None = None) -> MutationQuotas:
    manager = MutationQuotas(11, 1000)
    manager.update(_quotas() if quotas is None else quotas)
    return manager


def _create(version: int, client_id: str = "c"):
    return request_of(CreateTopicsRequest(topics=[], timeout_ms=1000), version, client_id=client_id)


def test_a_new_bucket_is_full_and_refills_at_the_quota_up_to_the_burst():
    bucket = TokenBucket()
    assert bucket.refill(2.0, 22.0, 5_000) == 22.0  # the burst: 11 windows x 1 s x 2/s
    bucket.take(30, 2.0, 22.0, 5_000)
    assert bucket.tokens == -8.0
    assert bucket.refill(2.0, 22.0, 6_500) == -5.0  # 1.5 s x 2/s
    assert bucket.refill(2.0, 22.0, 60_000) == 22.0  # never above the burst


def test_the_throttle_is_the_refill_time_back_to_zero():
    bucket = TokenBucket()
    bucket.take(30, 2.0, 22.0, 0)  # -8: 8 / 2 per s = 4 s
    assert bucket.throttle_ms(2.0, 22.0, 0) == 4000
    assert bucket.throttle_ms(2.0, 22.0, 1_001) == 2999  # -5.998 / 2 * 1000, rounded as Java
    bucket.take(0, 2.0, 22.0, 4_000)
    assert bucket.throttle_ms(2.0, 22.0, 4_000) == 0  # exactly zero is within the quota


def test_a_tiny_quota_saturates_at_the_largest_throttle():
    bucket = TokenBucket()
    bucket.take(1, 1e-310, 1e-309, 0)  # -1 / 1e-310 * 1000 is infinite: Math.round's Long.MAX_VALUE, then int32
    assert bucket.throttle_ms(1e-310, 1e-309, 0) == 2**31 - 1


def test_a_nan_quota_throttles_nobody():
    bucket = TokenBucket()
    bucket.take(100, math.nan, math.nan, 0)
    assert bucket.throttle_ms(math.nan, math.nan, 10) == 0


def test_strict_takes_a_topic_larger_than_the_burst_then_refuses_the_next():
    charge = _manager().for_request(_create(6), RequestContext())
    assert charge.strict
    charge.charge(30, now_ms=0)  # the bucket was not below zero: taken whole, down to -8
    assert charge.throttle_ms(now_ms=0) == 0  # nothing refused yet: no throttle (as Kafka)
    with pytest.raises(ThrottlingQuotaExceeded) as refused:
        charge.charge(1, now_ms=1000)  # -6 still
    assert refused.value.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert refused.value.message == "The throttling quota has been exceeded."
    assert charge.throttle_ms(now_ms=1000) == 3000
    assert charge.throttle_ms(now_ms=1500) == 2500  # less the time since, as the answer leaves later
    assert charge.throttle_ms(now_ms=9000) == 0


def test_a_refused_charge_takes_nothing():
    manager = _manager()
    charge = manager.for_request(_create(7), RequestContext())
    charge.charge(23, now_ms=0)  # -1
    with pytest.raises(ThrottlingQuotaExceeded):
        charge.charge(5, now_ms=0)
    charge.charge(1, now_ms=500)  # back at 0 after 0.5 s: the 5 refused were never taken
    assert manager.for_request(_create(7), RequestContext()).throttle_ms(now_ms=500) == 0


def test_permissive_takes_every_topic_and_throttles_for_the_last_overdraft():
    charge = _manager().for_request(_create(5), RequestContext())
    assert not charge.strict
    charge.charge(20, now_ms=0)  # 2 left: within the quota
    assert charge.throttle_ms(now_ms=0) == 0
    charge.charge(8, now_ms=0)  # -6: 3 s
    assert charge.throttle_ms(now_ms=0) == 3000
    charge.charge(2, now_ms=0)  # -8: 4 s
    assert charge.throttle_ms(now_ms=0) == 4000


@pytest.mark.parametrize(("body", "strict_since"), [
    (CreateTopicsRequest(topics=[], timeout_ms=1000), 6),
    (CreatePartitionsRequest(topics=[], timeout_ms=1000, validate_only=False), 3),
    (DeleteTopicsRequest(topic_names=[], timeout_ms=1000), 5),
])
def test_strict_from_kafkas_versions(body, strict_since):
    manager = _manager()
    for version in body.valid_versions:
        charge = manager.for_request(request_of(body, version), RequestContext())
        assert charge.strict == (version >= strict_since), version


def test_clients_under_no_quota_are_never_charged():
    manager = _manager()
    free = manager.for_request(_create(7, client_id="other"), RequestContext())
    for _ in range(10):
        free.charge(1000, now_ms=0)
    assert free.throttle_ms(now_ms=0) == 0
    off = _manager({}).for_request(_create(7), RequestContext())
    off.charge(1000, now_ms=0)
    assert off.throttle_ms(now_ms=0) == 0


def test_a_user_quota_is_one_bucket_for_all_its_client_ids():
    manager = _manager({(("user", "alice"),): {"controller_mutation_rate": 1.0}})
    alice = RequestContext(principal="User:alice")
    manager.for_request(_create(7, client_id="one"), alice).charge(12, now_ms=0)  # -1
    with pytest.raises(ThrottlingQuotaExceeded):
        manager.for_request(_create(7, client_id="two"), alice).charge(1, now_ms=0)
    manager.for_request(_create(7, client_id="two"), RequestContext(principal="User:bob")).charge(100, now_ms=0)


def test_only_controller_mutations_keep_a_token_bucket():
    """Every quota key measures its clients in sensors; only controller_mutation_rate's hold a bucket."""
    quotas = ClientQuotas(11, 1)
    keys = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
    quotas.update({(("client-id", "c"),): dict.fromkeys(keys, 1000.0)})
    for manager in (quotas.produce, quotas.fetch, quotas.requests):
        manager.record("ANONYMOUS", "c", 1.0)
    quotas.mutations.for_request(_create(7), RequestContext()).charge(1)
    for manager in (quotas.produce, quotas.fetch, quotas.requests):
        [(_, _, sensor)] = manager.sensors()
        assert not hasattr(sensor, "bucket"), manager.key
    [(_, _, sensor)] = quotas.mutations.sensors()
    assert isinstance(sensor.bucket, TokenBucket) and sensor.bucket.tokens == 10999.0


def test_the_answer_mutes_the_connection_and_counts_in_the_metrics():
    manager = _manager()
    connection = RequestContext()
    charge = manager.for_request(_create(4), connection)
    charge.charge(30)
    throttle_ms = charge.finish(connection)
    assert 3900 < throttle_ms <= 4000 and connection.throttle_ms == throttle_ms
    [(tags, rate, sensor)] = list(manager.sensors())
    assert tags == ("", "c") and rate > 0 and sensor.throttled == 1 and sensor.throttle_ms_total == throttle_ms


def test_client_quotas_hand_the_mutation_quota_its_own_windows():
    quotas = ClientQuotas(11, 1, mutation_window_num=3, mutation_window_size_seconds=2)
    quotas.update(_quotas(rate=1.0))
    charge = quotas.mutations.for_request(_create(7), RequestContext())
    charge.charge(6, now_ms=0)  # a burst of 3 x 2 s x 1/s: exactly spent
    charge.charge(1, now_ms=0)  # not below zero before it: taken, -1
    with pytest.raises(ThrottlingQuotaExceeded):
        charge.charge(1, now_ms=0)
    assert charge.throttle_ms(now_ms=0) == 1000


def test_create_partitions_charges_after_the_count_checks_and_before_the_placement():
    charged: list[int] = []
    brokers = {1: None}
    with pytest.raises(TopicError):
        grown_partitions("t", 2, 2, 1, None, brokers, charge=charged.append)  # no increase: not charged
    with pytest.raises(TopicError):  # an assignment list of the wrong length: not charged
        grown_partitions("t", 2, 4, 1, [[1]], brokers, charge=charged.append)
    assert charged == []
    with pytest.raises(TopicError):  # a replica on no registered broker: refused after the charge, as Kafka
        grown_partitions("t", 2, 3, 1, [[9]], brokers, charge=charged.append)
    assert grown_partitions("t", 2, 5, 1, None, brokers, charge=charged.append) == {2: [1], 3: [1], 4: [1]}
    assert charged == [1, 3]


async def test_a_topic_marked_for_deletion_in_a_cluster_is_unknown_to_a_second_deletion_and_not_charged(tmp_path):
    """Kafka 4.3.1 removes a deleted topic at once: a second DeleteTopics finds it unknown, charging nothing.
    A cluster's broker keeps the topic until it sees the mark (or while it moves): the mark decides."""
    config = broker_config(tmp_path)
    charged: list[int] = []
    async with embedded_topics(tmp_path, controlled_deletion=True) as (topics, _):
        await topics.create("t", 2, 1)
        assert await topics.delete("t", charge=charged.append) is False  # marked, left to the controller
        marked = topics.get("t")
        assert marked is not None and charged == [2]
        with pytest.raises(TopicError) as refused:
            await topics.delete("t", charge=charged.append)
        assert refused.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert charged == [2]
        # The handler's answers, by name and by id, under a quota the second deletion would have gone past
        topic_id = marked.topic_id
        broker = SimpleNamespace(config=config, topics=topics, authorizer=None, cluster=None,
                                 quotas=SimpleNamespace(mutations=_manager()))
        connection = RequestContext()
        by_name = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name="t")], timeout_ms=1000)
        by_id = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(topic_id=topic_id)],
                                    timeout_ms=1000)
        for request, error in ((by_name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (by_id, ErrorCode.UNKNOWN_TOPIC_ID)):
            answer = await delete_topics(broker, request_of(request, 6), connection)
            assert [(r.error_code, r.topic_id) for r in answer.responses] == [(error, topic_id)], answer
            assert answer.throttle_time_ms == 0
        # nothing taken from the bucket (a new one is full: refilled to the burst, 22, on its first look)
        assert all(sensor.bucket.tokens >= 22.0 for _, _, sensor in broker.quotas.mutations.sensors())

