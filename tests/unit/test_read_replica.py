"""The rack-aware replica selector (KIP-392, broker/replica/read_replica.py) and its setting."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.config import RACK_AWARE_SELECTOR, load_config
from broker.property_table import ConfigError
from broker.replica.partition import FollowerState
from broker.replica.read_replica import ReplicaView, preferred_read_replica, select_rack_aware

LEADER = ReplicaView(1, "a", 100, 0)


def test_no_client_rack_or_leader_in_rack_reads_the_leader() -> None:
    followers = [ReplicaView(2, "b", 100, 0)]
    assert select_rack_aware("", LEADER, followers) is None
    assert select_rack_aware("a", LEADER, followers + [ReplicaView(3, "a", 100, 0)]) is None
    assert select_rack_aware("c", LEADER, followers) is None  # nobody in the consumer's rack


def test_most_caught_up_follower_of_the_rack() -> None:
    followers = [ReplicaView(2, "b", 90, 0), ReplicaView(3, "b", 100, 50), ReplicaView(4, "b", 100, 10),
                 ReplicaView(5, "c", 100, 0)]
    assert select_rack_aware("b", LEADER, followers) == 4  # the highest log end, then caught up last
    tied = [ReplicaView(2, "b", 100, 0), ReplicaView(3, "b", 100, 0)]
    assert select_rack_aware("b", LEADER, tied) == 3  # then the highest broker id, as Kafka's comparator


def _partition(followers: list[FollowerState], isr: set[int], leader: bool = True) -> SimpleNamespace:
    return SimpleNamespace(is_leader=leader, local_id=1, log=SimpleNamespace(log_end_offset=100), isr=isr,
                           followers={f.replica_id: f for f in followers})


def test_candidates_are_in_sync_and_hold_the_offset() -> None:
    racks = {1: "a", 2: "b", 3: "b"}
    behind = FollowerState(2, log_end_offset=40, log_start_offset=0, last_caught_up_ms=1000)
    caught_up = FollowerState(3, log_end_offset=100, log_start_offset=20, last_caught_up_ms=1000)
    partition = _partition([behind, caught_up], {1, 2, 3})
    assert preferred_read_replica(partition, 50, "b", racks, 2000) == 3
    assert preferred_read_replica(partition, 30, "b", racks, 2000) == 3  # both hold it; 3 is ahead
    assert preferred_read_replica(partition, 10, "b", racks, 2000) == 2  # below 3's log start
    assert preferred_read_replica(partition, 101, "b", racks, 2000) is None  # nobody has it yet
    out_of_sync = _partition([behind, caught_up], {1, 2})
    assert preferred_read_replica(out_of_sync, 30, "b", racks, 2000) == 2
    assert preferred_read_replica(partition, 50, "b", {1: "a", 2: "b"}, 2000) is None  # 3 not alive/reachable
    assert preferred_read_replica(_partition([caught_up], {1, 3}, leader=False), 50, "b", racks, 2000) is None
    never_fetched = FollowerState(3)
    assert preferred_read_replica(_partition([never_fetched], {1, 3}), 0, "b", racks, 2000) is None


def test_selector_setting() -> None:
    assert not load_config(None, ["node.id=1"]).rack_aware_reads
    assert load_config(None, ["node.id=1", f"replica.selector.class={RACK_AWARE_SELECTOR}"]).rack_aware_reads
    with pytest.raises(ConfigError, match="replica.selector.class: 'org.example.Nearest' is not supported"):
        load_config(None, ["node.id=1", "replica.selector.class=org.example.Nearest"])
    with pytest.raises(ConfigError, match="replica.selector.class is empty"):
        load_config(None, ["node.id=1", "replica.selector.class= "])


def test_another_selector_stops_start_up(tmp_path, capsys) -> None:
    from broker.cli import main
    status = main(["broker", "--override", "node.id=1", "--override", f"log.dirs={tmp_path}",
                   "--override", "replica.selector.class=org.example.Nearest"])
    assert status == 2
    assert ("ebb broker: bad configuration: replica.selector.class: 'org.example.Nearest' is not supported: "
            f"Ebb serves only {RACK_AWARE_SELECTOR}") in capsys.readouterr().err
