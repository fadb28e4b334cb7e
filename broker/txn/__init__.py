"""Transactions: the transaction coordinator and its `__transaction_state` topic.

coordinator.TransactionCoordinator   transactional ids, epochs, the state machine, markers, timeouts
state_log                            the topic's record layouts (Kafka's), replaying it, TxnState

The partition side (open transactions, the last stable offset, the aborted index) belongs to
broker/replica/producer_state.py and broker/log/txn_index.py.
"""

from broker.txn.coordinator import TransactionCoordinator, TxnError
from broker.txn.state_log import TRANSACTION_STATE_TOPIC, TxnMetadata, TxnState

__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionCoordinator", "TxnError", "TxnMetadata", "TxnState"]
