"""Transactions: the transaction coordinator and its `__transaction_state` topic.

coordinator.TransactionCoordinator   transactional ids, epochs, the state machine, timeouts
completion.TxnCompletions            after a Prepare: the markers in rounds, then the Complete state
state_log                            the topic's record layouts (Kafka's), replaying it, TxnState, TxnError
state_topic                          creating the topic on first use; which partition holds an id
markers                              writing markers: the leader's MarkerWriter, the coordinator's MarkerSender
verification                         a leader's KIP-890 check with an id's coordinator (AddPartitionsToTxn v4)
peers                                the pool of inter-broker connections markers and verification use

The partition side (open transactions, the last stable offset, the aborted index) belongs to
broker/replica/producer_state.py and broker/log/txn_index.py.
"""

from broker.txn.coordinator import TransactionCoordinator
from broker.txn.state_log import TRANSACTION_STATE_TOPIC, TxnError, TxnMetadata, TxnState

__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionCoordinator", "TxnError", "TxnMetadata", "TxnState"]
