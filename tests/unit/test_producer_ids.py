"""Producer ids come in blocks claimed from the store and are never handed out twice."""

import json

from broker.cluster.layout import ProducerIdBlockZNode
from broker.cluster.store import EmbeddedStore
from broker.replica.producer_ids import ProducerIdManager


async def test_ids_are_unique_across_restarts_and_brokers(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    first = ProducerIdManager(store, 1, block_size=3)
    other = ProducerIdManager(store, 2, block_size=3)
    ids = [await first.next_id() for _ in range(4)] + [await other.next_id() for _ in range(2)]
    assert ids == [0, 1, 2, 3, 6, 7]  # broker 1 took blocks 0-2 and 3-5, broker 2 then 6-8
    node = json.loads((await store.get(ProducerIdBlockZNode.PATH))[0])
    assert node == {"version": 1, "broker": 2, "block_start": "6", "block_end": "8"}
    reopened = await EmbeddedStore.open(tmp_path / "meta.json")  # a restart skips the unused rest
    assert await ProducerIdManager(reopened, 1, block_size=3).next_id() == 9
