"""Transactions (KIP-98, KIP-447, KIP-890): the coordinator, its state log and the marker channel."""

from .coordinator import ProducerIdAndEpoch, TransactionCoordinator, TransactionListing
from .metadata import TransactionMetadata, TransactionState

__all__ = ["ProducerIdAndEpoch", "TransactionCoordinator", "TransactionListing", "TransactionMetadata",
           "TransactionState"]
