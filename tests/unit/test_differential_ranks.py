"""The judge's node-for-node comparison (tests/differential/runner.py `by_rank`): two clusters with
different node ids compare equal exactly when their placements name the same nodes by rank."""

from tests.differential.runner import by_rank, differences, normalise


def _partition(leader: int, replicas: list[int], isr: list[int]) -> dict:
    return {"partition_index": 0, "leader_id": leader, "replica_nodes": replicas, "isr_nodes": isr,
            "offline_replicas": [], "controller_id": 9}


def _judged(answer: dict, nodes: list[int]) -> dict:
    return normalise(by_rank(answer, {node: rank for rank, node in enumerate(sorted(nodes))}))


def test_the_same_placement_by_rank_compares_equal():
    ours = _judged(_partition(2, [2, 3, 1], [3, 1, 2]), [1, 2, 3])
    theirs = _judged(_partition(5, [5, 6, 4], [4, 5, 6]), [4, 5, 6])
    assert ours == theirs
    assert ours["replica_nodes"] == [1, 2, 0] and ours["isr_nodes"] == [0, 1, 2]  # order kept; ISR a set
    assert ours["controller_id"] == "<node>"  # not placed by the scenario: still hidden


def test_another_order_or_leader_differs():
    ours = _judged(_partition(2, [2, 3, 1], [1, 2, 3]), [1, 2, 3])
    reordered = _judged(_partition(4, [5, 4, 6], [4, 5, 6]), [4, 5, 6])
    differing = {path for path, _, _ in differences(ours, reordered)}
    assert differing == {"leader_id", "replica_nodes[1]", "replica_nodes[2]"}


def test_a_node_no_cluster_member_has_stays_visible():
    assert _judged(_partition(1, [1, 99], [1]), [1, 2, 3])["replica_nodes"] == [0, 99]
