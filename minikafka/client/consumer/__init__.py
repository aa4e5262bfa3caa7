"""minikafka's consumer (Java's ``KafkaConsumer``) on Trio: groups, fetch sessions, lag metrics.

See :mod:`.consumer` for :class:`KafkaConsumer`, :mod:`.fetcher` for the
fetcher and its bounded chunk queue, :mod:`.coordinator` for the classic group
protocol, :mod:`.consumer_group_coordinator` and :mod:`.membership_manager` for
KIP-848's consumer group protocol (``group_protocol="consumer"``),
:mod:`.assignors` for the range and round-robin assignors, :mod:`.listener`
for rebalance callbacks.
"""

from ..fetch_session import TopicPartition
from .assignors import RangeAssignor, RoundRobinAssignor
from .config import ConsumerConfig
from .consumer import ConsumerMessage, KafkaConsumer
from .errors import CommitFailedError, ConsumerError, GroupError, NoOffsetForPartitionError
from .group_metadata import ConsumerGroupMetadata
from .listener import ConsumerRebalanceListener
from .subscription import OffsetAndMetadata

__all__ = [
    "KafkaConsumer", "ConsumerConfig", "ConsumerMessage", "TopicPartition", "OffsetAndMetadata",
    "RangeAssignor", "RoundRobinAssignor", "ConsumerError", "CommitFailedError", "GroupError",
    "NoOffsetForPartitionError", "ConsumerGroupMetadata", "ConsumerRebalanceListener",
]
