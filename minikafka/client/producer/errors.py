"""Producer exceptions (Kafka's ``org.apache.kafka.common.errors`` subset the producer raises)."""

from __future__ import annotations

from ...protocol.errors import ErrorCode


class KafkaProducerError(Exception):
    """A record could not be delivered; ``code`` is the broker's error code when there is one
    (Kafka's ``ApiException`` family)."""

    def __init__(self, message: str, code: int | None = None, retriable: bool = False) -> None:
        super().__init__(message)
        self.code = ErrorCode(code) if code is not None else None
        self.retriable = retriable


class KafkaTimeoutError(KafkaProducerError):
    """Kafka's ``TimeoutException``: metadata not available within max.block.ms, or a batch
    expired after delivery.timeout.ms."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.REQUEST_TIMED_OUT, retriable=True)


class BufferExhaustedError(KafkaTimeoutError):
    """Kafka's ``BufferExhaustedException``: no buffer memory within max.block.ms."""


class RecordTooLargeError(KafkaProducerError):
    """Kafka's ``RecordTooLargeException``: a record larger than max.request.size or buffer.memory."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.MESSAGE_TOO_LARGE)


class ProducerClosedError(KafkaProducerError):
    """Raised by send() after close(), and for records aborted by a forced close
    (Kafka's ``IllegalStateException`` / ``KafkaException("Producer is closed forcefully.")``)."""


class IllegalStateError(KafkaProducerError):
    """Kafka's ``IllegalStateException`` from the transactional API: a call in the wrong state
    (``send`` outside a transaction, ``commit_transaction`` before ``begin_transaction``, a call
    while an earlier timed-out one must be retried, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class ProducerFencedError(KafkaProducerError):
    """Kafka's ``ProducerFencedException``: another producer with the same transactional id has
    initialized (PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for a transactional producer).  Fatal:
    the producer can only be closed."""

    def __init__(self, message: str, code: int = ErrorCode.PRODUCER_FENCED) -> None:
        super().__init__(message, code)


class TransactionalIdAuthorizationError(KafkaProducerError):
    """Kafka's ``TransactionalIdAuthorizationException`` (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Fatal."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


class TransactionAbortedError(KafkaProducerError):
    """Kafka's ``TransactionAbortedException``: a record that was never sent because its
    transaction was aborted."""

    def __init__(self, message: str = "Failing batch since transaction was aborted") -> None:
        super().__init__(message)
