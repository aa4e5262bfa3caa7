"""minikafka's producer: Kafka's KafkaProducer / RecordAccumulator / BufferPool / Sender on Trio.

Modules: :mod:`.config` (ProducerConfig), :mod:`.partitioner` (murmur2, sticky partitioner),
:mod:`.buffer_pool` (BufferPool), :mod:`.batch` (ProducerBatch, futures), :mod:`.accumulator`
(RecordAccumulator), :mod:`.transaction_manager` (idempotence and transactions; its requests in
:mod:`.txn_handlers`, its states in :mod:`.txn_state`), :mod:`.sender` (Sender),
:mod:`.metrics` (Java metric names), :mod:`.producer` (KafkaProducer).
"""

from .batch import FutureRecordMetadata, RecordMetadata
from .buffer_pool import BufferPool
from .config import ProducerConfig
from .errors import (BufferExhaustedError, IllegalStateError, KafkaProducerError, KafkaTimeoutError,
                     ProducerClosedError, ProducerFencedError, RecordTooLargeError, TransactionAbortedError,
                     TransactionalIdAuthorizationError)
from .partitioner import BuiltInPartitioner, murmur2, partition_for_key, to_positive
from .producer import KafkaProducer
from .txn_state import TxnState

__all__ = [
    "KafkaProducer", "ProducerConfig", "RecordMetadata", "FutureRecordMetadata", "BufferPool",
    "KafkaProducerError", "KafkaTimeoutError", "BufferExhaustedError", "RecordTooLargeError",
    "ProducerClosedError", "murmur2", "to_positive", "partition_for_key", "BuiltInPartitioner",
    "IllegalStateError", "ProducerFencedError", "TransactionalIdAuthorizationError", "TransactionAbortedError",
    "TxnState",
]
