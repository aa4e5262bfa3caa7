"""KIP-932 share groups ("queues for Kafka").

* :mod:`.group`, :mod:`.coordinator`, :mod:`.assignor`: share-group membership (Kafka's ``ShareGroup``,
  ``ShareGroupMember``, the share half of ``GroupMetadataManager`` and the ``SimpleAssignor``):
  ShareGroupHeartbeat and ShareGroupDescribe.
* The share partitions (Kafka's ``SharePartition``, ``SharePartitionManager``, share sessions): ShareFetch,
  ShareAcknowledge and the share-group offsets admin APIs.
"""
