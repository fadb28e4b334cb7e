"""ACLs in a cluster: made through one broker, enforced by every broker at once (they live in
ZooKeeper under /kafka-acl and each broker reloads them when /ebb/acl-changes moves)."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from protocol.messages import CreateAclsRequest, DeleteAclsRequest
from tests.broker.data_wire import WireClient, batch, delete_records, produce
from tests.cluster.three_brokers import NODES, leader_of, new_topic, three_brokers
from tests.support.polling import wait_for

pytestmark = pytest.mark.timeout(180)
# Everyone (User:ANONYMOUS on these PLAINTEXT listeners, the brokers included) may do what no ACL
# names, so replication needs no ACL; an ACL on the topic then binds everyone.
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}
ANY_FILTER = dict(resource_type_filter=2, pattern_type_filter=3, principal_filter=None, host_filter=None,
                  operation=1, permission_type=1)


def deletion_refused_everywhere(cluster, topic: str) -> bool:
    refused = []
    for n in NODES:  # the check comes before leadership: every broker answers it
        with WireClient(cluster[n].port) as client:
            refused.append(delete_records(client, topic, 0, 1).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return all(refused)


def test_an_acl_made_on_one_broker_holds_on_every_broker(zk_connect, tmp_path):
    with three_brokers(zk_connect, tmp_path, extra=AUTHORIZER) as cluster:
        topic = new_topic(cluster, prefix="guarded")
        leader = leader_of(cluster, topic)
        with WireClient(leader.port) as client:
            assert produce(client, topic, 0, batch([b"x"] * 5), acks=-1).error_code == ErrorCode.NONE
            assert delete_records(client, topic, 0, 1).error_code == ErrorCode.NONE  # no ACL names it yet
        deny = CreateAclsRequest.AclCreation(resource_type=2, resource_name=topic, resource_pattern_type=3,
                                             principal="User:ANONYMOUS", host="*", operation=6, permission_type=2)
        other = next(b for b in cluster.values() if b is not leader)
        with WireClient(other.port) as client:  # made through a broker that does not lead the partition
            assert client.request(CreateAclsRequest(creations=[deny]), 3).results[0].error_code == ErrorCode.NONE
        wait_for(lambda: deletion_refused_everywhere(cluster, topic), what="every broker refusing the deletion")
        with WireClient(leader.port) as client:
            gone = client.request(DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
                resource_name_filter=topic, **ANY_FILTER)]), 3)
            assert len(gone.filter_results[0].matching_acls) == 1

        def deleted_again() -> bool:
            with WireClient(leader.port) as client:
                return delete_records(client, topic, 0, 3).error_code == ErrorCode.NONE

        wait_for(deleted_again, what="the deletion allowed again once the ACL is gone")
